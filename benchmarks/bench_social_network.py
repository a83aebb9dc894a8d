"""Social network at scale: time per step, the recommender's share of it, and peak memory.

    python benchmarks/bench_social_network.py                       # 1e5 and 1e6 rule agents
    python benchmarks/bench_social_network.py --sizes 1e4 1e5 --steps 20 --recommender interest
    python benchmarks/bench_social_network.py --sizes 1e6 --steps 4 --llm 1000   # mixed, 200 ms
    python benchmarks/bench_social_network.py --sizes 1e6 --steps 4 --llm 1000 --llm-shards 2

Each size runs in a FRESH subprocess: the study's compiled chunk of ``steps`` steps (what
``society run social-network`` runs: recommender, rule agents, step and reporters; compile
excluded, best of 2) gives seconds per step; the recommender alone (compiled, on the world
after those steps, best of 3) gives its share; then the process's peak resident set
(``resource.getrusage(...).ru_maxrss``). With ``--llm N``, instead: a whole mixed run, N LLM
agents among the rule agents (``agents=mixed``) against a local OpenAI-compatible TestServer
answering every call after 200 ms (in a process of its own), the calls made in this process
or, with ``--llm-shards K``, by K Ray actors: wall time, compile and Ray's start included, the
CPU time of the run's own process, and the LLM decisions. Absolute times depend on a shared
machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    import jax, jax.numpy as jnp, numpy as np
    from scenarios.social_network.config import SocialNetworkParams
    from scenarios.social_network.model import SocialNetwork, recommend

    n, steps, rec = int(float(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
    cfg = SocialNetworkParams(population=n, steps=steps, recommender=rec)
    study = SocialNetwork()
    keys = jax.random.split(jax.random.key(1), 1)
    world = study._compiled(cfg, "init")(keys)
    chunk = study._compiled(cfg, "chunk", steps)

    def best(f, times):
        out = []
        for _ in range(times):
            t = time.perf_counter()
            jax.block_until_ready(f())
            out.append(time.perf_counter() - t)
        return min(out)

    jax.block_until_ready(chunk(world, keys, 0))  # compile
    step_s = best(lambda: chunk(world, keys, 0), 2) / steps
    after = jax.tree_util.tree_map(lambda x: x[0], chunk(world, keys, 0)[0])
    u = jax.random.uniform(jax.random.key(2), (n, cfg.candidates))
    feed = jax.jit(lambda u, w: recommend(u, w, cfg))
    feed(u, after).block_until_ready()  # compile
    rec_s = best(lambda: feed(u, after), 3)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"population": n, "posts_kept": int(after["serial"].size),
                      "step_s": step_s, "recommender_s": rec_s, "recommender_share": rec_s / step_s,
                      "peak_rss_gib": peak / 2**30, "bytes_per_agent": peak / n}))
    """
)


MIXED = textwrap.dedent(
    """
    import json, resource, subprocess, sys, time
    import scenarios

    n, steps, rec, llm = int(float(sys.argv[1])), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    shards = int(sys.argv[5])
    srv = subprocess.Popen([sys.executable, "-m", "society.llm.testserver", "--port", "0",
                            "--latency", "0.2"], stdout=subprocess.PIPE, text=True)
    url = srv.stdout.readline().split()[-1]  # "serving on http://127.0.0.1:PORT/v1"
    try:
        t, cpu = time.perf_counter(), time.process_time()
        r = scenarios.run("social-network", seed=1, write=False, population=n, steps=steps,
                          recommender=rec, agents="mixed", split=f"rules:{n - llm},llm:{llm}",
                          llm="openai/test-model", api_base=url, llm_shards=shards or None)
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    finally:
        srv.terminate()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"population": n, "llm_agents": llm, "llm_shards": shards, "steps": steps,
                      "wall_s": wall, "main_process_cpu_s": cpu, "status": r.summary["status"],
                      "llm": r.summary["fallbacks"]["llm"], "peak_rss_gib": peak / 2**30}))
    """
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["1e5", "1e6"])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--recommender", default="popularity")
    ap.add_argument("--llm", type=int, default=0, help="LLM agents among them (a mixed run)")
    ap.add_argument("--llm-shards", type=int, default=0, help="Ray actors making the LLM calls")
    args = ap.parse_args()
    for size in args.sizes:
        child, extra = (MIXED, [str(args.llm), str(args.llm_shards)]) if args.llm else (CHILD, [])
        out = subprocess.run(
            [sys.executable, "-c", child, size, str(args.steps), args.recommender, *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
