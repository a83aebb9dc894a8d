"""Mesa's Boltzmann wealth model, unchanged, run under this framework; and the same model
as a vectorised cohort (no Python loop over agents), for populations Mesa is too slow for.

``MoneyAgent``/``MoneyModel``/``compute_gini`` are Mesa's introductory tutorial (the Mesa 3
``MultiGrid`` version: "Adding space" and "Collecting data"), copied without changes in
substance, so the framework is shown running a model it did not write. The study::

    society run examples/mesa_boltzmann.py:MesaBoltzmann --set population=100 --set steps=50

runs it with ``engine=mesa`` (the Mesa classes as they are) or ``engine=vectorised``.
"""

from __future__ import annotations

from typing import Any, Literal

import mesa
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from sim_core.experiment import RunContext, Scenario
from sim_core.recorder import Recorder
from sim_core.scheduler import Scheduler
from society.cohorts.base import Cohort
from society.cohorts.mesa import run_mesa
from society.metrics import gini

# --- Mesa's tutorial model (do not edit: it is the thing being run unchanged) -------------


def compute_gini(model):
    agent_wealths = [agent.wealth for agent in model.agents]
    x = sorted(agent_wealths)
    n = model.num_agents
    B = sum(xi * (n - i) for i, xi in enumerate(x)) / (n * sum(x))
    return 1 + (1 / n) - 2 * B


class MoneyAgent(mesa.Agent):
    """An agent with fixed initial wealth."""

    def __init__(self, model):
        super().__init__(model)
        self.wealth = 1

    def move(self):
        possible_steps = self.model.grid.get_neighborhood(
            self.pos, moore=True, include_center=False
        )
        new_position = self.random.choice(possible_steps)
        self.model.grid.move_agent(self, new_position)

    def give_money(self):
        cellmates = self.model.grid.get_cell_list_contents([self.pos])
        cellmates.pop(cellmates.index(self))  # Ensure agent is not giving money to itself
        if self.wealth > 0 and len(cellmates) > 0:
            other_agent = self.random.choice(cellmates)
            other_agent.wealth += 1
            self.wealth -= 1


class MoneyModel(mesa.Model):
    """A model with some number of agents."""

    def __init__(self, n, width, height, seed=None):
        super().__init__(seed=seed)
        self.num_agents = n
        self.grid = mesa.space.MultiGrid(width, height, True)
        self.datacollector = mesa.DataCollector(
            model_reporters={"Gini": compute_gini}, agent_reporters={"Wealth": "wealth"}
        )

        # Create agents
        agents = MoneyAgent.create_agents(model=self, n=n)
        # Create x and y positions for agents
        x = self.rng.integers(0, self.grid.width, size=(n,))
        y = self.rng.integers(0, self.grid.height, size=(n,))
        for a, i, j in zip(agents, x, y):  # noqa: B905 (tutorial code, as written)
            # Add the agent to a random grid cell
            self.grid.place_agent(a, (i, j))

    def step(self):
        self.datacollector.collect(self)
        self.agents.shuffle_do("move")
        self.agents.do("give_money")


# --- the same model as a vectorised cohort ------------------------------------------------

MOORE = np.array([(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)])


class VectorisedBoltzmann(Cohort):
    """The tutorial model as arrays: ``wealth[i]`` and ``pos[i] = (x, y)`` per agent.

    A step moves every agent at once to a random Moore neighbour on the torus, then runs
    the giving phase. Mesa gives agent after agent (in creation order), so a coin received
    early in a step can be passed on in the same step; only cellmates interact, so the
    ``j``-th agents of all cells can give at once without changing that law. The loop is
    over places in a cell (as many rounds as the fullest cell holds agents: about 8 at one
    agent per cell), never over agents. Per-agent draws come from numpy, not from Mesa's
    ``random.Random``, so single runs differ from Mesa's while their statistics agree.
    """

    kind = "vectorised"

    def __init__(
        self, n: int, width: int, height: int, rng: np.random.Generator, name: str = "boltzmann"
    ):
        if width < 3 or height < 3:  # smaller tori have fewer than 8 distinct neighbours
            raise ValueError(f"width and height must be >= 3, got {width}x{height}")
        super().__init__(name, np.arange(n))
        self.width, self.height, self.rng = width, height, rng
        self.wealth = np.ones(n, dtype=np.int64)
        self.pos = np.stack([rng.integers(0, width, n), rng.integers(0, height, n)], axis=1)

    def step(self) -> None:
        """Move, then give: one step of the whole population."""
        n, rng, wealth = self.wealth.size, self.rng, self.wealth
        self.pos = (self.pos + MOORE[rng.integers(0, 8, n)]) % (self.width, self.height)
        cell = self.pos[:, 0] * self.height + self.pos[:, 1]
        order = np.argsort(cell, kind="stable")  # agents grouped by cell, in creation order
        counts = np.bincount(cell, minlength=self.width * self.height)
        first = np.cumsum(counts) - counts  # where each cell's group starts in `order`
        busy = np.flatnonzero(counts > 1)  # cells where someone has a cellmate
        for j in range(int(counts.max(initial=0))):  # places in a cell, not agents
            c = busy[counts[busy] > j]
            me = order[first[c] + j]  # the j-th agent of each such cell
            draw = rng.integers(0, counts[c] - 1)  # a cellmate, drawn per agent ...
            other = order[first[c] + draw + (draw >= j)]  # ... skipping myself
            give = wealth[me] > 0
            wealth[me[give]] -= 1  # one giver and one receiver per cell: no index repeats
            wealth[other[give]] += 1

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "wealth": self.wealth.copy(), "pos": self.pos.copy()}


# --- the study: either engine, driven by the scheduler, recorded by the recorder ----------


class MesaBoltzmannConfig(BaseModel):
    """Boltzmann wealth (Mesa's tutorial model) run unchanged, or vectorised, under the framework."""

    model_config = ConfigDict(extra="forbid")
    population: int = Field(100, ge=2, description="N, the number of agents")
    steps: int = Field(50, ge=1, description="model steps (one scheduler event each)")
    width: int = Field(10, ge=3, description="grid width (a torus)")
    height: int = Field(10, ge=3, description="grid height (a torus)")
    engine: Literal["mesa", "vectorised"] = Field(
        "mesa", description="the Mesa classes unchanged, or VectorisedBoltzmann"
    )


def mesa_seed(ctx: RunContext, replicate: int) -> int:
    """The seed given to ``MoneyModel(seed=...)`` for one replicate: drawn from the run's
    named stream, so replicates differ and ``--seed`` reproduces them; also in summary.json."""
    return int(ctx.rng.numpy("mesa", replicate).integers(2**32))


def run_vectorised(
    cohort: VectorisedBoltzmann, steps: int, recorder: Recorder, replicate: int = 0
) -> None:
    """Step the vectorised cohort from a recurring scheduler event, recording the Gini."""
    sim = Scheduler()
    recorder.record(0.0, "gini", gini(cohort.wealth), replicate=replicate)

    def step() -> None:
        cohort.step()
        recorder.record(sim.now, "gini", gini(cohort.wealth), replicate=replicate)

    sim.every(1.0, step, start=1.0, name="boltzmann.step")
    sim.run(until=float(steps))


class MesaBoltzmann(Scenario):
    """The Mesa model as a study: replicates, seeds, run directory and CLI come for free."""

    name, Config, headline = "mesa-boltzmann", MesaBoltzmannConfig, ("gini",)

    def run(self, cfg: MesaBoltzmannConfig, ctx: RunContext) -> dict[str, list[float]]:
        finals = []
        seeds = [mesa_seed(ctx, r) for r in range(ctx.replicates)]
        for r, seed in enumerate(seeds):
            if cfg.engine == "mesa":
                model = MoneyModel(cfg.population, cfg.width, cfg.height, seed=seed)
                run_mesa(
                    model,
                    cfg.steps,
                    recorder=ctx.recorder,
                    metrics={"gini": compute_gini},
                    replicate=r,
                )
                finals.append(compute_gini(model))
            else:
                cohort = VectorisedBoltzmann(
                    cfg.population, cfg.width, cfg.height, np.random.default_rng(seed)
                )
                run_vectorised(cohort, cfg.steps, ctx.recorder, replicate=r)
                finals.append(gini(cohort.wealth))
        ctx.report["mesa_seeds"] = seeds
        return {"gini": finals}
