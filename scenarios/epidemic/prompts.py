"""Prompts and the action schema of LLM agents deciding their daily contacts.

After AgentTorch's LLM archetypes (Chopra et al.): the system prompt states the disease and
the choice, the user prompt the person's situation (own health as they know it, how many of
their contacts and of the town have symptoms, and the trend); the answer is a short JSON
object with a one-sentence reason first and the contact level. Under archetypes the
prevalences are given as buckets, so that agents in the same situation share one call.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

# Prevalence buckets (upper edges, as shares) shown to archetypes; bucket 0 is "none".
EDGES = np.array([0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5])
BUCKET_TEXT = (
    "none",
    "under 0.5%",
    "0.5-1%",
    "1-2%",
    "2-5%",
    "5-10%",
    "10-20%",
    "20-35%",
    "35-50%",
    "over 50%",
)
STATUS_TEXT = (
    "You feel healthy: no symptoms (you could still be infected without knowing it).",
    "You have symptoms of the disease: you are ill and contagious now.",
    "You have recovered from the disease after being ill: you are immune and cannot catch it again.",
)
TREND_TEXT = ("falling", "about the same", "rising")


class ContactChoice(BaseModel):
    """An agent's decision for the day."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(description="one short sentence on why")
    contact: float = Field(
        ge=0.0,
        le=1.0,
        description="share of your usual contacts you keep today: 0.0 stay home, 1.0 as usual",
    )


FALLBACK = ContactChoice(reason="no valid reply: usual contacts", contact=1.0)


def bucket(share: np.ndarray) -> np.ndarray:
    """Bucket index (0..9) of prevalence shares: 0 exactly none, then by EDGES."""
    share = np.asarray(share, dtype=np.float64)
    return np.where(share <= 0, 0, 1 + np.searchsorted(EDGES, share, side="right"))


def trend(change: np.ndarray, level: np.ndarray) -> np.ndarray:
    """0 falling, 1 about the same, 2 rising: a change of more than 10% of the level
    (and of at least one person in ten thousand) counts."""
    change, level = np.asarray(change), np.asarray(level)
    big = np.abs(change) > np.maximum(0.1 * level, 1e-4)
    return np.where(big, np.where(change > 0, 2, 0), 1)


def system_prompt(
    *,
    agents: int,
    r0: float,
    recovery_rate: float,
    incubation_rate: float | None,
    symptomatic: float,
    isolation_cost: float,
    infection_cost: float,
    min_contact: float,
) -> str:
    """The disease, the daily choice and its costs (shared by every request of a run)."""
    incubation = (
        f"After infection there are about {1 / incubation_rate:.0f} days without symptoms in "
        "which a person is not yet contagious; then they are contagious "
        if incubation_rate is not None
        else "An infected person is contagious "
    )
    floor = f" You cannot go below {min_contact:g} (essential contacts)." if min_contact > 0 else ""
    return (
        f"You are one of {agents} people in a town during an outbreak of a new contagious "
        "disease. It spreads by contact between people. "
        f"{incubation}for about {1 / recovery_rate:.0f} days on average; after that they recover "
        f"and are immune. About {100 * symptomatic:.0f}% of infections show symptoms; the others go "
        "unnoticed but are just as contagious. If nobody changed their behaviour, each "
        f"contagious person would infect about {r0:g} others.\n"
        "Every day you choose your contact level: the share of your usual contacts you keep, "
        "from 0.0 (stay at home, see no one) to 1.0 (live as usual). The chance of catching "
        "the disease, and of passing it on, is proportional to your contact level times the "
        f"other person's.{floor}\n"
        f"Costs: a full day at home costs you {_points(isolation_cost)} (keeping half your "
        f"contacts costs half as much); catching the disease costs you {_points(infection_cost)}. Aim to "
        "lose as few points as possible over the outbreak, and consider the people around you.\n"
        'Reply with a JSON object only, with two fields: "reason" (one short sentence on why) and '
        '"contact" (your contact level today, a number from 0.0 to 1.0).'
    )


def _points(x: float) -> str:
    return f"{x:g} point" + ("" if x == 1 else "s")


def situation(
    *, day: int, status: int, contacts: str | None, local: str, town: str, trend_code: int
) -> str:
    """One person's (or archetype's) situation at the start of today, before the choice;
    ``contacts`` None (well mixed): the town's share is all there is to know."""
    near = f"{contacts}: {_have(local)} symptoms this morning.\n" if contacts is not None else ""
    people = "no one" if town == "none" else f"{town} of people"
    return (
        f"Day {day} of the outbreak. {STATUS_TEXT[status]}\n"
        f"{near}In the whole town: {people} {'has' if town == 'none' else 'have'} symptoms this "
        f"morning. Compared with yesterday morning, the town's share with symptoms is "
        f"{TREND_TEXT[trend_code]}.\n"
        "What contact level do you choose for today?"
    )


def _have(count: str) -> str:
    """'no one has', '1 has', '3 have', '2-5% have' (a count, a bucket or 'none')."""
    if count in ("none", "0"):
        return "no one has"
    return f"{count} has" if count == "1" else f"{count} have"


def contacts_phrase(degree: int) -> str:
    """How an agent's contacts are described on a graph."""
    return f"Among the {degree} people you meet regularly"


def percent(share: float) -> str:
    """An exact share as shown to a per-agent LLM."""
    if share <= 0:
        return "none"
    pct = 100 * share
    return f"{pct:.2f}%" if pct < 1 else f"{pct:.1f}%"
