"""The public goods game on a graph, with punishment and reward, on the model contract.

A round: groups are drawn (``groups=random``, the world holds the coming round's) or fixed
(``neighbourhood``); every agent chooses the share of its endowment to contribute -> earnings
from the group pots (:mod:`dynamics`). With punishment or reward on, a round is two steps (a
period of 2): in the second every agent, having seen its mates' contributions, chooses one
number, its sanction intensity x in [0, 1]: ``x * max_points`` points to each mate, weighted
by its type (punishers: each mate's shortfall from the group mean, rewarders: each share at or
above it; learned and LLM agents: punishment to each mate below the mean, reward to the
others) -> sanctions applied. Learned agents learn both choices from the round's final
earnings (REINFORCE, one episode a round); LLM agents answer in tokens, then in points.

An agent left alone in a round (random groups where every neighbour's group is full, the one
left over of a complete graph when N mod group_size = 1; an isolated node under neighbourhood
groups) sits the round out: it keeps its endowment, is not asked, does not learn, and is left
out of that round's means.

Recorded per round (time = round), as means over the agents who played:
``contribution_rate`` and ``welfare`` (label ``kind``: all, and each kind when mixed),
``contribution_by_strategy`` and ``payoff_by_strategy`` of rule types (label ``strategy``),
``punishment_rate`` / ``reward_rate`` when on, and ``grouped_share``. Headline: their means
over the rounds.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from scenarios.public_goods import prompts
from scenarios.public_goods.config import STRATEGIES, PublicGoodsConfig
from scenarios.public_goods.dynamics import (
    draw,
    group_payoffs,
    neighbourhood_payoffs,
    peer_values,
    sanction,
)
from sim_core.errors import ConfigError
from sim_core.graph import Neighbours, neighbour_sum
from sim_core.rng import inverse
from society.cohorts.rules import labels as rule_labels
from society.cohorts.rules import mixture
from society.fields import KINDS
from society.study import Continuous, Study
from society.topology import Topology, topology_of

# Random groups and the sanction stage need an (agents x max degree) neighbour table.
MAX_TABLE_ENTRIES = 50_000_000
# A member counts as below the group mean when short of it by more than this share.
TOLERANCE = 1e-6
# An agent "punished" (or "rewarded") in a round when it assigned at least this many points
# in all: one point, rounded (learned agents' intensities are never exactly 0).
RATE_POINTS = 0.5
PUNISHER, REWARDER = STRATEGIES.index("punisher"), STRATEGIES.index("rewarder")
LABELS = (*STRATEGIES, "learned", "llm")  # an agent's label: its rule type, or its kind
ROWS = ("all", *KINDS)  # the kind label of contribution_rate and welfare
# The headline's running means: contribution_rate and welfare by ROWS, then the rest.
TRACKED = (*(f"{m}.{k}" for m in ("contribution_rate", "welfare") for k in ROWS),
           "grouped_share", "punishment_rate", "reward_rate")  # fmt: skip
HISTORY = ("round", "grouped", "mine", "project", "fine", "bonus", "spent", "earned", "others")


@cache
def _graph(topo: Topology) -> Neighbours:
    """The graph as a neighbour table (user input: a table too large is a config error)."""
    n, e = topo.n, topo.edges
    src, dst = np.concatenate([e[:, 0], e[:, 1]]), np.concatenate([e[:, 1], e[:, 0]])
    width = int(np.bincount(src, minlength=n).max(initial=0))
    if n * width > MAX_TABLE_ENTRIES:
        raise ConfigError(
            f"graph '{topo.name}' needs a population x max-degree table of {n * width:.3g} "
            f"entries (limit {MAX_TABLE_ENTRIES:.0e}); use a sparser graph"
        )
    if width == 0:
        raise ConfigError(f"graph '{topo.name}' has no edges: nobody can form a group")
    with jax.ensure_compile_time_eval():  # built once, maybe while tracing
        return Neighbours.from_edges(src, dst, n, table=True)


def graph(p: PublicGoodsConfig) -> Neighbours | None:
    """The graph groups are drawn from; None when well mixed (complete graph, random groups:
    a permutation per round, no graph needed)."""
    n = p.population
    if p.graph == "complete" and p.groups == "random":
        return None
    if p.graph == "complete" and n * (n - 1) > MAX_TABLE_ENTRIES:
        raise ConfigError(
            f"graph=complete with groups=neighbourhood needs a population x (population - 1) "
            f"table of {n * (n - 1):.3g} entries at population={n} (limit {MAX_TABLE_ENTRIES:.0e}, "
            f"population <= {int(MAX_TABLE_ENTRIES**0.5)}); use groups=random (stranger matching, "
            "any population) or a sparser graph"
        )
    return _graph(topology_of(p))


def mix(p: PublicGoodsConfig) -> tuple[dict[str, int], dict[str, int]]:
    """(rule types present with their counts, kinds present with theirs)."""
    return mixture(p.agents, p.split, p.strategies, p.population)


def period(p: PublicGoodsConfig) -> int:
    return 2 if p.punishment or p.reward else 1


def labels(w: dict, p: PublicGoodsConfig) -> jax.Array:
    """Each agent's label, an index into LABELS."""
    return rule_labels(w, p.agents, mix(p)[0], LABELS)


def groups(w: dict, p: PublicGoodsConfig) -> tuple[jax.Array, jax.Array, jax.Array]:
    """This round's (peers (N, M) padded with N, members of one's group, private return per
    token contributed)."""
    if p.groups == "neighbourhood":
        nb = graph(p)
        inv = 1.0 / (nb.degree.astype(jnp.float32) + 1.0)  # i's share of each group it is in
        return nb.table, 1.0 / inv, p.r * inv * (inv + neighbour_sum(nb, inv))
    members = ((w["peers"] < p.population).sum(1) + 1).astype(jnp.float32)
    return w["peers"], members, p.r / members


def _draw(key: jax.Array, p: PublicGoodsConfig) -> dict:
    """The coming round's random groups (none: neighbourhood groups are fixed)."""
    if p.groups == "neighbourhood":
        return {}
    nb = graph(p)
    return {"peers": draw(key, p.population, None if nb is None else nb.table, p.group_size)[1]}


def _mean(x: jax.Array, masks: jax.Array) -> jax.Array:
    """Means of ``x`` over each mask (rows of ``masks``); NaN for an empty one."""
    count = masks.sum(-1)
    return jnp.where(count > 0, (masks * x).sum(-1) / jnp.maximum(count, 1), jnp.nan)


def rule(o: dict, p: PublicGoodsConfig) -> jax.Array:
    """A rule agent's share (conditional cooperators: slope x the others' last mean, start in
    its first round) or, in a round's second step, its sanction intensity (punishers and
    rewarders: all of it)."""
    s = o["strategy"]
    follow = jnp.clip(p.conditional_slope * o["others_last"], 0.0, 1.0)
    give = jnp.stack([jnp.where(o["first"], p.conditional_start, follow), 0.0, 1.0, 1.0, 1.0])
    return jnp.where(o["stage"] > 0, (s == PUNISHER) | (s == REWARDER), give[jnp.minimum(s, 4)])


class PublicGoods(Study):
    """Public goods games on graphs with punishment and reward (Fehr & Gächter 2000)."""

    Params = PublicGoodsConfig
    name = "public-goods"
    unit = "round"
    labels = {"kind": str, "strategy": str, "agent": int, "cohort": str}
    # a share of the endowment, then a sanction intensity; LLM agents answer in tokens, then
    # points (step converts them)
    actions = Continuous(0.0, 1.0, rule=rule, fallback=0.0, clip=False)
    features = ("others_last", "my_last", "stage", "my_contribution", "group_mean", "my_payoff")
    system = staticmethod(lambda p: prompts.system_prompt(
        neighbourhood=p.groups == "neighbourhood", group_size=p.group_size, r=p.r,
        endowment=p.endowment, rounds=p.steps, punishment=p.punishment, reward=p.reward,
        punishment_cost=p.punishment_cost, punishment_fine=p.punishment_fine,
        reward_cost=p.reward_cost, reward_benefit=p.reward_benefit, max_points=p.max_points))  # fmt: skip
    reply = staticmethod(lambda p: prompts.Decision if period(p) == 2 else prompts.Contribution)
    reporters = {
        k: (lambda w, out, k=k: w["report"][k])
        for k in ("contribution_rate", "welfare", "contribution_by_strategy",
                  "payoff_by_strategy", "grouped_share", "punishment_rate", "reward_rate")
    }  # fmt: skip
    axes = {"contribution_rate": ("kind",), "welfare": ("kind",),
            "contribution_by_strategy": ("strategy",), "payoff_by_strategy": ("strategy",)}  # fmt: skip
    axis_labels = {"kind": ROWS, "strategy": STRATEGIES}  # NaN (absent, off): no rows
    sparse = ("punishment_rate", "reward_rate")
    headline = ()  # summary: means over the rounds
    period = staticmethod(period)

    def length(p):
        return p.steps * period(p)

    def init(key, p):
        n, (k_order, k_groups) = p.population, jax.random.split(key)
        order = jax.random.permutation(k_order, n).astype(jnp.int32)
        place = inverse(order)
        z, nan = jnp.zeros(n, jnp.float32), jnp.float32(jnp.nan)
        w = {"t": jnp.int32(0), "kind": jnp.zeros(n, jnp.int32), "order": order, "place": place,
             "share": z, "pay1": z, "last_share": z, "last_others": z, "played": z > 0,
             "report": {k: jnp.full(len(ROWS) if k in ("contribution_rate", "welfare") else
                                    len(STRATEGIES) if "_by_" in k else (), nan)
                        for k in PublicGoods.reporters},
             "sums": jnp.zeros(len(TRACKED)), "counts": jnp.zeros(len(TRACKED)),
             **_draw(k_groups, p)}  # fmt: skip
        if "llm" in mix(p)[1]:  # what LLM agents are told of their last rounds
            m, k = groups(w, p)[0].shape[1], max(p.llm_memory, 1)
            w["history"] = {h: jnp.zeros((n, k, m) if h == "others" else (n, k)) for h in HISTORY}
        return w

    def observe(w, p):
        """Rule and learned agents' fields; learned agents' of the other step are 0. What LLM
        agents are told only when there are some."""
        n, stage = p.population, w["t"] % 2 if period(p) == 2 else 0
        peers, members, mpcr = groups(w, p)
        mates, mask = peer_values(peers, w["share"])
        mean = (w["share"] + mates.sum(1)) / (1 + mask.sum(1))
        first, second = (lambda x: jnp.where(stage == 0, x, 0.0)), (lambda x: jnp.where(stage > 0, x, 0.0))  # fmt: skip
        obs = {"strategy": labels(w, p), "first": ~w["played"], "stage": jnp.full(n, stage, jnp.float32),
               "others_last": first(w["last_others"]), "my_last": first(w["last_share"]),
               "my_contribution": second(w["share"]), "group_mean": second(mean),
               "my_payoff": second(w["pay1"] / p.endowment)}  # fmt: skip
        if "llm" in mix(p)[1]:
            obs |= {"round": jnp.full(n, w["t"] // period(p) + 1), "group_n": members, "mpcr": mpcr,
                    "mates": jnp.where(mask, mates * p.endowment, jnp.nan),
                    **{f"h_{k}": v for k, v in w["history"].items()}}  # fmt: skip
        return obs

    def due(w, p):
        return (groups(w, p)[0] < p.population).any(1)  # alone: sits the round out

    def step(key, w, act, p):
        e, n, peers = p.endowment, p.population, groups(w, p)[0]
        llm = w["kind"] == KINDS.index("llm")
        a = jnp.nan_to_num(jnp.asarray(act, jnp.float32))  # NaN: an LLM call failed, 0

        def contribute(w):
            played = (peers < n).any(1)
            share = jnp.where(played, jnp.clip(jnp.where(llm, a / e, a), 0.0, 1.0), 0.0)
            if p.groups == "neighbourhood":  # earnings from the group pots
                return {**w, "share": share, "pay1": neighbourhood_payoffs(graph(p), share * e, e, p.r)}  # fmt: skip
            return {**w, "share": share, "pay1": group_payoffs(peers, share * e, e, p.r)}

        def settle(w):  # the sanctions (when on), then the round's report and the next groups
            share, pay = w["share"], w["pay1"]
            mates, mask = peer_values(peers, share)
            none = jnp.zeros(mask.shape, jnp.float32)
            final, pun, rew = pay, none, none
            if period(p) == 2:
                mean = ((share + mates.sum(1)) / (1 + mask.sum(1)))[:, None]
                below = mask & (mates < mean - TOLERANCE)
                x = jnp.clip(jnp.where(llm, a / p.max_points, a), 0.0, 1.0)[:, None] * p.max_points
                s = labels(w, p)[:, None]
                mine = s >= len(STRATEGIES)  # learned and LLM agents: one intensity for all
                pun = x * jnp.where(
                    s == PUNISHER, jnp.where(below, mean - mates, 0.0), mine & below
                )
                rew = x * jnp.where(s == REWARDER, jnp.where(mask & ~below, mates, 0.0), mine & mask & ~below)  # fmt: skip
                final, pun, rew = sanction(p, peers, pay, pun * p.punishment, rew * p.reward)
            return _settle(key, w, final, pun, rew, p)

        if period(p) == 1:
            return settle(contribute(w))
        first = lambda w: ({**contribute(w), "t": w["t"] + 1}, {"earned": jnp.zeros(n)})  # noqa: E731
        return jax.lax.cond(w["t"] % 2 == 0, first, settle, w)

    reward = "earned"

    def done(w, p):
        return w["t"] % period(p) == 0  # a round ended: learned agents learn its earnings

    def summary(w, p):
        m = w["sums"] / jnp.where(w["counts"] > 0, w["counts"], jnp.nan)
        names = ["contribution_rate.all", "welfare.all", "grouped_share"]
        names += [f"{x}_rate" for x in ("punishment", "reward") if getattr(p, x)]
        names += [f"{x}.{k}" for k in mix(p)[1] for x in ("contribution_rate", "welfare")] if p.agents == "mixed" else []  # fmt: skip
        return {k.removesuffix(".all"): m[TRACKED.index(k)] for k in names}

    def render(fields, p):
        e = p.endowment
        if fields["stage"] > 0:
            return prompts.sanction_prompt(
                round_no=int(fields["round"]), rounds=p.steps, mine=e * fields["my_contribution"],
                others=[x for x in fields["mates"] if x == x], earned=e * fields["my_payoff"],
                punishment=p.punishment, reward=p.reward, max_points=p.max_points)  # fmt: skip
        rows = []
        for i, r in enumerate(fields["h_round"]):
            h = {k: fields[f"h_{k}"][i] for k in HISTORY}
            if r > 0 and p.llm_memory:
                rows.append({**h, "round": int(r), "sat_out": not h["grouped"],
                             "others": [x for x in h["others"] if x == x]})  # fmt: skip
        return prompts.contribution_prompt(
            round_no=int(fields["round"]), rounds=p.steps, endowment=e, members=int(fields["group_n"]),
            mpcr=float(fields["mpcr"]), neighbourhood=p.groups == "neighbourhood",
            history=prompts.history_text(rows), field="amount" if period(p) == 2 else "contribution")  # fmt: skip


def _settle(key: jax.Array, w: dict, final: jax.Array, pun: jax.Array, rew: jax.Array, p: Any):
    """The end of a round: its report and running means, what agents remember of it (who sat
    out keeps what it saw when it last played), and the coming round's groups."""
    e, n, share, pay = p.endowment, p.population, w["share"], w["pay1"]
    peers = groups(w, p)[0]
    played = (peers < n).any(1)
    mates, mask = peer_values(peers, share)
    others = jnp.where(mask.any(1), _mean(mates, mask), share)  # the others' mean (alone: own)
    label = labels(w, p)
    mixed = p.agents == "mixed"  # one kind: the row "all" only
    by_kind = jnp.stack([played, *(played & (w["kind"] == k) & mixed for k in range(len(KINDS)))])
    by_type = played & (label[None] == jnp.arange(len(STRATEGIES))[:, None])
    rate = [_mean(x.sum(1) >= RATE_POINTS, played) if on else jnp.float32(jnp.nan)
            for x, on in ((pun, p.punishment), (rew, p.reward))]  # fmt: skip
    report = {"contribution_rate": _mean(share, by_kind), "welfare": _mean(final, by_kind),
              "contribution_by_strategy": _mean(share, by_type), "payoff_by_strategy": _mean(final, by_type),
              "grouped_share": played.mean(dtype=jnp.float32), "punishment_rate": rate[0], "reward_rate": rate[1]}  # fmt: skip
    tracked = jnp.concatenate([report["contribution_rate"], report["welfare"], jnp.stack([report["grouped_share"], *rate])])  # fmt: skip
    w = {**w, "t": w["t"] + 1, "report": report, "played": w["played"] | played,
         "sums": w["sums"] + jnp.nan_to_num(tracked), "counts": w["counts"] + ~jnp.isnan(tracked),
         "last_share": jnp.where(played, share, w["last_share"]),
         "last_others": jnp.where(played, others, w["last_others"]), **_draw(key, p)}  # fmt: skip
    if "history" in w:

        def got(points):  # noqa: ANN001, ANN202 - what each agent received
            return jnp.zeros(n + 1).at[peers].add(points)[:n]

        now = {"round": jnp.full(n, w["t"] // period(p)), "grouped": played, "mine": share * e,
               "project": pay - e + share * e, "fine": p.punishment_fine * got(pun),
               "bonus": p.reward_benefit * got(rew), "earned": final,
               "spent": p.punishment_cost * pun.sum(1) + p.reward_cost * rew.sum(1),
               "others": jnp.where(mask, mates * e, jnp.nan)}  # fmt: skip
        w["history"] = {k: jnp.concatenate([h[:, 1:], now[k][:, None].astype(h.dtype)], 1)
                        for k, h in w["history"].items()}  # fmt: skip
    return w, {"earned": final}
