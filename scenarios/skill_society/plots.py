"""Figures of a skill-society run: learning curves, division of labour, the network by niche,
and artifact lineage (replicate 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from scenarios.skill_society.model import NICHE_ROWS
from scenarios.skill_society.tasks import DOMAINS, SPLITS
from sim_core.experiment import save_figure, subplots
from society.artifacts.plots import plot_lineage
from society.topology import topology_of


def plot_all(frame: pd.DataFrame, plots_dir: Path, cfg, run_dir: Path) -> list[Path]:
    if frame.empty:
        return []
    written = []
    scores = frame[frame["metric"] == "score"]
    if not scores.empty:
        kinds = sorted(scores["kind"].dropna().unique())
        fig, axes = subplots(
            plots_dir, 1, len(kinds), figsize=(5 * len(kinds), 3.6), dpi=100, squeeze=False
        )
        for ax, kind in zip(axes[0], kinds, strict=True):
            sub = scores[scores["kind"] == kind]
            for i, split in enumerate(SPLITS):
                m = sub[sub["split"] == split].groupby("time")["value"].mean()
                ax.plot(m.index, m.values, marker="o", color=f"C{i}", label=split)
            ax.set_title(f"{kind} agents")
            ax.set_xlabel("moment")
            ax.set_ylabel("score (share of tasks solved)")
            ax.set_ylim(0, 1)
            ax.legend(fontsize=8)
        written.append(save_figure(fig, plots_dir / "learning_curves.png"))
    dol = frame[frame["metric"].isin(["dol_index", "niches"])]
    if not dol.empty:
        fig, ax = subplots(plots_dir, figsize=(6, 3.5), dpi=100)
        m = dol[dol["metric"] == "dol_index"].groupby("time")["value"].mean()
        ax.plot(m.index, m.values, marker="o", label="DOL index (I/H(task))")
        ax.set_xlabel("moment")
        ax.set_ylabel("division of labour")
        ax2 = ax.twinx()
        k = dol[dol["metric"] == "niches"].groupby("time")["value"].mean()
        ax2.step(k.index, k.values, where="post", color="C1", label="niches")
        ax2.set_ylabel("niches")
        fig.legend(fontsize=8, loc="upper left")
        written.append(save_figure(fig, plots_dir / "division_of_labour.png"))
    niche = frame[(frame["metric"] == "niche") & (frame["replicate"] == 0)]
    if not niche.empty:  # the graph of the first agents (one graph per parameters)
        e = topology_of(cfg).edges
        written.append(_network(niche, e[(e < NICHE_ROWS).all(1)], plots_dir))
    store = run_dir / "artifacts-r0.sqlite"
    lineage = plot_lineage(store, plots_dir, DOMAINS, "moment") if store.exists() else None
    return written + ([lineage] if lineage else [])


def _network(niche: pd.DataFrame, edges: np.ndarray, plots_dir: Path) -> Path:
    import networkx as nx

    g = nx.Graph()
    agents = niche["agent"].astype(int).to_numpy()
    g.add_nodes_from(agents.tolist())
    g.add_edges_from(edges.tolist())
    pos = nx.spring_layout(g, seed=0)
    colour = {int(a): int(v) for a, v in zip(agents, niche["value"], strict=True)}
    fig, ax = subplots(plots_dir, figsize=(6, 6), dpi=100)
    nx.draw_networkx_edges(g, pos, ax=ax, alpha=0.2, width=0.5)
    for d, name in [(-1, "none yet"), *enumerate(DOMAINS)]:
        nodes = [a for a in g.nodes if colour.get(a, -1) == d]
        if nodes:
            nx.draw_networkx_nodes(g, pos, nodelist=nodes, ax=ax, node_size=18,
                                   node_color="lightgrey" if d < 0 else f"C{d}", label=name)  # fmt: skip
    ax.legend(fontsize=8, title="main niche")
    ax.set_title("agents by main niche (replicate 0)")
    ax.axis("off")
    return save_figure(fig, plots_dir / "network_niches.png")
