"""LLM replies as events: skill-society with 1e5 learned agents and 16 LLM agents against a
TestServer that answers every call after 200 ms (issue 13's target).

    .venv/bin/python benchmarks/bench_llm_latency.py            # 1e5 + 16 agents, 50 moments
    .venv/bin/python benchmarks/bench_llm_latency.py --quick    # 1e4 + 16 agents, 20 moments

Wall times, same process, compiled code warm (each configuration runs once before it is
timed), as ratios to the bound ``moments x latency + numeric alone``:

- numeric alone: the 1e5 learned agents without LLM agents;
- llm_latency=0: every moment waits for its LLM replies (the default);
- llm_latency=k: an LLM attempt is a request in flight; its reply arrives as an event k
  moments later, and numeric moments go on meanwhile.

An LLM attempt is a solve call and, for the agents that distil, a second call: with 200 ms
per call an attempt takes about 400 ms, so k=2 is what keeps the LLM agents' pace within
50 x 200 ms. The target: the event-driven run within 1.5x of the bound.
"""

from __future__ import annotations

import argparse
import json
import time

import scenarios
from scenarios.skill_society.prompts import DISTIL_SYSTEM
from society.llm.testserver import TestServer

LATENCY = 0.2
LLM_AGENTS = 16


def reply(body: dict) -> str:
    """A solver that never knows the answer and writes a short note when asked to distil."""
    if body["messages"][0]["content"].startswith(DISTIL_SYSTEM[:30]):
        return json.dumps({"note": "no rule found"})
    return json.dumps({"answer": "unknown"})


def seconds(n: int, moments: int, api_base: str | None, **kw) -> tuple[float, str]:
    llm = {"llm": "openai/test-model", "api_base": api_base} if api_base else {}
    agents = dict(agents="mixed", split=f"learned:{n},llm:{LLM_AGENTS}", population=n + LLM_AGENTS)
    if not api_base:
        agents = dict(agents="learned", population=n)
    t = time.perf_counter()
    res = scenarios.run(
        "skill-society", seed=1, write=False, steps=moments, generations=1, eval_every=moments,
        llm_eval_tasks=1, graph="random-regular", degree=4, **agents, **llm, **kw,
    )  # fmt: skip
    return time.perf_counter() - t, res.summary["status"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n, moments = (10_000, 20) if args.quick else (100_000, 50)
    srv = TestServer(reply=reply, latency=LATENCY).start_in_thread()
    try:
        seconds(n, moments, None)  # compile
        numeric, _ = seconds(n, moments, None)
        bound = moments * LATENCY + numeric
        print(
            f"N={n} learned + {LLM_AGENTS} llm, {moments} moments, {LATENCY * 1e3:.0f} ms per call"
        )
        print(
            f"numeric alone {numeric:.2f} s; bound = {moments} x {LATENCY} s + numeric = {bound:.2f} s"
        )
        for k in (0, 1, 2):
            seconds(n, moments, srv.url + "/v1", llm_latency=k)  # warm (cache files are per run)
            wall, status = seconds(n, moments, srv.url + "/v1", llm_latency=k)
            print(f"llm_latency={k}: {wall:.2f} s ({status}), {wall / bound:.2f} x the bound")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
