"""Chunked sweeps through the CLI (issue 14, done-when): ``run`` and ``sweep``
write the same bytes with ``--workers 1``, ``--workers 2``, ``--scheduler
dask`` or a Dask cluster's address, and after a SIGKILL and ``--resume``;
Ctrl-C stops with exit status 130, keeps the finished chunks and writes nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_child import AS_FROM_A_TERMINAL, stop_bound_s

from sim.cli import main
from sim.output.chunks import partial_folder

ROOT = Path(__file__).parents[1]
BOUNDED = str(ROOT / "scenarios" / "bounded.yaml")
FILES = ("results.parquet", "summary.json", "report.md")
# tasks of a run killed after its first chunks and resumed: 40 chunks of 50 tasks (an
# exact comparison of bytes, so its size only has to leave chunks to resume)
KILLED_TASKS = "2000"


def _cli(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sim", *argv], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _files(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in FILES}


def _kept(out: Path) -> int:
    return len(list(partial_folder(out).glob("*.arrow")))


def _wait_for_chunks(out: Path, count: int, child: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        if len(list(partial_folder(out).glob("*.arrow"))) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"no {count} chunks kept in time (exit {child.poll()})")


@pytest.mark.slow  # three runs and a Dask cluster: 20 s
def test_run_writes_the_same_bytes_on_one_or_two_workers_and_on_a_dask_cluster(
        tmp_path: Path) -> None:
    """results.parquet, summary.json and report.md are identical for
    --workers 1, --workers 2 and --scheduler tcp://... (a running cluster)."""
    distributed = pytest.importorskip("distributed")
    common = ("run", BOUNDED, "--tasks", "400", "--quiet")
    assert main([*common, "--workers", "1", "--out", str(tmp_path / "one")]) == 0
    assert main([*common, "--workers", "2", "--out", str(tmp_path / "two")]) == 0
    with distributed.LocalCluster(n_workers=2, processes=False, dashboard_address=":0") as cluster:
        assert main([*common, "--scheduler", cluster.scheduler_address,
                     "--out", str(tmp_path / "cluster")]) == 0
    assert _files(tmp_path / "one") == _files(tmp_path / "two") == _files(tmp_path / "cluster")
    assert not partial_folder(tmp_path / "one").exists()


def test_scheduler_dask_starts_a_local_cluster_with_the_same_results(tmp_path: Path) -> None:
    """--scheduler dask (a LocalCluster of --workers processes) gives the
    bytes of --workers 1."""
    pytest.importorskip("distributed")
    common = ("sweep", BOUNDED, "--tasks", "200", "--quiet", "--set", "harness.budgets.steps=30")
    dask = _cli(*common, "--scheduler", "dask", "--workers", "2", "--out",
                str(tmp_path / "dask"))
    _, err = dask.communicate(timeout=300)
    assert dask.returncode == 0, err
    assert main([*common, "--workers", "1", "--out", str(tmp_path / "one")]) == 0
    assert _files(tmp_path / "dask") == _files(tmp_path / "one")


def test_a_run_killed_with_sigkill_and_resumed_writes_the_bytes_of_an_uninterrupted_run(
        tmp_path: Path) -> None:
    """SIGKILL mid-sweep keeps the finished chunks and writes no results;
    the same command with --resume runs only the rest and ends with the
    bytes of a run never interrupted."""
    out = tmp_path / "killed"
    argv = ("run", BOUNDED, "--tasks", KILLED_TASKS, "--workers", "2", "--quiet", "--out", str(out))
    child = _cli(*argv)
    _wait_for_chunks(out, 3, child)
    os.killpg(child.pid, signal.SIGKILL)
    child.communicate()
    kept = len(list(partial_folder(out).glob("*.arrow")))
    assert not out.exists()
    assert main([*argv, "--resume"]) == 0
    assert main(["run", BOUNDED, "--tasks", KILLED_TASKS, "--workers", "1", "--quiet",
                 "--out", str(tmp_path / "whole")]) == 0
    assert _files(out) == _files(tmp_path / "whole")
    assert kept >= 3 and not partial_folder(out).exists()


def _sweep_to_stop(scheduler: str, out: Path) -> subprocess.Popen:
    """``sim run`` of 200,000 tasks started as a terminal starts it
    (:data:`AS_FROM_A_TERMINAL`: SIGINT at its default even where this suite
    runs as a background job, which ignores it)."""
    if scheduler == "dask":
        pytest.importorskip("distributed")
    return subprocess.Popen([*AS_FROM_A_TERMINAL, sys.executable, "-m", "sim", "run", BOUNDED,
                             "--tasks", "200000", "--workers", "2", "--scheduler", scheduler,
                             "--quiet", "--out", str(out)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _temporary_files(out: Path) -> list[str]:
    """The temporary files (hidden) in the folder of ``out``'s kept chunks."""
    folder = partial_folder(out)
    return [p.name for p in folder.iterdir() if p.name.startswith(".")] if folder.exists() else []


@pytest.mark.untraced
@pytest.mark.parametrize("scheduler", ["local", "dask"])
def test_ctrl_c_exits_130_says_what_was_kept_and_writes_nothing(tmp_path: Path,
                                                                 scheduler: str) -> None:
    """SIGINT (Ctrl-C) to a running sweep, on the local pool or on --scheduler
    dask (whose workers are forked from the sweep): exit status 130 within
    seconds, a message naming the kept chunks and --resume and no traceback,
    no results folder, no temporary file beside the kept chunks, and no
    chunk kept after the signal beyond those already running.

    The bound is 3 s scaled by the load per core (:func:`stop_bound_s`). The
    run is 200,000 tasks (about 38 s of work on 2 quiet workers, and as much
    longer under load as the bound), so a sweep that went on with its
    remaining chunks fails.
    """
    out = tmp_path / "stopped"
    child = _sweep_to_stop(scheduler, out)
    _wait_for_chunks(out, 2, child)
    kept, bound, start = _kept(out), stop_bound_s(), time.monotonic()
    os.killpg(child.pid, signal.SIGINT)
    _, err = child.communicate(timeout=300)
    took = time.monotonic() - start
    assert took < bound, f"stopped {took:.1f} s after Ctrl-C (bound {bound:.1f} s): {err}"
    assert child.returncode == 130, err
    assert "chunks finished and kept" in err and "--resume" in err and "Traceback" not in err
    assert " - ERROR - " not in err, err  # nothing of Dask's since the Ctrl-C (see dask_workers)
    assert not out.exists() and _temporary_files(out) == []
    assert kept <= _kept(out) <= kept + 2 * 2  # at most two chunks per worker were queued


@pytest.mark.untraced
@pytest.mark.parametrize("scheduler", ["local", "dask"])
def test_ctrl_c_at_the_start_exits_130_and_writes_nothing(tmp_path: Path, scheduler: str) -> None:
    """SIGINT as soon as the sweep has made its folder of kept chunks (with
    --scheduler dask, while its cluster starts and this process imports
    what its first chunks need): exit status 130, a last line saying so, no
    traceback or error, no results folder and no temporary file. Stopped
    there, a Dask sweep once hung (the import lock left taken by the
    interrupted main thread: 1 run in 4) and a temporary file of the results
    stream was left. (Dask's warnings from before the Ctrl-C, such as an
    event loop slow under load, may come first.) The stop waits for the
    cluster's start to end (1-2 s at load 3), so it has no bound of its own
    here: a hang fails the time-out."""
    out = tmp_path / "stopped"
    child = _sweep_to_stop(scheduler, out)
    deadline = time.monotonic() + 120
    while not partial_folder(out).is_dir() and child.poll() is None:
        assert time.monotonic() < deadline, "no folder of kept chunks in 120 s"
        time.sleep(0.005)
    os.killpg(child.pid, signal.SIGINT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert "Traceback" not in err and " - ERROR - " not in err, err
    assert err.splitlines()[-1].startswith(("interrupted", "stopped: interrupted")), err
    assert not out.exists() and _temporary_files(out) == []


def test_resume_refuses_the_kept_chunks_of_another_run(tmp_path: Path) -> None:
    """--resume over chunks kept by a run of other settings is bad input
    (exit 2), never a mix of two runs."""
    out = tmp_path / "mixed"
    child = _cli("run", BOUNDED, "--tasks", "20000", "--workers", "2", "--quiet",
                 "--out", str(out))
    _wait_for_chunks(out, 1, child)
    os.killpg(child.pid, signal.SIGKILL)
    child.communicate()
    assert main(["run", BOUNDED, "--tasks", "20000", "--set", "harness.budgets.steps=20",
                 "--quiet", "--resume", "--out", str(out)]) == 2


def test_a_traced_run_killed_and_resumed_writes_the_trace_bytes_of_an_uninterrupted_run(
        tmp_path: Path) -> None:
    """--traces streams runs and calls chunk by chunk: after a SIGKILL, --resume
    ends with the runs.parquet, calls.parquet and results of a run on one
    worker never interrupted; an untraced run's kept chunks are not resumed
    as a traced run's."""
    out = tmp_path / "killed"
    argv = ("run", BOUNDED, "--tasks", KILLED_TASKS, "--workers", "2", "--quiet", "--traces",
            "--out", str(out))
    child = _cli(*argv)
    _wait_for_chunks(out, 3, child)
    os.killpg(child.pid, signal.SIGKILL)
    child.communicate()
    assert not out.exists()
    assert main(["run", BOUNDED, "--tasks", KILLED_TASKS, "--quiet", "--resume",
                 "--out", str(out)]) == 2  # the kept chunks are a traced run's
    assert main([*argv, "--resume"]) == 0
    assert main(["run", BOUNDED, "--tasks", KILLED_TASKS, "--workers", "1", "--quiet", "--traces",
                 "--out", str(tmp_path / "whole")]) == 0
    traced = (*FILES, "runs.parquet", "calls.parquet")
    assert ({name: (out / name).read_bytes() for name in traced}
            == {name: (tmp_path / "whole" / name).read_bytes() for name in traced})
    assert not partial_folder(out).exists()


def test_traces_on_a_dask_cluster_are_the_bytes_of_one_worker(tmp_path: Path) -> None:
    """--traces with --scheduler tcp://... writes the trace files of --workers 1."""
    distributed = pytest.importorskip("distributed")
    common = ("run", BOUNDED, "--tasks", "300", "--quiet", "--traces")
    assert main([*common, "--workers", "1", "--out", str(tmp_path / "one")]) == 0
    with distributed.LocalCluster(n_workers=2, processes=False, dashboard_address=":0") as cluster:
        assert main([*common, "--scheduler", cluster.scheduler_address,
                     "--out", str(tmp_path / "cluster")]) == 0
    for name in (*FILES, "runs.parquet", "calls.parquet"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "cluster" / name
                                                          ).read_bytes(), name
