"""Prompt templates and the action schema of LLM agents in the indirect-reciprocity game."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scenarios.indirect_reciprocity.config import IndirectReciprocityConfig


class Decision(BaseModel):
    """A donor's move."""

    model_config = ConfigDict(extra="forbid")

    give: bool = Field(description="true to give to the recipient, false to refuse")


FALLBACK = Decision(give=False)

SYSTEM = (
    "You are a member of a population that plays a repeated helping game with randomly "
    "chosen partners. Your goal is the highest total payoff for yourself over the whole game. "
    "Reply with JSON that matches the schema you are given and nothing else."
)

NORM_TEXT = {
    "image-scoring": "giving earns the donor a good reputation and refusing a bad one, "
    "whoever the recipient is",
    "standing": "giving earns the donor a good reputation; refusing a recipient with a good "
    "reputation earns a bad one, but refusing a recipient with a bad reputation earns a good one",
    "stern-judging": "giving to a recipient with a good reputation or refusing one with a bad "
    "reputation earns the donor a good reputation; giving to a bad recipient or refusing a good "
    "one earns a bad reputation",
}


def template(cfg: IndirectReciprocityConfig) -> str:
    """The user message of one decision: the rules with this run's parameters filled in,
    and ``{round}``, ``{recipient}``, ``{me}``, ``{payoff}`` left for each agent."""
    if cfg.assessment == "public":
        seen = (
            f"Reputations are public: each act is seen with probability {cfg.q:g} and then "
            "sets the donor's reputation, shared by everyone."
        )
        me = "Your own reputation: {me}."
    else:
        seen = (
            f"Reputations are private: each member sees each act with probability {cfg.q:g} "
            "and keeps its own opinion of the donor, judged against its own opinion of the "
            "recipient. Everyone starts out seen as good."
        )
        me = "You do not know what others think of you."
    rules = (
        f"Rules: in every round each member is a donor once, to a random recipient. Giving costs "
        f"the donor {cfg.c:g} and gives the recipient {cfg.b:g}; refusing costs nothing. You "
        "will probably never meet this recipient again, but others decide whether to give to "
        "you from your reputation. Reputation norm: " + NORM_TEXT[cfg.norm] + ". " + seen
    )
    if cfg.execution_error > 0:
        rules += f" An intended gift fails with probability {cfg.execution_error:g}."
    situation = (
        f"Round {{round}} of {cfg.steps}. You are the donor. "
        "The recipient's reputation, in your eyes: {recipient}. " + me + " "
        "Your payoff so far: {payoff}."
    )
    ask = 'Answer {{"give": true}} to give or {{"give": false}} to refuse.'
    return "\n\n".join([rules.replace("{", "{{").replace("}", "}}"), situation, ask])


def fields(obs: Mapping[str, Any]) -> dict[str, Any]:
    """Template fields from one agent's numeric observation."""
    return {
        "round": int(obs["round"]) + 1,
        "recipient": "good" if obs["partner_good"] > 0 else "bad",
        "me": "good" if obs["my_good"] > 0 else "bad",
        "payoff": f"{float(obs['my_payoff']):.4g}",
    }
