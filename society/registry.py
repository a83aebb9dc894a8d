"""Studies by name: the built-in ones (:data:`scenarios.REGISTRY`), installed entry points
and a user's own files; running, sweeping and scaling them.

    import scenarios  # re-exports run, sweep, scale, names, describe, get, config_class
    result = scenarios.run("network-game", seed=1, population=1000, update="fermi")
    result.summary["metrics"], result.metrics, result.run_dir

A user's own :class:`sim_core.experiment.Scenario` subclass runs the same way:
``scenarios.run(MyScenario, seed=1, ...)``. The registry names modules as strings so
that listing and describing studies does not import jax.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
import typing
from pathlib import Path
from typing import Any

from sim_core.errors import ConfigError

if typing.TYPE_CHECKING:
    from pydantic import BaseModel

    from sim_core.experiment import RunResult, Scenario


def _registry() -> dict[str, tuple[str, str]]:
    """The built-in studies (read when first needed: the ``scenarios`` package imports this)."""
    from scenarios import REGISTRY

    return REGISTRY


def _load(ref: str) -> Any:
    module, attr = ref.split(":")
    return getattr(importlib.import_module(module), attr)


ENTRY_POINT_GROUP = "society.scenarios"
"""Installed packages register studies here: ``[project.entry-points."society.scenarios"]``
``my-study = "my_pkg.study:MyStudy"``; they then run by name like built-in ones."""


def _entry(name: str) -> tuple[str, str]:
    if name not in _registry():
        raise ConfigError(
            f"unknown scenario '{name}'; available: {', '.join(names())}, an installed entry "
            "point, or a study of your own as path/to/study.py:MyStudy (or package.module:MyStudy)"
        )
    return _registry()[name]


@functools.cache
def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


@functools.cache
def _user_study(ref: str) -> type[Scenario] | None:
    """The Scenario class named by ``path/to/study.py:Class``, ``package.module:Class`` or an
    installed entry point; None for a built-in name. Import problems are one-line errors."""
    builtin = _registry()
    ref = _entry_points().get(ref, ref) if ref not in builtin else ref
    if ref in builtin or ":" not in ref:
        return None
    from sim_core.experiment import Scenario

    target, _, attr = ref.rpartition(":")
    try:
        if target.endswith(".py"):
            path = Path(target)
            if not path.is_file():
                raise ConfigError(f"study file '{target}' does not exist")
            spec = importlib.util.spec_from_file_location(f"society_study_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # dataclasses and pickling look modules up
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ConfigError:
        raise
    except Exception as exc:  # the user's module: whatever it raised, in one line
        raise ConfigError(f"study '{ref}' failed to import: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Scenario) and hasattr(cls, "Config")):
        raise ConfigError(f"'{ref}' is not a sim_core.experiment.Scenario subclass with a Config")
    return cls


def names() -> list[str]:
    """Built-in scenarios and installed entry points."""
    return sorted({*_registry(), *_entry_points()})


def config_class(name: str) -> type[BaseModel]:
    """The pydantic model of a scenario's parameters."""
    user = _user_study(name)
    return user.Config if user is not None else _load(_entry(name)[0])


def get(name: str) -> type[Scenario]:
    """The scenario class registered under ``name`` (or a user's study, see ``_user_study``)."""
    user = _user_study(name)
    return user if user is not None else _load(_entry(name)[1])


def summary_line(name: str) -> str:
    doc = (config_class(name).__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


def _type_name(ann: Any) -> str:
    """Readable type: Literal choices joined by '|', unions flattened."""
    args = typing.get_args(ann)
    if typing.get_origin(ann) is typing.Literal:
        return " | ".join(str(a) for a in args)
    if args and typing.get_origin(ann) in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    return "None" if ann is type(None) else getattr(ann, "__name__", str(ann))


def describe(name: str) -> list[dict[str, str]]:
    """Each parameter's name, type, default and meaning."""
    rows = []
    for pname, field in config_class(name).model_fields.items():
        typ = _type_name(field.annotation)
        rows.append(
            {
                "name": pname,
                "type": typ,
                "default": repr(field.default),
                "description": field.description or "",
            }
        )
    return rows


def run(
    scenario: str | Scenario | type[Scenario],
    *,
    seed: int = 0,
    replicates: int = 1,
    out: str | Path | None = None,
    params: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    llm: str | None = None,
    api_base: str | None = None,
    write: bool = True,
    batch_replicates: int | None = None,
    max_fallback_rate: float | None = None,
    replay: str | Path | None = None,
    llm_shards: int | None = None,
    **kw: Any,
) -> RunResult:
    """Run a scenario by name (or a user's Scenario) and return its :class:`RunResult`.

    ``params`` holds the model's parameters, apart from the run's options (seed, replicates,
    out, llm...), as Mesa's ``batch_run`` keeps them; parameters may also be given as
    keywords (``scenarios.run("schelling", width=40)``) or as ``config`` (the older name).

    ``llm`` is any litellm model string for the scenario's LLM agents and ``api_base``
    points it at an OpenAI-compatible server; scenarios without LLM agents ignore both.
    ``max_fallback_rate`` (default 0.1): a larger share of an LLM cohort's decisions that fell
    back makes the run ``degraded``. ``replay`` is the ``llm-cache.sqlite`` of a finished run:
    LLM replies come only from it (no server, no network, no key), as ``society replay`` does.
    ``llm_shards`` > 1 makes the LLM calls in that many Ray actors (``society.llm.shards``).
    """
    from sim_core.experiment import run_scenario

    scen = get(scenario) if isinstance(scenario, str) else scenario
    options = {
        k: v
        for k, v in {
            "llm": llm,
            "api_base": api_base,
            "replay": replay,
            "llm_shards": llm_shards,
        }.items()
        if v is not None
    }
    if max_fallback_rate is not None:
        kw = {"max_fallback_rate": max_fallback_rate, **kw}  # run_scenario's keyword
    return run_scenario(
        scen,
        seed=seed,
        replicates=replicates,
        out=out,
        write=write,
        config=config if params is None else {**(config or {}), **params},
        options=options,
        batch_replicates=batch_replicates,
        **kw,
    )


def _portable_ref(scenario: str) -> str:
    """A study file named by a relative path, made absolute: Ray workers and subprocesses
    may start elsewhere."""
    target, sep, attr = scenario.rpartition(":")
    if sep and target.endswith(".py") and Path(target).is_file():
        return f"{Path(target).resolve()}:{attr}"
    return scenario


def sweep(
    scenario: str,
    grid: dict[str, list[Any]],
    *,
    out: str | Path,
    config: dict[str, Any] | None = None,
    seed: int = 0,
    replicates: int = 1,
    random: int | None = None,
    workers: int = 1,
    ray_address: str | None = None,
    progress: Any = None,
) -> Any:
    """Run a scenario (by name or study reference) at each point of ``grid`` and write
    ``out/points/<point>/`` and ``out/sweep.parquet``; see :func:`sim_core.sweep.run_sweep`.

        scenarios.sweep("network-game", {"b": [1.2, 1.5, 1.8]}, out="sweeps/b", replicates=5)
    """
    from sim_core.sweep import run_sweep

    cls = config_class(scenario)
    return run_sweep(
        _portable_ref(scenario), grid, out=out, base=config, seed=seed, replicates=replicates, random=random,
        workers=workers, ray_address=ray_address, runner=run, config_class=cls, progress=progress,
    )  # fmt: skip


def population_field(scenario: str) -> str:
    """The config field that sets a scenario's number of agents: ``population`` in every
    built-in scenario (society.fields.PopulationFields); a user's study may differ."""
    if "population" in config_class(scenario).model_fields:
        return "population"
    raise ConfigError(
        f"scenario '{scenario}' has no 'population' parameter; give --population-field"
    )


def steps_field(scenario: str) -> str:
    """The config field that counts a scenario's time steps: ``steps`` in every built-in one."""
    if "steps" in config_class(scenario).model_fields:
        return "steps"
    raise ConfigError(f"scenario '{scenario}' has no 'steps' parameter; give --steps-field")


def scale(
    scenario: str,
    populations: list[int],
    *,
    out: str | Path,
    config: dict[str, Any] | None = None,
    steps: int | None = None,
    seed: int = 0,
    marginal: bool = True,
    population_field_name: str | None = None,
    steps_field_name: str | None = None,
    progress: Any = None,
) -> Any:
    """Time and memory against population size, each size in a fresh process; writes
    ``out/scale.parquet``, ``scale.csv``, ``scale.png``; see :func:`sim_core.scale.run_scale`.

        scenarios.scale("network-game", [1000, 10000, 100000], out="scale/ng", steps=20)
    """
    from sim_core.scale import run_scale

    cls = config_class(scenario)
    pop = population_field_name or population_field(scenario)
    stp = steps_field_name or steps_field(scenario)
    for name in (pop, stp):
        if name not in cls.model_fields:
            raise ConfigError(
                f"scenario '{scenario}' has no parameter '{name}'; accepted: {', '.join(cls.model_fields)}"
            )
    return run_scale(
        _portable_ref(scenario), populations, out=out, base=config, steps=steps, seed=seed, marginal=marginal,
        population_field=pop, steps_field=stp, config_class=cls, runner="society.registry:run", progress=progress,
    )  # fmt: skip
