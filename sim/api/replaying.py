"""Replaying from the API: ``sim.replay(traces, scenario)`` is ``python -m sim
replay TRACES SCENARIO``.

The scenario's ``harness`` section is the candidate (a ``sweep`` over harness
settings gives one cell per setting); its ``world`` is not used. Every
recorded run of the trace folder is replayed through the real harness loop by
:func:`sim.drivers.replay.replay_runs` (the driver the command uses), and the
results folder is written whole by :func:`sim.output.replay.write_replay_results`
(``results.parquet``, ``summary.json``, ``report.md``, ``report.html``).

``python -m sim replay`` (``sim/cli/replay.py``) is a shell over
:func:`replay`: it parses its options, calls it and prints the summary.

Runs are replayed in chunks (:func:`sim.jobs.chunk_size`: four per worker, one
for a single worker, at most :data:`MAX_CHUNK` runs) on a scheduler of
:mod:`sim.sweeps.schedulers` (``workers`` processes here, or Dask) and put back
in order: the rows are the same for any number of workers. A chunk is sent as
the folder and a range of runs. A folder whose calls come in its runs' order
(what sim and ``traces import`` write) is checked here a batch at a time and
never held whole: each worker reads its chunk's calls by row range
(:mod:`sim.drivers.replay.reading`, the one reader); any other folder is read
whole here (a forked worker has it already, a Dask worker reads it once).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from sim.api.scenarios import Overrides, load_scenario
from sim.api.simulating import read_folder
from sim.bad_input import InputError
from sim.output.html import summary_frame
from sim.scenario.model import Scenario

if TYPE_CHECKING:
    from sim.drivers.replay.reading import FolderIndex, TraceTables
    from sim.scenario.model import HarnessConfig

__all__ = ["MAX_CHUNK", "Replayed", "replay"]


@dataclass(frozen=True)
class Replayed:
    """A replay written by :func:`replay`.

    ``rows``: one row per recorded run and cell (the task-record columns:
    ``outcome``, ``steps``, ``input_tokens``, ``cost_usd`` in recorded USD, ...,
    plus the replay's own: ``run_id``, ``model``, ``resolved``, the recorded
    outcome and cost); ``summary``: one row per cell, as :func:`sim.sweep`
    returns it; ``replay``: per cell the replay's figures (runs ``stopped``
    and why, tokens and USD ``saved``, ``detector`` firings, ``interventions``
    and the bounds they put on cost, ``fidelity``); ``notes``: what the
    command prints on stderr (unused sections, unpriced models); ``path``: the
    results folder (``compare`` and :func:`sim.read_results` read it)."""

    rows: pd.DataFrame
    summary: pd.DataFrame
    replay: dict[str, dict[str, Any]]
    notes: tuple[str, ...]
    path: Path


@dataclass(frozen=True)
class _Candidate:
    """The candidate harness and what the scenario file said besides."""

    scenario: Scenario
    notes: list[str]


def replay(traces: str | os.PathLike[str], scenario: str | os.PathLike[str] | Scenario,
           overrides: Overrides = None, *, out: str | os.PathLike[str] | None = None,
           force: bool = False, after_intervention: str = "continue",
           tool_error_kind: str = "validation", polling: Sequence[str] = (),
           allow_plugins: bool = False, progress: bool = False, workers: int = 1,
           scheduler: str | None = None, notify: Callable[[str], None] | None = None,
           where: str | Sequence[str] | None = None) -> Replayed:
    """Replay the recorded runs of ``traces`` under the harness of ``scenario``
    (a file, a scenario name such as ``"replay"``, or a Scenario) with
    ``overrides`` applied, write the results folder ``out`` (default
    ``reports/replay_<scenario name>``, or under ``$SIM_OUT``) and return a
    :class:`Replayed`.

    ``force`` replaces an ``out`` holding another run's results;
    ``after_intervention``: where the candidate nudges, retries or rejects a
    claim the recorded harness did not, ``continue`` as recorded (an upper
    bound on cost) or ``stop`` there (a lower bound); ``tool_error_kind``: the
    kind the candidate's classifier sees for a recorded tool error;
    ``polling``: recorded tools the detector treats as polling; ``progress``
    shows a progress bar on stderr; ``workers`` processes replay the runs in
    chunks on ``scheduler`` (None or ``"local"``: here; ``"dask"``: a Dask
    LocalCluster; ``tcp://HOST:PORT``: a running Dask scheduler), with the
    same results for any number; ``notify(note)`` is called with each note
    as it arises (they are in :attr:`Replayed.notes` too); ``where``:
    ``--where`` conditions on ``runs.parquet`` (:mod:`sim.traces.where`):
    only the runs they select are replayed. Bad input raises
    :class:`sim.bad_input.InputError` before anything is replayed.

    >>> replayed = replay("traces/tau2", "replay",
    ...                   {"harness.budgets.tokens": 150_000})      # doctest: +SKIP
    >>> replayed.summary[["cell", "succeeded", "cost_mean"]]        # doctest: +SKIP
    """
    from sim.drivers.replay import AFTER_INTERVENTION, TOOL_ERROR_KINDS, ReplayOptions
    from sim.drivers.replay.reading import forget, open_folder, refused_note
    from sim.output import folder
    from sim.output.provenance import folder_record, run_provenance
    from sim.scenario.limits import check_workers
    from sim.scenario.project import out_root
    from sim.traces.where import parse_where, slice_folder, where_text

    conditions = parse_where(where)
    if conditions:
        with tempfile.TemporaryDirectory(prefix="sim-replay-slice-") as tmp:
            part, kept, total = slice_folder(traces, conditions, tmp)
            if notify is not None:
                notify(f"note: replaying {kept:,} of {total:,} runs ({where_text(conditions)})")
            return replay(part, scenario, overrides, out=out, force=force,
                          after_intervention=after_intervention,
                          tool_error_kind=tool_error_kind, polling=polling,
                          allow_plugins=allow_plugins, progress=progress, workers=workers,
                          scheduler=scheduler, notify=notify)
    _choice(after_intervention, AFTER_INTERVENTION, "--after-intervention")
    _choice(tool_error_kind, TOOL_ERROR_KINDS, "--tool-error-kind")
    check_workers(workers)
    candidate = _candidate(scenario, overrides, allow_plugins)
    s = candidate.scenario
    runs = open_folder(os.fspath(traces))  # forked workers inherit a whole read
    refused = refused_note(runs.refused)  # runs without recorded usage
    if not len(runs):
        raise InputError("the trace folder holds no runs to replay"
                         + (f" ({refused.removeprefix('warning: ')})" if refused else ""),
                         source=str(traces))
    target = Path(out) if out is not None else out_root() / f"replay_{s.name}"
    provenance = {**run_provenance(s, command="replay", overrides=_words(overrides)),
                  "traces": folder_record(traces)}
    folder.prepare(target, provenance, force=force)
    notes = _Notes(notify)
    for note in candidate.notes:
        notes.add(note)
    if refused:
        notes.add(refused)
    if runs.tool_calls == 0 and s.harness.detector.enabled:
        notes.add(f"note: {traces} records no tool calls: the detector cannot be "
                  "judged (budgets are)")
    options = ReplayOptions(after_intervention, tool_error_kind, frozenset(polling))
    try:
        cells = _replay_cells(s, runs, options, os.fspath(traces), notes,
                              _Where(workers, scheduler, progress))
        with folder.replace(target) as staging:
            summary = _write(staging, s, runs, cells, provenance)
        del cells  # the rows are read back from the folder: one copy at a time
    finally:
        del runs
        forget()
    rows, written = read_folder(target)
    return Replayed(rows, summary_frame(written), {c["name"]: c["replay"]
                                                    for c in summary["cells"]},
                    tuple(notes.items), target)


class _Notes:
    """Notes in the order they arise, each once, each passed to ``notify``."""

    def __init__(self, notify: Callable[[str], None] | None) -> None:
        self.items: list[str] = []
        self.notify = notify

    def add(self, note: str) -> None:
        if note in self.items:
            return
        self.items.append(note)
        if self.notify is not None:
            self.notify(note)


@dataclass(frozen=True)
class _Where:
    """Where and how the chunks run: ``workers`` processes on ``scheduler``,
    a progress bar on stderr when ``progress``."""

    workers: int
    scheduler: str | None
    progress: bool


def _choice(value: str, allowed: Sequence[str], flag: str) -> None:
    if value not in allowed:
        raise InputError(f"{flag} must be one of {', '.join(allowed)}, got {value!r}")


def _words(overrides: Overrides) -> list[str]:
    """Overrides as provenance records them: ``path=value`` words."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return [f"{k}={json.dumps(v)}" for k, v in overrides.items()]
    return [str(o) for o in overrides]


def _candidate(scenario: str | os.PathLike[str] | Scenario, overrides: Overrides,
               allow_plugins: bool) -> _Candidate:
    """The candidate scenario, checked as the command checks it, and its notes."""
    if isinstance(scenario, Scenario):
        s = load_scenario(scenario, overrides, allow_plugins=allow_plugins)
        _harness_sweep(s, s.name)
        return _Candidate(s, [])
    from sim.scenario.model import read_yaml

    source = os.fspath(scenario)
    raw = read_yaml(source)
    if "world" in raw and "harness" not in raw:
        raise InputError("has a world section and no harness section: replay needs the "
                         "candidate harness (a harness section); a world is not used by "
                         "replay, which answers from the recorded runs",
                         source=source, path="harness")
    s = load_scenario(source, overrides, allow_plugins=allow_plugins)
    notes = []
    if "world" in raw:
        notes.append(f"note: the world section of {source} is not used by replay")
    if s.harness.conversation.enabled:
        notes.append("note: harness.conversation is not used by replay: recorded text turns "
                     "are replayed as reply_to_user calls")
    if "des" in raw or s.engine != "direct":
        notes.append("note: replay answers from the recording; the DES engine's capacity "
                     "settings are not used")
    _harness_sweep(s, source)
    return _Candidate(s, notes)


def _harness_sweep(s: Scenario, source: str) -> None:
    for key in s.sweep:
        if not key.startswith("harness."):
            raise InputError("replay sweeps harness settings only (the world is not used)",
                             source=source, path=f"sweep.{key}")


@dataclass
class _Cell:
    rows: pd.DataFrame
    params: dict[str, Any]
    block: dict[str, Any]


def _replay_cells(s: Scenario, runs: TraceTables | FolderIndex, options: Any, traces: str,
                  notes: _Notes, where: _Where) -> dict[str, _Cell]:
    """Every cell of the candidate's sweep replayed over ``runs``."""
    from sim.drivers.catalogue_prices import CataloguePrices
    from sim.drivers.replay.reading import TraceTables
    from sim.scenario.model import expand, harness_params, resolve_detector
    from sim.world.params import WorldParams

    text_hashes = runs.text_hashes
    stated = recorded_limits(traces)
    out: dict[str, _Cell] = {}
    for name, cell, values in expand(s):
        h = _without_conversation(cell.harness)
        template = harness_params(h, WorldParams())
        pricing = runs.pricing(template, CataloguePrices(h))
        for note in pricing.notes():  # an unknown model is never priced silently
            notes.add(note)
        rows = _replay_cell(traces, not isinstance(runs, TraceTables), name, len(runs), (
            template, options, pricing, resolve_detector(h.detector.name)), where)
        block = _block(rows, traces, options, h, text_hashes, set(pricing.default))
        block["pricing"] = pricing.to_dict()
        block["changes"] = changes_from_recorded(stated, cell.harness)
        out[name] = _Cell(rows, dict(values), block)
    return out


def recorded_limits(traces: str | os.PathLike[str]) -> dict[str, Any]:
    """The budgets the recorded runs state (``runs.parquet``'s
    ``step_limit``, ``cost_limit_usd``, ``error_limit``: the harness in force
    when they ran, as far as it is known; :func:`sim.tuning.inforce.default_harness`),
    by field of ``harness.budgets``; empty when none is stated."""
    from sim.tuning.inforce import default_harness

    budgets = default_harness(os.fspath(traces)).model_dump(mode="json")["budgets"]
    return {k: v for k, v in budgets.items() if v is not None}


def changes_from_recorded(stated: Mapping[str, Any], h: HarnessConfig) -> dict[str, Any]:
    """What the replayed harness ``h`` changes from the one in force in the
    recorded runs, where the runs state it (:func:`recorded_limits`):
    ``known`` (the dotted fields stated) and ``changes``
    (``{"path", "recorded", "replayed"}``, :func:`sim.scenario.diff.setting_changes`;
    a budget ``h`` sets that the runs do not state: recorded ``not recorded``)."""
    from sim.scenario.diff import setting_changes

    mine = h.model_dump(mode="json")["budgets"]
    found = setting_changes({"harness": {"budgets": dict(stated)}},
                            {"harness": {"budgets": {k: mine.get(k) for k in stated}}})
    set_here = {k: v for k, v in mine.items() if v is not None and k not in stated}
    unstated = setting_changes({"harness": {"budgets": dict.fromkeys(set_here)}},
                               {"harness": {"budgets": set_here}})
    return {"known": [f"harness.budgets.{k}" for k in stated],
            "changes": [{"path": c.path, "recorded": c.base, "replayed": c.candidate}
                        for c in found]
            + [{"path": c.path, "recorded": "not recorded", "replayed": c.candidate}
               for c in unstated]}


def _replay_cell(traces: str, streamed: bool, name: str, count: int,
                 setting: tuple[Any, ...], where: _Where) -> pd.DataFrame:
    """One cell's rows (records, then the replay's columns): the ``count``
    runs of ``traces`` replayed in chunks on ``where`` (each worker reading
    its chunk's calls when ``streamed``) and put back in order."""
    from sim.jobs import chunk_size, in_order, spans
    from sim.progress import progress_bar
    from sim.sweeps.schedulers import make_scheduler

    size = chunk_size(count, most=MAX_CHUNK, workers=where.workers)
    jobs = [(traces, streamed, start, stop, *setting, name) for start, stop in spans(count, size)]
    with progress_bar(total=count, desc=f"replay {name}", unit="run",
                      disable=not where.progress, leave=False) as bar, \
            make_scheduler(where.scheduler, where.workers) as scheduler:
        parts = list(in_order(scheduler.run(replay_chunk, jobs),
                              arrived=lambda part: bar.update(len(part))))
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def replay_chunk(traces: str, streamed: bool, start: int, stop: int, *setting: Any
                 ) -> pd.DataFrame:
    """The rows of runs ``start`` to ``stop - 1`` of ``traces`` (a chunk, run
    by a worker: :func:`sim.drivers.replay.rows.replay_slice`, which reads
    the chunk's calls itself when ``streamed``), as a frame: the task
    records' columns, then the replay's own."""
    from sim.drivers.replay import REPLAY_DTYPES
    from sim.drivers.replay.rows import replay_slice
    from sim.output.results import records_frame

    template, options, pricing, make_detector, cell = setting
    records, extras = replay_slice(traces, start, stop, template, options, pricing,
                                   make_detector, cell, streamed=streamed)
    return pd.concat([records_frame(records),
                      pd.DataFrame(extras).astype(REPLAY_DTYPES)], axis=1)


MAX_CHUNK = 2_000
"""The most runs one chunk of a replay holds (a worker's memory and the
progress bar's step)."""


def _without_conversation(h: HarnessConfig) -> HarnessConfig:
    """Replay answers text turns itself (``reply_to_user``)."""
    if not h.conversation.enabled:
        return h
    return h.model_copy(update={"conversation": h.conversation.model_copy(
        update={"enabled": False})})


def _block(rows: pd.DataFrame, traces: str, options: Any, h: HarnessConfig,
           text_hashes: bool, unpriced: set[str]) -> dict[str, Any]:
    from sim.output.replay import replay_block

    return replay_block(rows, traces=traces, after_intervention=options.after_intervention,
                        tool_error_kind=options.tool_error_kind,
                        detector_enabled=h.detector.enabled, text_hashes=text_hashes,
                        unpriced_models=tuple(sorted(unpriced)))


def _write(staging: Path, s: Scenario, runs: TraceTables | FolderIndex, cells: dict[str, _Cell],
           provenance: dict[str, Any]) -> dict[str, Any]:
    from sim.output.replay import write_replay_results

    return write_replay_results(
        staging, {n: c.rows for n, c in cells.items()}, {n: c.params for n, c in cells.items()},
        {n: c.block for n, c in cells.items()},
        title=f"Replay: {s.name} over {len(runs):,} recorded runs",
        description=s.description, provenance=provenance)


def written_summary(replayed: Replayed) -> dict[str, Any]:
    """The summary.json a replay wrote (what ``replay --format json`` prints)."""
    return json.loads((replayed.path / "summary.json").read_text())


def replayed_text(replayed: Replayed) -> str:
    """What ``replay`` prints: each cell's table and replay figures, then the
    line naming the results folder and its files."""
    from sim.output.results import format_table
    from sim.output.safe_text import printable

    lines = []
    for cell in written_summary(replayed)["cells"]:
        lines += [format_table(cell), lead_lines(cell["replay"]), ""]
    lines.append(f"results in {printable(replayed.path)}/ (results.parquet, summary.json, "
                  f"report.md, report.html)")
    return "\n".join(lines)


def lead_lines(block: dict) -> str:
    """The replay figures under a cell's terminal table."""
    from sim.cost.recorded import basis_line
    from sim.output.replay import changes_text, usd

    st, sv, det = block["stopped"], block["saved"], block["detector"]
    changed = changes_text(block)
    lines = [f"  {changed}"] if changed else []
    lines += [f"  stopped        {st['runs']:,} runs: {st['resolved']:,} resolved, "
             f"{st['unresolved']:,} unresolved, {st['unknown']:,} not judged"]
    lines += [f"    {outcome:<26}{c['runs']:>6}  ({c['resolved']:,} resolved)"
              for outcome, c in st["by_outcome"].items()]
    lines.append(f"  saved          {sv['prompt_tokens']:,} prompt tokens, "
                 f"{sv['output_tokens']:,} output tokens, {usd(sv['cost_usd'])} "
                 f"({usd(sv['cost_usd_on_resolved'])} on resolved runs), "
                 f"{usd(sv['priced_usd'])} at the runs' prices")
    if block["recorded"].get("price_basis"):
        lines.append(f"  {basis_line(block['recorded']['price_basis'])}")
    if not det["judgeable"]:
        lines.append(f"  detector       not judged: {det['note']}")
    else:
        for signal, e in det["signals"].items():
            lines.append(f"  detector       {signal}: {e['firings']:,} firings on {e['runs']:,} "
                         f"runs, {100 * e['resolved_share']:.1f}% of them resolved")
    iv = block["interventions"]
    if iv["runs"]:
        lines.append(f"  diverged       {iv['runs']:,} runs; total cost "
                     f"{usd(iv['cost_usd']['lower'])} (stop) to "
                     f"{usd(iv['cost_usd']['upper'])} (continue)")
    fi = block["fidelity"]
    if fi["prompt_mismatch_runs"]:
        lines.append(f"  fidelity       {fi['prompt_mismatch_runs']:,} runs with "
                     f"{fi['prompt_mismatch_calls']:,} prompt counts off the recording")
    return "\n".join(lines)
