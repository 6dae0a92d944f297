"""The recorded harness's no-progress detector, read back from its stops.

A run that the recorded harness stopped as ``needs_human:no_progress``
(category ``no_progress``, :mod:`sim.calibration.exits`) says the harness had
a no-progress detector; the calls it made say which. :func:`fit_detector`
replays the harness's own detector (:class:`sim.harness.detector.NoProgressDetector`,
repetition and cycles at their default periods) over each run's tool-call
keys (:mod:`sim.calibration.data`'s ``keys``: name and canonical arguments)
for each candidate setting, ``repeat_threshold`` ``k`` and ``nudges`` ``m``,
and keeps the one under which the most runs end as they did: a stopped run
stops exactly at its last call, every other run is never stopped. Runs in
which no tool call recurs cannot be stopped by any candidate
(``repeat_threshold`` >= 2) and agree with all, so only the others are
replayed; the candidates are ``k`` from 2 to the shortest final streak of
identical calls among the stopped runs (a repetition stop needs ``k`` in a
row; at most :data:`MAX_THRESHOLD`) and ``m`` from 0 to :data:`MAX_NUDGES`;
ties go to the fewest nudges, then the lowest threshold.

The chosen replay also says after which calls the recorded harness nudged the
model (a detection with nudges left): :attr:`DetectorFit.nudged`, per call,
which :mod:`sim.calibration.estimate` uses to tell a loop's escapes after a
nudge (``escape_after_nudge``) from its escapes on its own (``self_escape``).

Without a stop there is nothing to read: no detector is fitted (the
calibrated harness has none, as before). Signals that need what traces do not
record (observation hashes for ``stale_window``, an objective metric) are not
looked for: stops no candidate explains are counted in the note.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.calibration.data import Traces
from sim.harness.detector import NoProgressDetector
from sim.harness.params import DetectorParams
from sim.harness.state import DetectorMemory

MAX_THRESHOLD = 10
"""Highest ``repeat_threshold`` considered."""
MAX_NUDGES = 3
"""Most nudges considered."""


@dataclass
class DetectorFit:
    """The recorded detector as far as its stops show it (see the module
    docstring): its setting, the runs it stopped (``stops``), the runs
    replayed (``checked``: those with a recurring tool call, and the stopped
    ones) and how many of them end under the setting as recorded
    (``consistent``; of the stopped ones, ``explained``), and per call of the
    traces whether a nudge followed it."""

    repeat_threshold: int
    nudges: int
    stops: int
    checked: int
    consistent: int
    explained: int
    nudged: np.ndarray = field(repr=False)
    note: str = ""

    def section(self) -> dict[str, object]:
        """The scenario's ``harness.detector`` section."""
        return {"enabled": True, "repeat_threshold": self.repeat_threshold,
                "nudges": self.nudges}


def _final_streak(keys: list[tuple[str, ...]]) -> int:
    """Identical calls (same keys) in a row at the end of a run."""
    n = 0
    last = keys[-1] if keys else None
    for k in reversed(keys):
        if k != last or not k:
            break
        n += 1
    return n


def _replay(detector: NoProgressDetector, keys: list[tuple[str, ...]], nudges: int
            ) -> tuple[int | None, list[int]]:
    """``(call at which the detector stops the run or None, calls after which
    it nudges)`` for one run's tool-call keys, as the harness's loop answers
    the signals: a nudge while fewer than ``nudges`` were given, else a stop."""
    memory = DetectorMemory()
    given: list[int] = []
    for i, call in enumerate(keys):
        signal = None
        for key in call:
            found = detector.observe(memory, key, "", False, None)
            signal = signal or found
        if signal is not None:
            if len(given) >= nudges:
                return i, given
            given.append(i)
    return None, given


def _sequences(traces: Traces) -> tuple[dict[str, list[int]], dict[str, list[tuple[str, ...]]]]:
    """Per run with a recurring tool call: its calls' rows and their keys."""
    calls = traces.calls
    keys = calls["keys"].to_numpy(object)
    run_of = calls["run_id"].to_numpy(object)
    by_run: dict[str, list[int]] = {}
    for i in np.flatnonzero([k is not None for k in keys]).tolist():
        by_run.setdefault(run_of[i], []).append(i)
    return by_run, {r: [keys[i] for i in rows] for r, rows in by_run.items()}


def _score(sequences: dict[str, list[tuple[str, ...]]], stopped: set[str], k: int, m: int
           ) -> tuple[int, int, dict[str, list[int]]]:
    """``(runs that end as recorded, stops explained, nudges by run)`` under
    ``repeat_threshold`` ``k`` and ``m`` nudges."""
    detector = NoProgressDetector(DetectorParams(repeat_threshold=k, max_nudges=m))
    agree = explained = 0
    marks: dict[str, list[int]] = {}
    for run, seq in sequences.items():
        stop, given = _replay(detector, seq, m)
        ok = stop == len(seq) - 1 if run in stopped else stop is None
        agree += ok
        explained += ok and run in stopped
        if given:
            marks[run] = given
    return agree, explained, marks


def fit_detector(traces: Traces) -> DetectorFit | None:
    """The recorded detector of ``traces`` (None when no run was stopped by one,
    or no candidate explains a stop)."""
    runs = traces.runs
    stopped = set(runs.loc[runs["category"] == "no_progress", "run_id"])
    if not stopped or "keys" not in traces.calls:
        return None
    by_run, sequences = _sequences(traces)
    streaks = [s for s in (_final_streak(sequences[r]) for r in stopped if r in sequences)
               if s >= 2]
    top = min(MAX_THRESHOLD, min(streaks)) if streaks else 2
    scored = [(_score(sequences, stopped, k, m), -m, -k)
              for m in range(MAX_NUDGES + 1) for k in range(2, top + 1)]
    (agree, explained, marks), neg_m, neg_k = max(scored, key=lambda s: (s[0][0], s[1], s[2]))
    if explained == 0:
        return None
    nudged = np.zeros(len(traces.calls), dtype=bool)
    for run, given in marks.items():
        nudged[[by_run[run][i] for i in given]] = True
    checked = len(sequences) + len(stopped - set(sequences))
    k, m = -neg_k, -neg_m
    note = (f"the recorded detector read back from its {len(stopped)} stops: repetition "
            f"threshold {k}, {m} nudge(s) before the stop; replayed over the {checked} runs "
            f"with a recurring tool call or a stop, {agree} end as recorded "
            f"({explained} of the {len(stopped)} stops); {int(nudged.sum())} nudges")
    return DetectorFit(k, m, len(stopped), checked, agree, explained, nudged, note)
