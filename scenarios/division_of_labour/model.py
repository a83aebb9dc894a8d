"""The division-of-labour scenario: response thresholds with reinforcement, on the contract.

One step (``dynamics.py`` has the rules as pure functions): each idle agent meets one task
``j`` drawn uniformly and takes it with probability ``s_j^2 / (s_j^2 + theta_ij^2)``
(Bonabeau, Theraulaz & Deneubourg 1996), or as its learned policy or LLM decides; each
active agent stops with probability ``quit_prob``; stimuli move by ``delta - alpha n_j / N``
(clipped at 0); with reinforcement (Theraulaz, Bonabeau & Deneubourg 1998) thresholds fall
by ``xi`` for the task done and rise by ``phi`` for the others; from ``average_from`` on the
acts are counted. The world holds the draws of the coming step (task met, quitting, the
rule's chance), so a rule agent's choice is a function of its observation. Learned agents
see ``log((1 + s_j) / (1 + theta_ij))`` and earn ``(s_j - theta_ij) / theta_max`` for a task
taken; LLM agents are told that score. Recorded: ``stimulus`` and
``active_share`` per task, ``threshold`` of the first ``trace_agents`` agents, ``dol_index``
(I/H(task), Gorelick et al. 2004), ``task_entropy`` (mean over agents with acts),
every ``record_every`` steps; each agent's ``acts`` and ``final_threshold`` at the end.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from scenarios.division_of_labour.config import DivisionOfLabourConfig
from scenarios.division_of_labour.dynamics import (
    World,
    response_probability,
    transition,
)
from scenarios.division_of_labour.prompts import SYSTEM, Work, template
from sim_core.experiment import save_figure, subplots
from society.metrics import task_entropy
from society.metrics.specialisation import dol_index_jax, entropies_jax
from society.study import Discrete, Study

CONSTANTS = (
    "tasks",
    "delta",
    "alpha",
    "quit_prob",
    "reinforcement",
    "xi",
    "phi",
    "theta_min",
    "theta_max",
)


def _offer(key, n, p):
    """The draws of a step: per agent, the task met, the quitting chance, the rule's chance."""
    return jax.random.uniform(key, (n, 3))


def dol(w, out):
    """I / H(task) of the act counts (Gorelick et al. 2004), with I = H(task) - H(task |
    agent) (exactly 1 for specialists); NaN while nothing was done."""
    return dol_index_jax(w["counts"])


def entropy(w, out):
    """Mean normalised entropy of each agent's tasks, over agents with acts (NaN if none)."""
    h, acts = entropies_jax(w["counts"])
    h, some = jnp.clip(h / jnp.log(w["counts"].shape[1]), 0.0, 1.0), acts > 0
    return jnp.where(some.any(), jnp.sum(jnp.where(some, h, 0.0)) / some.sum(), jnp.nan)


class DivisionOfLabour(Study):
    """Response thresholds with reinforcement (Theraulaz et al. 1998)."""

    Params = DivisionOfLabourConfig
    name = "division-of-labour"
    labels = {"task": int, "agent": int, "cohort": str}
    actions = Discrete(
        ("idle", "work"), rule=lambda o, p: o["chance"] < response_probability(o["stimulus"], o["threshold"])
    )  # fmt: skip
    prompt = staticmethod(lambda p: template(**p.model_dump(include=set(CONSTANTS))))
    system = SYSTEM
    reply = Work
    features = ("log_ratio",)
    reporters = {
        "stimulus": lambda w, out: w["s"],
        "active_share": lambda w, out: (w["task"][:, None] == jnp.arange(w["s"].size)).mean(0),
        "threshold": lambda w, out: w["theta"][: w["trace"].size],
        "dol_index": dol,
        "task_entropy": entropy,
    }
    axes = {"threshold": ("agent", "task")} | dict.fromkeys(
        ("stimulus", "active_share", "acts", "final_threshold"), ("task",)
    )
    agent_reporters = {
        "acts": lambda w, out: w["counts"],
        "final_threshold": lambda w, out: w["theta"],
    }
    headline = ("dol_index", "task_entropy")

    def init(key, p):
        n, m = p.population, p.tasks
        return {"task": jnp.full(n, -1, jnp.int32), "theta": jnp.full((n, m), p.theta_init, jnp.float32),
                "s": jnp.zeros(m, jnp.float32), "counts": jnp.zeros((n, m), jnp.float32),
                "t": jnp.int32(0), "u": _offer(key, n, p), "trace": jnp.zeros(min(p.trace_agents, n))}  # fmt: skip

    def observe(w, p):
        met = jnp.minimum((w["u"][:, 0] * p.tasks).astype(jnp.int32), p.tasks - 1)
        stim, theta = w["s"][met], jnp.take_along_axis(w["theta"], met[:, None], 1)[:, 0]
        return {"stimulus": stim, "threshold": theta, "log_ratio": jnp.log1p(stim) - jnp.log1p(theta),
                "task": met, "step": jnp.full(met.shape, w["t"]), "chance": w["u"][:, 2]}  # fmt: skip

    def due(w, p):
        return w["task"] < 0  # only idle agents choose

    def step(key, w, act, p):
        o, idle = DivisionOfLabour.observe(w, p), w["task"] < 0
        quit = ~idle & (w["u"][:, 1] < p.quit_prob)
        world = World(task=w["task"], theta=w["theta"], s=w["s"], counts=w["counts"])
        new = transition(p, world, act, o["task"], quit, w["t"])
        gains = jnp.where(idle & (act > 0), (o["stimulus"] - o["threshold"]) / p.theta_max, 0.0)
        return {**w, **vars(new), "t": w["t"] + 1, "u": _offer(key, p.population, p)}, gains  # fmt: skip

    def reward(w, gains, p):
        return gains

    def plot(
        self, frame: pd.DataFrame, plots_dir: Path, config: DivisionOfLabourConfig
    ) -> list[Path]:
        """One figure: stimuli and task shares over time, thresholds of traced agents, and
        the spread of agents' task entropies (specialists near 0, generalists near 1)."""
        if frame.empty:
            return []
        fig, axes = subplots(plots_dir, 2, 2, figsize=(10, 7), dpi=100)
        for ax, metric, label in (
            (axes[0, 0], "stimulus", "stimulus s_j"),
            (axes[0, 1], "active_share", "share of agents on task j"),
        ):
            sub = frame[frame["metric"] == metric]
            mean = sub.groupby(["task", "time"])["value"].mean()
            for j, series in mean.groupby(level=0):
                ax.plot(
                    series.index.get_level_values(1),
                    series.values,
                    color=f"C{int(j) % 10}",  # the default colour cycle
                    label=f"task {int(j)}",
                )
            ax.set_xlabel("step")
            ax.set_ylabel(label)
            ax.legend(fontsize=8, loc="best")
        ax = axes[1, 0]
        sub = frame[(frame["metric"] == "threshold") & (frame["task"] == 0)]
        sub = sub[sub["replicate"] == sub["replicate"].min()]
        for _, series in sub.groupby("agent"):
            ax.plot(series["time"], series["value"], color="tab:blue", alpha=0.5, lw=0.8)
        ax.set_xlabel("step")
        ax.set_ylabel("threshold for task 0")
        ax.set_title("traced agents, first replicate", fontsize=9)
        ax = axes[1, 1]
        acts = frame[frame["metric"] == "acts"]
        if not acts.empty:
            table = acts.pivot_table(
                index=["replicate", "agent"], columns="task", values="value", aggfunc="sum"
            )
            h = task_entropy(table.to_numpy())
            ax.hist(h[np.isfinite(h)], bins=20, range=(0, 1), color="tab:green")
        ax.set_xlabel("task entropy of an agent's acts (0 = specialist)")
        ax.set_ylabel("agents")
        fig.suptitle(
            f"division of labour: {config.population} agents, {config.tasks} tasks, reinforcement={config.reinforcement}"
        )
        return [save_figure(fig, plots_dir / "division_of_labour.png")]
