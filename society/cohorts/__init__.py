"""Cohorts: groups of agents that decide the same way (rule, learned, LLM), one interface."""

from society.cohorts.base import Cohort
from society.cohorts.learned import POPULATION_RULES, RULES, LearnedCohort
from society.cohorts.llm import LLMCohort
from society.cohorts.mesa import MesaCohort, run_mesa
from society.cohorts.rules import (
    BUILTINS,
    DEFAULT_PARAMS,
    OBSERVATIONS,
    RuleCohort,
    StrategyFn,
    agent_bits,
    agent_keys,
    agent_uniform,
    parse_mix,
)

__all__ = [
    "BUILTINS",
    "DEFAULT_PARAMS",
    "OBSERVATIONS",
    "POPULATION_RULES",
    "RULES",
    "Cohort",
    "LLMCohort",
    "LearnedCohort",
    "MesaCohort",
    "RuleCohort",
    "StrategyFn",
    "agent_bits",
    "agent_keys",
    "agent_uniform",
    "parse_mix",
    "run_mesa",
]
