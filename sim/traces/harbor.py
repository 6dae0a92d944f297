"""Harbor ATIF trajectories (``trajectory.json``, ATIF-v1.0 to v1.8).

Harbor (laude-institute/harbor) writes every agent's run in the Agent
Trajectory Interchange Format (RFC 0001; the pydantic models of
``harbor.models.trajectories``): a JSON object with ``schema_version``
(``ATIF-v1.N``), ``session_id``, ``agent`` (``name``, ``version``,
``model_name``), ``steps`` and ``final_metrics``. It is recognised by its
``schema_version``. Harbor lays a trial out as ``TRIAL/agent/trajectory.json``
beside ``TRIAL/result.json`` (its ``TrialResult``) and
``TRIAL/verifier/reward.txt``; the trial's and the job's ``result.json``,
``config.json`` and ``lock.json`` and the verifier's ``reward.json`` are
recognised too and read as companions. A multi-step trial (a task with
``steps``, Harbor 0.13 on) runs the agent once per step, each step with its own
instruction, agent session, verifier and ``StepResult`` (``step_name``,
``agent_result``, ``verifier_result``, ``exception_info``,
``agent_execution`` and ``verifier`` times) in the trial result's
``step_results``; Harbor moves each step's logs to
``TRIAL/steps/STEP/agent/`` and ``TRIAL/steps/STEP/verifier/`` (a step folder
has no ``result.json``).
The agent's own logs that Harbor converted (Claude Code's or OpenHands'
sessions under ``TRIAL/agent/``) hold the same run: the importer skips a run
read from them as a duplicate (:func:`converted`). Except where the agent's own
trajectory is one sim reads with more than Harbor's conversion keeps
(:data:`NATIVE`: ``mini-swe-agent.trajectory.json``, whose ATIF copy drops the
calls answered by a format error and the tool results' call ids): there the
run is read from the native file and the ATIF one is skipped as its duplicate
once the native file gave a run (:func:`native`, :func:`converted_duplicate`;
the importer holds the ATIF run until every input is read, and keeps it when
the native file was not among the inputs or gave no run: unreadable,
truncated); the native run keeps its calls, model, limits and exit
status, and takes Harbor's ``run_id`` (as below), ``task_id``, ``resolved``,
start and duration (its calls' starts shifted to count from the trial's), an
``exception_type`` as its ``exit``, and the trial result's
``agent_result.cost_usd`` when it records no cost; its conventions say so
(``run``).

One trajectory file is one run: ``run_id`` is the trial folder's name when the
file is ``TRIAL/agent/trajectory.json`` (``TRIAL/STEM`` for another file there:
Terminus-2's continuations ``trajectory.cont-N.json`` and summarisation
subagents are runs of their own), ``TRIAL/STEP`` (``TRIAL/STEP/STEM``) for a
step's ``TRIAL/steps/STEP/agent/`` (each step's agent session is a run, with
that step's verdict), else the ``session_id``, else the file.

**Model calls** are the ``agent`` steps, except those with ``llm_call_count``
0 (a dispatch without a model, ATIF-v1.7) and those marked
``is_copied_context`` (steps copied from an earlier trajectory, counted
there). A step with ``llm_call_count`` above 1 holds metrics summed over its
inferences and is read as one call (noted in the run's conventions). In a
trajectory whose agent steps record token counts, an agent step without any
(no ``metrics``, or empty ones) and without ``llm_call_count`` is part of the
call before it, not a call of its own: Harbor's OpenHands converter writes
one step per event (a response's second parallel tool call, with empty
metrics; an observation it could not merge, repeating its tool call), and
older Claude Code conversions one step per content block with the metrics on
the first; its tool calls join that call's (an id seen before counts once)
and its results answer them (noted). Where no agent step records counts,
each is a call of unknown usage. Per call,
from the step's ``metrics``: ``prompt_tokens`` is the whole prompt and
``cached_tokens`` the part read from the cache (so stated from ATIF-v1.2;
earlier versions are read the same way, noted), the cache write is
``metrics.extra.cache_creation_input_tokens`` (Claude Code) or
``cache_write_input_tokens`` (Codex) when the agent records it, else, for a
step whose ``metrics.extra`` keeps litellm's ``prompt_tokens_details``
(mini-swe-agent), the write those details give as
:func:`sim.traces.usage.from_openai` reads them (``cache_creation_tokens`` or
``cache_write_tokens``; none there: the provider reported none), else 0 (a
write is then counted in the input, noted), and ``completion_tokens`` include
the reasoning, ``extra.reasoning_tokens`` / ``reasoning_output_tokens``
(Codex) / ``thoughts_tokens`` (Gemini CLI) /
``completion_tokens_details.reasoning_tokens`` (mini-swe-agent)
(:func:`sim.traces.usage.from_total_prompt`, with its repairs when a count
cannot include another). The uncached input and
the output without reasoning are ``derived`` where a count was subtracted; a
step without ``prompt_tokens`` has its prompt columns ``unknown``, one without
``completion_tokens`` its output columns; Harbor's OpenHands converter writes
the difference of OpenHands' accumulated usage, None when it is 0, so such a
step reads as unknown too. ``cost_usd`` as recorded, ``estimated`` for
mini-swe-agent (Harbor shares the run's cost among its steps by completion
tokens). When some call's usage is unknown, the run's totals are
``final_metrics`` (else the trial result's ``agent_result``) in
:attr:`RunRecord.totals`.

Tool calls are the step's ``tool_calls`` (``function_name``,
``tool_call_id``, ``arguments``), answered by the ``observation.results``
with that ``source_call_id`` (of that step or a later one; ATIF records no error
flag: an error only when the result's ``extra`` says ``is_error``; no
duration). Results that answer no tool call (Terminus-2's terminal screen,
text actions), and ``user`` steps after the call, are the call's
``observation_tokens``. A call starts at the timestamp of the step before it
and ends at its own. An embedded subagent (``subagent_trajectories``,
ATIF-v1.7) adds its calls to the run with ``agent`` its ``trajectory_id``.

Run fields from the trajectory and the trial's ``result.json``: ``task_id``
the ``task_name``; ``model`` the agent's ``model_name``; ``cost_usd``
``final_metrics.total_cost_usd`` (else ``agent_result.cost_usd``); ``exit``
the ``exception_info.exception_type`` of a trial that raised; ``resolved``
when the verifier's ``rewards.reward`` (else ``verifier/reward.txt``, else
``verifier/reward.json``'s ``reward``) is 1;
the start and duration from the result's ``started_at``/``finished_at``, else
from the steps' timestamps. A step's run takes the trial's ``task_name`` and
its ``StepResult``: ``exit`` its ``exception_info`` (the trial's own for the
last step recorded), ``resolved`` its ``verifier_result`` (else
``steps/STEP/verifier/reward.txt`` or ``reward.json``), the cost and totals its
``agent_result``, the start its ``agent_execution.started_at`` and the end its
``verifier.finished_at`` (else ``agent_execution.finished_at``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from sim.traces.assemble import number_or_none, requested_tool, seconds
from sim.traces.model import (
    ESTIMATED,
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    approx_tokens,
    as_dict,
    as_list,
    content_text,
    finite_or_none,
    joined_sha256,
    parse_utc,
    sha256_text,
    tool_result,
)
from sim.traces.repairs import Repair
from sim.traces.skips import DUPLICATE, Skip, Unusable
from sim.traces.sources import read_json, read_text
from sim.traces.usage import from_openai, from_total_prompt, from_totals, read_apart

SOURCE = "harbor"
__all__ = ["NATIVE", "SOURCE", "converted", "converted_duplicate", "detect", "in_trial",
           "native", "run",
           "trial_folder"]

ESTIMATED_COST = {"mini-swe-agent": "shared among steps by completion tokens (Harbor's "
                                    "mini-swe-agent converter)"}
"""Agents whose step ``cost_usd`` Harbor estimates, and how."""
NATIVE = {"mini-swe-agent.trajectory.json": "mini-swe-agent"}
"""The agents' own trajectories Harbor keeps in a trial's agent folder beside
its ATIF conversion that sim reads whole, by file name: the source they are
read as. Harbor's mini-swe-agent converter drops the calls answered by a
format error and the tool results' call ids."""
ADOPTED = ("read from the agent's own trajectory in a Harbor trial; run_id, task, "
           "verdict, times and any exception from Harbor's trial result")
STEPS = "steps"
"""The folder of a multi-step trial's steps (``TRIAL/steps/STEP/``)."""
MAX_SIDE_FILE = 1 << 20
"""The largest ``result.json`` or ``reward.txt`` (bytes) read beside a trajectory."""


def detect(doc: Any) -> str | None:
    """``"trajectory"`` (ATIF), ``"trial-result"``, ``"job-result"``,
    ``"config"`` (a trial's or job's ``config.json`` or ``lock.json``),
    ``"reward"`` (a verifier's ``reward.json``: numbers by name) or None."""
    if not isinstance(doc, dict):
        return None
    version = doc.get("schema_version")
    if isinstance(version, str) and version.startswith("ATIF-") \
            and isinstance(doc.get("steps"), list):
        return "trajectory"
    if "trial_name" in doc and "task_name" in doc and "agent_info" in doc:
        return "trial-result"
    if "n_total_trials" in doc and isinstance(doc.get("stats"), dict):
        return "job-result"
    if ("timeout_multiplier" in doc and ({"agent", "agents", "job_name"} & doc.keys())) \
            or {"n_concurrent_trials", "trials"} <= doc.keys():
        return "config"
    if "reward" in doc and all(isinstance(v, int | float) and not isinstance(v, bool)
                               for v in doc.values()):
        return "reward"
    return None


def converted(file: str) -> Path | None:
    """The ATIF trajectory Harbor wrote for the agent run that ``file``, a
    file of another format, belongs to: a file under a trial's ``agent/``
    folder (the agent's own logs Harbor converts: Claude Code's and
    OpenHands' ``sessions/``) beside ``agent/trajectory.json``. The importer
    skips such a run as a duplicate of the ATIF one, which has the trial's
    verdict (:func:`in_trial`; not a :data:`NATIVE` file); None elsewhere."""
    path = Path(file)
    agent = next((p for p in path.parents if p.name == "agent"), None)
    if agent is None:
        return None
    trajectory = agent / "trajectory.json"
    return trajectory if trajectory != path and trajectory.is_file() else None


def in_trial(record: RunRecord) -> RunRecord | Skip:
    """``record`` as the importer keeps it when it belongs to a Harbor trial:
    a run read from a :data:`NATIVE` file in the trial's agent folder, with
    Harbor's run fields (:func:`_adopted`); a Skip (duplicate) for a run of the
    agent's own logs Harbor converted (:func:`converted`); else ``record``
    itself (an ATIF run too: whether a native file replaces it is the
    importer's to say once every input is read, :func:`converted_duplicate`)."""
    path = Path(record.file)
    if record.source == SOURCE:
        return record
    trial = trial_folder(path) if NATIVE.get(path.name) == record.source else None
    if trial is not None and ((path.parent / "trajectory.json").is_file()
                              or (trial / "result.json").is_file()):
        return _adopted(record, path)
    atif = converted(record.file)
    if atif is None:
        return record
    return Skip(record.file, DUPLICATE, f"the agent run of Harbor's {atif}, imported from "
                                        "there", record.run_id)


def converted_duplicate(record: RunRecord, own: Path) -> Skip:
    """The Skip of the ATIF run ``record`` whose agent folder's native file
    ``own`` gave the trial's run."""
    return Skip(record.file, DUPLICATE, f"Harbor's conversion of {own}, whose run was "
                                        "imported from there", record.run_id)


def native(path: Path) -> Path | None:
    """The agent's own trajectory (:data:`NATIVE`) beside the ATIF
    ``trajectory.json`` at ``path`` in a trial's agent folder, or None."""
    if path.name != "trajectory.json" or trial_folder(path) is None:
        return None
    return next((path.parent / name for name in NATIVE if (path.parent / name).is_file()),
                None)


def _adopted(record: RunRecord, path: Path) -> RunRecord:
    """The run read from a native file at ``path`` with Harbor's run fields
    (see the module)."""
    place, label, result = _attempt(path)
    exception = as_dict(result.get("exception_info")).get("exception_type")
    started = parse_utc(result.get("started_at"))
    finished = parse_utc(result.get("finished_at"))
    task = result.get("task_name")
    resolved = _resolved(result, place)
    cost = record.cost_usd if record.cost_usd is not None else number_or_none(
        as_dict(result.get("agent_result")).get("cost_usd"))
    calls = record.calls
    shift = seconds(record.started_at, started)
    if shift is not None:  # the calls' starts, from the trial's start
        calls = [c if c.started_s is None else replace(c, started_s=c.started_s + shift)
                 for c in calls]
    elif started is not None and record.started_at is None:
        calls = [replace(c, started_s=None) for c in calls]
    return replace(
        record, run_id=label or record.run_id, calls=calls,
        task_id=task if isinstance(task, str) else None,
        exit=str(exception) if exception is not None else record.exit,
        resolved=resolved if resolved is not None else record.resolved,
        started_at=started if started is not None else record.started_at,
        duration_s=seconds(finished, started) if started is not None else record.duration_s,
        cost_usd=cost, conventions={**record.conventions, "run": ADOPTED})


def trial_folder(path: Path) -> Path | None:
    """The trial folder of a trajectory laid out as ``TRIAL/agent/FILE`` or,
    in a multi-step trial, ``TRIAL/steps/STEP/agent/FILE``."""
    if path.parent.name != "agent":
        return None
    place = path.parent.parent
    if place.parent.name == STEPS and not (place / "result.json").is_file():
        return place.parent.parent
    return place


def run(doc: dict, path: Path, file: str) -> RunRecord:
    """The run of one ATIF trajectory at ``path``."""
    place, label, result = _attempt(path)
    return read_apart(partial(_run, doc, path, file, place, label, result))


def _attempt(path: Path) -> tuple[Path | None, str | None, dict]:
    """Where a trajectory's agent run sits in its trial: the folder holding
    its ``agent/`` and ``verifier/`` (the trial's, or the step's), the run's
    name (``TRIAL`` or ``TRIAL/STEP``) and its result shaped like a trial's
    (a step's: the trial's ``task_name``, the step's ``agent_result``,
    ``verifier_result`` and ``exception_info`` (the trial's own for its last
    step), and its agent execution's start and its verifier's (else its
    agent's) end as ``started_at`` and ``finished_at``); (None, None, {})
    outside a trial."""
    trial = trial_folder(path)
    if trial is None:
        return None, None, {}
    result = _side_json(trial / "result.json")
    place = path.parent.parent
    if place == trial:
        return trial, trial.name, result
    results = [r for r in as_list(result.get("step_results")) if isinstance(r, dict)]
    step = next((r for r in results if r.get("step_name") == place.name), {})
    agent, verifier = as_dict(step.get("agent_execution")), as_dict(step.get("verifier"))
    exception = step.get("exception_info")
    if exception is None and step and step is results[-1]:
        exception = result.get("exception_info")
    view = {"task_name": result.get("task_name"), "agent_result": step.get("agent_result"),
            "verifier_result": step.get("verifier_result"), "exception_info": exception,
            "started_at": agent.get("started_at"),
            "finished_at": verifier.get("finished_at") or agent.get("finished_at")}
    return place, f"{trial.name}/{place.name}", view


def _run(doc: dict, path: Path, file: str, trial: Path | None, label: str | None,
         result: dict, apart: tuple[bool, bool]) -> RunRecord:
    agent = as_dict(doc.get("agent"))
    name = agent.get("name") if isinstance(agent.get("name"), str) else None
    reader = _Steps(apart, ESTIMATED_COST.get(name or ""))
    reader.read(as_list(doc.get("steps")), None)
    for sub in as_list(doc.get("subagent_trajectories")):
        if isinstance(sub, dict):
            label = sub.get("trajectory_id", sub.get("session_id"))
            reader.read(as_list(sub.get("steps")), None if label is None else str(label))
    calls = reader.finish()
    if label is not None:
        stem = path.name[:-5] if path.name.endswith(".json") else path.name
        run_id = label if stem == "trajectory" else f"{label}/{stem}"
    elif isinstance(doc.get("session_id"), str):
        run_id = doc["session_id"]
    else:
        run_id = file
    final = as_dict(doc.get("final_metrics"))
    agent_result = as_dict(result.get("agent_result"))
    started = parse_utc(result.get("started_at"))
    finished = parse_utc(result.get("finished_at"))
    if started is None:
        started, finished = reader.first, reader.last
    model = agent.get("model_name")
    if not isinstance(model, str):
        model = next((c.model for c in calls if c.model), None)
    cost = number_or_none(final.get("total_cost_usd"))
    exception = as_dict(result.get("exception_info")).get("exception_type")
    version = str(doc.get("schema_version"))
    conventions = dict(reader.conventions)
    if version in ("ATIF-v1.0", "ATIF-v1.1"):
        conventions["input_tokens"] = ("prompt_tokens taken as including cached_tokens "
                                       "(stated from ATIF-v1.2)")
    task = result.get("task_name")
    return RunRecord(
        run_id=run_id, source=SOURCE, file=file, calls=calls,
        task_id=task if isinstance(task, str) else None, model=model,
        cost_usd=cost if cost is not None else number_or_none(agent_result.get("cost_usd")),
        exit=None if exception is None else str(exception),
        resolved=_resolved(result, trial), started_at=started,
        duration_s=seconds(finished, started), repairs=reader.notes,
        totals=_totals(final, agent_result) if reader.unknown else None,
        conventions=conventions)


def _side_json(path: Path) -> dict:
    """A small JSON object beside the trajectory, or {} (missing, too large,
    not a JSON object)."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_SIDE_FILE:
            return {}
        values = read_json(path)
    except (Unusable, OSError):
        return {}
    return values[0] if len(values) == 1 and isinstance(values[0], dict) else {}


def _resolved(result: dict, trial: Path | None) -> bool | None:
    """Whether the verifier's reward is 1: ``result.json``'s
    ``verifier_result.rewards.reward``, else ``verifier/reward.txt``, else
    ``verifier/reward.json``'s ``reward``."""
    reward = finite_or_none(as_dict(as_dict(result.get("verifier_result")).get("rewards"))
                            .get("reward"))
    if reward is None and trial is not None:
        text_path = trial / "verifier" / "reward.txt"
        try:
            if text_path.is_file() and text_path.stat().st_size <= MAX_SIDE_FILE:
                reward = finite_or_none(read_text(text_path, MAX_SIDE_FILE).strip())
        except (Unusable, OSError):
            reward = None
        if reward is None:
            reward = finite_or_none(_side_json(trial / "verifier" / "reward.json").get("reward"))
    return None if reward is None else reward == 1.0


def _counted(step: dict) -> bool:
    """Whether an agent step's metrics record a token count."""
    metrics = as_dict(step.get("metrics"))
    return metrics.get("prompt_tokens") is not None or \
        metrics.get("completion_tokens") is not None


def _totals(final: dict, agent_result: dict) -> dict[str, int] | None:
    """The run's recorded token totals (``final_metrics``, else the trial's
    ``agent_result``, whose input includes the cache), or None."""
    extra = as_dict(final.get("extra"))
    prompt, completion = final.get("total_prompt_tokens"), final.get("total_completion_tokens")
    cached = final.get("total_cached_tokens")
    write = extra.get("total_cache_creation_input_tokens")
    if prompt is None or completion is None:
        prompt, completion = agent_result.get("n_input_tokens"), agent_result.get(
            "n_output_tokens")
        cached, write = agent_result.get("n_cache_tokens"), None
    if prompt is None or completion is None:
        return None
    try:
        usage = from_total_prompt(prompt, completion, cache_read=cached, cache_write=write,
                                  where="final_metrics")
    except Unusable:
        return None
    return {"input_tokens": usage.input_tokens, "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens, "output_tokens": usage.output_tokens,
            "reasoning_tokens": 0}


class _Steps:
    """A trajectory's steps read in order into calls (see the module)."""

    def __init__(self, apart: tuple[bool, bool], estimated_cost: str | None) -> None:
        self.apart, self.estimated_cost = apart, estimated_cost
        self.notes: list[Repair] = []
        self.conventions: dict[str, str] = {}
        self.calls: list[CallRecord] = []
        self.texts: list[list[str | None]] = []  # per call, what the model read after it
        self.stamps: list[datetime | None] = []  # per call, its step's timestamp
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.unknown = False

    def read(self, steps: list, agent: str | None) -> None:
        """Take one trajectory's steps (a subagent's with its ``agent`` label)."""
        steps = [s for s in steps if isinstance(s, dict)]
        records = any(_counted(s) for s in steps if s.get("source") == "agent")
        previous: datetime | None = None
        mine = -1  # the index of this trajectory's last call
        pending: dict[str, ToolCallRecord] = {}  # its tool calls not yet answered, by id
        known: set[str] = set()  # the ids of all its tool calls
        for step in steps:
            moment = parse_utc(step.get("timestamp"))
            if moment is not None:
                self.first = moment if self.first is None else min(self.first, moment)
                self.last = moment if self.last is None else max(self.last, moment)
            source = step.get("source")
            if source == "agent" and step.get("llm_call_count") != 0 \
                    and step.get("is_copied_context") is not True:
                if mine < 0 or not records or _counted(step) \
                        or step.get("llm_call_count") is not None:
                    self._call(step, agent, previous, moment)
                    mine = len(self.calls) - 1
                else:  # no metrics where the others have some: part of the call before
                    self.conventions["calls"] = (
                        "an agent step without metrics or llm_call_count, in a trajectory "
                        "whose other steps record them, read as part of the call before it")
                self._tools(step, mine, pending, known)
            elif source == "user" and mine >= 0:
                self.texts[mine].append(content_text(step.get("message")))
            previous = moment or previous

    def _tools(self, step: dict, mine: int, pending: dict[str, ToolCallRecord],
               known: set[str]) -> None:
        """The step's tool calls, added to call ``mine`` (an id seen before in
        the trajectory is the same call repeated, as Harbor's OpenHands
        converter repeats it with its observation), and its observation's
        results: answers to the trajectory's tool calls by id, else what the
        model read next."""
        call = self.calls[mine]
        for item in as_list(step.get("tool_calls")):
            if isinstance(item, dict):
                tool_id = None if item.get("tool_call_id") is None else str(item["tool_call_id"])
                if tool_id in known:
                    continue
                if tool_id is not None:
                    known.add(tool_id)
                record = requested_tool(item.get("function_name", ""), tool_id,
                                        item.get("arguments"))
                call.tool_calls.append(record)
                if tool_id is not None:
                    pending[tool_id] = record
        for result in as_list(as_dict(step.get("observation")).get("results")):
            if not isinstance(result, dict):
                continue
            text = content_text(result.get("content"))
            tool = pending.pop(str(result.get("source_call_id")), None)
            if tool is not None:
                flag = as_dict(result.get("extra")).get("is_error")
                tool.result_tokens, tool.result_sha256, tool.error = tool_result(
                    text, error=flag if isinstance(flag, bool) else False)
            elif text is not None:
                self.texts[mine].append(text)

    def _call(self, step: dict, agent: str | None, previous: datetime | None,
              moment: datetime | None) -> None:
        where = f"step {step.get('step_id', '?')}"
        metrics = as_dict(step.get("metrics"))
        counts, provenance = self._usage(metrics, where)
        calls = step.get("llm_call_count")
        if isinstance(calls, int) and not isinstance(calls, bool) and calls > 1:
            self.conventions["steps"] = ("a step of several inferences (llm_call_count > 1) "
                                         "read as one call, its metrics summed")
        cost = number_or_none(metrics.get("cost_usd"))
        if cost is not None and self.estimated_cost is not None:
            provenance["cost_usd"] = ESTIMATED
            self.conventions["cost_usd"] = self.estimated_cost
        text = content_text(step.get("message"))
        model = step.get("model_name")
        self.calls.append(CallRecord(
            usage=counts, model=model if isinstance(model, str) else None, cost_usd=cost,
            started_s=seconds(previous, self.first), latency_s=seconds(moment, previous),
            text_tokens=approx_tokens(text), text_sha256=sha256_text(text),
            provenance=provenance, agent=agent))
        self.texts.append([])
        self.stamps.append(moment)

    def _usage(self, metrics: dict, where: str) -> tuple[Usage, dict[str, str]]:
        """A step's usage and provenance (see the module)."""
        extra = as_dict(metrics.get("extra"))
        prompt, completion = metrics.get("prompt_tokens"), metrics.get("completion_tokens")
        if prompt is None or completion is None:
            self.unknown = True
        write = extra.get("cache_creation_input_tokens", extra.get("cache_write_input_tokens"))
        details = as_dict(extra.get("completion_tokens_details"))
        reasoning = next((v for v in (extra.get("reasoning_tokens"),
                                      extra.get("reasoning_output_tokens"),
                                      extra.get("thoughts_tokens"),
                                      details.get("reasoning_tokens")) if v is not None), None)
        prompt_details = extra.get("prompt_tokens_details")
        if isinstance(prompt_details, dict) and prompt is not None and completion is not None:
            # litellm's usage details (Harbor's mini-swe-agent converter): the
            # step is the OpenAI-style usage they belong to, its write there
            cached = metrics.get("cached_tokens")
            raw = {"prompt_tokens_details": prompt_details if cached is None
                   else {**prompt_details, "cached_tokens": cached},
                   "completion_tokens_details": {"reasoning_tokens": reasoning},
                   "cache_creation_input_tokens": write}
            return from_openai({"prompt_tokens": prompt, "completion_tokens": completion},
                               where, details=raw, notes=self.notes, apart=self.apart)
        if write is None and prompt is not None:
            self.conventions["cache_write_tokens"] = (
                "not recorded (ATIF has no field; Claude Code and Codex put it in "
                "metrics.extra, mini-swe-agent in metrics.extra.prompt_tokens_details): "
                "0, any write counted in input_tokens")
        return from_totals(prompt, completion, cache_read=metrics.get("cached_tokens"),
                           cache_write=write, reasoning=reasoning, where=where,
                           names=("prompt_tokens", "completion_tokens"), notes=self.notes,
                           apart=self.apart)

    def finish(self) -> list[CallRecord]:
        """The calls in time order (a subagent's among its parent's when every
        call's time is known), with their observations."""
        self.calls = [replace(call, observation_tokens=sum(approx_tokens(t) for t in texts),
                              observation_sha256=joined_sha256(texts))
                      for call, texts in zip(self.calls, self.texts, strict=True)]
        if any(c.agent is not None for c in self.calls) and all(
                s is not None for s in self.stamps):
            order = sorted(range(len(self.calls)), key=lambda i: (self.stamps[i], i))
            return [self.calls[i] for i in order]
        return self.calls
