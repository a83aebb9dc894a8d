"""Parameters of the division-of-labour scenario (pydantic only, so `society describe` is fast)."""

from __future__ import annotations

from pydantic import Field, model_validator

from society.fields import Kind, Share, SharedConfig, Split, default, in_order


class DivisionOfLabourConfig(SharedConfig):
    """Division of labour from response thresholds with reinforcement (Theraulaz et al. 1998)."""

    population: int = default(100)
    """number of agents N in the colony"""

    tasks: int = Field(2, ge=2)
    """number of tasks m"""

    steps: int = Field(2000, ge=1)
    """time steps to simulate"""

    average_from: int = Field(1000, ge=0)
    """first step whose acts count towards dol_index and task_entropy"""

    delta: float = Field(1.0, ge=0.0)
    """stimulus growth: every task's stimulus rises by delta per step"""

    alpha: float = Field(3.0, ge=0.0)
    """efficiency of work: a task's stimulus falls by alpha times the share of agents doing it (then
    is clipped at 0)"""

    quit_prob: Share = 0.2
    """probability that an active agent stops its task each step"""

    reinforcement: bool = True
    """threshold reinforcement: doing task j lowers the agent's threshold for j by xi, every step
    not doing j raises it by phi"""

    xi: float = Field(10.0, ge=0.0)
    """reinforcement: threshold decrease per step doing the task"""

    phi: float = Field(1.0, ge=0.0)
    """forgetting: threshold increase per step not doing it"""

    theta_min: float = Field(1.0, ge=0.0)
    """lower bound of thresholds"""

    theta_max: float = Field(1000.0, gt=0.0)
    """upper bound of thresholds"""

    theta_init: float = Field(500.0, ge=0.0)
    """every agent's initial threshold for every task"""

    agents: Kind = default("rules")
    """who decides whether an idle agent takes the task it meets: rules (the threshold rule s^2 /
    (s^2 + theta^2)), learned (REINFORCE policies), llm, or mixed (see split)"""

    split_only_mixed = True
    split: Split | None = default(None)
    """agents=mixed: proportions of each kind, e.g. 'rules:8,learned:1,llm:1'"""

    learning_rate: float = default(0.05)
    """learned agents: Adam learning rate"""

    llm_max_tokens: int = default(64)
    """LLM agents: reply limit in tokens (the answer is {"work": true})"""

    record_every: int = default(10)
    trace_agents: int = Field(20, ge=0)
    """agents (the first ids) whose thresholds are recorded over time"""

    @model_validator(mode="after")
    def _check(self) -> DivisionOfLabourConfig:
        in_order(self, "average_from < steps", "theta_min <= theta_init <= theta_max")
        return self
