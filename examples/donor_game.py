"""The donor game of Vallinder and Hughes (2024): resources per agent as generations evolve.

    python examples/donor_game.py

With LLM agents (the paper's setting), e.g. 12 agents, 10 generations:
    scenarios.run("donor-game", agents="llm", llm="openai/gpt-4o-mini")
"""

import os

import scenarios

SMALL = os.environ.get("SOCIETY_EXAMPLE_SMALL") == "1"  # a tiny run (tests/test_examples.py)

for agents, share in (("rules", 0.0), ("rules", 0.5), ("learned", None)):
    params = {"give_fraction": share} if share is not None else {}
    res = scenarios.run(
        "donor-game", seed=1, replicates=1 if SMALL else 3, write=False, agents=agents,
        generations=2 if SMALL else 5, **params,
    )  # fmt: skip
    m = res.summary["metrics"]
    label = f"{agents}" + (f" giving {share:.0%}" if share is not None else "")
    print(
        f"{label:<16} mean resources {m['mean_resources']['mean']:6.2f}  "
        f"donated share {m['donation_fraction']['mean']:.2f}"
    )
