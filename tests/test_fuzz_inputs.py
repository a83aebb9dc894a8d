"""Hostile and broken input (issue 12, item 8), fuzzed with hypothesis.

Fuzzed configs (Python API), CLI arguments (``--set``, ``--seed``, ``--replicates``,
``--config`` TOML bytes, ``--max-fallback-rate``, ``--out``), edge-list files and corrupt LLM
cache files each give one line of error and a non-zero exit (2 from the CLI), never a
traceback, and never change the file or run directory they were pointed at.

Examples are deterministic (``derandomize=True``) and cheap: the CLI and config fuzzers swap
each scenario's ``run`` for a stub (the inputs, not the simulations, are under test; the stub
still turns the seed into jax and numpy streams), so a fuzzed input that validates costs a
few milliseconds. Real runs happen only where the file under test is read by the run itself
(edge lists, the cache of a replay) or to make a run directory to protect.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import itertools
import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import scenarios
from sim_core.errors import ConfigError
from society.cli import main
from society.llm import LLMClient, LLMConfig
from society.llm.cache import CacheEntry, ResponseCache
from society.llm.testserver import TestServer
from society.topology import Topology, make_topology


def fuzz(examples: int):
    """Deterministic hypothesis settings: a fixed sequence of examples, no example database."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


_counter = itertools.count()


def fresh(base: Path, stem: str = "x") -> Path:
    """A new path under ``base`` for one example (hypothesis reuses the test's tmp_path)."""
    return base / f"{stem}{next(_counter)}"


def cli(argv: list[str]) -> tuple[int, str, str]:
    """``society ARGV`` in-process: exit status, stdout, stderr. Any exception other than
    SystemExit escapes, which is the traceback a user would see."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def assert_one_line_error(rc: int, err: str, argv: object = None) -> str:
    lines = err.splitlines()
    assert rc == 2, (rc, err, argv)
    assert len(lines) == 1 and lines[0].startswith("error: "), (err, argv)
    assert "Traceback" not in err
    return lines[0]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (directories as ``name/``, with no bytes)."""
    return {
        str(p.relative_to(root)) + ("/" if p.is_dir() else ""): b""
        if p.is_dir()
        else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


# ----------------------------------------------------------------------------- stubbed runs
class _Validated(Exception):
    """Raised by the stub run of the Python API fuzzer: the config passed validation."""


def _stub_run(self, config, ctx):
    ctx.rng.key("fuzz")  # the seed reaches jax and numpy as in a real run
    ctx.rng.numpy("fuzz")
    return {name: np.zeros(ctx.replicates) for name in self.headline}


def _refuse_run(self, config, ctx):
    raise _Validated


@contextmanager
def stubbed(run) -> Iterator[None]:
    """Every registered scenario's ``run`` replaced by ``run`` (validation is untouched)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in scenarios.names():
            mp.setattr(scenarios.get(name), "run", run)
        yield


# ------------------------------------------------------------------------- CLI strategies
NAMES = scenarios.names()
FIELDS = sorted({f for name in NAMES for f in scenarios.config_class(name).model_fields})

set_keys = st.one_of(
    st.sampled_from(FIELDS),
    st.sampled_from(
        ["", " ", "-", "--", "agents ", " agents", "AGENTS", "agent-type", "seed", "a.b", "é"]
    ),
    st.text(max_size=8),
)
set_values = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        [
            "",
            " ",
            "=",
            "a=b",
            "==",
            "true",
            "false",
            "True",
            "nan",
            "+inf",
            "-inf",
            "-0",
            "1e400",
            "-1e400",
            "0x10",
            "1_000",
            "0.5",
            "1.",
            '"text"',
            "'lit'",
            '""',
            "[1, 2]",
            "[]",
            "{a = 1}",
            "{}",
            "[[]]",
            "1979-05-27",
            "07:32:00",
            '"\\u0000"',
            "[" * 60,
            "{a=" * 40,
            "single",
            "rules",
            "learned",
            "llm",
            "mixed",
            "rules:1,llm:1",
            "rules:-1",
            "rules:nan",
            "complete",
            "lattice",
            "cycle",
            "/",
            ".",
            "/dev/null",
            "x" * 300,
            "a\nb",
            "a\rb",
            "\x00",
            "\u2028",
            "\ufeff1",
        ]
    ),
    st.text(max_size=12),
)
set_items = st.one_of(
    st.tuples(set_keys, set_values).map(lambda kv: f"{kv[0]}={kv[1]}"),
    st.text(max_size=10),  # often no '=' at all
)
seeds = st.one_of(
    st.integers(min_value=0, max_value=3).map(str),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["", "abc", "1.5", "nan", "-0", "0x1", " 1", "1e3", "\u0663", "4294967296"]),
)
replicate_counts = st.one_of(
    st.integers(min_value=1, max_value=3).map(str),  # valid: kept small, the stub allocates them
    st.integers(min_value=-(2**70), max_value=0).map(str),
    st.integers(min_value=2**31, max_value=2**70).map(str),
    st.sampled_from(["", "one", "2.0", "inf", "-", "1e2"]),
)
fallback_rates = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "x", "0.5", "1", "-0.0", "1e400"]),
)


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return (
            "nan"
            if v != v
            else ("inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v))
        )
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


toml_scalars = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=8),
)
toml_lines = st.one_of(
    st.tuples(st.sampled_from(FIELDS), toml_scalars).map(
        lambda kv: f"{kv[0]} = {_toml_value(kv[1])}"
    ),
    st.tuples(st.sampled_from(FIELDS), st.lists(toml_scalars, max_size=3)).map(
        lambda kv: f"{kv[0]} = [{', '.join(map(_toml_value, kv[1]))}]"
    ),
    st.sampled_from(FIELDS).map(lambda k: f"[{k}]\nx = 1"),  # a nested table
    st.sampled_from(
        [
            "agents = = 3",
            "[a.b.c]",
            "agents = 1\nagents = 2",
            "x = [" * 30,
            "= 1",
            "\x00",
            '"a" = 1',
        ]
    ),
)
toml_files = st.one_of(
    st.lists(toml_lines, max_size=4).map(lambda lines: "\n".join(lines).encode()),
    st.binary(max_size=64),
    st.sampled_from([b"\xff\xfe", b"a = " + b"[" * 3000 + b"]" * 3000, b"agents = 3\n\x80"]),
)


ANY_SCENARIO = st.sampled_from(NAMES)


@st.composite
def run_argvs(draw, scenario: st.SearchStrategy[str] = ANY_SCENARIO):
    """``run SCENARIO ...`` with fuzzed options; ``--config`` is returned as bytes to write."""
    args: list[str] = []
    for item in draw(st.lists(set_items, max_size=3)):
        args += ["--set", item]
    for flag, values in (("--seed", seeds), ("--replicates", replicate_counts),
                         ("--max-fallback-rate", fallback_rates)):  # fmt: skip
        if draw(st.booleans()):
            args += [flag, draw(values)]
    config = draw(st.one_of(st.none(), toml_files))
    return ["run", draw(scenario), *args], config


# ============================================================================ CLI arguments
CLI_EXAMPLES = 150


def test_fuzzed_cli_arguments_exit_2_with_one_line(tmp_path):
    """Fuzzed ``society run`` arguments and ``--config`` files over every scenario: exit 2
    with exactly one 'error:' line, or (inputs that validate) exit 0 after a stubbed run."""
    outcomes = {0: 0, 2: 0}

    @fuzz(CLI_EXAMPLES)
    @given(run_argvs())
    def check(case):
        argv, config = case
        if config is not None:
            path = fresh(tmp_path, "cfg")
            path.write_bytes(config)
            argv = [*argv, "--config", str(path)]
        argv = [*argv, "--out", str(fresh(tmp_path, "out"))]
        rc, out, err = cli(argv)
        outcomes[rc] = outcomes.get(rc, 0) + 1
        if rc == 0:
            assert "status: completed" in out and "Traceback" not in err, (argv, err)
        else:
            assert_one_line_error(rc, err, argv)

    with stubbed(_stub_run):
        check()
    assert set(outcomes) == {0, 2} and outcomes[2] > outcomes[0] > 0, outcomes


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--seed", str(2**70)], "'--seed'"),  # was: OverflowError from jax.random.key
        (["--seed", str(2**32)], "'--seed'"),  # jax keys take 32 bits: it would repeat seed 0
        (["--replicates", str(2**70)], "'--replicates'"),  # was: ValueError from numpy
        (["--set", "graph=" + "x" * 5000], "invalid value for 'graph': File name too long"),
        (["--set", "a\nb=1"], "unknown parameter 'a\\nb'"),  # was: two lines on stderr
        (["--set", "a\u2028b"], "--set expects KEY=VALUE"),
        (["--set", "agents=" + "[" * 3000], "invalid value for 'agents'"),  # was: RecursionError
    ],
)
def test_cli_inputs_that_raised_tracebacks(argv, needle, tmp_path):
    with stubbed(_stub_run):
        rc, _, err = cli(["run", "network-game", *argv, "--out", str(tmp_path / "out")])
    assert needle in assert_one_line_error(rc, err, argv)


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"agents = 3\n\xff\xfe", "not UTF-8"),  # was: UnicodeDecodeError
        (b"a = " + b"[" * 3000 + b"]" * 3000, "nested too deeply"),  # was: RecursionError
        (None, "cannot be read: Is a directory"),  # was: IsADirectoryError
    ],
)
def test_cli_config_files_that_raised_tracebacks(content, needle, tmp_path):
    path = tmp_path / "params.toml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    rc, _, err = cli(["run", "division-of-labour", "--config", str(path)])
    assert needle in assert_one_line_error(rc, err) and str(path) in err


def test_cli_out_that_cannot_be_a_directory(tmp_path):
    """``--out`` at a file, or below one: one line before anything runs (was: NotADirectoryError
    once the run had started)."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me\n")
    finished = tmp_path / "finished"  # what replay reads first: a (hand-made) run's summary
    finished.mkdir()
    summary = {"scenario": "division-of-labour", "seed": 0, "replicates": 1, "config": {}}
    (finished / "summary.json").write_text(json.dumps(summary))
    for out in (a_file, a_file / "run", a_file / "a" / "b"):
        for argv in (["run", "division-of-labour"], ["replay", str(finished)]):
            rc, _, err = cli([*argv, "--out", str(out)])
            line = assert_one_line_error(rc, err, argv)
            assert "'--out'" in line and "is not a directory" in line
    assert a_file.read_text() == "keep me\n"


# ============================================================================ Python API
# scenarios.run's own keywords are not config fields: a fuzzed key must not become one.
RESERVED = set(inspect.signature(scenarios.run).parameters) | {"max_fallback_rate", "options"}

hostile_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**100), max_value=2**100),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=16),
    st.sampled_from(["", "x" * 300, "a\nb", "nan", "-1", "1e400", "true", "rules:1", "\x00"]),
    st.binary(max_size=8),
    st.complex_numbers(max_magnitude=1e3),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(min_value=-3, max_value=3), max_size=3),
    st.tuples(st.floats(allow_nan=True)),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.frozensets(st.integers(), max_size=2),
    st.datetimes(),
    st.sampled_from(
        [
            object(),
            Path("/"),
            Decimal("1e999"),
            np.arange(4).reshape(2, 2),  # a multi-line repr
            np.float64("nan"),
            np.int64(-3),
            np.array([]),
            float,
            ...,
        ]
    ),
)


@pytest.mark.parametrize("name", NAMES)
def test_fuzzed_config_values_raise_one_line_config_error(name):
    """``scenarios.run(name, write=False, **fuzzed)`` over each config's field names (and a
    few unknown ones) with values of wrong types: a one-line ConfigError, never another
    exception. Values pydantic accepts reach the stubbed run and are counted, not run."""
    fields = st.sampled_from(sorted(scenarios.config_class(name).model_fields))
    unknown = st.text(min_size=1, max_size=6).filter(lambda k: k not in RESERVED)
    seen = {"rejected": 0, "validated": 0}

    @fuzz(60)
    @given(
        st.dictionaries(fields, hostile_values, min_size=1, max_size=3),
        st.dictionaries(unknown, hostile_values, max_size=1),  # mostly none: field errors first
    )
    def check(known, extra):
        values = {**extra, **known}
        try:
            scenarios.run(name, write=False, **values)
        except _Validated:
            seen["validated"] += 1
            return
        except ConfigError as exc:
            msg = str(exc)
            assert msg and len(msg.splitlines()) == 1, (values, msg)
            seen["rejected"] += 1
            return
        raise AssertionError(f"no ConfigError for {values!r}")

    with stubbed(_refuse_run):
        check()
    assert seen["rejected"] > 0, seen


@pytest.mark.parametrize(
    "values,needle",
    [
        ({"a\nb": 1}, "unknown parameter 'a\\nb'"),  # was: a message of two lines
        ({"agents\r": 1}, "unknown parameter 'agents\\r'"),
        ({"agents": np.arange(4).reshape(2, 2)}, "invalid value for 'agents'"),  # multi-line repr
        ({"graph": "x" * 5000}, "invalid value for 'graph': File name too long"),  # was: OSError
    ],
)
def test_config_values_that_gave_tracebacks_or_several_lines(values, needle):
    with pytest.raises(ConfigError) as info:
        scenarios.run("network-game", write=False, **values)
    assert needle in str(info.value) and len(str(info.value).splitlines()) == 1


# ============================================================================ edge lists
ids = st.one_of(
    st.integers(min_value=-3, max_value=12).map(str),
    st.integers(min_value=2**31 - 3, max_value=2**70).map(str),
    st.sampled_from(["1.5", "1e3", "0x1", "-0", "+1", "\u0663", "1_0", "nan", "9" * 5000]),
)
edge_lines = st.one_of(
    st.tuples(ids, ids, st.sampled_from([" ", "\t", "  ", " \u3000 "])).map(
        lambda t: t[0] + t[2] + t[1]
    ),
    st.tuples(st.integers(0, 9), st.integers(0, 9)).map(lambda t: f"{t[0]} {t[1]}"),  # often valid
    st.sampled_from(
        [
            "# a comment",
            "",
            "   ",
            "\t",
            "0 1 2",
            "0",
            "a b",
            "0 1 # trailing",
            "1\t0",
            "0,1",
            "0 0",
            "3 3",
            "\x00",
            "0 1\x00",
        ]
    ),  # fmt: skip
)
edge_files = st.one_of(
    st.tuples(
        st.lists(edge_lines, max_size=8),
        st.sampled_from(["\n", "\r\n", "\r"]),
        st.sampled_from([b"", b"\xef\xbb\xbf"]),
    ).map(  # fmt: skip
        lambda t: t[2] + t[1].join(t[0]).encode()
    ),
    st.binary(max_size=40),
    st.binary(max_size=20).map(lambda b: b"0 1\n" + b),
)
agent_counts = st.one_of(st.none(), st.integers(min_value=0, max_value=16))


def _check_topology(topo: Topology, n: int | None) -> None:
    e = topo.edges
    assert topo.n >= 0 and (n is None or topo.n == n)
    if e.size:
        assert e.min() >= 0 and e.max() < topo.n and bool(np.all(e[:, 0] < e[:, 1]))


def test_fuzzed_edge_list_files(tmp_path):
    """``Topology.from_edgelist`` and ``make_topology(path, n)`` on fuzzed file contents:
    a valid topology, or a one-line ValueError naming the file; the file is not changed."""
    seen = {"valid": 0, "rejected": 0}

    @fuzz(200)
    @given(edge_files, agent_counts)
    def check(content, n):
        path = fresh(tmp_path, "edges")
        path.write_bytes(content)
        calls = [lambda: Topology.from_edgelist(path, n=n)]
        if n is not None and n >= 1:
            calls.append(lambda: make_topology(str(path), n))
        for call in calls:
            try:
                topo = call()
            except ValueError as exc:
                msg = str(exc)
                assert len(msg.splitlines()) == 1 and path.name in msg, msg
                seen["rejected"] += 1
            else:
                _check_topology(topo, n)
                seen["valid"] += 1
        assert path.read_bytes() == content

    check()
    assert seen["valid"] > 0 and seen["rejected"] > seen["valid"], seen


@pytest.mark.parametrize(
    "content,n,needle",
    [
        (b"\xff\xfe\x00junk", None, "not UTF-8 text"),  # was: UnicodeDecodeError, no file named
        (b"0 1\n1 99999999999999999999999\n", None, "edges.txt:2"),  # was: OverflowError
        (b"0 1\n0 3000000000\n", None, "edges.txt:2"),  # was: 'n must be in [0, ...]', no file
    ],
)
def test_edge_list_inputs_that_raised_tracebacks(tmp_path, content, n, needle):
    path = tmp_path / "edges.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="edges.txt") as info:
        Topology.from_edgelist(path, n=n)
    assert needle in str(info.value) and len(str(info.value).splitlines()) == 1


def test_edge_list_with_a_byte_order_mark_and_crlf(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_bytes(b"\xef\xbb\xbf0 1\r\n1 2\r\n")
    assert Topology.from_edgelist(path).edges.tolist() == [[0, 1], [1, 2]]


def test_topology_name_too_long_for_the_os_is_an_unknown_name():
    with pytest.raises(ValueError, match="unknown topology name"):
        make_topology("x" * 5000, 10)


def test_fuzzed_edge_lists_through_the_cli(tmp_path):
    """``society run network-game --set graph=PATH``: a broken edge list exits 2 with one line
    naming the file (only files the reader rejects are run: a valid one would simulate)."""
    count = {"n": 0}

    @fuzz(12)
    @given(edge_files, st.integers(min_value=2, max_value=12))
    def check(content, agents):
        path = fresh(tmp_path, "edges")
        path.write_bytes(content)
        try:
            Topology.from_edgelist(path, n=agents)
            valid = True
        except ValueError:
            valid = False
        assume(not valid)
        argv = ["run", "network-game", "--set", f"graph={path}", "--set", f"population={agents}",
                "--set", "steps=1", "--out", str(fresh(tmp_path, "out"))]  # fmt: skip
        rc, _, err = cli(argv)
        assert path.name in assert_one_line_error(rc, err, argv)
        assert path.read_bytes() == content
        count["n"] += 1

    check()
    assert count["n"] > 0


# ============================================================================ corrupt caches
@pytest.fixture(scope="module")
def server():
    srv = TestServer(reply="hello").start_in_thread()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def good_cache(tmp_path_factory) -> bytes:
    """The bytes of a valid, closed cache of a few hundred entries (several pages)."""
    path = tmp_path_factory.mktemp("cache") / "llm-cache.sqlite"
    cache = ResponseCache(path)
    cache.put_many(
        (f"{i:064x}", 0, "m", CacheEntry("reply " * 40, 10, 20, 0.0, True)) for i in range(300)
    )
    cache.close()
    return path.read_bytes()


def _sqlite_bytes(tmp: Path, table: str, columns: list[str]) -> bytes:
    path = fresh(tmp, "schema")
    with sqlite3.connect(path) as db:
        db.execute(f'CREATE TABLE "{table}" ({", ".join(f"{c!r}" for c in columns)})')
        db.execute(
            f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(columns))})', [1] * len(columns)
        )
    db.close()
    return path.read_bytes()


COLUMNS = ["key", "sample", "model", "text", "prompt_tokens", "completion_tokens", "cost_usd",
           "priced", "error", "created_at"]  # fmt: skip


@st.composite
def corrupt_caches(draw, good: bytes, tmp: Path) -> bytes:
    kind = draw(st.sampled_from(["truncated", "random", "header+random", "flipped", "schema"]))
    if kind == "truncated":
        return good[: draw(st.integers(min_value=1, max_value=len(good) - 1))]
    if kind == "random":
        return draw(st.binary(min_size=1, max_size=4096))
    if kind == "header+random":
        return b"SQLite format 3\x00" + draw(st.binary(max_size=4096))
    if kind == "flipped":
        data = bytearray(good)
        for pos in draw(st.lists(st.integers(0, len(good) - 1), min_size=1, max_size=8)):
            data[pos] ^= draw(st.integers(1, 255))
        return bytes(data)
    table = draw(st.sampled_from(["responses", "other", "Responses", "artifacts"]))
    columns = draw(
        st.lists(st.sampled_from([*COLUMNS, "id", "value"]), min_size=1, max_size=4, unique=True)
    )
    assume(columns != COLUMNS)
    return _sqlite_bytes(tmp, table, columns)


async def _one_call(path: Path, url: str) -> None:
    cfg = LLMConfig(model="openai/test-model", api_base=url + "/v1", cache_path=path, max_retries=0)
    async with LLMClient(cfg) as client:
        await client.complete([{"role": "user", "content": "hi"}])


def test_fuzzed_corrupt_cache_files(tmp_path, good_cache, server):
    """Truncated, random, bit-flipped and wrong-schema cache files opened through LLMClient
    (one call against the test server): a one-line ConfigError naming the file, which is
    left byte-identical with no -wal/-shm beside it; or (a flip SQLite does not notice) a
    working call."""
    seen = {"rejected": 0, "accepted": 0}

    @fuzz(80)
    @given(st.data())
    def check(data):
        content = data.draw(corrupt_caches(good_cache, tmp_path))
        folder = fresh(tmp_path, "run")
        folder.mkdir()
        path = folder / "llm-cache.sqlite"
        path.write_bytes(content)
        try:
            asyncio.run(_one_call(path, server.url))
        except ConfigError as exc:
            msg = str(exc)
            assert len(msg.splitlines()) == 1 and str(path) in msg, msg
            assert path.read_bytes() == content
            assert sorted(p.name for p in folder.iterdir()) == ["llm-cache.sqlite"]
            seen["rejected"] += 1
        else:
            seen["accepted"] += 1

    check()
    assert seen["rejected"] > seen["accepted"], seen


@pytest.mark.parametrize(
    "kind,needle",
    [
        ("random", "is not an SQLite database"),  # was: sqlite3.DatabaseError, no file named
        ("truncated", "is corrupt"),  # was: DatabaseError, and -wal/-shm files left behind
        ("wrong-columns", "has a 'responses' table with columns (a)"),  # was: OperationalError
        ("other-table", "without a 'responses' table"),  # was: silently added a table to it
        ("directory", "is not a file"),  # was: sqlite3.OperationalError
    ],
)
def test_corrupt_cache_files_that_raised_tracebacks(tmp_path, good_cache, kind, needle):
    path = tmp_path / "llm-cache.sqlite"
    if kind == "random":
        path.write_bytes(bytes(range(256)) * 8)
    elif kind == "truncated":
        path.write_bytes(good_cache[:50])
    elif kind == "wrong-columns":
        path.write_bytes(_sqlite_bytes(tmp_path, "responses", ["a"]))
    elif kind == "other-table":
        path.write_bytes(_sqlite_bytes(tmp_path, "other", ["a"]))
    else:
        path.mkdir()
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(needle)) as info:
        LLMClient(LLMConfig(model="openai/m", api_base="http://127.0.0.1:9/v1", cache_path=path))
    assert str(path) in str(info.value) and len(str(info.value).splitlines()) == 1
    assert snapshot(tmp_path) == before


def test_empty_cache_file_is_a_new_cache(tmp_path, server):
    """A zero-byte file (touched, or emptied) is an empty database, not a corrupt one."""
    path = tmp_path / "llm-cache.sqlite"
    path.touch()
    asyncio.run(_one_call(path, server.url))
    cache = ResponseCache(path)
    assert len(cache) == 1
    cache.close()


def test_corrupt_cache_through_the_cli_replay(tmp_path, good_cache):
    """``society replay DIR`` opens DIR's llm-cache.sqlite (the CLI path that reads an existing
    cache: ``run --llm --api-base`` always starts a new one in its new run directory): a
    corrupt one exits 2 with one line naming it, and DIR is left byte-identical."""
    run_dir = tmp_path / "finished"
    run_dir.mkdir()
    summary = {
        "scenario": "division-of-labour",
        "seed": 0,
        "replicates": 1,
        "config": {"population": 4, "steps": 2, "average_from": 0, "agents": "llm"},
        "options": {"llm": "openai/test-model"},
    }
    (run_dir / "summary.json").write_text(json.dumps(summary))
    variants = [
        good_cache[:100],
        bytes(range(256)) * 4,
        _sqlite_bytes(tmp_path, "responses", ["a"]),
    ]
    for content in variants:
        (run_dir / "llm-cache.sqlite").write_bytes(content)
        before = snapshot(run_dir)
        rc, _, err = cli(["replay", str(run_dir), "--out", str(fresh(tmp_path, "again"))])
        line = assert_one_line_error(rc, err)
        assert "llm-cache.sqlite" in line and str(run_dir) in line
        assert snapshot(run_dir) == before


# ============================================================================ run directory
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A real (tiny) run's directory: metrics, summary and plots."""
    out = tmp_path_factory.mktemp("runs") / "dol"
    rc, _, err = cli(["run", "division-of-labour", "--set", "population=8", "--set", "steps=4",
                      "--set", "average_from=0", "--set", "record_every=1", "--out", str(out)])  # fmt: skip
    assert rc == 0, err
    assert (out / "summary.json").exists() and any((out / "metrics.parquet").iterdir())
    return out


def test_out_at_an_existing_run_directory_changes_nothing(finished_run, tmp_path):
    """``--out`` at a finished run's directory, with fuzzed (often valid) arguments, exits 2
    with one line and leaves every file byte-identical; so do the Python API and replay."""
    before = snapshot(finished_run)

    valid = ["--set", "population=8", "--set", "steps=4", "--set", "average_from=0"]
    rc, _, err = cli(["run", "division-of-labour", *valid, "--out", str(finished_run)])
    assert "exists and is not empty" in assert_one_line_error(rc, err)
    rc, _, err = cli(["replay", str(finished_run), "--out", str(finished_run)])
    assert "exists and is not empty" in assert_one_line_error(rc, err)
    with pytest.raises(ConfigError, match="exists and is not empty"):
        scenarios.run("division-of-labour", out=finished_run, population=8, steps=4, average_from=0)

    @fuzz(40)
    @given(run_argvs(st.just("division-of-labour")))
    def check(case):
        argv, config = case
        if config is not None:
            path = fresh(tmp_path, "cfg")
            path.write_bytes(config)
            argv = [*argv, "--config", str(path)]
        rc, _, err = cli([*argv, "--out", str(finished_run)])
        assert_one_line_error(rc, err, argv)

    check()
    assert snapshot(finished_run) == before
