"""Issue 20's "Done when" measurement on tau2, in one command.

    python -m benchmarks.calibrate_tau2_cv [--traces DIR] [--folds 5] [--seed 0]

Imports ``/work/shared/data/traces/tau2/raw`` (``python -m sim traces import``)
into ``--traces`` unless that folder already holds traces, calibrates it with
the default options (``sim.calibration.pipeline.calibrate``: k-fold
cross-validation, structure chosen by cross-validated loss, the ladder) and
prints:

- per fold, each per-run KS distance (steps, prompt, output, cost) against a
  perfect model's 95th percentile, twice: counting the fit's own error (the
  cross-fitted value the verdict uses) and the two-sample value alone
  (held-out and simulated sampling only); and how many folds are within;
- successes lost, forecast against replay, at 50k, 100k and 200k prompt tokens
  (mean over folds, and pooled), with the gap in points;
- the verdict and the structure chosen (with the losses);

and with ``--report DIR`` writes the calibration report there.

Long (several minutes): a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

RAW = Path("/work/shared/data/traces/tau2/raw")
METRICS = ("steps", "prompt", "output", "cost")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default="/tmp/tau2_traces", help="trace folder")
    parser.add_argument("--raw", default=str(RAW), help="tau2 raw files to import")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--evaluations", type=int, default=45)
    parser.add_argument("--report", help="also write the calibration report to this folder")
    args = parser.parse_args(argv)

    from sim.calibration.pipeline import calibrate
    from sim.calibration.verdict import ALPHA, ks_critical
    from sim.cli import main as sim_main

    traces = Path(args.traces)
    if not (traces / "runs.parquet").exists():
        status = sim_main(["traces", "import", args.raw, "--out", str(traces)])
        if status != 0:
            return status
    began = time.monotonic()
    c = calibrate(traces, folds=args.folds, seed=args.seed, evaluations=args.evaluations,
                  progress=True)
    took = time.monotonic() - began
    if args.report:
        from sim.api.calibration_report import write_report

        write_report(args.report, c)

    print(f"\ntau2: {c.fit.n} runs, {args.folds} folds, seed {args.seed}, "
          f"{took / 60:.1f} minutes")
    print(f"structure: {c.structure.reason}")
    for name, losses in c.structure.losses.items():
        print(f"  {name:<24} loss {c.structure.mean(name):.3f} +- {c.structure.se(name):.3f}"
              f"  ({', '.join(f'{v:.3f}' for v in losses)})")
    print("\nper fold: KS (95th percentile of a perfect model: with the fit's error / "
          "two-sample only)")
    header = "fold  held  " + "  ".join(f"{m:>22}" for m in METRICS)
    print(header)
    within = {m: [0, 0] for m in METRICS}
    for f in c.judgement.folds:
        cells = []
        for m in METRICS:
            if m not in f.ks:
                cells.append(f"{'n/a':>22}")
                continue
            plain = ks_critical(ALPHA, f.n_real, f.n_sim, 0.0)
            ok_fit, ok_plain = f.ks[m] < f.critical[m], f.ks[m] < plain
            within[m][0] += ok_fit
            within[m][1] += ok_plain
            cells.append(f"{f.ks[m]:.3f} ({f.critical[m]:.3f}/{plain:.3f})"
                         f"{' ' if ok_fit else '*'}{' ' if ok_plain else '!'}")
        print(f"{f.fold + 1:>4}  {f.n_real:>4}  " + "  ".join(cells))
    k = len(c.judgement.folds)
    print("within (with the fit's error / two-sample only): " + ", ".join(
        f"{m} {a}/{k} / {b}/{k}" for m, (a, b) in within.items()))
    print("\nsuccesses lost (share of runs), forecast vs replay")
    for r in c.ladder:
        if r.budget.kind != "tokens" or not r.budget.label.endswith("k prompt tokens"):
            continue
        fc, rp = r.mean_over_folds("forecast", "lost"), r.mean_over_folds("replay", "lost")
        print(f"  {r.budget.label:<20} mean over folds: forecast {100 * fc:5.1f}%  replay "
              f"{100 * rp:5.1f}%  gap {100 * (fc - rp):+5.1f} points | pooled "
              f"{100 * r.forecast['lost']:5.1f}% vs {100 * r.replay['lost']:5.1f}%; stopped "
              f"{100 * r.forecast['stopped']:5.1f}% vs {100 * r.replay['stopped']:5.1f}%")
    print("\nverdict: " + ("rejected: " + "; ".join(c.reasons) if c.status else "accepted"))
    for m in c.metrics:
        if m.tested:
            print(f"  {m.label:<24} KS {m.ks:.3f} critical {m.critical:.3f} p {m.p_value:.3g} "
                  f"adjusted {m.p_adjusted:.3g}")
    print(f"  exit mix TV {c.exits.tv:.3f} critical {c.exits.critical:.3f} "
          f"adjusted {c.exits.p_adjusted:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
