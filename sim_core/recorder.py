"""Tidy metric rows written to Parquet in chunks that survive a killed run.

``metrics.parquet`` is a directory of Parquet part files (the Spark/Dask layout that
``pandas.read_parquet`` and pyarrow read as one table). Each flush writes one part to a
temporary name and renames it, so a kill at any moment leaves only complete parts: every
row flushed before the kill is kept. The schema is fixed when the recorder is created
(``replicate``, ``time``, ``metric``, ``value`` plus declared label columns), so parts
always concatenate.
"""

from __future__ import annotations

import os
import time as _time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

BASE_COLUMNS = {
    "replicate": pa.int64(),
    "time": pa.float64(),
    "metric": pa.string(),
    "value": pa.float64(),
}
_LABEL_TYPES = {int: pa.int64(), float: pa.float64(), str: pa.string()}


class Recorder:
    """Buffers metric rows and flushes them as Parquet parts every ``chunk_rows`` rows.

    ``labels`` declares optional label columns and their types, e.g.
    ``{"agent": int, "cohort": str}``; rows may leave a label out (null).
    With ``path=None`` rows are kept in memory only (handy in notebooks and tests).
    """

    def __init__(
        self,
        path: str | Path | None,
        *,
        labels: dict[str, type] | None = None,
        chunk_rows: int = 100_000,
        flush_interval_s: float | None = None,
    ):
        labels = dict(labels or {})
        for name, typ in labels.items():
            if name in BASE_COLUMNS:
                raise ValueError(
                    f"label '{name}' clashes with a base column ({', '.join(BASE_COLUMNS)})"
                )
            if typ not in _LABEL_TYPES:
                raise ValueError(f"label '{name}' has type {typ!r}; accepted: int, float, str")
        self.schema = pa.schema(
            [pa.field(k, v) for k, v in BASE_COLUMNS.items()]
            + [pa.field(k, _LABEL_TYPES[t]) for k, t in labels.items()]
        )
        self.labels = labels
        self.path = Path(path) if path is not None else None
        self.chunk_rows = int(chunk_rows)
        # Also flush when this much wall time passed since the last flush (a live run's rows
        # reach readers such as `society serve` within about that long), or 1/200 of the
        # time since the start if longer: a 10-hour run writes ~1300 parts, not 36000.
        # None: flush by rows only.
        self.flush_interval_s = flush_interval_s
        self._last_flush = self._created = _time.monotonic()
        self.latest_time: float | None = None  # the largest time recorded so far
        self._buf: list[dict[str, np.ndarray]] = []
        self._buffered = 0
        self._parts = 0
        self._memory: list[pa.Table | list[dict[str, np.ndarray]]] = []  # path None: flushed
        self.rows_written = 0
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            self._parts = len(list(self.path.glob("part-*.parquet")))

    def record(
        self, time: float, metric: str, value: Any, *, replicate: Any = 0, **labels: Any
    ) -> None:
        """Record one value, or many at once: ``value`` and ``replicate`` (and labels) may be
        arrays of one length, e.g. one value per replicate, or per agent with ``agent=ids``."""
        value = np.atleast_1d(np.asarray(value, dtype=np.float64))
        n = value.shape[0]
        if value.ndim != 1:
            raise ValueError(
                f"metric '{metric}': value must be a scalar or 1-D, got shape {value.shape}"
            )
        cols = {
            "replicate": np.broadcast_to(np.asarray(replicate, dtype=np.int64), (n,)),
            "time": np.broadcast_to(np.asarray(time, dtype=np.float64), (n,)),
            "metric": metric
            if isinstance(metric, pa.Array)
            else np.broadcast_to(np.asarray(metric, dtype=object), (n,)),
            "value": value,
        }
        for k, v in labels.items():
            if k not in self.labels:
                declared = ", ".join(self.labels) or "none"
                raise ValueError(
                    f"label '{k}' was not declared for this recorder (declared: {declared})"
                )
            if isinstance(v, pa.Array):  # an Arrow column (nulls: missing labels) as it is
                cols[k] = v
                continue
            v = np.asarray(v)  # objects: None is a missing label (null) of any type
            cols[k] = np.broadcast_to(
                v
                if v.dtype == object
                else v.astype(object if self.labels[k] is str else self.labels[k]),
                (n,),
            )
        self._buf.append(cols)
        self._buffered += n
        if n:
            t = float(np.max(cols["time"]))
            if np.isfinite(t) and (self.latest_time is None or t > self.latest_time):
                self.latest_time = t
        if self._buffered >= self.chunk_rows or (
            self.flush_interval_s is not None and self._flush_due()
        ):
            self.flush()

    def _flush_due(self) -> bool:
        now = _time.monotonic()
        wait = max(self.flush_interval_s or 0.0, (now - self._created) / 200)
        return self.path is not None and now - self._last_flush >= wait

    @property
    def rows_recorded(self) -> int:
        """Rows recorded so far, flushed or still buffered."""
        return self.rows_written + self._buffered

    def _table(self, buf: list[dict[str, np.ndarray]] | None = None) -> pa.Table:
        buf = self._buf if buf is None else buf
        arrays = []
        for field in self.schema:
            parts = [c[field.name] if field.name in c else None for c in buf]
            chunks = [
                pa.nulls(len(c["value"]), field.type)
                if p is None
                else p.cast(field.type)
                if isinstance(p, pa.Array)
                else pa.array(p, type=field.type)
                for p, c in zip(parts, buf, strict=True)
            ]
            arrays.append(
                chunks[0]
                if len(chunks) == 1
                else pa.chunked_array(chunks, type=field.type).combine_chunks()
            )
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def flush(self) -> None:
        """Write buffered rows as one complete Parquet part (atomic rename)."""
        self._last_flush = _time.monotonic()
        if not self._buf:
            return
        if self.path is None:  # in memory: a small table is built when a frame is asked for
            self._memory.append(self._buf if self._buffered < self.chunk_rows else self._table())
            self.rows_written += self._buffered
            self._buf, self._buffered = [], 0
            return
        table = self._table()
        self._buf, self._buffered = [], 0
        self.rows_written += table.num_rows
        final = self.path / f"part-{self._parts:05d}.parquet"
        tmp = self.path / f".tmp-{self._parts:05d}.parquet"
        pq.write_table(table, tmp)
        os.replace(tmp, final)
        self._parts += 1

    def close(self) -> None:
        self.flush()

    def frame(self) -> pd.DataFrame:
        """Everything recorded so far (flushes first)."""
        self.flush()
        if self.path is None:
            tables = [m if isinstance(m, pa.Table) else self._table(m) for m in self._memory]
            self._memory = [pa.concat_tables(tables or [self.schema.empty_table()])]
            return self._memory[0].to_pandas()
        return read_metrics(self.path, schema=self.schema)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_metrics(path: str | Path, *, schema: pa.Schema | None = None) -> pd.DataFrame:
    """Read a run's ``metrics.parquet`` (a run directory or the parquet directory itself)."""
    path = Path(path)
    if path.is_dir() and (path / "metrics.parquet").exists():
        path = path / "metrics.parquet"
    if not path.exists():
        raise FileNotFoundError(
            f"no metrics at {path} (expected a run directory or its metrics.parquet)"
        )
    parts = sorted(path.glob("part-*.parquet")) if path.is_dir() else [path]
    if not parts:
        return (schema or pa.schema(list(BASE_COLUMNS.items()))).empty_table().to_pandas()
    tables = [pq.read_table(p) for p in parts]
    return pa.concat_tables(tables, promote_options="default").to_pandas()
