"""mini-swe-agent trajectories (``.traj.json``, formats ``mini-swe-agent-1`` and ``-1.1``).

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
``completion_tokens_details.reasoning_tokens`` (a run any of whose calls has
more cache than prompt, or more reasoning than output, is read with them
counted apart: :mod:`sim.traces.usage`); ``extra.cost``; the finish reason of
the first choice. A message without usage makes the run unusable. In format
``-1.1`` a response that failed to parse is not an assistant message but the
``user`` message of the format error (``extra.interrupt_type`` ``FormatError``)
carrying the billed ``extra.response``: it is a call too, without tool calls
(its text is ``extra.model_response``). A trajectory without any call (the
agent failed before its first reply) is a run of zero calls, with its exit.

Times: mini-swe-agent stamps each message when it is recorded
(``extra.timestamp``, or the message's own ``timestamp`` in 1.x, Unix
seconds): a call starts when the message before it was recorded (so the first
call's start and latency are unknown) and a tool's duration runs from the
message before its result to the result. The run starts at the first
response's ``created`` time (whole seconds; the trajectory records nothing
earlier) and lasts to the last timestamp.

**Tool calls**, as the format records them:

- **tool calling** (``-1.1`` with a tool-calling model): the OpenAI
  ``tool_calls`` of the message, answered by the ``tool`` messages with the
  same ``tool_call_id``: the result is the message content (the observation
  the model reads), an error when the command's ``returncode`` is not 0 or an
  ``exception_info`` is set;
- **text actions** (``mini-swe-agent-1``, and ``-1.1`` with a text-based
  model): no ``tool_calls``; the command is in a fenced block of the
  assistant's text. The actions are the message's ``extra.actions`` when the
  agent recorded them (``-1.1``), else what mini-swe-agent's own parser finds:
  ``re.findall(action_regex, content, re.DOTALL)``, stripped, with the
  trajectory's configured ``action_regex`` (``info.config.agent`` in 1.x,
  ``info.config.model`` in 2.x) or the format's default (1.x
  ``DefaultAgent``: :data:`V1_ACTION_REGEX`; 2.x text-based models:
  :data:`TEXT_ACTION_REGEX`). Exactly one action is a tool call named
  ``bash`` with arguments ``{"command": action}`` (the shape of
  mini-swe-agent's own bash tool); zero or several are the format's error: no
  tool call, and the format error fed back is the call's observation. An
  action is answered by the next ``user`` message: in ``-1.1`` the
  observation messages carry ``extra.returncode`` (an error when not 0 or
  with ``exception_info``); in 1.x the observation is text, an error when it
  holds ``<returncode>N</returncode>`` with N not 0 (null when it does not say).

``user`` messages between calls that answer no action (format errors, notes)
are ``observation_tokens``, their texts joined in order
``observation_sha256`` (null when there are none); the assistant message's
content gives ``text_tokens`` and ``text_sha256``. Run fields:
``info.exit_status`` verbatim as ``exit``; ``info.model_stats.instance_cost`` as
``cost_usd``; ``info.config.agent.step_limit`` and ``cost_limit`` (0,
mini-swe-agent's "no limit", becomes null; an impossible value is nulled and
counted by the writer); ``resolved`` from a SWE-bench report (see
:class:`Reports`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    approx_tokens,
    as_dict,
    as_list,
    canonical_arguments,
    canonical_json,
    content_text,
    joined_sha256,
    sha256_text,
    tool_result,
    utc_from_unix,
)
from sim.traces.repairs import Repair
from sim.traces.skips import NO_USAGE, Unusable
from sim.traces.usage import from_total_prompt, needs_apart

SOURCE = "mini-swe-agent"
_REPORT_LISTS = ("resolved_ids", "unresolved_ids", "error_ids", "completed_ids",
                 "incomplete_ids", "empty_patch_ids")

V1_ACTION_REGEX = r"```bash\s*\n(.*?)\n```"
"""mini-swe-agent 1.x ``AgentConfig.action_regex`` (``agents/default.py``)."""
TEXT_ACTION_REGEX = r"```mswea_bash_command\s*\n(.*?)\n```"
"""mini-swe-agent 2.x ``LitellmTextbasedModelConfig.action_regex``."""
ACTION_TOOL = "bash"
"""The name a text action's tool call gets (mini-swe-agent's own bash tool)."""
REGEX_TIMEOUT_S = 2.0
"""At most this long (seconds) for one message's action search: the pattern
comes from the file, and a pathological one must not hang an import."""
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d{1,6})\s*</returncode>")
_V1 = "mini-swe-agent-1"


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


# ---------------------------------------------------------------- reports

REPORTS_FOLDER = "sb-cli-reports"
"""Where sb-cli saves reports (``--output_dir`` default), next to the
predictions it submitted: ``{subset}__{split}__{run_id}.json`` (then ``-1``,
``-2``... when the name is taken), ``run_id`` being the predictions' folder
name by default."""


@dataclass(frozen=True, slots=True)
class _Report:
    folder: Path
    stem: str
    verdicts: dict[str, bool]


class Reports:
    """SWE-bench reports met during an import, each applied to its own run.

    An instance is resolved (True) if the report lists it in ``resolved_ids``,
    not (False) if in another of its lists. A report belongs to the run whose
    run folder or model it names in its file name (a report that names
    another run folder of the import is that run's, even if it names the
    model too): sb-cli's
    ``{subset}__{split}__{run_id}.json`` (``run_id`` the run folder by
    default; a ``-N`` suffix for a re-fetched report), SWE-bench's own
    ``{model}.{run_id}.json`` (the model with ``/`` as ``__``). It is looked
    for in the trajectory's folder and its ancestors, and in a
    ``sb-cli-reports/`` folder beside any of them. The report that names the
    run folder wins over one that names only the model; nearer folders win
    over farther ones; a report that names nothing counts only when it is the
    only report in the run folder itself (or in its ``sb-cli-reports/``).
    Reports are never merged: a run takes one report's verdict, and a run
    with no report of its own gets None (unknown)."""

    def __init__(self) -> None:
        self._reports: list[_Report] = []

    def add(self, doc: dict, path: Path) -> int:
        """Register the report at ``path``; returns how many instances it lists."""
        verdicts: dict[str, bool] = {}
        for key in _REPORT_LISTS:
            for instance in as_list(doc.get(key)):
                if not isinstance(instance, str | int) or isinstance(instance, bool):
                    continue
                if key == "resolved_ids":
                    verdicts[str(instance)] = True
                else:
                    verdicts.setdefault(str(instance), False)
        self._reports.append(_Report(_resolved_folder(path.parent), _stem(path.name),
                                     verdicts))
        return len(verdicts)

    def verdict(self, trajectory: Path, instance: str, run_folder: str | None = None,
                model: str | None = None, run_folders: frozenset[str] = frozenset()
                ) -> bool | None:
        """The verdict on ``instance`` of the report that belongs to the run of
        ``trajectory`` (in ``run_folder``, by ``model``; ``run_folders``: every
        run folder of the import), or None."""
        report = self.report_for(trajectory, run_folder, model, run_folders)
        return None if report is None else report.verdicts.get(instance)

    def report_for(self, trajectory: Path, run_folder: str | None, model: str | None,
                   run_folders: frozenset[str] = frozenset()) -> _Report | None:
        folders = [_resolved_folder(trajectory.parent)]
        folders += list(folders[0].parents)
        distance: dict[Path, int] = {}
        for i, folder in enumerate(folders):
            distance.setdefault(folder, 2 * i)
            distance.setdefault(folder / REPORTS_FOLDER, 2 * i + 1)
        home = folders[1] if run_folder is not None and len(folders) > 1 else folders[0]
        models = {m for m in (model, model.replace("/", "__") if model else None) if m}
        best: tuple[int, int, str] | None = None
        chosen = None
        for report in self._reports:
            if report.folder not in distance:
                continue
            names_run = _names(report.stem, run_folder)
            if not names_run and any(_names(report.stem, other) for other in run_folders
                                     if other != run_folder):
                continue  # another run's report
            score = 2 * names_run + any(_names(report.stem, m) for m in models)
            if score == 0:
                alone = sum(r.folder == report.folder for r in self._reports) == 1
                if not (alone and report.folder in (home, home / REPORTS_FOLDER)):
                    continue
            key = (score, -distance[report.folder], report.stem)
            if best is None or key > best:
                best, chosen = key, report
        return chosen


def _resolved_folder(folder: Path) -> Path:
    try:
        return folder.resolve()
    except (OSError, RuntimeError):  # a symlink loop: the folder as named
        return folder.absolute()


def _stem(name: str) -> str:
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def _names(stem: str, name: str | None) -> bool:
    """Whether a report's file stem names ``name`` as a whole part (between
    ``__`` or ``.`` separators, or all of it), a ``-N`` suffix allowed."""
    if not name:
        return False
    for candidate in {stem, re.sub(r"-\d+$", "", stem)}:
        if candidate == name:
            return True
        for sep in ("__", "."):
            if (candidate.endswith(sep + name) or candidate.startswith(name + sep)
                    or f"{sep}{name}{sep}" in candidate):
                return True
    return False


# ------------------------------------------------------------ trajectories

def run_folder(path: Path, instance: str) -> str | None:
    """The run folder of a trajectory laid out as ``RUN_DIR/INSTANCE/INSTANCE.traj.json``."""
    return path.parent.parent.name if path.parent.name == instance else None


def run(doc: dict, path: Path, file: str) -> RunRecord:
    """The run of one trajectory document."""
    record = _run(doc, path, file, (False, False))
    apart = needs_apart(record.repairs)
    if any(apart):  # the source counts apart: every call of the run is read so
        record = _run(doc, path, file, apart)
    return record


def _run(doc: dict, path: Path, file: str, apart: tuple[bool, bool]) -> RunRecord:
    info = as_dict(doc.get("info"))
    instance = doc.get("instance_id")
    if not isinstance(instance, str):
        instance = path.name.split(".traj")[0]
    folder = run_folder(path, instance)
    run_id = f"{folder}/{instance}" if folder is not None else instance
    config = as_dict(info.get("config"))
    agent = as_dict(config.get("agent"))
    model_config = as_dict(config.get("model"))
    model = model_config.get("model_name") if isinstance(model_config.get("model_name"),
                                                         str) else None
    fmt = doc.get("trajectory_format")
    pattern = _action_pattern(agent.get("action_regex") if fmt == _V1 else
                              model_config.get("action_regex", agent.get("action_regex")),
                              V1_ACTION_REGEX if fmt == _V1 else TEXT_ACTION_REGEX)
    notes: list[Repair] = []
    calls, start, end = _calls(as_list(doc.get("messages")), model, pattern, notes, apart)
    stats = as_dict(info.get("model_stats"))
    exit_label = info.get("exit_status")
    return RunRecord(
        run_id=run_id, source=SOURCE, file=file, calls=calls, task_id=instance, model=model,
        cost_usd=_number(stats.get("instance_cost")),
        exit=None if exit_label is None else str(exit_label),
        started_at=utc_from_unix(start),
        duration_s=None if start is None or end is None else end - start,
        step_limit=_limit(agent.get("step_limit")),
        cost_limit_usd=_limit(agent.get("cost_limit")), repairs=notes)


def _action_pattern(configured: Any, default: str) -> Any:
    """The compiled action regex: the trajectory's own, else ``default`` (also
    when the configured one does not compile)."""
    if isinstance(configured, str) and configured and len(configured) <= 10_000:
        try:
            return regex.compile(configured, regex.DOTALL)
        except (regex.error, ValueError, OverflowError, RecursionError):
            pass
    return regex.compile(default, regex.DOTALL)


def text_actions(content: str, pattern: Any) -> list[str] | None:
    """mini-swe-agent's parse: every match of ``pattern`` in ``content``,
    stripped (the first group when the pattern has groups, as re.findall
    gives); None when the search takes longer than :data:`REGEX_TIMEOUT_S`."""
    try:
        found = pattern.findall(content, timeout=REGEX_TIMEOUT_S)
    except TimeoutError:
        return None
    return [(m[0] if isinstance(m, tuple) else m).strip() for m in found]


def _calls(messages: Iterable[Any], model: str | None, pattern: Any, notes: list[Repair],
           apart: tuple[bool, bool]) -> tuple[list[CallRecord], float | None, float | None]:
    calls: list[CallRecord] = []
    pending: dict[str, ToolCallRecord] = {}
    waiting: list[ToolCallRecord] = []  # text actions, answered by the next user messages
    observations: list[list[str | None]] = []  # per call, the user messages' texts after it
    previous: float | None = None  # the last recorded timestamp
    start: float | None = None
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        extra = as_dict(message.get("extra"))
        moment = _number(extra.get("timestamp", message.get("timestamp")))
        response = as_dict(extra.get("response"))
        format_error = role == "user" and extra.get("interrupt_type") == "FormatError" \
            and bool(response)
        if role == "assistant" or format_error:
            if start is None:
                start = _number(response.get("created"))
            text = content_text(extra.get("model_response") if format_error
                                else message.get("content"))
            call = _call(message, response, position, model, previous, moment, start, text,
                         notes, apart)
            waiting = []
            if not format_error:
                _tools(call, message, extra, text, pattern)
                waiting = [t for t in call.tool_calls if t.id is None]
            calls.append(call)
            observations.append([])
            pending = {t.id: t for t in call.tool_calls if t.id is not None}
            if format_error:  # the error fed back is what the model reads next
                observations[-1].append(content_text(message.get("content")))
        elif role == "tool":
            record = pending.pop(str(message.get("tool_call_id")), None)
            if record is not None:
                _answer(record, content_text(message.get("content")), extra, previous, moment)
        elif role == "user" and calls:
            text = content_text(message.get("content"))
            if waiting and ("returncode" in extra or "raw_output" in extra or not extra):
                _answer(waiting.pop(0), text, extra, previous, moment)
            else:
                observations[-1].append(text)
        if moment is not None:
            previous = moment
    for call, texts in zip(calls, observations, strict=True):
        call.observation_tokens = sum(approx_tokens(t) for t in texts)
        call.observation_sha256 = joined_sha256(texts)
    return calls, start, previous


def _tools(call: CallRecord, message: dict, extra: dict, text: str | None,
           pattern: Any) -> None:
    """The call's tool calls: its ``tool_calls``, else its text actions."""
    if isinstance(message.get("tool_calls"), list) and message["tool_calls"]:
        for item in message["tool_calls"]:
            if not isinstance(item, dict):
                continue
            function = as_dict(item.get("function"))
            call.tool_calls.append(ToolCallRecord(
                name=str(function.get("name")),
                id=None if item.get("id") is None else str(item["id"]),
                arguments=canonical_arguments(function.get("arguments"))))
        return
    recorded = extra.get("actions")
    if isinstance(recorded, list) and recorded and all(
            isinstance(a, dict) and isinstance(a.get("command"), str) for a in recorded):
        actions = [a["command"] for a in recorded]
    else:
        found = text_actions(text or "", pattern)
        actions = found if found is not None and len(found) == 1 else []
    for action in actions:
        call.tool_calls.append(ToolCallRecord(name=ACTION_TOOL, arguments=canonical_json(
            {"command": action})))


def _answer(record: ToolCallRecord, text: str | None, extra: dict, previous: float | None,
            moment: float | None) -> None:
    code = extra.get("returncode")
    if "returncode" not in extra and text is not None:  # 1.x: the observation's text
        found = _RETURNCODE.search(text[-100_000:])
        code = int(found.group(1)) if found else None
        failed: bool | None = None if found is None else code != 0
    else:
        failed = bool(extra.get("exception_info")) or (code is not None and code != 0)
    record.result_tokens, record.result_sha256, record.error = tool_result(text, error=failed)
    if moment is not None and previous is not None:
        record.duration_s = moment - previous


def _call(message: dict, response: dict, position: int, model: str | None,
          before: float | None, moment: float | None, start: float | None, text: str | None,
          notes: list[Repair], apart: tuple[bool, bool]) -> CallRecord:
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
                               where=where, notes=notes, cache_apart=apart[0],
                               reasoning_apart=apart[1])
    choices = response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    finish = first.get("finish_reason") if isinstance(first, dict) else None
    return CallRecord(
        *counts, model=response.get("model") if isinstance(response.get("model"), str) else model,
        cost_usd=_number(as_dict(message.get("extra")).get("cost")),
        finish_reason=None if finish is None else str(finish),
        started_s=(before - start if before is not None and moment is not None
                   and start is not None else None),  # both times known, as for latency
        latency_s=moment - before if moment is not None and before is not None else None,
        text_tokens=approx_tokens(text), text_sha256=sha256_text(text))


def _number(value: Any) -> Any:
    """A number as recorded (the writer nulls and counts an impossible one), else None."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _limit(value: Any) -> Any:
    """A mini-swe-agent limit: 0 (or missing) means none; anything else as
    recorded (the writer nulls and counts an impossible one)."""
    number = _number(value)
    return None if number is None or number == 0 else number
