"""Config fields that every scenario shares, as pydantic types (pure Python: `society list`
and `society describe` must not import jax).

    class MyConfig(BaseModel):
        graph: Graph = Field("random-regular", description=...)
        split: Split = Field("rules:8,learned:1,llm:1", description=...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from society.mix import parse_weights

# Kinds of agent a population mixes (`agents=mixed` / `agent_type=mixed` with a `split`).
KINDS = ("rules", "learned", "llm")
# Named graphs scenario configs accept (built by society.topology.make_topology from a
# `degree`, `rewire`, `neighbourhood` and `periodic`), besides an edge-list file.
GRAPHS = (
    "complete",
    "cycle",
    "lattice",
    "random-regular",
    "erdos-renyi",
    "small-world",
    "scale-free",
)


def parse_split(spec: str) -> dict[str, float]:
    """``"rules:8,learned:1,llm:1"`` -> ``{"rules": 8.0, "learned": 1.0, "llm": 1.0}``."""
    return parse_weights(spec, KINDS, "split")


def _check_split(spec: str) -> str:
    parse_split(spec)
    return spec


def _check_graph(name: str) -> str:
    if name not in GRAPHS and not Path(name).is_file():
        raise ValueError(f"must be one of {', '.join(GRAPHS)} or an existing edge-list file")
    return name


Split = Annotated[str, AfterValidator(_check_split)]
Graph = Annotated[str, AfterValidator(_check_graph)]
