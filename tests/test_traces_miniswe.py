"""The mini-swe-agent importer (sim/traces/miniswe.py) on the three real
trajectories of shared/data/traces/mini-swe-agent/, laid out as the tool writes
them (RUN_DIR/INSTANCE/INSTANCE.traj.json) with a SWE-bench report beside them."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from traces_helpers import data_folder

from sim.traces import import_traces, read_traces

SAMPLES = ("marshmallow-code__marshmallow-1359", "pvlib__pvlib-python-1072",
           "pvlib__pvlib-python-1154")


def load(instance: str) -> dict:
    with gzip.open(data_folder("mini-swe-agent", f"{instance}.traj.json.gz")) as handle:
        return json.load(handle)


def lay_out(root: Path, docs: dict[str, dict], report: dict | None = None) -> Path:
    """RUN_DIR/INSTANCE/INSTANCE.traj.json, a report, preds.json and a log."""
    run_dir = root / "run1"
    for instance, doc in docs.items():
        (run_dir / instance).mkdir(parents=True)
        (run_dir / instance / f"{instance}.traj.json").write_text(json.dumps(doc))
    if report is not None:
        (run_dir / "deepseek.run1.json").write_text(json.dumps(report))
    (run_dir / "preds.json").write_text(json.dumps(
        {i: {"instance_id": i, "model_patch": "diff"} for i in docs}))
    (run_dir / "minisweagent.log").write_text("INFO: started\n")
    return run_dir


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    root = tmp_path_factory.mktemp("mini")
    docs = {i: load(i) for i in SAMPLES}
    report = {"resolved_ids": [SAMPLES[1]], "unresolved_ids": [SAMPLES[0]],
              "submitted_ids": list(SAMPLES)}
    lay_out(root, docs, report)
    out = root / "traces"
    result = import_traces([root], out)
    runs, calls = read_traces(out)
    return docs, result, runs, calls


def usage_sums(doc: dict) -> dict[str, int]:
    """What the file says, summed straight from the raw responses."""
    sums = dict.fromkeys(("prompt", "cached", "completion"), 0)
    for m in doc["messages"]:
        if m["role"] == "assistant":
            u = m["extra"]["response"]["usage"]
            sums["prompt"] += u["prompt_tokens"]
            sums["cached"] += u["prompt_tokens_details"]["cached_tokens"]
            sums["completion"] += u["completion_tokens"]
    return sums


def test_the_three_samples_import_with_the_steps_tokens_cost_and_exit_they_record(samples):
    docs, _, runs, _ = samples
    by_task = runs.set_index("task_id")
    for instance, doc in docs.items():
        row = by_task.loc[instance]
        info = doc["info"]
        sums = usage_sums(doc)
        assert row["run_id"] == f"run1/{instance}"
        assert row["steps"] == info["model_stats"]["api_calls"]
        assert row["cost_usd"] == pytest.approx(info["model_stats"]["instance_cost"], rel=1e-12)
        assert row["exit"] == info["exit_status"]
        assert row["input_tokens"] + row["cache_read_tokens"] == sums["prompt"]
        assert row["cache_read_tokens"] == sums["cached"]
        assert row["output_tokens"] + row["reasoning_tokens"] == sums["completion"]
        assert row["step_limit"] == info["config"]["agent"]["step_limit"]
        assert row["cost_limit_usd"] == info["config"]["agent"]["cost_limit"]
        assert row["model"] == info["config"]["model"]["model_name"]


def test_resolved_comes_from_the_swe_bench_report_beside_the_run(samples):
    _, result, runs, _ = samples
    resolved = dict(zip(runs["task_id"], runs["resolved"].tolist(), strict=True))
    assert resolved[SAMPLES[1]] is True
    assert resolved[SAMPLES[0]] is False
    assert pd.isna(resolved[SAMPLES[2]])  # not in the report's outcome lists: unknown
    assert len(result.companions) == 2  # the report and preds.json
    assert [Path(p).name for p in result.ignored] == ["minisweagent.log"]
    assert result.skips == []


def test_calls_carry_per_call_cost_times_and_tool_results(samples):
    docs, _, runs, calls = samples
    doc = docs[SAMPLES[0]]
    run_id = f"run1/{SAMPLES[0]}"
    mine = calls[calls["run_id"] == run_id].sort_values("call")
    assistants = [m for m in doc["messages"] if m["role"] == "assistant"]
    assert mine["cost_usd"].sum() == pytest.approx(doc["info"]["model_stats"]["instance_cost"])
    assert mine["cost_usd"].tolist() == pytest.approx([m["extra"]["cost"] for m in assistants])
    assert mine["finish_reason"].iloc[0] == "tool_calls"
    assert mine["started_s"].isna().iloc[0] and mine["started_s"].iloc[1:].notna().all()
    assert (mine["latency_s"].iloc[1:] > 0).all()
    tools = [t for ts in mine["tool_calls"] for t in ts]
    raw_tools = [t for m in assistants for t in m["tool_calls"]]
    assert len(tools) == len(raw_tools)
    assert tools[0]["name"] == "bash"
    assert json.loads(tools[0]["arguments"]) == json.loads(raw_tools[0]["function"]["arguments"])
    results = [m for m in doc["messages"] if m["role"] == "tool"]
    answered = [t for t in tools if t["error"] is not None]
    assert len(answered) == len(results)  # the submitting call is answered by the exit
    assert sum(t["error"] for t in answered) == sum(m["extra"]["returncode"] != 0
                                                    for m in results)
    assert all(t["result_tokens"] > 0 and len(t["result_sha256"]) == 64 for t in answered)
    assert all(t["result_tokens"] is None and t["result_sha256"] is None
               for t in tools if t["error"] is None)
    row = runs.set_index("run_id").loc[run_id]
    assert row["duration_s"] > mine["latency_s"].sum()


def test_an_assistant_message_without_usage_is_a_call_with_unknown_counts(tmp_path):
    """The run is kept: that call's counts 0 with every provenance unknown,
    the run's other calls as recorded; nothing skipped."""
    from sim.traces import miniswe
    from sim.traces.model import PROVENANCE_FIELDS, UNKNOWN

    bad = load(SAMPLES[0])
    assistant = [m for m in bad["messages"] if m["role"] == "assistant"]
    del assistant[0]["extra"]["response"]["usage"]
    path = lay_out(tmp_path, {SAMPLES[0]: bad, SAMPLES[1]: load(SAMPLES[1])})
    report = import_traces([tmp_path], tmp_path / "out")
    assert report.runs == 2 and report.skips == []
    record = miniswe.run(bad, path / SAMPLES[0] / f"{SAMPLES[0]}.traj.json", "f")
    assert len(record.calls) == len(assistant)
    first = record.calls[0]
    assert first.usage.prompt_tokens == 0 and first.usage.output_tokens == 0
    assert first.provenance == dict.fromkeys(PROVENANCE_FIELDS, UNKNOWN)
    assert all(UNKNOWN not in c.provenance.values() for c in record.calls[1:])


def test_cache_counts_above_the_prompt_read_the_run_with_the_cache_apart(tmp_path):
    """One call with more cache than prompt: the run is kept, every call of it
    read with the prompt as the uncached part, each call with a cache counted."""
    bad = load(SAMPLES[2])
    first = next(m for m in bad["messages"] if m["role"] == "assistant")
    usage = first["extra"]["response"]["usage"]
    usage["prompt_tokens_details"]["cached_tokens"] = usage["prompt_tokens"] + 1
    lay_out(tmp_path, {SAMPLES[2]: bad, SAMPLES[1]: load(SAMPLES[1])})
    report = import_traces([tmp_path], tmp_path / "out")
    assert report.skips == [] and report.runs == 2
    _, calls = read_traces(tmp_path / "out")
    mine = calls[calls["run_id"] == f"run1/{SAMPLES[2]}"]
    raw = [m["extra"]["response"]["usage"] for m in bad["messages"] if m["role"] == "assistant"]
    assert mine["input_tokens"].tolist() == [u["prompt_tokens"] for u in raw]
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] > 0 for u in raw)
    assert report.repairs_by_field() == {"calls.input_tokens": {
        "cache above the prompt: the prompt taken as without the cache": cached}}


def test_a_trajectory_outside_the_run_layout_is_named_by_its_instance(tmp_path):
    doc = copy.deepcopy(load(SAMPLES[1]))
    (tmp_path / "loose.json").write_text(json.dumps(doc))
    import_traces([tmp_path / "loose.json"], tmp_path / "out")
    runs, _ = read_traces(tmp_path / "out")
    assert runs["run_id"].tolist() == [SAMPLES[1]]


def test_text_hashes_follow_the_assistant_content_and_repeat_with_it(samples):
    """Every call of the samples has content, so every call has a text hash:
    calls with the same content (the samples repeat some, e.g. an empty one)
    share a hash, different contents differ; no user message comes after a
    call in the samples, so no call has an observation hash. A note the format
    allows (a user message after a call) is hashed with its text."""
    docs, _, _, calls = samples
    by_call = {}
    for instance, doc in docs.items():
        assistants = [m for m in doc["messages"] if m["role"] == "assistant"]
        for k, m in enumerate(assistants):
            by_call[(f"run1/{instance}", k)] = m["content"]
    assert len(by_call) == len(calls) and all(isinstance(t, str) for t in by_call.values())
    hashes = dict(zip(zip(calls["run_id"], calls["call"], strict=True), calls["text_sha256"],
                      strict=True))
    assert calls["text_sha256"].notna().sum() == len(by_call)
    texts: dict[str, set] = {}
    for key, text in by_call.items():
        texts.setdefault(text, set()).add(hashes[key])
    assert all(len(h) == 1 for h in texts.values())
    assert len({h for hs in texts.values() for h in hs}) == len(texts) < len(by_call)
    again = "Now let me run the reproduction script again:"
    assert texts[again] == {hashlib.sha256(again.encode()).hexdigest()}
    assert calls["observation_sha256"].isna().all() and (calls["observation_tokens"] == 0).all()


def test_a_user_note_after_a_call_is_its_observation_hash(tmp_path):
    doc = load(SAMPLES[0])
    position = next(i for i, m in enumerate(doc["messages"]) if m["role"] == "tool")
    doc["messages"].insert(position + 1, {"role": "user", "content": "Format error: one "
                                          "command per response."})
    lay_out(tmp_path, {SAMPLES[0]: doc})
    import_traces([tmp_path / "run1"], tmp_path / "out")
    _, calls = read_traces(tmp_path / "out")
    first = calls[calls["call"] == 0].iloc[0]
    assert first["observation_sha256"] == hashlib.sha256(
        b"Format error: one command per response.").hexdigest()
    assert calls["observation_sha256"].notna().sum() == 1


def test_input_is_derived_exactly_when_a_cache_count_was_subtracted():
    """mini-swe-agent records OpenAI-style usage (prompt_tokens include the
    cache): a call whose raw usage has a cache hit has its uncached input
    derived; one without keeps it exact (not listed)."""
    from sim.traces import miniswe
    from sim.traces.model import DERIVED

    doc = load(SAMPLES[0])
    raw = [m["extra"]["response"]["usage"] for m in doc["messages"]
           if m["role"] == "assistant"]
    cached = [bool((u.get("prompt_tokens_details") or {}).get("cached_tokens")
                   or u.get("prompt_cache_hit_tokens")) for u in raw]
    record = miniswe.run(doc, Path(f"{SAMPLES[0]}.traj.json"), "f")
    got = [c.provenance.get("input_tokens") == DERIVED for c in record.calls]
    assert got == cached and any(cached)
