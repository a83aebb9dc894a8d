"""Parameters of boid-flockers: Mesa's ``BoidFlockers`` names and defaults."""

from pydantic import Field

from society.fields import ModelParams


class BoidFlockersParams(ModelParams):
    """Boid flockers (Mesa's benchmark): Reynolds's boids cohere, separate and align on a torus."""

    population_size: int = Field(100, ge=1, le=10**6)
    """number of boids"""

    width: float = Field(100, gt=0, le=10**6)
    """width of the space"""

    height: float = Field(100, gt=0, le=10**6)
    """height of the space"""

    speed: float = Field(1, ge=0)
    """distance a boid moves per step"""

    vision: float = Field(10, gt=0)
    """radius within which a boid sees its neighbours"""

    separation: float = Field(2, ge=0)
    """distance below which a boid steers away"""

    cohere: float = 0.03
    """weight of steering towards the neighbours"""

    separate: float = 0.015
    """weight of steering away from close neighbours"""

    match: float = 0.05
    """weight of matching the neighbours' directions"""

    steps: int = Field(100, ge=1, le=10**6)
    """steps to simulate"""
