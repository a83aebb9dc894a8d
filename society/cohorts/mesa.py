"""Run an existing Mesa 3 model, unchanged, under this framework's scheduler and recorder.

A Mesa model keeps its own agents, space and random streams (``model.random``,
``model.rng``, seeded by ``mesa.Model(seed=...)``). To give the *same* results as under
Mesa, the adapter changes none of that: each step is one named, recurring
:class:`~sim_core.scheduler.Scheduler` event that calls ``model.step()``, and the chosen
reporters (like Mesa's ``DataCollector`` reporters) are read after each step and written
as :class:`~sim_core.recorder.Recorder` rows. The model's agents appear as a
:class:`MesaCohort` (ids are ``agent.unique_id``, kind ``"mesa"``), so a study can count,
label and record them like any other cohort.

Mesa is used by duck typing only (``model.step()``, ``model.agents``, ``model.running``),
so importing this module does not import Mesa. A Mesa model's step is a Python loop over
its agents; see ``docs/mesa.md`` for moving that hot loop into a vectorised cohort.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim_core.recorder import Recorder
from sim_core.scheduler import Process, Scheduler
from society.cohorts.base import Cohort

#: A reporter as Mesa's DataCollector takes it: a callable of the model (or agent), or the
#: name of one of its attributes.
Reporter = Callable[[Any], Any] | str

__all__ = ["MesaCohort", "MesaRun", "Reporter", "run_mesa"]


def _read(reporter: Reporter, obj: Any) -> Any:
    return getattr(obj, reporter) if isinstance(reporter, str) else reporter(obj)


def _check_reporters(reporters: Mapping[str, Reporter] | None, what: str) -> dict[str, Reporter]:
    out = dict(reporters or {})
    for name, rep in out.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"{what}: metric names must be non-empty strings, got {name!r}")
        if not (callable(rep) or isinstance(rep, str)):
            raise TypeError(
                f"{what}['{name}']: expected a callable or an attribute name, got {type(rep).__name__}"
            )
    return out


class MesaCohort(Cohort):
    """The agents of a Mesa model as one cohort. The model decides for them: a step is the
    model's own ``step()`` (its agents act in the order and with the draws Mesa uses)."""

    kind = "mesa"

    def __init__(self, model: Any, name: str = "mesa"):
        if not callable(getattr(model, "step", None)) or not hasattr(model, "agents"):
            raise TypeError(
                f"cohort '{name}': expected a Mesa model (with step() and agents), got {type(model).__name__}"
            )
        self.model = model
        super().__init__(name, self._ids())

    def _ids(self) -> np.ndarray:
        return np.fromiter((a.unique_id for a in self.model.agents), dtype=np.int64)

    def step(self) -> None:
        """One step of the Mesa model; agents it created or removed join or leave the cohort."""
        self.model.step()
        self.agents = self._ids()

    def agent_values(self, reporter: Reporter) -> np.ndarray:
        """One value per agent (aligned with ``self.agents``), like a DataCollector agent reporter."""
        return np.asarray([_read(reporter, a) for a in self.model.agents], dtype=np.float64)

    def act(self, agents: np.ndarray, obs: Any, key: Any) -> Any:
        raise TypeError(
            f"cohort '{self.name}' (Mesa): its agents act inside model.step(); drive it with step() or run_mesa()"
        )

    def state_dict(self) -> dict[str, Any]:
        # A Mesa model is a graph of Python objects; checkpoint it with pickle, not as arrays.
        return {"name": self.name, "agents": np.asarray(self.agents), "model": self.model}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.model = state["model"]


@dataclass
class MesaRun:
    """What :func:`run_mesa` did: the cohort (and its model), the scheduler and the step
    process, steps taken so far, and why it stopped early (``None`` if it did not)."""

    cohort: MesaCohort
    scheduler: Scheduler
    process: Process | None = None
    steps: int = 0
    stop_reason: str | None = None


def run_mesa(
    model: Any,
    steps: int,
    *,
    recorder: Recorder | None = None,
    metrics: Mapping[str, Reporter] | None = None,
    agent_metrics: Mapping[str, Reporter] | None = None,
    replicate: int = 0,
    scheduler: Scheduler | None = None,
    name: str = "mesa.step",
) -> MesaRun:
    """Run ``model`` for ``steps`` steps as a recurring scheduler event named ``name``.

    ``metrics`` are model reporters (``{"gini": compute_gini}`` or an attribute name),
    recorded for the initial state at the scheduler's start time (0 for a new scheduler) and
    after step ``t`` at time ``start + t``.
    ``agent_metrics`` are agent reporters, recorded one row per agent with ``agent=unique_id``
    (the recorder must declare an ``agent: int`` label). Like ``mesa.Model.run_model``, the
    run stops early when the model sets ``running = False``. Pass ``scheduler`` to run the
    model alongside other events; the step events then start one time unit from its ``now``.
    """
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    metrics = _check_reporters(metrics, "metrics")
    agent_metrics = _check_reporters(agent_metrics, "agent_metrics")
    if (metrics or agent_metrics) and recorder is None:
        raise ValueError(
            "metrics were given but no recorder to write them to (pass recorder=Recorder(...))"
        )
    if agent_metrics and "agent" not in recorder.labels:
        raise ValueError(
            "agent_metrics need a recorder with an 'agent' label: Recorder(path, labels={'agent': int})"
        )
    sim = scheduler if scheduler is not None else Scheduler()
    run = MesaRun(cohort=MesaCohort(model), scheduler=sim)
    cohort = run.cohort

    def record(time: float) -> None:
        for metric, rep in metrics.items():
            recorder.record(time, metric, float(_read(rep, model)), replicate=replicate)
        for metric, rep in agent_metrics.items():
            recorder.record(
                time, metric, cohort.agent_values(rep), replicate=replicate, agent=cohort.agents
            )

    def step() -> None:
        cohort.step()
        run.steps += 1
        record(sim.now)
        if run.steps >= steps:
            run.process.cancel()
        elif not getattr(model, "running", True):
            run.process.cancel()
            run.stop_reason = "the Mesa model set running = False"

    record(sim.now)
    if steps > 0:
        run.process = sim.every(1.0, step, start=sim.now + 1.0, name=name)
    if scheduler is None:
        sim.run()
    return run
