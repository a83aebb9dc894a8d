"""Parameters of elo-league: a league of learned duellists, matched by Elo or at random."""

from typing import Literal

from pydantic import Field

from society.fields import ModelParams


class EloLeagueParams(ModelParams):
    """A league of softmax policies playing a terrain duel, matched by Elo rating or at
    random, each learning by policy gradient from its games' outcomes."""

    league: int = Field(16, ge=2, le=10**5, multiple_of=2, description="agents in the league")
    matchmaking: Literal["elo", "random"] = Field("elo", description="pairing")
    explore: float = Field(30.0, ge=0, le=10**4, description="elo: pairing noise")
    games: int = Field(4, ge=1, le=1000, description="games per pairing per step")
    rounds: int = Field(6, ge=1, le=1000, description="first games' rounds")
    max_rounds: int = Field(16, ge=1, le=1000, description="rounds at most")
    learning_rates: tuple[float, float] = Field((0.02, 2.0), description="learning rates' range")
    entropy: float = Field(0.05, ge=0, le=10, description="exploration bonus")
    k_factor: float = Field(8.0, gt=0, le=400, description="Elo K per game")
    init_scale: float = Field(1.0, ge=0, le=100, description="standard deviation of initial logits")
    eval_games: int = Field(64, ge=1, le=10**5, description="games per rule opponent to evaluate")
    steps: int = Field(200, ge=1, le=10**6, description="rounds of league games")
