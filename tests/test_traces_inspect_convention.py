"""How an Inspect AI log's ``input_tokens`` are read (sim/traces/inspect_log.py):
including the cache read before inspect_ai 0.3.184 for the OpenAI-style
providers, excluding it since (and always for Anthropic), ``total_tokens``
deciding against the recorded version, each run saying which convention it
was read with. The logs are written by inspect_ai itself (its ``mockllm``
model answering with the usage given), then their header's recorded
inspect_ai version and the model's provider are set as an older Inspect, or
another provider, would have written them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="needs the 'inspect' extra (pip install 'sim[inspect]')")
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate

from sim.traces import import_traces, read_traces
from sim.traces.inspect_log import (
    EXCLUDES,
    EXCLUDES_BY_TOTAL,
    GOOGLE_UNRECORDED,
    INCLUDES,
    INCLUDES_BY_TOTAL,
    parse_version,
    runs,
)
from sim.traces.model import DERIVED, PROVENANCE_FIELDS, UNKNOWN

MOCK = "mockllm/model"


def write_log(folder: Path, usage: ModelUsage | None, *, version: str | None,
              model: str) -> Path:
    """A one-sample, one-call JSON log written by inspect_ai, its recorded
    inspect_ai version set to ``version`` (removed when None) and its model
    (the eval's and the model event's) to ``model``; ``usage`` None: the
    model event's output records none (mockllm would count it itself)."""
    output = ModelOutput.from_content(model=MOCK, content="3")
    output.usage = usage or ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    task = Task(dataset=[Sample(input="What is 1+2?", target="3", id="s")],
                solver=[generate()], scorer=match())
    [log] = inspect_eval(task, model=get_model(MOCK, custom_outputs=[output]),
                         log_dir=str(folder / "eval"), display="none")
    path = folder / "log.json"
    write_eval_log(read_eval_log(log.location), str(path), format="json")
    doc = json.loads(path.read_text())
    if version is None:
        doc["eval"]["packages"].pop("inspect_ai")
    else:
        doc["eval"]["packages"]["inspect_ai"] = version
    doc["eval"]["model"] = model
    for sample in doc["samples"]:
        for event in sample["events"]:
            if event.get("event") == "model":
                event["model"] = model
                if usage is None:
                    event["output"]["usage"] = None
    path.write_text(json.dumps(doc))
    return path


def only_run(path: Path):
    [record] = list(runs(path, str(path), "json"))
    return record


# the 0.3.95 log: OpenAI reported the prompt (15,235) with its cache read (9,088) in it
OPENAI_OLD = ModelUsage(input_tokens=15_235, output_tokens=420, total_tokens=15_655,
                        input_tokens_cache_read=9_088, reasoning_tokens=64)


def test_an_old_openai_log_has_its_cache_subtracted_from_the_input(tmp_path):
    """inspect_ai 0.3.95, openai/: input 15,235 included the 9,088 cached, so
    the uncached input is 6,147 (derived) and the prompt stays 15,235, not
    24,323; output 420 includes reasoning 64 (356, derived)."""
    path = write_log(tmp_path, OPENAI_OLD, version="0.3.95", model="openai/gpt-4o")
    record = only_run(path)
    [call] = record.calls
    assert (call.usage.input_tokens, call.usage.cache_read_tokens,
            call.usage.cache_write_tokens) == (6_147, 9_088, 0)
    assert call.usage.prompt_tokens == 15_235
    assert (call.usage.output_tokens, call.usage.thinking_tokens) == (356, 64)
    assert call.provenance == {"input_tokens": DERIVED, "output_tokens": DERIVED}
    assert record.conventions == {"input_tokens": INCLUDES}
    import_traces([path], tmp_path / "out")
    _, calls = read_traces(tmp_path / "out")
    assert calls["input_tokens"].tolist() == [6_147]
    assert calls["cache_read_tokens"].tolist() == [9_088]


def test_an_old_anthropic_log_is_read_as_recorded(tmp_path):
    """inspect_ai 0.3.95, anthropic/: Anthropic's parts were always apart
    (total = 1,000 + 9,000 + 500 + 300), so nothing is subtracted."""
    usage = ModelUsage(input_tokens=1_000, output_tokens=300, total_tokens=10_800,
                       input_tokens_cache_read=9_000, input_tokens_cache_write=500)
    record = only_run(write_log(tmp_path, usage, version="0.3.95",
                                model="anthropic/claude-sonnet-4-5"))
    [call] = record.calls
    assert (call.usage.input_tokens, call.usage.cache_read_tokens,
            call.usage.cache_write_tokens, call.usage.output_tokens) == (1_000, 9_000, 500, 300)
    assert call.usage.prompt_tokens == 10_500
    assert call.provenance == {}
    assert record.conventions == {"input_tokens": EXCLUDES}


def test_a_new_openai_log_is_read_as_recorded(tmp_path):
    """inspect_ai 0.3.184 and later exclude the cache for OpenAI too
    (total 6,147 + 9,088 + 420)."""
    usage = ModelUsage(input_tokens=6_147, output_tokens=420, total_tokens=15_655,
                       input_tokens_cache_read=9_088)
    record = only_run(write_log(tmp_path, usage, version="0.3.184", model="openai/gpt-4o"))
    [call] = record.calls
    assert (call.usage.input_tokens, call.usage.cache_read_tokens) == (6_147, 9_088)
    assert "input_tokens" not in call.provenance
    assert record.conventions == {"input_tokens": EXCLUDES}


def test_the_total_decides_when_it_disagrees_with_a_new_version(tmp_path):
    """A log recorded as 0.3.200 whose total (15,655) is input + output: the
    input included the cache; the arithmetic wins and the run says so."""
    usage = ModelUsage(input_tokens=15_235, output_tokens=420, total_tokens=15_655,
                       input_tokens_cache_read=9_088)
    record = only_run(write_log(tmp_path, usage, version="0.3.200", model="openai/gpt-4o"))
    [call] = record.calls
    assert call.usage.input_tokens == 6_147 and call.provenance["input_tokens"] == DERIVED
    assert record.conventions == {"input_tokens": INCLUDES_BY_TOTAL}


def test_the_total_decides_when_it_disagrees_with_an_old_version(tmp_path):
    """A log recorded as 0.3.95 for openai/ whose total (15,655) is input +
    cache + output: the input excluded the cache; nothing is subtracted."""
    usage = ModelUsage(input_tokens=6_147, output_tokens=420, total_tokens=15_655,
                       input_tokens_cache_read=9_088)
    record = only_run(write_log(tmp_path, usage, version="0.3.95", model="openai/gpt-4o"))
    [call] = record.calls
    assert call.usage.input_tokens == 6_147 and "input_tokens" not in call.provenance
    assert record.conventions == {"input_tokens": EXCLUDES_BY_TOTAL}


def test_a_log_without_a_recorded_version_is_read_as_today(tmp_path):
    """No ``packages.inspect_ai`` and a total that cannot tell (no total):
    today's convention, nothing subtracted."""
    usage = ModelUsage(input_tokens=1_000, output_tokens=10, input_tokens_cache_read=400)
    record = only_run(write_log(tmp_path, usage, version=None, model="openai/gpt-4o"))
    [call] = record.calls
    assert call.usage.input_tokens == 1_000
    assert record.conventions == {"input_tokens": EXCLUDES}


def test_an_old_google_log_has_its_cache_read_unknown(tmp_path):
    """Before inspect_ai 0.3.208 Google's usage recorded no cache: the cache
    read is unknown (its 0 not a count), the input as recorded."""
    usage = ModelUsage(input_tokens=2_000, output_tokens=50, total_tokens=2_050)
    record = only_run(write_log(tmp_path, usage, version="0.3.150",
                                model="google/gemini-2.5-pro"))
    [call] = record.calls
    assert call.usage.input_tokens == 2_000
    assert call.provenance == {"cache_read_tokens": UNKNOWN}
    assert record.conventions == {"input_tokens": GOOGLE_UNRECORDED}


def test_a_call_without_usage_is_kept_with_its_counts_unknown(tmp_path):
    """A model event whose output records no usage: the run is kept, the
    call's counts 0 and every provenance unknown; no convention to report."""
    path = write_log(tmp_path, None, version="0.3.95", model="openai/gpt-4o")
    record = only_run(path)
    [call] = record.calls
    assert call.usage.prompt_tokens == 0 and call.usage.output_tokens == 0
    assert call.provenance == dict.fromkeys(PROVENANCE_FIELDS, UNKNOWN)
    assert record.conventions == {}
    report = import_traces([path], tmp_path / "out")
    assert report.runs == 1 and report.skips == []


def test_versions_are_read_from_their_leading_numbers():
    assert parse_version("0.3.95") == (0, 3, 95) < (0, 3, 184)
    assert parse_version("0.3.184.dev12+gabcdef") == (0, 3, 184)
    assert parse_version("") is None and parse_version(None) is None


def test_an_old_eval_archive_is_read_by_its_recorded_version_too(tmp_path):
    """The same 0.3.95 OpenAI call in an ``.eval`` archive (rewritten with
    inspect_ai's own reader and writer): the header's version decides there
    as in a JSON log (6,147 uncached of the 15,235 prompt)."""
    output = ModelOutput.from_content(model=MOCK, content="3")
    output.usage = OPENAI_OLD
    task = Task(dataset=[Sample(input="What is 1+2?", target="3", id="s")],
                solver=[generate()], scorer=match())
    [written] = inspect_eval(task, model=get_model(MOCK, custom_outputs=[output]),
                             log_dir=str(tmp_path / "eval"), display="none")
    log = read_eval_log(written.location)
    log.eval.packages["inspect_ai"] = "0.3.95"
    log.eval.model = "openai/gpt-4o"
    for sample in log.samples or []:
        for event in sample.events:
            if event.event == "model":
                event.model = "openai/gpt-4o"
    path = tmp_path / "old.eval"
    write_eval_log(log, str(path), format="eval")
    assert read_eval_log(str(path), header_only=True).eval.packages["inspect_ai"] == "0.3.95"
    [record] = list(runs(path, str(path), "eval"))
    [call] = record.calls
    assert (call.usage.input_tokens, call.usage.cache_read_tokens) == (6_147, 9_088)
    assert record.conventions == {"input_tokens": INCLUDES}
