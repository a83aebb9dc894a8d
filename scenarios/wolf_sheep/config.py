"""Parameters of wolf-sheep: Mesa's ``WolfSheep`` names and defaults."""

from pydantic import Field, model_validator

from society.fields import ModelParams, Share


class WolfSheepParams(ModelParams):
    """Wolf-sheep predation (Mesa's benchmark): sheep graze, wolves eat sheep, both breed."""

    width: int = Field(20, ge=3, le=10**4)
    """grid width (a torus; at least 3: four distinct neighbours)"""

    height: int = Field(20, ge=3, le=10**4)
    """grid height"""

    initial_sheep: int = Field(100, ge=0, le=10**7)
    """sheep at the start"""

    initial_wolves: int = Field(50, ge=0, le=10**7)
    """wolves at the start"""

    sheep_reproduce: Share = 0.04
    """chance that a sheep breeds each step"""

    wolf_reproduce: Share = 0.05
    """chance that a wolf breeds each step"""

    wolf_gain_from_food: float = Field(20, ge=0)
    """energy a wolf gains from eating a sheep"""

    grass: bool = True
    """sheep eat grass for energy (without it they gain none)"""

    grass_regrowth_time: int = Field(30, ge=1, le=10**6)
    """steps a grass patch takes to regrow"""

    sheep_gain_from_food: float = Field(4, ge=0)
    """energy a sheep gains from a grass patch"""

    steps: int = Field(100, ge=1, le=10**6)
    """steps to simulate"""

    @model_validator(mode="after")
    def _fits(self) -> "WolfSheepParams":
        if self.width * self.height >= 2**31 - 1:
            raise ValueError(
                f"width x height must be below 2**31 - 1 (got {self.width * self.height})"
            )
        return self
