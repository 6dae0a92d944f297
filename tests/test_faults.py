"""Faults while writing, as specs (issue 25, item 10 and "Faults"): two
commands on one ``--out``, a full disk (ENOSPC), a read-only disk (EROFS)
and a truncated kept chunk. Each ends in exit status 2 with one clear
message (or, for the chunk, in a clean resume), the earlier results as they
were and nothing half-written beside them.

The disk faults are simulated by patching the write path to raise the
errno a full or read-only disk gives (the same OSError the kernel raises).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sim.cli
from sim.output import folder as output_folder

REPO = Path(__file__).resolve().parents[1]
BOUNDED = REPO / "scenarios" / "bounded.yaml"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = sim.cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def run(out: Path, *extra: str) -> tuple[int, str, str]:
    return cli("run", str(BOUNDED), "--tasks", "40", "--workers", "1", "--quiet",
               "--format", "json", "--out", str(out), *extra)


def no_result(stdout: str) -> bool:
    """Nothing on stdout but, under ``--format json``, the error as one JSON object."""
    return not stdout or json.loads(stdout)["error"]["status"] == 2


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def leftovers(parent: Path, name: str) -> list[str]:
    """Temporary files or folders a write left beside ``parent/name``
    (kept chunks excepted: they are kept on purpose, for --resume)."""
    return sorted(p.name for p in parent.iterdir()
                  if p.name.startswith(f".{name}") and not p.name.endswith(".partial"))


def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def erofs(*args, **kwargs):
    raise OSError(errno.EROFS, os.strerror(errno.EROFS))


# ---------------------------------------------------------- concurrent writers
def test_a_second_command_on_the_same_out_is_refused_with_a_clear_message(tmp_path) -> None:
    """While another process holds ``--out``, ``run`` exits 2 at once naming
    it (it died with FileNotFoundError); once that process ends the lock is
    free (flock: released by the kernel, even after SIGKILL)."""
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from sim.output.folder import lock; "
                               f"lock({str(out)!r}); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        status, stdout, stderr = run(out)
        assert status == 2 and no_result(stdout), stdout
        assert f"is being written by another sim command (pid {holder.pid})" in stderr
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    status, _, stderr = run(out)
    assert status == 0, stderr
    assert not output_folder.lock_path(out).exists()


# ------------------------------------------------------------- disk faults
@pytest.mark.parametrize(("fault", "words"), [(enospc, "no space left on device (ENOSPC)"),
                                              (erofs, "read-only file system (EROFS)")],
                         ids=["ENOSPC", "EROFS"])
@pytest.mark.parametrize("where", ["chunks", "folder"])
def test_a_full_or_read_only_disk_is_exit_2_and_keeps_the_earlier_results(
        tmp_path, monkeypatch, fault, words, where) -> None:
    """The disk fails while the chunks stream, or while the folder is
    written: exit 2 with one message naming the file and what was kept; the
    earlier results are byte for byte as they were, and no temporary file
    or folder is left beside them."""
    out = tmp_path / "out"
    assert run(out)[0] == 0
    before = snapshot(out)
    if where == "chunks":
        monkeypatch.setattr("sim.output.results.os.fsync", fault)
    else:
        monkeypatch.setattr("sim.output.folder._swap", fault)
    status, stdout, stderr = run(out, "--tasks", "60", "--force")
    assert status == 2 and no_result(stdout), stdout
    assert stderr.startswith("error: cannot write ") and words in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert snapshot(out) == before
    assert leftovers(tmp_path, "out") == []


def test_the_chunks_kept_after_a_full_disk_finish_with_resume(tmp_path, monkeypatch) -> None:
    """A disk that fills while the folder is written keeps the finished chunks;
    the same command with --resume then writes the results an uninterrupted
    run writes."""
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    with monkeypatch.context() as patch:
        patch.setattr("sim.output.folder._swap", enospc)
        status, _, stderr = run(out)
    assert status == 2 and "no space left" in stderr
    assert status != 0 and not out.exists()
    assert run(out, "--resume")[0] == 0
    assert run(fresh)[0] == 0
    assert (out / "results.parquet").read_bytes() == (fresh / "results.parquet").read_bytes()


def test_a_truncated_kept_chunk_is_recomputed_on_resume(tmp_path, monkeypatch) -> None:
    """Kept chunks from an interrupted run, one cut to 100 bytes: --resume
    recomputes it (it failed with ArrowInvalid) and the results are the bytes
    of an uninterrupted run."""
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    with monkeypatch.context() as patch:
        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        patch.setattr("sim.output.results.write_streamed_results", interrupted)
        status, _, _ = run(out, "--tasks", "400")
    assert status == 130
    chunks = sorted(output_folder.Path(tmp_path / ".out.partial").glob("*.arrow"))
    assert len(chunks) >= 2
    with chunks[1].open("r+b") as handle:
        handle.truncate(100)
    status, _, stderr = run(out, "--tasks", "400", "--resume")
    assert status == 0, stderr
    assert run(fresh, "--tasks", "400")[0] == 0
    assert (out / "results.parquet").read_bytes() == (fresh / "results.parquet").read_bytes()


@pytest.mark.parametrize(("fault", "words"), [(enospc, "no space left"),
                                              (erofs, "read-only file system")],
                         ids=["ENOSPC", "EROFS"])
def test_traces_import_on_a_full_or_read_only_disk_is_exit_2(tmp_path, monkeypatch, fault,
                                                             words) -> None:
    """``traces import`` whose output cannot be written: exit 2, nothing left."""
    source = tmp_path / "source"
    assert run(source, "--traces")[0] == 0
    monkeypatch.setattr("sim.traces.writer.tempfile.mkdtemp", fault)
    status, _stdout, stderr = cli("traces", "import", str(source), "--out",
                                 str(tmp_path / "imported"))
    assert status == 2, stderr
    assert words in stderr and "Traceback" not in stderr
    assert not (tmp_path / "imported").exists()


def test_a_full_disk_while_a_trace_folder_is_replaced_keeps_the_old_one(tmp_path,
                                                                        monkeypatch) -> None:
    """atomic_folder: the new folder fails half-way (ENOSPC): exit 2, the old
    folder is as it was and the temporary folder is gone."""
    from sim.bad_input import InputError
    from sim.traces.writer import atomic_folder

    target = tmp_path / "traces"
    target.mkdir()
    (target / "runs.parquet").write_bytes(b"old")
    with pytest.raises(InputError, match="no space left"), atomic_folder(target, force=True) \
            as tmp:
        (tmp / "runs.parquet").write_bytes(b"new")
        enospc()
    assert (target / "runs.parquet").read_bytes() == b"old"
    assert leftovers(tmp_path, "traces") == []


def test_a_full_disk_during_a_command_never_shows_a_traceback(tmp_path) -> None:
    """End to end on a real, tiny filesystem when this machine lets us mount
    one (root): the run fills it, exits 2, and prints one line."""
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(tiny)],
                             capture_output=True, check=False).returncode == 0
    if not mounted:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        start = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "sim", "run", str(BOUNDED), "--tasks", "3000", "--workers",
             "1", "--quiet", "--out", str(tiny / "out")], capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300, check=False)
        assert result.returncode == 2, result.stderr
        assert "no space left on device" in result.stderr and "Traceback" not in result.stderr
        assert time.monotonic() - start < 300
    finally:
        subprocess.run(["umount", str(tiny)], check=False)
