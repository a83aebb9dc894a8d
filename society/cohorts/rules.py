"""RuleCohort: a vectorised library of classic scripted strategies.

Every agent of a rule cohort follows one named strategy; a cohort may mix strategies. Once
per moment the cohort evaluates each strategy *present* among its due agents over the whole
batch and selects per agent, in one jit-compiled call: no Python loop over agents.

A strategy is a pure jnp function ``fn(obs, keys, params) -> actions`` over a batch:

- ``obs``: dict of arrays with a leading axis over the due agents (vocabulary below);
- ``keys``: one PRNG key per due agent, derived from ``(key, agent id)``, so an agent's draw
  does not depend on which other agents are due (use :func:`agent_uniform`);
- ``params``: the cohort's scalar parameters for this strategy (``{"generosity": 0.33}``).

Observation vocabulary read by the built-in strategies (actions: 1 cooperate/give/act,
0 defect/refuse):

==================  ==========================================================================
``partner_last``    the partner's last action towards me: 1 cooperate, 0 defect, -1 none yet
``my_last``         my own last action: 1, 0, or -1 none yet
``my_last_payoff``  my payoff from the last round
``aspiration``      payoff at or above which WSLS counts a round as a win (else ``params``)
``partner_image``   the partner's image score (Nowak & Sigmund 1998)
``partner_good``    the partner's standing: 1 good, 0 bad
``stimulus``        task stimulus for threshold responders (Bonabeau et al. 1996)
``threshold``       the responder's own response threshold
==================  ==========================================================================

Built-in strategies: ``allc``, ``alld``, ``tft``, ``gtft`` (generous TFT: after a defection
still cooperates with probability ``generosity``, default 1/3, the Nowak-Sigmund value for
T,R,P,S = 5,3,1,0), ``wsls`` (win-stay lose-shift / Pavlov: cooperates first, repeats its
last action after a win, switches after a loss), ``disc-image`` (cooperates iff
``partner_image >= min_image``, default 0), ``disc-standing`` (cooperates iff the partner is
in good standing), ``random`` (cooperates with probability ``p``, default 0.5) and
``threshold`` (acts with probability ``s^n / (s^n + theta^n)``, ``n = steepness``, default
2; a large ``n`` approaches a step at ``s = theta``). Users add their own per cohort:
``RuleCohort(..., strategies={"mine": fn})``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache, partial
from types import MappingProxyType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from society.cohorts.base import Cohort, Pytree
from society.fields import KINDS
from society.mix import parse_weights

StrategyFn = Callable[[Mapping[str, jax.Array], jax.Array, Mapping[str, jax.Array]], jax.Array]

OBSERVATIONS = MappingProxyType(
    {
        "partner_last": "the partner's last action towards me (1 cooperate, 0 defect, -1 none yet)",
        "my_last": "my last action (1, 0, or -1 none yet)",
        "my_last_payoff": "my payoff from the last round",
        "aspiration": "payoff at or above which a round is a win",
        "partner_image": "the partner's image score",
        "partner_good": "the partner's standing (1 good, 0 bad)",
        "stimulus": "task stimulus",
        "threshold": "the agent's response threshold",
    }
)


# -- helpers shared with the learned cohort ---------------------------------------------------
def agent_keys(key: jax.Array, ids: jax.Array) -> jax.Array:
    """One key per agent, a function of ``(key, agent id)`` only (batch-independent draws)."""
    if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.wrap_key_data(key)  # a legacy uint32 key
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, ids)


def agent_bits(keys: jax.Array) -> jax.Array:
    """Two random uint32 words per agent key: the key's own data, i.e. the PRNG hash of
    (parent key, agent id). One hash per agent: on CPU ~5x cheaper at 1e6 agents than
    vmapping ``jax.random`` over the keys (which hashes again)."""
    return jax.random.key_data(keys).reshape(keys.shape[0], -1)[:, :2]


def _unit(bits: jax.Array) -> jax.Array:
    """uint32 words to U(0, 1) floats (24 bits, midpoints): never exactly 0 or 1, so
    ``u < p`` is never true for p = 0 and always for p = 1, and ``log(u)`` is finite."""
    return ((bits >> 8).astype(jnp.float32) + 0.5) * (1.0 / (1 << 24))


def agent_uniform(keys: jax.Array, word: int = 0) -> jax.Array:
    """One U(0, 1) draw per agent key (``word`` 0 or 1 gives two independent ones)."""
    return _unit(agent_bits(keys)[:, word])


def _bucket(n: int) -> int:
    """Padded batch size: few distinct sizes (<= 16 per octave, <= 1/8 waste), so a varying
    number of due agents does not recompile the kernel every moment."""
    if n <= 16:
        return 16
    step = 1 << max((n - 1).bit_length() - 4, 0)
    return -(-n // step) * step


def _pad_rows(tree: Pytree, n: int, size: int) -> Pytree:
    """Check every leaf has a leading axis of ``n`` (one row per due agent) and pad it to
    ``size`` by repeating its first row."""

    def pad(x):
        if np.ndim(x) == 0 or np.shape(x)[0] != n:
            raise ValueError(
                f"observations must have a leading axis of {n} (one row per due agent), "
                f"got shape {np.shape(x)}"
            )
        if size == n:
            return x
        if isinstance(x, np.ndarray):  # rows on the host: padded there (no eager jax dispatch)
            return np.concatenate([x, np.broadcast_to(x[:1], (size - n,) + x.shape[1:])])
        x = jnp.asarray(x)
        return jnp.concatenate([x, jnp.broadcast_to(x[:1], (size - n,) + x.shape[1:])])

    return jax.tree_util.tree_map(pad, tree)


def _as_ids(agents: Any, what: str = "agents") -> np.ndarray:
    a = np.asarray(agents)
    if a.ndim != 1 or not (a.size == 0 or np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{what} must be a 1-D array of integer agent ids, got {a.dtype} {a.shape}")
    return a.astype(np.int64)


def _check_number(name: str, value: Any, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not np.isfinite(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
        rng = (
            f"in [{lo}, {hi}]"
            if lo is not None and hi is not None
            else (f">= {lo}" if lo is not None else "finite")
        )
        raise ValueError(f"{name} must be {rng}, got {value}")
    return value


def _clone_args(cohort: Cohort, src_agents: Any, new_agents: Any, key, mutation: float):
    """Validate clone() arguments; returns (source positions, new ids, mutation)."""
    src = _as_ids(src_agents, "src_agents")
    new = _check_new(cohort, new_agents)
    if src.shape != new.shape:
        raise ValueError(
            f"src_agents and new_agents must have equal length, got {src.size} and {new.size}"
        )
    mutation = _check_number("mutation", mutation, 0.0)
    if mutation > 0 and key is None:
        raise ValueError("clone with mutation > 0 needs a key")
    return cohort.local(src), new, mutation


def _check_new(cohort: Cohort, new_agents: Any) -> np.ndarray:
    """Ids of agents joining the cohort: unique and not yet members."""
    new = _as_ids(new_agents, "new_agents")
    if np.unique(new).size != new.size:
        raise ValueError("new_agents must be unique")
    if np.isin(new, cohort.agents).any():
        raise ValueError(
            f"new_agents {new[np.isin(new, cohort.agents)][:5].tolist()} are already members"
        )
    return new


def _keep_mask(cohort: Cohort, agents: Any) -> np.ndarray:
    """Boolean mask over the cohort of the agents that stay after remove(agents)."""
    pos = cohort.local(_as_ids(agents))
    keep = np.ones(len(cohort), bool)
    keep[pos] = False
    return keep


# -- the built-in strategies ------------------------------------------------------------------
def _need(obs: Mapping[str, Any], name: str, strategy: str) -> jax.Array:
    if name not in obs:
        raise ValueError(
            f"strategy '{strategy}' needs observation '{name}' ({OBSERVATIONS[name]}); "
            f"got {sorted(obs)}"
        )
    return jnp.asarray(obs[name])


def _allc(obs, keys, params):
    return jnp.ones(keys.shape[:1], jnp.int32)


def _alld(obs, keys, params):
    return jnp.zeros(keys.shape[:1], jnp.int32)


def _tft(obs, keys, params):
    return (_need(obs, "partner_last", "tft") != 0).astype(jnp.int32)


def _gtft(obs, keys, params):
    last = _need(obs, "partner_last", "gtft")
    return ((last != 0) | (agent_uniform(keys) < params["generosity"])).astype(jnp.int32)


def _wsls(obs, keys, params):
    mine = _need(obs, "my_last", "wsls")
    pay = _need(obs, "my_last_payoff", "wsls")
    if "aspiration" in obs:
        asp = jnp.asarray(obs["aspiration"])
    elif "aspiration" in params:
        asp = params["aspiration"]
    else:
        raise ValueError(
            "strategy 'wsls' needs an aspiration: observation 'aspiration' or "
            "params={'wsls': {'aspiration': x}} (e.g. 2 for T,R,P,S = 5,3,1,0)"
        )
    win = pay >= asp
    return jnp.where(mine < 0, 1, jnp.where(win, mine, 1 - mine)).astype(jnp.int32)


def _disc_image(obs, keys, params):
    return (_need(obs, "partner_image", "disc-image") >= params["min_image"]).astype(jnp.int32)


def _disc_standing(obs, keys, params):
    return (_need(obs, "partner_good", "disc-standing") > 0).astype(jnp.int32)


def _random(obs, keys, params):
    return (agent_uniform(keys) < params["p"]).astype(jnp.int32)


def _threshold(obs, keys, params):
    s = jnp.maximum(_need(obs, "stimulus", "threshold").astype(jnp.float32), 0.0)
    th = jnp.maximum(_need(obs, "threshold", "threshold").astype(jnp.float32), 0.0)
    n = params["steepness"]
    # s^n / (s^n + th^n) written as a logistic in log space: no overflow for large n.
    p = jax.nn.sigmoid(n * (jnp.log(s) - jnp.log(th)))
    p = jnp.where((s == 0) & (th == 0), 1.0, p)
    return (agent_uniform(keys) < p).astype(jnp.int32)


BUILTINS: Mapping[str, StrategyFn] = MappingProxyType(
    {
        "allc": _allc,
        "alld": _alld,
        "tft": _tft,
        "gtft": _gtft,
        "wsls": _wsls,
        "disc-image": _disc_image,
        "disc-standing": _disc_standing,
        "random": _random,
        "threshold": _threshold,
    }
)
# Parameters each built-in accepts, with defaults (wsls has no sensible default aspiration).
DEFAULT_PARAMS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {
        "gtft": MappingProxyType({"generosity": 1 / 3}),
        "wsls": MappingProxyType({}),
        "disc-image": MappingProxyType({"min_image": 0.0}),
        "random": MappingProxyType({"p": 0.5}),
        "threshold": MappingProxyType({"steepness": 2.0}),
    }
)
_ACCEPTED_PARAMS = {"wsls": ("aspiration",)}
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def parse_mix(spec: str, n: int, rng: np.random.Generator | int) -> np.ndarray:
    """Per-agent strategy names from a mix such as ``"disc-image:49,alld:1"``.

    Weights are relative (``"tft:1,alld:1"`` is half and half); counts are allocated by
    largest remainder so they sum to exactly ``n``, then shuffled with ``rng``. A name
    without a weight counts 1.
    """
    if not isinstance(spec, str):
        raise TypeError(f"mix spec must be a string like 'tft:3,alld:1', got {type(spec).__name__}")
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    counts = mix_counts(spec, n)
    return rng.permutation(np.repeat(np.asarray(list(counts)), list(counts.values())))


def mix_counts(spec: str, n: int) -> dict[str, int]:
    """How many of ``n`` agents each name of a mix gets (largest remainder; see parse_mix)."""
    parsed = parse_weights(spec, None, "mix spec")
    w = np.asarray(list(parsed.values()))
    exact = w / w.sum() * n
    counts = np.floor(exact).astype(np.int64)
    rest = int(n - counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:rest]] += 1
    return dict(zip(parsed, counts.tolist(), strict=True))


@cache
def mixture(agents: str, split: str | None, strategies: str, n: int) -> tuple[dict, dict]:
    """A population of ``n`` by its ``agents``/``split`` and its rule agents' ``strategies``:
    (rule strategies present with their counts, in the mix's order; kinds present with their
    counts, in :data:`society.fields.KINDS` order)."""
    kinds = mix_counts(split, n) if agents == "mixed" else {agents: n}
    rules = {s: c for s, c in mix_counts(strategies, kinds.get("rules", 0)).items() if c}
    return rules, {k: kinds[k] for k in KINDS if kinds.get(k)}


def labels(w: dict, agents: str, strategies: dict[str, int], names: tuple[str, ...]) -> jax.Array:
    """Each agent's label, an index into ``names`` (rule strategies, then "learned" and
    "llm"): the world's ``order`` is a drawn seating and ``place`` its inverse; rule agents
    (``kind`` 0) take ``strategies`` in that order, the first ``strategies[s]`` of them ``s``
    and so on (largest remainder counts: :func:`mixture`); the others are labelled by kind."""
    if agents in ("learned", "llm"):
        return jnp.full(w["place"].shape, names.index(agents), jnp.int32)
    rule = w["kind"] == 0
    rank = jnp.cumsum(rule[w["order"]])[w["place"]] - 1
    bounds = jnp.asarray(np.cumsum(list(strategies.values()))[:-1], jnp.int32)
    table = jnp.asarray([names.index(s) for s in strategies] or [0], jnp.int32)
    kind = jnp.asarray([0, names.index("learned"), names.index("llm")], jnp.int32)
    return jnp.where(rule, table[jnp.searchsorted(bounds, rank, side="right")], kind[w["kind"]])


@partial(jax.jit, static_argnames=("table",))
def _decide(obs, ids, sid, params, key, table):
    """Every strategy in ``table`` ((name, index, fn) of those present) over the batch, then a
    per-agent select. Module-level so cohorts with the same strategies share compilations."""
    keys = agent_keys(key, ids)
    n = ids.shape[0]
    out = None
    for name, index, fn in table:
        a = jnp.asarray(fn(obs, keys, params.get(name, {})))
        if a.shape[:1] != (n,):
            raise ValueError(
                f"strategy '{name}' returned shape {a.shape}, expected a leading axis of {n}"
            )
        if out is None:
            out = a
            continue
        dtype = jnp.result_type(out, a)
        sel = (sid == index).reshape((n,) + (1,) * (a.ndim - 1))
        out = jnp.where(sel, a.astype(dtype), out.astype(dtype))
    return out


class RuleCohort(Cohort):
    """Agents following named scripted strategies, decided in one compiled call per moment.

    ``strategy`` is one name for every agent or a per-agent sequence of names (see
    :func:`parse_mix`); ``strategies`` adds user functions to this cohort's registry;
    ``params`` overrides scalar parameters per strategy (``{"gtft": {"generosity": 0.1}}``);
    ``mutation_pool`` is where :meth:`clone` draws a mutated strategy from (default: the
    strategies of the initial assignment).
    """

    def __init__(
        self,
        name: str,
        agents: np.ndarray | list[int],
        strategy: str | Sequence[str] | np.ndarray = "tft",
        *,
        strategies: Mapping[str, StrategyFn] | None = None,
        params: Mapping[str, Mapping[str, float]] | None = None,
        mutation_pool: Sequence[str] | None = None,
    ):
        super().__init__(name, agents)
        fns = dict(BUILTINS)
        for sname, fn in (strategies or {}).items():
            if not isinstance(sname, str) or not _NAME.fullmatch(sname):
                raise ValueError(f"strategy name {sname!r} must be letters, digits, '_', '.', '-'")
            if sname in BUILTINS:
                raise ValueError(f"strategy name '{sname}' is a built-in; choose another name")
            if not callable(fn):
                raise TypeError(f"strategy '{sname}' must be a function fn(obs, keys, params)")
            fns[sname] = fn
        self._fns = MappingProxyType(fns)
        self.names: tuple[str, ...] = tuple(fns)
        self._index = {s: i for i, s in enumerate(self.names)}
        self.params = self._check_params(params or {})
        self.sid = self._ids_of(strategy, len(self))
        pool = np.unique(self.strategy_of(self.agents)) if mutation_pool is None else mutation_pool
        self.mutation_pool = (
            self._ids_of(list(pool), len(pool)) if len(pool) else np.zeros(0, np.int32)
        )

    # -- configuration ----------------------------------------------------------------------
    def _check_params(
        self, params: Mapping[str, Mapping[str, float]]
    ) -> dict[str, dict[str, float]]:
        out = {s: dict(d) for s, d in DEFAULT_PARAMS.items()}
        for sname, d in params.items():
            if sname not in self._index:
                raise ValueError(
                    f"params for unknown strategy '{sname}'; known: {list(self.names)}"
                )
            if not isinstance(d, Mapping):
                raise TypeError(
                    f"params['{sname}'] must be a dict of numbers, got {type(d).__name__}"
                )
            for k, v in d.items():
                allowed = tuple(DEFAULT_PARAMS.get(sname, {})) + _ACCEPTED_PARAMS.get(sname, ())
                if sname in BUILTINS and k not in allowed:
                    raise ValueError(
                        f"params['{sname}'] has unknown key '{k}'; accepted: {list(allowed)}"
                    )
                out.setdefault(sname, {})[k] = _check_number(f"params['{sname}']['{k}']", v)
        g = out["gtft"]["generosity"]
        p = out["random"]["p"]
        _check_number("params['gtft']['generosity']", g, 0.0, 1.0)
        _check_number("params['random']['p']", p, 0.0, 1.0)
        if out["threshold"]["steepness"] <= 0:
            raise ValueError(
                f"params['threshold']['steepness'] must be > 0, got {out['threshold']['steepness']}"
            )
        return out

    def _ids_of(self, strategy: str | Sequence[str] | np.ndarray, n: int) -> np.ndarray:
        """Strategy indices for ``n`` agents from one name or ``n`` names."""
        names = (
            [strategy] * n
            if isinstance(strategy, str)
            else list(np.asarray(strategy, dtype=object).ravel())
        )
        if len(names) != n:
            raise ValueError(
                f"strategy must be one name or {n} names (one per agent), got {len(names)}"
            )
        unknown = sorted({str(s) for s in names} - set(self._index))
        if unknown:
            raise ValueError(f"unknown strategies {unknown}; accepted: {list(self.names)}")
        return np.fromiter((self._index[str(s)] for s in names), np.int32, count=n)

    def strategy_of(self, agents: np.ndarray | list[int]) -> np.ndarray:
        """Strategy names of ``agents``."""
        return np.asarray(self.names)[self.sid[self.local(_as_ids(agents))]]

    def set_strategy(self, agents: np.ndarray | list[int], strategy: str | Sequence[str]) -> None:
        """Switch ``agents`` to ``strategy`` (one name, or one per agent): imitation, mutation."""
        pos = self.local(_as_ids(agents))
        self.sid = self.sid.copy()
        self.sid[pos] = self._ids_of(strategy, pos.size)

    # -- deciding ---------------------------------------------------------------------------
    def act(self, agents: np.ndarray, obs: Pytree, key: jax.Array) -> jax.Array:
        """Actions (leading axis aligned with ``agents``) of the due ``agents``."""
        agents = _as_ids(agents)
        n = agents.size
        if n == 0:
            return jnp.zeros((0,), jnp.int32)
        sid = self.sid[self.local(agents)]
        present = tuple(
            self.names[i] for i in np.flatnonzero(np.bincount(sid, minlength=len(self.names)))
        )
        size = n if n == len(self) else _bucket(n)
        obs = _pad_rows(dict(obs or {}), n, size)
        ids = np.concatenate([agents, np.full(size - n, agents[0])]).astype(np.int32)
        sid = np.concatenate([sid, np.full(size - n, sid[0], np.int32)])
        params = {s: {k: np.float32(v) for k, v in self.params.get(s, {}).items()} for s in present}
        table = tuple((s, self._index[s], self._fns[s]) for s in present)
        out = _decide(obs, ids, sid, params, key, table=table)
        return out if size == n else out[:n]

    # -- lifecycle --------------------------------------------------------------------------
    def clone(
        self,
        src_agents: np.ndarray | list[int],
        new_agents: np.ndarray | list[int],
        key: jax.Array | None = None,
        mutation: float = 0.0,
    ) -> None:
        """Add ``new_agents`` with the strategies of ``src_agents``; with probability
        ``mutation`` each instead gets a uniform draw from ``mutation_pool``."""
        src, new, mutation = _clone_args(self, src_agents, new_agents, key, mutation)
        sid = self.sid[src]
        if mutation > 0 and self.mutation_pool.size:
            k1, k2 = jax.random.split(key)
            flip = np.asarray(jax.random.uniform(k1, (new.size,)) < mutation)
            pick = np.asarray(jax.random.randint(k2, (new.size,), 0, self.mutation_pool.size))
            sid = np.where(flip, self.mutation_pool[pick], sid).astype(np.int32)
        self.agents = np.concatenate([self.agents, new])
        self.sid = np.concatenate([self.sid, sid])

    def spawn(
        self,
        new_agents: np.ndarray | list[int],
        key: jax.Array | None = None,
        strategy: str | Sequence[str] | None = None,
    ) -> None:
        """Add fresh ``new_agents`` following ``strategy`` (one name or one per agent), or by
        default a uniform draw from ``mutation_pool`` (needs ``key``)."""
        new = _check_new(self, new_agents)
        if strategy is not None:
            sid = self._ids_of(strategy, new.size)
        elif key is None or not self.mutation_pool.size:
            raise ValueError("spawn needs a strategy, or a key and a non-empty mutation_pool")
        else:
            pick = np.asarray(jax.random.randint(key, (new.size,), 0, self.mutation_pool.size))
            sid = self.mutation_pool[pick].astype(np.int32)
        self.agents = np.concatenate([self.agents, new])
        self.sid = np.concatenate([self.sid, sid])

    def remove(self, agents: np.ndarray | list[int]) -> None:
        """Drop ``agents`` and their state."""
        keep = _keep_mask(self, agents)
        self.agents = self.agents[keep]
        self.sid = self.sid[keep]

    def state_dict(self) -> dict[str, Any]:
        """Agents, per-agent strategy ids with the name table, and parameters (JSON-able)."""
        return {
            **super().state_dict(),
            "strategy_names": list(self.names),
            "strategy_ids": self.sid.copy(),
            "params": {s: dict(d) for s, d in self.params.items()},
            "mutation_pool": [self.names[i] for i in self.mutation_pool],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`; user strategies must be registered again here."""
        table = list(state["strategy_names"])
        missing = sorted(set(table) - set(self._index))
        if missing:
            raise ValueError(
                f"state uses strategies {missing} not registered in this cohort; pass them in strategies="
            )
        ids = np.asarray(state["strategy_ids"], np.int64)
        names = np.asarray(table, dtype=object)[ids] if ids.size else []
        agents = np.asarray(state["agents"], np.int64)
        if ids.shape != agents.shape:
            raise ValueError(f"strategy_ids shape {ids.shape} does not match agents {agents.shape}")
        params = self._check_params(state["params"])
        pool = self._ids_of(list(state["mutation_pool"]), len(state["mutation_pool"]))
        super().load_state_dict(state)
        self.sid = self._ids_of(names, len(names))
        self.params = params
        self.mutation_pool = pool
