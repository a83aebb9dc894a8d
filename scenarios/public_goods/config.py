"""Parameters of the public goods game (pydantic only, so `society describe` starts fast)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from society.fields import (
    Graph,
    GraphFields,
    Kind,
    Share,
    SharedConfig,
    Split,
    default,
    in_order,
    mixture,
)

# Rule agents' types; the shares of the default mix follow the types Fischbacher, Gächter &
# Fehr (2001) found in the lab: about half conditional cooperators, a third free riders.
STRATEGIES = ("conditional", "free-rider", "cooperator", "punisher", "rewarder")
Strategies = mixture(STRATEGIES, "strategies")


class PublicGoodsConfig(GraphFields, SharedConfig):
    """Public goods game on a graph: contributions x r shared, optional punishment and reward."""

    agents: Kind = default("rules")
    """who decides: rules (the types in 'strategies': the baseline the lab studies of Fehr & Gächter
    describe), learned (REINFORCE policies over the contributed share), llm (through the LLM client;
    the local model unless --llm is given), or mixed (split)"""

    split: Split = default("rules:8,learned:1,llm:1")
    population: int = default(24)
    """number of agents N (24 as in a session of Fehr & Gächter 2000)"""

    graph: Graph = "complete"
    """who can be grouped with whom: complete (well mixed, as in the lab) | cycle | lattice |
    random-regular | erdos-renyi | small-world | scale-free | a path to an edge-list file ('u v' per
    line); one graph (graph_seed) for every replicate"""

    groups: Literal["random", "neighbourhood"] = "random"
    """random: every round the population is partitioned into groups of group_size over the graph (a
    random unassigned focal agent plus group_size-1 of its unassigned neighbours, drawn at random,
    until everyone is placed; on a complete graph this is the lab's stranger matching; where too few
    neighbours are free a group is smaller, and a focal agent with none free joins a neighbour's
    group that has room); neighbourhood: Santos, Santos & Pacheco (2008): every agent centres one
    fixed group of itself and its neighbours, so it plays in k+1 groups and its contribution is
    split equally among them (the cost-per-individual variant). An agent left alone (no neighbour's
    group has room; an isolated node) sits the round out: it keeps its endowment, is not asked and
    is left out of that round's metrics (see grouped_share)"""

    group_size: int = Field(4, ge=2)
    """groups=random: members per group n (4 as in Fehr & Gächter 2000)"""

    r: float = Field(1.6, ge=0.0)
    """multiplication factor of each group's pot (r/n = 0.4, the marginal per capita return of Fehr
    & Gächter 2000); contributing pays privately only when r > n"""

    endowment: float = Field(20.0, gt=0.0)
    """tokens every agent receives each round (20 in the lab studies)"""

    steps: int = Field(10, ge=1)
    """rounds of the game (10 in Fehr & Gächter 2000)"""

    punishment: bool = False
    """after seeing the group's contributions, each agent may assign up to max_points punishment
    points to each other member (Fehr & Gächter 2000)"""

    punishment_cost: float = Field(1.0, ge=0.0)
    """cost to the punisher of one punishment point"""

    punishment_fine: float = Field(3.0, ge=0.0)
    """earnings removed from the target per punishment point"""

    reward: bool = False
    """after seeing the group's contributions, each agent may assign up to max_points reward points
    to each other member (Rand et al. 2009)"""

    reward_cost: float = Field(1.0, ge=0.0)
    """cost to the giver of one reward point"""

    reward_benefit: float = Field(3.0, ge=0.0)
    """earnings added to the target per reward point (1:3 as in Rand et al. 2009)"""

    max_points: float = Field(10.0, gt=0.0)
    """most points (punishment or reward) an agent may assign to one member in a round; an agent
    never spends more on points than its earnings of the round (points are scaled down to fit)"""

    strategies: Strategies = "conditional:5,free-rider:3,cooperator:1,punisher:1"
    """rule agents' types and shares: conditional (contributes conditional_slope x the mean of its
    group's other members last round; conditional_start in round 1), free-rider (0), cooperator
    (everything), punisher (everything; punishes members below the group mean, max_points x the
    shortfall as a share of the endowment), rewarder (everything; rewards members at or above the
    group mean, max_points x their share contributed)"""

    conditional_start: Share = 0.5
    """conditional cooperators' first-round contribution, a share of the endowment (about half in
    the lab)"""

    conditional_slope: float = Field(1.0, ge=0.0)
    """conditional cooperators contribute this times the others' last mean share (1 = match it;
    Fischbacher et al. 2001 found slightly less on average)"""

    learning_rate: float = default(0.05)
    """learned agents: REINFORCE (Adam) step size; each agent learns from its own earnings of every
    round, its contribution and its sanction intensity"""

    llm_temperature: float = default(0.7)
    llm_max_tokens: int = default(200)
    """LLM agents: reply limit in tokens (a short JSON, one-line reason)"""

    llm_memory: int = default(5)

    @model_validator(mode="after")
    def _check(self) -> PublicGoodsConfig:
        if self.groups == "random":
            in_order(self, "group_size <= population")
        return self
