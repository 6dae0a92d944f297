"""Start-up time of the CLI against importing the libraries it cannot do without.

    python -m benchmarks.bench_startup [--rounds R] [--scenario PATH]

Runs, alternating, ``rounds`` times each in fresh interpreters:

- the baseline ``python -c "import numpy, pandas, pyarrow"`` (what any
  command that writes results must load);
- ``python -m sim --help``;
- ``python -m sim run SCENARIO --tasks 2 --quiet`` (into a temporary folder);

and prints the median wall seconds of each and their ratio to the baseline,
plus which of scipy, matplotlib and genai_prices each command imported
(``-X importtime``). Issue 14: a simulating command imports those only when
it uses them. The ratios, not the seconds, are the measure: this machine is
shared and noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("scipy", "matplotlib", "genai_prices")


def _timed(argv: list[str]) -> tuple[float, set[str]]:
    """(wall seconds, heavy top-level packages imported) of one fresh run."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    return seconds, {name for name in HEAVY if name in imported}


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="scenarios/bounded.yaml")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        commands = {
            "import numpy, pandas, pyarrow": ["-c", "import numpy, pandas, pyarrow"],
            "sim --help": ["-m", "sim", "--help"],
            "sim run --tasks 2": ["-m", "sim", "run", args.scenario, "--tasks", "2", "--quiet",
                                  "--out", str(Path(tmp) / "out")],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        heavy: dict[str, set[str]] = {}
        for _ in range(args.rounds):
            for name, argv in commands.items():
                seconds, imported = _timed(argv)
                times[name].append(seconds)
                heavy[name] = imported
    base = statistics.median(times["import numpy, pandas, pyarrow"])
    print(f"{args.rounds} rounds, median wall seconds (fresh interpreters)")
    for name in commands:
        median = statistics.median(times[name])
        print(f"{name:32s} {median:6.2f} s  {median / base:5.2f}x baseline  "
              f"heavy imports: {', '.join(sorted(heavy[name])) or 'none'}")


if __name__ == "__main__":
    main()
