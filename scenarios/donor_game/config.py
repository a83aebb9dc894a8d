"""Parameters of the donor game (pydantic only, so `society describe` starts fast)."""

from __future__ import annotations

from pydantic import Field, field_validator

from society.fields import Kind, Share, SharedConfig, Split, default


class DonorGameConfig(SharedConfig):
    """Donor game of LLM societies: cultural evolution of cooperation (Vallinder & Hughes 2024)."""

    agents: Kind = default("llm")
    """who plays: llm (through the LLM client; the local model unless --llm is given), learned
    (small policies, REINFORCE within a life and selection across generations), rules (give a fixed
    share give_fraction), or mixed (see split)"""

    split: Split = default("rules:1,learned:1,llm:1")
    population: int = default(12)
    """agents playing each generation (even: two halves)"""

    steps: int = Field(12, ge=2)
    """rounds per game (even): a bipartite round-robin between the halves over rounds/2 rounds with
    the donor side alternating, then the same pairs with roles reversed"""

    generations: int = Field(10, ge=1)
    """generations; each plays the game twice"""

    endowment: float = Field(10.0, gt=0)
    """resources of every agent at the start of each game"""

    multiplier: float = Field(2.0, ge=0)
    """the recipient receives multiplier x the units the donor gives up"""

    trace_depth: int = Field(3, ge=1)
    """donors see the recipient's last action, that partner's action before it, and so on: this many
    links of the chain"""

    punishment: bool = False
    """costly punishment: instead of giving, a donor may pay x units to remove punishment_loss*x
    from the recipient (floored at 0)"""

    punishment_loss: float = Field(2.0, gt=0)
    """units removed from the recipient per unit the punisher pays"""

    give_fraction: Share = 0.5
    """rule agents: share of their current resources they give"""

    learning_rate: float = default(0.05, ge=0.0)
    """learned agents: REINFORCE step size on each donation's return (resources at game end minus
    resources before it); 0 = selection only"""

    mutation: float = default(0.05)
    llm_temperature: float = default(0.8)
    """LLM agents: sampling temperature (0.8 as in the authors' runs)"""

    llm_max_tokens: int = default(300)
    """LLM agents: reply limit in tokens (a short JSON, brief reasoning)"""

    @field_validator("population", "steps")
    @classmethod
    def _even(cls, v: int, info) -> int:
        if v % 2:
            raise ValueError(f"{info.field_name} must be even (two halves / two passes), got {v}")
        return v
