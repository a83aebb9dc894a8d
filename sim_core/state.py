"""Pytree dataclasses for world state: immutable, jit-friendly, serialisable.

Borrowed from gymnax/Brax/flax.struct: state is a frozen dataclass of arrays registered
as a pytree, so it passes through ``jax.jit``/``vmap`` and is updated with ``.replace``.
Fields marked ``static_field()`` are hashable metadata (sizes, names), not arrays.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import jax

T = TypeVar("T")


def static_field(**kwargs: Any) -> Any:
    """A dataclass field treated as static metadata by jax (not traced)."""
    return dataclasses.field(metadata={"static": True}, **kwargs)


def pytree_dataclass(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen dataclass registered as a jax pytree with a ``replace`` method."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    meta = [f.name for f in fields if f.metadata.get("static", False)]
    data = [f.name for f in fields if not f.metadata.get("static", False)]
    jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
    cls.replace = dataclasses.replace  # type: ignore[attr-defined]
    return cls
