"""Ctrl-C at random moments of a sweep: how many interrupted sweeps fail to exit.

    python -m benchmarks.ctrl_c_exits [--interrupts N] [--tasks N] [--workers N]
                                      [--pause S] [--spread S] [--scenario PATH]
                                      [--timeout S]

Starts ``--interrupts`` sweeps one after another (the tests' sweep child,
``tests/sweep_child.py``: ``--tasks`` tasks of ``--scenario`` on ``--workers``
local worker processes, ``--pause`` seconds of sleep after each chunk is
kept), each as a terminal starts a command; once two chunks are kept, waits a
uniform random time up to ``--spread`` seconds and sends SIGINT to the
child's process group, as Ctrl-C does. A child that has not exited
``--timeout`` seconds later is counted as hung: its threads' stacks are
dumped (faulthandler, on SIGUSR1) to ``hung_K.txt`` in a temporary folder
named at the end (its sweep's folder kept beside it), and it is killed.
Prints each stop's time and, at the end, the count of hangs and the median
and largest stop time.

Small chunks and no pause (the defaults) put the parent in the pool's code
most of the time, where a badly timed signal shows. The local pool that
used ``concurrent.futures.ProcessPoolExecutor`` hung in 2 of some 85 such
interrupts (a worker terminated halfway through sending its chunk's tables
left the executor's reader thread waiting for the rest, and the interpreter
joins that thread at exit); the pool of its own pipes, 0 of 600.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
TESTS = ROOT / "tests"
sys.path.insert(0, str(TESTS))
from sweep_child import AS_FROM_A_TERMINAL  # noqa: E402  (the tests' helper)

DUMPING = ("import faulthandler, runpy, signal, sys; "
           "faulthandler.register(signal.SIGUSR1, all_threads=True); "
           "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
"""Runs the script of ``argv[1]`` with its stacks dumped to stderr on SIGUSR1."""


def kept(folder: Path) -> int:
    """The chunks kept so far in a sweep's ``.partial`` folder."""
    partial = folder / ".partial"
    return len(list(partial.glob("*.arrow"))) if partial.is_dir() else 0


def interrupt(args: argparse.Namespace, out: Path, rng: random.Random
              ) -> tuple[float | None, str]:
    """One sweep started and interrupted: (seconds from SIGINT to its exit, or
    None when it hung; its stderr)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
    child = subprocess.Popen(
        [*AS_FROM_A_TERMINAL, sys.executable, "-c", DUMPING, str(TESTS / "sweep_child.py"),
         args.scenario, str(args.tasks), str(args.workers), str(out), str(args.pause)],
        env=env, start_new_session=True, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while kept(out) < 2 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(rng.uniform(0, args.spread))
    start = time.monotonic()
    try:
        os.killpg(child.pid, signal.SIGINT)
    except ProcessLookupError:  # it finished first
        return 0.0, child.communicate()[1]
    try:
        _, err = child.communicate(timeout=args.timeout)
        return time.monotonic() - start, err
    except subprocess.TimeoutExpired:
        os.kill(child.pid, signal.SIGUSR1)
        time.sleep(2)
        os.killpg(child.pid, signal.SIGKILL)
        return None, child.communicate()[1]


def main() -> None:
    """Run the interrupts and print the count of hangs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interrupts", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=30_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds of sleep after each kept chunk (default 0)")
    parser.add_argument("--spread", type=float, default=1.0,
                        help="the signal comes up to this many seconds after two chunks are kept")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="a child not gone this many seconds after the signal hung")
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "bounded.yaml"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    folder = Path(tempfile.mkdtemp(prefix="ctrl-c-"))
    stops: list[float] = []
    hung = 0
    for k in range(args.interrupts):
        took, err = interrupt(args, folder / f"sweep_{k}", rng)
        if took is None:
            hung += 1
            (folder / f"hung_{k}.txt").write_text(err)
            print(f"{k}: HUNG (stacks in {folder / f'hung_{k}.txt'})", flush=True)
        else:
            stops.append(took)
            shutil.rmtree(folder / f"sweep_{k}", ignore_errors=True)
            print(f"{k}: exited {took:.2f} s after the signal", flush=True)
    print(f"{hung} of {args.interrupts} interrupted sweeps hung (no exit within "
          f"{args.timeout:.0f} s); exits after the signal: median "
          f"{statistics.median(stops) if stops else float('nan'):.2f} s, largest "
          f"{max(stops, default=float('nan')):.2f} s; folders in {folder}")


if __name__ == "__main__":
    main()
