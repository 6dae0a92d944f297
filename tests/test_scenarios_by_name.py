"""Scenarios by name (sim.scenario.catalog): the built-in scenarios are
package data, ``sim scenarios`` lists them one line each, a path that exists
wins over a name, the user's own folders ($SIM_SCENARIOS, ./scenarios,
``[tool.sim] scenarios``) are searched before the built-in ones, and a name
that is not found is one line with the closest names."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import sim.cli
from sim.bad_input import InputError
from sim.scenario import catalog
from sim.scenario.model import load_scenario

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """A working folder outside the repository, with no user scenarios."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIM_SCENARIOS", raising=False)
    return tmp_path


def test_every_documented_scenario_ships_as_package_data():
    """sim/scenarios holds the files of scenarios/ (the link the package data
    is read through), and pyproject.toml's package data includes them."""
    folder = catalog.builtin_folder()
    assert sorted(p.stem for p in folder.glob("*.yaml")) == BUILTIN and BUILTIN
    for name in BUILTIN:
        assert (folder / f"{name}.yaml").read_bytes() == \
            (ROOT / "scenarios" / f"{name}.yaml").read_bytes()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = config["tool"]["setuptools"]["package-data"]["sim"]
    assert "scenarios/*.yaml" in data


@pytest.mark.parametrize("spelling", ["bounded", "bounded.yaml", "scenarios/bounded.yaml"])
def test_a_builtin_scenario_loads_by_name_from_any_folder(spelling, elsewhere):
    """``bounded``, ``bounded.yaml`` and the documented ``scenarios/bounded.yaml``
    all load the built-in file from a folder that has none of them."""
    scenario = load_scenario(spelling)
    assert scenario.name == "bounded" and scenario.tasks == 10000


def test_a_path_that_exists_wins_over_the_builtin_name(elsewhere):
    """A ``bounded.yaml`` here (or a file named ``bounded``) is the one loaded."""
    (elsewhere / "bounded.yaml").write_text("name: mine\ntasks: 7\n", encoding="utf-8")
    assert load_scenario("bounded.yaml").name == "mine"
    assert load_scenario("bounded").name == "mine"  # the folder here is searched first
    (elsewhere / "scenarios").mkdir()
    (elsewhere / "scenarios" / "naive.yaml").write_text("name: my_naive\n", encoding="utf-8")
    assert load_scenario("scenarios/naive.yaml").name == "my_naive"
    assert load_scenario("naive").name == "my_naive"


def test_user_folders_are_searched_and_listed(elsewhere, tmp_path_factory, monkeypatch, capsys):
    """A calibrated world in a $SIM_SCENARIOS folder or a ``[tool.sim]
    scenarios`` folder runs by name and is listed by ``sim scenarios``."""
    worlds = tmp_path_factory.mktemp("worlds")
    (worlds / "fitted.yaml").write_text("# My fitted world. Second sentence.\ntasks: 3\n",
                                        encoding="utf-8")
    monkeypatch.setenv("SIM_SCENARIOS", str(worlds))
    assert load_scenario("fitted").tasks == 3
    project = elsewhere / "proj"
    (project / "sub").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.sim]\nscenarios = ["mine"]\n',
                                            encoding="utf-8")
    (project / "mine").mkdir()
    (project / "mine" / "local.yaml").write_text("# Local world.\ntasks: 4\n",
                                                 encoding="utf-8")
    monkeypatch.chdir(project / "sub")
    assert load_scenario("local").tasks == 4
    assert sim.cli.main(["scenarios"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == ["fitted", "local", *BUILTIN]
    assert "My fitted world." in lines[0] and "Second" not in lines[0]


def test_sim_scenarios_lists_each_builtin_once_with_its_header(elsewhere, capsys):
    """One line per built-in scenario: its name and its header's first sentence."""
    assert sim.cli.main(["scenarios"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == BUILTIN
    assert all(len(line.split(None, 1)) == 2 for line in lines)


def test_an_unknown_name_says_what_is_close_and_where_to_look(elsewhere):
    """A misspelt name: one InputError naming it, the closest names and
    ``sim scenarios``."""
    with pytest.raises(InputError) as caught:
        load_scenario("bouned")
    text = str(caught.value)
    assert text.startswith("bouned: ") and "did you mean bounded" in text
    assert "sim scenarios" in text and "\n" not in text


def test_a_bad_tool_sim_key_is_one_error_with_a_suggestion(elsewhere, capsys):
    """``[tool.sim] scenario = ...`` (a typo) is exit 2 naming the key."""
    (elsewhere / "pyproject.toml").write_text('[tool.sim]\nscenario = "x"\n', encoding="utf-8")
    assert sim.cli.main(["scenarios"]) == 2
    err = capsys.readouterr().err
    assert "tool.sim.scenario" in err and "did you mean 'scenarios'" in err


def test_sim_out_and_tool_sim_out_set_the_default_results_folder(elsewhere, monkeypatch):
    """Without --out, results go under $SIM_OUT, else ``[tool.sim] out``
    (relative to its pyproject.toml), else ``reports``."""
    from sim.api.simulating import results_folder

    assert results_folder("x") == Path("reports") / "x"
    (elsewhere / "pyproject.toml").write_text('[tool.sim]\nout = "results"\n', encoding="utf-8")
    assert results_folder("x") == elsewhere.resolve() / "results" / "x"
    monkeypatch.setenv("SIM_OUT", str(elsewhere / "env"))
    assert results_folder("x") == elsewhere / "env" / "x"
    assert results_folder("x", out="given") == Path("given")


def test_a_name_too_long_for_the_system_is_one_error_not_a_traceback(elsewhere, monkeypatch,
                                                                     capsys):
    """A scenario argument of 300 characters (past the 255 a name may have)
    is refused as a path no file can have (exit 2, one line naming the bound);
    so is a ``$SIM_SCENARIOS`` folder of 300, naming the variable, for ``run``
    and ``scenarios`` alike. (``[tool.sim] scenarios`` is validated where it
    is read, in sim/scenario/project.py.)"""
    long = "n" * 300
    assert sim.cli.main(["run", long, "--tasks", "1", "--quiet"]) == 2
    assert sim.cli.main(["run", f"{long}.yaml", "--tasks", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("at most 255") == 2
    assert len(err.strip().splitlines()) == 2
    monkeypatch.setenv("SIM_SCENARIOS", str(elsewhere / long))
    assert sim.cli.main(["run", "bounded", "--tasks", "1", "--quiet"]) == 2
    assert sim.cli.main(["scenarios"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("$SIM_SCENARIOS") == 2
