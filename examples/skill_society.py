"""skill-society in a few lines: does sharing artifacts over a small world beat isolation on
held-out tasks, at the same experience budget? (learned agents, no LLM, about a minute)"""

import scenarios

for sharing in ("none", "neighbours"):
    res = scenarios.run(
        "skill-society", seed=1, replicates=4, write=False, agents="learned", population=500,
        sharing=sharing, generations=2, steps=20, eval_every=10,
    )  # fmt: skip
    m = res.summary["metrics"]
    print(f"{sharing:>10}: held-out gain {m['heldout_gain']['mean']:.3f} "
          f"{m['heldout_gain']['ci95']}, reuse {m['artifact_reuse_rate']['mean']:.2f}")  # fmt: skip
