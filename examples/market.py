"""A posted-price market with one Sybil operator: fraud with and without Sybil re-entry.

Rule firms (cost-plus, undercut, adaptive) compete; one operator runs 3 fraudulent
identities. Ratings expose them; re-entering with fresh identities keeps the fraud going.
Run: .venv/bin/python examples/market.py
"""

import os

import scenarios

SMALL = os.environ.get("SOCIETY_EXAMPLE_SMALL") == "1"  # a tiny run (tests/test_examples.py)

for reentry in (None, 0.5):
    res = scenarios.run(
        "market", seed=1, replicates=1 if SMALL else 3, write=False, agents="rules", sybil=1,
        reentry_rating=reentry, steps=5 if SMALL else 30,
    )  # fmt: skip
    print(f"reentry_rating={reentry}:")
    print(res.headline().to_string(index=False))
