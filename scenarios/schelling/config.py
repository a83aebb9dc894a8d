"""Parameters of schelling: Mesa's ``Schelling`` names and defaults."""

from pydantic import Field

from society.fields import ModelAgentsParams, Share


class SchellingParams(ModelAgentsParams):
    """Schelling segregation (Mesa's benchmark): unhappy agents move to random empty cells."""

    width: int = Field(20, ge=1, le=10**4, description="grid width")
    height: int = Field(20, ge=1, le=10**4, description="grid height")
    density: Share = Field(0.8, description="chance that a cell starts with an agent")
    minority_pc: Share = Field(0.5, description="chance that an agent is of the minority type")
    homophily: Share = Field(
        0.4, description="share of similar neighbours an agent needs to be happy"
    )
    radius: int = Field(1, ge=1, le=10, description="neighbourhood radius (Moore)")
    torus: bool = Field(False, description="the grid wraps around")
    steps: int = Field(20, ge=1, le=10**6, description="steps to simulate")
