"""A figure of a replicate's artifact store: who built on whom, and when."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

MAX_LINEAGE = 300  # artifacts drawn (the newest)
MARKERS = {"note": "o", "code": "^", "playbook": "s"}  # other kinds: "D"


def plot_lineage(
    store_path: Path, plots_dir: Path, niches: Sequence[str] = (), unit: str = "step"
) -> Path | None:
    """``artifact_lineage.png``: the newest artifacts of the store at ``store_path`` against
    the time they were made, one row per niche (``niches`` in their order, then any other,
    then none), a line from each parent to its child, markers by kind, colour by uses. None
    when the store is empty."""
    from sim_core.experiment import save_figure, subplots
    from society.artifacts.store import ArtifactStore

    with ArtifactStore(store_path) as store:
        frame, graph = store.to_dataframe(), store.lineage_graph()
    if frame.empty:
        return None
    frame = frame.sort_values("created_at").tail(MAX_LINEAGE)
    rows = [*niches, *sorted(set(frame["niche"].dropna()) - set(niches))]
    row, rng = {d: i for i, d in enumerate(rows)}, np.random.default_rng(0)
    pos = {
        a: (t, row.get(n, len(rows)) + rng.uniform(-0.3, 0.3))
        for a, t, n in zip(frame["id"], frame["created_at"], frame["niche"], strict=True)
    }
    fig, ax = subplots(plots_dir, figsize=(8, 4), dpi=100)
    for parent, child in graph.edges():
        if parent in pos and child in pos:
            (x0, y0), (x1, y1) = pos[parent], pos[child]
            ax.plot([x0, x1], [y0, y1], color="grey", lw=0.5, alpha=0.5)
    for kind, sub in frame.groupby("kind", sort=True):
        xy = np.array([pos[a] for a in sub["id"]])
        ax.scatter(xy[:, 0], xy[:, 1], s=14, marker=MARKERS.get(kind, "D"), c=sub["uses"],
                   cmap="viridis", label=kind)  # fmt: skip
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel(f"created at ({unit})")
    ax.set_title("artifact lineage, replicate 0 (colour: uses; lines: parent -> child)")
    ax.legend(fontsize=8)
    return save_figure(fig, plots_dir / "artifact_lineage.png")
