"""mini-swe-agent trajectories (``.traj.json``, formats ``mini-swe-agent-1`` and ``-1.1``).

A trajectory without ``trajectory_format`` (mini-swe-agent 1.0-1.3 write
none, nor ``info.config``) is read as ``mini-swe-agent-1``; it is recognised by
``info.exit_status`` beside a ``messages`` list.

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
the first choice. Provenance (:func:`sim.traces.usage.derived`): the uncached
input is derived when a cache count was subtracted from ``prompt_tokens``,
the output when reasoning was subtracted from ``completion_tokens``. A
message whose response records no usage is a call with its counts unknown
(0, provenance ``unknown``), its run kept. A model that speaks OpenAI's
Responses API (2.x ``litellm_response``, ``openrouter_response``,
``portkey_response``) stores each reply as the response itself (an object
``"response"``, no ``role``): its text is the ``message`` output items' text,
its tool calls the ``function_call`` items (answered by the
``function_call_output`` messages with the same ``call_id``), its usage the
Responses API's (:func:`sim.traces.usage.from_responses`: ``input_tokens``
with ``input_tokens_details.cached_tokens`` inside, ``output_tokens`` with
``output_tokens_details.reasoning_tokens`` inside), its finish reason its
``status`` (``length`` when it stopped at ``max_output_tokens``), its start
``created_at``. In format
``-1.1`` a response that failed to parse is not an assistant message but the
``user`` message of the format error (``extra.interrupt_type`` ``FormatError``)
carrying the billed ``extra.response``: it is a call too (its text is
``extra.model_response``, or the response's own content for a tool-calling
model), whose tool call is the rejected attempt (see **Format errors**).
2.0-2.3.0 keep no response there (2.3.1 on do; a text-based model's message has
``model_response`` and ``n_actions``, a tool-calling model's nothing more):
the call was made and billed all the same (``info.model_stats.api_calls``
counts it; ``instance_cost`` does not), so it is a call with its counts and
cost unknown, and a tool-calling model's attempt has its arguments
unrecorded. A trajectory without any call (the agent failed before its first
reply) is a run of zero calls, with its exit.

Times: mini-swe-agent stamps each message when it is recorded
(``extra.timestamp``, or the message's own ``timestamp`` in 1.x, Unix
seconds; 1.0-1.16 stamp nothing, 1.17 every message, 2.x the replies and the
observations only): a call starts when the message before it was recorded
and a tool's duration runs from the message before its result to the result,
each unknown when that message bears no stamp (in 2.x the task, so the first
call's start and latency, and a format error or an interruption, so the next
call's). The run starts at the first timestamp before the first call (1.17's
system message), else at the first response's ``created`` time (whole
seconds; 2.x stamps nothing earlier), and lasts to the last timestamp.

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
  trajectory's configured ``action_regex`` (``info.config.agent`` in 1.x from
  1.16, ``info.config.model`` in 2.x) or the parse of the version that wrote
  it (1.x: :data:`V1_ACTION_REGEX` when ``info.mini_version`` is 1.12 or
  later, else 1.0-1.11's :data:`V1_LEGACY_ACTION_REGEX`, nothing allowed
  between ``bash`` and the newline, also when no version is recorded, as
  1.0-1.4 record none; 2.x text-based models: :data:`TEXT_ACTION_REGEX`).
  Exactly one action is a tool call named ``bash`` with arguments
  ``{"command": action}`` (the shape of mini-swe-agent's own bash tool). An
  action is answered by the next ``user`` message: in ``-1.1`` the
  observation messages carry ``extra.returncode`` (an error when not 0 or
  with ``exception_info``); in 1.x the observation is text, an error when it
  holds ``<returncode>N</returncode>`` with N not 0 (null when it does not say).

**Format errors.** A response mini-swe-agent's parser rejects (a text with
zero or several actions, no tool call or a malformed one) is answered by the
format error, and the model must try again: the harness's validation error,
as sim's world has it (a call with bad arguments). Such a call has one tool
call named ``bash``, flagged as an error, whose result is the format error
fed back; its arguments (:func:`_rejected`) are what the parser found:
``{"actions": [...]}`` (the commands of a text, none or several) or
``{"tool_calls": [{"name", "arguments"}, ...]}`` (a tool-calling model's, as
sent). So a run with a format error is not a conversation with the
task-giver (a call without tool calls before its last), and the same failure
twice in a row is a repeat, as mini-swe-agent's own ``RepeatedFormatError``
counts it. In 1.x the assistant message is followed by the format error's
``user`` message; in ``-1.1`` the ``FormatError`` message is itself the
call. A text with zero or several actions that no ``user`` message answers
(the trajectory ends) stays a call without tool calls.

``user`` messages between calls that answer no action (notes, interruptions)
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
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import regex

from sim.traces.assemble import limit_or_none, number_or_none, openai_tool, requested_tool
from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    approx_tokens,
    as_dict,
    as_list,
    canonical_json,
    content_text,
    joined_sha256,
    sha256_text,
    tool_result,
    utc_from_unix,
)
from sim.traces.repairs import Repair
from sim.traces.swebench import REPORTS_FOLDER, Reports
from sim.traces.usage import from_openai, from_responses, read_apart, unknown_usage

SOURCE = "mini-swe-agent"
__all__ = ["REPORTS_FOLDER", "Reports", "detect", "run", "run_folder", "text_actions"]

V1_ACTION_REGEX = r"```bash\s*\n(.*?)\n```"
"""mini-swe-agent 1.x ``AgentConfig.action_regex`` (``agents/default.py``): the
parse of 1.12 on (written into the code until 1.15, configurable from 1.16)."""
V1_LEGACY_ACTION_REGEX = r"```bash\n(.*?)\n```"
"""The parse written into mini-swe-agent 1.0-1.11's ``DefaultAgent.parse_action``."""
TEXT_ACTION_REGEX = r"```mswea_bash_command\s*\n(.*?)\n```"
"""mini-swe-agent 2.x ``LitellmTextbasedModelConfig.action_regex``."""
ACTION_TOOL = "bash"
"""The name a text action's tool call gets (mini-swe-agent's own bash tool)."""
REGEX_TIMEOUT_S = 2.0
"""At most this long (seconds) for one message's action search: the pattern
comes from the file, and a pathological one must not hang an import."""
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d{1,6})\s*</returncode>")
_V1 = "mini-swe-agent-1"
_VERSION = re.compile(r"\s*(\d{1,4})\.(\d{1,4})")


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


# ------------------------------------------------------------ trajectories

def run_folder(path: Path, instance: str) -> str | None:
    """The run folder of a trajectory laid out as ``RUN_DIR/INSTANCE/INSTANCE.traj.json``."""
    return path.parent.parent.name if path.parent.name == instance else None


def run(doc: dict, path: Path, file: str) -> RunRecord:
    """The run of one trajectory document."""
    return read_apart(partial(_run, doc, path, file))


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
    v1 = fmt is None or fmt == _V1  # 1.0-1.3 write no format
    pattern = _action_pattern(agent.get("action_regex") if v1 else
                              model_config.get("action_regex", agent.get("action_regex")),
                              _v1_default(info.get("mini_version")) if v1 else TEXT_ACTION_REGEX)
    notes: list[Repair] = []
    calls, start, end = _calls(as_list(doc.get("messages")), model, pattern, notes, apart)
    stats = as_dict(info.get("model_stats"))
    exit_label = info.get("exit_status")
    return RunRecord(
        run_id=run_id, source=SOURCE, file=file, calls=calls, task_id=instance, model=model,
        cost_usd=number_or_none(stats.get("instance_cost")),
        exit=None if exit_label is None else str(exit_label),
        started_at=utc_from_unix(start),
        duration_s=None if start is None or end is None else end - start,
        step_limit=limit_or_none(agent.get("step_limit")),
        cost_limit_usd=limit_or_none(agent.get("cost_limit")), repairs=notes)


def _v1_default(version: Any) -> str:
    """The action regex of a 1.x trajectory that records none: by
    ``info.mini_version`` (written from 1.5), :data:`V1_ACTION_REGEX` from 1.12,
    else (earlier, or no version) :data:`V1_LEGACY_ACTION_REGEX`."""
    found = _VERSION.match(version) if isinstance(version, str) else None
    if found and (int(found.group(1)), int(found.group(2))) >= (1, 12):
        return V1_ACTION_REGEX
    return V1_LEGACY_ACTION_REGEX


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
    """The calls of a trajectory's messages, and its first and last times."""
    trajectory = _Trajectory(model, pattern, notes, apart)
    for position, message in enumerate(messages):
        if isinstance(message, dict):
            trajectory.read(position, message)
    calls = [replace(call, observation_tokens=sum(approx_tokens(t) for t in texts),
                     observation_sha256=joined_sha256(texts))
             for call, texts in zip(trajectory.calls, trajectory.observations, strict=True)]
    return calls, trajectory.start, trajectory.end


class _Trajectory:
    """A trajectory's messages read in order into calls (see the module)."""

    def __init__(self, model: str | None, pattern: Any, notes: list[Repair],
                 apart: tuple[bool, bool]) -> None:
        self.model, self.pattern, self.notes, self.apart = model, pattern, notes, apart
        self.calls: list[CallRecord] = []
        self.pending: dict[str, ToolCallRecord] = {}
        self.waiting: list[ToolCallRecord] = []  # text actions, answered by user messages
        self.rejected: ToolCallRecord | None = None  # a text the parser rejects, till answered
        self.observations: list[list[str | None]] = []  # per call, the texts after it
        self.previous: float | None = None  # the timestamp of the message just read
        self.end: float | None = None  # the last timestamp recorded
        self.opening: float | None = None  # the first timestamp before the first call
        self.start: float | None = None

    def read(self, position: int, message: dict) -> None:
        """Take one message: a call, a tool's answer or a user message."""
        role = message.get("role")
        extra = as_dict(message.get("extra"))
        moment = number_or_none(extra.get("timestamp", message.get("timestamp")))
        response = as_dict(extra.get("response"))  # none on 2.0-2.3.0's format errors
        format_error = role == "user" and extra.get("interrupt_type") == "FormatError"
        call = message.get("object") == "response" or role == "assistant" or format_error
        if not call and not self.calls and moment is not None and self.opening is None:
            self.opening = moment
        if message.get("object") == "response":  # a Responses API model's reply, itself
            self._call(position, message, extra, message, moment, False)
        elif role == "assistant" or format_error:
            self._call(position, message, extra, response, moment, format_error)
        elif message.get("type") == "function_call_output" or role == "tool":
            responses = message.get("type") == "function_call_output"  # the Responses API's
            record = self.pending.pop(str(message.get("call_id" if responses
                                                      else "tool_call_id")), None)
            if record is not None:
                _answer(record, content_text(message.get("output" if responses else "content")),
                        extra, self.previous, moment)
        elif role == "user" and self.calls:
            self._user(message, extra, moment)
        self.previous = moment  # after an unstamped message, when the next began is unknown
        if moment is not None:
            self.end = moment

    def _call(self, position: int, message: dict, extra: dict, response: dict,
              moment: float | None, format_error: bool) -> None:
        if self.start is None:
            self.start = self.opening if self.opening is not None else number_or_none(
                response.get("created", response.get("created_at")))
        text = content_text(message.get("content"))
        if format_error:
            text = content_text(extra["model_response"]) if "model_response" in extra \
                else _reply(response)[0]
        elif message is response:
            text = _reply(response)[0]
        call = _call(message, response, position, self.model, self.previous, moment,
                     self.start, text, self.notes, self.apart)
        self.waiting, self.rejected = [], None
        if format_error:  # the error fed back is the rejected attempt's result
            attempt = _rejected(response, extra, text, self.pattern)
            _reject(attempt, content_text(message.get("content")))
            call.tool_calls.append(attempt)
        else:
            found = _tools(call, message, extra, text, self.pattern)
            self.waiting = [t for t in call.tool_calls if t.id is None]
            if found is not None:
                self.rejected = ToolCallRecord(name=ACTION_TOOL, arguments=canonical_json(
                    {"actions": found}))
        self.calls.append(call)
        self.observations.append([])
        self.pending = {t.id: t for t in call.tool_calls if t.id is not None}

    def _user(self, message: dict, extra: dict, moment: float | None) -> None:
        text = content_text(message.get("content"))
        answers = "returncode" in extra or "raw_output" in extra or not extra
        if self.waiting and answers:
            _answer(self.waiting.pop(0), text, extra, self.previous, moment)
        elif self.rejected is not None and not extra:  # 1.x: the format error
            _reject(self.rejected, text)
            self.calls[-1].tool_calls.append(self.rejected)
            self.rejected = None
        else:
            self.observations[-1].append(text)


def _tools(call: CallRecord, message: dict, extra: dict, text: str | None,
           pattern: Any) -> list[str] | None:
    """The call's tool calls: its ``tool_calls``, else its text actions.
    Returns the actions the parser found when they are not exactly one (the
    format's error: no tool call), else None (also when the search timed
    out: what the parser would say is unknown)."""
    if message.get("object") == "response":
        call.tool_calls.extend(_reply(message)[1])
        return None
    if isinstance(message.get("tool_calls"), list) and message["tool_calls"]:
        for item in message["tool_calls"]:
            if isinstance(item, dict):
                call.tool_calls.append(openai_tool(item))
        return None
    recorded = extra.get("actions")
    if isinstance(recorded, list) and recorded and all(
            isinstance(a, dict) and isinstance(a.get("command"), str) for a in recorded):
        actions = [a["command"] for a in recorded]
    else:
        found = text_actions(text or "", pattern)
        if found is None or len(found) != 1:
            return found
        actions = found
    for action in actions:
        call.tool_calls.append(ToolCallRecord(name=ACTION_TOOL, arguments=canonical_json(
            {"command": action})))
    return None


def _first_choice(response: dict) -> dict:
    choices = response.get("choices")
    return as_dict(choices[0]) if isinstance(choices, list) and choices else {}


def _reply(response: dict) -> tuple[str | None, list[ToolCallRecord]]:
    """The text and the tool calls a response holds: a Responses API
    response's ``output`` items (``message`` items' text parts,
    ``function_call`` items by ``call_id``), else a Chat Completions
    response's first choice's message (its ``content`` and ``tool_calls``)."""
    if "choices" not in response and isinstance(response.get("output"), list):
        texts: list[str] = []
        tools: list[ToolCallRecord] = []
        for item in response["output"]:
            item = as_dict(item)
            if item.get("type") == "message":
                texts.append(content_text(item.get("content")) or "")
            elif item.get("type") == "function_call":
                tools.append(requested_tool(item.get("name", ""),
                                            item.get("call_id", item.get("id")),
                                            item.get("arguments")))
        return ("".join(texts) if texts else None), tools
    message = as_dict(_first_choice(response).get("message"))
    return content_text(message.get("content")), [
        openai_tool(item) for item in as_list(message.get("tool_calls")) if isinstance(item, dict)]


def _finish_reason(response: dict) -> str | None:
    """The first choice's ``finish_reason``; for a Responses API response its
    ``status``, ``length`` when it stopped at ``max_output_tokens`` (as
    mini-swe-agent reads it)."""
    if "choices" not in response and "status" in response:
        status = response.get("status")
        if status == "incomplete" and as_dict(response.get("incomplete_details")).get(
                "reason") == "max_output_tokens":
            return "length"
        return None if status is None else str(status)
    finish = _first_choice(response).get("finish_reason")
    return None if finish is None else str(finish)


def _rejected(response: dict, extra: dict, text: str | None, pattern: Any) -> ToolCallRecord:
    """The attempt a ``FormatError`` message's response made (see **Format
    errors**): a text-based model's actions (``{"actions": [...]}``; arguments
    unrecorded when the search timed out), else the tool calls the response
    carries (``{"tool_calls": [{"name", "arguments"}, ...]}``, arguments as
    sent)."""
    if "model_response" in extra or "n_actions" in extra:
        found = text_actions(text or "", pattern)
        return ToolCallRecord(name=ACTION_TOOL, arguments=None if found is None
                              else canonical_json({"actions": found}))
    if not response:  # 2.0-2.3.0: what the tool-calling model sent is not kept
        return ToolCallRecord(name=ACTION_TOOL)
    tools = _reply(response)[1]
    return ToolCallRecord(name=ACTION_TOOL, arguments=canonical_json(
        {"tool_calls": [{"name": t.name, "arguments": t.arguments} for t in tools]}))


def _reject(record: ToolCallRecord, error: str | None) -> None:
    """``record`` answered by the format error ``error``: its result, an error."""
    record.result_tokens, record.result_sha256, record.error = tool_result(error, error=True)


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
    if isinstance(usage, dict) and ("input_tokens" in usage or "output_tokens" in usage) \
            and "prompt_tokens" not in usage and "completion_tokens" not in usage:
        counts, provenance = from_responses(usage, where, notes=notes, apart=apart)
    elif isinstance(usage, dict):
        counts, provenance = from_openai(usage, where, notes=notes, apart=apart)
    else:
        counts, provenance = unknown_usage()
    finish = _finish_reason(response)
    return CallRecord(
        usage=counts, provenance=provenance,
        model=response.get("model") if isinstance(response.get("model"), str) else model,
        cost_usd=number_or_none(as_dict(message.get("extra")).get("cost")),
        finish_reason=finish,
        started_s=(before - start if before is not None and moment is not None
                   and start is not None else None),  # both times known, as for latency
        latency_s=moment - before if moment is not None and before is not None else None,
        text_tokens=approx_tokens(text), text_sha256=sha256_text(text))
