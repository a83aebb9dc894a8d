"""Parameters of social-network (defaults: the herding calibrated to Muchnik et al. 2013)."""

from typing import Literal

from pydantic import Field

from society.fields import Share, StudyParams


class SocialNetworkParams(StudyParams):
    """An agent social network: agents post, reply, like and follow, each reading a feed of
    five posts chosen by a recommender; some new posts get one artificial like (Muchnik et al.
    2013's treatment) to measure herding."""

    # fmt: off
    population: int = Field(1000, ge=2, le=10**8)
    """agents"""

    steps: int = Field(60, ge=1, le=10**6)
    """steps (an agent visits its feed once a step)"""

    recommender: Literal["recency", "popularity", "interest"] = "recency"
    """feed order: newest, most liked per age, or nearest the reader's interest"""

    topics: int = Field(8, ge=2, le=1000)
    """topics a post can be on"""

    candidates: int = Field(12, ge=1, le=1000)
    """random new posts the recommender ranks per agent"""

    activity: Share = 0.5
    """chance that an agent visits its feed in a step"""

    like_rate: Share = 0.3
    """chance of liking the post read, if on topic and agreed"""

    herding: float = Field(0.37, ge=0, le=10)
    """like chance x (1 + herding * log(1 + likes))"""

    reply_rate: Share = 0.1
    """chance of replying to the post read, if on topic"""

    follow_rate: Share = 0.05
    """chance of following the read post's author"""

    post_rate: Share = 0.1
    """chance of a new post on one's interest otherwise"""

    off_topic: Share = 0.3
    """appeal of a post off the reader's interest"""

    drift: Share = 0.05
    """chance that a like moves one's interest to its topic"""

    influence: Share = 0.1
    """stance moved towards a liked post, away from a disputed one"""

    tolerance: float = Field(1.0, ge=0, le=2)
    """stance gap beyond which a reply disputes"""

    treatment: Share = 0.1
    """share of new posts given one like at creation"""

    posts_per_agent: float = Field(2.0, ge=1, le=100)
    """posts kept (ring buffer) per agent"""
    # fmt: on
