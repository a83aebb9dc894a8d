"""Indirect reciprocity: who pays for refusing defectors under each reputation norm?

python examples/indirect_reciprocity.py
"""

import os

import scenarios

SMALL = os.environ.get("SOCIETY_EXAMPLE_SMALL") == "1"  # a tiny run (tests/test_examples.py)

for norm in ("image-scoring", "standing", "stern-judging"):
    res = scenarios.run(
        "indirect-reciprocity",
        seed=1,
        replicates=1 if SMALL else 4,
        write=False,
        strategies="disc:6,allc:2,alld:2",
        norm=norm,
        b=1.0,
        c=0.3,
        population=100,
        steps=30 if SMALL else 300,
        average_from=10 if SMALL else 50,
    )
    m = res.summary["metrics"]
    pays = "  ".join(f"{s} {m['payoff.' + s]['mean']:.3f}" for s in ("disc", "allc", "alld"))
    print(f"{norm:>14}: cooperation {m['cooperation_rate']['mean']:.3f}  payoff per round: {pays}")
