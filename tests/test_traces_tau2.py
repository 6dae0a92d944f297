"""The tau2-bench importer (sim/traces/tau2.py) on the 30 real files of
shared/data/traces/tau2/raw/ against runs.csv and steps.csv, which were
extracted from them independently, and on small hand-built documents for each
shape and each problem the real files show."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from traces_helpers import data_folder

from sim.analysis import stats
from sim.traces import import_traces, read_traces
from sim.traces.summary import prompt_fit, summarize

RAW_FILES = 30
CSV_RUNS = 530


@pytest.fixture(scope="module")
def tau2(tmp_path_factory):
    """The whole raw folder imported once: (report, runs, calls, folder, seconds)."""
    raw = data_folder("tau2", "raw")
    out = tmp_path_factory.mktemp("tau2") / "traces"
    began = time.perf_counter()
    report = import_traces([raw], out)
    seconds = time.perf_counter() - began
    runs, calls = read_traces(out)
    return report, runs, calls, out, seconds


def csv_rows(name: str) -> list[dict[str, str]]:
    with open(data_folder("tau2", name), newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_every_run_of_runs_csv_imports_with_its_steps_and_prompt_total(tau2):
    """At least runs.csv's 530 runs, each with the same steps (agent calls with
    usage), prompt-token total (input + cache read + cache write), output,
    tool calls, tool errors, exit label, outcome and model."""
    _, runs, _, _, _ = tau2
    by_id = runs.set_index("run_id")
    rows = csv_rows("runs.csv")
    assert len(rows) == CSV_RUNS
    assert len(runs) >= CSV_RUNS
    for row in rows:
        got = by_id.loc[row["run_id"]]
        prompt = got["input_tokens"] + got["cache_read_tokens"] + got["cache_write_tokens"]
        assert got["steps"] == int(row["steps"]), row["run_id"]
        assert prompt == int(row["total_input_tokens"]), row["run_id"]
        assert got["output_tokens"] + got["reasoning_tokens"] == int(row["total_output_tokens"])
        assert got["exit"] == row["termination_reason"]
        assert got["resolved"] == (row["resolved"] == "1")
        assert got["model"] == row["model"]
        assert got["message_limit"] == int(row["max_steps"])
        assert got["error_limit"] == int(row["max_errors"])
        assert got["duration_s"] == pytest.approx(float(row["duration_s"]), abs=1e-9)
        assert got["cost_usd"] == pytest.approx(float(row["agent_cost"]), abs=1e-12)


def test_tool_calls_and_their_errors_match_runs_csv(tau2):
    calls = tau2[2]
    tools = calls.groupby("run_id")["tool_calls"].agg(lambda s: [t for ts in s for t in ts])
    for row in csv_rows("runs.csv"):
        made = tools.get(row["run_id"], [])
        assert len(made) == int(row["n_tool_calls"]), row["run_id"]
        assert sum(bool(t["error"]) for t in made) == int(row["n_tool_errors"])
        keys = [(t["name"], t["arguments"]) for t in made]
        repeated = sum(1 for i, k in enumerate(keys) if k in keys[:i])
        assert repeated == int(row["n_repeated_actions"]), row["run_id"]


def test_each_call_matches_steps_csv(tau2):
    """Per call: prompt tokens, output, cost and tool calls, in order."""
    _, _, calls, _, _ = tau2
    by_key = {(r, c): row for r, c, row in zip(calls["run_id"], calls["call"],
                                                calls.itertuples(), strict=True)}
    rows = csv_rows("steps.csv")
    assert len(rows) == 6819
    for row in rows:
        got = by_key[(row["run_id"], int(row["step"]) - 1)]
        assert got.input_tokens + got.cache_read_tokens + got.cache_write_tokens == int(
            row["input_tokens"])
        assert got.output_tokens + got.reasoning_tokens == int(row["output_tokens"])
        assert len(got.tool_calls) == int(row["n_tool_calls"])
        assert got.cost_usd == pytest.approx(float(row["cost"]), abs=1e-12)


def test_unusable_files_and_runs_are_skipped_and_counted_by_reason(tau2):
    """The 11 files outside runs.csv: 4 record no usage (one of them still has
    a usable run: a user who stopped at the greeting, zero calls), 3 are
    aggregated results, 4 had cache counts above their prompt (LiteLLM's older
    Anthropic usage) and are now read with the cache apart, their runs kept;
    the two adaptive-agent submissions hold 65 identical simulations twice."""
    report, runs, _, out, _ = tau2
    files = report.skipped_files()
    assert sorted(files.values()) == sorted(["no token usage"] * 3 + ["no per-call trajectory"]
                                            * 3)
    csv_files = {row["file"] for row in csv_rows("runs.csv")}
    imported = {Path(f).name.removesuffix(".gz") for f in runs["file"]}
    assert csv_files <= imported and len(imported) == 24
    partial = [s for s in report.skipped_runs()]
    assert Counter(s.reason for s in partial) == {"duplicate run_id": 65, "no token usage": 49}
    for skip in report.skips:
        assert skip.file and skip.reason and skip.detail
    lines = report.lines()
    assert lines[1] == "skipped 6 files: 3 no per-call trajectory, 3 no token usage"
    written = json.loads((out / "import.json").read_text())
    assert written["skipped_files"]["count"] == 6
    assert written["runs"] == len(runs) == 700
    assert written["repairs"]["by_field"] == {"calls.input_tokens": {
        "cache above the prompt: the prompt taken as without the cache": 976}}
    assert len(report.run_files) + len(files) == RAW_FILES


def test_runs_without_a_model_call_are_runs_of_zero_calls(tau2):
    """Two infrastructure errors before the first reply and one user who
    stopped at the greeting: imported with zero calls and their exit."""
    _, runs, calls, _, _ = tau2
    empty = runs[runs["steps"] == 0]
    assert sorted(empty["exit"]) == ["infrastructure_error", "infrastructure_error",
                                     "user_stop"]
    assert not calls["run_id"].isin(empty["run_id"]).any()
    assert (empty["input_tokens"] == 0).all()


def test_the_summary_shows_the_figures_of_the_tau2_readme(tau2):
    """tau2/README.md, of the 530 runs of runs.csv: steps p50 11, p95 24, max
    100; median per-run R^2 of the linear prompt growth 0.95; h about 280
    tokens per call (the whole folder's fit, 700 runs, stays close)."""
    _, runs, _, out, _ = tau2
    summary = summarize(out)
    csv_files = {row["file"] for row in csv_rows("runs.csv")}
    of_csv = runs[[Path(f).name.removesuffix(".gz") in csv_files for f in runs["file"]]]
    assert len(of_csv) == CSV_RUNS
    steps = stats.describe(of_csv["steps"].to_numpy(dtype=np.int64))
    assert (steps["p50"], steps["p95"], steps["max"]) == (11, 24, 100)
    assert summary["prompt_fit"]["r2"] == pytest.approx(0.95, abs=0.01)
    assert summary["prompt_fit"]["h"] == pytest.approx(280, rel=0.05)
    assert summary["skipped"]["files"]["count"] == 6


def test_the_prompt_fit_agrees_with_numpy_polyfit_on_steps_csv(tau2):
    """The vectorised per-run fit equals numpy's, run by run, on the calls of
    steps.csv (an independent extraction): medians of P, h and R^2 agree."""
    rows = csv_rows("steps.csv")
    by_run: dict[str, list[tuple[int, int]]] = {}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append((int(row["step"]) - 1,
                                                     int(row["input_tokens"])))
    ps, hs, r2s = [], [], []
    ids, index, prompt = [], [], []
    for run_id in sorted(by_run):
        points = sorted(by_run[run_id])
        n = np.array([p[0] for p in points], dtype=float)
        y = np.array([p[1] for p in points], dtype=float)
        ids += [run_id] * len(points)
        index += [p[0] for p in points]
        prompt += [p[1] for p in points]
        if len(points) < 3 or np.ptp(y) == 0:
            continue
        h, p = np.polyfit(n, y, 1)
        r2 = 1 - np.sum((y - (p + h * n)) ** 2) / np.sum((y - y.mean()) ** 2)
        ps.append(p), hs.append(h), r2s.append(r2)
    fit = prompt_fit(np.array(ids, dtype=object), np.array(index), np.array(prompt))
    upper_median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731  the project's p50
    assert fit["runs"] == len(r2s)
    assert fit["P"] == pytest.approx(upper_median(ps), rel=1e-9)
    assert fit["h"] == pytest.approx(upper_median(hs), rel=1e-9)
    assert fit["r2"] == pytest.approx(upper_median(r2s), rel=1e-9)


def _raw_calls(runs) -> dict[tuple[str, int], tuple[str | None, list[str | None]]]:
    """Read from the raw files directly, for every imported run: per agent call
    (an assistant message with usage), its content text and the texts of the
    simulated user's messages without tool calls that follow it before the
    next call."""
    wanted = set(zip(runs["file"], runs["run_id"], strict=True))
    out: dict[tuple[str, int], tuple[str | None, list[str | None]]] = {}
    for file in sorted({f for f, _ in wanted}):
        with gzip.open(file, "rt", encoding="utf-8") as handle:
            doc = json.load(handle)
        simulations = doc["simulations"] if isinstance(doc, dict) else doc
        for sim in simulations:
            if (file, str(sim.get("id"))) not in wanted:
                continue
            calls: list[tuple[str | None, list[str | None]]] = []
            for m in sim["messages"]:
                if m.get("role") == "assistant" and m.get("usage"):
                    calls.append((_text(m.get("content")), []))
                elif m.get("role") == "user" and calls and not m.get("tool_calls"):
                    calls[-1][1].append(_text(m.get("content")))
            for k, call in enumerate(calls):
                out[(str(sim["id"]), k)] = call
    return out


def _text(content):
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and "text" in p)
    return content


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_text_and_reply_hashes_match_the_raw_messages(tau2):
    """text_sha256 is set on exactly the calls whose message has content,
    observation_sha256 on exactly those followed by a user's text reply; two
    calls with the same text (or the same reply) have the same hash, and calls
    with different texts different ones."""
    _, runs, calls, _, _ = tau2
    raw = _raw_calls(runs)
    assert len(raw) == len(calls)
    text_hash = dict(zip(zip(calls["run_id"], calls["call"], strict=True),
                         calls["text_sha256"], strict=True))
    reply_hash = dict(zip(zip(calls["run_id"], calls["call"], strict=True),
                          calls["observation_sha256"], strict=True))
    with_content = [key for key, (text, _) in raw.items() if text is not None]
    with_reply = [key for key, (_, replies) in raw.items() if replies]
    assert calls["text_sha256"].notna().sum() == len(with_content) > 3000
    assert calls["observation_sha256"].notna().sum() == len(with_reply) > 3000
    by_text: dict[str, set] = {}
    for key in with_content:
        by_text.setdefault(raw[key][0], set()).add(text_hash[key])
    assert all(len(hashes) == 1 for hashes in by_text.values())  # same text, same hash
    assert len({h for hashes in by_text.values() for h in hashes}) == len(by_text)
    texts = Counter(raw[key][0] for key in with_content)
    repeated = next(t for t, n in texts.most_common() if t)
    assert texts[repeated] > 1, "the raw files hold two agent messages with the same text"
    assert by_text[repeated] == {_sha(repeated)}
    by_reply: dict[str, set] = {}
    for key in with_reply:
        by_reply.setdefault("\n".join(raw[key][1]), set()).add(reply_hash[key])
    assert all(len(hashes) == 1 for hashes in by_reply.values())
    assert len({h for hashes in by_reply.values() for h in hashes}) == len(by_reply)
    reply, times = Counter("\n".join(raw[k][1]) for k in with_reply).most_common(1)[0]
    assert times > 1 and by_reply[reply] == {_sha(reply)}


# ------------------------------------------------------ hand-built documents

def message(role, content=None, *, usage=None, tools=None, raw=None, ts=0.0, **extra):
    out = {"role": role, "content": content, "timestamp": f"2025-01-01T00:00:{ts:09.6f}"}
    if usage is not None:
        out["usage"] = usage
    if tools is not None:
        out["tool_calls"] = tools
    if raw is not None:
        out["raw_data"] = raw
    out.update(extra)
    return out


def simulation(sim_id="s1", messages=None, **extra):
    base = {"id": sim_id, "task_id": "7", "start_time": "2025-01-01T00:00:00",
            "duration": 9.5, "termination_reason": "agent_stop", "agent_cost": 0.5,
            "reward_info": {"reward": 1.0}}
    base["messages"] = messages if messages is not None else conversation()
    base.update(extra)
    return base


def conversation():
    return [
        message("assistant", "Hi! How can I help you today?"),          # scripted greeting
        message("user", "x" * 40, ts=1.0),                               # before any call
        message("assistant", None, usage={"prompt_tokens": 100, "completion_tokens": 8},
                tools=[{"id": "c1", "name": "find", "arguments": {"b": 2, "a": 1}}],
                raw={"finish_reason": "tool_calls"}, cost=0.01, ts=3.0),
        message("tool", "result text!", id="c1", requestor="assistant", error=True, ts=3.5),
        message("user", None, ts=4.0, tool_calls=[{"id": "u1", "name": "toggle"}]),
        message("tool", "user's tool", id="u1", requestor="user", ts=4.2),
        message("user", "y" * 21, ts=5.0),
        message("assistant", "done now", usage={"prompt_tokens": 160, "completion_tokens": 4},
                cost=0.02, ts=6.0),
    ]


def write_doc(tmp_path, doc, name="doc.json", compress=False) -> Path:
    data = json.dumps(doc).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def imported(tmp_path, doc, **kwargs):
    path = write_doc(tmp_path, doc, **kwargs)
    report = import_traces([path], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    return report, runs, calls


def test_a_results_object_gives_calls_times_tools_and_observations(tmp_path):
    """The greeting is no call; each call starts when the message before it was
    recorded; a tool result answers its call by id; the simulated user's text
    after a call is its observation, the user's own tool use is not."""
    doc = {"info": {"max_steps": 50, "max_errors": 3, "agent_info": {"llm": "gpt-4.1"}},
           "simulations": [simulation()]}
    _, runs, calls = imported(tmp_path, doc, compress=True)
    row = runs.iloc[0]
    assert (row["run_id"], row["task_id"], row["model"], row["steps"]) == ("s1", "7",
                                                                           "gpt-4.1", 2)
    assert (row["exit"], row["resolved"], row["cost_usd"]) == ("agent_stop", True, 0.5)
    assert (row["message_limit"], row["error_limit"]) == (50, 3)
    assert pd.isna(row["step_limit"])  # tau2's max_steps counts messages, not calls
    first, second = calls.iloc[0], calls.iloc[1]
    assert first["input_tokens"] == 100 and second["input_tokens"] == 160
    assert first["started_s"] == pytest.approx(1.0) and first["latency_s"] == pytest.approx(2.0)
    assert first["finish_reason"] == "tool_calls" and first["text_tokens"] == 0
    assert first["observation_tokens"] == 6  # ceil(21 / 4): the user's reply only
    assert second["text_tokens"] == 2 and second["observation_tokens"] == 0
    [tool] = first["tool_calls"]
    assert tool["arguments"] == '{"a":1,"b":2}'
    assert (tool["result_tokens"], tool["error"]) == (3, True)
    assert tool["duration_s"] == pytest.approx(0.5)


def test_text_hashes_are_null_without_content_and_replies_are_joined_in_order(tmp_path):
    """A tool-only message (content null) has no text hash; the user's texts
    after a call are hashed joined by a newline, the user's own tool use left
    out; a call nobody answered has no reply hash."""
    messages = conversation()
    messages.insert(-1, message("user", "and another thing", ts=5.5))
    _, _, calls = imported(tmp_path, {"simulations": [simulation(messages=messages)]})
    first, second = calls.iloc[0], calls.iloc[1]
    assert pd.isna(first["text_sha256"]) and second["text_sha256"] == _sha("done now")
    assert first["observation_sha256"] == _sha("y" * 21 + "\n" + "and another thing")
    assert pd.isna(second["observation_sha256"]) and second["observation_tokens"] == 0


def test_a_bare_list_of_simulation_records_is_read_too(tmp_path):
    _, runs, _ = imported(tmp_path, [simulation("a"), simulation("b")])
    assert runs["run_id"].tolist() == ["a", "b"]
    assert runs["model"].isna().all()  # no info: the calls say nothing of the model


def test_anthropic_raw_usage_splits_the_prompt_into_cache_parts(tmp_path):
    msgs = conversation()
    msgs[2]["raw_data"] = {"usage": {"input_tokens": 10, "cache_read_input_tokens": 80,
                                     "cache_creation_input_tokens": 10, "output_tokens": 8},
                           "model": "claude-x", "stop_reason": "tool_use"}
    _, _, calls = imported(tmp_path, {"simulations": [simulation(messages=msgs)]})
    first = calls.iloc[0]
    assert (first["input_tokens"], first["cache_read_tokens"], first["cache_write_tokens"]) == (
        10, 80, 10)
    assert first["model"] == "claude-x" and first["finish_reason"] == "tool_use"


def test_openai_cached_and_reasoning_tokens_are_taken_out_of_the_totals(tmp_path):
    msgs = conversation()
    msgs[2]["raw_data"] = {"usage": {"prompt_tokens": 100, "completion_tokens": 8,
                                     "prompt_tokens_details": {"cached_tokens": 64},
                                     "completion_tokens_details": {"reasoning_tokens": 5}}}
    _, _, calls = imported(tmp_path, {"simulations": [simulation(messages=msgs)]})
    first = calls.iloc[0]
    assert (first["input_tokens"], first["cache_read_tokens"]) == (36, 64)
    assert (first["output_tokens"], first["reasoning_tokens"]) == (3, 5)


def test_provenance_marks_what_was_subtracted_from_the_recorded_totals():
    """OpenAI-style: prompt 100 with 64 cached gives the uncached input 36
    (derived), completion 8 with 5 reasoning the output 3 (derived); the
    second call (no cache, no reasoning) is exact. Anthropic's own usage:
    its input_tokens as recorded (exact), output 8 as recorded."""
    from sim.traces import tau2
    from sim.traces.model import DERIVED

    msgs = conversation()
    msgs[2]["raw_data"] = {"usage": {"prompt_tokens": 100, "completion_tokens": 8,
                                     "prompt_tokens_details": {"cached_tokens": 64},
                                     "completion_tokens_details": {"reasoning_tokens": 5}}}
    [record] = list(tau2.runs({"simulations": [simulation(messages=msgs)]}, "f"))
    assert [c.provenance for c in record.calls] == [
        {"input_tokens": DERIVED, "output_tokens": DERIVED}, {}]
    msgs = conversation()
    msgs[2]["raw_data"] = {"usage": {"input_tokens": 10, "cache_read_input_tokens": 80,
                                     "cache_creation_input_tokens": 10, "output_tokens": 8}}
    [record] = list(tau2.runs({"simulations": [simulation(messages=msgs)]}, "f"))
    assert [c.provenance for c in record.calls] == [{}, {}]


def test_cache_above_the_prompt_reads_every_call_of_the_run_without_the_cache(tmp_path):
    """LiteLLM's older Anthropic usage: prompt_tokens 46 with 6,989 cached. The
    source counts the cache apart, so every call of the run is read so (the
    second call too, whose cache 30 would fit in its prompt 60), counted as
    repairs; the run is kept."""
    msgs = conversation()
    msgs[2]["usage"]["prompt_tokens"] = 46
    msgs[2]["raw_data"] = {"usage": {"prompt_tokens": 46, "completion_tokens": 8,
                                     "prompt_tokens_details": {"cached_tokens": 6989}}}
    msgs[7]["usage"]["prompt_tokens"] = 60
    msgs[7]["raw_data"] = {"usage": {"prompt_tokens": 60, "completion_tokens": 5,
                                     "prompt_tokens_details": {"cached_tokens": 30}}}
    report, runs, calls = imported(tmp_path, {"simulations": [simulation("s", msgs)]})
    assert runs["run_id"].tolist() == ["s"] and not report.skips
    assert calls["input_tokens"].tolist() == [46, 60]
    assert calls["cache_read_tokens"].tolist() == [6989, 30]
    assert report.repairs_by_field() == {"calls.input_tokens": {
        "cache above the prompt: the prompt taken as without the cache": 2}}


def test_reasoning_above_the_output_is_counted_apart_and_kept(tmp_path):
    """OpenAI's completion_tokens include the reasoning; 99 reasoning tokens
    beside 8 completion tokens cannot be included: counted apart (Gemini's
    convention), the run kept, the repair counted."""
    msgs = conversation()
    msgs[2]["raw_data"] = {"usage": {"prompt_tokens": 100, "completion_tokens": 8,
                                     "completion_tokens_details": {"reasoning_tokens": 99}}}
    report, _, calls = imported(tmp_path, {"simulations": [simulation("s", msgs)]})
    first = calls.iloc[0]
    assert (first["output_tokens"], first["reasoning_tokens"]) == (8, 99)
    assert report.repairs_by_field() == {"calls.reasoning_tokens": {
        "reasoning above output: counted apart from the output": 1}}
    assert "repaired 1 impossible value" in "\n".join(report.lines())


def test_anthropic_parts_that_do_not_add_up_are_kept_and_counted(tmp_path):
    msgs = conversation()
    msgs[2]["raw_data"] = {"usage": {"input_tokens": 10, "cache_read_input_tokens": 5,
                                     "output_tokens": 8}}
    report, _, calls = imported(tmp_path, {"simulations": [simulation("s", msgs)]})
    assert (calls.iloc[0]["input_tokens"], calls.iloc[0]["cache_read_tokens"]) == (10, 5)
    assert report.repairs_by_field() == {"calls.input_tokens": {
        "cache parts do not add up to the prompt: the provider's parts kept": 1}}


def test_out_of_order_timestamps_and_impossible_values_are_nulled_and_counted(tmp_path):
    """A tool result stamped before its call, a reply before its request, a
    negative cost, a start in year 9999, max_steps 2**64 and a NaN duration:
    each nulled, counted by dotted field, the run kept, the folder readable."""
    msgs = conversation()
    msgs[3]["timestamp"] = "2025-01-01T00:00:00"  # the tool result, long before its call
    msgs[7]["cost"] = -0.5
    sim = simulation("s", msgs)
    sim["start_time"] = "9999-01-01T00:00:00"
    sim["duration"] = float("nan")
    doc = {"info": {"max_steps": 2**64, "max_errors": -3}, "simulations": [sim]}
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))  # NaN written as JSON's NaN, as Python does
    report = import_traces([path], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    assert runs["run_id"].tolist() == ["s"]
    row = runs.iloc[0]
    for name in ("started_at", "duration_s", "message_limit", "error_limit"):
        assert pd.isna(row[name]), name
    assert pd.isna(calls.iloc[1]["cost_usd"])
    by_field = report.repairs_by_field()
    assert by_field["runs.started_at"] == {"start outside 2000-2099: set to null": 1}
    assert by_field["runs.duration_s"] == {"not a finite number: set to null": 1}
    assert by_field["runs.message_limit"] == {"out of range (too large): set to null": 1}
    assert by_field["runs.error_limit"] == {"negative: set to null": 1}
    assert by_field["calls.cost_usd"] == {"negative: set to null": 1}
    assert by_field["calls.tool_calls.duration_s"] == {"negative: set to null": 1}
    written = json.loads((tmp_path / "out" / "import.json").read_text())
    assert written["repairs"]["by_field"] == by_field
    assert written["repairs"]["count"] == sum(sum(v.values()) for v in by_field.values())


def test_a_simulation_that_failed_before_its_first_reply_is_a_run(tmp_path):
    """An infrastructure error with no message at all: a run of zero calls,
    with its exit and cost."""
    failed = {"id": "f", "task_id": "3", "messages": [], "agent_cost": 0.0,
              "termination_reason": "infrastructure_error", "duration": 0.0}
    report, runs, calls = imported(tmp_path, {"simulations": [failed, simulation("good")]})
    assert runs["run_id"].tolist() == ["f", "good"] and not report.skips
    row = runs.iloc[0]
    assert (row["steps"], row["exit"], row["cost_usd"]) == (0, "infrastructure_error", 0.0)
    assert pd.isna(row["resolved"])
    assert calls["run_id"].eq("good").all()


def test_a_run_with_an_agent_message_without_usage_is_skipped(tmp_path):
    msgs = conversation()
    del msgs[7]["usage"]
    report, runs, _ = imported(tmp_path, {"simulations": [simulation("bad", msgs),
                                                          simulation("good")]})
    assert runs["run_id"].tolist() == ["good"]
    assert report.skips[0].reason == "no token usage"
    assert "1 of 2 agent messages" in report.skips[0].detail


def test_aggregated_results_are_a_file_without_trajectory(tmp_path):
    doc = [{"model": "m", "task_results": [{"task_id": "1", "num_turns": 3}]}]
    path = write_doc(tmp_path, doc, name="agg.json")
    good = write_doc(tmp_path, {"simulations": [simulation()]}, name="good.json")
    report = import_traces([path, good], tmp_path / "out")
    assert report.skipped_files() == {str(path): "no per-call trajectory"}
    assert "aggregated results" in report.skips[0].detail
