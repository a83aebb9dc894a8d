"""Cooperation on networks: the b/c > k rule of death-birth updating, in a few lines.

python examples/network_game.py
"""

import os

import scenarios

SMALL = os.environ.get("SOCIETY_EXAMPLE_SMALL") == "1"  # a tiny run (tests/test_examples.py)

for b in (2.0, 8.0):  # below and above k = 4
    res = scenarios.run(
        "network-game", seed=1, replicates=1 if SMALL else 4, write=False, graph="random-regular",
        population=200 if SMALL else 2000, degree=4, game="donation", b=b, c=1.0, update="death-birth",
        selection=0.1, steps=20 if SMALL else 300, average_from=10 if SMALL else 200,
    )  # fmt: skip
    m = res.summary["metrics"]["cooperator_fraction"]
    print(
        f"b/c = {b:g}: cooperators {m['mean']:.3f}  95% CI [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]"
    )
