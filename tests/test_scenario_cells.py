"""Sweep cells derived from the validated scenario (sim.scenario.grid):
the same cells as validating the whole document with the value set, and the
same errors, for every field of the shipped scenarios."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from sim.bad_input import InputError
from sim.scenario.dotted import set_dotted
from sim.scenario.grid import expand
from sim.scenario.loading import read_yaml
from sim.scenario.schema import Scenario, strict
from sim.scenario.validation import validate

ROOT = Path(__file__).resolve().parents[1]
FILES = ["bounded.yaml", "capacity.yaml", "cached.yaml", "naive.yaml"]


def _leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items()
                for leaf in _leaves(item, f"{path}.{key}" if path else key)]
    return [(path, value)]


def _changed(value: Any) -> Any:
    """Another value of the same type (it may break a bound: then both ways fail)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 0.5 if value else 0.25
    return value


def _whole(scenario: Scenario, values: tuple[tuple[str, Any], ...]) -> Scenario:
    """The cell the long way: the scenario dumped, the values set, all validated."""
    raw = scenario.model_dump(mode="json", exclude={"sweep"})
    for path, value in values:
        set_dotted(raw, path, value, "test")
    return strict(raw)


def _load(name: str) -> tuple[dict[str, Any], Scenario]:
    raw = read_yaml(ROOT / "scenarios" / name)
    return raw, validate(copy.deepcopy(raw), name)


@pytest.mark.parametrize("name", FILES)
def test_every_field_swept_gives_the_cell_validating_the_whole_would(name: str) -> None:
    _, base = _load(name)
    checked = 0
    for path, value in _leaves(base.model_dump(mode="json", exclude={"sweep"})):
        if path.split(".")[0] in ("tasks", "name", "description"):
            continue
        for new in {repr(v): v for v in (value, _changed(value))}.values():
            try:
                cell = expand(base.model_copy(update={"sweep": {path: [new]}}))[0][1]
            except InputError:
                with pytest.raises(Exception):  # noqa: B017 - pydantic's or ours
                    _whole(base, ((path, new),))
                continue
            assert cell == _whole(base, ((path, new),)), path
            assert cell.model_dump(mode="json") == _whole(base, ((path, new),)).model_dump(
                mode="json"), path
            checked += 1
    assert checked > 50  # the file's fields were really swept


def test_a_cell_changes_only_its_fields_and_keeps_what_the_file_set() -> None:
    _, base = _load("bounded.yaml")
    swept = base.model_copy(update={"sweep": {"harness.budgets.steps": [7, 9],
                                              "world.policy.talk": [0.0]}})
    cells = expand(swept)
    assert [c.harness.budgets.steps for _, c, _ in cells] == [7, 9]
    for _, cell, _ in cells:
        assert cell.sweep == {}
        assert cell.world.model_fields_set == base.world.model_fields_set | {"policy"}
        assert cell.harness.retry is base.harness.retry  # untouched sections are shared
        assert cell.model_copy(update={"harness": base.harness, "world": base.world}) == \
            base.model_copy(update={"sweep": {}})


@pytest.mark.parametrize(("sweep", "path", "words"), [
    ({"harness.budgets.steps": [5, -1]}, "harness.budgets.steps",
     "in the sweep cell harness.budgets.steps=-1: Input should be greater than 0 (got -1)"),
    ({"harness.budgets.steps": [True]}, "harness.budgets.steps", "valid integer"),
    ({"harness.budgets.nope": [1]}, "harness.budgets.nope", "unknown field"),
    ({"harness.temperature": [9.0], "harness.budgets.steps": [-1]}, "harness.temperature",
     "less than or equal to 2 (got 9.0); also harness.budgets.steps: Input should be "
     "greater than 0"),
    ({"harness.model.x": [1]}, "harness.model", "is not a mapping, cannot set 'harness.model.x'"),
    ({"world.difficulty.distribution": ["gamma"]}, "world.difficulty",
     "does not match any of the expected tags"),
    ({"world.approval.delay.mean_s": [1]}, "world.approval.delay",  # a section's own check
     "mean_s applies to exponential durations, not lognormal"),
    ({"harness" + ".x" * 32: [1]}, "harness" + ".x" * 32, "nests deeper than 32 levels"),
])
def test_a_bad_sweep_value_names_the_cell_and_the_field(sweep: dict[str, Any], path: str,
                                                        words: str) -> None:
    raw, _ = _load("bounded.yaml")
    with pytest.raises(InputError) as caught:
        validate({**raw, "sweep": sweep}, "bounded.yaml")
    assert caught.value.path == path
    assert words in caught.value.message


def test_a_field_of_an_unset_section_is_validated_as_the_section() -> None:
    raw, _ = _load("bounded.yaml")
    raw["harness"] = {k: v for k, v in raw.get("harness", {}).items() if k != "prices"}
    cells = expand(validate({**raw, "sweep": {"harness.prices.input": [1.5, 2.5]}}, "b.yaml"))
    assert [c.harness.prices.input for _, c, _ in cells] == [1.5, 2.5]
    with pytest.raises(InputError) as caught:
        validate({**raw, "sweep": {"harness.prices.input": [-2.0]}}, "b.yaml")
    assert caught.value.path == "harness.prices"  # a union: pydantic's words for each member
    assert ("Input should be a valid string (got {'input': -2.0}); also harness.prices.input: "
            "Input should be greater than or equal to 0 (got -2.0)") in caught.value.message
