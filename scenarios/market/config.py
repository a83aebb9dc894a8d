"""Parameters of the market scenario (pydantic only, so `society describe` starts fast)."""

from __future__ import annotations

from pydantic import Field, model_validator

from society.fields import Kind, SharedConfig, Split, default, in_order, mixture

RULES = ("cost-plus", "undercut", "adaptive")
Strategies = mixture(RULES, "strategies")


class MarketConfig(SharedConfig):
    """Posted-price market with Sybil sellers: price volatility, crashes, fraud (Agent Bazaar)."""

    agents: Kind = default("llm")
    """who prices the honest firms: llm (the study is about LLM firms, so this is the default; the
    local model unless --llm is given), learned (REINFORCE on profit), rules (see 'strategies'), or
    mixed (see 'split'); consumers are always vectorised rules"""

    split: Split = default("rules:1,learned:1,llm:1")
    strategies: Strategies = "cost-plus:1,undercut:1,adaptive:1"
    """rule firms' strategy mix: cost-plus (cost x (1 + markup)), undercut (cheapest rival's price
    minus undercut_step x cost, not below cost), adaptive (price x (1 + adapt_step) after selling
    out, x (1 - adapt_step) after unsold stock, not below cost)"""

    population: int = default(5, ge=1)
    """honest firms (sellers), each with one listing"""

    consumers: int = Field(100, ge=1)
    """consumers; each buys at most one unit per period"""

    steps: int = Field(30, ge=2)
    """trading periods (each: post prices, then clear)"""

    unit_cost: float = Field(1.0, gt=0)
    """honest firms' cost per unit sold"""

    capacity: int = Field(30, ge=1)
    """units each listing can sell per period (unsold stock is not kept)"""

    quality: float = Field(1.0, gt=0)
    """true (and claimed) quality of honest firms"""

    value_min: float = Field(1.0, ge=0)
    """consumers' value per unit of quality: lower end of the uniform draw"""

    value_max: float = Field(3.0, gt=0)
    """consumers' value per unit of quality: upper end of the uniform draw"""

    visible: int | None = Field(None, ge=1)
    """listings each consumer sees per period (a fresh random subset each period); None: all of them
    """

    initial_price: float = Field(2.0, gt=0)
    """every honest firm's price in the warm-up period 0 (<= max_price); the Sybil prices and the
    crash check of period 1 start from it"""

    max_price: float = Field(4.0, gt=0)
    """highest price an honest firm may post (> unit_cost): every honest price (rules, learned, LLM)
    is clipped to [0, max_price]; a learned firm's action a in (0, 1) posts a x max_price (a markup
    of a x max_price / unit_cost - 1, so below-cost prices are possible)"""

    markup: float = Field(0.5, ge=0)
    """cost-plus firms: price = unit_cost x (1 + markup)"""

    undercut_step: float = Field(0.05, gt=0)
    """undercut firms: how far below the cheapest rival, in units of cost"""

    adapt_step: float = Field(0.1, gt=0, lt=1)
    """adaptive firms: relative price change per period"""

    sybil: int = Field(0, ge=0)
    """fraudulent operators, each controlling sybil_identities listings"""

    sybil_identities: int = Field(3, ge=1)
    """seller identities per Sybil operator"""

    sybil_quality: float = Field(0.2, ge=0)
    """true quality a Sybil listing delivers (it claims 'quality')"""

    sybil_cost: float = Field(0.2, ge=0)
    """a Sybil operator's cost per unit sold"""

    sybil_discount: float = Field(0.9, gt=0)
    """Sybil listings post sybil_discount x the lowest honest price of the last period
    (initial_price in period 1; never below sybil_cost): a rule operator undercutting the honest
    market without seeing this period's prices"""

    ratings: bool = True
    """a rating system: each listing's perceived quality is the mean of rating_prior pseudo-ratings
    at its claimed quality and one rating per unit sold at the true quality delivered; without it
    consumers believe the claims"""

    rating_prior: float = Field(5.0, gt=0)
    """weight (in ratings) of the claimed quality in a listing's rating"""

    reentry_rating: float | None = Field(0.5, ge=0)
    """a Sybil identity whose rating falls below this is abandoned and replaced by a fresh identity
    (rating reset to the claim) from the next period; None: never"""

    arrivals: int = Field(1, ge=1, le=100)
    """arrival moments per period: 1, every consumer shops at the period's clearing (in random
    order); k > 1, each consumer arrives at one of k moments of the period (drawn uniformly), the
    arrivals of a moment shop together and their ratings count at once, so later arrivals see them
    within the period"""

    crash_drop: float = Field(0.2, gt=0, lt=1)
    """a crash is a period whose price index falls by more than this share, or below unit_cost"""

    learning_rate: float = default(0.05, ge=0)
    """learned firms: REINFORCE step size on each period's profit"""

    llm_temperature: float = default(0.7)
    llm_max_tokens: int = default(200)
    """LLM agents: reply limit in tokens (a short JSON, brief reason)"""

    llm_memory: int = default(5)
    """LLM firms: how many of their own past periods (price, sales, profit) they see"""

    @model_validator(mode="after")
    def _check(self) -> MarketConfig:
        in_order(
            self, "value_max >= value_min", "initial_price <= max_price", "unit_cost < max_price"
        )
        if self.visible is not None and self.visible > self.listings():
            raise ValueError(
                f"visible ({self.visible}) must be <= the number of listings "
                f"(firms + sybil x sybil_identities = {self.listings()}), or None for all"
            )
        return self

    def listings(self) -> int:
        """Listings per market: one per honest firm, then the Sybil identities."""
        return self.population + self.sybil * self.sybil_identities
