"""A new study in 50 lines: Mesa's Boltzmann wealth model, with rule, learned or LLM agents."""

import asyncio
from typing import Literal

import jax
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, create_model

from sim_core.experiment import Scenario
from society.cohorts import LearnedCohort, LLMCohort, RuleCohort, parse_mix
from society.llm.session import open_client
from society.metrics import gini
from society.population import Population

Give = create_model("Give", give=(bool, ...))  # an LLM agent's action: give a coin away?


class BoltzmannConfig(BaseModel):
    """Boltzmann wealth: agents with coins give one away at random; does wealth concentrate?"""
    model_config = ConfigDict(extra="forbid")  # a mistyped parameter is a one-line error
    agents: Literal["rules", "learned", "llm", "mixed"] = "rules"
    population: int = Field(100, ge=2)
    split: str = "rules:8,learned:1,llm:1"
    steps: int = Field(100, ge=1)


class Boltzmann(Scenario):
    name, Config, headline = "boltzmann", BoltzmannConfig, ("gini",)
    def run(self, cfg, ctx):
        return {"gini": [asyncio.run(self.one(cfg, ctx, r)) for r in range(ctx.replicates)]}

    async def one(self, cfg, ctx, r):  # one replicate
        rng, n, ids = ctx.rng.numpy("world", r), cfg.population, np.arange(cfg.population)
        kinds = parse_mix(cfg.split, n, rng) if cfg.agents == "mixed" else np.full(n, cfg.agents)
        async with open_client(ctx.options, run_dir=ctx.run_dir, needed="llm" in kinds, max_tokens=16) as client:
            make = {"rules": lambda a: RuleCohort("rules", a, "random", params={"random": {"p": 1.0}}),
                    "learned": lambda a: LearnedCohort("learned", a, features=["coins"], key=r),
                    "llm": lambda a: LLMCohort("llm", a, client, schema=Give, fallback=Give(give=True),
                                               template="You have {coins} coins. Give one away?")}  # fmt: skip
            pop = Population([make[k](np.flatnonzero(kinds == k)) for k in np.unique(kinds)])
            wealth, keys = np.ones(n), (ctx.rng.key("agents", r), ctx.rng.key("learn", r))
            for t in range(cfg.steps):
                obs = {"coins": wealth.astype(np.float32)}
                give = (await pop.act(ids, obs, jax.random.fold_in(keys[0], t)) > 0.5) & (wealth > 0)
                wealth += (change := np.bincount(rng.integers(0, n, give.sum()), minlength=n) - give)
                pop.learn(ids, obs, give.astype(np.int32), change, jax.random.fold_in(keys[1], t))
                ctx.recorder.record(float(t + 1), "gini", gini(wealth), replicate=r)
        return gini(wealth)
