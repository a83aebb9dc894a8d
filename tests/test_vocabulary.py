"""One vocabulary across scenarios (issue 14): every registered config shares the same
fields through the mixins of society.fields, and old names are refused with one line
that names the new one."""

import pytest

import scenarios
from sim_core.errors import ConfigError
from society.fields import (
    RENAMED,
    SHARED_MIXINS,
    LearningFields,
    LLMFields,
    ModelAgentsParams,
    ModelParams,
    PopulationFields,
)

SHARED = {
    name for mixin in SHARED_MIXINS for name in mixin.model_fields
}  # agents, split, population, learning_rate, llm_temperature, llm_max_tokens, llm_budget_tokens


@pytest.mark.parametrize("name", scenarios.names())
def test_every_config_inherits_the_shared_fields(name):
    cls = scenarios.config_class(name)
    if issubclass(cls, ModelAgentsParams):  # a model's size sets the number of agents
        assert SHARED - set(cls.model_fields) == {"population"} and "steps" in cls.model_fields
        return
    if issubclass(cls, ModelParams):  # a model whose agents follow its own rules (Mesa's)
        assert "steps" in cls.model_fields and not SHARED & set(cls.model_fields)
        return
    assert (
        issubclass(cls, PopulationFields)
        and issubclass(cls, LearningFields)
        and issubclass(cls, LLMFields)
    )
    assert SHARED <= set(cls.model_fields)
    # A scenario may change a default, not the meaning: the kinds and value types are the mixins'.
    assert (
        cls.model_fields["agents"].annotation == PopulationFields.model_fields["agents"].annotation
    )
    assert cls.model_fields["population"].annotation is int
    assert cls.model_fields["learning_rate"].annotation is float
    assert "steps" in cls.model_fields


@pytest.mark.parametrize("name", scenarios.names())
def test_old_names_are_refused_naming_the_new_one(name):
    fields = scenarios.config_class(name).model_fields
    for old, new in RENAMED.items():
        if old in fields:
            continue
        with pytest.raises(ConfigError) as err:
            scenarios.run(name, write=False, **{old: 1})
        assert str(err.value) == f"parameter '{old}' is now called '{new}'"


@pytest.mark.parametrize("value", [400, "400", 1e3])
def test_a_number_for_agents_points_to_population(value):
    with pytest.raises(
        ConfigError, match=r"'agents' is the kind of agent .* the number of agents is 'population'"
    ):
        scenarios.run("network-game", write=False, agents=value)


def test_the_cli_refuses_an_old_name_in_one_line(capsys, tmp_path):
    from society.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["run", "network-game", "--set", "lr=0.1", "--out", str(tmp_path / "run")])
    assert exit_.value.code != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'lr' is now called 'learning_rate'" in err


@pytest.mark.parametrize("name", scenarios.names())
def test_every_parameter_has_a_meaning_on_one_line(name):
    """`society describe` prints one line a parameter: its description, or the docstring
    under the field (wrapped over lines in the source, one line here)."""
    for field, info in scenarios.config_class(name).model_fields.items():
        assert info.description and "\n" not in info.description, (name, field)


def test_a_user_study_documents_parameters_with_docstrings(tmp_path):
    study = tmp_path / "doc_study.py"
    study.write_text(
        "from pydantic import Field\n"
        "from society.study import ModelParams, Study\n\n\n"
        "class Doc(Study):\n"
        "    class Params(ModelParams):\n"
        "        width: int = Field(10, ge=1)\n"
        '        """grid width,\n        in cells"""\n\n'
        "        height: int = Field(10, ge=1, description='grid height')\n"
        '        """not read: description= wins"""\n\n'
        "    def init(key, p):\n"
        "        return 0\n\n"
        "    def step(key, w, actions, p):\n"
        "        return w, 0\n"
    )
    rows = {r["name"]: r["description"] for r in scenarios.describe(f"{study}:Doc")}
    assert rows["width"] == "grid width, in cells" and rows["height"] == "grid height"


def test_the_packages_import_in_one_direction():
    """docs/architecture.md: sim_core imports neither society nor scenarios; society imports no
    study, only society.registry looks the built-in table up by name."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for package, banned in (("sim_core", {"society", "scenarios"}), ("society", {"scenarios"})):
        for path in (root / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            names |= {
                n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
            }
            used = {name.split(".")[0] for name in names} & banned
            allowed = {"scenarios"} if path == root / "society" / "registry.py" else set()
            assert used <= allowed, (path, used)


def test_parameters_out_of_order_are_refused_naming_both_sides():
    with pytest.raises(ConfigError, match=r"theta_init \(0\.9\) must be <= theta_max \(0\.5\)"):
        scenarios.run(
            "division-of-labour", write=False, theta_min=0.1, theta_init=0.9, theta_max=0.5
        )
    with pytest.raises(ConfigError, match=r"average_from \(50\) must be <= steps \(20\)"):
        scenarios.run("network-game", write=False, steps=20, average_from=50)
    scenarios.config_class("network-game")(average_from=None)  # None: not compared
