"""Parameters of boltzmann-wealth: Mesa's ``BoltzmannWealth`` names and defaults."""

from typing import Literal

from pydantic import Field, model_validator

from society.fields import ModelParams


class BoltzmannWealthParams(ModelParams):
    """Boltzmann wealth (Mesa's benchmark): agents wander a grid and give a coin to a cellmate.

    ``order``: sequential, each agent moves then gives in a shuffled order (Mesa's benchmark);
    tutorial, all move, then all give (Mesa's tutorial ``MoneyModel``)."""

    n: int = Field(100, ge=1, le=10**7)
    """number of agents"""

    width: int = Field(10, ge=1, le=10**4)
    """grid width"""

    height: int = Field(10, ge=1, le=10**4)
    """grid height"""

    steps: int = Field(100, ge=1, le=10**6)
    """steps to simulate"""

    order: Literal["sequential", "tutorial"] = "sequential"
    """sequential (Mesa's benchmark) or tutorial (all move, then give)"""

    @model_validator(mode="after")
    def _fits(self) -> "BoltzmannWealthParams":
        if self.width * self.height * self.n >= 2**31:
            raise ValueError(
                f"n x width x height must be below 2**31 (got {self.n * self.width * self.height})"
            )
        return self
