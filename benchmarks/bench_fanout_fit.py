"""Fitting fan-out (:mod:`sim.calibration.fanout`) at 1k and 10k runs with subagents.

    python -m benchmarks.bench_fanout_fit [--sizes 1000,10000] [--dir /tmp/bench_fanout]

For each size, a trace folder of runs with known fan-out (each run 5-15
productive parent calls and an answer; spawn 0.1 per productive call;
1/2/3 children with probability 0.5/0.3/0.2; a child of
max(1, round(lognormal(log 3, 0.5))) calls) is written once with the trace
writer (kept in ``--dir``). Printed per size: seconds to load it for
calibration (:func:`sim.calibration.data.load`), to fit the fan-out with its
child class and bootstrap (:func:`~sim.calibration.fanout.fit_fanout`), and
to validate it over 5 folds (:func:`~sim.calibration.fanout.validate`), with
the fitted spawn and PMF beside the known ones.

Measured 2026-12-05 (shared machine, load 9-10 on 2 cores): 1,000 runs
(16,884 calls): load 0.4 s, fit 1.6 s, validate 1.3 s, spawn 0.1015, PMF
[0, .477, .316, .208]; 10,000 runs (168,579 calls): load 3.9 s, fit 1.0 s,
validate 9.1 s, spawn 0.1018, PMF [0, .500, .304, .196]; every held-out
row within its sampling limit at both sizes.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

PMF = (0.0, 0.5, 0.3, 0.2)
SPAWN = 0.1


def write(folder: Path, n: int, seed: int = 0) -> None:
    """The known-fan-out trace folder of ``n`` runs (see the module docstring)."""
    from sim.harness.messages import Usage
    from sim.traces.model import CallRecord, RunRecord, ToolCallRecord
    from sim.traces.writer import write_runs

    rng = np.random.default_rng(seed)

    def call(i: int, prompt: int, tool: str | None, agent: str | None, t: float) -> CallRecord:
        tools = [] if tool is None else [ToolCallRecord(tool, id=f"t{i}",
                                                        arguments=json.dumps({"i": i}),
                                                        result_tokens=50, error=False)]
        return CallRecord(usage=Usage(input_tokens=prompt, output_tokens=40), model="m",
                          started_s=t, latency_s=0.5, tool_calls=tools, agent=agent)

    runs = []
    for r in range(n):
        calls, t, prompt, i = [], 0.0, 1000, 0
        steps = int(rng.integers(5, 16))
        for s in range(1, steps + 2):
            final = s == steps + 1
            calls.append(call(i, prompt, None if final else "bash", None, t))
            i, t, prompt = i + 1, t + 1.0, prompt + 100
            if final or rng.random() >= SPAWN:
                continue
            k = int(rng.choice(len(PMF), p=PMF))
            for c in range(k):
                length = max(1, round(float(np.exp(rng.normal(math.log(3.0), 0.5)))))
                for j in range(length):
                    calls.append(call(i, 500 + 80 * j, None if j == length - 1 else "read",
                                      f"a{s}-{c}", t))
                    i, t = i + 1, t + 0.5
        runs.append(RunRecord(run_id=f"r{r:06d}", source="sim", file="bench", calls=calls,
                              model="m", exit="succeeded", resolved=True))
    folder.mkdir(parents=True, exist_ok=True)
    write_runs(folder, runs)


def main() -> None:
    from sim.calibration.data import load
    from sim.calibration.fanout import fit_fanout, validate
    from sim.calibration.folds import assign

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--dir", default="/tmp/bench_fanout")
    args = parser.parse_args()
    for n in (int(v) for v in args.sizes.split(",")):
        folder = Path(args.dir) / f"runs_{n}"
        if not (folder / "calls.parquet").exists():
            write(folder, n)
        t0 = time.perf_counter()
        traces = load(folder)
        t1 = time.perf_counter()
        fit = fit_fanout(traces)
        t2 = time.perf_counter()
        rows = validate(traces, assign(traces, 5, 0), 0)
        t3 = time.perf_counter()
        assert fit is not None
        print(f"{n} runs, {len(traces.calls)} calls: load {t1 - t0:.1f} s, fit {t2 - t1:.1f} s, "
              f"validate (5 folds) {t3 - t2:.1f} s; spawn {fit.spawn:.4f} (known {SPAWN}), "
              f"children {fit.children} (known {list(PMF)}); held-out rows passed: "
              f"{[(r.key, r.passed) for r in rows]}")


if __name__ == "__main__":
    main()
