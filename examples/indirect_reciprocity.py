"""Indirect reciprocity: who pays for refusing defectors under each reputation norm?

python examples/indirect_reciprocity.py
"""

import scenarios

for norm in ("image-scoring", "standing", "stern-judging"):
    res = scenarios.run(
        "indirect-reciprocity",
        seed=1,
        replicates=4,
        write=False,
        strategies="disc:6,allc:2,alld:2",
        norm=norm,
        b=1.0,
        c=0.3,
        population=100,
        encounters=300,
        average_from=50,
    )
    m = res.summary["metrics"]
    pays = "  ".join(f"{s} {m['payoff.' + s]['mean']:.3f}" for s in ("disc", "allc", "alld"))
    print(f"{norm:>14}: cooperation {m['cooperation_rate']['mean']:.3f}  payoff per round: {pays}")
