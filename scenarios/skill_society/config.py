"""Parameters of the skill-society scenario (pydantic only, so `society describe` is fast)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from society.fields import Graph, GraphFields, Kind, Share, SharedConfig, Split, default, in_order


class SkillSocietyConfig(GraphFields, SharedConfig):
    """A society that learns from experience through shared and inherited artifacts, scored on held-out tasks."""

    agents: Kind = default("learned")
    """kind of agent: rules (fixed domain choice on own success estimates), learned (REINFORCE
    policies over domains), llm (solve the text tasks and write notes), or mixed (see split)"""

    population: int = default(200)
    """agents N per replicate"""

    split_only_mixed = True
    split: Split | None = default(None)
    """agents=mixed: proportions of each kind, e.g. 'learned:98,llm:2'"""

    steps: int = Field(40, ge=1)
    """moments per generation; each agent attempts one task per moment"""

    generations: int = Field(1, ge=1)
    """generations; at each turnover every agent is replaced by a new one"""

    inherit: bool = True
    """new agents receive their parent's artifacts (else they die with it)"""

    eval_every: int = Field(10, ge=1)
    """moments between evaluation checkpoints"""

    difficulty: Share = 0.5
    """task difficulty: fewer examples and longer inputs as it rises"""

    sharing: Literal["none", "neighbours", "broadcast", "strong-to-weak"] = "neighbours"
    """who sees an agent's artifacts: nobody else, its graph neighbours, everyone, or agents of the
    artifact's niche who score lower than its author"""

    graph: Graph = default("small-world")
    allocation: Literal["random", "self-select", "bidding", "router"] = "self-select"
    """which domain an agent attempts: a random one, its own choice, its choice weighed by market
    prices that rise with unmet demand, or a central router's assignment by comparative advantage"""

    team: Literal["none", "chain", "star", "tree", "random-dag"] = "none"
    """numeric agents work in teams of team_size whose answer is the team's: each member's
    contribution decays with its distance from the final answerer in this structure"""

    team_size: int = Field(3, ge=2)
    """members per team (population must be a multiple)"""

    team_decay: Share = 0.5
    """team: weight of a member's work per link from the answerer"""

    learning_rate: float = default(0.1)
    """learned agents: Adam learning rate"""

    explore: Share = 0.1
    """rules and llm agents: probability of trying a random domain"""

    initial_skill: Share = 0.2
    """skill of a new agent in every domain"""

    experts: int = Field(0, ge=0)
    """agents per replicate (the first ids) that start as experts with playbooks"""

    slope: float = Field(8.0, gt=0.0)
    """success probability sigmoid(slope * (skill - difficulty))"""

    practice_rate: Share = 0.02
    """skill gained per attempt: rate * (1 - skill)"""

    transfer_rate: Share = 0.3
    """skill learned from a used artifact: rate * measured quality * (quality - skill)"""

    artifact_strength: Share = 0.5
    """help while using an artifact of quality q: skill + s q (1 - skill)"""

    forgetting: Share = 0.005
    """per moment, unpractised skill decays by this share towards initial_skill"""

    memorisation: Share = 0.05
    """per attempt, memory of train instances (helps train only)"""

    distil_on_failure: Share = 1.0
    """probability of writing an artifact after a failed attempt"""

    distil_on_success: Share = 0.1
    """probability of writing an artifact after a success"""

    insight: Share = 0.2
    """a failure's lesson: artifact quality skill + insight * (1 - skill)"""

    ood_transfer: Share = 0.6
    """share of skill that carries to shifted rules and the unseen domain"""

    retire_min_uses: int = Field(20, ge=1)
    """uses before an artifact can be retired"""

    retire_below: Share = 0.2
    """retire artifacts whose usefulness posterior mean is at most this"""

    publish_top: int = Field(4, ge=0)
    """numeric agents' best playbooks per domain published to the store at each checkpoint"""

    reach_quality: Share = 0.5
    """reach: share of agents holding a playbook at least this good"""

    artifact_kind: Literal["note", "code"] = "note"
    """what llm agents distil: a note stating the rule, or code (def solve(x) -> str) that the
    verifier runs in the sandbox on a task's examples and input"""

    retrieve: int = Field(3, ge=1, le=10)
    """llm agents: artifacts retrieved per task"""

    llm_eval_tasks: int = Field(2, ge=1)
    """llm agents: evaluation tasks per split at each checkpoint"""

    llm_latency: int = Field(0, ge=0)
    """llm agents: moments between asking and the reply's effect. 0: the moment waits for the
    replies; k >= 1: an attempt started at moment t is a request in flight and its reply lands at
    moment t + k (after that moment's numeric work), so numeric agents keep stepping while LLM calls
    are out; each llm agent then attempts once every k moments. Results do not depend on how long
    the calls really take"""

    llm_max_tokens: int = default(96, ge=8)
    """llm agents: reply length bound in tokens"""

    record_every: int = default(1)

    @model_validator(mode="after")
    def _check(self) -> SkillSocietyConfig:
        if self.team != "none" and self.population % self.team_size:
            raise ValueError(
                f"population ({self.population}) must be a multiple of team_size ({self.team_size})"
            )
        in_order(self, "experts <= population")
        if self.eval_every % self.record_every or self.steps % self.record_every:
            raise ValueError(
                f"eval_every ({self.eval_every}) and steps ({self.steps}) must be multiples of "
                f"record_every ({self.record_every}): checkpoints are recorded moments"
            )
        if self.eval_every > self.steps * self.generations:
            raise ValueError(
                f"eval_every ({self.eval_every}) must be <= steps * generations "
                f"({self.steps * self.generations}) so that a gain can be measured"
            )
        return self
