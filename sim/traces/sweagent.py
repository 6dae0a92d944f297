"""SWE-agent trajectories (``.traj``): run-level usage only.

SWE-agent (0.x and 1.x) writes one ``INSTANCE.traj`` per task instance (1.x
under ``RUN_DIR/INSTANCE/``): a JSON object with ``trajectory`` (one step per
action: ``action``, ``observation``, ``response``, ``thought``, and in 1.x
``execution_time``, ``query``...), ``history`` (the messages), ``info``
(``exit_status``, ``submission``, ``model_stats``; 1.x adds
``swe_agent_version``) and, in 1.x, ``replay_config`` (the run's settings as a
JSON string) and ``environment``. Recognised by content: a ``trajectory`` and
a ``history`` list beside an ``info`` holding ``model_stats``.

``info.model_stats`` (``InstanceStats``) is all the usage the file records:
``instance_cost`` (USD), ``tokens_sent``, ``tokens_received`` and
``api_calls``, summed over the run's model calls; no call's own usage is kept.
So a run is imported with ``api_calls`` calls whose five token columns are
``unknown`` (0 in their usage; no cost either), and the run-level figures go
where the trace model keeps a source's run totals:
``RunRecord.totals`` = ``{"input_tokens": tokens_sent, "output_tokens":
tokens_received}`` and ``cost_usd`` = ``instance_cost``. What those totals
count depends on the version (SWE-agent's ``sweagent/agent/models.py``), said
in the run's ``conventions``:

- **1.x** (``info.swe_agent_version``; litellm models): both are counted
  locally with ``litellm.utils.token_counter``, not taken from the provider's
  usage: ``tokens_sent`` is the whole prompt of every call (cached or not),
  ``tokens_received`` the text content of the replies (tool-call arguments and
  reasoning not counted);
- **0.x**: the provider's usage as each model class read it
  (``prompt_tokens``/``completion_tokens`` for OpenAI-style APIs, which
  include any cache and reasoning), or a local ``count_tokens`` for some.

Neither splits out cache or reasoning, so ``RunRecord.totals`` has no such
columns; a total that is not a token count is left out and noted as a repair
(``runs.input_tokens``, ``runs.output_tokens``). ``instance_cost`` is taken as
recorded (the writer nulls and counts an impossible one).

The calls' **tool calls**: the ``i``-th trajectory step's ``action`` (when
not empty) is the ``i``-th call's tool call, named after the action's first
word (the command: ``find_file``, ``edit``, ``submit``,
``str_replace_editor``...) with arguments ``{"command": action}``, its result
the step's ``observation`` and its duration the step's ``execution_time``;
the step's ``response`` gives the call's ``text_tokens`` and ``text_sha256``.
A requery after a format error, a blocked action or a shell syntax error is a
step in 1.x (``handle_error_with_retry`` adds the failed output to the
trajectory, action empty) and so a call without tool calls; in 0.x it is not a
step. The step SWE-agent adds when it stops on an error is not a call: 1.x's
``handle_error_with_autosubmission`` appends a last step whose ``thought`` and
``response`` are the harness's own message for the exit status
(:data:`EXIT_MESSAGES`: "Exit due to context window"...) and whose action is
empty, and 0.x's ``forward_with_error_check`` one whose action is the exit
status itself (``exit_context``, ``exit_cost``, ``exit_api``, ``exit_error``)
beside that message; such a last step, when ``info.exit_status`` (or
``submitted (STATUS)``) names that status, is left out (an exit on the context
window, the time limit or an API error makes no call for it). Calls counted in
``api_calls`` beyond the remaining steps (0.x requeries, a call whose reply
passed the cost limit) come last, without tool calls; when ``api_calls`` is
missing, fewer than those steps or above :data:`MAX_CALLS` there is one call
per remaining step. A retry loop's file (1.x
``RetryAgent``: an ``attempts`` list beside the chosen attempt's
``trajectory``, ``history`` and ``info``) has ``model_stats`` summed over
every attempt, said in the conventions; its extra calls come last too. One
saved without a chosen attempt (``attempts`` alone) is not recognised.

Run fields: ``run_id`` is ``RUN_DIR/INSTANCE`` when the file sits in that
layout, else the instance id (``replay_config``'s ``problem_statement.id``,
else the file name without ``.traj``); ``task_id`` the instance id; ``model``
``replay_config``'s ``agent.model.name``; ``exit`` ``info.exit_status``
verbatim; ``step_limit`` and ``cost_limit_usd`` from ``agent.model``'s
``per_instance_call_limit`` and ``per_instance_cost_limit`` (0, SWE-agent's
"no limit", is null). A 0.x trajectory has no ``replay_config``: SWE-agent
0.x writes the run's settings once, in ``args.yaml`` beside the run's
trajectories (:data:`ARGS_FILE`), and its ``agent.model`` gives the model
(``model_name``, as SWE-agent names it: ``gpt4``, ``claude-3-opus``...) and
the cost limit (``per_instance_cost_limit``; 0.x has no call limit); without
that file, or when it cannot be read, they are null. No time is recorded for
the calls or the run.

A replay cannot drive such a run (no call has usage): it sees ``api_calls``
calls with every token column unknown and the run totals, and must refuse it.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import yaml

from sim.traces.assemble import limit_or_none, number_or_none, text_fields
from sim.traces.miniswe import run_folder
from sim.traces.model import (
    MAX_COUNT,
    PROVENANCE_FIELDS,
    UNKNOWN,
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    as_dict,
    as_list,
    bounded_int,
    canonical_json,
    finite_or_none,
    tool_result,
)
from sim.traces.repairs import BAD_TYPE, NEGATIVE, NOT_FINITE, TOO_LARGE, Repair

SOURCE = "swe-agent"
SUFFIX = ".traj"
UNKNOWN_CALL: dict[str, str] = dict.fromkeys(PROVENANCE_FIELDS, UNKNOWN)
"""The provenance of every call of a SWE-agent run: nothing is recorded per call."""
MAX_CALLS = 100_000
"""The most calls a run is given from ``api_calls`` (a larger count is read as
one call per step)."""

EXIT_MESSAGES = {
    "exit_format": "Exit due to repeated format/blocklist/bash syntax errors",
    "exit_forfeit": "Exiting due to forfeit",
    "exit_total_execution_time": "Exit due to total execution time exceeded",
    "exit_command_timeout": "Exit due to multiple consecutive command timeouts",
    "exit_context": "Exit due to context window",
    "exit_cost": "Exit due to cost limit",
    "exit_api": "Exit due to retry error",
    "exit_environment_error": "Exit due to environment error",
    "exit_error": "Exit due to",
}
"""The start of the message SWE-agent writes as the ``thought`` of the step it
adds when it stops on an error, by exit status (1.x ``forward_with_handling``,
0.x ``forward_with_error_check``; ``exit_error`` is "Exit due to runtime
error: ..." or "... unknown error: ...")."""

ARGS_FILE = "args.yaml"
"""The run's settings that SWE-agent 0.x writes beside its trajectories."""

PER_CALL = ("calls", "per-call usage absent: run-level info.model_stats only")
ATTEMPTS = ("attempts", "info.model_stats sums every attempt of a retry loop; the steps "
                        "are the chosen attempt's")
COUNTED_LOCALLY = {
    "input_tokens": "tokens_sent: every call's whole prompt (cache included), counted "
                    "locally with litellm.utils.token_counter (SWE-agent 1.x)",
    "output_tokens": "tokens_received: the replies' text content, counted locally with "
                     "litellm.utils.token_counter; tool-call arguments and reasoning not "
                     "counted (SWE-agent 1.x)"}
PROVIDER_COUNTED = {
    "input_tokens": "tokens_sent: the provider's prompt tokens (cache included) as "
                    "SWE-agent 0.x's model class read them",
    "output_tokens": "tokens_received: the provider's completion tokens (reasoning "
                     "included) as SWE-agent 0.x's model class read them"}


def detect(doc: Any) -> bool:
    """Whether ``doc`` is a SWE-agent trajectory: ``trajectory`` and ``history``
    lists beside an ``info`` object holding ``model_stats``."""
    return (isinstance(doc, dict) and isinstance(doc.get("trajectory"), list)
            and isinstance(doc.get("history"), list)
            and isinstance(as_dict(doc.get("info")).get("model_stats"), dict))


def run(doc: dict, path: Path, file: str) -> RunRecord:
    """The run of one trajectory document (see the module)."""
    info = as_dict(doc.get("info"))
    stats = as_dict(info.get("model_stats"))
    config = _replay_config(doc.get("replay_config"))
    model_config = as_dict(as_dict(config.get("agent")).get("model"))
    if not config:  # SWE-agent 0.x: the settings are the run folder's args.yaml
        model_config = _run_args(path.parent)
    instance = as_dict(config.get("problem_statement")).get("id")
    if not isinstance(instance, str) or not instance:
        instance = path.name[:-len(SUFFIX)] if path.name.endswith(SUFFIX) else path.stem
    folder = run_folder(path, instance)
    steps = [as_dict(s) for s in as_list(doc.get("trajectory"))]
    if steps and _exit_step(steps[-1], info.get("exit_status")):
        steps.pop()
    api_calls = _count(stats.get("api_calls"))
    if api_calls is not None and api_calls > MAX_CALLS:
        api_calls = None
    calls = [_call(step) for step in steps]
    if api_calls is not None and api_calls >= len(steps):
        calls += [CallRecord(usage=Usage(), provenance=dict(UNKNOWN_CALL))
                  for _ in range(api_calls - len(steps))]
    totals, notes = _totals(stats)
    version = "swe_agent_version" in info
    conventions = dict([PER_CALL], **(COUNTED_LOCALLY if version else PROVIDER_COUNTED))
    if len(as_list(doc.get("attempts"))) > 1:
        conventions.update([ATTEMPTS])
    exit_label = info.get("exit_status")
    model = model_config.get("name", model_config.get("model_name"))
    return RunRecord(
        run_id=f"{folder}/{instance}" if folder is not None else instance, source=SOURCE,
        file=file, calls=calls, task_id=instance,
        model=model if isinstance(model, str) else None,
        cost_usd=number_or_none(stats.get("instance_cost")),
        exit=None if exit_label is None else str(exit_label),
        step_limit=limit_or_none(model_config.get("per_instance_call_limit")),
        cost_limit_usd=limit_or_none(model_config.get("per_instance_cost_limit")),
        totals=totals or None, conventions=conventions, repairs=notes)


def _exit_step(step: dict, status: Any) -> bool:
    """Whether ``step`` is the one SWE-agent adds when it stops on an error
    with exit status ``status`` (no model call; see the module)."""
    if not isinstance(status, str):
        return False
    if status.startswith("submitted (") and status.endswith(")"):
        status = status[len("submitted ("):-1]
    message = EXIT_MESSAGES.get(status)
    thought, response, action = step.get("thought"), step.get("response"), step.get("action")
    if message is None or not isinstance(thought, str) or not thought.startswith(message):
        return False
    if action in ("", None):  # 1.x: StepOutput(thought=message, output=message)
        return response == thought
    # 0.x: (thought, action, output) = (message, status, message or "exit due to ...")
    return (action == status and isinstance(response, str)
            and response.lower() == thought.lower())


def _call(step: dict) -> CallRecord:
    """The call that chose ``step``'s action (usage unknown)."""
    action = step.get("action")
    tools = []
    if isinstance(action, str) and action.strip():
        observation = step.get("observation")
        tokens, sha, _ = tool_result(observation if isinstance(observation, str) else None)
        duration = finite_or_none(step.get("execution_time"))
        tools.append(ToolCallRecord(
            name=action.split()[0], arguments=canonical_json({"command": action}),
            result_tokens=tokens, result_sha256=sha,
            duration_s=duration if duration is not None and duration >= 0 else None))
    response = step.get("response")
    return CallRecord(usage=Usage(), tool_calls=tools, provenance=dict(UNKNOWN_CALL),
                      **text_fields(response if isinstance(response, str) else None))


def _totals(stats: dict) -> tuple[dict[str, int], list[Repair]]:
    """``RunRecord.totals`` from ``model_stats``, and a repair note
    (``runs.input_tokens``/``runs.output_tokens``) for a recorded total that
    is not a count (left out of the totals)."""
    totals: dict[str, int] = {}
    notes: list[Repair] = []
    for column, key in (("input_tokens", "tokens_sent"), ("output_tokens", "tokens_received")):
        value = stats.get(key)
        number = _count(value)
        if number is not None and number <= MAX_COUNT:
            totals[column] = number
        elif value is not None:
            notes.append((f"runs.{column}", _why(value)))
    return totals, notes


def _why(value: Any) -> str:
    """The repair reason for a total that is not a count."""
    number = number_or_none(value)
    if number is None:
        return BAD_TYPE
    if not math.isfinite(number):
        return NOT_FINITE
    return NEGATIVE if number < 0 else TOO_LARGE if number > MAX_COUNT else BAD_TYPE


def _replay_config(value: Any) -> dict:
    """``replay_config`` (a JSON string in 1.x, or an object) as an object."""
    if isinstance(value, str):
        try:
            value = json.loads(value, parse_int=bounded_int)
        except (ValueError, RecursionError):
            return {}
    return as_dict(value)


def _run_args(folder: Path) -> dict:
    """``agent.model`` of the :data:`ARGS_FILE` in ``folder`` (SWE-agent 0.x's
    ``ModelArguments``: ``model_name``, ``per_instance_cost_limit``...); {}
    when there is none or it cannot be read as YAML. Only those keys are read,
    so an alias-heavy document is never expanded. A folder's file is parsed
    once while it is unchanged (its trajectories, thousands in a SWE-bench
    run, share it)."""
    path = folder / ARGS_FILE
    try:
        stat = path.stat()
    except OSError:
        return {}
    return dict(_parsed_args(str(path), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=16)
def _parsed_args(path: str, mtime_ns: int, size: int) -> dict:
    """:func:`_run_args` of the file at ``path`` as it is at ``mtime_ns`` and
    ``size`` (the cache's key: a file rewritten is read again)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return {}
    return as_dict(as_dict(as_dict(doc).get("agent")).get("model"))


def _count(value: Any) -> int | None:
    """A non-negative whole number as an int, else None."""
    number = number_or_none(value)
    if number is None or number < 0 or not float(number).is_integer():
        return None
    return int(number)
