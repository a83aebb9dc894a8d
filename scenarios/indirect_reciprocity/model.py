"""The indirect-reciprocity scenario on the contract: donors judged by a social norm.

A round (``dynamics.py`` has the rules as pure functions): every agent is donor once, to a
uniformly random other agent, and gives or refuses from its view of the recipient; then
payoffs (b to a recipient, -c to a donor that gave) and the donors' new reputations are
settled at once. The world holds the coming round's draws (each donor's recipient, and a
coin for the ``random`` strategy), so a rule agent's choice is a function of its
observation. Rule agents play the ``strategies`` mix (counts by largest remainder among the
rule agents, in an order shuffled per replicate): allc, alld, disc (gives iff it sees the
recipient as good), pdisc (iff bad), random; learned agents see their view of the recipient
and earn the round's payoff; LLM agents are told the rules, their view, their own
reputation (public) and their payoff so far.

Headline: ``cooperation_rate`` (share of encounters in which a gift was made, over rounds
>= ``average_from``) and ``payoff.<strategy>`` for every rule strategy or agent kind present:
the mean payoff per agent per round over the same rounds. Recorded each round:
``cooperation_rate``, ``good_share``, and per ``strategy`` the round's mean ``payoff`` and
``give_if_good`` / ``give_if_bad``, the donors' decisions by their view of the recipient
over the averaged rounds so far (the signature of indirect reciprocity).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pandas as pd

from scenarios.indirect_reciprocity import prompts
from scenarios.indirect_reciprocity.config import STRATEGIES, IndirectReciprocityConfig
from scenarios.indirect_reciprocity.dynamics import (
    donor_views,
    draw_recipients,
    good_share,
    make_game,
    settle,
    uniform,
)
from sim_core.experiment import save_figure, subplots
from sim_core.rng import inverse
from society.cohorts.rules import labels as rule_labels
from society.cohorts.rules import mixture
from society.study import Discrete, Study

TALLY = ("payoff", "gave_good", "good", "gave_bad", "bad")  # per label, over counted rounds
LABELS = (*STRATEGIES, "learned", "llm")  # an agent's label: its rule strategy, or its kind


def _mix(p):
    """The rule strategies present with their counts, then the kinds present with theirs."""
    return mixture(p.agents, p.split, p.strategies, p.population)


def _game(p):
    return make_game(p.norm, private=p.assessment == "private", q=p.q, b=p.b, c=p.c,
                     execution_error=p.execution_error, assessment_error=p.assessment_error)  # fmt: skip


def _labels(w, p):
    """Each agent's label (an index into ``LABELS``): its strategy, or its kind's."""
    return rule_labels(w, p.agents, _mix(p)[0], LABELS)


def _coming(key, p):
    """The coming round's draws: each donor's recipient, and a coin for ``random`` if present."""
    k_pair, k_coin = jax.random.split(key)
    if "random" not in _mix(p)[0]:
        return {"j": draw_recipients(k_pair, p.population)}
    return {"j": draw_recipients(k_pair, p.population), "coin": uniform(jax.random.bits(k_coin, (p.population,)))}  # fmt: skip


def _rate(gave, seen):
    return lambda w, out: jnp.where(w["tally"][:, seen] > 0, w["tally"][:, gave] / w["tally"][:, seen], jnp.nan)  # fmt: skip


def rule(o, p):
    """One rule agent: give (1) or refuse (0) by its strategy (an index into STRATEGIES)."""
    good = o["partner_good"] > 0
    return jnp.stack([True, False, good, ~good, o.get("coin", 1.0) < 0.5])[o["strategy"]]


class IndirectReciprocity(Study):
    """Indirect reciprocity with image scoring, standing or stern judging."""

    Params = IndirectReciprocityConfig
    name = "indirect-reciprocity"
    unit = "round"
    labels = {"strategy": str, "agent": int, "cohort": str}
    actions = Discrete(("refuse", "give"), rule=rule, fallback=0)
    prompt = staticmethod(prompts.template)
    system = prompts.SYSTEM
    reply = prompts.Decision
    features = ("partner_good",)
    reporters = {
        "cooperation_rate": lambda w, out: out["gave"].mean(dtype=jnp.float32),
        "good_share": lambda w, out: good_share(w["rep"]),
        "payoff": lambda w, out: out["payoff"],
        "give_if_good": _rate(1, 2),
        "give_if_bad": _rate(3, 4),
    }
    axes = dict.fromkeys(("payoff", "give_if_good", "give_if_bad"), ("strategy",))
    axis_labels = {"strategy": LABELS}  # a label absent (NaN) has no rows
    headline = ()  # summary: averages over the rounds from average_from

    def init(key, p):
        n, k_order, k_next = p.population, *jax.random.split(key)
        order = jax.random.permutation(k_order, n).astype(jnp.int32)
        place = inverse(order)
        return {"rep": jnp.ones((n, n) if p.assessment == "private" else (n,), jnp.int8),
                "kind": jnp.zeros(n, jnp.int32), "order": order, "place": place,
                "payoff": jnp.zeros(n), "t": jnp.int32(0), "counted": jnp.int32(0), "coop": jnp.float32(0),
                "tally": jnp.zeros((len(LABELS), len(TALLY))),
                **_coming(k_next, p)}  # fmt: skip

    def observe(w, p):
        """What rule and learned agents need; what LLM agents are told only when there are some
        (the cohorts' rows of every field are copied each round)."""
        obs = {
            "partner_good": donor_views(_game(p), w["rep"], w["j"]),
            "strategy": _labels(w, p).astype(jnp.int8),  # for rule agents: a STRATEGIES index
        }
        if "coin" in w:
            obs["coin"] = w["coin"]
        if "llm" in _mix(p)[1]:
            n, private = p.population, p.assessment == "private"
            obs |= {
                "my_good": jnp.full(n, -1, jnp.int8) if private else w["rep"],
                "my_payoff": w["payoff"],
                "round": jnp.full(n, w["t"]),
            }
        return obs

    def step(key, w, act, p):
        game, (k_settle, k_next) = _game(p), jax.random.split(key)
        seen = donor_views(game, w["rep"], w["j"]).astype(jnp.float32)
        rep, gave, pay = settle(game, w["rep"], w["j"], act, k_settle)
        label = _labels(w, p)
        onehot = (label[:, None] == jnp.arange(w["tally"].shape[0])).astype(jnp.float32)
        a = jnp.asarray(act, jnp.float32)
        per = jnp.stack([pay, a * seen, seen, a - a * seen, 1 - seen]) @ onehot  # (TALLY, labels)
        count = onehot.sum(0)  # the mean payoff: NaN for labels absent (no rows)
        per = per.at[0].set(jnp.where(count > 0, per[0] / jnp.maximum(count, 1.0), jnp.nan))
        counted = w["t"] >= p.average_from
        coop = gave.mean(dtype=jnp.float32)
        return {**w, "rep": rep, "payoff": w["payoff"] + pay, "t": w["t"] + 1,
                "counted": w["counted"] + counted, "coop": w["coop"] + jnp.where(counted, coop, 0.0),
                "tally": w["tally"] + jnp.where(counted, jnp.nan_to_num(per.T), 0.0),
                **_coming(k_next, p)}, {"gave": gave, "earned": pay, "payoff": per[0]}  # fmt: skip

    reward = "earned"

    def summary(w, p):
        n = jnp.where(w["counted"] > 0, w["counted"], jnp.nan)
        pay = w["tally"][:, 0] / n
        present = (*_mix(p)[0], *(k for k in _mix(p)[1] if k != "rules"))
        return {"cooperation_rate": w["coop"] / n, **{f"payoff.{x}": pay[LABELS.index(x)] for x in present}}  # fmt: skip

    def render(fields, p):
        return prompts.template(p).format(**prompts.fields(fields))

    def cohort_options(p):
        evolve = None if p.learning == "reinforce" else p.generation
        return {"learned": {"rule": p.learning, "evolve_every": evolve, "mutation": p.mutation},
                "llm": {"memory_size": p.llm_memory}}  # fmt: skip

    def memory_estimate(self, config: Any, replicates: int) -> tuple[int, str] | None:
        """Private assessment holds n x n views and draws n x n uniforms a round: about 32
        bytes per pair of agents per replicate (measured: 0.55 GB at n = 4096)."""
        if config.assessment == "public":
            return super().memory_estimate(config, replicates)
        n = config.population
        return 32 * n * n * replicates, f"assessment=private, population={n}"

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: Any) -> list[Path]:
        """cooperation.png (cooperation rate and share of good reputations per round) and
        payoff.png (each strategy's mean payoff per round up to each round), means over
        replicates against the round."""
        written = []
        panels = {
            "cooperation": [("cooperation_rate", None), ("good_share", None)],
            "payoff": [
                ("payoff", s)
                for s in frame.loc[frame["metric"] == "payoff", "strategy"].dropna().unique()
            ],
        }
        for fname, lines in panels.items():
            means = {}
            for metric, strategy in lines:
                sub = frame[frame["metric"] == metric]
                if strategy is not None:
                    sub = sub[sub["strategy"] == strategy]
                mean = sub.groupby("time")["value"].mean()
                if not mean.empty:  # payoff: single rounds are noisy, the average up to each
                    means[strategy or metric] = mean.expanding().mean() if strategy else mean
            if not means:
                continue
            fig, ax = subplots(plots_dir, figsize=(6, 3.5), dpi=100)
            for label, mean in means.items():
                ax.plot(mean.index, mean.values, lw=1.5, label=label)
            ax.set_xlabel("round")
            if fname == "payoff":
                ax.set_ylabel("mean payoff per round so far")
            else:
                ax.set_ylabel("share")
                ax.set_ylim(-0.02, 1.02)
            ax.legend(loc="best", fontsize=8)
            written.append(save_figure(fig, plots_dir / f"{fname}.png"))
        return written
