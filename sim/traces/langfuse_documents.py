"""What Langfuse's JSON documents hold: observations, traces and scores, in every shape.

Langfuse writes a trace's observations in several documents (JSON values, one
document or one per line); :func:`observations` reads them all, each
observation with the scores its document lists:

- ``GET /api/public/observations`` (v1 and v2) and list exports: an object
  with ``data`` (a list of observations, or of traces with
  ``observations``), a list of observations, or observations one per line;
- ``GET /api/public/traces/{id}``: one trace (``id``) with ``observations``
  and ``scores``;
- the trace view's download (web app, ``downloadLegacyTraceAsJson``):
  ``{"trace": {...}, "observations": [...]}``, the trace object being what
  the web app loaded (it may hold ``observations`` and ``scores`` of its own);
- the download route ``/api/traces/{id}/download`` (``buildTraceExport``):
  ``{"observations": [...], "scores": [...]}``, each observation naming its
  ``traceId``;
- the web app's tRPC responses (``traces.byIdWithObservationsAndScores``,
  ``events.byTraceId``), saved from the browser:
  ``{"result": {"data": {"json": {...}}}}`` (superjson), or a batch list of
  those, around one of the shapes above.

Keys are read in camelCase (``traceId``, ``startTime``...) or snake_case as
exports write them (:func:`value_of`). A session's download (its traces
without their observations) is not a run's.

**Scores**: a trace's score named ``resolved``, ``success`` or ``correct``
(any case), of type ``BOOLEAN`` or a ``NUMERIC`` 0 or 1, not attached to an
observation, says whether the run succeeded (:func:`resolved`; several such
scores must agree); other scores are not read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sim.traces.model import as_dict, as_list, finite_or_none

RESOLVED_SCORES = frozenset({"resolved", "success", "correct"})
"""Score names (lower case) read as the run's ``resolved``."""


def value_of(obs: dict, camel: str, snake: str) -> Any:
    """A field of a Langfuse record by its camelCase name, else its snake_case one."""
    return obs[camel] if camel in obs else obs.get(snake)


def is_observation(value: Any, trace: Any = None) -> bool:
    """Whether ``value`` is an observation (of the trace ``trace`` when it
    names none itself)."""
    return (isinstance(value, dict) and isinstance(value.get("type"), str)
            and (value_of(value, "traceId", "trace_id") is not None or trace is not None)
            and ("startTime" in value or "start_time" in value))


def unwrap(value: Any) -> Any:
    """The data of a tRPC response (``{"result": {"data": {"json": ...}}}``,
    superjson's ``json`` optional); else ``value``."""
    if isinstance(value, dict) and isinstance(value.get("result"), dict) \
            and "data" in value["result"]:
        data = value["result"]["data"]
        return data["json"] if isinstance(data, dict) and "json" in data else data
    return value


@dataclass
class TraceDocument:
    """One trace's observations and scores as a document holds them."""

    id: str | None
    observations: list[dict]
    scores: list[dict]


def trace_document(value: Any) -> TraceDocument | None:
    """``value`` as a trace with observations (the API's trace, the trace
    view's download, the download route's document, a tRPC trace), or None."""
    value = unwrap(value)
    if not isinstance(value, dict) or not isinstance(value.get("observations"), list):
        return None
    inner = as_dict(value.get("trace"))
    trace_id = value.get("id", inner.get("id"))
    items = value["observations"] + as_list(inner.get("observations"))
    observations = [o for o in items if isinstance(o, dict)]
    if any(not isinstance(o, dict | str) for o in items):
        return None
    if trace_id is None:
        if not observations or not all(is_observation(o) for o in observations):
            return None
    elif not all(is_observation(o, trace_id) for o in observations):
        return None
    scores = [s for s in as_list(value.get("scores")) + as_list(inner.get("scores"))
              if isinstance(s, dict)]
    return TraceDocument(None if trace_id is None else str(trace_id), observations, scores)


def documents(values: list[Any]) -> list[Any]:
    """The documents of a file's values: ``data`` lists and lists (a tRPC
    batch) flattened, tRPC responses unwrapped."""
    items: list[Any] = []
    for value in values:
        value = unwrap(value)
        if isinstance(value, dict) and isinstance(value.get("data"), list):
            items.extend(value["data"])
        elif isinstance(value, list):
            items.extend(unwrap(v) for v in value)
        else:
            items.append(value)
    return items


def detect(values: list[Any]) -> bool:
    """Whether a file's JSON ``values`` are Langfuse observations or traces."""
    if len(values) > 1:
        return all(is_observation(v) for v in values)
    items = documents(values)
    return bool(items) and all(is_observation(v) or trace_document(v) is not None for v in items)


def observations(values: list[Any]) -> Iterator[tuple[dict, list[dict]]]:
    """The observations of a file's values, each with the scores its
    document lists (traces flattened; a trace's id fills an observation's
    missing ``traceId``)."""
    for item in documents(values):
        trace = trace_document(item)
        if trace is not None:
            for obs in trace.observations:
                if value_of(obs, "traceId", "trace_id") is None:
                    obs = {**obs, "traceId": trace.id}
                yield obs, trace.scores
        elif is_observation(item):
            yield item, []


def resolved(scores: list[dict]) -> tuple[bool | None, str | None]:
    """The run's ``resolved`` from its trace-level success scores (see the
    module) and how it was read; ``(None, None)`` when none says it clearly
    or they disagree."""
    verdicts: set[bool] = set()
    names: list[str] = []
    for score in scores:
        name = str(score.get("name", ""))
        attached = value_of(score, "observationId", "observation_id") is not None
        if name.lower() not in RESOLVED_SCORES or attached:
            continue
        verdict = _verdict(score)
        if verdict is not None:
            verdicts.add(verdict)
            names.append(name)
    if len(verdicts) != 1:
        return None, None
    return verdicts.pop(), f"from the trace's score {', '.join(sorted(set(names)))}"


def _verdict(score: dict) -> bool | None:
    """A score's clear yes or no: a BOOLEAN's value (or ``stringValue``
    True/False), a NUMERIC of exactly 0 or 1; None otherwise."""
    kind = str(value_of(score, "dataType", "data_type") or "").upper()
    value = finite_or_none(score.get("value"))
    text = str(value_of(score, "stringValue", "string_value") or "").lower()
    if kind == "BOOLEAN":
        if value in (0.0, 1.0):
            return value == 1.0
        return {"true": True, "false": False}.get(text)
    if kind == "NUMERIC" and value in (0.0, 1.0):
        return value == 1.0
    return None
