"""Specialisation metrics: division of labour, task breadth, emergent niches and role stability.

The common input is the individual x task act-count matrix ``counts[i, j]`` (how often agent
``i`` did task ``j`` in a window; time spent works too). Entropies use natural logarithms;
every normalised index is a ratio of entropies and so does not depend on the base.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from society.metrics._checks import as_float_array, check_nonnegative


def _counts(counts: Any) -> np.ndarray:
    c = as_float_array(counts, "counts", ndim=2)
    check_nonnegative(c, "counts")
    if c.sum() == 0:
        raise ValueError("counts has no acts (all zero); division of labour is undefined")
    return c


def _entropy(p: np.ndarray) -> float:
    """Shannon entropy (nats) of a probability vector; 0 log 0 = 0, exactly 0 for one outcome."""
    if np.count_nonzero(p) <= 1:
        return 0.0  # rounding would leave +-1e-17 here, turning 0/0 into a spurious ratio
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return max(float(-(p * logs).sum()), 0.0)


def _ratio(num: float, den: float) -> float:
    return float(np.clip(num / den, 0.0, 1.0)) if den > 0 else float("nan")


def dol_index(counts: Any) -> dict[str, float]:
    """Division-of-labour indices of Gorelick, Bertram, Killeen & Fewell (2004, Am. Nat. 164:677).

    With ``p_ij = counts_ij / sum(counts)`` and marginals ``p_i.`` (individuals) and ``p_.j``
    (tasks), the mutual information ``I = sum_ij p_ij log(p_ij / (p_i. p_.j))`` is normalised
    three ways:

    - ``dol_indiv_to_task = I / H(task)``: how far knowing the individual fixes the task, i.e.
      individuals specialise (the paper's D_indiv->tasks);
    - ``dol_task_to_indiv = I / H(individual)``: how far knowing the task fixes the individual,
      i.e. each task is done by few individuals (D_tasks->indiv);
    - ``dol_symmetric = I / sqrt(H(task) H(individual))`` (the symmetric D).

    All lie in [0, 1]: 1 for a perfectly specialised square matrix (one task per individual,
    as many individuals as tasks), 0 for a rank-one matrix (everyone splits effort alike).
    An index whose denominator entropy is 0 (a single active task or individual) is NaN;
    an all-zero matrix raises. Also returns ``mutual_information``, ``h_task``, ``h_indiv``.
    """
    c = _counts(counts)
    total = c.sum()
    rows = c.sum(axis=1)
    cols = c.sum(axis=0)
    # I = (1/N) sum_ij c_ij log(c_ij N / (r_i s_j)), summed directly rather than as
    # H_i + H_j - H_ij (no cancellation: a rank-one matrix gives I ~ 1e-17). Plain in-place
    # ufuncs over the matrix; zero cells get ratio 1 (log 0) and contribute c_ij * 0 = 0.
    ratio = c / np.maximum(rows, 1e-300)[:, None]
    ratio *= total / np.maximum(cols, 1e-300)
    ratio += c == 0
    np.log(ratio, out=ratio)
    mi = float(np.vdot(c, ratio) / total)
    pi, pj = rows / total, cols / total
    h_task, h_indiv = _entropy(pj), _entropy(pi)
    mi = min(max(mi, 0.0), h_task, h_indiv)  # 0 <= I <= min(H): holds exactly, up to rounding
    return {
        "mutual_information": mi,
        "h_task": h_task,
        "h_indiv": h_indiv,
        "dol_indiv_to_task": _ratio(mi, h_task),
        "dol_task_to_indiv": _ratio(mi, h_indiv),
        "dol_symmetric": _ratio(mi, float(np.sqrt(h_task * h_indiv))),
    }


def task_entropy(counts: Any, *, normalise: bool = True) -> np.ndarray:
    """Per-agent Shannon entropy of its task distribution, ``H_i = -sum_j q_ij log q_ij``.

    ``q_ij = counts_ij / sum_j counts_ij``. With ``normalise`` (default) divided by
    ``log(n_tasks)`` so 0 = pure specialist, 1 = uniform generalist (Pielou's evenness; Pielou
    1966, J. Theor. Biol. 13:131). NaN for agents with no acts; normalising needs >= 2 tasks.
    """
    c = as_float_array(counts, "counts", ndim=2)
    check_nonnegative(c, "counts")
    if normalise and c.shape[1] < 2:
        raise ValueError(f"normalise=True needs at least 2 tasks, got {c.shape[1]}")
    tot = c.sum(axis=1, keepdims=True)
    q = np.divide(c, tot, out=np.zeros_like(c), where=tot > 0)
    logs = np.log(q, out=np.zeros_like(q), where=q > 0)
    h = -(q * logs).sum(axis=1)
    if normalise:
        h = np.clip(h / np.log(c.shape[1]), 0.0, 1.0)
    h[tot[:, 0] == 0] = np.nan
    return h


def _sqdist(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    d = (x * x).sum(1)[:, None] - 2.0 * x @ centres.T + (centres * centres).sum(1)[None, :]
    return np.maximum(d, 0.0)


def _kmeans(
    x: np.ndarray, k: int, rng: np.random.Generator, n_iter: int = 100
) -> np.ndarray | None:
    """Lloyd's k-means with k-means++ seeding (Arthur & Vassilvitskii 2007); None if < k
    distinct points. Loops over iterations and tasks, never over agents."""
    centres = [x[rng.integers(len(x))]]
    d2 = ((x - centres[0]) ** 2).sum(1)
    for _ in range(1, k):
        if d2.sum() <= 0:
            return None
        centres.append(x[rng.choice(len(x), p=d2 / d2.sum())])
        d2 = np.minimum(d2, ((x - centres[-1]) ** 2).sum(1))
    c = np.array(centres)
    labels = np.full(len(x), -1)
    for _ in range(n_iter):
        new = _sqdist(x, c).argmin(1)
        if np.array_equal(new, labels):
            break
        labels = new
        size = np.bincount(labels, minlength=k)
        for j in range(x.shape[1]):
            sums = np.bincount(labels, weights=x[:, j], minlength=k)
            c[:, j] = np.where(size > 0, sums / np.maximum(size, 1), c[:, j])
    return labels


def _silhouette(x: np.ndarray, labels: np.ndarray, k: int) -> float:
    """Mean silhouette (Rousseeuw 1987, J. Comput. Appl. Math. 20:53); singletons score 0."""
    d = np.sqrt(_sqdist(x, x))
    onehot = np.eye(k)[labels]
    size = onehot.sum(0)
    sums = d @ onehot
    own = sums[np.arange(len(x)), labels]
    a = own / np.maximum(size[labels] - 1, 1)
    other = np.where(onehot > 0, np.inf, sums / np.maximum(size, 1))
    other[:, size == 0] = np.inf
    b = other.min(1)
    s = np.where(size[labels] > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-300), 0.0)
    return float(s.mean())


def emergent_niches(
    counts: Any,
    *,
    method: str = "dominant",
    min_share: float = 0.5,
    min_size: float = 0.05,
    k_max: int = 8,
    min_silhouette: float = 0.5,
    n_sample: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Number of emergent niches: clusters of agents' task profiles ``q_i = counts_i / sum``.

    ``method="dominant"``: an agent belongs to the niche of its most frequent task when that
    task has at least ``min_share`` of its acts (a specialist); a niche counts when it holds at
    least ``min_size`` of the active agents. Exact, O(n), invariant to relabelling.
    ``method="kmeans"``: k-means (k-means++ seeding, ``seed``) on the profiles for k = 2 ..
    ``k_max``, k chosen by the largest mean silhouette on a seeded sample of ``n_sample``
    agents; when no k reaches ``min_silhouette`` (0.5 = "reasonable structure" in Kaufman &
    Rousseeuw 1990, Finding Groups in Data) the population is one niche. Finds mixed-task
    niches the dominant rule cannot.

    Returns ``n_niches``, ``labels`` (niche per agent; -1 = no niche: inactive agents, and for
    ``dominant`` generalists or members of too-small groups), ``n_generalists`` (dominant
    only, else 0) and ``method`` (a sentence naming the rule and its parameters).
    """
    c = _counts(counts)
    if not 0.0 < min_share <= 1.0:
        raise ValueError(f"min_share must lie in (0, 1], got {min_share}")
    if not 0.0 <= min_size <= 1.0:
        raise ValueError(f"min_size must lie in [0, 1], got {min_size}")
    tot = c.sum(axis=1)
    active = tot > 0
    q = c[active] / tot[active, None]
    labels = np.full(len(c), -1, dtype=np.int64)
    if method == "dominant":
        dom, share = q.argmax(1), q.max(1)
        lab = np.where(share >= min_share, dom, -1)
        size = np.bincount(lab[lab >= 0], minlength=c.shape[1])
        big = size >= max(min_size * len(q), 1e-12)
        lab = np.where((lab >= 0) & big[np.maximum(lab, 0)], lab, -1)
        labels[active] = lab
        return {
            "n_niches": int(np.unique(lab[lab >= 0]).size),
            "labels": labels,
            "n_generalists": int((share < min_share).sum()),
            "method": f"dominant task with share >= {min_share}, niche size >= {min_size} of active agents",
        }
    if method != "kmeans":
        raise ValueError(f"method must be 'dominant' or 'kmeans', got {method!r}")
    if k_max < 2:
        raise ValueError(f"k_max must be >= 2, got {k_max}")
    rng = np.random.default_rng(seed)
    sample = rng.choice(len(q), size=min(n_sample, len(q)), replace=False)
    best_s, best_lab = -np.inf, np.zeros(len(q), dtype=np.int64)
    for k in range(2, k_max + 1):
        lab = _kmeans(q, k, rng)
        if lab is None:
            break
        s = _silhouette(q[sample], lab[sample], k)
        if s > best_s:
            best_s, best_lab = s, lab
    if best_s < min_silhouette:
        best_lab = np.zeros(len(q), dtype=np.int64)
    labels[active] = best_lab
    return {
        "n_niches": int(np.unique(best_lab).size),
        "labels": labels,
        "n_generalists": 0,
        "method": (
            f"k-means on task shares, k in 2..{k_max} by mean silhouette on {len(sample)} "
            f"agents (seed {seed}), one niche below silhouette {min_silhouette}"
        ),
    }


def entropies_jax(counts: Any) -> tuple[Any, Any]:
    """Shannon entropy (nats) of each row of ``counts`` and the rows' totals, traceable (a
    study's reporter inside compiled steps)."""
    import jax.numpy as jnp

    tot = counts.sum(-1, keepdims=True)
    q = counts / jnp.maximum(tot, 1e-30)
    h = -jnp.sum(jnp.where(q > 0, q * jnp.log(jnp.where(q > 0, q, 1.0)), 0.0), -1)
    return h, tot[..., 0]


def dol_index_jax(counts: Any) -> Any:
    """:func:`dol_index`'s ``dol_indiv_to_task`` (I / H(task), with I = H(task) - H(task |
    individual)) as a traceable JAX function; NaN while nothing was done."""
    import jax.numpy as jnp

    h_indiv, acts = entropies_jax(counts)
    h_task, total = entropies_jax(counts.sum(0))
    mi = h_task - jnp.sum(acts * h_indiv) / jnp.maximum(total, 1e-30)
    return jnp.where(h_task > 0, jnp.clip(mi, 0.0, h_task) / jnp.maximum(h_task, 1e-30), jnp.nan)


def emergent_niches_jax(counts: Any, min_share: float = 0.5, min_size: float = 0.05) -> Any:
    """:func:`emergent_niches`' ``n_niches`` by the dominant rule, as a traceable JAX function
    (0 while nothing was done)."""
    import jax.numpy as jnp

    acts = counts.sum(1)
    q = counts / jnp.maximum(acts, 1e-30)[:, None]
    lab = jnp.where((acts > 0) & (q.max(1) >= min_share), q.argmax(1), -1)
    size = (lab[:, None] == jnp.arange(counts.shape[1])).sum(0)
    big = size >= jnp.maximum(min_size * (acts > 0).sum(), 1e-12)
    return jnp.sum(big & (size > 0)).astype(jnp.float32)


def role_stability(roles: Any) -> dict[str, Any]:
    """Share of agents keeping their role from one window to the next.

    ``roles[t, i]`` is agent ``i``'s role in window ``t`` (e.g. its dominant task, or a niche
    label from :func:`emergent_niches` with ``method="dominant"``, whose labels are task ids
    and so comparable across windows). ``per_step[t] = mean_i [roles[t+1, i] == roles[t, i]]``
    over agents with a role (>= 0) in both windows, the task fidelity measured in social
    insect colonies (e.g. Ravary et al. 2007, Curr. Biol. 17:1308). Returns ``per_step``
    (NaN where no agent has a role in both windows) and ``mean`` (over defined steps).
    """
    r = np.asarray(roles)
    if r.ndim != 2 or r.shape[0] < 2 or r.shape[1] == 0:
        raise ValueError(f"roles must be 2-D (windows >= 2, agents >= 1), got shape {r.shape}")
    if not np.issubdtype(r.dtype, np.integer):
        raise TypeError(f"roles must hold integer role labels (-1 = none), got dtype {r.dtype}")
    both = (r[1:] >= 0) & (r[:-1] >= 0)
    same = ((r[1:] == r[:-1]) & both).sum(1)
    n = both.sum(1)
    per_step = np.divide(same, n, out=np.full(len(n), np.nan), where=n > 0)
    mean = float(np.nanmean(per_step)) if np.isfinite(per_step).any() else float("nan")
    return {"per_step": per_step, "mean": mean}
