"""The public goods game on a graph, with punishment and reward, for rule, learned and LLM agents.

Each round (one scheduler moment): groups are drawn (``groups=random``) or fixed
(``neighbourhood``); every agent chooses the share of its endowment to contribute (one call per
cohort) -> earnings from the group pots (:mod:`dynamics`) -> when punishment or reward is on, a
second act stage in which every agent sees its group mates' contributions and assigns points
per mate -> sanctions applied -> every cohort learns from its agents' final earnings.

All replicates of a batch are one population (agent id = replicate * N + i) and one batch of
world arrays ``(R, N)``, so each stage is one call per cohort and one compiled kernel. With
rule agents only and no sanction stage, rounds run instead in compiled chunks of up to
``FUSE_ROUNDS`` (one scheduler moment per chunk, :func:`_rule_rounds`): the same results and
records, without a round's fixed host work.

Rule types (``strategies``) are vectorised strategy functions of a :class:`RuleCohort`.
Learned agents hold two small policies trained by REINFORCE on their round earnings: the share
to contribute (features: the others' last mean share, their own last share and earnings) and a
sanction intensity x in (0, 1), assigning ``x * max_points`` punishment points to each mate
below the group mean and reward points to each mate at or above it. LLM agents see the rules,
their own recent rounds and, in the sanction stage, their mates' contributions.

An agent left alone in a round (random groups where every neighbour's group is full, the one
left over of a complete graph when N mod group_size = 1; an isolated node under neighbourhood
groups) would face no dilemma (its contribution returns r x itself to it), so it sits the round
out: it keeps its endowment, is not asked (LLM agents are not prompted), does not learn, and is
left out of that round's means.

Recorded per round (time = round), as means over the agents who played: ``contribution_rate``
and ``welfare`` (label ``kind``: all, and each kind when mixed), ``contribution_by_strategy`` and
``payoff_by_strategy`` of rule types (label ``strategy``), ``punishment_rate`` /
``reward_rate`` when on; and ``grouped_share``, the share of agents in a group of >= 2. LLM
accounting rows (``llm_*``) carry ``replicate=-1`` (the whole run) unless per agent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from scenarios.public_goods import prompts
from scenarios.public_goods.config import PublicGoodsConfig
from scenarios.public_goods.dynamics import (
    Params,
    draw_groups,
    draw_stranger_groups,
    group_views,
    stage_one,
    stage_two,
    stranger_groups,
    stranger_orders,
)
from sim_core.errors import ConfigError
from sim_core.experiment import RunContext, Scenario
from sim_core.graph import Neighbours, neighbour_sum
from sim_core.scheduler import Scheduler
from society.cohorts import LearnedCohort, RuleCohort, parse_mix
from society.cohorts.llm import LLMCohort
from society.cohorts.rules import _decide
from society.driver import budget_reached, drive
from society.fields import KINDS
from society.llm import LLMClient, Request
from society.population import build_population, kinds_of, uses_llm
from society.topology import make_topology

CONTRIBUTION_FEATURES = ("others_last", "my_last")
SANCTION_FEATURES = ("my_contribution", "group_mean", "my_payoff")
# Random groups and the sanction stage need an (agents x max degree) neighbour table.
MAX_TABLE_ENTRIES = 50_000_000
# A member counts as below the group mean when short of it by more than this share.
TOLERANCE = 1e-6
# An agent "punished" (or "rewarded") in a round when it assigned at least this many points
# in all: one point, rounded (learned agents' intensities are never exactly 0).
RATE_POINTS = 0.5
# Round t's key of a stream, compiled once: eager key ops cost more than a round's kernels.
_fold = jax.jit(jax.random.fold_in)
# The fused path (every agent a rule agent, no sanction stage): rounds run in compiled chunks
# of up to FUSE_ROUNDS rounds (0: always one round at a time) and about FUSE_WORK agent-rounds
# (the chunk's per-round arrays stay small).
FUSE_ROUNDS = 100
FUSE_WORK = 4_000_000


# -- rule types ---------------------------------------------------------------------------------
def _everything(obs, keys, params):
    return jnp.ones(keys.shape[:1], jnp.float32)


def _nothing(obs, keys, params):
    return jnp.zeros(keys.shape[:1], jnp.float32)


def _conditional(obs, keys, params):
    """Fischbacher, Gächter & Fehr (2001): match the others' last mean (times a slope)."""
    match = jnp.clip(params["slope"] * jnp.asarray(obs["others_last"], jnp.float32), 0.0, 1.0)
    return jnp.where(jnp.asarray(obs["first"]) > 0, params["start"], match).astype(jnp.float32)


def _no_sanction(obs, keys, params):
    peers = jnp.asarray(obs["peers"], jnp.float32)
    return jnp.zeros((peers.shape[0], 2, peers.shape[1]), jnp.float32)


def _punish_below_mean(obs, keys, params):
    """Points = max_points x each mate's shortfall from the group mean (a share of e)."""
    peers = jnp.asarray(obs["peers"], jnp.float32)
    short = jnp.asarray(obs["group_mean"], jnp.float32)[:, None] - peers
    pts = jnp.where((short > TOLERANCE) & (obs["peer_mask"] > 0), params["max_points"] * short, 0.0)
    return jnp.stack([pts, jnp.zeros_like(pts)], axis=1)


def _reward_at_or_above_mean(obs, keys, params):
    """Points = max_points x the share contributed, for mates at or above the group mean."""
    peers = jnp.asarray(obs["peers"], jnp.float32)
    above = peers >= jnp.asarray(obs["group_mean"], jnp.float32)[:, None] - TOLERANCE
    pts = jnp.where(above & (obs["peer_mask"] > 0), params["max_points"] * peers, 0.0)
    return jnp.stack([jnp.zeros_like(pts), pts], axis=1)


CONTRIBUTE = {
    "conditional": _conditional,
    "free-rider": _nothing,
    "cooperator": _everything,
    "punisher": _everything,
    "rewarder": _everything,
}
SANCTION = {
    "conditional": _no_sanction,
    "free-rider": _no_sanction,
    "cooperator": _no_sanction,
    "punisher": _punish_below_mean,
    "rewarder": _reward_at_or_above_mean,
}


def targeted_points(
    x: np.ndarray, obs: Mapping[str, Any], max_points: float, punishment: bool, reward: bool
) -> np.ndarray:
    """Learned agents' sanctions from their intensity ``x``: ``x * max_points`` punishment
    points to each mate below the group mean, reward points to each at or above it."""
    peers = np.asarray(obs["peers"], np.float32)
    mask = np.asarray(obs["peer_mask"]) > 0
    mean = np.asarray(obs["group_mean"], np.float32)[:, None]
    pts = (np.asarray(x, np.float32) * max_points)[:, None]
    below = mask & (peers < mean - TOLERANCE)
    pun = np.where(below, pts, 0.0) * punishment
    rew = np.where(mask & ~below, pts, 0.0) * reward
    return np.stack([pun, rew], axis=1).astype(np.float32)


class SanctionLearnedCohort(LearnedCohort):
    """Learned agents' second stage: one intensity per agent, spread over its mates by
    :func:`targeted_points`; learning uses the intensity it drew."""

    def __init__(self, *args, max_points: float, punishment: bool, reward: bool, **kw):
        super().__init__(*args, **kw)
        self.max_points, self.punishment, self.reward = max_points, punishment, reward
        self.intensity = np.zeros(len(self), np.float32)  # the last draw of each agent

    def act(self, agents: np.ndarray, obs: Any, key: jax.Array) -> np.ndarray:
        x = np.asarray(super().act(agents, obs, key), np.float32)
        self.intensity[self.local(agents)] = x
        return targeted_points(x, obs, self.max_points, self.punishment, self.reward)

    def learn(self, agents, obs, actions, rewards, key) -> None:
        super().learn(agents, obs, self.intensity[self.local(agents)], rewards, key)


class ContributionLLMCohort(LLMCohort):
    """LLM agents' contributions: prompts rendered by ``render(agent, fields)`` from the
    numeric observation and the world's record of the agent's past rounds; answers in tokens,
    returned to the world as a share of the endowment."""

    def __init__(
        self,
        agents: np.ndarray,
        client: LLMClient,
        *,
        render: Callable[[int, Mapping[str, Any]], str],
        system_prompt: str,
        endowment: float,
    ):
        super().__init__(
            "llm",
            agents,
            client,
            schema=prompts.Contribution,
            fallback=prompts.Contribution(reason="no valid reply", contribution=0.0),
            template="",
            system_prompt=system_prompt,
            memory_size=0,  # the history comes from the world, see render
            to_action=lambda m: m.contribution,
            sample_of=lambda agent: agent,  # agents draw independently, even in one situation
        )
        self.render, self.endowment = render, endowment

    def messages(self, agent: int, pos: int, fields: Mapping[str, Any]) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.render(agent, fields)},
        ]

    def finish(self, actions: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.clip(actions / self.endowment, 0.0, 1.0)  # more than e counts as e


class SanctionLLMCohort(LLMCohort):
    """LLM agents' second stage: one request per agent listing its mates' contributions; the
    answer's lists become points per mate (missing entries 0, extra ones ignored)."""

    def __init__(
        self,
        agents: np.ndarray,
        client: LLMClient,
        *,
        render: Callable[[int, Mapping[str, Any], np.ndarray], str],
        system_prompt: str,
        punishment: bool,
        reward: bool,
    ):
        schema = prompts.sanction_schema(punishment, reward)
        empty = {k: [] for k in ("punish", "reward") if k in schema.model_fields}
        super().__init__(
            "llm",
            agents,
            client,
            schema=schema,
            fallback=schema(reason="no valid reply", **empty),
            template="",
            system_prompt=system_prompt,
            memory_size=0,
            sample_of=lambda agent: agent,
        )
        self.render = render

    async def aact(self, agents: np.ndarray, obs: Any, key: jax.Array) -> np.ndarray:
        agents = np.asarray(agents, dtype=np.int64)
        host = {k: np.asarray(v) for k, v in dict(obs).items()}
        peers, mask = host["peers"], host["peer_mask"] > 0
        scalars = {k: v for k, v in host.items() if v.ndim == 1}
        requests = []
        # One prompt per LLM agent: the accepted Python loop of LLM cohorts.
        for i, a in enumerate(agents.tolist()):
            fields = {k: v[i].item() for k, v in scalars.items()}
            user = self.render(a, fields, peers[i][mask[i]])
            requests.append(
                Request(
                    [
                        {"role": "system", "content": self.system_prompt},
                        {"role": "user", "content": user},
                    ],
                    schema=self.schema,
                    fallback=self.fallback,
                    sample=a,
                    agent=a,
                    cohort=self.name,
                )
            )
        done = await self.client.complete_many(requests)
        self.calls += 1
        out = np.zeros((agents.size, 2, peers.shape[1]), np.float32)
        for i, c in enumerate(done):
            choice = c.parsed if c.parsed is not None else self.fallback
            self.failures += int(not c.ok)
            k = int(mask[i].sum())  # real mates come first in every peer table
            for j, name in enumerate(("punish", "reward")):
                pts = [float(v) for v in getattr(choice, name, [])][:k]
                out[i, j, : len(pts)] = pts
        return out

    def learn(self, agents, obs, actions, rewards, key) -> None:
        """Nothing to remember: the world's record feeds the next prompts."""


# -- the run --------------------------------------------------------------------------------
def build_neighbours(cfg: PublicGoodsConfig, seed: int) -> Neighbours | None:
    """The graph as a neighbour table (user input: errors are config errors); None when well
    mixed (complete graph, random groups: a permutation per round, no graph needed)."""
    n = cfg.population
    if cfg.graph == "complete":
        if cfg.groups == "random":
            return None
        if n * (n - 1) > MAX_TABLE_ENTRIES:  # one group of everyone, peers all N - 1 others
            raise ConfigError(
                f"graph=complete with groups=neighbourhood needs a population x (population - 1) "
                f"table of {n * (n - 1):.3g} entries at population={n} (limit "
                f"{MAX_TABLE_ENTRIES:.0e}, population <= {int((MAX_TABLE_ENTRIES) ** 0.5)}); "
                "use groups=random (stranger matching, any population) or a sparser graph"
            )
    try:
        topo = make_topology(cfg.graph, cfg.population, degree=cfg.degree, seed=seed)
        if topo.n != cfg.population:
            raise ValueError(
                f"graph '{cfg.graph}' has {topo.n} nodes but population={cfg.population}"
            )
        e = topo.edges
        src, dst = np.concatenate([e[:, 0], e[:, 1]]), np.concatenate([e[:, 1], e[:, 0]])
        max_deg = int(np.bincount(src, minlength=topo.n).max(initial=0))
        if topo.n * max_deg > MAX_TABLE_ENTRIES:
            raise ValueError(
                f"graph '{cfg.graph}' needs a population x max-degree table of "
                f"{topo.n * max_deg:.3g} entries (limit {MAX_TABLE_ENTRIES:.0e}); use a sparser graph"
            )
        if max_deg == 0:
            raise ValueError(f"graph '{cfg.graph}' has no edges: nobody can form a group")
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    return Neighbours.from_edges(src, dst, topo.n, table=True)


def params_of(cfg: PublicGoodsConfig) -> Params:
    f = np.float32
    return Params(
        endowment=f(cfg.endowment),
        r=f(cfg.r),
        punishment_cost=f(cfg.punishment_cost),
        punishment_fine=f(cfg.punishment_fine),
        reward_cost=f(cfg.reward_cost),
        reward_benefit=f(cfg.reward_benefit),
        max_points=f(cfg.max_points),
    )


def _masked_mean(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Means of ``x`` over ``mask`` along the last axis (NaN for empty rows)."""
    count = np.count_nonzero(mask, axis=-1)
    total = np.where(mask, x, 0.0).sum(axis=-1)
    return np.divide(total, count, out=np.full(count.shape, np.nan), where=count > 0)


@partial(jax.jit, static_argnames=("rounds", "mode", "group_size", "table"))
def _rule_rounds(
    state, t0, orders, p, nb, peers, members, mpcr, group_keys, act_key, ids, sid,
    rule_params, *, rounds: int, mode: str, group_size: int, table: tuple,
):  # fmt: skip
    """Rounds ``t0 .. t0 + rounds - 1`` of a batch of rule agents without a sanction stage, in
    one compiled scan: the per-round path's group draws and rule decisions (:func:`_decide`,
    the same keys). ``state``: (last share, others' last mean, played), each ``(R, N)``;
    ``mode``: stranger (complete graph, random groups: each round's permutation in
    ``orders``, from :func:`stranger_orders`), graph (random groups over ``nb``) or
    neighbourhood (fixed ``peers``, ``members``, ``mpcr``). Returns the final state and each
    round's shares, groups (None: neighbourhood) and who played, ``(K, R, N)``.

    Earnings are left to :func:`stage_one` after the scan, from contributions computed on
    the host as on the per-round path: fused here, ``e - share * e`` may become one FMA
    (other bits). So the rule types see no ``my_last_payoff`` (none of them reads it)."""
    r, n = state[0].shape

    def one(carry, x):
        last_share, last_others, played = carry
        i, order = x
        t = t0 + i
        group = None
        if mode == "neighbourhood":
            pe, mem, mp = peers, members, mpcr
        else:
            if mode == "stranger":
                group, pe = jax.vmap(stranger_groups, in_axes=(0, None))(order, group_size)
            else:
                group, pe = draw_groups(nb.table, group_keys, t, group_size)
            mem = ((pe < n).sum(axis=2) + 1).astype(jnp.float32).ravel()
            mp = p.r / mem  # (float32: rule types do not read it)
        grouped = (pe < n).any(axis=2)
        obs = {
            "others_last": last_others.ravel(),
            "my_last": last_share.ravel(),
            "first": (~played).ravel().astype(jnp.float32),
            "round": jnp.full(r * n, t, jnp.int32),
            "group_n": mem,
            "mpcr": mp,
        }
        key = jax.random.fold_in(jax.random.fold_in(act_key, t), 0)  # Population.act's
        acted = _decide(obs, ids, sid, rule_params, key, table=table)
        share = jnp.clip(acted.astype(jnp.float32).reshape(r, n), 0.0, 1.0)
        share = jnp.where(grouped, share, jnp.float32(0.0))
        others = group_views(pe, share)[2]
        last = (jnp.where(grouped, share, last_share), jnp.where(grouped, others, last_others))
        return (*last, played | grouped), (share, group, grouped)

    return jax.lax.scan(one, state, (jnp.arange(rounds, dtype=jnp.int32), orders))


class _Batch:
    """One batch of replicates: the world, the two act stages, the records."""

    def __init__(
        self,
        cfg: PublicGoodsConfig,
        ctx: RunContext,
        reps: np.ndarray,
        nb: Neighbours | None,
        kinds: np.ndarray,
        client: LLMClient | None,
    ):
        self.cfg, self.ctx, self.reps, self.nb, self.client = cfg, ctx, reps, nb, client
        r, n = reps.size, cfg.population
        self.r, self.n = r, n
        self.gids = (reps[:, None] * n + np.arange(n)).ravel()
        self.offset = int(reps[0]) * n
        self.kinds = kinds  # (R, N)
        self.strategy = np.full((r, n), "", dtype=object)
        for i, rep in enumerate(reps.tolist()):
            mine = kinds[i] == "rules"
            if mine.any():
                rng = self.ctx.rng.numpy("strategies", rep)
                self.strategy[i, mine] = parse_mix(cfg.strategies, int(mine.sum()), rng)
        # Masks of each kind and rule type, compared once (object arrays: slow per round).
        self.kind_mask = {k: m for k in KINDS if (m := kinds == k).any()}
        self.type_mask = {s: m for s in CONTRIBUTE if (m := self.strategy == s).any()}
        self.present, self.types = list(self.kind_mask), list(self.type_mask)
        self.neighbourhood = cfg.groups == "neighbourhood"
        self.params = params_of(cfg)
        self.table = None if nb is None else nb.table  # None: complete graph, well mixed
        if self.neighbourhood:
            degree = np.asarray(nb.degree, np.float64)
            # i's private return per token: r/(k_i+1) x sum over its groups of 1/(k_g+1).
            inv = 1.0 / (degree + 1.0)
            own = cfg.r * inv * (inv + np.asarray(neighbour_sum(nb, jnp.asarray(inv))))
            self.members = np.tile(degree + 1.0, r)
            self.mpcr = np.tile(own, r)
            self.peers = jnp.broadcast_to(nb.table, (r,) + nb.table.shape)
        self.system = prompts.system_prompt(
            neighbourhood=self.neighbourhood,
            group_size=cfg.group_size,
            r=cfg.r,
            endowment=cfg.endowment,
            rounds=cfg.steps,
            punishment=cfg.punishment,
            reward=cfg.reward,
            punishment_cost=cfg.punishment_cost,
            punishment_fine=cfg.punishment_fine,
            reward_cost=cfg.reward_cost,
            reward_benefit=cfg.reward_benefit,
            max_points=cfg.max_points,
        )
        self.pop = build_population(self.kinds, self.gids, self._cohorts(stage=1))
        sanctions = (
            build_population(self.kinds, self.gids, self._cohorts(stage=2))
            if cfg.sanctions()
            else None
        )
        self.sanction_pop = sanctions
        self.history: list[dict[str, np.ndarray]] = []  # last rounds, for LLM prompts
        zeros = np.zeros((r, n), np.float32)
        self.last = {"share": zeros, "payoff": zeros, "others": zeros}
        self.played = np.zeros((r, n), bool)  # has played a round (conditional_start until then)
        self.sums: dict[str, np.ndarray] = {}
        self.counts: dict[str, np.ndarray] = {}  # rounds with a value (NaN: nobody of the kind)
        self.rounds_done = 0
        self.keys = {name: ctx.rng.key(name) for name in ("act", "sanction", "learn")}
        self.group_keys = ctx.rng.keys("groups", reps)
        self.sim = Scheduler()
        self.fuse = self._fuse_rounds()

    def _fuse_rounds(self) -> int:
        """Rounds per compiled chunk on the fused path; 0: one round at a time (any agent not
        a rule agent, or a sanction stage)."""
        cfg, agents = self.cfg, self.r * self.n
        if FUSE_ROUNDS < 1 or cfg.sanctions() or self.present != ["rules"]:
            return 0
        return max(1, min(cfg.steps, FUSE_ROUNDS, FUSE_WORK // agents))

    # -- cohorts ---------------------------------------------------------------------------
    def _cohorts(self, stage: int) -> dict[str, Callable[[np.ndarray], Any]]:
        """Cohort factories of a stage (1: contribute, 2: sanction), by kind."""
        return {
            "rules": partial(self._rules, stage),
            "learned": partial(self._learned, stage),
            "llm": partial(self._llm, stage),
        }

    def _rules(self, stage: int, ids: np.ndarray) -> RuleCohort:
        cfg = self.cfg
        names = self.strategy.ravel()[self.kinds.ravel() == "rules"]
        if stage == 1:
            params = {
                "conditional": {"slope": cfg.conditional_slope, "start": cfg.conditional_start}
            }
            return RuleCohort("rules", ids, names, strategies=CONTRIBUTE, params=params)
        m = {"max_points": cfg.max_points}
        return RuleCohort(
            "rules", ids, names, strategies=SANCTION, params={"punisher": m, "rewarder": m}
        )

    def _learned(self, stage: int, ids: np.ndarray) -> LearnedCohort:
        cfg = self.cfg
        common = dict(
            actions="continuous", rule="reinforce", learning_rate=cfg.learning_rate,
            key=self.ctx.rng.key(f"learned-init-{stage}"),
        )  # fmt: skip
        if stage == 1:
            return LearnedCohort("learned", ids, features=CONTRIBUTION_FEATURES, **common)
        return SanctionLearnedCohort(
            "learned", ids, features=SANCTION_FEATURES, max_points=cfg.max_points,
            punishment=cfg.punishment, reward=cfg.reward, **common,
        )  # fmt: skip

    def _llm(self, stage: int, ids: np.ndarray) -> LLMCohort:
        cfg = self.cfg
        if stage == 1:
            return ContributionLLMCohort(
                ids, self.client, render=self.render_contribution, system_prompt=self.system,
                endowment=cfg.endowment,
            )  # fmt: skip
        return SanctionLLMCohort(
            ids, self.client, render=self.render_sanction, system_prompt=self.system,
            punishment=cfg.punishment, reward=cfg.reward,
        )  # fmt: skip

    # -- LLM prompts -----------------------------------------------------------------------
    def _row(self, agent: int) -> tuple[int, int]:
        return divmod(agent - self.offset, self.n)

    def render_contribution(self, agent: int, fields: Mapping[str, Any]) -> str:
        i, j = self._row(agent)
        cfg, e = self.cfg, self.cfg.endowment
        rows = []
        for h in self.history[-cfg.llm_memory :] if cfg.llm_memory else []:
            if not h["grouped"][i, j]:
                rows.append({"round": h["round"], "sat_out": True, "earned": h["final"][i, j]})
                continue
            mask = h["mask"][i, j]
            rows.append(
                {
                    "round": h["round"],
                    "mine": e * h["share"][i, j],
                    "others": (e * h["others"][i, j][mask]).tolist(),
                    "project": h["pay1"][i, j] - e + e * h["share"][i, j],
                    "fine": h["fine"][i, j],
                    "bonus": h["bonus"][i, j],
                    "spent": h["spent"][i, j],
                    "earned": h["final"][i, j],
                }
            )
        return prompts.contribution_prompt(
            round_no=int(fields["round"]),
            rounds=cfg.steps,
            endowment=e,
            members=int(fields["group_n"]),
            mpcr=float(fields["mpcr"]),
            neighbourhood=self.neighbourhood,
            history=prompts.history_text(rows),
        )

    def render_sanction(self, agent: int, fields: Mapping[str, Any], others: np.ndarray) -> str:
        e = self.cfg.endowment
        return prompts.sanction_prompt(
            round_no=int(fields["round"]),
            rounds=self.cfg.steps,
            mine=e * float(fields["my_contribution"]),
            others=(e * others).tolist(),
            earned=e * float(fields["my_payoff"]),
            punishment=self.cfg.punishment,
            reward=self.cfg.reward,
            max_points=self.cfg.max_points,
        )

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What rounds change, as checkpoint data: each agent's last round, the running sums
        of the headline, LLM agents' recent rounds and both stages' populations. The rest
        (groups, keys, rule types) is drawn again from the seed by round number."""
        return {
            "last": self.last,
            "played": self.played,
            "sums": self.sums,
            "counts": self.counts,
            "rounds_done": self.rounds_done,
            "history": self.history,
            "population": self.pop.state_dict(),
            "sanctions": None if self.sanction_pop is None else self.sanction_pop.state_dict(),
        }

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Put back what :meth:`state_dict` saved (in a batch built afresh, same config)."""
        self.last = {k: np.asarray(v) for k, v in saved["last"].items()}
        self.played = np.asarray(saved["played"], bool).copy()
        self.sums, self.counts = dict(saved["sums"]), dict(saved["counts"])
        self.rounds_done = int(saved["rounds_done"])
        self.history = [dict(h, round=int(h["round"])) for h in saved["history"]]
        self.pop.load_state_dict(saved["population"])
        if self.sanction_pop is not None:
            self.sanction_pop.load_state_dict(saved["sanctions"])

    # -- one round -------------------------------------------------------------------------
    async def run(self) -> None:
        steps, k = self.cfg.steps, self.fuse
        checkpoints, batch = self.ctx.checkpoints, int(self.reps[0])
        self.sim.handle("rounds", self.rounds)
        self.sim.handle("round", self.round)
        saved = checkpoints.resume(batch, self.sim)  # the queue holds the rounds still to play
        if saved is not None:
            self.load_state_dict(saved)
        elif k:  # one scheduler event per chunk of rounds
            for t in range(1, steps + 1, k):
                self.sim.at(float(t), self.rounds, t, min(k, steps + 1 - t))
        else:
            for t in range(1, steps + 1):
                self.sim.at(float(t), self.round, t)
        checkpoints.attach(batch, self.sim, self.state_dict)
        await self.sim.arun()

    async def rounds(self, t0: int, k: int) -> None:
        """Rounds ``t0 .. t0 + k - 1`` on the fused path (:func:`_rule_rounds`): the same
        results and records as :meth:`round` ``k`` times."""
        cfg = self.cfg
        cohort = self.pop.cohorts[0]  # the one cohort: rule agents
        sid = cohort.sid[cohort.local(self.gids)]
        present = tuple(cohort.names[i] for i in np.flatnonzero(np.bincount(sid)))
        params = {
            s: {p: np.float32(v) for p, v in cohort.params.get(s, {}).items()} for s in present
        }
        table = tuple((s, cohort.names.index(s), cohort._fns[s]) for s in present)
        orders = None
        if self.neighbourhood:
            mode, fixed = "neighbourhood", (self.peers, self.members, self.mpcr)
        else:
            mode, fixed = ("stranger" if self.table is None else "graph"), (None, None, None)
            if self.table is None:  # numpy sorts faster than XLA on CPU
                orders = stranger_orders(self.group_keys, t0, k, self.n)
        state = (self.last["share"], self.last["others"], self.played)
        state, (share, group, grouped) = _rule_rounds(
            state, np.int32(t0), orders, self.params, self.nb, *fixed, self.group_keys,
            self.keys["act"], self.gids.astype(np.int32), sid, params,
            rounds=k, mode=mode, group_size=cfg.group_size, table=table,
        )  # fmt: skip
        share, grouped = np.asarray(share), np.asarray(grouped)
        r, n, e = self.r, self.n, cfg.endowment
        c = share * e  # as the per-round path computes it
        if group is None:  # neighbourhood: the kernel of an (R, N) batch, round by round
            pays = [stage_one(self.params, self.nb, None, jnp.asarray(ci)) for ci in c]
            final = np.stack([np.asarray(x) for x in pays])
        else:  # random groups: the rounds as one batch of K x R partitions (same values)
            group = group.reshape(k * r, n)
            pay = stage_one(self.params, self.nb, group, jnp.asarray(c.reshape(k * r, n)))
            final = np.asarray(pay).reshape(k, r, n)
        # Who sat out keeps what it saw when it last played.
        latest = k - 1 - np.argmax(grouped[::-1], axis=0)  # (R, N): its last round played
        seen = np.take_along_axis(final, latest[None], axis=0)[0] / e
        payoff = np.where(grouped.any(axis=0), seen, self.last["payoff"])
        last_share, others, self.played = (np.asarray(x) for x in state)
        self.last = {"share": last_share, "payoff": payoff, "others": others}
        self._record(np.arange(t0, t0 + k, dtype=np.float64), grouped, share, final, None, None)
        self.rounds_done = t0 + k - 1
        budget_reached(self.client, self.ctx, self.sim)

    async def round(self, t: int) -> None:
        cfg, ctx, r, n = self.cfg, self.ctx, self.r, self.n
        e = cfg.endowment
        group = None
        if self.neighbourhood:
            peers, members, mpcr = self.peers, self.members, self.mpcr
        else:
            if self.table is None:
                group, peers = draw_stranger_groups(self.group_keys, t, n, cfg.group_size)
            else:
                group, peers = draw_groups(self.table, self.group_keys, t, cfg.group_size)
            members = np.asarray((np.asarray(peers) < n).sum(axis=2) + 1, np.float64).ravel()
            mpcr = cfg.r / members
        # An agent alone (no peers) sits the round out: it contributes nothing and so keeps e,
        # is not asked, does not learn and is left out of the round's records.
        grouped = (np.asarray(peers) < n).any(axis=2)  # (R, N)
        idx = np.flatnonzero(grouped.ravel())  # the flat rows of the agents who play
        gids = self.gids[idx]
        obs = {
            "others_last": self.last["others"].ravel()[idx],
            "my_last": self.last["share"].ravel()[idx],
            "my_last_payoff": self.last["payoff"].ravel()[idx],
            "first": (~self.played).ravel()[idx].astype(np.float32),
            "round": np.full(idx.size, t, np.int32),
            "group_n": members[idx],
            "mpcr": mpcr[idx],
        }
        acted = await self.pop.act(gids, obs, _fold(self.keys["act"], t))
        share = np.zeros(r * n, np.float32)
        share[idx] = np.clip(np.asarray(acted, np.float32), 0.0, 1.0)
        share = share.reshape(r, n)
        pay1 = stage_one(self.params, self.nb, group, jnp.asarray(share * e))
        views, mask, others = (np.asarray(x) for x in group_views(peers, jnp.asarray(share)))
        final, pun, rew = np.asarray(pay1), None, None
        sanction_obs = None
        if self.sanction_pop is not None:
            count = mask.sum(axis=2)
            sanction_obs = {
                "peers": views.reshape(r * n, -1)[idx],
                "peer_mask": mask.reshape(r * n, -1)[idx].astype(np.float32),
                "group_mean": ((share + views.sum(axis=2)) / (1 + count)).ravel()[idx],
                "my_contribution": share.ravel()[idx],
                "my_payoff": (np.asarray(pay1) / e).ravel()[idx],
                "round": np.full(idx.size, t, np.int32),
            }
            acted = await self.sanction_pop.act(gids, sanction_obs, _fold(self.keys["sanction"], t))
            pts = np.zeros((r * n, 2, views.shape[2]), np.float32)
            pts[idx] = np.asarray(acted, np.float32).reshape(idx.size, 2, -1)
            pts = pts.reshape(r, n, 2, -1)
            done = stage_two(
                self.params,
                peers,
                pay1,
                jnp.asarray(pts[:, :, 0] * cfg.punishment),
                jnp.asarray(pts[:, :, 1] * cfg.reward),
            )
            final, pun, rew = (np.asarray(x) for x in done)
        learn_key = _fold(self.keys["learn"], t)
        self.pop.learn(gids, obs, share.ravel()[idx], final.ravel()[idx], learn_key)
        if self.sanction_pop is not None:
            self.sanction_pop.learn(
                gids, sanction_obs, pts.reshape(r * n, 2, -1)[idx], final.ravel()[idx], learn_key
            )
        # Those who sat out keep what they saw when they last played.
        new = {"share": share, "payoff": final / e, "others": others}
        self.last = {k: np.where(grouped, v, self.last[k]) for k, v in new.items()}
        self.played |= grouped
        if "llm" in self.present:
            self._remember(t, grouped, share, views, mask, np.asarray(pay1), final, peers, pun, rew)
        self._record(
            np.array([float(t)]), grouped[None], share[None], final[None],
            None if pun is None else pun[None], None if rew is None else rew[None],
        )  # fmt: skip
        self.rounds_done = t
        budget_reached(self.client, ctx, self.sim)

    def _remember(self, t, grouped, share, views, mask, pay1, final, peers, pun, rew) -> None:
        """What LLM agents are told of this round later (kept for llm_memory rounds)."""
        cfg = self.cfg
        zero = np.zeros_like(final)
        fine = bonus = spent = zero
        if pun is not None:
            peers = np.asarray(peers)
            got = np.zeros((self.r, self.n + 1))
            rows = np.arange(self.r)[:, None, None]
            np.add.at(got, (rows, peers), pun)
            fine = cfg.punishment_fine * got[:, : self.n]
            got[:] = 0.0
            np.add.at(got, (rows, peers), rew)
            bonus = cfg.reward_benefit * got[:, : self.n]
            spent = cfg.punishment_cost * pun.sum(2) + cfg.reward_cost * rew.sum(2)
        self.history.append(
            {
                "round": t,
                "grouped": grouped,
                "share": share,
                "others": views,
                "mask": mask,
                "pay1": pay1,
                "final": final,
                "fine": fine,
                "bonus": bonus,
                "spent": spent,
            }  # fmt: skip
        )
        self.history = self.history[-max(cfg.llm_memory, 1) :]

    # -- records ---------------------------------------------------------------------------
    def _record(self, times: np.ndarray, grouped, share, final, pun, rew) -> None:
        """Per-round means over the agents who played (in a group of >= 2) of the rounds at
        ``times`` (arrays with a leading round axis): one recorder call per metric."""
        rec, cfg = self.ctx.recorder, self.cfg
        k, r = grouped.shape[:2]
        time, reps = np.repeat(times, r), np.tile(self.reps, k)  # round-major rows

        def put(name: str, values: np.ndarray, **labels: Any) -> None:
            rec.record(time, name, values.ravel(), replicate=reps, **labels)

        def add(name: str, values: np.ndarray) -> None:
            # Running sums round by round (accumulate adds in order): the same floats as
            # one round at a time.
            ok = ~np.isnan(values)
            start = self.sums.get(name, np.zeros(r))
            total = np.add.accumulate(np.concatenate([start[None], np.where(ok, values, 0.0)]))
            self.sums[name] = total[-1]
            self.counts[name] = self.counts.get(name, 0) + ok.sum(axis=0)

        c_rate, welfare = _masked_mean(share, grouped), _masked_mean(final, grouped)
        played = grouped.mean(axis=-1)
        put("contribution_rate", c_rate, kind="all")
        put("welfare", welfare, kind="all")
        put("grouped_share", played)
        add("contribution_rate", c_rate)
        add("welfare", welfare)
        add("grouped_share", played)
        if cfg.agents == "mixed":
            for kind in self.present:
                m = self.kind_mask[kind] & grouped
                kc, kw = _masked_mean(share, m), _masked_mean(final, m)
                put("contribution_rate", kc, kind=kind)
                put("welfare", kw, kind=kind)
                add(f"contribution_rate.{kind}", kc)
                add(f"welfare.{kind}", kw)
        for s in self.types:
            m = self.type_mask[s] & grouped
            has = m.any(axis=-1).ravel()
            sc, sp = _masked_mean(share, m).ravel()[has], _masked_mean(final, m).ravel()[has]
            rec.record(time[has], "contribution_by_strategy", sc, replicate=reps[has], strategy=s)
            rec.record(time[has], "payoff_by_strategy", sp, replicate=reps[has], strategy=s)
        for on, name, pts in (
            (cfg.punishment, "punishment_rate", pun),
            (cfg.reward, "reward_rate", rew),
        ):
            if on:
                rate = _masked_mean(pts.sum(axis=-1) >= RATE_POINTS, grouped)
                put(name, rate)
                add(name, rate)

    def headline(self) -> dict[str, np.ndarray]:
        """Means over the rounds played of the per-round values (NaN where never defined)."""
        return {
            k: np.divide(v, self.counts[k], out=np.full(v.shape, np.nan), where=self.counts[k] > 0)
            for k, v in self.sums.items()
        }


class PublicGoods(Scenario):
    """Public goods games on graphs with punishment and reward (Fehr & Gächter 2000)."""

    name = "public-goods"
    Config = PublicGoodsConfig
    headline = ("contribution_rate", "welfare")
    labels = {"kind": str, "strategy": str, "agent": int, "cohort": str}
    checkpointing = True  # both paths: agents' last rounds, running sums, populations, queue

    def run(self, cfg: PublicGoodsConfig, ctx: RunContext) -> Mapping[str, np.ndarray]:
        nb = build_neighbours(cfg, int(ctx.rng.numpy("graph").integers(2**31)))

        async def batch(reps: np.ndarray, client: LLMClient | None) -> tuple[dict, float]:
            done = ctx.checkpoints.finished(int(reps[0]))  # a batch finished before a resume
            if done is None:
                kinds = np.stack([kinds_of(cfg, ctx.rng.numpy("split", int(r))) for r in reps])
                b = _Batch(cfg, ctx, reps, nb, kinds, client)
                await b.run()
                done = (b.headline(), float(b.rounds_done))
                ctx.checkpoints.finish(int(reps[0]), done)
            values, end = done
            return {k: np.asarray(v) for k, v in values.items()}, float(end)

        return drive(cfg, ctx, batch, llm=uses_llm(cfg), agents_per_replicate=cfg.population)

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: PublicGoodsConfig) -> list[Path]:
        """One figure: contributions over rounds (all, per kind, per rule type), welfare, and
        the sanction rates when on and the share of agents who played when some sat out."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        if frame.empty:
            return []
        plots_dir.mkdir(parents=True, exist_ok=True)
        shares = [m for m in ("punishment_rate", "reward_rate") if (frame["metric"] == m).any()]
        if (
            frame.loc[frame["metric"] == "grouped_share", "value"] < 1
        ).any():  # some agents sat rounds out: show how many played
            shares.append("grouped_share")
        panels = 2 + bool(shares)
        fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.8), dpi=100)
        for ax, metric, by_type, label in (
            (axes[0], "contribution_rate", "contribution_by_strategy", "contribution / endowment"),
            (axes[1], "welfare", "payoff_by_strategy", "earnings per agent per round"),
        ):
            sub = frame[frame["metric"] == metric]
            for kind, part in sub.groupby("kind"):
                mean = part.groupby("time")["value"].mean()
                lw = 2.5 if kind == "all" else 1.5
                ax.plot(mean.index, mean.values, lw=lw, marker="o", ms=3, label=str(kind))
            types = frame[frame["metric"] == by_type]
            for s, part in types.groupby("strategy"):
                mean = part.groupby("time")["value"].mean()
                ax.plot(mean.index, mean.values, lw=1, ls="--", label=f"rules: {s}")
            ax.set_xlabel("round")
            ax.set_ylabel(label)
            ax.legend(fontsize=7, loc="best")
        if shares:
            for m in shares:
                mean = frame[frame["metric"] == m].groupby("time")["value"].mean()
                axes[2].plot(mean.index, mean.values, marker="o", ms=3, label=m)
            axes[2].set_xlabel("round")
            axes[2].set_ylabel("share of agents")
            axes[2].legend(fontsize=7, loc="best")
        fig.suptitle(
            f"public goods: N={config.population}, groups={config.groups}, r={config.r:g}, "
            f"agents={config.agents}"
        )
        fig.tight_layout()
        path = plots_dir / "public_goods.png"
        fig.savefig(path)
        plt.close(fig)
        return [path]
