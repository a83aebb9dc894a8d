"""Parameters of conformity: the Asch line-judgement paradigm (defaults: Asch 1956's design)."""

from pydantic import Field

from society.fields import StudyParams


class ConformityParams(StudyParams):
    """Each trial every agent says which of three lines matches a reference after hearing a
    majority of confederates answer; on critical trials (2 in 3, as Asch's 12 of 18) the
    majority gives the same wrong answer."""

    majority: int = Field(8, ge=0, le=1000)
    """confederates answering first (0: alone)"""

    ally: bool = False
    """one more confederate gives the right answer"""

    difficulty: float = Field(0.0, ge=0, le=0.95)
    """0: Asch's lines; 0.9: 10x closer"""

    status: float = Field(1.0, gt=0, le=100)
    """strength s of the majority's impact"""

    population: int = Field(50, ge=2)
    """naive subjects, each alone with them"""

    steps: int = Field(18, ge=1, le=10**6)
    """trials (Asch's 18: 6 neutral, 12 critical)"""
