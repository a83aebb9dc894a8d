"""Prompt template and action schema of LLM agents in the division-of-labour scenario."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

SYSTEM = (
    "You are a worker in a simulated colony that shares a few recurring tasks. Each step you "
    "decide whether to start the task you come across. Reply with JSON that matches the "
    "schema you are given and nothing else."
)


class Work(BaseModel):
    """An idle agent's decision about the task it meets."""

    model_config = ConfigDict(extra="forbid")

    work: bool = Field(description="true to start working on the task now, false to stay idle")


FALLBACK = Work(work=False)


def template(
    *,
    tasks: int,
    delta: float,
    alpha: float,
    quit_prob: float,
    reinforcement: bool,
    xi: float,
    phi: float,
    theta_min: float,
    theta_max: float,
) -> str:
    """The user message, a ``str.format`` template over one agent's observation fields
    (``step``, ``task``, ``stimulus``, ``threshold``); the colony's constants are filled in."""
    if reinforcement:
        practice = (
            f"Working on a task lowers your threshold for it by {xi:g} per step (practice); "
            f"every step you do not work on a task raises your threshold for it by {phi:g}. "
        )
    else:
        practice = "Thresholds do not change. "
    text = (
        f"Rules. The colony has {tasks} tasks, numbered 0 to {tasks - 1}. Each task has a "
        f"demand that rises by {delta:g} every step and falls by {alpha:g} times the share of "
        "the colony working on it (never below 0). You have a threshold for each task, between "
        f"{theta_min:g} and {theta_max:g}: your cost of doing it (lower means more skilled). "
        f"{practice}Once you start a task you keep working on it; each step you stop with "
        f"probability {quit_prob:g}.\n"
        "Scoring. Starting a task scores (demand - your threshold) / "
        f"{theta_max:g}; staying idle scores 0.\n\n"
        "Your situation. It is step {step}. You are idle and come across task {task}: its "
        "demand is {stimulus:.1f} and your threshold for it is {threshold:.1f}.\n\n"
        'Do you start task {task} now? Answer {{"work": true}} or {{"work": false}}.'
    )
    return text
