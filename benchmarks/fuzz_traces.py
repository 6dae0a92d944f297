"""Generated-input campaign over the trace importers (issue 25): mutations of
small sample files of every trace format, imported as a user would.

    python -m benchmarks.fuzz_traces [--cases N] [--seed S] [--time-limit SECONDS]

Each case takes one sample file (tau2 results and bare records, mini-swe-agent
1.1 with tool calls and 1.x text actions, OpenTelemetry OTLP JSON, sim's own
trace folder; an Inspect JSON log when inspect_ai is installed), applies one
to three mutations (a value replaced by JSON nested up to 100,000 deep, a huge
or non-finite number, a negative one, an empty list or object, a wrong type, a
start in year 1 or 9999; two values swapped, as out-of-order timestamps are; a
key deleted), sometimes adds a symlink loop beside it, and runs
``python -m sim traces import`` in this process (``sim.cli.main``) under a
time limit. Then the output must be what a reader accepts: ``read_traces``,
``traces summary`` and the replay's reader on every folder imported.

Outcomes, counted: ``ok`` (exit 0, output accepted), ``refused`` (exit 2: a
clear message), ``traceback`` (any exception out of ``main``), ``hang`` (past
the time limit), ``nonsense`` (exit 0 but a reader refuses what was written,
or an exit status other than 0 and 2). The campaign's goal is zero of the last
three. The test suite runs the same cases, fewer of them
(``tests/test_traces_fuzz.py``).

Measured 2026-12-01 (seed 7, 20 s per case): this branch, 3,000 cases in
499 s: 1,669 ok, 1,331 refused, 0 tracebacks, 0 hangs, 0 nonsense; main
before it, the first 700 of the same cases: 305 ok, 256 refused, 77
tracebacks (ELOOP, OverflowError, RecursionError, IndexError...), 62
nonsense (mostly negative latencies the importer wrote and the replay's
reader refused).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import math
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

OUTCOMES = ("ok", "refused", "traceback", "hang", "nonsense")
BAD = ("traceback", "hang", "nonsense")


# ------------------------------------------------------------------ samples

def _tau2_simulation(sim_id: str) -> dict[str, Any]:
    t = "2025-01-01T00:00:{:09.6f}"
    return {"id": sim_id, "task_id": "7", "start_time": "2025-01-01T00:00:00",
            "duration": 9.5, "termination_reason": "agent_stop", "agent_cost": 0.5,
            "reward_info": {"reward": 1.0},
            "messages": [
                {"role": "assistant", "content": "Hi! How can I help?", "timestamp": t.format(0)},
                {"role": "user", "content": "x" * 40, "timestamp": t.format(1)},
                {"role": "assistant", "content": None, "timestamp": t.format(3),
                 "usage": {"prompt_tokens": 100, "completion_tokens": 8}, "cost": 0.01,
                 "tool_calls": [{"id": "c1", "name": "find", "arguments": {"a": 1}}],
                 "raw_data": {"finish_reason": "tool_calls", "model": "gpt-4.1",
                              "usage": {"prompt_tokens": 100, "completion_tokens": 8,
                                        "prompt_tokens_details": {"cached_tokens": 64},
                                        "completion_tokens_details":
                                            {"reasoning_tokens": 2}}}},
                {"role": "tool", "content": "result", "id": "c1", "requestor": "assistant",
                 "error": False, "timestamp": t.format(3.5)},
                {"role": "user", "content": "y" * 21, "timestamp": t.format(5)},
                {"role": "assistant", "content": "done", "timestamp": t.format(6),
                 "usage": {"prompt_tokens": 160, "completion_tokens": 4}, "cost": 0.02}]}


def _miniswe_message(role: str, content: str, t: float, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, "extra": {"timestamp": t, **extra}}


def _miniswe_response(created: int = 1_700_000_000) -> dict[str, Any]:
    return {"created": created, "model": "deepseek-chat",
            "usage": {"prompt_tokens": 1000, "completion_tokens": 50,
                      "prompt_tokens_details": {"cached_tokens": 800}},
            "choices": [{"finish_reason": "tool_calls"}]}


def _miniswe_tools() -> dict[str, Any]:
    assistant = {"role": "assistant", "content": "THOUGHT",
                 "tool_calls": [{"id": "t1", "type": "function", "function": {
                     "name": "bash", "arguments": json.dumps({"command": "ls"})}}],
                 "extra": {"response": _miniswe_response(), "cost": 0.001,
                           "timestamp": 1_700_000_002.0, "actions": [{"command": "ls"}]}}
    return {"trajectory_format": "mini-swe-agent-1.1", "instance_id": "repo__x-1",
            "info": {"exit_status": "Submitted", "submission": "",
                     "model_stats": {"instance_cost": 0.002, "api_calls": 2},
                     "config": {"agent": {"step_limit": 250, "cost_limit": 3.0},
                                "model": {"model_name": "deepseek/deepseek-chat"}}},
            "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "do"},
                         assistant,
                         {"role": "tool", "tool_call_id": "t1", "content": "a b c",
                          "extra": {"returncode": 0, "timestamp": 1_700_000_003.0}},
                         copy.deepcopy(assistant)]}


def _miniswe_text() -> dict[str, Any]:
    def said(content: str, t: float) -> dict[str, Any]:
        return {"role": "assistant", "content": content, "timestamp": t,
                "extra": {"response": _miniswe_response()}}

    return {"trajectory_format": "mini-swe-agent-1",
            "info": {"exit_status": "Submitted", "submission": "",
                     "model_stats": {"instance_cost": 0.01, "api_calls": 3},
                     "config": {"agent": {"step_limit": 0, "cost_limit": 3.0,
                                          "action_regex": r"```bash\s*\n(.*?)\n```"},
                                "model": {"model_name": "gpt-4o"}}},
            "messages": [{"role": "system", "content": "sys", "timestamp": 0.0},
                         said("look\n```bash\nls -la\n```", 2.0),
                         {"role": "user", "content": "<returncode>0</returncode>",
                          "timestamp": 3.0},
                         said("two\n```bash\nls\n```\n```bash\npwd\n```", 4.0),
                         {"role": "user", "content": "EXACTLY ONE action", "timestamp": 4.0},
                         said("```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```", 6.0),
                         {"role": "user", "content": "diff", "timestamp": 7.0}]}


def _otel() -> dict[str, Any]:
    def attr(key: str, value: Any) -> dict[str, Any]:
        kind = "intValue" if isinstance(value, int) else "stringValue"
        return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}

    base = 1_700_000_000_000_000_000
    spans = [
        {"traceId": "t1", "spanId": "a", "name": "invoke_agent", "startTimeUnixNano": str(base),
         "endTimeUnixNano": str(base + 9 * 10**9),
         "attributes": [attr("gen_ai.operation.name", "invoke_agent"),
                        attr("gen_ai.conversation.id", "conv")]},
        {"traceId": "t1", "spanId": "b", "parentSpanId": "a", "name": "chat gpt-4o",
         "startTimeUnixNano": str(base + 10**9), "endTimeUnixNano": str(base + 2 * 10**9),
         "attributes": [attr("gen_ai.operation.name", "chat"),
                        attr("gen_ai.request.model", "gpt-4o"),
                        attr("gen_ai.usage.input_tokens", 500),
                        attr("gen_ai.usage.output_tokens", 40),
                        attr("gen_ai.usage.cache_read.input_tokens", 100)]},
        {"traceId": "t1", "spanId": "c", "parentSpanId": "a", "name": "execute_tool",
         "startTimeUnixNano": str(base + 3 * 10**9), "endTimeUnixNano": str(base + 4 * 10**9),
         "attributes": [attr("gen_ai.operation.name", "execute_tool"),
                        attr("gen_ai.tool.name", "search")]},
        {"traceId": "t1", "spanId": "d", "parentSpanId": "a", "name": "chat gpt-4o",
         "startTimeUnixNano": str(base + 5 * 10**9), "endTimeUnixNano": str(base + 6 * 10**9),
         "attributes": [attr("gen_ai.operation.name", "chat"),
                        attr("gen_ai.usage.input_tokens", 700),
                        attr("gen_ai.usage.output_tokens", 20)]}]
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def json_samples() -> dict[str, Any]:
    """``{format: document}``: one small JSON sample per format (an Inspect
    log is added by :func:`inspect_sample` when inspect_ai is installed)."""
    return {"tau2": {"info": {"max_steps": 30, "max_errors": 5,
                              "agent_info": {"llm": "gpt-4.1"}},
                     "simulations": [_tau2_simulation("s1"), _tau2_simulation("s2")]},
            "tau2-records": [_tau2_simulation("r1")],
            "mini-swe-agent-1.1": _miniswe_tools(),
            "mini-swe-agent-1": _miniswe_text(),
            "otel-genai": _otel()}


def inspect_sample(folder: Path) -> Any | None:
    """A small Inspect JSON log written by inspect_ai itself (its mockllm
    model), as a document; None without inspect_ai."""
    try:
        from inspect_ai import Task
        from inspect_ai import eval as inspect_eval
        from inspect_ai.dataset import Sample
        from inspect_ai.log import read_eval_log, write_eval_log
        from inspect_ai.model import ModelOutput, ModelUsage, get_model
        from inspect_ai.scorer import match
        from inspect_ai.solver import generate
    except ImportError:
        return None
    output = ModelOutput.from_content(model="mockllm/model", content="3")
    output.usage = ModelUsage(input_tokens=50, output_tokens=5, total_tokens=55,
                              reasoning_tokens=1, total_cost=0.001)
    task = Task(dataset=[Sample(input="1+2?", target="3", id="a")], solver=[generate()],
                scorer=match())
    [log] = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=[output]),
                         log_dir=str(folder), display="none")
    path = folder / "log.json"
    write_eval_log(read_eval_log(log.location), str(path), format="json")
    return json.loads(path.read_text())


def sim_folder(folder: Path) -> Path:
    """A small trace folder of sim's own (two runs), written by the writer."""
    from sim.traces.model import CallRecord, RunRecord, ToolCallRecord, Usage
    from sim.traces.writer import write_runs

    folder.mkdir(parents=True, exist_ok=True)
    runs = [RunRecord(run_id=f"r{i}", source="sim", file="x", model="m", cost_usd=0.1,
                      exit="succeeded", resolved=True, duration_s=3.0, step_limit=10,
                      calls=[CallRecord(Usage(input_tokens=100 + k, cache_read_tokens=10,
                                              output_tokens=5, thinking_tokens=1),
                                        cost_usd=0.01, started_s=k,
                                        latency_s=0.5, text_tokens=3, observation_tokens=0,
                                        tool_calls=[ToolCallRecord("t", "id", "{}", 4, None,
                                                                   False, 0.1)])
                             for k in range(3)])
            for i in range(2)]
    write_runs(folder, runs)
    return folder


# ---------------------------------------------------------------- mutations

REPLACEMENTS: tuple[str, ...] = (
    "deep", "huge-int", "int64-edge", "nan", "inf", "-inf", "negative", "-1e30", "empty-list",
    "empty-object", "string", "bool", "null", "year-1", "year-9999", "float-huge")


def replacement(kind: str, size: int) -> Any:
    """The value a mutation of ``kind`` puts in (``size`` picks among sizes)."""
    if kind == "deep":
        depth = (5, 999, 1_500, 100_000)[size % 4]
        value: Any = []
        for _ in range(depth):
            value = [value]
        return value
    return {"huge-int": (10**30, 10**400, 2**64)[size % 3],
            "int64-edge": (2**63 - 1, 2**63, -(2**63) - 1, 2**62)[size % 4],
            "nan": math.nan, "inf": math.inf, "-inf": -math.inf,
            "negative": (-1, -5.5, -(10**9))[size % 3], "-1e30": -1e30,
            "empty-list": [], "empty-object": {}, "string": ("", "abc", "12")[size % 3],
            "bool": bool(size % 2), "null": None,
            "year-1": "0001-01-01T00:00:00", "year-9999": "9999-12-31T23:59:59",
            "float-huge": (1e300, 1e308, 2.0**64)[size % 3]}[kind]


def locations(doc: Any) -> list[tuple[Any, Any]]:
    """Every ``(container, key)`` of ``doc``, in a fixed order, iteratively
    (the sample is shallow; a mutated one may not be)."""
    out = []
    stack = [doc]
    seen = 0
    while stack and seen < 100_000:
        node = stack.pop()
        seen += 1
        items = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else ()
        for key, value in items:
            out.append((node, key))
            if isinstance(value, dict | list):
                stack.append(value)
    return out


def mutate(doc: Any, picks: list[tuple[str, int, int, int]]) -> Any:
    """A deep copy of ``doc`` with each pick ``(operation, where, other,
    size)`` applied: ``replace`` puts :func:`replacement` ``REPLACEMENTS[size]``
    at location ``where`` (modulo their number), ``swap`` exchanges it with
    location ``other`` (out-of-order timestamps, misplaced counts), ``delete``
    removes it."""
    doc = copy.deepcopy(doc)
    for operation, where, other, size in picks:
        places = locations(doc)
        if not places:
            break
        container, key = places[where % len(places)]
        if operation == "swap":
            second, key2 = places[other % len(places)]
            container[key], second[key2] = second[key2], container[key]
        elif operation == "delete":
            del container[key]
        else:
            container[key] = replacement(REPLACEMENTS[size % len(REPLACEMENTS)], size)
    return doc


# ----------------------------------------------------------------- one case

class _Timeout(BaseException):
    pass


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`_Timeout` in the main thread after ``seconds`` (SIGALRM)."""
    def ring(signum: int, frame: Any) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(source: Path, work: Path, seconds: float) -> tuple[str, str]:
    """Import ``source`` into ``work/out`` through the CLI, then read the
    output back; ``(outcome, detail)`` (see the module)."""
    import sim.cli
    from sim.drivers.replay.reading import read_trace_folder
    from sim.traces import read_traces
    from sim.traces.summary import summarize

    out = work / "out"
    err = io.StringIO()
    try:
        with time_limit(seconds), contextlib.redirect_stderr(err), \
                contextlib.redirect_stdout(io.StringIO()):
            status = sim.cli.main(["traces", "import", str(source), "--out", str(out),
                                   "--quiet"])
    except _Timeout:
        return "hang", f"past {seconds} s"
    except BaseException as error:  # a traceback is the finding
        if isinstance(error, KeyboardInterrupt):
            raise
        return "traceback", "".join(traceback.format_exception(error))[-3000:]
    if "Traceback" in err.getvalue():
        return "traceback", err.getvalue()[-3000:]
    if status == 2:
        return "refused", err.getvalue().strip().splitlines()[-1] if err.getvalue() else ""
    if status != 0:
        return "nonsense", f"exit {status}"
    try:
        with time_limit(seconds):
            read_traces(out)
            summarize(out)
            read_trace_folder(out)
    except _Timeout:
        return "hang", "reading the output back"
    except Exception as error:  # what was written must read back
        return "nonsense", f"{type(error).__name__}: {error}"[:3000]
    return "ok", ""


def write_case(work: Path, fmt: str, sample: Any, picks: list[tuple[str, int, int, int]],
               loop: bool) -> Path:
    """The case's input under ``work/in``: the mutated sample (a JSON file,
    or for ``sim`` a trace folder with one mutated Parquet value), and a
    symlink loop beside it when ``loop``."""
    folder = work / "in"
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "sim":
        _mutate_parquet(sim_folder(folder / "traces"), picks)
    else:
        doc = mutate(sample, picks)
        text = _dumps(doc)
        (folder / f"{fmt}.json").write_text(text, encoding="utf-8")
    if loop:
        os.symlink(folder, folder / "loop", target_is_directory=True)
        os.symlink(folder / "self.json", folder / "self.json")
    return folder


def _dumps(doc: Any) -> str:
    """JSON text of ``doc`` (NaN and Infinity as Python writes them; deep
    nesting written without recursion)."""
    try:
        return json.dumps(doc, allow_nan=True)
    except (RecursionError, ValueError):
        return _dumps_iterative(doc)


def _dumps_iterative(doc: Any) -> str:
    parts: list[str] = []
    stack: list[Any] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, _Literal):
            parts.append(item.text)
        elif isinstance(item, dict):
            stack.append(_Literal("}"))
            for i, (key, value) in enumerate(reversed(list(item.items()))):
                stack.append(value)
                stack.append(_Literal(json.dumps(str(key)) + ":"))
                if i < len(item) - 1:
                    stack.append(_Literal(","))
            stack.append(_Literal("{"))
        elif isinstance(item, list):
            stack.append(_Literal("]"))
            for i, value in enumerate(reversed(item)):
                stack.append(value)
                if i < len(item) - 1:
                    stack.append(_Literal(","))
            stack.append(_Literal("["))
        elif isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 13_000:
            parts.append("1" * 5000)  # past Python's int-to-str limit: a 5,000-digit number
        else:
            parts.append(json.dumps(item, allow_nan=True))
    return "".join(parts)


class _Literal:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _mutate_parquet(folder: Path, picks: list[tuple[str, int, int, int]]) -> None:
    """Put an impossible value into one numeric column of calls or runs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = (-1, 2**62, 2**63 - 1, math.nan, math.inf, -1e30, 1e300, 0)
    for _, where, other, size in picks[:1]:
        name = ("runs.parquet", "calls.parquet")[where % 2]
        table = pq.read_table(folder / name)
        numeric = [f.name for f in table.schema if pa.types.is_integer(f.type)
                   or pa.types.is_floating(f.type)]
        column = numeric[other % len(numeric)]
        kind = table.schema.field(column).type
        cells = table.column(column).to_pylist()
        value = values[size % len(values)]
        if pa.types.is_integer(kind):
            if isinstance(value, float):
                value = -1 if not math.isfinite(value) or value < 0 else 2**62
            value = max(-(2**63), min(2**63 - 1, value))
        else:
            value = float(value)
        cells[size % len(cells)] = value
        table = table.set_column(table.schema.get_field_index(column), column,
                                 pa.array(cells, kind))
        pq.write_table(table, folder / name)


# ------------------------------------------------------------------ campaign

def campaign(cases: int, seed: int, seconds: float, say: Callable[[str], None] = print
             ) -> Counter[str]:
    """Run ``cases`` random cases (seeded); returns the outcome counts and
    says each bad one (format, picks and detail)."""
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="fuzz-traces-") as tmp:
        base = Path(tmp)
        samples: dict[str, Any] = json_samples()
        inspect_doc = inspect_sample(base / "inspect")
        if inspect_doc is not None:
            samples["inspect"] = inspect_doc
        samples["sim"] = None
        formats = sorted(samples)
        began = time.perf_counter()
        for case in range(cases):
            fmt = formats[case % len(formats)]
            picks = [(rng.choice(("replace", "replace", "replace", "swap", "delete")),
                      rng.randrange(10**6), rng.randrange(10**6), rng.randrange(10**3))
                     for _ in range(rng.randint(1, 3))]
            loop = rng.random() < 0.1
            work = base / f"case{case}"
            source = write_case(work, fmt, samples[fmt], picks, loop)
            outcome, detail = run_case(source, work, seconds)
            counts[outcome] += 1
            counts[f"{fmt}:{outcome}"] += 1
            if outcome in BAD:
                say(f"{outcome}: {fmt} picks={picks} loop={loop}\n{detail}\n")
            _remove(work)
        counts["seconds"] = round(time.perf_counter() - began)
    return counts


def _remove(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=20.0)
    args = parser.parse_args(argv)
    counts = campaign(args.cases, args.seed, args.time_limit,
                      say=lambda text: print(text, file=sys.stderr))
    print(f"{args.cases} cases in {counts['seconds']} s (seed {args.seed})")
    for outcome in OUTCOMES:
        print(f"  {outcome:<10}{counts[outcome]:>7}")
    formats = sorted({k.split(":")[0] for k in counts if ":" in k})
    for fmt in formats:
        print(f"  {fmt:<20}" + "  ".join(f"{o} {counts[f'{fmt}:{o}']}" for o in OUTCOMES))
    return 1 if any(counts[o] for o in BAD) else 0


if __name__ == "__main__":
    raise SystemExit(main())
