"""One vocabulary for every scenario: the shared config fields, as pydantic mixins (pure
Python: `society list` and `society describe` must not import jax).

    class MyConfig(SharedConfig):  # PopulationFields, LearningFields and LLMFields
        population: int = Field(50, ge=2, description=...)  # a scenario's own default
        graph: Graph = Field("random-regular", description=...)

Every registered config inherits the three mixins (a test checks), so `agents` is always
the kind of agent, `population` its number, `learning_rate` the learned agents' step size
and `llm_*` the LLM settings. Names that scenarios used before are refused with a
one-line error naming the new one (:data:`RENAMED`).
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from society.mix import parse_weights

# Kinds of agent a population mixes (`agents=mixed` with a `split`).
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


def parse_every(spec: str | None) -> dict[str, int]:
    """``"llm:5,learned:2"`` -> ``{"llm": 5, "learned": 2}``: steps between each kind's
    decisions (a kind not named decides every step)."""
    if spec is None:
        return {}
    every = parse_weights(spec, ("rules", "learned", "llm"), "act_every")
    for kind, k in every.items():
        if k != int(k) or k < 1:
            raise ValueError(f"act_every: steps of {kind!r} must be an integer >= 1, got {k:g}")
    return {kind: int(k) for kind, k in every.items()}


def _check_every(spec: str) -> str:
    parse_every(spec)
    return spec


Split = Annotated[str, AfterValidator(_check_split)]
Every = Annotated[str, AfterValidator(_check_every)]
Graph = Annotated[str, AfterValidator(_check_graph)]
Share = Annotated[float, Field(ge=0.0, le=1.0)]  # a probability or a fraction of a whole


def mixture(accepted: tuple[str, ...], param: str) -> Any:
    """A field type: a relative mix of ``accepted`` names, ``"name:weight,..."``, refused in
    one line naming ``param`` otherwise (:func:`society.mix.parse_weights`)."""

    def check(spec: str) -> str:
        parse_weights(spec, accepted, param)
        return spec

    return Annotated[str, AfterValidator(check)]


Kind = Literal["rules", "learned", "llm", "mixed"]

# Old name -> new name, for every scenario (issue 14's one vocabulary). A config refuses an
# old name unless it still has a field of that name.
RENAMED: dict[str, str] = {
    "agent_type": "agents",
    "lr": "learning_rate",
    "learned_lr": "learning_rate",
    "agents_per_generation": "population",
    "firms": "population",
    "rounds": "steps",
    "encounters": "steps",
    "periods": "steps",
    "days": "steps",
    "record_from": "average_from",
    "temperature": "llm_temperature",
    "budget_tokens": "llm_budget_tokens",
    "memory": "llm_memory",
    "llm_history": "llm_memory",
}


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


class _Default:
    def __init__(self, value: Any, description: str | None, bounds: dict[str, Any]) -> None:
        self.value, self.description, self.bounds = value, description, bounds


_ORDER = {"<": operator.lt, "<=": operator.le, ">=": operator.ge, ">": operator.gt}


def in_order(cfg: BaseModel, *rules: str) -> None:
    """Refuse parameters out of order in one line naming both sides: each rule is a chain of
    names (fields or properties) and comparisons, ``"theta_min <= theta_init <= theta_max"``;
    a side that is None is not compared. In a config's ``model_validator(mode="after")``."""
    for rule in rules:
        terms = rule.split()
        for a, op, b in zip(terms[::2], terms[1::2], terms[2::2], strict=False):
            x, y = getattr(cfg, a), getattr(cfg, b)
            if x is not None and y is not None and not _ORDER[op](x, y):
                raise ValueError(f"{a} ({x}) must be {op} {b} ({y})")


def default(value: Any, description: str | None = None, **bounds: Any) -> Any:
    """A shared field (of a base, else of :data:`OPTIONAL_FIELDS`) with a study's own default,
    and optionally its own meaning, keeping the shared bounds and meaning otherwise; the study
    keeps the field's place among its own parameters::

        llm_max_tokens: int = default(32, "LLM agents: reply limit in tokens (a one-word JSON)")

    ``bounds`` (ge, gt, le, lt) replace the shared bounds where a study has its own."""
    return _Default(value, description, bounds)


# A class being built -> its `default(...)` fields' shared meanings (used when the study
# gives neither a description nor a docstring).
_SHARED_MEANINGS: dict[type, dict[str, str | None]] = {}


class StudyConfig(BaseModel):
    """Base of a scenario config: unknown parameters are refused, renamed ones are named.
    A parameter's meaning is the docstring under it (``society describe`` shows it)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Before pydantic collects the fields: each `default(...)` becomes the shared field.
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if isinstance(value, _Default):
                setattr(cls, name, _shared_field(cls, name, value))

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        # A shared field without a meaning (or docstring) of the study's own keeps the shared
        # one; a docstring wrapped over lines is one line of meaning.
        super().__pydantic_init_subclass__(**kwargs)
        shared = _SHARED_MEANINGS.pop(cls, {})
        for name, field in cls.model_fields.items():
            field.description = field.description or shared.get(name)
            if field.description and "\n" in field.description:
                field.description = " ".join(field.description.split())

    @model_validator(mode="before")
    @classmethod
    def _refuse_old_names(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        for old, new in RENAMED.items():
            if old in values and old not in cls.model_fields:
                raise PydanticCustomError(
                    "renamed", "parameter '{old}' is now called '{new}'", {"old": old, "new": new}
                )
        kind = values.get("agents")
        if _is_number(kind):
            raise PydanticCustomError(
                "renamed",
                "'agents' is the kind of agent (rules, learned, llm or mixed); the number of "
                "agents is 'population' (got agents={kind})",
                {"kind": repr(kind)},
            )
        return values


MAX_POPULATION = 10**9
"""Agents in one run at most: agent ids are int32 arrays, and a billion agents already need
hundreds of GiB (sim_core.experiment checks the memory estimate against the machine)."""


class KindFields(StudyConfig):
    """Who the agents are."""

    agents: Kind = "rules"
    """kind of agent: rules, learned, llm, or mixed (see split)"""

    split: Split | None = None
    """agents=mixed: proportions of each kind, e.g. 'rules:8,learned:1,llm:1' (counts by largest
    remainder); ignored otherwise"""

    # A study that refuses a split unless agents=mixed (others ignore it).
    split_only_mixed: ClassVar[bool] = False

    @model_validator(mode="after")
    def _mixed_needs_split(self) -> KindFields:
        if self.agents == "mixed" and self.split is None:
            raise ValueError("agents=mixed needs a split, e.g. 'rules:8,learned:1,llm:1'")
        if self.split_only_mixed and self.agents != "mixed" and self.split is not None:
            raise ValueError(f"split applies only to agents=mixed (agents is {self.agents!r})")
        return self


class PopulationFields(KindFields):
    """Who the agents are and how many."""

    population: int = Field(100, ge=2)
    """number of agents N"""

    @field_validator("population", check_fields=False)
    @classmethod
    def _population_bound(cls, value: int) -> int:
        # Also for a scenario that declares its own `population` (a field validator of a base
        # applies to the field it names); memory is checked against the machine before a run.
        if isinstance(value, int) and value > MAX_POPULATION:
            raise ValueError(f"must be at most {MAX_POPULATION:,} agents")
        return value


class GraphFields(StudyConfig):
    """Who neighbours whom: a named graph or an edge-list file, one graph (``graph_seed``) for
    every replicate, built once per these values by ``society.topology.topology_of``. A study
    redeclares ``graph`` or ``degree`` for its own default."""

    graph: Graph = "random-regular"
    """complete | cycle | lattice | random-regular | erdos-renyi | small-world | scale-free | a path
    to an edge-list file ('u v' per line)"""

    degree: int = Field(4, ge=1)
    """k: random-regular degree, small-world ring degree, erdos-renyi mean degree, scale-free 2m
    (other graphs ignore it)"""

    neighbourhood: Literal["moore", "von-neumann"] = "von-neumann"
    """lattice neighbourhood"""

    periodic: bool = True
    """lattice wraps around (torus)"""

    rewire: float = Field(0.1, ge=0.0, le=1.0)
    """small-world rewiring probability"""

    graph_seed: int = Field(0, ge=0)
    """seed of the random graph (one graph for every replicate and run seed)"""


class LearningFields(StudyConfig):
    """How learned agents learn."""

    learning_rate: float = Field(0.05, gt=0.0)
    """learned agents: step size of their updates"""


class LLMFields(StudyConfig):
    """How LLM agents are asked (the model itself is a run option: --llm, --api-base)."""

    llm_temperature: float = Field(0.0, ge=0.0, le=2.0)
    """LLM agents: sampling temperature"""

    llm_max_tokens: int = Field(96, gt=0)
    """LLM agents: reply limit in tokens"""

    llm_budget_tokens: int | None = Field(None, gt=0)
    """LLM agents: stop the run cleanly once this many tokens are used"""


class SharedConfig(LLMFields, LearningFields, PopulationFields):
    """The base of every scenario config (fields listed: population, learning, then LLM)."""


SHARED_MIXINS = (PopulationFields, LearningFields, LLMFields)


class StepFields(StudyConfig):
    """How long a study runs, in its own time unit (steps, rounds, days...)."""

    steps: int = Field(100, ge=1, le=10**9)
    """time steps to simulate"""


class ModelParams(StepFields):
    """Base of a model's parameters whose agents follow the model's own rules (Mesa-style)."""


class ChoiceFields(StudyConfig):
    """When agents of each kind decide."""

    llm_latency: int = Field(0, ge=0, le=10**6)
    """LLM agents: steps from a request to its reply; meanwhile they keep their last choice and
    every other agent keeps stepping (0: replies within the step)"""

    act_every: Every | None = None
    """steps between each kind's decisions, e.g. 'llm:5,learned:2' (a kind not named decides every
    step); between decisions its agents keep their last choice"""


class StudyParams(SharedConfig, StepFields, ChoiceFields):
    """Base of a study's parameters whose agents are rules, learned or LLM (``agents``)."""


class ModelAgentsParams(ModelParams, LLMFields, LearningFields, KindFields, ChoiceFields):
    """Base of a model's parameters (its own names, as Mesa's; its size sets the number of
    agents: the world's agent axis) whose agents may also be rules, learned or LLM."""


# Shared fields a study lists among its own parameters (where it wants them) with
# `name: type = default(...)`: one declaration of the bounds and meaning.
OPTIONAL_FIELDS: dict[str, FieldInfo] = {
    "llm_memory": Field(
        5, ge=0, description="LLM agents: how many of their own past steps they are shown"
    ),
    "mutation": Field(
        0.05, ge=0.0, description="learned agents: std of the Gaussian noise on a copied policy"
    ),
    "record_every": Field(1, ge=1, description="steps between recorded time-series rows"),
}


def _shared_field(cls: type, name: str, value: _Default) -> FieldInfo:
    bases = (getattr(base, "__pydantic_fields__", {}) for base in cls.__mro__[1:])
    shared = next((fields[name] for fields in bases if name in fields), None)
    shared = shared or OPTIONAL_FIELDS[name]
    _SHARED_MEANINGS.setdefault(cls, {})[name] = shared.description
    if value.bounds:
        return Field(value.value, description=value.description, **value.bounds)
    return FieldInfo.merge_field_infos(shared, default=value.value, description=value.description)
