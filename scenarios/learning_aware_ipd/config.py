"""Parameters of learning-aware-ipd: the exact-gradient setup of Foerster et al. 2018 (LOLA)."""

from typing import Literal

from pydantic import Field

from society.fields import ModelParams, Share


class LearningAwareIPDParams(ModelParams):
    """Policy-gradient learners in the infinitely iterated prisoner's dilemma: naive learners
    ascend their own value; LOLA learners also differentiate through the other's naive update;
    in-context learners adapt within each episode, at a rate they learn naively across episodes."""

    # fmt: off
    learning: Literal["naive", "lola", "in-context"] = "lola"
    """naive, lola (learning-aware) or in-context updates"""

    learners: int = Field(2, ge=2, le=10**6, multiple_of=2)
    """learners, paired at random each step"""

    gamma: float = Field(0.96, gt=0, lt=1)
    """discount of the iterated game (the paper's 0.96)"""

    step_size: float = Field(1.0, gt=0, le=100)
    """learning rate of each learner's own update (delta)"""

    lookahead: float = Field(1.0, ge=0, le=100)
    """LOLA: the opponent's assumed learning rate (eta)"""

    init_scale: float = Field(1.0, ge=0, le=100)
    """standard deviation of the initial logits"""

    steps: int = Field(200, ge=1, le=10**6)
    """simultaneous learning updates (the paper's 200)"""

    adapt: float = Field(0.02, ge=0, le=100)
    """in-context: initial in-context learning rate (then learned)"""

    phases: int = Field(4, ge=1, le=100)
    """in-context: phases of an episode (adapting after each)"""

    tabular: Share = 0.0
    """share of co-players met that are naive learners from random policies"""
    # fmt: on
