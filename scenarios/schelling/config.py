"""Parameters of schelling: Mesa's ``Schelling`` names and defaults."""

from pydantic import Field

from society.fields import ModelAgentsParams, Share


class SchellingParams(ModelAgentsParams):
    """Schelling segregation (Mesa's benchmark): unhappy agents move to random empty cells."""

    width: int = Field(20, ge=1, le=10**4)
    """grid width"""

    height: int = Field(20, ge=1, le=10**4)
    """grid height"""

    density: Share = 0.8
    """chance that a cell starts with an agent"""

    minority_pc: Share = 0.5
    """chance that an agent is of the minority type"""

    homophily: Share = 0.4
    """share of similar neighbours an agent needs to be happy"""

    radius: int = Field(1, ge=1, le=10)
    """neighbourhood radius (Moore)"""

    torus: bool = False
    """the grid wraps around"""

    steps: int = Field(20, ge=1, le=10**6)
    """steps to simulate"""
