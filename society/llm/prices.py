"""Token prices from litellm's bundled price table, read without importing litellm.

The fast path must price its calls like litellm does, but importing litellm costs seconds;
its table is a plain JSON file inside the package, so it is read directly, once.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

_TABLE_FILE = "model_prices_and_context_window_backup.json"


@functools.cache
def price_table() -> Mapping[str, Mapping[str, Any]]:
    """litellm's model price table (read-only), or an empty table if litellm is absent."""
    spec = importlib.util.find_spec("litellm")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return MappingProxyType({})
    path = Path(next(iter(spec.submodule_search_locations))) / _TABLE_FILE
    if not path.is_file():
        return MappingProxyType({})
    return MappingProxyType(json.loads(path.read_text(encoding="utf-8")))


def token_cost(model: str, prompt_tokens: int, completion_tokens: int) -> tuple[float, bool]:
    """(cost in USD, whether the model is priced). Unknown models cost 0 and are flagged."""
    table = price_table()
    names = [model]
    if "/" in model:
        names.append(model.partition("/")[2])
    for name in names:
        entry = table.get(name)
        if entry and "input_cost_per_token" in entry:
            cost = prompt_tokens * float(entry["input_cost_per_token"]) + completion_tokens * float(
                entry.get("output_cost_per_token", 0.0)
            )
            return cost, True
    return 0.0, False
