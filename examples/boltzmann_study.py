"""A new study in 50 lines: Mesa's Boltzmann wealth model, with rule, learned or LLM agents."""

import jax
import numpy as np
from pydantic import Field, create_model

from scenarios.fields import SharedConfig
from sim_core.experiment import Scenario
from society.cohorts import LearnedCohort, LLMCohort, RuleCohort
from society.driver import drive
from society.metrics import gini
from society.population import build_population, kinds_of, uses_llm

Give = create_model("Give", give=(bool, ...))  # an LLM agent's action: give a coin away?


class BoltzmannConfig(SharedConfig):  # agents, population, split, learning_rate, llm_*
    """Boltzmann wealth: agents with coins give one away at random; does wealth concentrate?"""

    split: str = "rules:8,learned:1,llm:1"
    llm_max_tokens: int = 16
    steps: int = Field(100, ge=1)


class Boltzmann(Scenario):
    name, Config, headline = "boltzmann", BoltzmannConfig, ("gini",)

    def run(self, cfg, ctx):
        async def batch(reps, client):  # one replicate per batch
            return {"gini": [await self.one(cfg, ctx, int(reps[0]), client)]}, float(cfg.steps)

        return drive(cfg, ctx, batch, llm=uses_llm(cfg), batches=[np.array([r]) for r in range(ctx.replicates)])

    async def one(self, cfg, ctx, r, client):  # one replicate
        rng, n, ids = ctx.rng.numpy("world", r), cfg.population, np.arange(cfg.population)
        make = {"rules": lambda a: RuleCohort("rules", a, "random", params={"random": {"p": 1.0}}),
                "learned": lambda a: LearnedCohort("learned", a, features=["coins"], lr=cfg.learning_rate, key=r),
                "llm": lambda a: LLMCohort("llm", a, client, schema=Give, fallback=Give(give=True),
                                           template="You have {coins} coins. Give one away?")}  # fmt: skip
        pop = build_population(kinds_of(cfg, rng), ids, make)
        wealth, keys = np.ones(n), (ctx.rng.key("agents", r), ctx.rng.key("learn", r))
        for t in range(cfg.steps):
            obs = {"coins": wealth.astype(np.float32)}
            give = (await pop.act(ids, obs, jax.random.fold_in(keys[0], t)) > 0.5) & (wealth > 0)
            wealth += (change := np.bincount(rng.integers(0, n, give.sum()), minlength=n) - give)
            pop.learn(ids, obs, give.astype(np.int32), change, jax.random.fold_in(keys[1], t))
            ctx.recorder.record(float(t + 1), "gini", gini(wealth), replicate=r)
        return gini(wealth)
