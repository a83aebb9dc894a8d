"""A study in 25 lines: Boltzmann wealth, with rule, learned or LLM agents deciding to give."""

import jax
import jax.numpy as jnp

from society.metrics import gini_jax
from society.study import Discrete, Study, StudyParams


class Boltzmann(Study):
    """Boltzmann wealth: agents with coins give one away at random; does wealth concentrate?"""

    class Params(StudyParams):  # agents, population, split, steps, llm_*... come with it
        split: str = "rules:8,learned:1,llm:1"
        llm_max_tokens: int = 16

    actions = Discrete(("keep", "give"), rule=lambda o, p: o["coins"] > 0)
    prompt = "You have {coins:.0f} coins. Answer give to give one coin to a random agent, keep to keep it."
    reporters = {"gini": lambda w, out: gini_jax(w)}

    def init(key, p):
        return jnp.ones(p.population)

    def observe(w, p):
        return {"coins": w}

    def step(key, w, act, p):
        give = ((act == 1) & (w > 0)).astype(w.dtype)
        got = jnp.zeros_like(w).at[jax.random.randint(key, w.shape, 0, w.size)].add(give)
        return w - give + got, got - give

    def reward(w, change, p):
        return change
