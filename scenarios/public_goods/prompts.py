"""Prompts and action schemas of LLM agents in the public goods game.

The system prompt states the rules and the payoffs plainly; each round a contribution prompt
gives the agent's situation and its own recent history, and (when punishment or reward is on)
a sanction prompt shows this round's contributions of its group's other members, anonymously
and in order, and asks for points per member. Replies are short JSON objects with a one-line
``reason`` first.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field


class Contribution(BaseModel):
    """An agent's contribution this round."""

    reason: str = Field(description="one short sentence")
    contribution: float = Field(ge=0, description="tokens put into the group project")


class Decision(BaseModel):
    """An agent's number of a stage: tokens contributed, or points per member sanctioned."""

    reason: str = Field(description="one short sentence")
    amount: float = Field(
        ge=0, description="the tokens you contribute, or the points you assign to each member"
    )


def num(x: float) -> str:
    """Tokens as shown to agents: at most two decimals, no trailing zeros."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def system_prompt(
    *,
    neighbourhood: bool,
    group_size: int,
    r: float,
    endowment: float,
    rounds: int,
    punishment: bool,
    reward: bool,
    punishment_cost: float,
    punishment_fine: float,
    reward_cost: float,
    reward_benefit: float,
    max_points: float,
) -> str:
    """The rules and payoffs, shared by every request of a run."""
    e = num(endowment)
    if neighbourhood:
        groups = (
            "The players are connected in a network. Every player centres one group made of "
            "themselves and their network neighbours, so you belong to your own group and to "
            "each neighbour's group, and your contribution is split equally among the groups "
            "you belong to. The groups stay the same every round."
        )
    else:
        groups = (
            f"Every round the players are split into new groups of about {group_size}; you do "
            "not know who the others are and will rarely meet the same players again. A player "
            "left without a group sits that round out and keeps their tokens."
        )
    stage = []
    if punishment:
        stage.append(
            f"punish them: each punishment point you assign costs you {num(punishment_cost)} "
            f"token(s) and takes {num(punishment_fine)} tokens from that member"
        )
    if reward:
        stage.append(
            f"reward them: each reward point you assign costs you {num(reward_cost)} token(s) "
            f"and gives {num(reward_benefit)} tokens to that member"
        )
    sanction = ""
    if stage:
        sanction = (
            "\nAfter each round's contributions, you see what the other members of your group "
            "contributed (anonymously) and may " + " or ".join(stage) + ". You choose one "
            f"number of points, 0 to {num(max_points)}: it goes to each member"
            + " below the group's mean contribution" * (punishment and not reward)
            + " at or above the group's mean contribution" * (reward and not punishment)
            + (
                " (as punishment to those below the group's mean contribution, as reward to "
                "the others)"
            )
            * (punishment and reward)
            + "; what you spend on points cannot exceed your earnings of the round. Others "
            "can do the same to you."
        )
    return (
        "You are a player in a repeated public goods game; your play helps researchers "
        "understand cooperation.\n"
        f"{groups}\n"
        f"Each round every player receives {e} tokens and decides how many of them (0 to {e}) "
        "to contribute to the group project; they keep the rest. Each group's total "
        f"contribution is multiplied by {num(r)} and shared equally among all its members, "
        "whatever they contributed. So a token you keep is worth 1 token to you, while a "
        f"token you contribute is worth {num(r)} / (the group's size) tokens to you and the "
        "same to every other member of the group."
        f"{sanction}\n"
        f"The game lasts {rounds} rounds. Your goal is to earn as many tokens as you can over "
        "all rounds. Reply with a JSON object only."
    )


def history_text(rows: Sequence[dict]) -> str:
    """The agent's own past rounds, oldest first: what it and its group did and earned."""
    if not rows:
        return "This is the first round: you have no history yet."
    lines = ["Your recent rounds:"]
    for h in rows:
        if h.get("sat_out"):
            lines.append(
                f"- Round {h['round']}: no group had room for you; you sat out and kept your "
                f"{num(h['earned'])} tokens."
            )
            continue
        others = ", ".join(num(x) for x in h["others"]) or "none"
        line = (
            f"- Round {h['round']}: you contributed {num(h['mine'])}; the others in your "
            f"group contributed {others}; the project gave you {num(h['project'])}; "
        )
        extra = []
        if h.get("fine"):
            extra.append(f"you lost {num(h['fine'])} to punishment")
        if h.get("bonus"):
            extra.append(f"you got {num(h['bonus'])} in rewards")
        if h.get("spent"):
            extra.append(f"you spent {num(h['spent'])} on points")
        line += (", ".join(extra) + "; " if extra else "") + f"you earned {num(h['earned'])}."
        lines.append(line)
    return "\n".join(lines)


def contribution_prompt(
    *, round_no: int, rounds: int, endowment: float, members: int, mpcr: float,
    neighbourhood: bool, history: str, field: str = "contribution",
) -> str:  # fmt: skip
    """One agent's contribution decision (its number in the reply's ``field``)."""
    e = num(endowment)
    if neighbourhood:
        where = (
            f"You have {members - 1} neighbours, so you belong to {members} groups. Each token "
            f"you contribute returns {num(mpcr)} tokens to you in total."
        )
    else:
        where = (
            f"This round your group has {members} members (you and {members - 1} others). "
            f"Each token you contribute returns {num(mpcr)} tokens to you and the same to "
            "each other member."
        )
    return (
        f"Round {round_no} of {rounds}. {where}\n{history}\n"
        f"You have {e} tokens. How many do you contribute to the project (0 to {e})? Reply "
        'with a JSON object with two fields: "reason" (one short sentence on why) and '
        f'"{field}" (the tokens you put in, a number from 0 to {e}).'
    )


def sanction_prompt(
    *, round_no: int, rounds: int, mine: float, others: Sequence[float], earned: float,
    punishment: bool, reward: bool, max_points: float,
) -> str:  # fmt: skip
    """One agent's punishment/reward decision after seeing its group's contributions: one
    number of points for each member below the mean (punishment), at or above it (reward)."""
    listed = "; ".join(f"member {i + 1}: {num(x)}" for i, x in enumerate(others))
    mean = (mine + sum(others)) / (1 + len(others))
    whom = []
    if punishment:
        whom.append("punishment points to each member who contributed less than the mean")
    if reward:
        whom.append("reward points to each member who contributed at least the mean")
    return (
        f"Round {round_no} of {rounds}, after the contributions. You contributed {num(mine)}. "
        f"The other members of your group contributed (anonymous, in this order): {listed}. "
        f"The group's mean contribution was {num(mean)}. You earned {num(earned)} tokens so "
        f"far this round.\nHow many points do you assign: {' and '.join(whom)} (0 to "
        f'{num(max_points)}, 0 = none)? Reply with a JSON object with two fields: "reason" '
        '(one short sentence on why) and "amount" (the points, one number).'
    )
