"""Parameters of the network game (pydantic only, so `society describe` starts fast)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from society.fields import GraphFields, Kind, Share, SharedConfig, Split, default, in_order
from society.mix import parse_weights

# Preset payoff matrices (R, S, T, P); any of them can be overridden.
PRESETS = {
    "pd": (3.0, 0.0, 5.0, 1.0),  # Axelrod's prisoner's dilemma
    "snowdrift": (3.0, 1.0, 5.0, 0.0),
    "stag-hunt": (5.0, 0.0, 3.0, 1.0),
}
# Rule agents' strategies in a mix (tft and gtft: most neighbours cooperated last round).
STRATEGIES = ("allc", "alld", "tft", "gtft", "random")


class NetworkGameConfig(GraphFields, SharedConfig):
    """Evolutionary 2-strategy games (cooperate/defect) on a graph, fully vectorised."""

    population: int = default(1000)
    """number of agents N (a square number for lattice)"""

    game: Literal["donation", "pd", "snowdrift", "stag-hunt", "custom"] = "donation"
    """donation (b, c) or a 2x2 game with payoffs R, S, T, P"""

    b: float = 5.0
    """donation game: benefit to the recipient"""

    c: float = 1.0
    """donation game: cost to the donor"""

    R: float | None = None
    """reward (C meets C); default from the game preset"""

    S: float | None = None
    """sucker's payoff (C meets D)"""

    T: float | None = None
    """temptation (D meets C)"""

    P: float | None = None
    """punishment (D meets D)"""

    self_interaction: bool = False
    """each agent also plays against itself"""

    payoff: Literal["accumulated", "average"] = "accumulated"
    """sum or mean over games played"""

    update: Literal[
        "death-birth", "birth-death", "imitation", "fermi", "best-neighbour", "proportional"
    ] = "death-birth"
    """strategy update rule"""

    selection: Share = 0.1
    """selection intensity w: fitness 1 - w + w*payoff (death-birth, birth-death, imitation);
    negative fitness counts as 0"""

    beta: float = Field(1.0, ge=0.0)
    """fermi: imitation strength"""

    synchronous: bool | None = None
    """all agents update at once (default: no, except best-neighbour and proportional, which are
    synchronous by definition)"""

    init_cooperators: float | Literal["single"] = 0.5
    """initial share of cooperators in [0, 1] (placed at random), or 'single'"""

    steps: int = Field(200, ge=1)
    """generations (asynchronous: N single-agent updates each); the cap when until=fixation"""

    until: Literal["steps", "fixation"] = "steps"
    """stop after steps, or at fixation"""

    average_from: int | None = Field(None, ge=0)
    """cooperator_fraction is averaged over generations >= this (default: final value)"""

    record_every: int = default(1)
    agents: Kind = default("rules")
    """who decides: rules (the evolutionary game above, or a rule mix with 'strategies'), learned
    policies, LLM agents, or a mix given by 'split'; all but plain rules give continuous donation
    levels in [0, 1] and one round per generation"""

    split: Split = default("rules:8,learned:1,llm:1")
    strategies: str | None = None
    """rule agents' strategy mix, e.g. 'allc:1,alld:1,tft:2' (allc, alld, tft, gtft, random); rule
    agents then imitate strategies by the Fermi rule with 'beta'"""

    learning: Literal["reinforce", "social"] = "reinforce"
    """learned agents: policy gradient within a lifetime, or Fermi imitation of a neighbour's policy
    (with 'beta')"""

    learning_rate: float = default(0.05)
    """learned agents: learning rate"""

    llm_max_tokens: int = default(32)
    """LLM agents: reply limit in tokens (a one-number JSON)"""

    llm_memory: int = default(4)
    shard: bool | None = None
    """split the agent axis over all devices with jax.sharding (one population larger than a
    device); default: when more than one device is visible. Results are the same either way"""

    @field_validator("strategies")
    @classmethod
    def _strategies(cls, v: str | None) -> str | None:
        if v is not None:
            unknown = set(parse_weights(v, None, "strategies")) - set(STRATEGIES)
            if unknown:
                raise ValueError(
                    f"unknown strategy {sorted(unknown)[0]!r} (accepted: {', '.join(STRATEGIES)})"
                )
        return v

    @model_validator(mode="after")
    def _check(self) -> NetworkGameConfig:
        if isinstance(self.init_cooperators, float) and not 0.0 <= self.init_cooperators <= 1.0:
            raise ValueError(
                f"init_cooperators must lie in [0, 1] or be 'single', got {self.init_cooperators}"
            )
        if self.update in ("best-neighbour", "proportional") and self.synchronous is False:
            raise ValueError(
                f"update={self.update} is synchronous by definition; drop synchronous=false"
            )
        if self.cohort_path() and self.until == "fixation":
            raise ValueError(
                "until=fixation needs the plain evolutionary game (agents=rules, no strategies)"
            )
        in_order(self, "average_from <= steps")
        R, S, T, P = self.matrix()
        orders = {
            "pd": (T > R > P >= S, "T > R > P >= S"),
            "snowdrift": (T > R > S > P, "T > R > S > P"),
            "stag-hunt": (R > T >= P > S, "R > T >= P > S"),
        }
        if self.game in orders and not orders[self.game][0]:
            raise ValueError(
                f"payoffs R={R}, S={S}, T={T}, P={P} are not a {self.game} game "
                f"({orders[self.game][1]}); use game=custom for any 2x2 matrix"
            )
        if self.game == "custom" and None in (self.R, self.S, self.T, self.P):
            raise ValueError("game=custom needs all of R, S, T, P")
        return self

    def matrix(self) -> tuple[float, float, float, float]:
        """(R, S, T, P): payoff to the focal player for CC, CD, DC, DD."""
        if self.game == "donation":
            return (self.b - self.c, -self.c, self.b, 0.0)
        preset = PRESETS.get(self.game, (0.0, 0.0, 0.0, 0.0))
        given = (self.R, self.S, self.T, self.P)
        return tuple(float(g) if g is not None else p for g, p in zip(given, preset, strict=True))

    def cohort_path(self) -> bool:
        """True when agents are cohorts acting every round (rule mixes, learned, LLM)."""
        return self.agents != "rules" or self.strategies is not None

    def is_synchronous(self) -> bool:
        if self.update in ("best-neighbour", "proportional"):
            return True
        return bool(self.synchronous)
