"""society scale: one fresh process per (size, steps), the table, the plot and the exponent."""

from __future__ import annotations

import json
import math
import textwrap

import pandas as pd
import pytest

import scenarios
from sim_core.scale import COLUMNS, fit_exponent
from society.cli import main

TOY = textwrap.dedent(
    '''
    import numpy as np
    import pydantic
    from sim_core.experiment import Scenario

    class ToyConfig(pydantic.BaseModel):
        """A toy study whose work and memory grow with the population."""
        model_config = pydantic.ConfigDict(extra="forbid")
        population: int = pydantic.Field(10, ge=1)
        steps: int = pydantic.Field(5, ge=1)

    class Toy(Scenario):
        name = "toy"
        Config = ToyConfig
        def run(self, config, ctx):
            x = np.ones((config.population, 16))
            for _ in range(config.steps):
                x = np.sqrt(x + 1.0)
            ctx.recorder.record(config.steps, "llm_tokens", 3.0 * config.population * config.steps, replicate=-1)
            return {"mean": np.full(ctx.replicates, float(x.mean()))}
    '''
)


def test_fit_exponent():
    assert fit_exponent([10, 100, 1000], [2, 20, 200]) == pytest.approx(1.0)
    assert fit_exponent([10, 100], [5, 5]) == pytest.approx(0.0)
    assert math.isnan(fit_exponent([10], [1])) and math.isnan(fit_exponent([10, 100], [0, 1]))


def test_population_and_steps_fields():
    assert scenarios.population_field("network-game") == "population"
    assert scenarios.population_field("division-of-labour") == "population"
    assert scenarios.population_field("public-goods") == "population"
    assert scenarios.steps_field("network-game") == "steps"
    assert scenarios.steps_field("epidemic") == "steps"


def test_scale_table_plot_and_exponent(tmp_path, capsys):
    study = tmp_path / "toy.py"
    study.write_text(TOY)
    out = tmp_path / "scale"
    assert (
        main(
            ["scale", f"{study}:Toy", "--population", "1e3,2e4", "--steps", "3", "--out", str(out)]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "time exponent" in printed and "memory exponent" in printed
    table = pd.read_parquet(out / "scale.parquet")
    assert list(table.columns) == list(COLUMNS)
    assert table["population"].tolist() == [1000, 20000] and (table["status"] == "completed").all()
    assert (table["steps"] == 3).all() and (table["time_per_step_s"] > 0).all()
    assert table["marginal_time_per_step_s"].notna().all()
    assert (table["rss_peak_bytes"] > 10_000_000).all()  # a whole Python process with numpy
    assert (table["bytes_per_agent"] == table["rss_peak_bytes"] / table["population"]).all()
    assert table["llm_tokens_per_agent_step"].tolist() == pytest.approx([3.0, 3.0])
    assert pd.read_csv(out / "scale.csv")["population"].tolist() == [1000, 20000]
    assert (out / "scale.png").stat().st_size > 1000
    fitted = json.loads((out / "scale.json").read_text())
    assert math.isfinite(fitted["time_exponent"]) and math.isfinite(fitted["memory_exponent"])
    assert fitted["population_field"] == "population" and fitted["steps_field"] == "steps"


def test_scale_bad_input(tmp_path, capsys):
    study = tmp_path / "toy.py"
    study.write_text(TOY)
    for extra, message in (
        (["--population", "1e3,abc"], "--population"),
        (["--population", "100", "--set", "population=5"], "leave it out of --set"),
        (["--population", "100", "--set", "bogus=1"], "unknown parameter 'bogus'"),
        (["--population", "0.5"], "--population"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["scale", f"{study}:Toy", *extra, "--out", str(tmp_path / "never")])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and err.count("\n") == 1, err
    # Every built-in scenario has a 'population' field now: a study without one is asked for it.
    sized = tmp_path / "sized.py"
    sized.write_text(TOY.replace("population", "size"))
    with pytest.raises(SystemExit):
        main(["scale", f"{sized}:Toy", "--population", "10", "--out", str(tmp_path / "never")])
    assert "--population-field" in capsys.readouterr().err
