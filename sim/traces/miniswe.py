"""mini-swe-agent trajectories (``.traj.json``, format ``mini-swe-agent-1.1``).

mini-swe-agent writes one trajectory per task instance, laid out as
``RUN_DIR/INSTANCE/INSTANCE.traj.json``; SWE-bench's evaluation writes a report
(a JSON object with ``resolved_ids``, ``unresolved_ids``...) that an importer
may meet beside them, and mini-swe-agent itself a ``preds.json`` (patches by
instance, no trajectory). All three are recognised by content.

One trajectory is one run: ``run_id`` is ``RUN_DIR/INSTANCE`` when the file
sits in that layout, else the instance id; ``task_id`` the instance id. Its
**model calls** are the assistant messages, each with the provider's raw
response in ``extra.response``: ``usage.prompt_tokens`` (OpenAI-style: the
whole prompt, cache included) with the cache read from
``prompt_tokens_details.cached_tokens`` or DeepSeek's
``prompt_cache_hit_tokens`` and the cache write from
``cache_creation_input_tokens``; ``completion_tokens`` with reasoning from
``completion_tokens_details.reasoning_tokens``; ``extra.cost``; the finish
reason of the first choice. A message without usage makes the run unusable.

Times: mini-swe-agent stamps each message when it is recorded
(``extra.timestamp``, Unix seconds): a call starts when the message before it
was recorded (so the first call's start and latency are unknown) and a tool's
duration runs from the message before its result to the result. The run starts
at the first response's ``created`` time (whole seconds; the trajectory records
nothing earlier) and lasts to the last timestamp.

Tool calls: the OpenAI ``tool_calls`` of the message, answered by the ``tool``
messages with the same ``tool_call_id``: the result is the message content (the
observation the model reads), an error when the command's ``returncode`` is
not 0 or an ``exception_info`` is set. ``user`` messages between calls (format
errors, notes) are ``observation_tokens``, their texts joined in order
``observation_sha256`` (null when there are none); the assistant message's
content gives ``text_tokens`` and ``text_sha256``. Run fields: ``info.exit_status``
verbatim as ``exit``; ``info.model_stats.instance_cost`` as ``cost_usd``;
``info.config.agent.step_limit`` and ``cost_limit`` (0, mini-swe-agent's "no
limit", becomes null); ``resolved`` from a SWE-bench report (see
:class:`Reports`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    approx_tokens,
    as_dict,
    as_list,
    canonical_arguments,
    content_text,
    finite_or_none,
    joined_sha256,
    sha256_text,
    tool_result,
    utc_from_unix,
)
from sim.traces.skips import NO_CALLS, NO_USAGE, Unusable
from sim.traces.usage import from_total_prompt

SOURCE = "mini-swe-agent"
_REPORT_LISTS = ("resolved_ids", "unresolved_ids", "error_ids", "completed_ids",
                 "incomplete_ids", "empty_patch_ids")


def detect(doc: Any) -> str | None:
    """``"trajectory"``, ``"report"`` (SWE-bench), ``"predictions"`` or None."""
    if not isinstance(doc, dict):
        return None
    fmt = doc.get("trajectory_format")
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return "trajectory"
    info = doc.get("info")
    if isinstance(info, dict) and "exit_status" in info and isinstance(doc.get("messages"),
                                                                        list):
        return "trajectory"
    if isinstance(doc.get("resolved_ids"), list):
        return "report"
    if doc and all(isinstance(v, dict) and "model_patch" in v for v in doc.values()):
        return "predictions"
    return None


class Reports:
    """SWE-bench reports met during an import, by folder: an instance is
    resolved (True) if listed in ``resolved_ids``, not (False) if listed in
    another list of the report; a trajectory takes the verdict of the nearest
    report in its own folder or an ancestor folder that lists it."""

    def __init__(self) -> None:
        self._by_folder: dict[Path, dict[str, bool]] = {}

    def add(self, doc: dict, path: Path) -> int:
        """Register the report at ``path``; returns how many instances it lists."""
        verdicts = self._by_folder.setdefault(path.parent.resolve(), {})
        for key in _REPORT_LISTS:
            for instance in as_list(doc.get(key)):
                if key == "resolved_ids":
                    verdicts[str(instance)] = True
                else:
                    verdicts.setdefault(str(instance), False)
        return len(verdicts)

    def verdict(self, trajectory: Path, instance: str) -> bool | None:
        folder = trajectory.parent.resolve()
        for candidate in (folder, *folder.parents):
            found = self._by_folder.get(candidate, {}).get(instance)
            if found is not None:
                return found
        return None


def run(doc: dict, path: Path, file: str) -> RunRecord:
    """The run of one trajectory document."""
    info = as_dict(doc.get("info"))
    instance = doc.get("instance_id")
    if not isinstance(instance, str):
        instance = path.name.split(".traj")[0]
    run_id = f"{path.parent.parent.name}/{instance}" if path.parent.name == instance else instance
    config = as_dict(info.get("config"))
    agent = as_dict(config.get("agent"))
    model_config = as_dict(config.get("model"))
    model = model_config.get("model_name") if isinstance(model_config.get("model_name"),
                                                         str) else None
    calls, start, end = _calls(as_list(doc.get("messages")), model)
    stats = as_dict(info.get("model_stats"))
    exit_label = info.get("exit_status")
    return RunRecord(
        run_id=run_id, source=SOURCE, file=file, calls=calls, task_id=instance, model=model,
        cost_usd=finite_or_none(stats.get("instance_cost")),
        exit=None if exit_label is None else str(exit_label),
        started_at=utc_from_unix(start),
        duration_s=None if start is None or end is None else end - start,
        step_limit=_limit(agent.get("step_limit"), int),
        cost_limit_usd=_limit(agent.get("cost_limit"), float))


def _calls(messages: Iterable[Any], model: str | None
           ) -> tuple[list[CallRecord], float | None, float | None]:
    calls: list[CallRecord] = []
    pending: dict[str, ToolCallRecord] = {}
    notes: list[list[str | None]] = []  # per call, the user messages' texts after it
    previous: float | None = None  # the last recorded timestamp
    start: float | None = None
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        extra = as_dict(message.get("extra"))
        moment = finite_or_none(extra.get("timestamp"))
        if role == "assistant":
            response = as_dict(extra.get("response"))
            if start is None:
                start = finite_or_none(response.get("created"))
            call = _call(message, response, position, model, previous, moment, start)
            calls.append(call)
            notes.append([])
            pending = {t.id: t for t in call.tool_calls if t.id is not None}
        elif role == "tool":
            record = pending.pop(str(message.get("tool_call_id")), None)
            if record is not None:
                code = extra.get("returncode")
                failed = bool(extra.get("exception_info")) or (code is not None and code != 0)
                record.result_tokens, record.result_sha256, record.error = tool_result(
                    content_text(message.get("content")), error=failed)
                if moment is not None and previous is not None:
                    record.duration_s = moment - previous
        elif role == "user" and calls:
            text = content_text(message.get("content"))
            calls[-1].observation_tokens = (calls[-1].observation_tokens or 0) + approx_tokens(text)
            notes[-1].append(text)
        if moment is not None:
            previous = moment
    if not calls:
        raise Unusable(NO_CALLS, "no assistant message in the trajectory")
    for call, texts in zip(calls, notes, strict=True):
        if call.observation_tokens is None:
            call.observation_tokens = 0
        call.observation_sha256 = joined_sha256(texts)
    return calls, start, previous


def _call(message: dict, response: dict, position: int, model: str | None,
          before: float | None, moment: float | None, start: float | None) -> CallRecord:
    where = f"message {position}"
    usage = response.get("usage")
    if not isinstance(usage, dict):
        raise Unusable(NO_USAGE, f"{where}: assistant message without extra.response.usage")
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    read = details.get("cached_tokens")
    if read is None:
        read = usage.get("prompt_cache_hit_tokens", usage.get("cache_read_input_tokens"))
    write = usage.get("cache_creation_input_tokens", details.get("cache_write_tokens"))
    completion = usage.get("completion_tokens_details")
    reasoning = completion.get("reasoning_tokens") if isinstance(completion, dict) else None
    counts = from_total_prompt(usage.get("prompt_tokens"), usage.get("completion_tokens"),
                               cache_read=read, cache_write=write, reasoning=reasoning,
                               where=where)
    choices = response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    finish = first.get("finish_reason") if isinstance(first, dict) else None
    tools = []
    for call in as_list(message.get("tool_calls")):
        if not isinstance(call, dict):
            continue
        function = as_dict(call.get("function"))
        tools.append(ToolCallRecord(
            name=str(function.get("name")), id=None if call.get("id") is None else str(call["id"]),
            arguments=canonical_arguments(function.get("arguments"))))
    text = content_text(message.get("content"))
    return CallRecord(
        *counts, model=response.get("model") if isinstance(response.get("model"), str) else model,
        cost_usd=finite_or_none(as_dict(message.get("extra")).get("cost")),
        finish_reason=None if finish is None else str(finish),
        started_s=(before - start if before is not None and moment is not None
                   and start is not None else None),  # both times known, as for latency
        latency_s=moment - before if moment is not None and before is not None else None,
        text_tokens=approx_tokens(text), text_sha256=sha256_text(text), tool_calls=tools)


def _limit(value: Any, kind: type) -> Any:
    """A mini-swe-agent limit: 0 (or missing) means none."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return kind(value)
