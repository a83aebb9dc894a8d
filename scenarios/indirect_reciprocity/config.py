"""Parameters of the indirect-reciprocity scenario (pydantic only: `society describe` starts fast)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from society.fields import Share, Split, StudyParams, default, in_order, mixture

NORMS = ("image-scoring", "standing", "stern-judging")
# Rule strategies: allc/alld always give/refuse; disc gives iff it sees the recipient as good;
# pdisc (paradoxical discriminator) gives iff it sees the recipient as bad; random gives with
# probability 1/2.
STRATEGIES = ("allc", "alld", "disc", "pdisc", "random")
Strategies = mixture(STRATEGIES, "strategies")
# Private assessment keeps a population x population matrix of views per replicate.
MAX_PRIVATE_POPULATION = 8192


class IndirectReciprocityConfig(StudyParams):
    """Indirect reciprocity: donors help by reputation under image scoring, standing or stern judging."""

    split_only_mixed = True
    split: Split | None = default(None)
    """agents=mixed only: proportions of each kind, e.g. 'rules:8,llm:2'"""

    population: int = default(100)
    """number of agents N (well mixed)"""

    strategies: Strategies = "disc:49,alld:1"
    """mix of rule strategies (relative weights): allc, alld, disc (gives iff it sees the recipient
    as good), pdisc (iff bad), random (gives with probability 1/2)"""

    norm: Literal["image-scoring", "standing", "stern-judging"] = "standing"
    """how an observer judges a donor: image-scoring (giving is good, refusing bad); standing (also
    refusing a bad recipient is good); stern-judging (good iff the donor gives to good and refuses
    bad recipients)"""

    assessment: Literal["public", "private"] = "public"
    """public: one shared reputation per agent; private: every agent keeps its own view of every
    other agent (an N x N matrix, N <= 8192)"""

    q: Share = 1.0
    """observation probability: public, the chance an act updates the donor's reputation; private,
    the chance each agent observes an act"""

    b: float = Field(1.0, gt=0.0)
    """benefit to the recipient of a gift"""

    c: float = Field(0.1, ge=0.0)
    """cost to the donor of a gift"""

    execution_error: Share = 0.0
    """probability that an intended gift fails (becomes a refusal)"""

    assessment_error: Share = 0.0
    """probability that an observer records the wrong reputation"""

    steps: int = Field(200, ge=1)
    """rounds of encounters: in each, every agent is donor once to a uniformly random other agent
    (so receives once on average)"""

    average_from: int = Field(0, ge=0)
    """headline averages use rounds >= this (rounds are 0 .. steps-1); earlier rounds are a
    transient"""

    record_every: int = default(1)
    learning: Literal["ga", "es", "reinforce"] = "ga"
    """learned agents: ga/es select policies on payoff every `generation` rounds; reinforce takes a
    policy-gradient step on each round's payoff"""

    generation: int = Field(10, ge=1)
    """learned agents (ga, es): rounds between selection steps"""

    mutation: float = default(0.05)
    llm_max_tokens: int = default(32)
    """LLM agents: reply limit in tokens (a one-word JSON)"""

    llm_memory: int = default(5)

    @model_validator(mode="after")
    def _check(self) -> IndirectReciprocityConfig:
        in_order(self, "average_from < steps")
        if self.assessment == "private" and self.population > MAX_PRIVATE_POPULATION:
            raise ValueError(
                f"assessment=private keeps a population x population matrix of views; "
                f"population must be <= {MAX_PRIVATE_POPULATION}, got {self.population}"
            )
        return self
