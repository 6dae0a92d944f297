"""A run's final answer sized apart from its messages to the task-giver
(``world.tokens.final_output``): the world draws a claim that the task is
done from ``final_output`` and a message from ``answer_output``, and
calibration sizes final answers apart only when a likelihood-ratio test
says they differ (sim/calibration/estimate.py, ``final_answers``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from sim.calibration.build import scenario_document
from sim.calibration.data import load
from sim.calibration.estimate import FINAL_MIN, estimate, final_answers
from sim.cli import main
from sim.engines.direct import run_task_with_world
from sim.scenario.model import validate
from sim.sweeps.cells import build_cell, cells_of
from sim.world.call_log import RecordingTask
from sim.world.streams import StreamPool

ALPHA = 1e-4
Z = float(stats.norm.ppf(1 - ALPHA / 2))
HARNESS = {"model": "claude-sonnet-4-20250514",
           "prices": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
           "max_output_tokens": 8192, "budgets": {"steps": 60},
           "detector": {"enabled": False}, "retry": {"retry_tool_errors": False},
           "conversation": {"enabled": True}}


def _world(answer, final) -> dict:
    tokens: dict = {"prefix": 4000, "task": 200, "output": 30, "answer_output": answer}
    if final is not None:
        tokens["final_output"] = final
    return {
        "difficulty": {"distribution": "lognormal", "mu": 1.8, "sigma": 0.45, "min": 1},
        "policy": {"loop": 0.0, "transient": 0.0, "validation": 0.0, "premature": 0.0,
                   "talk": 0.3, "self_end": 1.0},
        "tools": [{"name": "lookup", "weight": 1, "definition_tokens": 0,
                   "result_tokens": {"distribution": "lognormal", "median": 120, "sigma": 0.5},
                   "duration": {"median_s": 0.2, "sigma": 0.3}}],
        "tokens": tokens,
        "user": {"reply": {"distribution": "lognormal", "median": 35, "sigma": 0.5}},
        "latency": {"ttft_s": 0.4, "decode_tps": 80.0}}


def test_a_claim_is_sized_by_final_output_and_a_message_by_answer_output():
    """Sizes fixed, messages 200 tokens and final answers 12: every run's last
    call (the model ends the conversation itself: ``self_end`` 1) has 12
    output tokens and every other call without tool calls 200; without
    ``final_output`` both are 200."""
    for final, last in ((12, 12), (None, 200)):
        doc = {"name": "final", "harness": HARNESS, "world": _world(200, final),
               "tasks": 50, "seed": 3}
        cell = build_cell(cells_of(validate(doc, "final"))[0])
        pool = StreamPool()
        finals, messages = set(), set()
        for i in range(50):
            _, task = run_task_with_world(cell, i, pool, task_type=RecordingTask)
            text = [c.output_tokens for c in task.log if not c.tool_calls]
            assert task.log[-1].tool_calls == 0
            finals.add(text[-1])
            messages.update(text[:-1])
        assert finals == {last} and messages == {200}, (final, finals, messages)


def _traces(tmp_path, final, seed: int):
    answer = {"distribution": "lognormal", "median": 90, "sigma": 0.5}
    doc = {"name": "known-final", "tasks": 400, "seed": seed, "harness": HARNESS,
           "world": _world(answer, final)}
    scenario = tmp_path / "known.yaml"
    scenario.write_text(yaml.safe_dump(doc), encoding="utf-8")
    out = tmp_path / "runs"
    assert main(["run", str(scenario), "--traces", "--out", str(out), "--quiet",
                 "--workers", "1"]) == 0
    return load(out)


def test_calibration_sizes_final_answers_apart_when_they_differ(tmp_path):
    """Final answers lognormal of median 15 and log-sd 0.4, messages median 90
    and log-sd 0.5: the fitted world has a ``final_output`` whose log median
    is within ``Z`` standard errors (``0.4 / sqrt(n)``, n final answers) of
    log 15, and messages' ``answer_output`` within ``Z`` of log 90."""
    traces = _traces(tmp_path, {"distribution": "lognormal", "median": 15, "sigma": 0.4}, 21)
    est = estimate(traces, np.array(["all"] * traces.n, dtype=object))
    c = est.classes[0]
    assert c.output_final is not None
    calls = traces.calls
    final = calls["text"].to_numpy(bool) & calls["last"].to_numpy(bool)
    n_final, n_msg = int(final.sum()), int((calls["text"].to_numpy(bool) & ~final).sum())
    assert abs(math.log(c.output_final.median) - math.log(15)) <= Z * 0.4 / math.sqrt(n_final)
    assert abs(math.log(c.output_text.median) - math.log(90)) <= Z * 0.5 / math.sqrt(n_msg)
    doc, _ = scenario_document(est, name="fitted", description="", tasks=10, seed=0)
    assert doc["world"]["tokens"]["final_output"]["median"] == round(c.output_final.median, 6)
    validate(doc, "fitted")


def test_final_answers_drawn_as_messages_are_not_sized_apart(tmp_path):
    """No ``final_output`` (final answers drawn as messages are): the test does
    not size them apart, or its fitted medians agree within ``Z`` standard
    errors."""
    traces = _traces(tmp_path, None, 22)
    est = estimate(traces, np.array(["all"] * traces.n, dtype=object))
    c = est.classes[0]
    if c.output_final is None:
        return
    calls = traces.calls
    n_final = int((calls["text"].to_numpy(bool) & calls["last"].to_numpy(bool)).sum())
    assert abs(math.log(c.output_final.median / c.output_text.median)) <= Z * 0.5 * math.sqrt(
        2 / n_final)


def test_too_few_final_answers_are_never_sized_apart():
    """Fewer than ``FINAL_MIN`` runs: no split, however different the sizes."""
    rows = []
    for r in range(FINAL_MIN - 1):
        rows += [(f"r{r}", 500.0, True, False)] * 3 + [(f"r{r}", 5.0, True, True)]
    calls = pd.DataFrame(rows, columns=["run_id", "output", "text", "last"])
    mask, _ = final_answers(calls, np.ones(len(calls)), 0.0)
    assert mask is None
