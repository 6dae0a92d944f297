"""The one atomic file writer (sim/atomic.py, StagedFile): a file staged
beside its target and renamed over it when whole; and its users (the
output's atomic_file, ParquetStream, the live driver's OTel spans) leave the
target as it was and no temporary file when a write fails."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pyarrow as pa
import pytest

import sim.atomic
from sim.atomic import FILE_MODE, TEMP_SUFFIX, StagedFile


def full(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_committed_file_is_in_place_with_mode_0644_and_nothing_beside_it(tmp_path: Path
                                                                           ) -> None:
    """While written, the bytes are in a ``.<name>.*.tmp`` file beside the
    target (the target not there yet); committed, the target holds them
    with mode 0644 and the temporary file is gone."""
    target = tmp_path / "out.bin"
    with StagedFile(target) as staged:
        staged.handle.write(b"hello")
        assert not target.exists()
        assert staged.tmp.parent == tmp_path and staged.tmp.name.startswith(".out.bin.")
        assert staged.tmp.name.endswith(TEMP_SUFFIX)
    assert target.read_bytes() == b"hello"
    assert stat.S_IMODE(target.stat().st_mode) == FILE_MODE == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_an_error_in_the_block_keeps_the_previous_file_and_leaves_no_temporary(
        tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), StagedFile(target) as staged:
        staged.handle.write(b"new")
        raise RuntimeError("stop")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_a_full_disk_at_commit_raises_and_keeps_the_previous_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """ENOSPC from the fsync or the rename: the OSError is raised, the target
    is as it was and the temporary file removed."""
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    staged = StagedFile(target)
    staged.handle.write(b"new")
    monkeypatch.setattr(sim.atomic.os, step, full)
    with pytest.raises(OSError, match="No space left"):
        staged.commit()
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_a_file_that_need_not_be_durable_is_never_fsynced(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """``durable=False`` (a sweep's kept chunk): no fsync of the file or the
    folder (one would raise here), the file still renamed into place whole."""
    monkeypatch.setattr(sim.atomic.os, "fsync", full)
    with StagedFile(tmp_path / "chunk.arrow", durable=False) as staged:
        staged.handle.write(b"x" * 10_000)
    assert (tmp_path / "chunk.arrow").read_bytes() == b"x" * 10_000


def test_discard_removes_the_temporary_file_and_never_touches_the_target(tmp_path: Path
                                                                         ) -> None:
    staged = StagedFile(tmp_path / "out.bin")
    staged.handle.write(b"half")
    staged.discard()
    staged.discard()  # twice: nothing left to do
    assert list(tmp_path.iterdir()) == []


def test_atomic_file_tells_a_full_disk_as_an_input_error_naming_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sim.output.files.atomic_file is the writer plus the message: ``cannot
    write <file>: no space left on device (ENOSPC); out.json is as it was``."""
    from sim.bad_input import InputError
    from sim.output.files import write_atomic

    target = tmp_path / "out.json"
    target.write_bytes(b"{}")
    monkeypatch.setattr(sim.atomic.os, "replace", full)
    with pytest.raises(InputError) as caught:
        write_atomic(target, b'{"a": 1}')
    monkeypatch.undo()
    assert str(caught.value).startswith(f"cannot write {target}: no space left on device")
    assert str(caught.value).endswith("out.json is as it was")
    assert target.read_bytes() == b"{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_stream_that_fails_at_close_keeps_no_temporary_and_raises_the_os_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ParquetStream commits through the one writer: a full disk at the
    rename is the plain OSError (the sweep's caller words it: the finished
    chunks are kept), the target absent, no temporary file."""
    from sim.output.stream import ParquetStream

    schema = pa.schema([("x", pa.int64())])
    stream = ParquetStream(tmp_path / "r.parquet", schema)
    stream.write(pa.table({"x": [1, 2, 3]}, schema=schema))
    monkeypatch.setattr(sim.atomic.os, "replace", full)
    with pytest.raises(OSError, match="No space left"):
        stream.close()
    assert list(tmp_path.iterdir()) == []


def test_the_live_spans_are_one_json_line_written_atomically(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """SpanRecorder.write: the OTLP document as one compact JSON line, mode
    0644; a full disk at the rename leaves the previous file and no
    temporary one."""
    pytest.importorskip("opentelemetry.sdk")
    from sim.drivers.live.otel import SpanRecorder

    recorder = SpanRecorder(seed="atomic")
    target = tmp_path / "spans.json"
    recorder.write(target)
    text = target.read_text(encoding="utf-8")
    assert text == json.dumps(recorder.document(), separators=(",", ":")) + "\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    monkeypatch.setattr(sim.atomic.os, "replace", full)
    with pytest.raises(OSError):
        recorder.write(target)
    monkeypatch.undo()
    assert target.read_text(encoding="utf-8") == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spans.json"]
