"""One schema (issue 21): the harness's parameter dataclasses are the only
definition of its settings. A field added to one is validated (by the harness
and by the scenario schema, with errors naming the dotted field), documented
in the field reference and written in the report's settings sentence, with no
other edit; and no scenario field re-declares a harness field."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

import pytest
from pydantic import Field, ValidationError

from sim.harness import params as hp
from sim.harness.fields import ParameterError, spec
from sim.output.describe import budgets_text, settings_sentence
from sim.scenario import docs, messages, schema
from sim.scenario.model import HarnessConfig, Scenario, load_scenario


@dataclass(frozen=True, slots=True)
class BudgetsPlus(hp.Budgets):
    """The run budgets with one more (a temporary subclass: the new field)."""

    cache_tokens: int | None = field(default=None, metadata=spec(
        "cache-read tokens over all calls (tokens)", gt=0, report="{} cache-token budget"))
    cache_writes: int | None = field(default=None, metadata=spec(
        "cache-write tokens over all calls (tokens)", ge=0))  # no report phrase: by name


class HarnessPlus(HarnessConfig):
    budgets: BudgetsPlus = Field(default_factory=BudgetsPlus)


class ScenarioPlus(Scenario):
    harness: HarnessPlus = Field(default_factory=HarnessPlus)


def _errors(text: str) -> list[tuple[str, str]]:
    """The scenario's errors for the JSON document ``text``, as the CLI words
    them: (dotted path, message)."""
    with pytest.raises(ValidationError) as caught:
        ScenarioPlus.model_validate_json(text, strict=True)
    return [(messages.dotted(e), messages.problem(e)) for e in caught.value.errors()]


def test_a_new_harness_field_is_validated_by_the_harness_and_the_schema() -> None:
    """The field's bound, stated once in its metadata, holds in Python and in
    a scenario, where the error names ``harness.budgets.cache_tokens``; a
    valid value arrives in the dataclass the harness runs with."""
    with pytest.raises(ParameterError, match="cache_tokens"):
        BudgetsPlus(cache_tokens=0)
    assert _errors('{"harness": {"budgets": {"cache_tokens": 0}}}') == [
        ("harness.budgets.cache_tokens", "Input should be greater than 0 (got 0)")]
    (path, message), = _errors('{"harness": {"budgets": {"cache_tokens": true}}}')
    assert path == "harness.budgets.cache_tokens" and "integer" in message
    s = ScenarioPlus.model_validate_json('{"harness": {"budgets": {"cache_tokens": 5}}}',
                                         strict=True)
    assert s.harness.budgets == BudgetsPlus(cache_tokens=5)
    assert hp.HarnessParams(budgets=s.harness.budgets).budgets.cache_tokens == 5


def test_a_new_harness_field_is_documented() -> None:
    """The field reference has its row: type, default, bound and description."""
    rows = {r.path: r for r in docs.field_docs(ScenarioPlus)}
    row = rows["harness.budgets.cache_tokens"]
    assert (row.type, row.default, row.allowed, row.description) == (
        "integer or null", "`null`", "> 0", "cache-read tokens over all calls (tokens)")
    assert "harness.budgets.cache_tokens" not in {r.path for r in docs.field_docs()}


def test_a_new_harness_field_is_reported() -> None:
    """The settings sentence writes the set budget as its metadata says, and
    leaves it out when unset."""
    dump = ScenarioPlus.model_validate_json(
        '{"harness": {"budgets": {"cache_tokens": 500000, "steps": 40}}}',
        strict=True).model_dump(mode="json")
    assert budgets_text(dump["harness"]["budgets"], BudgetsPlus) == (
        "40-step budget, 500 k cache-token budget")
    assert budgets_text({"steps": 40}, BudgetsPlus) == "40-step budget"
    assert budgets_text({"cache_writes": 7}, BudgetsPlus) == "`cache_writes` 7"


def test_every_budget_of_a_scenario_is_in_its_report() -> None:
    """tau2.yaml's ``tool_errors: 10`` ends runs as budget_exhausted:errors, so
    its report says so (the budget names are no longer listed by hand)."""
    sentence = settings_sentence(load_scenario("scenarios/tau2.yaml").model_dump(mode="json"))
    assert "10 tool-error budget" in sentence and "100-step budget" in sentence
    for f in dataclasses.fields(hp.Budgets):
        assert f.metadata["report"].count("{}") == 1, f.name


SCENARIO_OWN = ("prices", "model_prices", "verifier")
"""Scenario fields named like a harness field but holding something else:
price specs resolved into ``Prices`` (the run's, other models'), and the
verifier component to build (its worst case becomes ``VerifierParams``)."""


def test_no_harness_field_is_declared_twice() -> None:
    """Each harness section of the scenario is the harness's dataclass (or a
    subclass adding only scenario fields), and each top-level harness setting
    takes its description and bounds from the dataclass field of that name."""
    params = {f.name: f for f in dataclasses.fields(hp.HarnessParams)}
    sections = 0
    for name, info in HarnessConfig.model_fields.items():
        if name not in params or name in SCENARIO_OWN:
            continue
        declared = typing.get_type_hints(hp.HarnessParams)[name]
        if dataclasses.is_dataclass(declared):
            assert issubclass(info.annotation, declared), name
            sections += 1
            continue
        meta = params[name].metadata
        assert info.description == meta["description"], name
        bounds = {k: getattr(m, k) for m in info.metadata for k in ("gt", "ge", "lt", "le")
                  if hasattr(m, k)}
        assert bounds == {k: meta[k] for k in ("gt", "ge", "lt", "le") if k in meta}, name
    assert sections == 6
    for f in dataclasses.fields(hp.Prices):
        if f.name in schema.PricesConfig.model_fields:
            assert schema.PricesConfig.model_fields[f.name].description == \
                f.metadata["description"]
