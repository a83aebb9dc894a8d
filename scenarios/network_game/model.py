"""Evolutionary 2-strategy games on graphs, on the model contract: one step is a generation.

Plain rule agents (``agents=rules``, no ``strategies``) play the evolutionary game of
``dynamics``: strategies 1 (cooperate) or 0 (defect), updated by the rule ``update``
(synchronous, or ``population`` random sequential single-agent updates a generation);
``until=fixation`` stops a replicate once every agent plays the same strategy (checked every
50 generations). Otherwise every generation is one round: each agent chooses a cooperation
level x in [0, 1] (rule agents by their strategy from the mix ``strategies``, learned
policies, LLM agents), each earns the expected payoff of its games with its neighbours,
x_i (R n_i + S (k_i - n_i)) + (1 - x_i) (T n_i + P (k_i - n_i)) with n_i the sum of its
neighbours' x, and rule agents imitate a random neighbouring rule agent's strategy with the
Fermi probability (``beta``). The graph is built once per parameters (``graph_seed``).
"""

from __future__ import annotations

from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import BaseModel, Field

from scenarios.network_game.config import NetworkGameConfig
from scenarios.network_game.dynamics import Rules, async_generation, payoffs, sync_step
from sim_core.errors import ConfigError
from sim_core.graph import Neighbours, neighbour_mean, random_neighbour
from sim_core.sharding import AXIS, agent_mesh, shard_agents
from society.cohorts.rules import mix_counts
from society.fields import KINDS, parse_split
from society.study import Continuous, Study
from society.topology import Topology, topology_of

FEATURES = ("neighbours_last", "my_last", "my_last_payoff")
# Asynchronous updating needs an (agents x max degree) neighbour table; refuse beyond this.
MAX_TABLE_ENTRIES = 50_000_000

TEMPLATE = (
    "You play a repeated game with your {degree} neighbours in a network. Each round you choose "
    "how much to cooperate, from 0.0 (not at all) to 1.0 (fully). {rules} "
    "Round {round}. Last round you chose {my_last:.2f} and earned {my_last_payoff:.2f}; your "
    "neighbours cooperated {neighbours_last:.2f} on average. How much do you cooperate this round?"
)


class Cooperate(BaseModel):
    """An LLM agent's action: its cooperation level this round."""

    cooperate: float = Field(
        ge=0.0, le=1.0, description="0.0 = defect fully, 1.0 = cooperate fully"
    )


def game_text(p: NetworkGameConfig) -> str:
    if p.game == "donation":
        return (
            f"Cooperating fully costs you {p.c:g} per neighbour and gives each neighbour {p.b:g}; "
            "partial cooperation scales both."
        )
    R, S, T, P = p.matrix()
    return (
        f"Against each neighbour: both cooperate {R:g} each; you cooperate and they defect: you "
        f"{S:g}, they {T:g}; both defect {P:g} each (partial cooperation mixes these)."
    )


def rules_of(p: NetworkGameConfig) -> Rules:
    R, S, T, P = p.matrix()
    return Rules(R=R, S=S, T=T, P=P, self_interaction=p.self_interaction,
                 average=p.payoff == "average", update=p.update, selection=p.selection,
                 beta=p.beta, synchronous=p.is_synchronous())  # fmt: skip


def evolutionary(p: NetworkGameConfig) -> bool:
    """The plain evolutionary game (update rules on strategies 0/1), not rounds of choices."""
    return not p.cohort_path()


def mix(p: NetworkGameConfig) -> dict[str, int]:
    """Rule agents' strategies and how many of ``population`` play each (the evolutionary
    game: defectors then cooperators)."""
    if evolutionary(p):
        n, c = p.population, p.init_cooperators
        coop = 1 if c == "single" else int(round(c * n))
        return {"alld": n - coop, "allc": coop}
    return mix_counts(p.strategies or "allc:1,alld:1", p.population)


@lru_cache(maxsize=4)
def _graph(topo: Topology, table: bool, shard: int) -> Neighbours:  # noqa: ANN202
    n = topo.n
    if table and n * int(topo.degree.max(initial=0)) > MAX_TABLE_ENTRIES:
        raise ConfigError(
            f"asynchronous updating on this graph needs an agents x max-degree table "
            f"of {n * int(topo.degree.max()):.3g} entries (limit "
            f"{MAX_TABLE_ENTRIES:.0e}); use synchronous=true"
        )
    with jax.ensure_compile_time_eval():  # built once, maybe while tracing: concrete arrays
        e = topo.edges
        if topo.directed:
            e = np.concatenate([e, e[:, ::-1]])
            nb = Neighbours.from_edges(e[:, 0], e[:, 1], n, table=table or None)
        else:  # the lean builder: no int64 sort keys, no concatenated edge copies
            nb = Neighbours.from_undirected(e[:, 0], e[:, 1], n, table=table or None)
    return shard_agents(nb.table_only() if table else nb, agent_mesh(shard))


def graph(p: NetworkGameConfig) -> Neighbours:
    """The compiled graph (with the neighbour table asynchronous updating reads)."""
    return _graph(topology_of(p), evolutionary(p) and not p.is_synchronous(), p.shard)


def sharded(x: jax.Array, p: NetworkGameConfig) -> jax.Array:
    """``x`` split along its agent axis over the devices (as the graph), when sharding."""
    mesh = agent_mesh(p.shard)
    if mesh is None or x.shape[-1] % mesh.devices.size:
        return x
    spec = jax.sharding.PartitionSpec(*[None] * (x.ndim - 1), AXIS)
    return jax.lax.with_sharding_constraint(x, jax.sharding.NamedSharding(mesh, spec))


def strategy(o, p):  # noqa: ANN001, ANN201
    """A rule agent's cooperation level: its strategy applied to its observation."""
    names = list(mix(p))
    last = o.get("partner_last", 0.0)
    luck = o.get("luck", 0.0)  # a uniform draw of this round
    level = {"allc": 1.0, "alld": 0.0, "tft": last, "gtft": jnp.maximum(last, luck < 1 / 3),
             "random": luck < 0.5}  # fmt: skip
    return jnp.select([o["strategy"] == i for i in range(len(names))],
                      [jnp.asarray(level[s], jnp.float32) for s in names])  # fmt: skip


class NetworkGame(Study):
    """Evolutionary games on graphs (Nowak and May 1992; Ohtsuki et al. 2006; Santos and
    Pacheco 2005), or rounds of cooperation levels chosen by rules, learned and LLM agents."""

    Params = NetworkGameConfig
    name = "network-game"
    labels = {"cohort": str}
    actions = Continuous(0.0, 1.0, rule=strategy, fallback=0.0)
    features = FEATURES
    prompt = staticmethod(lambda p: TEMPLATE.replace("{rules}", game_text(p)))
    reply = Cooperate
    headline = ("cooperator_fraction",)
    reporters = {
        "cooperator_fraction": lambda w, out: out["x"].mean(),
        "mean_payoff": lambda w, out: out["pay"].mean(),
        "cooperation": lambda w, out: out["by_kind"],
    }
    axes = {"cooperation": ("cohort",)}
    axis_labels = {"cohort": KINDS}

    def init(key, p):
        bounds = jnp.cumsum(jnp.asarray(list(mix(p).values())))[:-1]  # agents of each strategy
        perm = jax.random.permutation(key, p.population)  # placed at random
        ids = (perm[:, None] >= bounds[None, :]).sum(1).astype(jnp.int8)
        s = sharded(ids, p)
        w = {"s": s, "t": jnp.int32(0), "total": jnp.float32(0), "count": jnp.int32(0)}
        if p.average_from == 0:  # the initial share counts
            w = {**w, "total": s.mean(dtype=jnp.float32), "count": jnp.int32(1)}
        if evolutionary(p):
            return w
        n = p.population
        return {**w, "x": jnp.full(n, 0.5), "pay": jnp.zeros(n), "luck": jnp.zeros(n),
                "kind": jnp.zeros(n, jnp.int8)}  # fmt: skip

    def observe(w, p):
        if evolutionary(p):
            return {"strategy": w["s"]}
        nb = graph(p)
        near = neighbour_mean(nb, w["x"])
        return {"neighbours_last": near, "partner_last": (near >= 0.5).astype(jnp.float32),
                "my_last": w["x"], "my_last_payoff": w["pay"], "strategy": w["s"],
                "luck": w["luck"], "round": jnp.full(p.population, w["t"] + 1),
                "degree": nb.degree}  # fmt: skip

    def step(key, w, act, p):
        rules, nb, t = rules_of(p), graph(p), w["t"] + 1
        if evolutionary(p):  # the update rule on strategies (the rule agents' actions are s)
            if rules.synchronous:  # pay: the payoffs that drove the update
                pay = payoffs(rules, nb, w["s"])  # vmapped over one: XLA's batched segment
                one = jax.vmap(partial(sync_step, rules, nb))  # ops ran 3x faster (1e5 agents)
                s = one(key[None], w["s"][None], pay[None])[0]
            else:  # pay: the payoffs after the generation's updates
                s, pay = async_generation(rules, nb, key[None], w["s"][None])
                s, pay = s[0], pay[0]
            s = sharded(s, p)
            x = s.astype(jnp.float32)
            by_kind = jnp.full(len(KINDS), jnp.nan)
            w = {**w, "s": s}
        else:  # a round: payoffs of the levels chosen, then rule agents imitate strategies
            k1, k2, k3 = jax.random.split(key, 3)
            x = jnp.clip(jnp.nan_to_num(act), 0.0, 1.0).astype(jnp.float32)
            pay = payoffs(rules, nb, x)
            j = random_neighbour(nb, k1)
            rule = w["kind"] == 0
            copy = rule & rule[j] & (j != jnp.arange(x.size))
            copy &= jax.random.uniform(k2, x.shape) < jax.nn.sigmoid(p.beta * (pay[j] - pay))
            of = w["kind"][None] == jnp.arange(len(KINDS))[:, None]
            by_kind = jnp.where(of.any(1), (of * x).sum(1) / of.sum(1), jnp.nan)
            w = {**w, "s": jnp.where(copy, w["s"][j], w["s"]), "x": x, "pay": pay,
                 "luck": jax.random.uniform(k3, x.shape)}  # fmt: skip
        avg = p.average_from is not None and t >= p.average_from
        w = {**w, "t": t, "total": w["total"] + jnp.where(avg, x.mean(), 0.0),
             "count": w["count"] + avg}  # fmt: skip
        return w, {"x": x, "pay": pay, "by_kind": by_kind}

    reward = "pay"

    def stop(w, p):
        return jnp.all(w["s"] == w["s"][0]) if p.until == "fixation" else None

    def summary(w, p):
        out = {}
        if p.average_from is not None:
            out["cooperator_fraction"] = w["total"] / jnp.maximum(w["count"], 1)
        if p.until == "fixation":
            out["fixation_cooperators"] = jnp.all(w["s"] == 1).astype(jnp.float32)
        if not evolutionary(p):
            kinds = parse_split(p.split) if p.agents == "mixed" else {p.agents: 1}
            for i, k in enumerate(KINDS):
                m = w["kind"] == i
                if kinds.get(k, 0) > 0:
                    out[f"cooperation.{k}"] = jnp.where(
                        m.any(), (w["x"] * m).sum() / m.sum(), jnp.nan
                    )
        return out

    def cohort_options(p):
        social = p.learning == "social"
        return {"learned": {"rule": p.learning, "beta": p.beta, "evolve_every": 1 if social else None,
                            "neighbours": graph(p) if social else None},
                "llm": {"memory_size": p.llm_memory}}  # fmt: skip
