"""Epidemic: the SIR final size z = 1 - exp(-R0 z), and how isolation of the sick changes it.

python examples/epidemic.py
"""

import os

import scenarios

SMALL = os.environ.get("SOCIETY_EXAMPLE_SMALL") == "1"  # a tiny run (tests/test_examples.py)

for behaviour in ("none", "isolate-when-sick", "threshold"):
    res = scenarios.run(
        "epidemic", seed=1, replicates=1 if SMALL else 4, write=False,
        population=500 if SMALL else 10_000, r0=2.5, symptomatic=0.5, behaviour=behaviour, threshold=0.005,
    )  # fmt: skip
    m = res.summary["metrics"]
    print(
        f"{behaviour:18}: attack rate {m['attack_rate']['mean']:.3f} "
        f"(95% CI {m['attack_rate']['ci95'][0]:.3f}-{m['attack_rate']['ci95'][1]:.3f}), "
        f"peak prevalence {m['peak_prevalence']['mean']:.3f} on day {m['peak_day']['mean']:.0f}, "
        f"mean contact {m['mean_contact']['mean']:.2f}"
    )
