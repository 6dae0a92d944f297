"""Task classes: a weighted mixture of kinds of task, each the world with some
sections changed and, optionally, its own model priced at its own prices."""

from __future__ import annotations

import pytest
from stats_helpers import within
from worldkit import QUIET, Z, simulate

from sim.bad_input import InputError
from sim.harness.params import Prices
from sim.scenario.model import validate
from sim.world.params import WorldParams

CLASSES = [
    {"name": "short", "weight": 3, "tokens": {"prefix": 13000},
     "difficulty": {"distribution": "fixed", "steps": 3}},
    {"name": "long", "weight": 1, "tokens": {"prefix": 16000, "output": 50},
     "difficulty": {"distribution": "fixed", "steps": 9}, "model": "small-model"},
]


def raw(classes=CLASSES, **harness):
    return {"harness": {"prices": "seed001", "detector": {"enabled": False},
                        "model_prices": {"small-model": {"input": 1.0, "output": 2.0,
                                                         "cache_read": 0.1,
                                                         "cache_write": 1.25}},
                        **harness},
            "world": {"policy": QUIET, "classes": classes}}


def test_classes_take_their_shares_and_their_own_sizes():
    """Runs are of each class in proportion to its weight (binomial
    tolerance); a run's first prompt, need and output are its class's."""
    n = 1200
    records, tasks = simulate(raw(), n)
    kinds = [t.log[0].prompt_tokens for t in tasks]
    assert set(kinds) == {13000, 16000}
    assert within(kinds.count(16000) / n, 0.25, n, z=Z)
    for r, t in zip(records, tasks, strict=True):
        long = t.log[0].prompt_tokens == 16000
        assert r.steps == (9 if long else 3)
        assert {c.output_tokens for c in t.log} == ({50} if long else {600})


def test_a_class_changes_only_the_fields_it_gives():
    """A class's section keeps the world's other fields; its task statement is
    its prefix less the world's stable prefix."""
    world = WorldParams(policy={"talk": 0.0, "transient": 0.2},
                        classes=[{"name": "a", "policy": {"validation": 0.1},
                                  "tokens": {"prefix": 14000}}])
    (a,) = world.class_worlds
    assert (a.policy.transient, a.policy.validation) == (0.2, 0.1)
    assert a.tokens.output == world.tokens.output
    assert a.tokens.task == 14000 - (12000 - 300)


def test_a_class_model_is_priced_at_its_prices():
    """Runs of the class that names a model are priced at that model's prices,
    the others at the harness's (seed 001's $3 / $15 per million tokens)."""
    records, tasks = simulate(raw(), 200)
    small, seed = Prices(1.0, 2.0, 0.1, 1.25), Prices(3.0, 15.0, 0.3, 3.75)
    for r, t in zip(records, tasks, strict=True):
        prices = small if t.log[0].prompt_tokens == 16000 else seed
        assert r.cost_usd == pytest.approx(prices.cost(r.input_tokens, r.output_tokens), 1e-12)


@pytest.mark.parametrize(("classes", "match"), [
    ([{"name": "a", "tool_weights": {"nope": 1.0}}], "unknown tools"),
    ([{"name": "a", "tokens": {"prefix": 500}}], "stable prefix"),
    ([{"name": "a"}, {"name": "a"}], "unique"),
    ([{"name": "a", "weight": 0}], "positive weight"),
])
def test_invalid_classes_are_input_errors(classes, match):
    """Bad classes are clear InputErrors naming what is wrong."""
    with pytest.raises(InputError, match=match):
        validate(raw(classes), "test.yaml")


def test_a_class_model_without_prices_needs_the_catalogue():
    """A class's model that is neither in the catalogue nor priced in
    harness.model_prices is an InputError at harness.model_prices."""
    classes = [{"name": "a", "model": "no-such-model-xyz"}]
    with pytest.raises(InputError) as info:
        validate(raw(classes), "test.yaml")
    assert info.value.path == "harness.model_prices.no-such-model-xyz"


def test_talk_needs_a_conversation():
    """Messages to a task-giver without the harness's conversation mode are refused."""
    bad = {"world": {"classes": [{"name": "a", "policy": {"talk": 0.2}}]}}
    with pytest.raises(InputError) as info:
        validate(bad, "test.yaml")
    assert info.value.path == "world.classes[0].policy.talk"


def test_des_with_unlimited_capacity_equals_direct_for_classes_and_conversations():
    """A classed, conversational world with drawn sizes, replies that take
    time, errors limits and persistent faults: the DES engine with unlimited
    capacity gives every task the same record as the direct engine."""
    from sim.engines.des import DesEngine, arrival_schedule
    from sim.engines.direct import run_tasks
    from sim.sweeps.cells import build_cell, cells_of

    world = {"policy": {**QUIET, "talk": 0.3, "validation": 0.1, "self_end": 0.2},
             "user": {"give_up": 0.05, "reply": {"distribution": "gamma", "shape": 2,
                                                  "scale": 30},
                      "latency": {"median_s": 4.0, "sigma": 0.5}},
             "faults": {"persistent": 0.01},
             "tokens": {"output": {"distribution": "lognormal", "median": 60, "sigma": 0.8},
                        "run_scale": {"distribution": "lognormal", "median": 1, "sigma": 0.3}},
             "classes": CLASSES}
    doc = raw(conversation={"enabled": True}, budgets={"tool_errors": 3})
    doc["world"] = world
    doc.update(engine="des", tasks=150, des={"tenants": [{"name": "a", "rate_per_hour": 600}]})
    scenario = validate(doc, "test.yaml")
    cell = build_cell(cells_of(scenario)[0])
    direct = run_tasks(cell, range(150))
    arrivals = arrival_schedule(scenario.des, 150, cell.seed)
    des = DesEngine(cell, scenario.des, arrivals).run().records
    for d, s in zip(direct, des, strict=True):
        assert (s.outcome, s.steps, s.input_tokens, s.output_tokens, s.cost_usd) == (
            d.outcome, d.steps, d.input_tokens, d.output_tokens, d.cost_usd)
        assert s.wall_s == pytest.approx(d.wall_s, rel=1e-9, abs=1e-9)
    assert {"succeeded:user_stop" if d.reason == "user_stop" else d.outcome
            for d in direct} >= {"succeeded:user_stop", "budget_exhausted:errors"}
