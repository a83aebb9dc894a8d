"""Parameters of the commons (pydantic only, so `society list/describe` start fast)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from society.fields import Kind, Share, SharedConfig, Split, default
from society.mix import parse_weights

RULE_STRATEGIES = ("sustainable", "greedy", "fixed", "proportional")


def parse_strategies(spec: str) -> dict[str, float]:
    """``"sustainable:4,greedy:1"`` -> weights of the rule agents' strategies."""
    return parse_weights(spec, RULE_STRATEGIES, "strategies")


class CommonsConfig(SharedConfig):
    """Common-pool resource (GovSim fishery): logistic regrowth, collapse, talk (Piatti et al. 2024)."""

    agents: Kind = default("llm")
    """who fishes: llm (GovSim studies societies of LLM agents; the local model unless --llm is
    given), rules (see strategies), learned (small policies trained by REINFORCE across episodes),
    or mixed (see split)"""

    split: Split = default("rules:1,learned:1,llm:1")
    population: int = default(5, ge=2, le=1000)
    """fishers sharing the lake (GovSim: 5)"""

    capacity: float = Field(100.0, gt=0)
    """carrying capacity K of the lake in tons (GovSim: 100)"""

    initial_stock: float | None = Field(None, gt=0)
    """tons in the lake at the start of each episode (default: capacity)"""

    regrowth: Literal["logistic", "doubling"] = "logistic"
    """after fishing the remaining stock S regrows to min(K, S + growth_rate*S*(1 - S/K)) (logistic)
    or min(K, 2S) (doubling: GovSim's exact rule)"""

    growth_rate: float = Field(2.0, ge=0)
    """logistic growth rate g; 2 makes the logistic lake agree with GovSim's doubling where it
    matters (K/2 left regrows to exactly K, so the sustainable catch of a full lake is K/2); ignored
    with regrowth=doubling"""

    collapse_threshold: float = Field(5.0, ge=0)
    """the lake collapses, ending the episode, when fishing leaves fewer than this many tons
    (GovSim: 5)"""

    steps: int = Field(12, ge=1)
    """months per episode (GovSim: 12)"""

    episodes: int = Field(1, ge=1)
    """episodes played in sequence by the same agents, each on a fresh lake; learned agents learn
    between them; headline metrics are the last episode's"""

    communication: bool = True
    """before each month's fishing, every LLM agent posts one message that all fishers of its lake
    see (GovSim's discussion); rule and learned agents stay silent"""

    universalization: bool = False
    """tell LLM agents each month: if everyone fishes more than the per-fisher sustainable catch,
    the lake will shrink (GovSim's universalization prompt)"""

    strategies: str = "sustainable:1"
    """rule agents' strategy mix, e.g. 'sustainable:4,greedy:1': sustainable (its 1/N of the largest
    catch after which the lake regrows to its current size), greedy (its 1/N of the whole stock),
    fixed (fixed_harvest tons), proportional (harvest_fraction of the stock)"""

    fixed_harvest: float = Field(10.0, ge=0)
    """rule strategy 'fixed': tons asked for every month"""

    harvest_fraction: Share = 0.1
    """rule strategy 'proportional': share of the current stock"""

    learning_rate: float = default(0.05, ge=0)
    """learned agents (policy: (stock/K, month/periods) -> share of the equal split S/N): REINFORCE
    step size; the return of every decision is the agent's total catch of the episode in units of
    the sustainable catch"""

    message_chars: int = Field(300, ge=20, le=2000)
    """LLM messages are cut to this many characters"""

    llm_temperature: float = default(0.0)
    """LLM agents: sampling temperature (GovSim: 0, greedy)"""

    llm_max_tokens: int = default(300)
    """LLM agents: reply limit in tokens (a short JSON, brief reason)"""

    @field_validator("strategies")
    @classmethod
    def _strategies(cls, v: str) -> str:
        parse_strategies(v)
        return v

    @model_validator(mode="after")
    def _stocks(self) -> CommonsConfig:
        if self.initial_stock is not None and self.initial_stock > self.capacity:
            raise ValueError(
                f"initial_stock must be at most capacity ({self.capacity:g}), "
                f"got {self.initial_stock:g}"
            )
        if self.collapse_threshold >= self.start_stock:
            raise ValueError(
                f"collapse_threshold must be below the initial stock ({self.start_stock:g}), "
                f"got {self.collapse_threshold:g}"
            )
        return self

    @property
    def start_stock(self) -> float:
        return self.capacity if self.initial_stock is None else self.initial_stock
