"""The scenario calibration writes is YAML from the YAML library, and trace
data cannot leave a comment (issue 25, item 4).

A model name is trace data: with a line break in it (``\\n``, ``\\r``, YAML's
NEL, LS and PS) followed by ``sweep:`` it once added a top-level ``sweep``
naming a plugin to the written scenario. Now the document is dumped by
``yaml.safe_dump`` and each comment is one escaped line.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from sim.calibration.build import _Dumper, comment_text, render_yaml, scenario_document
from sim.calibration.data import load
from sim.calibration.estimate import estimate
from sim.cli import main

EVIL = [f"gpt{sep}sweep: {{plugin: evil.module}}" for sep in
        ("\n", "\r", "\r\n", "\x85", "\u2028", "\u2029")]


@pytest.mark.parametrize("name", EVIL)
def test_a_model_name_with_a_line_break_stays_data(name):
    """The name as a key, a value and in comments and the header: the text
    loads as exactly the document (no top-level ``sweep``), and every line
    that is not the document's is a comment."""
    doc = {"name": "x", "harness": {"model": name, "model_prices": {name: {"input": 1.0}}},
           "world": {"classes": [{"name": name, "weight": 1.0, "model": name}]}}
    comments = {"harness.model": f"mostly {name}", f"world.classes[{name}]": name,
                f"world.classes[{name}].model": name, "harness.model_prices": name}
    text = render_yaml(doc, comments, [f"fitted to {name}", "", f"  {name}"])
    loaded = yaml.safe_load(text)
    assert loaded == doc and "sweep" not in loaded
    comment_lines = [line for line in text.split("\n") if line.lstrip().startswith("#")]
    body = [line for line in text.split("\n") if not line.lstrip().startswith("#")]
    dumped = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=10 ** 9,
                       allow_unicode=False)
    assert "\n".join(body) == dumped  # the comment lines are the only additions
    assert len(comment_lines) >= 3 + 3  # the header, and comments on the block keys
    assert text.isascii()


def test_comment_text_escapes_every_line_break():
    """No character str.splitlines or YAML treats as a line break survives."""
    for sep in ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"):
        out = comment_text(f"a{sep}b")
        assert len(out.splitlines()) == 1 and sep not in out


def test_a_calibrated_scenario_of_traces_naming_such_a_model(tmp_path):
    """Traces whose model names carry a newline and ``sweep:``: the written
    scenario (estimates, document, comments) loads with the name as data."""
    known = {"name": "k", "tasks": 30, "seed": 1,
             "harness": {"model": "claude-sonnet-4-20250514", "verifier": {"name": "none"},
                         "detector": {"enabled": False}},
             "world": {"difficulty": {"distribution": "lognormal", "mu": 1.5, "sigma": 0.3,
                                      "min": 1}}}
    scenario = tmp_path / "k.yaml"
    scenario.write_text(yaml.safe_dump(known), encoding="utf-8")
    runs = tmp_path / "runs"
    assert main(["run", str(scenario), "--traces", "--out", str(runs), "--quiet",
                 "--workers", "1"]) == 0
    evil = EVIL[0]
    for file in ("runs.parquet", "calls.parquet"):
        table = pq.read_table(runs / file)
        i = table.schema.get_field_index("model")
        column = pa.array([evil] * table.num_rows, type=table.schema.field(i).type)
        pq.write_table(table.set_column(i, table.schema.field(i), column), runs / file)
    traces = load(runs)
    est = estimate(traces, np.array(["all"] * traces.n, dtype=object))
    doc, comments = scenario_document(est, name="fitted", description=f"of {evil}",
                                      tasks=10, seed=0)
    assert any(evil in c for c in comments.values())
    text = render_yaml(doc, comments, [f"fitted to {evil}"])
    loaded = yaml.safe_load(text)
    assert "sweep" not in loaded and loaded["harness"]["model"] == evil
    assert loaded == doc
