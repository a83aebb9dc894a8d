"""skill-society in a few lines: does sharing artifacts over a small world beat isolation on
held-out tasks, at the same experience budget? (learned agents, no LLM, about a minute)"""

import os

import scenarios

SMALL = os.environ.get("SOCIETY_EXAMPLE_SMALL") == "1"  # a tiny run (tests/test_examples.py)

for sharing in ("none", "neighbours"):
    res = scenarios.run(
        "skill-society", seed=1, replicates=1 if SMALL else 4, write=False, agents="learned",
        population=50 if SMALL else 500, sharing=sharing, generations=1 if SMALL else 2,
        steps=4 if SMALL else 20, eval_every=2 if SMALL else 10,
    )  # fmt: skip
    m = res.summary["metrics"]
    print(f"{sharing:>10}: held-out gain {m['heldout_gain']['mean']:.3f} "
          f"{m['heldout_gain']['ci95']}, reuse {m['artifact_reuse_rate']['mean']:.2f}")  # fmt: skip
