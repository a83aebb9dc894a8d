"""Parameters of the indirect-reciprocity scenario (pydantic only: `society describe` starts fast)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from society.fields import KINDS, Kind, Split, StudyParams
from society.mix import parse_weights

NORMS = ("image-scoring", "standing", "stern-judging")
# Rule strategies: allc/alld always give/refuse; disc gives iff it sees the recipient as good;
# pdisc (paradoxical discriminator) gives iff it sees the recipient as bad; random gives with
# probability 1/2.
STRATEGIES = ("allc", "alld", "disc", "pdisc", "random")
# Private assessment keeps a population x population matrix of views per replicate.
MAX_PRIVATE_POPULATION = 8192


class IndirectReciprocityConfig(StudyParams):
    """Indirect reciprocity: donors help by reputation under image scoring, standing or stern judging."""

    agents: Kind = Field(
        "rules", description="who decides: rule strategies, learned policies, LLM agents, or a mix"
    )
    split: Split | None = Field(
        None,
        description="agents=mixed only: proportions of kinds, e.g. 'rules:8,learned:1,llm:1'",
    )
    population: int = Field(100, ge=2, description="number of agents N (well mixed)")
    strategies: str = Field(
        "disc:49,alld:1",
        description="mix of rule strategies (relative weights): allc, alld, disc (gives iff it "
        "sees the recipient as good), pdisc (iff bad), random (gives with probability 1/2)",
    )
    norm: Literal["image-scoring", "standing", "stern-judging"] = Field(
        "standing",
        description="how an observer judges a donor: image-scoring (giving is good, refusing "
        "bad); standing (also refusing a bad recipient is good); stern-judging (good iff the "
        "donor gives to good and refuses bad recipients)",
    )
    assessment: Literal["public", "private"] = Field(
        "public",
        description="public: one shared reputation per agent; private: every agent keeps its "
        "own view of every other agent (an N x N matrix, N <= 8192)",
    )
    q: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="observation probability: public, the chance an act updates the donor's "
        "reputation; private, the chance each agent observes an act",
    )
    b: float = Field(1.0, gt=0.0, description="benefit to the recipient of a gift")
    c: float = Field(0.1, ge=0.0, description="cost to the donor of a gift")
    execution_error: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="probability that an intended gift fails (becomes a refusal)",
    )
    assessment_error: float = Field(
        0.0, ge=0.0, le=1.0, description="probability that an observer records the wrong reputation"
    )
    steps: int = Field(
        200,
        ge=1,
        description="rounds of encounters: in each, every agent is donor once to a uniformly "
        "random other agent (so receives once on average)",
    )
    average_from: int = Field(
        0,
        ge=0,
        description="headline averages use rounds >= this (rounds are 0 .. steps-1); "
        "earlier rounds are a transient",
    )
    record_every: int = Field(1, ge=1, description="rounds between recorded time-series rows")
    learning: Literal["ga", "es", "reinforce"] = Field(
        "ga",
        description="learned agents: ga/es select policies on payoff every `generation` "
        "rounds; reinforce takes a policy-gradient step on each round's payoff",
    )
    generation: int = Field(
        10, ge=1, description="learned agents (ga, es): rounds between selection steps"
    )
    mutation: float = Field(
        0.05, ge=0.0, description="learned agents (ga): std of the noise added to copied policies"
    )
    llm_temperature: float = Field(
        0.0, ge=0.0, le=2.0, description="LLM agents: sampling temperature"
    )
    llm_max_tokens: int = Field(
        32, gt=0, description="LLM agents: reply limit in tokens (a one-word JSON)"
    )
    llm_memory: int = Field(
        5, ge=0, description="LLM agents: how many of their own past moves they are shown"
    )
    llm_budget_tokens: int | None = Field(
        None,
        gt=0,
        description="LLM agents: stop the run at the end of the round in which this many "
        "tokens have been used (None: no limit)",
    )

    @field_validator("strategies")
    @classmethod
    def _strategies(cls, v: str) -> str:
        parse_weights(v, STRATEGIES, "strategies")
        return v

    @model_validator(mode="after")
    def _check(self) -> IndirectReciprocityConfig:
        if self.agents == "mixed":
            parse_weights(self.split, KINDS, "split")
        elif self.split is not None:
            raise ValueError(f"split applies only to agents=mixed (agents is {self.agents!r})")
        if self.average_from >= self.steps:
            raise ValueError(f"average_from ({self.average_from}) must be < steps ({self.steps})")
        if self.assessment == "private" and self.population > MAX_PRIVATE_POPULATION:
            raise ValueError(
                f"assessment=private keeps a population x population matrix of views; "
                f"population must be <= {MAX_PRIVATE_POPULATION}, got {self.population}"
            )
        return self

    def kinds(self) -> dict[str, float]:
        """Proportions of agent kinds (one kind unless agents=mixed)."""
        if self.agents == "mixed":
            return parse_weights(self.split or "", KINDS, "split")
        return {self.agents: 1.0}
