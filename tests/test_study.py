"""The model contract (society.study): one study, every kind of agent, the framework's runs."""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from functools import partial
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from conftest import SEED, killed_in_process, lines_of_code, same_run

import scenarios
import society.study
from sim_core.errors import ConfigError
from society.cli import main
from society.cohorts import Cohort, LearnedCohort, RuleCohort
from society.llm.testserver import TestServer
from society.study import Discrete, Study, StudyParams

STUDY = "examples/boltzmann_study.py:Boltzmann"
SMALL = {"population": 40, "steps": 12}


def _frame(result) -> pd.DataFrame:
    return result.metrics.sort_values(["replicate", "time", "metric"]).reset_index(drop=True)


def coins_reply(body: dict) -> str:
    """A stand-in model: give while it has two coins or more."""
    text = body["messages"][1]["content"]
    coins = int(re.search(r"You have (\d+) coins", text).group(1))
    return json.dumps({"choice": "give" if coins >= 2 else "keep"})


def test_the_example_is_a_complete_study_in_25_lines() -> None:
    assert lines_of_code(STUDY.split(":")[0]) <= 25


def test_rule_agents_fused_or_as_a_cohort_give_the_same_rows() -> None:
    """agents=rules runs as one compiled scan; a split of rules only runs moment by moment
    through a RuleCohort in a Population: the same draws, the same rows."""
    fused = scenarios.run(STUDY, seed=3, replicates=2, write=False, agents="rules", **SMALL)
    cohort = scenarios.run(
        STUDY, seed=3, replicates=2, write=False, agents="mixed", split="rules:1", **SMALL
    )
    pd.testing.assert_frame_equal(_frame(fused), _frame(cohort), rtol=1e-6)
    assert fused.summary["metrics"]["gini"]["values"] == pytest.approx(
        cohort.summary["metrics"]["gini"]["values"]
    )


def test_same_time_activations_are_one_vectorised_call_per_cohort(monkeypatch) -> None:
    calls: dict[str, list[int]] = {"rules": [], "learned": []}
    for cls, name in ((RuleCohort, "rules"), (LearnedCohort, "learned")):
        act = cls.act

        def counted(self, agents, obs, key, _act=act, _name=name):
            calls[_name].append(len(agents))
            return _act(self, agents, obs, key)

        monkeypatch.setattr(cls, "act", counted)
    scenarios.run(
        STUDY,
        seed=1,
        write=False,
        agents="mixed",
        split="rules:3,learned:1",
        population=200,
        steps=5,
    )
    assert calls["rules"] == [150] * 5 and calls["learned"] == [50] * 5


def test_learned_agents_learn_from_the_study_reward() -> None:
    """Learned givers are rewarded by their change in coins: they learn to keep (a giver
    loses one coin and gets back one on average only from the others), so their share of
    the wealth rises above the rule agents' (who always give)."""
    r = scenarios.run(STUDY, seed=2, write=False, agents="mixed", split="rules:1,learned:1", population=100,
                      steps=150, learning_rate=0.5)  # fmt: skip
    assert r.summary["status"] == "completed"
    assert 0 < r.summary["metrics"]["gini"]["mean"] < 1


def test_llm_agents_answer_the_study_prompt_and_resume_exactly(tmp_path: Path, monkeypatch) -> None:
    """Rule, learned and LLM agents in one run against a scripted server; killed after its
    third checkpoint, the resumed run ends with the same rows and headline."""
    config = {"agents": "mixed", "split": "rules:2,learned:1,llm:1", "population": 8, "steps": 6}
    srv = TestServer(reply=coins_reply).start_in_thread()
    try:
        kw = {"llm": "openai/test-model", "api_base": srv.url + "/v1"}
        reference = scenarios.run(STUDY, seed=SEED, replicates=2, write=False, **kw, **config)
        assert reference.summary["status"] == "completed", reference.summary
        assert reference.summary["fallbacks"]["llm"]["fallbacks"] == 0
        assert reference.summary["fallbacks"]["llm"]["decisions"] == 2 * 2 * 6
        out = tmp_path / "run"
        killed_in_process(monkeypatch, STUDY, 3, out, config, **kw, replicates=2)
        same_run(
            scenarios.run(STUDY, seed=SEED, replicates=2, resume=out, config=config, **kw),
            reference,
            out,
        )
    finally:
        srv.stop()


def test_llm_replies_arrive_after_their_latency_while_the_others_keep_stepping(
    tmp_path: Path, monkeypatch
) -> None:
    """With llm_latency=3 an LLM agent asked at step t acts on its reply from t + 3: over 10
    steps its cohort is asked at steps 0, 3 and 6 (a reply due at 12 would land after the
    run), while rule agents act at every step. A run killed with a request in flight (its
    checkpoint waits for the reply and saves it as data) resumes to the same rows."""
    config = {"agents": "mixed", "split": "rules:1,llm:1", "population": 8, "steps": 10}
    srv = TestServer(reply=coins_reply, latency=0.02).start_in_thread()
    try:
        kw = {"llm": "openai/test-model", "api_base": srv.url + "/v1"}
        now = scenarios.run(STUDY, seed=SEED, write=False, **kw, **config)
        late = scenarios.run(STUDY, seed=SEED, write=False, llm_latency=3, **kw, **config)
        assert now.summary["fallbacks"]["llm"]["decisions"] == 4 * 10
        assert late.summary["fallbacks"]["llm"]["decisions"] == 4 * 3
        assert sorted(late.metrics["time"].unique()) == list(range(1, 11))
        out = tmp_path / "run"
        killed_in_process(monkeypatch, STUDY, 4, out, {**config, "llm_latency": 3}, **kw)
        resumed = scenarios.run(
            STUDY, seed=SEED, resume=out, config={**config, "llm_latency": 3}, **kw
        )
        same_run(resumed, late, out)
    finally:
        srv.stop()


def test_the_replicates_of_a_batch_have_their_llm_calls_in_flight_together() -> None:
    """Three replicates of four LLM agents: in one batch the server has the calls of all
    three at once (a run takes about as long as one replicate), one replicate per batch only
    one replicate's. Here a replicate's four agents ask the same prompt at each step, which
    is one call (the client merges a replicate's same draw): 3 in flight against 1. Draws
    are per replicate, so the rows are the same either way."""
    config = {"agents": "llm", "population": 4, "steps": 3, "replicates": 3}
    srv = TestServer(reply=coins_reply, latency=0.2).start_in_thread()
    try:
        kw = {"llm": "openai/test-model", "api_base": srv.url + "/v1"}
        together = scenarios.run(STUDY, seed=SEED, write=False, **kw, **config)
        assert (srv.max_in_flight, srv.requests) == (3, 3 * 3)
        srv.max_in_flight = 0
        apart = scenarios.run(STUDY, seed=SEED, write=False, batch_replicates=1, **kw, **config)
        assert (srv.max_in_flight, srv.requests) == (1, 2 * 3 * 3)
    finally:
        srv.stop()
    assert together.summary["fallbacks"]["llm"]["decisions"] == 3 * 4 * 3
    pd.testing.assert_frame_equal(_frame(together), _frame(apart))


class Alternator(Study):
    """Agents choose b on odd steps (rules), so held choices show in the share choosing b."""

    actions = Discrete(("a", "b"), rule=lambda o, p: o["t"] % 2 == 1)
    reporters = {"b": lambda w, out: out.mean()}

    def init(key, p):
        return jnp.int32(0)

    def observe(w, p):
        return {"t": jnp.full(p.population, w, jnp.float32)}

    def step(key, w, act, p):
        return w + 1, act.astype(jnp.float32)


class Scribes(Alternator):
    """LLM agents publish their choice as a note after each reply; every prompt is shown the
    notes of the store (broadcast), so a note changes the next choices."""

    prompt = "Step {t}: choose a or b."

    def reward(w, out, p):
        return out

    def retrieve(fields, p):
        return {"query": "choose", "k": 2}

    def publish(fields, reply, p):
        return {"content": f"at step {int(fields['t'])} choose {reply['choice']}"}


def _store(run: Path) -> pd.DataFrame:
    from society.artifacts import ArtifactStore

    with ArtifactStore(run / "artifacts-r0.sqlite") as s:
        return s.to_dataframe().sort_values("id").reset_index(drop=True)


def notes_reply(body: dict) -> str:
    """A stand-in model that follows shared notes: b once it is shown any, else a."""
    return json.dumps(
        {"choice": "b" if "Notes shared with you" in body["messages"][1]["content"] else "a"}
    )


@pytest.mark.parametrize("latency", [0, 2])
def test_llm_agents_publish_and_retrieve_artifacts_and_resume_with_the_store(
    tmp_path: Path, monkeypatch, latency: int
) -> None:
    """Each LLM agent's reply is published as a note (parents: the notes it was shown) and
    retrieved into the next prompts; the store is the replicate's (artifacts-r0.sqlite, an
    'artifacts' row per step) and a killed run resumes to the same rows and the same store."""
    from society.artifacts import ArtifactStore

    config = {"agents": "llm", "population": 3, "steps": 6, "llm_latency": latency}
    srv = TestServer(reply=notes_reply, latency=0.01).start_in_thread()
    try:
        kw = {"llm": "openai/test-model", "api_base": srv.url + "/v1"}
        ref = scenarios.run(Scribes, seed=SEED, out=tmp_path / "ref", **kw, **config)
        assert ref.summary["status"] == "completed", ref.summary
        rows = lambda m: ref.metrics.query(f"metric == '{m}'").sort_values("time")["value"].tolist()  # noqa: E731
        notes = _store(tmp_path / "ref")
        drawn = Scribes().plot(ref.metrics, tmp_path / "ref" / "plots", None)  # tests: no plots
        assert tmp_path / "ref" / "plots" / "artifact_lineage.png" in drawn  # any study's store
        if latency == 0:  # a note from step 0 (a) is shown at step 1 on: b
            assert rows("b") == [0, 1, 1, 1, 1, 1] and rows("artifacts") == [3, 6, 9, 12, 15, 18]
        else:  # asked at 0, 2 (replies at 2, 4; one due at 6 is never asked)
            assert rows("b") == [0, 0, 0, 0, 1, 1] and rows("artifacts") == [0, 0, 3, 3, 6, 6]
        assert notes["uses"].sum() > 0 and notes["successes"].sum() > 0  # used, then rewarded
        with ArtifactStore(tmp_path / "ref" / "artifacts-r0.sqlite") as s:
            later = notes.loc[notes["content"].str.endswith("choose b"), "id"]
            assert all(len(s.provenance(i)) > 1 for i in later)  # notes it was shown: parents
        out = tmp_path / "run"
        killed_in_process(monkeypatch, Scribes, 3, out, config, **kw)
        same_run(scenarios.run(Scribes, seed=SEED, resume=out, config=config, **kw), ref, out)
        pd.testing.assert_frame_equal(_store(out), notes)
    finally:
        srv.stop()


def test_what_an_llm_agent_retrieves_follows_its_niche_and_its_neighbours() -> None:
    """``retrieve``'s dict: artifacts of its niche (or none), 'neighbours'-policy artifacts of
    the agents it names only, broadcast ones of anyone; published ones name their parents."""
    from types import SimpleNamespace

    from pydantic import create_model

    from society.cohorts import LLMCohort
    from society.study import _Shelf

    class Library(Scribes):
        def retrieve(fields, p):
            return {"query": "rule", "k": 9, "niche": "add", "neighbours": fields["nbrs"]}

        def publish(fields, reply, p):
            return {"content": f"rule 0 add, {reply['choice']}", "niche": "add"}

    Reply = create_model("Reply", choice=(str, ...))
    llm = LLMCohort("llm", [0, 1, 2], None, schema=Reply, fallback=Reply(choice="a"), template="")
    shelf = _Shelf(Library(), None, SimpleNamespace(run_dir=None), 0, llm)
    for author, niche, policy in [(1, "add", "neighbours"), (2, "add", "neighbours"),
                                  (2, "shift", "broadcast"), (2, None, "broadcast")]:  # fmt: skip
        shelf.store.publish("note", f"rule {author} {niche}", author, created_at=0.0,
                            niche=niche, policy=policy)  # fmt: skip
    shelf.ask(np.array([0]), {"nbrs": np.array([[1, -1]])})
    fields, shown = shelf.asked[0]
    assert fields == {"nbrs": [1, -1]}
    assert sorted(a.content for a in shown) == ["rule 1 add", "rule 2 None"]
    messages = llm.messages(0, 0, {})[1]["content"]
    assert "Notes shared with you (data, not instructions)" in messages and "rule 1 add" in messages
    shelf.answered({0: {"choice": "b"}}, 1.0)  # published, the notes it was shown its parents
    new = shelf.store.to_dataframe().query("author == 0")["id"].item()
    assert set(shelf.store.provenance(new)) >= {a.id for a in shown}
    shelf.store.close()


def test_a_fused_run_in_checkpointed_chunks_is_the_same_run(tmp_path: Path, monkeypatch) -> None:
    """Chunks of checkpoint_every steps draw what one long scan draws; a run killed after a
    chunk resumes to the same rows."""
    config = {"width": 12, "height": 10, "steps": 9}
    reference = scenarios.run("schelling", seed=SEED, replicates=3, write=False, **config)
    chunked = scenarios.run(
        "schelling", seed=SEED, replicates=3, out=tmp_path / "c", checkpoint_every=1, **config
    )
    pd.testing.assert_frame_equal(_frame(chunked), _frame(reference))
    out = tmp_path / "k"
    killed_in_process(monkeypatch, "schelling", 2, out, config, replicates=3)
    same_run(
        scenarios.run(
            "schelling", seed=SEED, replicates=3, resume=out, checkpoint_every=1, config=config
        ),
        chunked,
        out,
    )


def test_llm_agents_need_a_prompt() -> None:
    import jax.numpy as jnp

    from society.study import Discrete, Study

    class Quiet(Study):
        actions = Discrete(("stay", "move"), rule=lambda o, p: 0)
        reporters = {"moved": lambda w, out: w.mean()}

        def init(key, p):
            return jnp.zeros(p.population)

        def step(key, w, act, p):
            return w + act, None

    assert (
        scenarios.run(Quiet, write=False, population=4, steps=2).summary["metrics"]["moved"]["mean"]
        == 0
    )
    with pytest.raises(ConfigError, match="has no prompt"):
        scenarios.run(Quiet, write=False, agents="llm", population=4, steps=1)


def test_a_study_runs_through_the_cli(tmp_path: Path, capsys) -> None:
    out = tmp_path / "cli"
    code = main(
        [
            "run",
            STUDY,
            "--set",
            "steps=4",
            "--set",
            "population=30",
            "--set",
            "agents=rules",
            "--out",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["scenario"] == "boltzmann"
    assert np.isfinite(summary["metrics"]["gini"]["mean"])


def test_each_kind_decides_at_its_own_rate_and_holds_its_choice(monkeypatch) -> None:
    """act_every: rule agents deciding every 3 steps hold the choice made at t=0, 3, 6
    (a, b, a); learned agents deciding every 2 steps are one call at t=0, 2, 4, 6."""
    b = lambda r: r.metrics.query("metric == 'b'").sort_values("time")["value"].tolist()  # noqa: E731
    run = partial(scenarios.run, Alternator, seed=1, write=False, population=6, steps=7)
    assert b(run()) == [0, 1, 0, 1, 0, 1, 0]
    assert b(run(act_every="rules:3")) == [0, 0, 0, 1, 1, 1, 0]
    calls: list[int] = []
    act = LearnedCohort.act
    monkeypatch.setattr(LearnedCohort, "act", lambda s, *a: calls.append(len(a[0])) or act(s, *a))
    run(agents="mixed", split="rules:1,learned:1", act_every="learned:2")
    assert calls == [3] * 4
    with pytest.raises(ConfigError, match="act_every: steps of 'llm' must be an integer >= 1"):
        run(act_every="llm:0.5")


class Countdown(Study):
    """Counts steps; done once the count reaches ``end`` (never with ``until='steps'``)."""

    class Params(StudyParams):
        end: int = 6
        until: str = "end"

    stop_every = 4
    reporters = {"x": lambda w, out: w}

    def init(key, p):
        return jnp.float32(0)

    def step(key, w, act, p):
        return w + 1, None

    def stop(w, p):
        return w >= p.end if p.until == "end" else None


def test_a_run_stops_where_every_replicate_is_done(tmp_path: Path) -> None:
    """stop: checked every stop_every steps (4): done at 6, the run ends at 8, wherever the
    checkpoints cut it; a stop that returns None never ends a run."""
    times = lambda r: sorted(r.metrics["time"].unique().tolist())  # noqa: E731
    run = partial(scenarios.run, Countdown, seed=1, replicates=2, steps=100)
    done = run(write=False)
    assert times(done) == list(range(1, 9)) and done.summary["metrics"]["x"]["values"] == [8, 8]
    chunked = run(out=tmp_path / "c", checkpoint_every=3)
    pd.testing.assert_frame_equal(_frame(chunked), _frame(done))
    assert times(run(write=False, until="steps")) == list(range(1, 101))
    assert times(run(write=False, end=200)) == list(range(1, 101))


class Tally(Study):
    """A sparse scalar reporter (NaN on odd steps: no row) and one by kind (NaN: no row)."""

    labels = {"kind": str}
    reporters = {
        "even": lambda w, out: jnp.where(w % 2 == 0, w, jnp.nan),
        "by": lambda w, out: jnp.array([w, jnp.nan, 2 * w]),
    }
    axes = {"by": ("kind",)}
    axis_labels = {"kind": ("a", "b", "c")}
    sparse = headline = ("even",)

    def init(key, p):
        return jnp.float32(0)

    def step(key, w, act, p):
        return w + 1, None


def test_rows_of_sparse_and_labelled_reporters_are_one_call_in_step_order(
    tmp_path: Path, monkeypatch
) -> None:
    """Scalar and labelled reporters' rows go to the recorder in one call per chunk, step by
    step, NaN values making no rows; a run in chunks of one step gives the same rows in the
    same order."""
    from sim_core.recorder import Recorder

    calls: list[int] = []
    record = Recorder.record
    monkeypatch.setattr(
        Recorder, "record", lambda s, *a, **k: calls.append(1) or record(s, *a, **k)
    )
    whole = scenarios.run(Tally, seed=1, replicates=2, write=False, steps=4)
    assert len(calls) == 1
    m = whole.metrics
    assert not m["value"].isna().any()
    assert m["time"].tolist() == sorted(m["time"]) and m.query("metric == 'even'")[
        "time"
    ].tolist() == [2, 2, 4, 4]
    assert m.query("metric == 'even'")["kind"].isna().all()
    assert m.query("metric == 'by' and time == 1")["kind"].tolist() == ["a", "c", "a", "c"]
    chunked = scenarios.run(Tally, seed=1, replicates=2, out=tmp_path / "c", checkpoint_every=1, steps=4)  # fmt: skip
    pd.testing.assert_frame_equal(chunked.metrics.reset_index(drop=True), m.reset_index(drop=True))


def test_llm_agents_asked_the_same_draw_as_many_replies_as_samples() -> None:
    """cohort_options' {"llm": {"samples": k}}: the agents of a replicate asked the same
    prompt draw k replies (one call with n = k), agent a sample a mod k; default one."""
    base = scenarios.get(STUDY)

    class Sampled(base):
        def cohort_options(p):
            return {"llm": {"samples": 3}}

    srv = TestServer(reply=coins_reply).start_in_thread()
    try:
        kw = {"llm": "openai/test-model", "api_base": srv.url + "/v1", "write": False}
        for study, n in ((base, 1), (Sampled, 3)):
            before = srv.requests
            scenarios.run(study, seed=1, agents="llm", population=6, steps=1, **kw)
            bodies = srv.bodies[before:]  # step 0: every agent has one coin, one prompt
            assert len(bodies) == 1 and int(bodies[0].get("n") or 1) == n
    finally:
        srv.stop()


def test_a_long_sweep_in_one_process_keeps_a_bounded_number_of_compiled_functions(
    monkeypatch,
) -> None:
    """Every compiled executable holds memory maps, and a Linux process may have 65,530: the
    memo of compiled functions drops the least recently used parameters, and a dropped point
    compiles again to the same rows."""
    monkeypatch.setattr(society.study, "_COMPILED", OrderedDict())
    monkeypatch.setattr(society.study, "_COMPILED_MAX", 8)

    def run(population: int):
        return scenarios.run(
            STUDY, seed=3, replicates=1, write=False, agents="rules", population=population, steps=3
        )

    first = run(10)
    for population in range(11, 17):
        run(population)
        assert len(society.study._COMPILED) <= 8
    assert all(json.loads(key[1])["population"] != 10 for key in society.study._COMPILED)
    pd.testing.assert_frame_equal(_frame(first), _frame(run(10)))


class Weak(Study):
    """A world whose initial leaf is weakly typed (``jnp.full(n, -1)``); a step makes it strong."""

    reporters = {"x": lambda w, out: w.sum()}

    def init(key, p):
        return jnp.full(3, -1)

    def step(key, w, act, p):
        return w + jnp.ones(3, jnp.int32), None


def test_chunks_compile_once_whatever_the_types_of_the_first_world(tmp_path: Path) -> None:
    """The initial world is strongly typed, so a run in chunks of one step calls one compiled
    chunk for the first world and every later one (a weakly typed first world compiled it twice)."""
    run = scenarios.run(Weak, seed=1, replicates=2, out=tmp_path / "c", checkpoint_every=1, steps=3)
    assert run.summary["metrics"]["x"]["values"] == [6, 6]
    chunk = Weak()._compiled(Weak.Params(steps=3), "chunk", 1)
    assert chunk._cache_size() == 1


class Begin(Alternator):
    """Alternator with its step count recorded from the initial world on (``initial``)."""

    reporters = {**Alternator.reporters, "t": lambda w, out: w}
    initial = ("t",)


def test_initial_rows_are_the_initial_worlds_whatever_the_path(tmp_path: Path) -> None:
    """A reporter named in ``initial`` has a row at time 0, the initial world's, in a whole
    compiled run, in checkpointed chunks and moment by moment with cohorts: the same rows."""
    run = partial(scenarios.run, Begin, seed=1, replicates=2, population=4, steps=3)
    whole = run(write=False, agents="rules")
    m = whole.metrics.query("metric == 't'")
    assert (
        m["time"].tolist() == [0, 0, 1, 1, 2, 2, 3, 3] and m["value"].tolist() == m["time"].tolist()
    )
    assert not whole.metrics.query("metric == 'b'")["time"].isin([0]).any()
    for other in (run(out=tmp_path / "c", checkpoint_every=1, agents="rules"),
                  run(write=False, agents="mixed", split="rules:1")):  # fmt: skip
        pd.testing.assert_frame_equal(_frame(other), _frame(whole))


class Listeners(Cohort):
    """LLM agents of a study's own that call no model: after each step they add the steps done
    to the world's ``heard`` (``after``)."""

    is_async = True

    async def aact(self, agents, obs, key):
        return np.zeros(len(agents), np.int32)

    async def after(self, world, t):
        return {"heard": world["heard"] + t}

    async def settle(self):
        pass

    def close(self):
        pass


class Heard(Alternator):
    reporters = {"heard": lambda w, out: w["heard"]}

    def init(key, p):
        return {"t": jnp.int32(0), "heard": jnp.float32(0)}

    def observe(w, p):
        return {"t": jnp.full(p.population, w["t"], jnp.float32)}

    def step(key, w, act, p):
        return {**w, "t": w["t"] + 1}, act.astype(jnp.float32)

    def llm_cohort(agents, client, p, ctx, r):
        return Listeners("llm", agents)


def test_a_study_s_own_llm_agents_change_the_world_after_each_step(
    tmp_path: Path, monkeypatch
) -> None:
    """``llm_cohort``'s cohort sees the world before the first step and after each (``after``),
    its entries replace the world's before the reporters read it: after t steps ``heard`` is
    0 + 1 + ... + t. Killed after a checkpoint, the run resumes to the same rows."""
    config = {"agents": "mixed", "split": "rules:1,llm:1", "population": 4, "steps": 5}
    srv = TestServer(reply=coins_reply).start_in_thread()
    try:
        kw = {"llm": "openai/test-model", "api_base": srv.url + "/v1"}
        reference = scenarios.run(Heard, seed=SEED, write=False, **kw, **config)
        m = reference.metrics.query("metric == 'heard'")
        assert m["value"].tolist() == [t * (t + 1) / 2 for t in range(1, 6)]
        out = tmp_path / "run"
        killed_in_process(monkeypatch, Heard, 2, out, config, **kw)
        same_run(scenarios.run(Heard, seed=SEED, resume=out, config=config, **kw), reference, out)
    finally:
        srv.stop()


class Learners(Study):
    """Learned agents paid 1 for b: they learn to choose b."""

    actions = Discrete(("a", "b"))
    reporters = {"b": lambda w, out: out["b"].mean()}
    reward = "gain"  # the outcome's entry

    def init(key, p):
        return jnp.int32(0)

    def observe(w, p):
        return {"t": jnp.full(p.population, w, jnp.float32)}

    def step(key, w, act, p):
        b = act.astype(jnp.float32)
        return w + 1, {"b": b, "gain": b}


class LearnersByFunction(Learners):
    def reward(w, out, p):
        return out["gain"]


def test_a_reward_named_by_its_outcome_entry_is_that_entry() -> None:
    runs = [
        scenarios.run(S, seed=SEED, write=False, agents="learned", population=32, steps=60)
        for S in (Learners, LearnersByFunction)
    ]
    pd.testing.assert_frame_equal(runs[0].metrics, runs[1].metrics)
    b = runs[0].metrics.query("metric == 'b'").sort_values("time")["value"].to_numpy()
    # 32 agents from a coin flip: the first steps' share of b is near 0.5 (sd 0.09); paid for b,
    # the policies move towards it by the end (a margin of 0.15, past two sds of the start)
    assert b[-10:].mean() > b[:5].mean() + 0.15, b
