"""Several models in one folder: when their runs differ, ``tune`` recommends
per model (``models/<model>.yaml`` each, one headline each at the top);
when they do not, one recommendation for all with the test as its reason."""

from __future__ import annotations

import json
from dataclasses import replace

from test_tune_headline import _run

from sim.cli import main
from sim.traces.writer import write_runs
from sim.tuning.models import split_by_model


def _folder(tmp_path, b_calls: int, b_count: int = 30):
    """Model gpt-4o: 30 successes of 3 calls and 3 failures of 40; model
    'b/long': ``b_count`` successes of ``b_calls`` calls."""
    runs = [_run(i, 3, True) for i in range(30)] + [_run(30 + i, 40, False) for i in range(3)]
    for i in range(b_count):
        r = _run(100 + i, b_calls, True)
        r.model = "b/long"
        r.calls = [replace(c, model="b/long") for c in r.calls]
        runs.append(r)
    folder = tmp_path / f"traces_{b_calls}_{b_count}"
    folder.mkdir()
    write_runs(folder, runs)
    return folder


def test_models_whose_runs_differ_get_a_recommendation_each(tmp_path, capsys):
    """gpt-4o's runs are 3 or 40 calls, b/long's 12: the test says they
    differ; the top of stdout says so and gives each model's headline; each
    model's block is in models/<model>.yaml and tune.json's per_model, and
    each was tuned on its own runs only (33 and 30)."""
    traces = _folder(tmp_path, 12)
    out = tmp_path / "out"
    status = main(["tune", str(traces), "--knobs", "steps", "--out", str(out), "--quiet"])
    printed = capsys.readouterr().out
    assert status in (0, 3)
    lines = printed.splitlines()
    assert lines[0].startswith("Per model: 2 models whose runs differ (Kruskal-Wallis")
    assert lines[1].startswith("  gpt-4o: ") and lines[2].startswith("  b/long: ")
    assert lines[3] == "All models pooled:"
    assert sorted(p.name for p in (out / "models").iterdir()) == ["b_long.yaml", "gpt-4o.yaml"]
    summary = json.loads((out / "tune.json").read_text())
    assert {m: v["runs"] for m, v in summary["per_model"].items()} == {"gpt-4o": 33,
                                                                      "b/long": 30}
    assert "b/long" in (out / "models" / "b_long.yaml").read_text()


def test_models_whose_runs_do_not_differ_share_one_recommendation(tmp_path):
    """b/long's runs drawn like gpt-4o's (3 calls, and 3 of 40): no
    difference, one recommendation, the reason given; a model of fewer than
    5 runs is named and left to the pooled answer."""
    traces = _folder(tmp_path, 3, 30)
    split = split_by_model(traces)
    assert not split.differ and split.models == ("gpt-4o", "b/long")
    assert "do not differ" in split.reason and "safe for all" in split.reason
    few = _folder(tmp_path, 12, 4)
    split = split_by_model(few)
    assert not split.differ and split.few == ("b/long",)


def test_pooled_gives_one_answer_for_all(tmp_path, capsys):
    """--pooled: no per-model search, no models/ folder."""
    traces = _folder(tmp_path, 12)
    out = tmp_path / "out"
    assert main(["tune", str(traces), "--knobs", "steps", "--pooled", "--out", str(out),
                 "--quiet"]) in (0, 3)
    assert not capsys.readouterr().out.startswith("Per model")
    assert not (out / "models").exists()
    assert json.loads((out / "tune.json").read_text())["per_model"] == {}
