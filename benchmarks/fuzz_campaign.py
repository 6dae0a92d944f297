"""The generated-input campaign of issues 25 and 41: over 14,000 cases over
every door, counted.

Surfaces (default case counts, ``--scale`` multiplies them):

* ``scenario`` (5,500): scenario documents built from the field reference
  (the generator of ``tests/test_scenario_fuzz.py``) and the project's own
  sample scenarios with one leaf replaced by an odd value (the generator of
  ``tests/test_fuzz_cli.py``). Each is loaded; an accepted one is simulated
  (2 tasks, every cell of its sweep, through :func:`sim.api.sweep`) and its
  rows checked for impossible values; every 25th accepted one also runs
  through the command line and must write its whole folder;
* ``cli`` (500): generated ``run``/``sweep`` command lines and ``compare``
  lines with odd flag values;
* ``harness`` (4,000): the harness driven by generated driver results with
  numbers beyond any sane range (the strategies of
  ``tests/test_fuzz_harness.py``);
* ``provider`` (300): the live driver against the local fake server sending
  generated misbehaviour (``tests/test_fuzz_provider.py``);
* ``faults`` (40): ENOSPC/EROFS at one of the write points, a truncated kept
  chunk, a second command on a locked ``--out``;
* the doors of issue 41 (``benchmarks/fuzz/doors.py``; its package docstring
  has the table of which surface reaches each command and flag): ``otel``
  (150: ``run``/``live --otel`` to a folder, a device, another run's file, a
  read-only parent, a long or NUL name), ``project`` (400: a generated
  ``[tool.sim]`` used by ``run NAME`` and ``scenarios``), ``sim_out`` (100),
  ``summary_md`` (60: ``compare --summary-md`` targets, a full disk,
  scenario names with markup), ``view`` (600), ``scenarios`` (600: headers
  and names with terminal escapes), ``cost`` (1,500), ``tune`` (60: trace
  folders of 1-10 runs, odd ``--where``/``--candidates``/...), ``replay``
  (100), ``calibrate`` (10), ``importers`` (600: every trace format, values
  aimed at tool and model names and token counts), ``flags`` (300: every
  flag no other surface reaches).

Counted per surface: **tracebacks** (an exception other than the clean
InputError, or "Traceback" on stderr, or an exit status outside 0/1/2/3),
**hangs** (no answer within the per-case limit, 60 s), **memory blow-ups**
(the process's peak RSS growing past ``--memory-mb`` in one case),
**accepted nonsense** (an accepted scenario whose rows hold NaN, infinite or
negative numbers, an unknown outcome or more steps than the ceiling; a
harness run past a time budget or ending outside the outcome table; an
import whose calls name a tool "None", "" or a stringified object, or hold
a negative or NaN count; a report, summary or terminal output holding raw
``<script``/``<img`` or a control byte that came from the input; a flag
ignored where the output shows it, e.g. ``cost --model X`` naming another
model, ``--otel ''`` writing nothing; an output target that is a folder or
another run's file accepted) and **data lost** (exit 0 without the whole
results folder; another run's results folder changed; a device target
replaced by a regular file; temporary files left; a fault that changed
earlier results; a resume whose results differ).

The doors' findings are listed by check, each with the command that replays
its first case (``--surface NAME --case K``); a check of
:data:`benchmarks.fuzz.checks.KNOWN` (none today) is printed as "known" and
still counted.

Run: ``python -m benchmarks.fuzz_campaign``; ``--scale 0.1`` for a quick
look; ``--surface tune,otel`` for some surfaces. Prints one table and exits
1 if any count is not zero.

Measured on 2026-12-01 (commit f90d1ee, 2 shared cores): 10,340 cases in
302 s (1,033 s under heavier load at cda7f34), every count 0 on every surface
(522 of the 5,500 scenario documents accepted and simulated, the rest
refused with exit 2); peak RSS 417 MB.

Measured on 2026-12-04 (commit 459fb4e, 2 cores shared with 8 other
sessions, about 4x slower than the 302 s above): 14,820 cases in 1,833 s
(the old surfaces 992 s, the doors 841 s), peak RSS 542 MB. The old surfaces
all 0; the doors, with the fixes of issue 41's branches A and B not yet
merged: otel 30 tracebacks / 11 nonsense / 37 data lost of 150 (a device
target replaced by a regular file, another run's summary.json overwritten,
a folder target a traceback, ``--otel ''`` ignored), project 8/5/1 of 400,
sim_out 11/9/0 of 100, summary_md 17/18/4 of 60, view 0/104/0 of 600,
scenarios 0/259/0 of 600, cost 15/152/0 of 1,500, tune 0/7/0 of 60, replay
0/31/0 of 100, calibrate 0/2/0 of 10, importers 0/68/0 of 600 (tools named
"None", "", "nan"), flags 3/0/2 of 300; no hangs, no memory blow-ups. Of the
checks, all but four are known (A or B); new: ``cost --price-out 1e308``
(a traceback, or "inf" in the JSON), ``compare --junit`` to a device (the
device replaced), ``--junit`` with a NUL byte (a traceback), and a NUL byte
or a too-long folder in the scenario lookup (fixed here in
sim/scenario/catalog.py, after this run).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import math
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the generators of the test suite

import yaml  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import sim.cli  # noqa: E402
from benchmarks.fuzz.checks import KNOWN, Finding  # noqa: E402
from benchmarks.fuzz.doors import DOORS, Lab  # noqa: E402
from sim.bad_input import InputError  # noqa: E402

CASE_LIMIT_S = 60
EXITS = {0, 1, 2, 3}
RESULT_FILES = {"results.parquet", "summary.json", "report.md", "report.html"}
COLUMNS = ("tracebacks", "hangs", "memory", "nonsense", "data_lost")


class Hang(BaseException):
    """A case did not finish within CASE_LIMIT_S (a BaseException, so that no
    ``except Exception`` of the code under test or of a detector takes it)."""


def _alarm(signum, frame):
    raise Hang


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Tally:
    """Counts per surface, and a few examples of each failure."""

    def __init__(self, memory_mb: float) -> None:
        self.cases: Counter[str] = Counter()
        self.counts: dict[str, Counter[str]] = {}
        self.examples: list[str] = []
        self.memory_mb = memory_mb
        self.checks: dict[tuple[str, str], list[str]] = {}

    def case(self, surface: str, body: Callable[[], list[str]]) -> None:
        """Run one case; ``body`` returns the failures it found (column names)."""
        self.cases[surface] += 1
        counts = self.counts.setdefault(surface, Counter())
        before = peak_mb()
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(CASE_LIMIT_S)
        try:
            found = body()
        except Hang:
            found = ["hangs"]
        except Exception:
            found = ["tracebacks"]
            self.note(surface, traceback.format_exc(limit=4))
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        if peak_mb() - before > self.memory_mb:
            found.append("memory")
        for column in found:
            counts[column] += 1

    def finding(self, surface: str, case: int, finding: Finding) -> None:
        """Count a door's finding by check, keeping its first example with the
        command that replays the case."""
        kept = self.checks.setdefault((surface, finding.check), [])
        if not kept:
            kept.append(f"python -m benchmarks.fuzz_campaign --surface {surface} --case {case}"
                        f"\n    {finding.column}: {finding.detail.strip()[:1200]}")
        kept.append("")

    def findings(self) -> str:
        """The doors' findings by check: known ones (fixed on another branch,
        :data:`~benchmarks.fuzz.checks.KNOWN`) apart from new ones."""
        lines = []
        for (surface, check), kept in sorted(self.checks.items()):
            label = (f"known ({KNOWN[check]})" if check in KNOWN
                     else "NEW")
            lines.append(f"\n[{surface}] {check}: {len(kept) - 1} cases, {label}\n"
                         f"  e.g. {kept[0]}")
        return "\n".join(lines)

    def note(self, surface: str, text: str) -> None:
        if len(self.examples) < 12:
            self.examples.append(f"[{surface}] {text.strip()[-1500:]}")

    def table(self) -> str:
        rows = ["| surface | cases | " + " | ".join(COLUMNS) + " |",
                "|---|---:|" + "---:|" * len(COLUMNS)]
        total = Counter()
        for surface, n in self.cases.items():
            c = self.counts.get(surface, Counter())
            total.update(c)
            rows.append(f"| {surface} | {n:,} | " + " | ".join(str(c[k]) for k in COLUMNS)
                        + " |")
        rows.append(f"| **all** | {sum(self.cases.values()):,} | "
                    + " | ".join(str(total[k]) for k in COLUMNS) + " |")
        return "\n".join(rows)

    def failures(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = sim.cli.main(argv)
    return status, out.getvalue(), err.getvalue()


def cli_failures(status: int, stderr: str, out: Path | None, tally: Tally,
                 surface: str, argv: list[str]) -> list[str]:
    found = []
    if status not in EXITS or "Traceback" in stderr:
        found.append("tracebacks")
        tally.note(surface, f"{argv}: exit {status}\n{stderr[-1200:]}")
    whole = out is not None and out.is_dir() and {p.name for p in out.iterdir()} >= RESULT_FILES
    if status == 0 and out is not None and argv[0] in ("run", "sweep") and not whole:
        found.append("data_lost")
        tally.note(surface, f"{argv}: exit 0 without the whole folder")
    return found


def _settings(n: int) -> settings:
    return settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck))


# ------------------------------------------------------------------ scenario
def rows_nonsense(rows: Any) -> str | None:
    """Why simulated rows are impossible, or None."""
    import numpy as np

    from sim.harness.state import OUTCOMES
    from sim.scenario.limits import MAX_RUN_STEPS

    numeric = rows.select_dtypes(include="number")
    values = numeric.to_numpy(dtype=float)
    if not np.isfinite(values).all():
        return "non-finite numbers in the rows"
    signed = [c for c in numeric.columns if c not in ("task",)]
    if (numeric[signed] < 0).to_numpy().any():
        return "negative numbers in the rows"
    if (rows["steps"] > MAX_RUN_STEPS).any():
        return "more steps than the ceiling"
    for state, reason in zip(rows["state"], rows["reason"], strict=True):
        if reason not in OUTCOMES.get(state, ()):
            return f"unknown outcome {state}:{reason}"
    return None


def scenario_surface(tally: Tally, n: int, work: Path) -> None:
    from test_fuzz_cli import mutated_samples
    from test_scenario_fuzz import documents

    from sim import api
    from sim.scenario.model import load_scenario

    accepted = [0]

    def one(doc: Any, name: str) -> list[str]:
        path = work / name
        try:
            path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
        except (yaml.YAMLError, UnicodeEncodeError):
            return []
        try:
            scenario = load_scenario(path)
        except InputError:
            return []
        accepted[0] += 1
        try:
            rows, _ = api.sweep(scenario, tasks=2, workers=1)
        except InputError:
            return []  # found at run time (an arrivals file): still a clean refusal
        why = rows_nonsense(rows)
        if why is not None:
            tally.note("scenario", f"{why}: {doc}")
            return ["nonsense"]
        if accepted[0] % 25 == 0:
            out = work / f"out{accepted[0]}"
            command = "sweep" if scenario.sweep else "run"
            argv = [command, str(path), "--tasks", "2", "--workers", "1", "--quiet",
                    "--format", "json", "--out", str(out), "--force"]
            status, _, stderr = cli(argv)
            found = cli_failures(status, stderr, out, tally, "scenario", argv)
            shutil.rmtree(out, ignore_errors=True)
            return found
        return []

    @_settings(n // 2)
    @given(doc=documents())
    def from_reference(doc: dict) -> None:
        tally.case("scenario", lambda: one(doc, "doc.yaml"))

    @_settings(n - n // 2)
    @given(case=mutated_samples())
    def from_samples(case: tuple[str, dict]) -> None:
        tally.case("scenario", lambda: one(case[1], case[0]))

    from_reference()
    from_samples()
    print(f"  scenario: {accepted[0]:,} of {tally.cases['scenario']:,} documents accepted "
          f"and simulated", file=sys.stderr)


# ----------------------------------------------------------------------- cli
def cli_surface(tally: Tally, n: int, work: Path) -> None:
    from test_fuzz_cli import compare_lines, run_lines

    def one(argv: list[str]) -> list[str]:
        out = work / f"o{random.random()}"
        argv = [str(out) if a == "OUT" else a for a in argv] + ["--force"]
        status, _, stderr = cli(argv)
        found = cli_failures(status, stderr, out, tally, "cli", argv)
        shutil.rmtree(out, ignore_errors=True)
        return found

    @_settings(n - n // 10)
    @given(argv=run_lines())
    def runs(argv: list[str]) -> None:
        tally.case("cli", lambda: one(argv))

    @_settings(n // 10)
    @given(argv=compare_lines())
    def compares(argv: list[str]) -> None:
        tally.case("cli", lambda: one(argv))

    runs()
    compares()


# ------------------------------------------------------------------- harness
def harness_surface(tally: Tally, n: int) -> None:
    from scripted import make_params, make_state
    from test_fuzz_harness import (
        APPROVAL,
        MODEL_ERROR,
        REPLY,
        TOOL_OUTCOME,
        VERDICT,
        WAITED,
        HugeDriver,
    )

    from sim.harness import Budgets, VerifierParams
    from sim.harness.classifier import MAX_WAIT_S
    from sim.harness.loop import agent_loop
    from sim.harness.state import OUTCOMES

    def one(model, tools, verdicts, approvals, waits, active, tokens, verify) -> list[str]:
        params = make_params(
            budgets=Budgets(tokens=tokens, active_s=active,
                            wall_s=None if active is None else 4 * active),
            verifier=VerifierParams(enabled=verify),
            approval_required=frozenset({"irreversible"}), context_window=30_000,
            model_timeout_s=30.0)
        state = make_state(params)
        driver = HugeDriver(model, tools, verdicts, approvals, waits=waits)
        loop = agent_loop(params, state)
        result = None
        try:
            while True:
                result = driver.answer(loop.send(result), state)
        except StopIteration:
            pass
        problems = []
        if state.status not in OUTCOMES or state.reason not in OUTCOMES[state.status]:
            problems.append("outcome outside the table")
        if not all(math.isfinite(x) for x in (state.money_usd, state.active_s)):
            problems.append("non-finite counters")
        if active is not None and state.active_s > active * (1 + 1e-9):
            problems.append(f"active time {state.active_s} past its budget {active}")
        if any(w > MAX_WAIT_S for w in driver.asked_waits):
            problems.append("a wait past MAX_WAIT_S")
        if problems:
            tally.note("harness", "; ".join(problems))
            return ["nonsense"]
        return []

    @_settings(n)
    @given(model=st.lists(st.one_of(REPLY, REPLY, MODEL_ERROR), max_size=12),
           tools=st.lists(TOOL_OUTCOME, max_size=8), verdicts=st.lists(VERDICT, max_size=2),
           approvals=st.lists(APPROVAL, max_size=2), waits=st.lists(WAITED, max_size=4),
           active=st.none() | st.just(100.0) | st.floats(10.0, 500.0),
           tokens=st.none() | st.integers(4_000, 60_000), verify=st.booleans())
    def cases(**kw: Any) -> None:
        tally.case("harness", lambda: one(**kw))

    cases()


# ------------------------------------------------------------------ provider
def provider_surface(tally: Tally, n: int, work: Path) -> None:
    from fake_providers import FakeProvider, Reply
    from test_fuzz_provider import ACTIVE_BUDGET_S, SCRIPT
    from test_live_http import WIRES, drive, params_for, toolbox

    from sim.harness import Budgets
    from sim.harness.state import OUTCOMES

    def one(script: list[Any], wire: tuple[str, bool]) -> list[str]:
        provider, stream = wire
        box = toolbox()
        params = params_for(provider, box, budgets=Budgets(active_s=ACTIVE_BUDGET_S, steps=6))
        folder = Path(tempfile.mkdtemp(dir=work))
        with FakeProvider([*script, Reply([("text", "DONE")])], lifetime_s=CASE_LIMIT_S) \
                as server:
            state, _, _ = drive(server, provider, stream, params, box, folder)
        shutil.rmtree(folder, ignore_errors=True)
        if (state.status not in OUTCOMES or state.reason not in OUTCOMES[state.status]
                or not math.isfinite(state.active_s) or state.active_s > ACTIVE_BUDGET_S):
            tally.note("provider", f"{script}: {state.status}:{state.reason} "
                                   f"{state.active_s}")
            return ["nonsense"]
        return []

    @_settings(n)
    @given(script=SCRIPT, wire=st.sampled_from(WIRES))
    def cases(script: list[Any], wire: tuple[str, bool]) -> None:
        tally.case("provider", lambda: one(script, wire))

    cases()


# -------------------------------------------------------------------- faults
def faults_surface(tally: Tally, n: int, work: Path) -> None:
    from unittest import mock

    from sim.output import folder as output_folder

    bounded = str(REPO / "scenarios" / "bounded.yaml")
    rng = random.Random(25)

    def run(out: Path, *extra: str) -> tuple[int, str, str]:
        argv = ["run", bounded, "--workers", "1", "--quiet", "--format", "json", "--out",
                str(out), *extra]
        return cli(argv)

    def fail(code: int) -> Callable[..., Any]:
        def raise_it(*args: Any, **kwargs: Any) -> Any:
            raise OSError(code, os.strerror(code))
        return raise_it

    def snapshot(folder: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}

    def one(kind: str, k: int) -> list[str]:
        base = work / f"f{k}"
        base.mkdir()
        out = base / "out"
        status, _, stderr = run(out, "--tasks", "30")
        if status != 0:
            tally.note("faults", f"setup failed: {stderr}")
            return ["tracebacks"]
        before = snapshot(out)
        found = []
        if kind in ("ENOSPC", "EROFS"):
            code = errno.ENOSPC if kind == "ENOSPC" else errno.EROFS
            target = rng.choice(["sim.output.results.os.fsync", "sim.output.folder._swap",
                                 "sim.output.stream.ParquetStream.close"])
            with mock.patch(target, fail(code)):
                status, _, stderr = run(out, "--tasks", "45", "--force")
            if status != 2 or "Traceback" in stderr:
                found.append("tracebacks")
                tally.note("faults", f"{kind} at {target}: exit {status}\n{stderr[-800:]}")
            if snapshot(out) != before or any(p.name.endswith((".tmp", ".lock"))
                                              or ".new." in p.name for p in base.iterdir()):
                found.append("data_lost")
                tally.note("faults", f"{kind} at {target}: earlier results changed or "
                                     f"leftovers {sorted(p.name for p in base.iterdir())}")
        elif kind == "truncated chunk":
            with mock.patch("sim.output.results.write_streamed_results",
                            side_effect=KeyboardInterrupt):
                run(out, "--tasks", "400", "--force")
            chunks = sorted((base / ".out.partial").glob("*.arrow"))
            victim = rng.choice(chunks)
            with victim.open("r+b") as handle:
                handle.truncate(rng.randrange(0, max(1, victim.stat().st_size)))
            status, _, stderr = run(out, "--tasks", "400", "--resume", "--force")
            fresh = base / "fresh"
            run(fresh, "--tasks", "400")
            if status != 0:
                found.append("tracebacks")
                tally.note("faults", f"resume after truncation: exit {status}\n{stderr[-800:]}")
            elif ((out / "results.parquet").read_bytes()
                  != (fresh / "results.parquet").read_bytes()):
                found.append("data_lost")
                tally.note("faults", "resumed results differ from a fresh run's")
        else:  # a second command on a locked --out
            import subprocess

            holder = subprocess.Popen(
                [sys.executable, "-c", "import time; from sim.output.folder import lock; "
                                       f"lock({str(out)!r}); print('held', flush=True); "
                                       "time.sleep(60)"],
                stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
            try:
                assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
                status, _, stderr = run(out, "--tasks", "45", "--force")
            finally:
                holder.kill()
                holder.wait()
            if status != 2 or "being written by another" not in stderr:
                found.append("tracebacks")
                tally.note("faults", f"lock: exit {status}\n{stderr[-800:]}")
            if snapshot(out) != before:
                found.append("data_lost")
        output_folder.unlock(out)
        shutil.rmtree(base, ignore_errors=True)
        return found

    kinds = ["ENOSPC", "EROFS", "truncated chunk", "locked --out"]
    for k in range(n):
        kind = kinds[k % len(kinds)]
        tally.case("faults", lambda kind=kind, k=k: one(kind, k))


# --------------------------------------------------------------------- doors
def door_surface(tally: Tally, surface: str, n: int, lab: Lab, only: int | None = None
                 ) -> None:
    """``n`` cases of the door ``surface`` (:data:`benchmarks.fuzz.doors.DOORS`),
    case k drawn from ``random.Random("SURFACE-k")`` (``only``: that case
    alone, to replay a finding)."""
    door = DOORS[surface][0]
    for k in ([only] if only is not None else range(n)):
        def body(k: int = k) -> list[str]:
            try:
                found = door(random.Random(f"{surface}-{k}"), lab)
            except Hang:
                found = [Finding("hangs", "hang", f"no answer within {CASE_LIMIT_S} s")]
            for finding in found:
                tally.finding(surface, k, finding)
            return sorted({f.column for f in found})
        tally.case(surface, body)


# ---------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    sizes = {"scenario": 5_500, "cli": 500, "harness": 4_000, "provider": 300, "faults": 40,
             **{name: count for name, (_, count) in DOORS.items()}}
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help=f"multiply every surface's case count (default 1: "
                             f"{sum(sizes.values()):,} cases)")
    parser.add_argument("--surface", "--surfaces", dest="surfaces", nargs="*",
                        default=list(sizes), metavar="NAME[,NAME]",
                        help=f"surfaces to run (comma- or space-separated) among "
                             f"{', '.join(sizes)}; default all")
    parser.add_argument("--case", type=int, default=None,
                        help="replay one case of a door surface (its number in a finding)")
    parser.add_argument("--memory-mb", type=float, default=1024.0,
                        help="peak-RSS growth in one case counted as a memory blow-up")
    args = parser.parse_args(argv)
    surfaces = [name for item in args.surfaces for name in item.split(",") if name]
    unknown = [name for name in surfaces if name not in sizes]
    if unknown:
        parser.error(f"unknown surface {', '.join(unknown)}; known: {', '.join(sizes)}")
    tally = Tally(args.memory_mb)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sim-fuzz-") as tmp:
        work = Path(tmp)
        lab = Lab(work / "doors")
        for surface in surfaces:
            n = max(1, round(sizes[surface] * args.scale))
            t0 = time.monotonic()
            if surface in DOORS:
                door_surface(tally, surface, n, lab, args.case)
            elif surface == "harness":
                harness_surface(tally, n)
            else:
                {"scenario": scenario_surface, "cli": cli_surface,
                 "provider": provider_surface, "faults": faults_surface}[surface](
                    tally, n, work)
            print(f"  {surface}: {tally.cases[surface]:,} cases in "
                  f"{time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    print(tally.table())
    print(f"\n{sum(tally.cases.values()):,} cases in {time.monotonic() - start:.0f} s; "
          f"peak RSS {peak_mb():.0f} MB")
    print(tally.findings())
    for example in tally.examples:
        print("\n" + example)
    return 1 if tally.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
