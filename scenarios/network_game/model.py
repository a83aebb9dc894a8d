"""The network game scenario: evolutionary games on graphs, driven by the scheduler."""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from scenarios.network_game.config import NetworkGameConfig
from scenarios.network_game.dynamics import Rules, advance, initial_strategies
from sim_core.errors import ConfigError
from sim_core.experiment import RunContext, Scenario
from sim_core.graph import Neighbours
from sim_core.scheduler import Scheduler
from sim_core.sharding import agent_mesh, shard_agents
from society.topology import Topology, make_topology

# Generations per compiled chunk: about this many agent-updates, so that dispatch costs
# nothing next to the work, within bounds; fixation runs check every FIXATION_CHUNK.
CHUNK_WORK = 2_000_000
CHUNK_BOUNDS = (20, 1000)
FIXATION_CHUNK = 50
# Asynchronous updating needs an (agents x max degree) neighbour table; refuse beyond this.
MAX_TABLE_ENTRIES = 50_000_000


def build_topology(cfg: NetworkGameConfig, seed: int) -> Topology:
    """The graph by name, or read from the edge-list file ``cfg.graph`` names."""
    return make_topology(
        cfg.graph,
        cfg.population,
        degree=cfg.degree,
        neighbourhood=cfg.neighbourhood,
        periodic=cfg.periodic,
        rewire=cfg.rewire,
        seed=seed,
    )


def compile_neighbours(topo: Topology, synchronous: bool) -> Neighbours:
    """Compiled adjacency; undirected graphs take the lean builder (no int64 sort keys, no
    concatenated edge copies: ~0.9 GB peak at 1e7 agents, degree 4, instead of ~3.5 GB)."""
    e = topo.edges
    table: bool | None = None
    if not synchronous:
        max_deg = int(topo.degree.max(initial=0))
        if topo.n * max_deg > MAX_TABLE_ENTRIES:
            raise ValueError(
                f"asynchronous updating on this graph needs an agents x max-degree table of "
                f"{topo.n * max_deg:.3g} entries (limit {MAX_TABLE_ENTRIES:.0e}); use synchronous=true"
            )
        table = True
    if not topo.directed:
        return Neighbours.from_undirected(e[:, 0], e[:, 1], topo.n, table=table)
    src, dst = np.concatenate([e[:, 0], e[:, 1]]), np.concatenate([e[:, 1], e[:, 0]])
    return Neighbours.from_edges(src, dst, topo.n, table=table)


def chunk_length(cfg: NetworkGameConfig) -> int:
    if cfg.until == "fixation":
        return min(cfg.steps, FIXATION_CHUNK)
    lo, hi = CHUNK_BOUNDS
    return min(cfg.steps, max(lo, min(hi, CHUNK_WORK // cfg.population)))


def rules_of(cfg: NetworkGameConfig) -> Rules:
    R, S, T, P = cfg.matrix()
    return Rules(
        R=R,
        S=S,
        T=T,
        P=P,
        self_interaction=cfg.self_interaction,
        average=cfg.payoff == "average",
        update=cfg.update,
        selection=cfg.selection,
        beta=cfg.beta,
        synchronous=cfg.is_synchronous(),
    )


class NetworkGame(Scenario):
    """Evolutionary 2-strategy games on a graph, replicates vmapped in one computation."""

    name = "network-game"
    Config = NetworkGameConfig
    headline = ("cooperator_fraction",)
    labels = {"cohort": str}
    checkpointing = True

    def run(self, cfg: NetworkGameConfig, ctx: RunContext) -> Mapping[str, np.ndarray]:
        graph_seed = int(ctx.rng.numpy("graph").integers(2**31))
        try:  # graph parameters are user input: their errors are config errors
            topo = build_topology(cfg, graph_seed)
            if topo.n != cfg.population:
                raise ValueError(
                    f"graph '{cfg.graph}' has {topo.n} nodes but agents={cfg.population}"
                )
            nb = compile_neighbours(topo, cfg.is_synchronous() or cfg.cohort_path())
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        del topo  # the edge arrays (24 B per edge) are not needed once compiled
        mesh = agent_mesh(cfg.shard)  # None on one device: nothing changes
        nb = shard_agents(nb, mesh)
        self._mesh = mesh
        if cfg.cohort_path():
            from scenarios.network_game.cohorts import run_cohort_game  # imports the cohorts

            return run_cohort_game(cfg, ctx, rules_of(cfg), nb)
        rules = rules_of(cfg)
        if nb.table is not None:  # the game's kernels read only the table: drop src/dst
            nb = nb.table_only()
        n = cfg.population
        n_coop = 1 if cfg.init_cooperators == "single" else int(round(cfg.init_cooperators * n))
        frac = np.zeros(ctx.replicates)
        fixed_coop = np.zeros(ctx.replicates)
        for batch, reps in enumerate(ctx.replicate_batches()):
            done = ctx.checkpoints.finished(batch)
            if done is None:
                done = self._run_batch(cfg, ctx, rules, nb, reps, n_coop, batch)
                ctx.checkpoints.finish(batch, done)
            frac[reps], fixed_coop[reps] = done
        out = {"cooperator_fraction": frac}
        if cfg.until == "fixation":
            out["fixation_cooperators"] = fixed_coop
        return out

    def _run_batch(
        self,
        cfg,
        ctx: RunContext,
        rules: Rules,
        nb: Neighbours,
        reps: np.ndarray,
        n_coop: int,
        batch: int,
    ):
        rec = ctx.recorder
        dyn_keys = ctx.rng.keys("dynamics", reps)
        avg_from = cfg.average_from
        sim = Scheduler()
        chunk_len = chunk_length(cfg)
        # The world state is one dict of arrays and numbers: what a checkpoint saves.
        state: dict = {}

        def chunk() -> None:
            g0 = state["gen"]
            s_new, fr = advance(rules, nb, dyn_keys, state["s"], g0, cfg.steps, chunk_len)
            done = min(chunk_len, cfg.steps - g0)
            fr = np.asarray(fr)[:, :done]
            gens = np.arange(g0 + 1, g0 + done + 1)
            keep = (gens % cfg.record_every == 0) | (gens == cfg.steps)
            if keep.any():  # one vectorised call: time-major rows for every replicate
                rec.record(
                    np.repeat(gens[keep].astype(float), len(reps)),
                    "cooperator_fraction",
                    fr[:, keep].T.ravel(),
                    replicate=np.tile(reps, int(keep.sum())),
                )
            if avg_from is not None:
                use = gens >= avg_from
                state["total"] = state["total"] + fr[:, use].sum(axis=1)
                state["count"] += int(use.sum())
            state["s"], state["gen"] = s_new, g0 + done
            if state["gen"] >= cfg.steps:
                sim.stop("steps")
            elif cfg.until == "fixation" and bool(fixed(s_new).all()):
                sim.stop("fixation")

        sim.handle("chunk", chunk)
        saved = ctx.checkpoints.resume(batch, sim)
        if saved is not None:
            state.update(saved, s=jnp.asarray(saved["s"]))
        else:
            init_keys = ctx.rng.keys("init", reps)
            s = jax.vmap(lambda k: initial_strategies(k, nb.n, n_coop))(init_keys)
            s = shard_agents(s, getattr(self, "_mesh", None), axis=1)  # (replicates, agents)
            rec.record(
                0.0,
                "cooperator_fraction",
                np.asarray(s.mean(axis=1, dtype=jnp.float32)),
                replicate=reps,
            )
            state.update(s=s, gen=0, total=np.zeros(len(reps)), count=0)
            if avg_from == 0:
                state["total"] = state["total"] + np.asarray(s.mean(axis=1, dtype=jnp.float32))
                state["count"] += 1
            sim.every(float(chunk_len), chunk, name="network-game generations")
        ctx.checkpoints.attach(batch, sim, lambda: state)
        sim.run()
        s = state["s"]
        final = np.asarray(s.mean(axis=1, dtype=jnp.float32), dtype=float)
        if cfg.until == "fixation":
            g = state["gen"]
            if g % cfg.record_every and g != cfg.steps:
                rec.record(float(g), "cooperator_fraction", final, replicate=reps)
            rec.record(
                float(g), "fixation_cooperators", (final == 1.0).astype(float), replicate=reps
            )
        count = state["count"]
        value = state["total"] / count if avg_from is not None and count else final
        return value, (final == 1.0).astype(float)


def fixed(s) -> np.ndarray:
    """Replicates in which every agent plays the same strategy."""
    s = np.asarray(s)
    return (s == s[:, :1]).all(axis=1)
