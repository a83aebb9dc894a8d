"""Cooperation on networks: the b/c > k rule of death-birth updating, in a few lines.

    python examples/network_game.py
"""

import scenarios

for b in (2.0, 8.0):  # below and above k = 4
    res = scenarios.run(
        "network-game", seed=1, replicates=4, write=False,
        graph="random-regular", agents=2000, degree=4, game="donation", b=b, c=1.0,
        update="death-birth", selection=0.1, steps=300, average_from=200,
    )
    m = res.summary["metrics"]["cooperator_fraction"]
    print(f"b/c = {b:g}: cooperators {m['mean']:.3f}  95% CI [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]")
