"""``tune`` against the brute-force optimum on a known world, at a larger size.

    python -m benchmarks.bench_tune [--seeds 10] [--runs 500] [--brute 5000] [--keep 0.9]

For each seed, ``runs`` runs of the known world (:mod:`benchmarks.tune_world`:
seed 001's process, a 60-step backstop) are written as traces and ``tune``
recommends a step cap from :data:`~benchmarks.tune_world.STEP_GRID`; the
brute-force optimum is the cheapest cap that loses at most ``1 - keep`` of the
world's successes over ``brute`` tasks per cap (common random numbers). It
prints each seed's recommendation, its distance in grid steps from the
optimum, and the seeds within one step (the test, ``tests/test_tune.py``,
asks at least 9 of 10 at 200 runs). Also the CPU seconds per tune.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.tune_world import STEP_GRID, brute_force_step_cap, simulated_traces
from sim.tuning.search import tune


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--brute", type=int, default=5000)
    parser.add_argument("--keep", type=float, default=0.9)
    args = parser.parse_args()
    optimum = brute_force_step_cap(args.brute, 999, args.keep)
    print(f"brute-force optimum over {args.brute:,} tasks per cap: steps={optimum}")
    hits = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            traces = simulated_traces(Path(tmp), args.runs, seed)
            start = time.process_time()
            found = tune(traces, knobs="steps", keep_successes=args.keep,
                         grid={"steps": list(STEP_GRID)})
            cpu = time.process_time() - start
            cap = dict(found.recommendation.setting)["steps"]
            steps = (abs(STEP_GRID.index(cap) - STEP_GRID.index(optimum))
                     if cap in STEP_GRID else None)
            hits += steps is not None and steps <= 1
            row = found.recommendation.row
            print(f"seed {seed}: steps={cap} ({steps} grid steps off), lost {row['lost']} of "
                  f"{row['base_successes']} (upper {100 * row['lost_high']:.2f}%), "
                  f"{cpu:.1f} CPU s")
    print(f"within one grid step: {hits} of {args.seeds} seeds")


if __name__ == "__main__":
    main()
