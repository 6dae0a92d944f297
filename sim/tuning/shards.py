"""A share of the recorded runs, replayed in force once, answering every candidate.

A :class:`Shard` holds runs ``start`` to ``stop - 1`` of a trace folder (read
here a chunk of :data:`READ_CHUNK` runs at a time:
:func:`sim.drivers.replay.reading.runs_of`) or of a list of recorded runs. It
replays each run once under the harness in force with the marks of
:mod:`sim.tuning.stops` and keeps of it only what a candidate is answered
from: what tune reads of the replay (:class:`~sim.tuning.stops.Stopped`), the
run's marks (one chunk's in one array per field), its final counters and
model, its largest prompt, its recorded fields without its calls (``RunRecord`` with
no calls: the drill-down's columns) and the key of its prices. The recorded
calls are dropped once the chunk is replayed; a run the marks cannot answer
is read again from the folder for its replay under the candidate.

:meth:`Shard.answer` evaluates one candidate harness on every run of the
shard (the replay in force where the candidate cannot change the run, else
the marks' stop, else replayed again) and returns an :class:`Answer`: numpy
arrays, one value per run, and the outcomes counted. :class:`Shards` runs one
shard in this process, or ``workers`` shards in forked worker processes (each
reading its own rows of the folder once) to which each candidate is sent at
once: every worker answers every candidate for its runs, so candidates are
evaluated in parallel and the folder is read once.
"""

from __future__ import annotations

import math
import multiprocessing
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sim.drivers.catalogue_prices import CataloguePrices
from sim.drivers.replay import Replay, RunReplay, replay_runs, run_params
from sim.drivers.replay.driver import RunDriver
from sim.drivers.replay.pricing import ModelPricing, priced_calls
from sim.drivers.replay.reading import runs_of
from sim.engines.gc_paused import gc_paused
from sim.harness.budgets import LimitExceeded, Limits, worst_case_cost
from sim.harness.state import SUCCEEDED, DetectorMemory, HarnessState
from sim.jobs import shares, spans
from sim.scenario.model import HarnessConfig, harness_params, resolve_detector
from sim.traces.model import RunRecord
from sim.tuning.stops import (
    SAME,
    UNSURE,
    RunMarks,
    StopMarks,
    Stopped,
    answerable,
    as_stopped,
    counters,
    first_stop,
    load_counters,
    pack,
    probe_state,
    stopped,
)
from sim.world.params import WorldParams

READ_CHUNK = 500
"""Runs a shard reads and replays at once (their recorded calls are then dropped):
small, since what a chunk's replays leave behind fragments the memory the kept
runs live in (10,000 runs in one shard: 391 MiB resident after, against 493
MiB with chunks of 2,000)."""


@dataclass(frozen=True)
class Setup:
    """What every shard shares: the harness in force (``harness``, conversation
    off), the catalogue (``prices_for``) and each call's prices (``pricing``),
    and where the runs are: ``held`` (a list of recorded runs) or ``folder``
    (read by row range, ``streamed`` or from the whole read:
    :func:`~sim.drivers.replay.reading.runs_of`)."""

    harness: HarnessConfig
    prices_for: CataloguePrices
    pricing: ModelPricing
    folder: str | None = None
    streamed: bool = False
    held: Sequence[RunRecord] | None = None

    def runs(self, start: int, stop: int) -> list[RunRecord]:
        """The recorded runs ``start`` to ``stop - 1``."""
        if self.held is not None:
            return list(self.held[start:stop])
        assert self.folder is not None
        return runs_of(self.folder, start, stop, self.streamed)


@dataclass
class Answer:
    """One candidate on a shard's runs, one value per run in order: whether
    the run succeeded (``success``), its cost (USD), active seconds and tokens
    (prompt, output and thinking); the ``outcomes`` of its runs counted, the
    runs that ``diverged``, and the runs replayed again (``redriven``) or
    answered by the marks (``marked``) for it."""

    success: np.ndarray
    cost: np.ndarray
    active_s: np.ndarray
    tokens: np.ndarray
    outcomes: Counter[str]
    diverged: int
    redriven: int
    marked: int

    @staticmethod
    def joined(parts: Sequence[Answer]) -> Answer:
        """The answers of consecutive shards as one."""
        outcomes: Counter[str] = Counter()
        for p in parts:
            outcomes.update(p.outcomes)
        def joined(name: str) -> np.ndarray:
            return np.concatenate([getattr(p, name) for p in parts])

        return Answer(joined("success"), joined("cost"), joined("active_s"), joined("tokens"),
                      outcomes, sum(p.diverged for p in parts), sum(p.redriven for p in parts),
                      sum(p.marked for p in parts))


@dataclass
class Summary:
    """A shard's runs in force: per run (in order) ``needs`` (steps, prompt
    tokens, USD: see :meth:`~sim.tuning.replayed.ReplayEvaluator.needs`), the
    ``basis`` of the runs' prices counted, and the folder's ``extremes``: the
    most tool calls one call made, the largest tool result and the largest
    recorded prompt (tokens); ``judged``: its runs whose source says whether
    they were resolved (``resolved`` recorded)."""

    needs: dict[str, np.ndarray]
    basis: Counter[str]
    extremes: tuple[int, int, int]
    judged: int = 0


def slim(replay: Replay) -> Replay:
    """``replay`` without what tune does not read (the final history's
    messages and the detector's memory); returns it."""
    replay.state.messages = []
    replay.state.detector = DetectorMemory()
    return replay


def replay_marked(setup: Setup, h: HarnessConfig, runs: list[RunRecord], marked: bool
                  ) -> tuple[list[RunReplay], list[RunMarks | None], list[RunDriver | None]]:
    """``runs`` replayed under ``h``, each :func:`slim`, and, when ``marked``,
    each run's :class:`~sim.tuning.stops.RunMarks` of its replay and its
    driver (its ``params`` and ``priced_calls``: :func:`run_params` and
    :func:`priced_calls` of the run; None for a session: not marked)."""
    template = harness_params(h, WorldParams())
    watching: dict[int, StopMarks] = {}

    def observe(driver: RunDriver) -> list[StopMarks]:
        watching[id(driver.run)] = StopMarks(driver)
        return [watching[id(driver.run)]]

    done = replay_runs(runs, template, prices_for=setup.prices_for,
                       make_detector=resolve_detector(h.detector.name),
                       pricing=setup.pricing, observe=observe if marked else None)
    marks: list[RunMarks | None] = []
    drivers: list[RunDriver | None] = []
    if marked:
        cap = template.max_output_tokens
        for run, r in zip(runs, done, strict=True):
            seen = watching.get(id(run))
            marks.append(seen.marks(r.chosen, cap) if seen is not None else None)
            drivers.append(seen.driver if seen is not None else None)
    return ([RunReplay(slim(r.chosen), slim(r.lower), slim(r.upper)) for r in done], marks,
            drivers)


class Shard:
    """Runs ``start`` to ``stop - 1`` of ``setup``'s, replayed under its
    harness in force once (module docstring). ``keep``: also keep every run
    and its replays in force (``runs``, ``baseline``: for inspection; a
    folder's shard keeps neither)."""

    def __init__(self, setup: Setup, start: int, stop: int, keep: bool = False) -> None:
        self.setup = setup
        self.start = start
        self.template = harness_params(setup.harness, WorldParams())
        self.read: list[Stopped] = []
        """What tune reads of each run's replay in force."""
        self.heads: list[RunRecord] = []
        """Each run's recorded fields, without its calls."""
        self.marks: list[RunMarks | None] = []
        ends: list[tuple[float, ...]] = []
        self.end_models: list[str] = []
        """Each run's model at its end in force."""
        compacted: list[bool] = []
        self.largest: list[int] = []
        """Each run's largest prompt in force (tokens)."""
        self.group_of: list[tuple[Any, ...]] = []
        self.groups: dict[tuple[Any, ...], list[int]] = {}
        self.firsts: dict[tuple[Any, ...], RunRecord] = {}
        """The first run (with its calls) of each key of prices."""
        self.runs: list[RunRecord] = []
        self.baseline: list[RunReplay] = []
        self.answered: list[tuple[tuple[float, float, float], np.ndarray, np.ndarray]] = []
        """The candidates the marks answered (:meth:`_note`)."""
        needs: dict[str, list[float]] = {"steps": [], "tokens": [], "money": []}
        basis: Counter[str] = Counter()
        parallel = largest_result = biggest = judged = 0
        for low, high in spans(stop, READ_CHUNK, start=start):
            with gc_paused():  # a chunk: many short-lived objects, few cycles
                runs = setup.runs(low, high)
                done, marks, drivers = replay_marked(setup, setup.harness, runs, marked=True)
                for run, item, mark, driver in zip(runs, done, marks, drivers, strict=True):
                    self._keep(run, item, mark, driver, needs)
                    state = item.chosen.state
                    ends.append(counters(state))
                    self.end_models.append(state.model)
                    compacted.append(bool(state.compactions))
                    basis[item.chosen.basis] += 1
                    judged += run.resolved is not None
                    for call in run.calls:
                        parallel = max(parallel, len(call.tool_calls))
                        biggest = max(biggest, call.usage.prompt_tokens)
                        for t in call.tool_calls:
                            largest_result = max(largest_result, t.result_tokens or 0)
                pack([m for m in marks if m is not None])
                if keep:
                    self.runs += runs
                    self.baseline += done
        self.ends = np.array(ends, dtype=float).reshape(-1, len(ends[0]) if ends else 0)
        """Each run's final counters in force (:func:`~sim.tuning.stops.counters`)."""
        self.compacted = np.array(compacted, dtype=bool)
        """Whether each run compacted in force."""
        self.summary = Summary({k: np.array(v, dtype=float) for k, v in needs.items()},
                               basis, (parallel, largest_result, biggest), judged)
        chosen = self.read
        self.success = np.array([r.outcome == SUCCEEDED for r in chosen], dtype=bool)
        self.cost = np.array([r.cost_usd for r in chosen], dtype=float)
        self.active_s = np.array([r.active_s for r in chosen], dtype=float)
        self.tokens = np.array([r.tokens for r in chosen], dtype=float)
        self.outcomes = Counter(r.outcome for r in chosen)
        self.diverged = sum(r.diverged for r in chosen)
        self.redriven = 0
        self.marked = 0

    def _keep(self, run: RunRecord, item: RunReplay, mark: RunMarks | None,
              driver: RunDriver | None, needs: dict[str, list[float]]) -> None:
        """Note what the candidates read of one run and its replay in force
        (``driver``: the replay's, whose parameters and call prices are the
        run's; None: found here)."""
        r = item.chosen
        state = r.state
        self.read.append(as_stopped(r))
        self.heads.append(replace(run, calls=[]))
        self.marks.append(mark)
        self.largest.append(max(max(r.prompt_counts, default=0), state.context_tokens))
        if driver is not None:
            params, usds = driver.params, driver.priced_calls
        else:
            params = run_params(self.template, run, None, None, self.setup.pricing)
            usds = priced_calls(params, run)
        key = (params.model, params.prices, params.model_prices)
        i = len(self.group_of)
        self.groups.setdefault(key, []).append(i)
        self.group_of.append(key)
        self.firsts.setdefault(key, run)
        spent, need = 0.0, 0.0
        for call, usd in zip(run.calls, usds, strict=True):
            prices = params.prices_for(call.model or params.model)
            need = max(need, spent + worst_case_cost(prices, call.usage.prompt_tokens,
                                                     params.max_output_tokens))
            spent += usd
        needs["steps"].append(state.turns)
        needs["tokens"].append(state.prompt_tokens)
        needs["money"].append(need)

    # ------------------------------------------------------------ candidates
    def could_stop(self, h: HarnessConfig, among: Sequence[int] | None = None) -> list[int]:
        """The runs (this shard's indices, ascending) that the harness ``h``
        (the harness in force with tighter budgets) could end differently:
        those where a check of ``h``'s :class:`~sim.harness.budgets.Limits`
        refuses on the run's final state in force with its largest prompt and
        the output cap (each budget check's quantities only grow along a run,
        so a check that refuses anywhere in the run refuses there too), and
        those that compacted (a compaction's prompt is not among the steps').
        ``among``: only these runs (ascending) are checked (the others are
        known not to be: :meth:`changed`)."""
        template = harness_params(h, WorldParams())
        cap = template.max_output_tokens
        out: list[int] = []
        ends = self.ends.tolist() if among is None else None
        limits_of: dict[tuple[Any, ...], Limits] = {}
        probes: dict[str, HarnessState] = {}
        for i in range(len(self.group_of)) if among is None else among:
            if self.compacted[i]:
                out.append(i)
                continue
            key = self.group_of[i]
            limits = limits_of.get(key)
            if limits is None:
                limits = limits_of[key] = Limits(run_params(
                    template, self.firsts[key], None, None, self.setup.pricing))
            model = self.end_models[i]
            state = probes.get(model)
            if state is None:
                state = probes[model] = probe_state(model)
            # all the checks read of the final state
            load_counters(state, ends[i] if ends is not None else self.ends[i].tolist())
            try:
                limits.check_before_step(state)
                limits.check_usage(state)
                limits.check_before_model_call(state, self.largest[i], cap)
            except LimitExceeded:
                out.append(i)
        return out

    def changed(self, h: HarnessConfig) -> dict[int, Stopped]:
        """The runs (this shard's indices) whose reading under ``h`` may
        differ from the one in force, and that reading: from the marks where
        they answer, else replayed again.

        A candidate the marks answer (:func:`~sim.tuning.stops.answerable`)
        differs from the harness in force only in its steps, tokens and money
        budgets, and each check of a budget refuses under a looser one no
        more than under a tighter one (it compares what the run used with
        the budget). So for a candidate at least as loose in all three as
        one answered before (:meth:`_tighter`), the runs it could stop are
        among that one's, a run that one ends as in force it ends so too,
        and a run that one stops at step call ``j`` it stops at ``j`` or
        later: only those runs are checked, from ``j`` on, by the
        candidate's own checks (the same answers as checking every run from
        its first step call)."""
        out: dict[int, Stopped] = {}
        with gc_paused():  # the checks make many short-lived lists, no cycles
            marked = answerable(self.setup.harness, h)
            key = _budgets(h) if marked else None
            known = self._tighter(key) if key is not None else None
            again = self.could_stop(h, None if known is None else known[0].tolist())
            if again and marked:
                starts = None
                if known is not None:
                    starts = dict(zip(known[0].tolist(), known[1].tolist(), strict=True))
                again = self._marked(h, again, out, starts, key)
            elif key is not None:
                self._note(key, again, [])
            if again:
                self.redriven += len(again)
                for i, item in zip(again, self._again(h, again), strict=True):
                    out[i] = as_stopped(item.chosen)
        return out

    def _tighter(self, key: tuple[float, float, float]
                 ) -> tuple[np.ndarray, np.ndarray] | None:
        """Of the candidates answered before whose budgets are each at most
        ``key``'s (:func:`_budgets`), the one that could stop the fewest
        runs: its runs and, for each, where :func:`~sim.tuning.stops.first_stop`
        ended it (None: no such candidate)."""
        found = [(stops, js) for seen, stops, js in self.answered
                 if all(a <= b for a, b in zip(seen, key, strict=True))]
        return min(found, key=lambda f: len(f[0])) if found else None

    def _note(self, key: tuple[float, float, float], indices: list[int], js: list[int]
              ) -> None:
        """Remember a candidate the marks answer: its budgets, the runs it
        could stop and where :func:`~sim.tuning.stops.first_stop` ended each."""
        if any(seen == key for seen, _, _ in self.answered):
            return
        self.answered.append((key, np.array(indices, dtype=np.int32),
                              np.array(js, dtype=np.int32)))

    def _again(self, h: HarnessConfig, indices: list[int]) -> list[RunReplay]:
        """The runs ``indices`` read again (consecutive ones together) and
        replayed under ``h``."""
        runs: list[RunRecord] = []
        k = 0
        while k < len(indices):
            end = k + 1
            while end < len(indices) and indices[end] == indices[end - 1] + 1:
                end += 1
            low = self.start + indices[k]
            runs += self.setup.runs(low, low + end - k)
            k = end
        return replay_marked(self.setup, h, runs, marked=False)[0]

    def _marked(self, h: HarnessConfig, indices: list[int], out: dict[int, Stopped],
                starts: dict[int, int] | None = None,
                key: tuple[float, float, float] | None = None) -> list[int]:
        """Answer the runs ``indices`` under ``h`` from their marks, in
        ``out``; return those the marks cannot answer. ``starts``: where a
        tighter candidate's :func:`~sim.tuning.stops.first_stop` ended each
        (:meth:`changed`); ``key``: ``h``'s budgets, to remember it by."""
        template = harness_params(h, WorldParams())
        left: list[int] = []
        js: list[int] = []
        limits_of: dict[tuple[Any, ...], Limits] = {}
        probes: dict[str, HarnessState] = {}  # first_stop sets every counter the checks read
        for i in indices:
            marks = self.marks[i]
            if marks is None or not marks.exact:
                left.append(i)
                js.append(UNSURE)
                continue
            start = UNSURE if starts is None else starts[i]
            if start == SAME:  # a tighter candidate ends it as in force
                j, limit = SAME, ""
            else:
                group = self.group_of[i]
                limits = limits_of.get(group)
                if limits is None:
                    limits = limits_of[group] = Limits(
                        run_params(template, self.firsts[group], None, None,
                                   self.setup.pricing))
                probe = probes.get(marks.model)
                if probe is None:
                    probe = probes[marks.model] = probe_state(marks.model)
                j, limit = first_stop(limits, marks, probe, max(start, 0))
            js.append(j)
            if j == UNSURE:
                left.append(i)
            elif j != SAME:
                out[i] = stopped(self.heads[i], marks, j, limit)
            self.marked += j != UNSURE
        if key is not None:
            self._note(key, indices, js)
        return left

    def readings(self, h: HarnessConfig) -> list[Stopped]:
        """What tune reads of each run's replay under ``h``."""
        out = list(self.read)
        for i, r in self.changed(h).items():
            out[i] = r
        return out

    def counts(self) -> tuple[int, int]:
        """Runs replayed again and runs answered by the marks, for every
        candidate so far."""
        return self.redriven, self.marked

    def answer(self, h: HarnessConfig | None) -> Answer:
        """The candidate ``h`` on every run of the shard (an :class:`Answer`;
        None: the harness in force)."""
        redriven, marked = self.redriven, self.marked
        success, cost = self.success.copy(), self.cost.copy()
        active_s, tokens = self.active_s.copy(), self.tokens.copy()
        outcomes = Counter(self.outcomes)
        diverged = self.diverged
        for i, r in (self.changed(h) if h is not None else {}).items():
            b = self.read[i]
            success[i] = r.outcome == SUCCEEDED
            cost[i], active_s[i], tokens[i] = r.cost_usd, r.active_s, r.tokens
            outcomes[b.outcome] -= 1
            outcomes[r.outcome] += 1
            diverged += r.diverged - b.diverged
        return Answer(success, cost, active_s, tokens, +outcomes, diverged,
                      self.redriven - redriven, self.marked - marked)

    def stopped_rows(self, h: HarnessConfig) -> list[dict[str, Any]]:
        """The drill-down rows (:data:`~sim.tuning.replayed.STOPPED_COLUMNS`)
        of the runs ``h`` stops earlier than the harness in force, in order."""
        rows = []
        for i, c in sorted(self.changed(h).items()):
            b, run = self.read[i], self.heads[i]
            if c.stopped_at is None or (b.stopped_at is not None
                                        and b.stopped_at <= c.stopped_at):
                continue
            rows.append({
                "run_id": run.run_id, "task_id": run.task_id, "model": run.model,
                "exit": run.exit, "resolved": run.resolved, "outcome_in_force": b.outcome,
                "outcome": c.outcome, "lost_success": b.outcome == SUCCEEDED != c.outcome,
                "stopped_at_call": c.stopped_at, "calls_recorded": self._calls(i),
                "prompt_tokens_at_stop": c.prompt_tokens, "cost_in_force_usd": b.cost_usd,
                "cost_usd": c.cost_usd, "saved_usd": b.cost_usd - c.cost_usd})
        return rows

    def _calls(self, i: int) -> int:
        """How many calls run ``i`` recorded."""
        marks = self.marks[i]
        if marks is not None:
            return marks.calls_recorded
        return len(self.setup.runs(self.start + i, self.start + i + 1)[0].calls)


def _budgets(h: HarnessConfig) -> tuple[float, float, float]:
    """The steps, tokens and money (USD) budgets of ``h`` (unset: infinite)."""
    b = h.budgets
    return tuple(math.inf if v is None else float(v)  # type: ignore[return-value]
                 for v in (b.steps, b.tokens, b.money_usd))


_SETUP: Setup | None = None
"""The setup forked workers build their shards from (set before the fork)."""


def _serve(conn: Any, start: int, stop: int) -> None:
    """A worker: build the shard of runs ``start`` to ``stop - 1``, send its
    summary, then answer each ``(method, args)`` received until None."""
    try:
        assert _SETUP is not None
        shard = Shard(_SETUP, start, stop)
        conn.send(("ok", shard.summary))
        while (message := conn.recv()) is not None:
            name, args = message
            conn.send(("ok", getattr(shard, name)(*args)))
    except BaseException as error:  # the parent raises it
        try:
            conn.send(("error", error))
        except Exception:  # not picklable: its words
            conn.send(("error", RuntimeError(f"{type(error).__name__}: {error}")))
    finally:
        conn.close()


class Shards:
    """``count`` runs of ``setup`` in ``workers`` shards of consecutive runs
    (:func:`sim.jobs.shares`: as even as possible): one in this process
    (``workers`` 1, which may ``keep`` its runs), else each in a forked
    worker process. :meth:`call` asks every shard the same question at once
    and returns their answers in order."""

    def __init__(self, setup: Setup, count: int, workers: int, keep: bool = False) -> None:
        self.local: Shard | None = None
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        self.starts: list[int] = []
        if workers <= 1:
            self.local = Shard(setup, 0, count, keep)
            self.starts = [0]
            self.summaries = [self.local.summary]
            return
        global _SETUP
        _SETUP = setup
        context = multiprocessing.get_context("fork")
        try:
            for low, high in shares(count, workers):
                mine, theirs = context.Pipe()
                proc = context.Process(target=_serve, args=(theirs, low, high), daemon=True)
                proc.start()
                theirs.close()
                self.conns.append(mine)
                self.procs.append(proc)
                self.starts.append(low)
            self.summaries = [self._receive(c) for c in self.conns]
        except BaseException:
            self.close()
            raise
        finally:
            _SETUP = None

    @staticmethod
    def _receive(conn: Any) -> Any:
        try:
            kind, value = conn.recv()
        except EOFError:
            raise RuntimeError("a tune worker process ended without answering") from None
        if kind == "error":
            raise value
        return value

    def call(self, name: str, *args: Any) -> list[Any]:
        """Every shard's ``name(*args)``, in order."""
        if self.local is not None:
            return [getattr(self.local, name)(*args)]
        for conn in self.conns:
            conn.send((name, args))
        return [self._receive(conn) for conn in self.conns]

    def gathered(self, name: str, *args: Any, offset: Callable[[int, Any], Any] | None = None
                 ) -> list[Any]:
        """:meth:`call`'s lists joined in order (``offset(start, item)``
        applied to each shard's items)."""
        out: list[Any] = []
        for start, part in zip(self.starts, self.call(name, *args), strict=True):
            out += part if offset is None else [offset(start, x) for x in part]
        return out

    def close(self) -> None:
        """Stop the worker processes (if any)."""
        for conn in self.conns:
            try:
                conn.send(None)
                conn.close()
            except OSError:
                pass
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        self.conns, self.procs = [], []


__all__ = ["READ_CHUNK", "Answer", "Setup", "Shard", "Shards", "Summary", "replay_marked",
           "slim"]
