"""GovSim's fishery (Piatti et al. 2024): when does a shared lake survive a 12-month season?

    python examples/commons.py

With LLM fishers (the paper's setting; communication on by default):
    scenarios.run("commons", agents="llm", llm="openai/gpt-4o-mini", replicates=5)
"""

import os

import scenarios

SMALL = os.environ.get("SOCIETY_EXAMPLE_SMALL") == "1"  # a tiny run (tests/test_examples.py)

for label, params in (
    ("sustainable rules", {"agents": "rules", "strategies": "sustainable"}),
    ("4 sustainable, 1 greedy", {"agents": "rules", "strategies": "sustainable:4,greedy:1"}),
    ("selfish learners, 30 episodes", {"agents": "learned", "episodes": 2 if SMALL else 30}),
):
    res = scenarios.run("commons", seed=1, replicates=1 if SMALL else 4, write=False, **params)
    m = res.summary["metrics"]
    print(
        f"{label:<31} survival {m['survival_time']['mean']:5.2f} months  "
        f"sustainability {m['sustainability']['mean']:.2f}  gini {m['gini_harvest']['mean']:.2f}"
    )
