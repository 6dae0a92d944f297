"""``--set`` for a newcomer: a mistyped or refused override is blamed on the
override (``--set PATH=VALUE``, the dotted field and the closest valid field),
not on the scenario file; a whole-number part of a dotted path indexes a list
the scenario holds (``world.classes.0.weight``, or ``world.classes[0].weight``),
in ``--set``, in the API's overrides and in a sweep axis given by ``--set``."""

from __future__ import annotations

import pytest

from sim.api.scenarios import load_scenario as api_load
from sim.bad_input import InputError
from sim.cli import main
from sim.scenario.model import load_scenario
from sim.sweeps.cells import cells_of


def run_error(capsys, *argv: str) -> tuple[int, str]:
    status = main(["run", "bounded", "--tasks", "5", "--quiet", *argv])
    return status, capsys.readouterr().err.strip()


def test_a_mistyped_set_path_blames_the_set_and_names_the_closest_field(capsys, tmp_path):
    """Exit 2; the message begins with the override as typed, names the
    dotted path and suggests ``steps``; no line of the scenario file is
    blamed."""
    status, err = run_error(capsys, "--set", "harness.budgets.stepz=30",
                            "--out", str(tmp_path / "o"))
    assert status == 2
    assert err.startswith("error: --set harness.budgets.stepz=30: harness.budgets.stepz: "
                          "unknown field; did you mean 'steps'?")
    assert "(line " not in err
    assert not (tmp_path / "o").exists()


def test_a_refused_set_value_blames_the_set(capsys, tmp_path):
    """A value out of bounds: the override is named, with the field's bound."""
    status, err = run_error(capsys, "--set", "harness.budgets.steps=-3",
                            "--out", str(tmp_path / "o"))
    assert status == 2
    assert err.startswith("error: --set harness.budgets.steps=-3: harness.budgets.steps: "
                          "Input should be greater than 0")


def test_an_error_of_the_file_itself_still_blames_the_file(tmp_path):
    """A typo in the file, with an unrelated --set: the file and its line
    are named, not the override."""
    path = tmp_path / "typo.yaml"
    path.write_text("name: typo\ntasks: 10\nharness:\n  budgets:\n    stepz: 3\n")
    with pytest.raises(InputError) as caught:
        load_scenario(str(path), ["seed=4"])
    assert caught.value.source == str(path)
    assert caught.value.path == "harness.budgets.stepz"
    assert caught.value.line == 5


@pytest.mark.parametrize("path", ["world.classes.1.weight", "world.classes[1].weight"])
def test_a_list_index_in_a_set_path_changes_that_item_only(path):
    """tau2's second task class gets weight 0.5; every other class is as
    the file has it."""
    before = load_scenario("tau2")
    after = load_scenario("tau2", [f"{path}=0.5"])
    assert after.world.classes[1].weight == 0.5
    assert before.world.classes[1].weight != 0.5
    assert len(after.world.classes) == len(before.world.classes)
    for i in range(len(before.world.classes)):
        if i != 1:
            assert after.world.classes[i] == before.world.classes[i]


def test_a_nested_field_of_a_class_is_reachable_by_set():
    """``world.classes.0.policy.loop`` reaches the first class's policy."""
    after = load_scenario("tau2", ["world.classes.0.policy.loop=0.25"])
    assert after.world.classes[0].policy.loop == 0.25


def test_an_index_out_of_range_names_the_list_and_its_length():
    """An index past the end: exit-2 error on the override, with the count."""
    count = len(load_scenario("tau2").world.classes)
    with pytest.raises(InputError) as caught:
        load_scenario("tau2", [f"world.classes.{count}.weight=0.5"])
    assert caught.value.source == f"--set world.classes.{count}.weight=0.5"
    assert caught.value.path == "world.classes"
    assert f"has {count} item(s): index {count} is out of range" in caught.value.message


def test_an_index_into_a_list_the_scenario_does_not_set_is_refused():
    """bounded has no task classes: nothing to index, and nothing is made up."""
    with pytest.raises(InputError) as caught:
        load_scenario("bounded", ["world.classes.0.weight=0.5"])
    assert caught.value.source == "--set world.classes.0.weight=0.5"
    assert caught.value.path == "world.classes"
    assert "is not set, so it has no item 0" in caught.value.message


def test_a_field_name_after_a_list_is_refused_with_the_valid_indices():
    count = len(load_scenario("tau2").world.classes)
    with pytest.raises(InputError) as caught:
        load_scenario("tau2", ["world.classes.first.weight=0.5"])
    assert caught.value.path == "world.classes"
    assert f"(0 to {count - 1}), got 'first'" in caught.value.message


def test_a_sweep_axis_given_by_set_reaches_a_class_field():
    """``--set 'sweep={world.classes.0.policy.loop: [0.0, 0.05]}'``: two cells,
    each with its value in the first class and the second class untouched."""
    scenario = load_scenario("tau2", ["sweep={world.classes.0.policy.loop: [0.0, 0.05]}"])
    cells = cells_of(scenario)
    assert [c.name for c in cells] == ["loop=0.0", "loop=0.05"]
    assert [c.scenario.world.classes[0].policy.loop for c in cells] == [0.0, 0.05]
    assert cells[1].scenario.world.classes[1] == scenario.world.classes[1]


def test_a_sweep_of_a_harness_field_from_the_command_line(capsys, tmp_path):
    """The README's way to sweep a field without editing a file: two cells."""
    status = main(["sweep", "bounded", "--tasks", "20", "--quiet", "--format", "json",
                   "--set", "sweep={harness.budgets.steps: [10, 20]}",
                   "--out", str(tmp_path / "o")])
    import json

    cells = json.loads(capsys.readouterr().out)["cells"]
    assert status == 0
    assert [c["name"] for c in cells] == ["steps=10", "steps=20"]
    assert [c["steps"]["max"] <= limit for c, limit in zip(cells, (10, 20), strict=True)] == [
        True, True]


def test_an_api_override_typo_blames_the_override():
    """The API's dict of overrides: the override and the closest field named."""
    with pytest.raises(InputError) as caught:
        api_load("bounded", {"harness.budgets.stepz": 3})
    assert caught.value.source == "override harness.budgets.stepz=3"
    assert "did you mean 'steps'?" in caught.value.message
    assert api_load("tau2", {"world.classes.0.weight": 0.5}).world.classes[0].weight == 0.5
