"""Replicates on the cohort path: a batch's replicates step together (rows recorded once a
step, LLM calls of every replicate in flight together), against one replicate per batch
(``batch_replicates=1``).

    .venv/bin/python benchmarks/bench_replicates.py            # 8 replicates
    .venv/bin/python benchmarks/bench_replicates.py --quick    # 4 replicates

- learned: network-game, 1e3 learned agents per replicate on a random 4-regular graph, 40
  steps; best of 3 wall times each, compiled code warm (each runs once first).
- llm: the Boltzmann example study, 8 LLM agents per replicate, 5 steps, against a
  TestServer on 127.0.0.1 that answers every call after 100 ms; one timed run each.
Same process, interleaved; the figure that matters is the ratio one-by-one / batched.
"""

from __future__ import annotations

import argparse
import json
import re
import time

import scenarios
from society.llm.testserver import TestServer

LEARNED = dict(population=1000, steps=40, agents="learned", graph="random-regular", degree=4)
STUDY = "examples/boltzmann_study.py:Boltzmann"
LLM = dict(agents="llm", population=8, steps=5)


def coins_reply(body: dict) -> str:
    """Give while it has a coin (the prompts differ as the coins move)."""
    coins = int(re.search(r"You have (\d+) coins", body["messages"][1]["content"]).group(1))
    return json.dumps({"choice": "give" if coins >= 1 else "keep"})


def seconds(name: str, repeats: int, **kw) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        result = scenarios.run(name, seed=1, write=False, **kw)
        best = min(best, time.perf_counter() - t)
        assert result.summary["status"] == "completed", result.summary["status"]
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    reps = 4 if ap.parse_args().quick else 8
    print(
        f"{'case':<10} {'replicates':>10} {'one by one (s)':>15} {'batched (s)':>12} {'ratio':>6}"
    )
    for batch in (1, None):  # warm: compile both batch shapes
        seconds("network-game", 1, replicates=reps, batch_replicates=batch, **LEARNED)
    apart = seconds("network-game", 3, replicates=reps, batch_replicates=1, **LEARNED)
    together = seconds("network-game", 3, replicates=reps, **LEARNED)
    print(f"{'learned':<10} {reps:>10} {apart:>15.3f} {together:>12.3f} {apart / together:>5.1f}x")
    srv = TestServer(reply=coins_reply, latency=0.1).start_in_thread()
    try:
        kw = {"llm": "openai/test-model", "api_base": srv.url + "/v1", **LLM}
        seconds(STUDY, 1, replicates=1, **kw)  # warm
        apart = seconds(STUDY, 1, replicates=reps, batch_replicates=1, **kw)
        together = seconds(STUDY, 1, replicates=reps, **kw)
    finally:
        srv.stop()
    print(f"{'llm':<10} {reps:>10} {apart:>15.3f} {together:>12.3f} {apart / together:>5.1f}x")


if __name__ == "__main__":
    main()
