"""No-progress detector (seed 001): cheap signatures of a stuck run.

Four signals, each computed without asking a model:

* repetition: the same canonical call (tool name plus sorted arguments)
  ``repeat_threshold`` times in a row;
* cycle: the recent calls repeat with a period of 2..``cycle_max_period``
  (A-B-A-B) ``cycle_repeats`` times;
* no new information: ``stale_window`` observations in a row that were all
  seen before (0 disables);
* no movement: a reported objective metric (lower is better) has not improved
  for ``objective_window`` steps (0 disables).

Polling tools are keyed on their call *and* result, so polling a changing
status is never a repetition, while polling an unchanged one still is.

The response is graduated by the loop (``DetectorParams.max_nudges`` nudges, then
``needs_human``). After each detection the detector's windows restart, so the
next detection needs fresh evidence. All memory lives in
:class:`~sim.harness.state.DetectorMemory`, inside the checkpointed state.

A custom detector implements the same ``observe`` method (see
:class:`Detector`) and is chosen in a scenario by name or import path.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from sim.harness.params import DetectorParams
from sim.harness.state import DetectorMemory

REPETITION = "repetition"
CYCLE = "cycle"
NO_NEW_INFORMATION = "no_new_information"
NO_MOVEMENT = "no_objective_movement"

_SEEN_LIMIT = 256
_SCALARS = frozenset({str, int, float, bool, type(None)})


def canonical_call(name: str, arguments: Any) -> str:
    """A stable key for a call: its tool name and its arguments with keys
    sorted, so the same call always gets the same key, across runs and
    processes. Short keys are the canonical text itself; keys longer than
    64 characters are replaced by a 16-hex-digit BLAKE2b hash. Arguments
    that are not an object (a malformed call) get a key too."""
    if type(arguments) is not dict:
        return _short(f"{name}\0{_dump(arguments)}")
    if len(arguments) == 1:  # the common case: what the general path below gives, cheaper
        for key, value in arguments.items():
            if type(value) in _SCALARS:
                text = f"{name}\0{key!r}={value!r}"
                return text if len(text) <= 64 else _hashed(text)
    try:
        keys = sorted(arguments)
    except TypeError:  # keys of several types
        return _short(f"{name}\0{arguments!r}")
    parts = [name]
    for key in keys:
        value = arguments[key]
        if type(value) not in _SCALARS:
            break
        parts.append(f"{key!r}={value!r}")  # flat arguments: cheap, canonical, injective
    else:
        return _short("\0".join(parts))
    return _short(f"{name}\0{_dump(arguments)}")


def _dump(arguments: Any) -> str:
    try:
        return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    except RecursionError:  # nested too deep to print: one key for all such calls
        return "<nested too deep>"
    except (TypeError, ValueError):
        try:
            return repr(arguments)
        except RecursionError:
            return "<nested too deep>"


def observation_hash(text: str) -> str:
    """A stable key for an observation's text (the text itself when at most 64
    characters, else a 16-hex-digit BLAKE2b hash)."""
    return text if len(text) <= 64 else _hashed(text)


def _short(text: str) -> str:
    return text if len(text) <= 64 else _hashed(text)


def _hashed(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class Detector(Protocol):
    """What the loop needs of a no-progress detector."""

    def observe(self, memory: DetectorMemory, call_key: str, observation_key: str,
                polling: bool, metric: float | None) -> str | None:
        """Record one executed call and its observation; return the name of the
        signal that fired, or None."""


class NoProgressDetector:
    """The default detector: repetition, cycles, no new information and no
    movement on an objective, with thresholds from :class:`DetectorParams`."""

    def __init__(self, params: DetectorParams) -> None:
        self.params = params
        self._window = max(params.repeat_threshold, params.cycle_max_period * params.cycle_repeats)
        # a repetition of a threshold >= 2 and a cycle both need the newest call
        # to have been seen before in the window (a threshold of 1 fires always)
        self._single_call_fires = params.repeat_threshold < 2

    def observe(self, memory: DetectorMemory, call_key: str, observation_key: str,
                polling: bool, metric: float | None) -> str | None:
        """Record one executed call and its observation; return the signal
        that fired (and restart the windows), or None."""
        p = self.params
        if not p.enabled:
            return None
        calls = memory.calls
        key = call_key + observation_key if polling else call_key
        calls.append(key)
        if len(calls) > self._window:
            del calls[0]
        signal = None
        if self._single_call_fires or calls.count(key) > 1:  # else neither can fire
            signal = _repetition(calls, p.repeat_threshold) or _cycle(calls, p)
        if signal is None and p.stale_window:
            signal = _stale(memory, observation_key, p.stale_window)
        if signal is None and p.objective_window and metric is not None:
            signal = _no_movement(memory, metric, p.objective_window)
        if signal is not None:
            memory.detections += 1
            memory.calls.clear()
            memory.stale_streak = 0
            memory.steps_without_improvement = 0
        return signal


def _repetition(calls: list[str], k: int) -> str | None:
    if len(calls) < k:
        return None
    last = calls[-1]
    if k > 1 and calls[-2] != last:  # the common case: the newest call is not a repeat
        return None
    for i in range(3, k + 1):
        if calls[-i] != last:
            return None
    return REPETITION


def _cycle(calls: list[str], p: DetectorParams) -> str | None:
    n = len(calls)
    last = calls[-1]
    for period in range(2, p.cycle_max_period + 1):
        span = period * p.cycle_repeats
        if n < span:
            break
        if calls[-1 - period] != last:
            continue  # cheap early exit: the newest call does not recur at this period
        start = n - span
        if all(calls[i] == calls[i - period] for i in range(start + period, n)) and any(
                calls[i] != last for i in range(start, n)):
            return CYCLE  # a constant run is a repetition, not a cycle
    return None


def _stale(memory: DetectorMemory, key: str, window: int) -> str | None:
    seen = memory.seen_observations
    if key in seen:
        memory.stale_streak += 1
    else:
        memory.stale_streak = 0
        seen.append(key)
        if len(seen) > _SEEN_LIMIT:
            del seen[0]
    return NO_NEW_INFORMATION if memory.stale_streak >= window else None


def _no_movement(memory: DetectorMemory, metric: float, window: int) -> str | None:
    if memory.best_metric is None or metric < memory.best_metric:
        memory.best_metric = metric
        memory.steps_without_improvement = 0
        return None
    memory.steps_without_improvement += 1
    return NO_MOVEMENT if memory.steps_without_improvement >= window else None
