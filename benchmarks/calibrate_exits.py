"""The calibrated world's exit mix against the known world's, bigger than the suite's check.

    python -m benchmarks.calibrate_exits [--runs 10000] [--sim 20000]
        [--scenarios bounded bounded_stop_first naive] [--traces FOLDER ...]

For each scenario: simulates ``--runs`` runs with ``sim run --traces``; for
each trace folder given with ``--traces`` (real runs, e.g. tau2's), reads it
as is. Then fits the direct estimates (one class, or one per model with
``--by-model``: what every fold of ``sim calibrate`` fits before its search),
simulates ``--sim`` runs of the calibrated scenario and prints, per exit
category, the recorded and simulated shares with the two-proportion z
(the fit's own error counted as one more sample of the recorded size, as in
``tests/test_calibrate_exits.py``), the recorded detector and limits read
back, and steps' mean and p95. CPU seconds per stage are printed too.
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _report(label: str, folder: Path, sims: int, by_model: bool) -> None:
    from sim.calibration.build import scenario_document
    from sim.calibration.data import load
    from sim.calibration.estimate import estimate
    from sim.calibration.simulate import simulate

    start = _cpu()
    traces = load(folder, keep_empty=True)
    labels = (traces.runs["model"].to_numpy() if by_model
              else np.array(["all"] * traces.n))
    est = estimate(traces, labels)
    doc, _ = scenario_document(est, name=label, description="", tasks=sims, seed=11)
    fitted = _cpu()
    sim = simulate(doc, sims, 23)
    done = _cpu()
    h = doc["harness"]
    print(f"== {label}: {traces.n} recorded runs, {sims} simulated "
          f"(fit {fitted - start:.1f} CPU s, simulation {done - fitted:.1f} CPU s)")
    print(f"   detector {h['detector']}; budgets {h['budgets']}; "
          f"context_window {h['context_window']}")
    real, simulated = Counter(traces.runs["category"]), Counter(sim.category)
    n, m = traces.n, sim.n
    for cat in sorted(set(real) | set(simulated)):
        p, q = real[cat] / n, simulated[cat] / m
        pooled = (p * n + q * m) / (n + m)
        se = math.sqrt(max(pooled * (1 - pooled), 1.0 / (n + m)) * (2.0 / n + 1.0 / m))
        print(f"   {cat:12s} recorded {p:7.4f}  simulated {q:7.4f}  z {(q - p) / se:+6.2f}")
    steps = traces.runs["steps"].to_numpy(float)
    print(f"   steps mean {steps.mean():.2f} vs {np.mean(sim.steps):.2f}; p95 "
          f"{np.quantile(steps, 0.95):.0f} vs {np.quantile(sim.steps, 0.95):.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--sim", type=int, default=20_000)
    parser.add_argument("--scenarios", nargs="*",
                        default=["bounded", "bounded_stop_first", "naive"])
    parser.add_argument("--traces", nargs="*", default=[])
    parser.add_argument("--by-model", action="store_true")
    args = parser.parse_args(argv)
    from sim.cli import main as sim_main

    with tempfile.TemporaryDirectory() as tmp:
        for name in args.scenarios:
            out = Path(tmp) / name
            code = sim_main(["run", str(REPO / "scenarios" / f"{name}.yaml"), "--tasks",
                             str(args.runs), "--traces", "--out", str(out), "--quiet"])
            if code != 0:
                print(f"{name}: sim run exited {code}", file=sys.stderr)
                return code
            _report(name, out, args.sim, args.by_model)
    for folder in args.traces:
        _report(Path(folder).name, Path(folder), args.sim, args.by_model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
