"""LangSmith runs, as the ``langsmith`` SDK posts them and as they are exported.

Recognised by content:

- **batch posts** (the body the SDK sends to ``POST /runs/batch``):
  ``{"post": [run...], "patch": [run...]}``, one per file or one per line
  (a capture of several posts); a patch updates the run of its ``id``;
- **PATCH bodies**: the JS SDK's ``updateRun`` sends ``PATCH /runs/{id}``
  with the id in the URL only, so a captured body (``RunTree.patchRun``:
  ``name``, ``run_type``, ``end_time``, ``outputs``, ``extra``, ``trace_id``,
  ``dotted_order``...) has no ``id``; neither has a patch entry exported
  from such a body. Such a step is matched to its post by its
  ``dotted_order``, whose last segment is ``{time}Z{run id}``
  (:func:`step_id`); a body with neither is skipped (``no per-call
  trajectory``: it cannot be placed);
- **exported runs**: a list of run objects (``id``, ``run_type``,
  ``trace_id``...), ``{"runs": [...]}`` as ``POST /runs/query`` returns, or
  one run per line.

A LangSmith "run" is one step of a trace (``run_type`` ``llm``, ``tool``,
``chain``, ``retriever``...). Here **one run is one trace** (``trace_id``), its
steps gathered across files, a step seen twice (posted, then exported) taken
once with later fields overriding earlier ones:

- **a model call** is an ``llm`` step. Its usage is LangChain's
  ``usage_metadata`` (in ``outputs``, else ``extra.metadata``):
  ``input_tokens`` is the whole prompt (the cache reads and writes of
  ``input_token_details`` are subtracted: input provenance ``derived``) and
  ``output_tokens`` the whole output (``output_token_details``' reasoning is
  subtracted: ``derived``); the details' spellings, with an OpenAI service
  tier's (``flex_cache_read``) and Anthropic's writes by lifetime
  (``ephemeral_5m_input_tokens``), are read by
  :func:`~sim.traces.usage.langchain_details`; a step with no usage is a call whose counts are
  unknown (provenance ``unknown``, counts 0), its trace kept; else an export's
  ``prompt_tokens``/``completion_tokens`` with ``prompt_token_details`` and
  ``completion_token_details`` alike; else an OpenAI ``usage`` in
  ``outputs``. Cost as recorded: the step's ``total_cost``, else
  ``usage_metadata.total_cost``. The model from ``extra.metadata.ls_model_name``,
  else ``outputs.model``; the text and finish reason from the outputs'
  first choice (OpenAI shape) or ``content``/``stop_reason`` (Anthropic shape);
- **a tool call** is a ``tool`` step (its name, ``inputs`` the arguments,
  ``outputs.output`` the result, an ``error`` flagged), on the last call that
  started before it in the same agent;
- **subagents**: LangSmith has no agent step type; a model call nested under a
  ``tool`` step was made by an agent the tool ran (a subagent): ``agent`` is
  that tool step's id, and the tool call keeps its place in the parent;
- run fields: the trace's root ``error`` as ``exit``; times from the steps
  (ISO strings, or the JS SDK's epoch milliseconds: :func:`moment`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from sim.traces.assemble import (
    exit_label,
    extent,
    main_model,
    nearest,
    order_time,
    owner_before,
    ran_tool,
    run_cost,
    seconds,
    text_fields,
)
from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    as_dict,
    as_list,
    content_text,
    finite_or_none,
    parse_utc,
    utc_from_unix,
)
from sim.traces.skips import NO_CALLS, NO_TRAJECTORY, Skip, Unusable, or_skip
from sim.traces.usage import (
    derived,
    from_openai,
    from_total_prompt,
    langchain_details,
    unknown_usage,
)

SOURCE = "langsmith"


def step_id(step: dict) -> str | None:
    """A step's run id: its ``id``, else the run id its ``dotted_order`` ends
    with (the last segment is ``{%Y%m%dT%H%M%S%f}Z{run id}``, the id after the
    first ``Z``); None when it has neither.

    >>> step_id({"dotted_order": "20250101T000000000000Za.20250101T000001000000Zb"})
    'b'
    """
    if step.get("id") is not None:
        return str(step["id"])
    order = step.get("dotted_order")
    if isinstance(order, str):
        stamp, zulu, ident = order.rsplit(".", 1)[-1].partition("Z")
        if zulu and ident and stamp[:8].isdigit():
            return ident
    return None


def moment(value: Any) -> datetime | None:
    """A step's ``start_time`` or ``end_time``: an ISO 8601 string (the Python
    SDK, and the JS SDK's start), or a number of milliseconds since the
    epoch (the JS SDK's ``end_time``, ``Date.now()``); None otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return utc_from_unix(value / 1000)
    return parse_utc(value)


def _is_step(value: Any) -> bool:
    """A run object, or a PATCH body that names its run only by ``dotted_order``
    (with its ``run_type``, or its ``trace_id`` as LangChain's tracer sends)."""
    if not isinstance(value, dict):
        return False
    ordered = isinstance(value.get("dotted_order"), str)
    if isinstance(value.get("run_type"), str):
        return "id" in value or ordered
    return ordered and isinstance(value.get("trace_id"), str)


def _is_batch(value: Any) -> bool:
    return isinstance(value, dict) and bool({"post", "patch"} & value.keys()) \
        and all(isinstance(value.get(k, []), list) for k in ("post", "patch")) \
        and all(isinstance(s, dict) for k in ("post", "patch") for s in value.get(k, []))


def detect(values: list[Any]) -> bool:
    """Whether a file's JSON ``values`` are LangSmith batch posts or runs."""
    if not values:
        return False
    if all(_is_batch(v) for v in values):
        return True
    if len(values) > 1:
        return all(_is_step(v) for v in values)
    doc = values[0]
    if isinstance(doc, dict) and isinstance(doc.get("runs"), list):
        doc = doc["runs"]
    return isinstance(doc, list) and bool(doc) and all(_is_step(v) for v in doc)


def steps(values: list[Any]) -> Iterator[dict]:
    """The step objects of a file's values (batch posts' ``post`` then ``patch``)."""
    for value in values:
        if _is_batch(value):
            yield from (s for s in value.get("post", []) if isinstance(s, dict))
            yield from (s for s in value.get("patch", []) if isinstance(s, dict))
        elif isinstance(value, dict) and isinstance(value.get("runs"), list):
            yield from (s for s in value["runs"] if isinstance(s, dict))
        elif isinstance(value, list):
            yield from (s for s in value if isinstance(s, dict))
        elif isinstance(value, dict):
            yield value


@dataclass
class Collector:
    """LangSmith steps gathered across files: merged by id, grouped by trace."""

    steps: dict[str, dict] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    unplaced: dict[str, int] = field(default_factory=dict)
    """Per file, the steps with neither ``id`` nor ``dotted_order``."""

    def add(self, values: list[Any], file: str) -> None:
        for step in steps(values):
            ident = step_id(step)
            if ident is None:
                self.unplaced[file] = self.unplaced.get(file, 0) + 1
                continue
            merged = self.steps.setdefault(ident, {})
            merged.update({k: v for k, v in step.items() if v is not None})
            merged["id"] = ident
            self.files.setdefault(ident, file)

    def runs(self) -> Iterator[RunRecord | Skip]:
        for file, n in self.unplaced.items():
            yield Skip(file, NO_TRAJECTORY, f"{n} step{'' if n == 1 else 's'} without id or "
                                            "dotted_order: not matched to any run")
        traces: dict[str, list[dict]] = defaultdict(list)
        for ident, step in self.steps.items():
            traces[str(step.get("trace_id") or ident)].append(step)
        order = sorted(traces, key=lambda t: (min(_start(s) for s in traces[t]), t))
        for trace in order:
            items = sorted(traces[trace], key=lambda s: (_start(s), str(s.get("id"))))
            file = self.files[str(items[0].get("id"))]
            yield or_skip(partial(_run, trace, items, file), file, trace, deep=False)


def _start(step: dict) -> float:
    return order_time(moment(step.get("start_time")))


def _run(trace: str, items: list[dict], file: str) -> RunRecord:
    by_id = {str(s.get("id")): s for s in items}

    def tool_above(step: dict) -> str | None:
        return nearest(step.get("parent_run_id"), lambda i: by_id[i].get("parent_run_id"),
                       lambda i: by_id[i].get("run_type") == "tool", by_id.__contains__)

    first, last = extent((moment(s.get("start_time")) for s in items),
                         (moment(s.get("end_time")) for s in items))
    calls: list[CallRecord] = []
    owners: dict[str | None, list[int]] = defaultdict(list)
    for step in (s for s in items if s.get("run_type") == "llm"):
        agent = tool_above(step)
        calls.append(_call(step, first, agent))
        owners[agent].append(len(calls) - 1)
    if not calls:
        raise Unusable(NO_CALLS, f"{len(items)} steps, none of run_type llm")
    for step in (s for s in items if s.get("run_type") == "tool"):
        owner = owner_before(calls, owners.get(tool_above(step), []),
                             seconds(moment(step.get("start_time")), first))
        if owner is not None:
            calls[owner].tool_calls.append(_tool(step))
    root = next((s for s in items if not s.get("parent_run_id")), None)
    error = None if root is None else root.get("error")
    return RunRecord(
        run_id=trace, source=SOURCE, file=file, calls=calls, model=main_model(calls),
        cost_usd=run_cost(calls),
        exit=exit_label(error) if error else None, started_at=first,
        duration_s=seconds(last, first))


def counts(step: dict, where: str) -> tuple[Usage, dict[str, str]]:
    """A step's usage in the trace model's convention (see the module
    docstring) and its provenance: the input ``derived`` when a cache count
    was subtracted from the prompt, the output when reasoning was; every
    column ``unknown`` (counts 0) when the step records no usage."""
    found = _recorded(step, where)
    if found is None:
        return unknown_usage()
    usage, prompt, output = found
    return usage, derived(usage, prompt, output, where)


def _recorded(step: dict, where: str) -> tuple[Usage, Any, Any] | None:
    """A step's usage, with the prompt and output totals it was read from;
    None when it records none."""
    outputs = as_dict(step.get("outputs"))
    usage = outputs.get("usage_metadata")
    if not isinstance(usage, dict):
        usage = as_dict(as_dict(step.get("extra")).get("metadata")).get("usage_metadata")
    if isinstance(usage, dict) and "input_tokens" in usage:
        read, write, reasoning = langchain_details(usage.get("input_token_details"),
                                                   usage.get("output_token_details"), where)
        return from_total_prompt(usage.get("input_tokens"), usage.get("output_tokens"),
                                 cache_read=read, cache_write=write, reasoning=reasoning,
                                 where=where,
                                 names=("usage_metadata.input_tokens",
                                        "usage_metadata.output_tokens")), \
            usage.get("input_tokens"), usage.get("output_tokens")
    if step.get("prompt_tokens") is not None:
        read, write, reasoning = langchain_details(step.get("prompt_token_details"),
                                                   step.get("completion_token_details"), where)
        return from_total_prompt(step.get("prompt_tokens"), step.get("completion_tokens", 0),
                                 cache_read=read, cache_write=write, reasoning=reasoning,
                                 where=where), \
            step.get("prompt_tokens"), step.get("completion_tokens", 0)
    openai = outputs.get("usage")
    if isinstance(openai, dict) and "prompt_tokens" in openai:
        return from_openai(openai, where)[0], openai.get("prompt_tokens"), \
            openai.get("completion_tokens")
    return None


def _call(step: dict, first: datetime | None, agent: str | None) -> CallRecord:
    where = f"step {step.get('id')} ({step.get('name')})"
    outputs = as_dict(step.get("outputs"))
    metadata = as_dict(as_dict(step.get("extra")).get("metadata"))
    model = metadata.get("ls_model_name") or outputs.get("model")
    cost = finite_or_none(step.get("total_cost"))
    if cost is None:
        cost = finite_or_none(as_dict(outputs.get("usage_metadata")).get("total_cost"))
    text, finish = _response(outputs)
    start = moment(step.get("start_time"))
    usage, provenance = counts(step, where)
    return CallRecord(
        usage=usage, provenance=provenance, model=None if model is None else str(model),
        cost_usd=cost,
        finish_reason=finish, started_s=seconds(start, first),
        latency_s=seconds(moment(step.get("end_time")), start), **text_fields(text),
        agent=agent)


def _response(outputs: dict) -> tuple[str | None, str | None]:
    """The response's text and finish reason: OpenAI's first choice, else an
    Anthropic-shaped ``content``/``stop_reason``."""
    choices = as_list(outputs.get("choices"))
    if choices:
        choice = as_dict(choices[0])
        reason = choice.get("finish_reason")
        return (content_text(as_dict(choice.get("message")).get("content")),
                None if reason is None else str(reason))
    if "content" in outputs:
        reason = outputs.get("stop_reason")
        return content_text(outputs.get("content")), None if reason is None else str(reason)
    return None, None


def _tool(step: dict) -> ToolCallRecord:
    outputs = step.get("outputs")
    result = as_dict(outputs).get("output", outputs) if isinstance(outputs, dict) else outputs
    return ran_tool(step.get("name", ""), str(step.get("id")), step.get("inputs"), result,
                    error=bool(step.get("error")), duration_s=seconds(
                        moment(step.get("end_time")), moment(step.get("start_time"))))
