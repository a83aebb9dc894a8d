"""The public goods game of Fehr & Gächter (2000) with fixed rule types: contributions decline
over ten rounds as conditional cooperators follow the free riders, and when a fifth of the
players punish, free riding no longer out-earns conditional cooperation.

    python examples/public_goods.py

With LLM agents next to the rule baselines, e.g.:
    scenarios.run("public-goods", agents="mixed", split="rules:2,llm:1", llm="openai/gpt-4o-mini")
"""

import os

import scenarios

SMALL = os.environ.get("SOCIETY_EXAMPLE_SMALL") == "1"  # a tiny run (tests/test_examples.py)

for punishment in (False, True):
    res = scenarios.run(
        "public-goods", seed=1, replicates=1 if SMALL else 4, write=False, punishment=punishment,
        strategies="conditional:5,free-rider:3,punisher:2",
    )  # fmt: skip
    m = res.metrics
    rate = m[(m["metric"] == "contribution_rate") & (m["kind"] == "all")]
    by_round = rate.groupby("time")["value"].mean()
    pay = m[m["metric"] == "payoff_by_strategy"].groupby("strategy")["value"].mean()
    print(
        f"punishment={punishment!s:<5}  contributions by round "
        + " ".join(f"{v:.2f}" for v in by_round.to_numpy())
        + "  earnings: "
        + ", ".join(f"{s} {v:.1f}" for s, v in pay.items())
    )
