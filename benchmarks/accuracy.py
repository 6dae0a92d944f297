"""The forecast's accuracy against the sampling floor, per agent and question.

    python -m benchmarks.accuracy [--folds 5] [--seed 0] [--tasks 700] [--workers 1]
        [--tau2 DIR] [--out accuracy.md] [--tau2-scenario scenarios/tau2.yaml]
        [--tau2-report reports/examples/tau2_calibration]

Calibrates (``sim.calibration.pipeline.calibrate``, default options: k-fold
cross-validation, structure chosen by cross-validated loss, the ladder of
budgets forecast against replay) two trace sets:

- **tau2**: tau2-bench's shipped runs (``/work/shared/data/traces/tau2/raw``,
  imported with ``python -m sim traces import`` into ``--tau2`` unless that
  folder already holds traces);
- **sim bounded**: ``--tasks`` runs written by ``python -m sim run bounded
  --traces`` (a world the calibration should recover: its floor and its
  error should agree);

and prints, per trace set and question (share stopped, successes lost,
dollars saved over the ladder's budgets; per-run KS of steps, prompt tokens,
output tokens and cost), the forecast's mean error on held-out runs beside the
sampling floor (the other folds' runs taken as the forecast) and their ratio
(:mod:`sim.calibration.accuracy`), then each set's verdict, its power against
a 10% shift and the time taken. ``--out`` also writes the table as Markdown;
``--tau2-scenario`` writes tau2's fitted scenario (named ``tau2``, with the
provenance header calibration writes) and ``--tau2-report`` its calibration
report, as ``python -m sim calibrate`` would.

Long (minutes per trace set): a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

RAW = Path("/work/shared/data/traces/tau2/raw")


def _made(text: str, traces: Path, args: argparse.Namespace) -> str:
    """The scenario ``text`` with a paragraph on how it was made (these
    commands) before its structure's, so the file says how to make it again."""
    report = f" \\\n#         --tau2-report {args.tau2_report}" if args.tau2_report else ""
    made = (f"# Made with\n#     python -m sim traces import {RAW} --out {traces}\n"
            f"#     python -m benchmarks.accuracy --only tau2 --tau2 {traces} \\\n"
            f"#         --tau2-scenario {args.tau2_scenario}{report}\n"
            f"# which calibrates as the command above does (default options, {args.folds} "
            f"folds, seed {args.seed}) and\n# writes this file"
            f"{' and its report' if args.tau2_report else ''}.\n#\n")
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if line.startswith("# Structure:")),
              next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines)))
    return "".join(lines[:at]) + made + "".join(lines[at:])


def _sim_traces(tasks: int, seed: int) -> Path:
    """``tasks`` runs of the ``bounded`` scenario written as traces."""
    from sim.cli import main as sim_main

    folder = Path(tempfile.mkdtemp(prefix="accuracy_bounded_")) / "runs"
    status = sim_main(["run", "bounded", "--traces", "--tasks", str(tasks), "--seed", str(seed),
                       "--out", str(folder), "--quiet", "--workers", "1"])
    if status != 0:
        raise SystemExit(status)
    return folder


def main(argv: list[str] | None = None) -> int:
    """Calibrate each trace set and print the accuracy table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tau2", default="/tmp/accuracy_tau2", help="tau2 trace folder")
    parser.add_argument("--raw", default=str(RAW), help="tau2 raw files to import")
    parser.add_argument("--tasks", type=int, default=700, help="sim-written runs")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--only", choices=["tau2", "sim"], help="one trace set")
    parser.add_argument("--out", help="also write the table (Markdown) here")
    parser.add_argument("--tau2-scenario", help="also write tau2's fitted scenario here")
    parser.add_argument("--tau2-report", help="also write tau2's calibration report here")
    args = parser.parse_args(argv)

    from sim.api.calibration_report import write_report, write_scenario
    from sim.calibration import accuracy
    from sim.calibration.pipeline import calibrate
    from sim.cli import main as sim_main

    sets: dict[str, Path] = {}
    if args.only in (None, "tau2"):
        tau2 = Path(args.tau2)
        if not (tau2 / "runs.parquet").exists():
            status = sim_main(["traces", "import", args.raw, "--out", str(tau2)])
            if status != 0:
                return status
        sets["tau2"] = tau2
    if args.only in (None, "sim"):
        sets["sim bounded"] = _sim_traces(args.tasks, args.seed)
    tables, notes = {}, []
    for name, folder in sets.items():
        began = time.monotonic()
        c = calibrate(folder, folds=args.folds, seed=args.seed, workers=args.workers,
                      progress=True, name="tau2" if name == "tau2" else "calibrated")
        took = time.monotonic() - began
        if name == "tau2" and args.tau2_scenario:
            write_scenario(args.tau2_scenario, _made(c.yaml_text(), folder, args))
        if name == "tau2" and args.tau2_report:
            write_report(args.tau2_report, c)
        tables[f"{name} ({c.real.n} runs)"] = accuracy.rows(c)
        power = c.power()
        shifted = ", ".join(f"{k} {v:.0%}" for k, v in power["at_shift"].items())
        notes.append(f"- {name}: verdict {'rejected' if c.status else 'accepted'}; power "
                     f"against a {power['shift']:.0%} shift: {shifted}; {took / 60:.1f} "
                     f"minutes ({args.folds} folds, seed {args.seed})")
    text = "\n".join([*accuracy.markdown(tables), "", *notes, ""])
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
