"""The network game played by cohorts: rule mixes, learned policies and LLM agents.

Every generation is one round: each agent chooses a cooperation level x in [0, 1] (rule
agents 0 or 1; a donation fraction for learned and LLM agents), all choices are applied at
once, and each agent earns the expected payoff of its games with its neighbours,
x_i (R n_i + S (k_i - n_i)) + (1 - x_i) (T n_i + P (k_i - n_i)) with n_i the sum of its
neighbours' x (the donation game: b n_i - c k_i x_i). Then rule agents imitate a random
neighbouring rule agent's strategy with the Fermi probability (``beta``), learned agents
learn (``learning``) and LLM agents remember the round.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import BaseModel, Field

from scenarios.network_game.config import NetworkGameConfig
from scenarios.network_game.dynamics import Rules, payoffs
from sim_core.errors import ConfigError
from sim_core.experiment import RunContext
from sim_core.graph import Neighbours, neighbour_mean, random_neighbour
from sim_core.scheduler import Scheduler
from society.cohorts import LearnedCohort, LLMCohort, RuleCohort, parse_mix
from society.driver import budget_reached, drive
from society.population import Population, build_population, kinds_of, uses_llm

FEATURES = ["neighbours_last", "my_last", "my_last_payoff"]

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


def game_text(cfg: NetworkGameConfig) -> str:
    if cfg.game == "donation":
        return (
            f"Cooperating fully costs you {cfg.c:g} per neighbour and gives each neighbour {cfg.b:g}; "
            "partial cooperation scales both."
        )
    R, S, T, P = cfg.matrix()
    return (
        f"Against each neighbour: both cooperate {R:g} each; you cooperate and they defect: you "
        f"{S:g}, they {T:g}; both defect {P:g} each (partial cooperation mixes these)."
    )


def population_of(
    cfg: NetworkGameConfig, ctx: RunContext, nb: Neighbours, replicate: int, client
) -> Population:
    """Cohorts over agents 0..N-1 as the config asks."""
    n = cfg.population
    rng = ctx.rng.numpy("agents", replicate)
    make = {
        "rules": lambda ids: RuleCohort("rules", ids, parse_mix(cfg.strategies or "allc:1,alld:1", ids.size, rng)),
        "learned": lambda ids: LearnedCohort(
            "learned", ids, features=FEATURES, actions="continuous",
            rule=cfg.learning, learning_rate=cfg.learning_rate, beta=cfg.beta, neighbours=nb,
            evolve_every=1 if cfg.learning == "social" else None,
            key=ctx.rng.key("learned-init", replicate),
        ),
        "llm": lambda ids: LLMCohort(
            "llm", ids, client, schema=Cooperate, fallback=Cooperate(cooperate=0.0),
            template=TEMPLATE.replace("{rules}", game_text(cfg)), memory_size=cfg.llm_memory,
            to_action=lambda m: m.cooperate,
        ),
    }  # fmt: skip
    return build_population(kinds_of(cfg, rng), np.arange(n), make, capacity=n)


def run_cohort_game(
    cfg: NetworkGameConfig, ctx: RunContext, rules: Rules, nb: Neighbours
) -> dict[str, np.ndarray]:
    """All replicates, one at a time (LLM calls dominate). Headline: cooperator_fraction, and
    the final cooperation level of each cohort (``cooperation.<cohort>``; NaN in a replicate
    without that cohort, e.g. a mixed split at small N)."""

    async def batch(reps: np.ndarray, client) -> tuple[dict, float]:
        out = await _replicate(cfg, ctx, rules, nb, int(reps[0]), client)
        return {k: np.asarray([v]) for k, v in out.items()}, float(cfg.steps)

    # Per-agent usage rows stay in the client.
    one_each = [np.array([r]) for r in range(ctx.replicates)]
    return drive(cfg, ctx, batch, llm=uses_llm(cfg), batches=one_each)


async def _replicate(
    cfg, ctx: RunContext, rules: Rules, nb: Neighbours, replicate: int, client
) -> dict[str, float]:
    try:
        pop = population_of(cfg, ctx, nb, replicate, client)
    except ValueError as exc:  # a bad strategy name or mix is user input
        raise ConfigError(str(exc)) from None
    n, rec = cfg.population, ctx.recorder
    everyone = np.arange(n)
    key = ctx.rng.key("dynamics", replicate)
    state = {
        "x": np.full(n, 0.5, np.float32),
        "pay": np.zeros(n, np.float32),
        "total": 0.0,
        "count": 0,
    }
    sim = Scheduler()
    degree = np.asarray(nb.degree)

    async def round_(g: int) -> None:
        k = jax.random.fold_in(key, g)
        last = jnp.asarray(state["x"])
        nbr_last = np.asarray(neighbour_mean(nb, last))
        obs = {
            "neighbours_last": nbr_last,
            "partner_last": (nbr_last >= 0.5).astype(
                np.int32
            ),  # tft & co: most neighbours cooperated
            "my_last": state["x"],
            "my_last_payoff": state["pay"],
            "round": np.full(n, g),
            "degree": degree,
        }
        x = np.clip(np.asarray(await pop.act(everyone, obs, k), dtype=np.float32), 0.0, 1.0)
        pay = np.asarray(payoffs(rules, nb, jnp.asarray(x)))
        pop.learn(everyone, obs, x, pay, k)
        if "rules" in (c.name for c in pop.cohorts):
            _imitate_strategies(pop.cohort("rules"), nb, pay, cfg.beta, jax.random.fold_in(k, 7))
        state["x"], state["pay"] = x, pay
        if g % cfg.record_every == 0 or g == cfg.steps:
            rec.record(float(g), "cooperator_fraction", float(x.mean()), replicate=replicate)
            rec.record(float(g), "mean_payoff", float(pay.mean()), replicate=replicate)
            for c in pop.cohorts:
                m = pop.cohort_of == pop.cohorts.index(c)
                rec.record(
                    float(g), "cooperation", float(x[m].mean()), replicate=replicate, cohort=c.name
                )
        if cfg.average_from is not None and g >= cfg.average_from:
            state["total"] += float(x.mean())
            state["count"] += 1
        budget_reached(client, ctx, sim)

    for g in range(1, cfg.steps + 1):
        sim.at(float(g), round_, g)
    await sim.arun()
    x = state["x"]
    out = {
        f"cooperation.{c.name}": float(x[pop.cohort_of == i].mean())
        for i, c in enumerate(pop.cohorts)
    }
    averaged = cfg.average_from is not None and state["count"]
    out["cooperator_fraction"] = state["total"] / state["count"] if averaged else float(x.mean())
    return out


def _imitate_strategies(
    rules: RuleCohort, nb: Neighbours, pay: np.ndarray, beta: float, key: jax.Array
) -> None:
    """Each rule agent copies a random neighbour's strategy with the Fermi probability, if
    that neighbour is a rule agent too (vectorised over the cohort)."""
    me = rules.agents
    k1, k2 = jax.random.split(key)
    j = np.asarray(random_neighbour(nb, k1, jnp.asarray(me)))
    member = np.isin(j, me) & (j != me)
    p = 1.0 / (1.0 + np.exp(-beta * (pay[j] - pay[me])))
    copy = member & (np.asarray(jax.random.uniform(k2, (me.size,))) < p)
    if copy.any():
        rules.set_strategy(me[copy], rules.strategy_of(j[copy]))
