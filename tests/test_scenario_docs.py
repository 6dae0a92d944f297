"""scenarios/README.md documents every scenario field, generated from the models.

The field reference between ``<!-- fields:start -->`` and ``<!-- fields:end -->``
must equal what :mod:`sim.scenario.docs` generates now, so it cannot go stale:
after changing a field, run ``python -m sim.scenario.docs --write``. The
hand-written part above it is checked too: its YAML examples are valid
scenarios, it names every registered component and the outcome labels, and
what it says about naive.yaml and bounded.yaml is what those files hold.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

import sim.scenario.docs as docs
from sim.bad_input import InputError
from sim.scenario.model import Scenario, load_scenario, validate
from sim.world.distributions import KINDS, BaseDistribution
from sim.world.params import PolicyParams, WorldParams
from sim.world.verifiers import VERIFIERS

REPO = Path(__file__).resolve().parents[1]
README = REPO / "scenarios" / "README.md"


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def prose(readme) -> str:
    """The hand-written part of the README (above the generated reference)."""
    return readme[:readme.index(docs.START)]


# ------------------------------------------------------------- the reference
def test_readme_field_reference_is_what_the_models_generate(readme):
    """The README's generated part equals the generator's output now."""
    assert docs.generated_part(readme) == docs.reference(), (
        "scenarios/README.md is stale: run python -m sim.scenario.docs --write")


def _fields(model: type) -> list[tuple[str, object, bool]]:
    """``(key, annotation, documented elsewhere)`` of a pydantic model's or a
    harness parameter dataclass's fields (a dataclass field by its alias)."""
    if issubclass(model, BaseModel):
        return [(name, info.annotation, isinstance(info.json_schema_extra, dict)
                 and "see" in info.json_schema_extra)
                for name, info in model.model_fields.items()]
    hints = typing.get_type_hints(model)
    return [(f.metadata.get("alias", f.name), hints[f.name], False)
            for f in dataclasses.fields(model) if f.init]


def _leaf_paths(model: type, prefix: str = "") -> set[str]:
    """Every dotted path of ``model`` (an independent walk: nested models and
    parameter dataclasses through unions, ``[]`` for list entries, a recursive
    type once), except inside distributions and inside fields that point to
    where their model is documented (``see``); at the top level, the fields of
    every kind of distribution under ``<distribution>``."""
    paths = set()
    for name, annotation, see in _fields(model):
        path = f"{prefix}{name}"
        paths.add(path)
        if see:
            continue
        many = typing.get_origin(annotation) in (tuple, list)
        stack = [annotation]
        while stack:
            a = stack.pop()
            if (isinstance(a, type) and issubclass(a, BaseDistribution)) or a is model:
                continue
            if isinstance(a, type) and (issubclass(a, BaseModel) or dataclasses.is_dataclass(a)):
                paths |= _leaf_paths(a, f"{path}[]." if many else f"{path}.")
            elif typing.get_origin(a) is not dict:
                stack.extend(typing.get_args(a))
    if not prefix and model is Scenario:
        for kind in KINDS.values():
            paths |= _leaf_paths(kind, f"{docs.DISTRIBUTION_PATH}.")
    return paths


def test_every_field_has_a_row_with_type_default_and_description():
    """Each dotted path of Scenario (and every model it nests) has a row, and
    every row has a type, a default (or 'required') and a description."""
    rows = docs.field_docs()
    assert {r.path for r in rows} == _leaf_paths(Scenario)
    for row in rows:
        assert row.type and row.default and row.description, row


def _yaml_scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):  # quoted when YAML would not read it back (``#`` comments)
        return value if value and yaml.safe_load(value) == value else f'"{value}"'
    return repr(value)


def _at(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part, None) if obj is not None else None
    return obj


def test_defaults_are_the_defaults_a_scenario_gets():
    """Each scalar default shown is the value of that path in a scenario of
    defaults, including defaults set by an enclosing default (the approval
    delay's median is 120 s, not the class's 1 s). Shapes a default does not
    take (``distribution: fixed``), mappings that are null by default, list
    entries and the distributions show class defaults."""
    defaults = Scenario()
    checked = 0
    for section in docs.sections():
        if "[]" in section.path or section.path == docs.DISTRIBUTION_PATH:
            continue
        if section.path and _at(defaults, section.path) is None:
            continue  # a mapping absent by default (null): its rows show class defaults
        if section.variant.startswith("`"):
            key, _, value = section.variant.strip("`").partition(": ")
            if str(getattr(_at(defaults, section.path), key)) != value:
                continue
        for row in section.fields:
            if not row.default.startswith("`"):
                continue
            value = _at(defaults, row.path)
            if isinstance(value, BaseModel | tuple | dict):
                continue
            assert row.default == f"`{_yaml_scalar(value)}`", row
            checked += 1
    assert checked > 50
    shown = {r.path: r for r in docs.field_docs()}
    assert shown["world.approval.delay.median_s"].default == "`120.0`"
    assert shown["world.policy.loop"].default == f"`{PolicyParams().loop!r}`"


def test_constraints_and_allowed_values_are_shown():
    """Bounds appear as intervals or inequalities, literals as their values."""
    shown = {r.path: r for r in docs.field_docs()}
    assert shown["world.policy.loop"].allowed == "[0, 1]"
    assert shown["harness.budgets.steps"].allowed == "> 0"
    assert shown["tasks"].allowed == "[1, 1000000]"
    assert shown["world.tools[].effect"].allowed == (
        "`read`, `reversible_write`, `external`, `irreversible`")
    assert shown["world.tools"].allowed == "at least 1 item"


def test_shapes_and_list_entries_get_their_own_sections():
    """Each shape of world.difficulty has a section; world.tools[] documents a
    new entry and lists the default tools."""
    sections = docs.sections()
    difficulty = typing.get_args(WorldParams.model_fields["difficulty"].annotation)
    shapes = {s.variant for s in sections if s.path == "world.difficulty"}
    assert shapes == {f"`distribution: {m.model_fields['distribution'].default}`"
                      for m in difficulty}
    (tools,) = [s for s in sections if s.path == "world.tools[]"]
    names = [yaml.safe_load(e)["name"] for e in tools.entries]
    assert names == [t.name for t in WorldParams().tools]


# ------------------------------------------------------------ the command
def test_module_prints_the_reference(capsys):
    """``python -m sim.scenario.docs`` prints the reference."""
    assert docs.main([]) == 0
    assert capsys.readouterr().out == docs.reference() + "\n"


def test_check_and_write_keep_a_readme_current(tmp_path, readme, capsys):
    """--check passes on a current README and fails (1) on a stale one;
    --write restores it byte for byte, and writing again changes nothing."""
    copy = tmp_path / "README.md"
    copy.write_text(readme, encoding="utf-8")
    assert docs.main(["--check", "--readme", str(copy)]) == 0
    stale = readme.replace("| `tasks` |", "| `taskz` |")
    assert stale != readme
    copy.write_text(stale, encoding="utf-8")
    assert docs.main(["--check", "--readme", str(copy)]) == 1
    assert "--write" in capsys.readouterr().err
    assert docs.main(["--write", "--readme", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == readme
    assert docs.main(["--write", "--readme", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == readme


def test_markers_are_required(tmp_path, capsys):
    """A README without both markers, in order, is an error (status 2)."""
    copy = tmp_path / "README.md"
    copy.write_text(f"# x\n{docs.END}\n{docs.START}\n", encoding="utf-8")
    assert docs.main(["--check", "--readme", str(copy)]) == 2
    assert "markers" in capsys.readouterr().err
    with pytest.raises(ValueError):
        docs.generated_part("no markers")
    text = f"head\n{docs.START}\nold\n{docs.END}\ntail\n"
    assert docs.splice(text, "new") == f"head\n{docs.START}\nnew\n{docs.END}\ntail\n"
    assert docs.generated_part(docs.splice(text, "new")) == "new"


# ----------------------------------------------------------- the prose part
def test_yaml_examples_in_the_readme_are_valid_scenarios(prose):
    """Every ```yaml block of the hand-written part validates as a scenario;
    the one naming components by import path only with plugins allowed."""
    blocks = re.findall(r"```yaml\n(.*?)```", prose, flags=re.S)
    assert len(blocks) >= 3
    for block in blocks:
        raw = yaml.safe_load(block)
        if ":" in str(raw.get("harness", {}).get("detector", {}).get("name", "")):
            with pytest.raises(InputError, match="--allow-plugins"):
                validate(raw, "scenarios/README.md")
        validate(raw, "scenarios/README.md", allow_plugins=True)


def test_readme_names_components_outcomes_and_markers(prose):
    """The prose names every registered verifier (and none), the default
    detector, the import-path form and DESIGN.md's outcome labels."""
    for name in ["none", "default", *VERIFIERS]:
        assert f"`{name}`" in prose, name
    assert "package.module:Class" in prose
    for label in ("succeeded", "false_success", "needs_human:no_progress",
                  "budget_exhausted:<budget>", "`tokens`", "failed:<reason>",
                  "`context_overflow`", "cancelled:<reason>", "`approval_timeout`"):
        assert label in prose, label
    assert "--set" in prose and "sweep" in prose and "--allow-plugins" in prose


def test_seed_001_scenarios_hold_what_the_readme_says():
    """naive.yaml and bounded.yaml use seed 001's world (the defaults) at
    10,000 tasks and seed 7, with the harness settings the README lists."""
    naive = load_scenario(REPO / "scenarios" / "naive.yaml")
    bounded = load_scenario(REPO / "scenarios" / "bounded.yaml")
    for s in (naive, bounded):
        assert s.world == WorldParams()
        assert (s.tasks, s.seed, s.harness.prices) == (10_000, 7, "seed001")
        assert s.harness.context_window == 200_000
    world = WorldParams()
    assert (world.difficulty.mu, world.difficulty.sigma, world.difficulty.min) == (2.3, 0.6, 3)
    p = world.policy
    assert (p.loop, p.transient, p.validation, p.premature, p.premature_after,
            p.escape_after_nudge) == (0.015, 0.08, 0.04, 0.03, 0.5, 0.5)
    assert world.retry_success == 0.9
    assert (world.tokens.prefix, world.tokens.output, world.tokens.tool_result) == (
        12_000, 600, 900)
    h = naive.harness
    assert all(v is None for v in dataclasses.asdict(h.budgets).values())
    assert not h.detector.enabled and not h.retry.retry_tool_errors
    assert not h.context.emergency_compaction and h.verifier.name == "none"
    h = bounded.harness
    assert (h.budgets.tokens, h.budgets.steps) == (2_000_000, 50)
    assert (h.detector.name, h.detector.repeat_threshold, h.detector.nudges) == ("default", 3, 1)
    assert h.retry.tool_max_attempts == 1 and h.verifier.name == "oracle"
