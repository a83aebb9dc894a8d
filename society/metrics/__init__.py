"""Metrics of cooperation, specialisation, collective self-improvement and network structure.

Pure, vectorised functions over recorded data (numpy arrays or anything ``np.asarray``
accepts, including jax arrays), each documenting its formula and source. Usable from
scenarios and from a notebook on a run's ``metrics.parquet`` (see :func:`load_metrics`).
"""

from society.metrics.cooperation import (
    assortment,
    cooperation_rate,
    donation_fraction,
    flow_totals,
    gini,
    gini_jax,
    reciprocity,
    reputation_conditioned_giving,
    welfare,
)
from society.metrics.improvement import (
    COST_UNITS,
    artifact_reuse,
    capability_and_efficiency,
    forgetting,
    gain_from_first,
    learning_curves,
    plasticity,
    transfer_ratio,
)
from society.metrics.network import clustering, degree_stats, edge_array, modularity, path_length
from society.metrics.replicates import (
    across_replicates,
    bootstrap_ci,
    load_metrics,
    summarize_metrics,
)
from society.metrics.specialisation import dol_index, emergent_niches, role_stability, task_entropy
from society.metrics.text import lexical_diversity

__all__ = [
    "COST_UNITS",
    "across_replicates",
    "artifact_reuse",
    "assortment",
    "bootstrap_ci",
    "capability_and_efficiency",
    "clustering",
    "cooperation_rate",
    "degree_stats",
    "dol_index",
    "donation_fraction",
    "edge_array",
    "emergent_niches",
    "flow_totals",
    "forgetting",
    "gain_from_first",
    "gini",
    "gini_jax",
    "learning_curves",
    "lexical_diversity",
    "load_metrics",
    "modularity",
    "path_length",
    "plasticity",
    "reciprocity",
    "reputation_conditioned_giving",
    "role_stability",
    "summarize_metrics",
    "task_entropy",
    "transfer_ratio",
    "welfare",
]
