"""skill-society on the model contract: does a society turn experience into artifacts that
make it better at tasks it never trained on?

One step is a moment: every numeric agent (rules, learned) attempts a task of the domain it
chose (or was allocated) on the vectorised skill model (``dynamics.py``). Evaluation
checkpoints (at the start, every ``eval_every`` moments, at each generation's end) score every
agent on train, held-out and out-of-distribution tasks without learning; at each turnover
every seat gets a new agent, who inherits its predecessor's playbooks with ``inherit``. The
graph is one per parameters (``graph_seed``), as every graph study's.

The world holds the draws of the coming moment's rule choice (as division-of-labour's), so a
rule agent's choice is a function of its observation, and what the headline needs from the
curves (the first and last checkpoint's scores, each domain's best earlier score), so the
headline is the last world's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from scenarios.skill_society import dynamics as dyn
from scenarios.skill_society.config import SkillSocietyConfig
from scenarios.skill_society.tasks import DOMAINS, SPLITS
from sim_core.experiment import RunContext
from sim_core.graph import Neighbours
from society.fields import KINDS, parse_split
from society.llm.local import LOCAL_MODEL
from society.metrics.specialisation import dol_index_jax, emergent_niches_jax
from society.study import Discrete, Study
from society.topology import topology_of

NICHE_ROWS = 2000  # agents per replicate whose final niche is recorded (for the network plot)
D = len(DOMAINS)


def graph(p: SkillSocietyConfig) -> Neighbours:
    e = topology_of(p).edges
    return Neighbours.from_undirected(e[:, 0], e[:, 1], p.population)


def _draws(key: jax.Array, p: SkillSocietyConfig) -> jax.Array:
    """The coming moment's rule draws per agent: D Gumbel uniforms, a random domain, explore
    (none without rule agents)."""
    if "rules" not in _kinds(p):
        return jnp.zeros((0, D + 2))
    return dyn.uniforms(key, jnp.arange(p.population), D + 2)


def choose(o: Mapping[str, Any], p: SkillSocietyConfig) -> jax.Array:
    """A rule agent's domain: a softmax choice over its success estimates (weighed by price
    when bidding) at temperature RULE_TEMPERATURE (Gumbel-max), or with probability
    ``explore`` a random domain."""
    u = o["u"]
    value = o["estimate"] * o.get("price", 1.0)
    greedy = jnp.argmax(value + dyn.RULE_TEMPERATURE * dyn.gumbel(u[:D]))
    rand = jnp.minimum(jnp.floor(u[D] * D), D - 1).astype(jnp.int32)
    return jnp.where(u[D + 1] < p.explore, rand, greedy)


def _per_kind(x: jax.Array, kind: jax.Array) -> jax.Array:
    """(..., agents) -> (..., kinds): the mean over each kind's agents (NaN: none)."""
    mask = (kind[:, None] == jnp.arange(len(KINDS))).astype(jnp.float32)
    count = mask.sum(0)
    return jnp.where(count > 0, (x @ mask) / jnp.maximum(count, 1.0), jnp.nan)


def checkpoint_due(t: Any, p: SkillSocietyConfig) -> Any:
    """Whether an evaluation checkpoint follows ``t`` moments (the start, every ``eval_every``
    moments, and each generation's end: the run's end is one)."""
    return (t == 0) | (t % p.eval_every == 0) | (t % p.steps == 0)


def _scores(w: dict, which: str) -> jax.Array:
    """(splits, kinds) mean scores at the first or last checkpoint (LLM agents' their own)."""
    return w[which].at[:, 2].set(w[f"llm_{which}"])


def _initial(w: dict) -> jax.Array:
    """(splits, kinds) scores of the initial world (its own evaluation, ``eval0``)."""
    return _per_kind(w["eval0"].T, w["kind"]).at[:, 2].set(w["llm_last"])


def _checkpoint(w: dict, p: SkillSocietyConfig, first: bool) -> dict:
    """Scores of every agent without learning, per (split, kind); what the headline keeps."""
    s = w["skill"]
    ev = dyn.evaluate(s, p, graph(p))
    numeric = w["kind"] != 2
    primary = jnp.where(numeric.any(), numeric, ~numeric).astype(jnp.float32)
    domain = primary @ ev["heldout_domain"] / jnp.maximum(primary.sum(), 1.0)
    scores = _per_kind(jnp.stack([ev[k] for k in SPLITS]), w["kind"])
    counts = s.attempts - w["counted"]  # this interval's attempts
    dol, niches = dol_index_jax(counts), emergent_niches_jax(counts)
    return {
        **w, "last": scores, "first": scores if first else w["first"],
        "best": jnp.maximum(w["best"], w["domain"]), "domain": domain,
        "counted": s.attempts, "dol": dol, "niches": niches, "checked": jnp.bool_(True),
    }  # fmt: skip


class SkillSociety(Study):
    """Collective self-improvement through artifacts, measured on held-out tasks."""

    Params = SkillSocietyConfig
    name = "skill-society"
    unit = "moment"
    labels = {"split": str, "kind": str, "domain": str, "agent": int, "cohort": str}
    actions = Discrete(DOMAINS, rule=choose)
    reporters = {
        "success_rate": lambda w, out: _per_kind(out.success, w["kind"]).at[2].set(jnp.nan),
        "reach": lambda w, out: w["reach"],
        "price": lambda w, out: w["skill"].price[0] + w["bidding"],
        "score": lambda w, out: (
            _initial(w) if out is None else jnp.where(w["checked"], _scores(w, "last"), jnp.nan)
        ),
        "dol_index": lambda w, out: jnp.where(w["checked"], w["dol"], jnp.nan),
        "niches": lambda w, out: jnp.where(w["checked"] | (out is None), w["niches"], jnp.nan),
        "artifacts": lambda w, out: jnp.where(
            w["checked"] | (out is None), w["artifacts"], jnp.nan
        ),
        "code_runs": lambda w, out: jnp.where(w["checked"], w["llm_stats"][2] + w["code"], jnp.nan),
        "code_failures": lambda w, out: jnp.where(
            w["checked"], w["llm_stats"][3] + w["code"], jnp.nan
        ),
    }
    axes = {"success_rate": ("kind",), "price": ("domain",), "score": ("split", "kind")}
    axis_labels = {"kind": KINDS, "domain": DOMAINS, "split": SPLITS}
    sparse = ("dol_index", "niches", "artifacts", "code_runs", "code_failures")
    initial = ("score", "niches", "artifacts")  # the curves start at moment 0
    agent_reporters = {"niche": lambda w, out: dyn.niche_of(w["skill"])[:NICHE_ROWS]}
    headline = ()

    def length(p):
        return p.steps * p.generations

    def features(p):
        return ("estimate", "price") if p.allocation == "bidding" else ("estimate",)

    def init(key, p):
        n, e = p.population, p.llm_eval_tasks
        nan = jnp.full((len(SPLITS), len(KINDS)), jnp.nan)
        llm = {  # what the LLM agents' turn (``agents.py``) writes: NaN without LLM agents
            "llm_first": jnp.full(3, jnp.nan), "llm_last": jnp.full(3, jnp.nan),
            "llm_tasks": jnp.full(e, -jnp.inf), "llm_best": jnp.full(e, -jnp.inf),
            "llm_stats": jnp.zeros(4), "artifacts": jnp.float32(jnp.nan),
            "tokens": jnp.float32(0), "tokens_first": jnp.float32(0),
            "code": jnp.float32(0 if p.artifact_kind == "code" and "llm" in _kinds(p) else jnp.nan),
        }  # fmt: skip
        skill = dyn.initial_world(p, 1, p.experts)
        ev = dyn.evaluate(skill, p, graph(p))
        return llm | {
            "skill": skill, "eval0": jnp.stack([ev[k] for k in SPLITS], 1),
            "kind": jnp.zeros(n, jnp.int32), "t": jnp.int32(0), "u": _draws(key, p),
            "first": nan, "last": nan, "domain": jnp.full(D, -jnp.inf), "best": jnp.full(D, -jnp.inf),
            "counted": jnp.zeros((n, D)), "dol": jnp.float32(jnp.nan), "niches": jnp.float32(0),
            "checked": jnp.bool_(False), "reach": jnp.float32(0),
            "bidding": jnp.float32(0 if p.allocation == "bidding" else jnp.nan),
        }  # fmt: skip

    def observe(w, p):
        obs = {"estimate": w["skill"].est}
        if p.allocation == "bidding":
            obs["price"] = jnp.broadcast_to(w["skill"].price, obs["estimate"].shape)
        return obs | ({"u": w["u"]} if "rules" in _kinds(p) else {})

    def step(key, w, act, p):
        t, n = w["t"], p.population
        numeric = w["kind"] != 2  # with LLM agents, checkpoints follow their turn (agents.py)
        mine = numeric.all()
        w = jax.lax.cond((t == 0) & mine, lambda w: _checkpoint(w, p, True), lambda w: w, w)
        turnover = (t > 0) & (t % p.steps == 0)
        s = jax.lax.cond(
            turnover, lambda s: dyn.turnover(s, p, jnp.asarray(p.inherit)), lambda s: s, w["skill"]
        )
        k_step, k_next = jax.random.split(key)
        s, out = dyn.step(k_step, s, act, p, graph(p), numeric, jnp.arange(n))
        has = (s.art_q.max(1) >= p.reach_quality) & numeric
        w = {**w, "skill": s, "t": t + 1, "u": _draws(k_next, p), "checked": jnp.bool_(False),
             "counted": jnp.where(turnover, 0.0, w["counted"]),
             "reach": has.sum() / jnp.maximum(numeric.sum(), 1)}  # fmt: skip
        due = checkpoint_due(t + 1, p) & mine
        w = jax.lax.cond(due, lambda w: _checkpoint(w, p, False), lambda w: w, w)
        return w, out

    def reward(w, out, p):
        # only a choice that was the agent's own can be learned from
        return out.reward if p.allocation in ("self-select", "bidding") else None

    def summary(w, p):
        """The headline from the curves' ends the world kept: gains from the first to the last
        checkpoint of the primary kinds (numeric ones, else LLM agents), per kind when mixed."""
        count = jnp.bincount(w["kind"], length=len(KINDS)).astype(jnp.float32)
        numeric = count[:2].sum() > 0
        weight = jnp.where(jnp.arange(3) < 2, numeric, ~numeric) * count
        first, last, s = _scores(w, "first"), _scores(w, "last"), w["skill"]

        def mean(x):  # (splits, kinds) -> splits: the primary kinds weighted by their agents
            return jnp.nansum(x * weight, 1) / weight.sum()

        gain = mean(last) - mean(first)
        out = dict(zip(("train_gain", "heldout_gain", "ood_gain"), gain, strict=True))
        out["transfer_ratio"] = jnp.where(gain[0] != 0, gain[1] / gain[0], jnp.nan)
        used, tried = (
            jnp.where(numeric, s.reused[0], w["llm_stats"][1]),
            jnp.where(numeric, s.total[0], w["llm_stats"][0]),
        )
        out["artifact_reuse_rate"] = used / jnp.maximum(tried, 1.0)
        out["plasticity"] = jnp.where(tried > 0, gain[1] / (tried / 1000.0), jnp.nan)
        drop = jnp.where(numeric, w["best"] - w["domain"], jnp.nan)
        drop = jnp.concatenate([drop, jnp.where(numeric, jnp.nan, w["llm_best"] - w["llm_tasks"])])
        out["forgetting"] = jnp.nanmean(jnp.where(jnp.isfinite(drop), drop, jnp.nan))
        out["dol_index"], out["niches"] = w["dol"], w["niches"]
        for k in _kinds(p) if p.agents in ("mixed", "llm") else ():
            i = KINDS.index(k)
            per = last[:, i] - first[:, i]
            for j, name in enumerate(("train_gain", "heldout_gain", "ood_gain")):
                out[f"{name}.{k}"] = per[j]
            out[f"solved.{k}"] = last[:, i].mean()  # share of the evaluation tasks solved
        if "llm" in _kinds(p):
            spent = w["tokens"] - w["tokens_first"]
            held = last[1, 2] - first[1, 2]
            out["plasticity_tokens.llm"] = jnp.where(spent > 0, held / spent, jnp.nan)
        return out

    def llm_cohort(agents, client, p, ctx, r):
        from scenarios.skill_society.agents import SkillAgents

        return SkillAgents(agents, client, p, ctx, r)

    def run(self, cfg: SkillSocietyConfig, ctx: RunContext) -> dict[str, np.ndarray]:
        out = super().run(cfg, ctx)
        notes = achievements(cfg, ctx, out)
        if notes:
            ctx.report["notes"] = notes
        return out

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: SkillSocietyConfig) -> list[Path]:
        from scenarios.skill_society.plots import plot_all

        return plot_all(frame, plots_dir, config, plots_dir.parent)


def _kinds(p: SkillSocietyConfig) -> list[str]:
    """The kinds of agent the parameters name (a mixed split's, in KINDS order)."""
    if p.agents != "mixed":
        return [p.agents]
    named = parse_split(p.split or "")
    return [k for k in KINDS if named.get(k, 0) > 0]


def achievements(
    cfg: SkillSocietyConfig, ctx: RunContext, out: Mapping[str, np.ndarray]
) -> list[str]:
    """One line per kind of agent: evaluation tasks solved and held-out gain; and, when the
    LLM agents solved none, why and how to rerun with a capable model (a weak model that
    replies validly is a finding, not a failure of the run)."""
    lines = []
    for kind in KINDS:
        if f"solved.{kind}" not in out:
            continue
        solved, gain = np.nanmean(out[f"solved.{kind}"]), np.nanmean(out[f"heldout_gain.{kind}"])
        lines.append(
            f"{kind} agents: solved {solved:.0%} of evaluation tasks at the end, held-out gain {gain:+.3f}"
        )
    if "solved.llm" in out and np.nanmax(out["solved.llm"], initial=0.0) == 0:
        model = ctx.options.get("llm") or "local"
        sets = " ".join(
            f"--set {k}={v}" for k, v in cfg.model_dump(mode="json").items()
            if v != SkillSocietyConfig.model_fields[k].default and v is not None
        )  # fmt: skip
        command = f"society run skill-society --seed {ctx.seed} {sets} --llm <litellm model> [--api-base URL]"
        if model in ("local", LOCAL_MODEL):
            why = f"the embedded model ({LOCAL_MODEL}) is a small base model, there to exercise the plumbing"
        else:
            why = f"model {model} did not solve these puzzles"
        lines.append(
            f"LLM agents solved no evaluation task: {why}; rerun with a capable model: {command}"
        )
    return lines


def evaluate(w: dict, p: SkillSocietyConfig, first: bool) -> dict:
    """A checkpoint of the world ``w`` (what its LLM agents' turn calls, after their attempts
    count), compiled once per parameters."""
    return _evaluator(p.model_dump_json(), first)(w)


@lru_cache(maxsize=16)
def _evaluator(params: str, first: bool) -> Any:
    return jax.jit(
        partial(_checkpoint, p=SkillSocietyConfig.model_validate_json(params), first=first)
    )
