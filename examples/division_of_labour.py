"""Division of labour: threshold reinforcement turns identical agents into specialists.

python examples/division_of_labour.py
"""

import scenarios

for learning in (False, True):
    res = scenarios.run(
        "division-of-labour", seed=1, replicates=4, write=False,
        agents=100, tasks=2, steps=2000, record_from=1000, learning=learning,
    )  # fmt: skip
    m = res.summary["metrics"]
    print(
        f"learning={learning!s:5}: DOL index I/H(task) {m['dol_index']['mean']:.3f} "
        f"(95% CI {m['dol_index']['ci95'][0]:.3f}-{m['dol_index']['ci95'][1]:.3f}), "
        f"task entropy {m['task_entropy']['mean']:.3f}"
    )
