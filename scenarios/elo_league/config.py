"""Parameters of elo-league: a league of learned duellists, matched by Elo or at random."""

from typing import Literal

from pydantic import Field

from society.fields import ModelParams


class EloLeagueParams(ModelParams):
    """A league of softmax policies playing a terrain duel, matched by Elo rating or at
    random, each learning by policy gradient from its games' outcomes."""

    league: int = Field(16, ge=2, le=10**5, multiple_of=2)
    """agents in the league"""

    matchmaking: Literal["elo", "random"] = "elo"
    """pairing"""

    explore: float = Field(30.0, ge=0, le=10**4)
    """elo: pairing noise"""

    games: int = Field(4, ge=1, le=1000)
    """games per pairing per step"""

    rounds: int = Field(6, ge=1, le=1000)
    """first games' rounds"""

    max_rounds: int = Field(16, ge=1, le=1000)
    """rounds at most"""

    learning_rates: tuple[float, float] = (0.02, 2.0)
    """learning rates' range"""

    entropy: float = Field(0.05, ge=0, le=10)
    """exploration bonus"""

    k_factor: float = Field(8.0, gt=0, le=400)
    """Elo K per game"""

    init_scale: float = Field(1.0, ge=0, le=100)
    """standard deviation of initial logits"""

    eval_games: int = Field(64, ge=1, le=10**5)
    """games per rule opponent to evaluate"""

    steps: int = Field(200, ge=1, le=10**6)
    """rounds of league games"""
