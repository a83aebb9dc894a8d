"""LLM archetypes: agents that share a profile share one call per moment.

Following AgentTorch's LLM archetypes, a population of a million agents gets LLM-driven
behaviour for the cost of one call per distinct profile (times the number of samples wanted
for diversity): the cohort renders one prompt per archetype, makes those calls in one
``complete_many``, and fans each completion out to the agents of its group, as arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from society.llm.client import Request


@dataclass(frozen=True)
class Archetypes:
    """A grouping of agents by (profile, sample).

    ``profiles[k]`` is the k-th distinct profile (sorted); each group ``g`` is a profile
    ``group_profile[g]`` with a sample index ``group_sample[g]``; ``group_of[i]`` is agent
    i's group. With ``n_samples > 1`` the agents of a profile are spread over that many
    samples, so they do not all act alike; identical prompts with different samples become
    one call with ``n`` choices in the client.
    """

    profiles: np.ndarray
    group_profile: np.ndarray
    group_sample: np.ndarray
    group_of: np.ndarray

    @classmethod
    def from_profiles(
        cls,
        profiles: Sequence[Any] | np.ndarray,
        *,
        n_samples: int = 1,
        seed: int = 0,
        agents: Sequence[int] | np.ndarray | None = None,
    ) -> Archetypes:
        """Group agents by profile: one row (or scalar) per agent, numbers or strings.

        With ``n_samples > 1`` an agent's sample is a hash of ``(seed, agent id)``, so it does
        not depend on which other agents are in the call (a batch of replicates or a subset
        of due agents); ``agents`` gives the ids (default: the row positions 0..n-1).
        """
        arr = np.asarray(profiles)
        if arr.ndim not in (1, 2) or arr.shape[0] == 0:
            raise ValueError(
                "profiles must be a non-empty 1-D array (one key per agent) or 2-D array "
                f"(one row per agent), got shape {arr.shape}"
            )
        if arr.dtype == object:
            raise TypeError("profiles must hold numbers or strings (map other keys to ids first)")
        if not isinstance(n_samples, int | np.integer) or n_samples < 1:
            raise ValueError(f"n_samples must be an int >= 1, got {n_samples!r}")
        if agents is None:
            ids = np.arange(arr.shape[0], dtype=np.int64)
        else:
            ids = np.asarray(agents)
            if ids.shape != (arr.shape[0],) or not np.issubdtype(ids.dtype, np.integer):
                raise ValueError(
                    "agents must be a 1-D integer array with one id per profile row "
                    f"({arr.shape[0]}), got shape {ids.shape} and dtype {ids.dtype}"
                )
        uniq, profile_of = np.unique(arr, axis=0, return_inverse=True)
        profile_of = profile_of.reshape(-1)
        if n_samples == 1:
            sample_of = np.zeros_like(profile_of)
        else:
            sample_of = (_hash(seed, ids) % np.uint64(n_samples)).astype(np.int64)
        pair = profile_of.astype(np.int64) * n_samples + sample_of
        groups, group_of = np.unique(pair, return_inverse=True)
        return cls(
            profiles=uniq,
            group_profile=groups // n_samples,
            group_sample=groups % n_samples,
            group_of=group_of.reshape(-1),
        )

    @property
    def n_agents(self) -> int:
        return int(self.group_of.shape[0])

    @property
    def n_groups(self) -> int:
        """Calls per moment without the client's merging of samples into one call."""
        return int(self.group_profile.shape[0])

    def requests(
        self, render: Callable[[Any], list[dict[str, Any]]], **fields: Any
    ) -> list[Request]:
        """One Request per group: ``render(profile)`` gives the messages (called once per
        distinct profile); ``fields`` (schema, fallback, cohort) are passed to every Request."""
        if "sample" in fields or "agent" in fields:
            raise ValueError("requests() sets sample per group and no agent; do not pass them")
        rendered: dict[int, list[dict[str, Any]]] = {}
        out = []
        for p, s in zip(self.group_profile.tolist(), self.group_sample.tolist(), strict=True):
            if p not in rendered:
                rendered[p] = render(self.profiles[p])
            out.append(Request(rendered[p], sample=int(s), **fields))
        return out

    def fan_out(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        """Per-agent array from one value per group (completions, parsed actions, numbers)."""
        if len(values) != self.n_groups:
            raise ValueError(
                f"values must have one entry per group ({self.n_groups}), got {len(values)}"
            )
        if isinstance(values, np.ndarray):
            return values[self.group_of]
        per_group = np.empty(self.n_groups, dtype=object)
        for g, v in enumerate(values):  # a loop over groups, not agents
            per_group[g] = v
        return per_group[self.group_of]

    def members(self, group: int) -> np.ndarray:
        """The rows of `profiles` (agent positions in the call) that form one group."""
        return np.flatnonzero(self.group_of == group)


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of uint64 that scrambles every bit."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _hash(seed: int, ids: np.ndarray) -> np.ndarray:
    """A uint64 per id, a function of (seed, id) only (vectorised; wraps modulo 2**64)."""
    with np.errstate(over="ignore"):
        key = _mix64(np.asarray([int(seed) % 2**64], dtype=np.uint64))
        return _mix64(key + ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
