"""Division of labour: threshold reinforcement turns identical agents into specialists.

python examples/division_of_labour.py
"""

import os

import scenarios

SMALL = os.environ.get("SOCIETY_EXAMPLE_SMALL") == "1"  # a tiny run (tests/test_examples.py)

for reinforcement in (False, True):
    res = scenarios.run(
        "division-of-labour", seed=1, replicates=1 if SMALL else 4, write=False, population=100, tasks=2,
        steps=100 if SMALL else 2000, average_from=50 if SMALL else 1000, reinforcement=reinforcement,
    )  # fmt: skip
    m = res.summary["metrics"]
    print(
        f"reinforcement={reinforcement!s:5}: DOL index I/H(task) {m['dol_index']['mean']:.3f} "
        f"(95% CI {m['dol_index']['ci95'][0]:.3f}-{m['dol_index']['ci95'][1]:.3f}), "
        f"task entropy {m['task_entropy']['mean']:.3f}"
    )
