"""Parameters of the epidemic scenario (pydantic only, so `society describe` starts fast)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from society.fields import Graph, GraphFields, Kind, Share, SharedConfig, Split, default, mixture

BEHAVIOURS = ("none", "isolate-when-sick", "threshold")
Behaviours = mixture(BEHAVIOURS, "behaviour")


class EpidemicConfig(GraphFields, SharedConfig):
    """SIR/SEIR epidemics on a graph or well mixed, with isolation decided by rules, learned or LLM agents."""

    model: Literal["SIR", "SEIR"] = "SIR"
    """compartments: SIR, or SEIR with a non-infectious exposed stage"""

    graph: Graph = "complete"
    """complete (well mixed: mass action on counts, no graph is built) | cycle | lattice |
    random-regular | erdos-renyi | small-world | scale-free | a path to an edge-list file ('u v' per
    line), as in network-game"""

    population: int = default(10_000)
    """number of agents N (a square number for lattice)"""

    degree: int = Field(8, ge=1)
    """k: random-regular degree, small-world ring degree, erdos-renyi mean degree, scale-free 2m
    (unused by complete, cycle and lattice)"""

    r0: float = Field(2.5, ge=0.0)
    """basic reproduction number of the well-mixed model: the mean number of people one infectious
    person infects in a fully susceptible population at normal contact. Exact for the discrete-time
    chain: the per-infective hazard is beta = r0 * (1 - exp(-recovery_rate * dt)) / dt (-> r0 *
    recovery_rate as dt -> 0). On a graph the per-contact rate is tau = beta / <k> (<k> the graph's
    mean degree), so r0 is the mass-action number of the same mean degree; the graph's own R0 is
    lower"""

    recovery_rate: float = Field(0.2, gt=0.0)
    """gamma: recovery rate per day (mean infectious period 1/gamma days)"""

    incubation_rate: float = Field(0.2, gt=0.0)
    """sigma (SEIR): rate per day of leaving the exposed stage"""

    initial_infected: float = Field(10, gt=0.0)
    """agents infectious on day 0, chosen at random: a count (an integer >= 1) or, below 1, a
    fraction of N (rounded, at least one agent)"""

    symptomatic: Share = 0.7
    """probability that an infection shows symptoms; only symptomatic agents know they are ill (and,
    once recovered, that they are immune), and only they count in the prevalence agents are told"""

    steps: int = Field(200, ge=1)
    """days to simulate; a replicate whose epidemic is over (no one exposed or infectious) stays as
    it is and records no more rows"""

    dt: float = Field(1.0, gt=0.0, le=1.0)
    """transmission step in days (1/dt must be an integer); agents choose their contact level once a
    day"""

    periods: Literal["chain", "drawn"] = "chain"
    """how agents leave the exposed and infectious stages: chain (every step an exposed agent turns
    infectious with probability 1 - exp(-incubation_rate dt) and an infectious one recovers with 1 -
    exp(-recovery_rate dt)), or drawn (each agent draws its latent and infectious periods, in days,
    from the same geometric laws when it is infected, and changes compartment on those days). drawn
    needs dt=1"""

    agents: Kind = default("rules")
    """who chooses each agent's daily contact level: rules ('behaviour'), learned policies
    (REINFORCE on the daily reward), llm (through the LLM client; the local model unless --llm is
    given), or mixed (see split). Rules by default: the classic SIR/SEIR results are the baseline
    that the AgentTorch-style LLM populations are compared with"""

    split: Split = default("rules:8,learned:1,llm:1")
    behaviour: Behaviours = "none"
    """rule agents' behaviour, or a mix such as 'none:1,isolate-when-sick:1': none (always full
    contact), isolate-when-sick (contact 0 while symptomatic), threshold (isolate while symptomatic,
    and contact 'reduced_contact' while the prevalence seen exceeds 'threshold')"""

    threshold: Share = 0.02
    """threshold rule: prevalence above which contacts are reduced"""

    prevalence_signal: Literal["local", "global"] = "local"
    """threshold rule: react to the share of one's contacts with symptoms (local) or to the
    town-wide share (global); the same under graph=complete"""

    reduced_contact: Share = 0.5
    """threshold rule: contact level while prevalence is high"""

    min_contact: Share = 0.0
    """lowest contact level any agent can reach (essential contacts); every choice is clipped to
    [min_contact, 1]"""

    isolation_cost: float = Field(1.0, ge=0.0)
    """cost per day of full isolation (times 1 - contact level)"""

    infection_cost: float = Field(30.0, ge=0.0)
    """cost of becoming infected (paid on the day of infection)"""

    learning_rate: float = default(0.05)
    """learned agents: Adam learning rate"""

    llm_archetypes: bool = True
    """LLM agents: one call per day per distinct profile (health as the agent knows it, prevalence
    buckets, replicate), fanned out to its agents, as AgentTorch's LLM archetypes (affordable for
    1e5+ agents); false: one call per LLM agent per day with exact numbers and a short memory"""

    llm_samples: int = Field(1, ge=1)
    """LLM archetypes: independent answers per profile, spread over its agents (diversity needs
    llm_temperature > 0)"""

    llm_max_tokens: int = default(96)
    """LLM agents: reply limit in tokens (a one-sentence reason and a number)"""

    llm_memory: int = default(4)

    @model_validator(mode="after")
    def _check(self) -> EpidemicConfig:
        steps = 1.0 / self.dt
        if abs(steps - round(steps)) > 1e-9:
            raise ValueError(
                f"dt must divide a day (1/dt an integer, e.g. 1, 0.5, 0.25), got {self.dt}"
            )
        if self.periods == "drawn" and self.dt != 1.0:
            raise ValueError(
                f"periods=drawn schedules transitions on whole days: it needs dt=1, got {self.dt}"
            )
        if self.initial_infected >= 1 and self.initial_infected != math.floor(
            self.initial_infected
        ):
            raise ValueError(
                f"initial_infected must be an integer count >= 1 or a fraction < 1, got {self.initial_infected}"
            )
        if self.seeds() > self.population:
            raise ValueError(
                f"initial_infected ({self.seeds()}) must be at most population ({self.population})"
            )
        return self

    def seeds(self) -> int:
        """Number of agents infectious on day 0."""
        if self.initial_infected >= 1:
            return int(self.initial_infected)
        return max(1, int(round(self.initial_infected * self.population)))
