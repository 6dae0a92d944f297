"""The one atomic file writer: a file staged beside its target, renamed over it when whole.

:class:`StagedFile` writes ``.<name>.<random>.tmp`` in the target's directory;
committed, it is flushed, fsynced, given mode 0644 and renamed over the
target, and the directory fsynced; discarded (or on any failure) it is
removed and the target keeps its previous content. A reader never sees half
a file. Its users: :func:`sim.output.files.atomic_file` (which also words a
full disk), :class:`sim.output.stream.ParquetStream`, a trace folder's slice
(:mod:`sim.traces.where`), a DES chunk's progress count
(:class:`sim.sweeps.progress.TaskCounter`) and the live driver's spans
(:mod:`sim.drivers.live.otel`).
Swapping a whole folder is another concept (:mod:`sim.output.folder`,
:func:`sim.traces.writer.atomic_folder`). A leaf of the standard library.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

__all__ = ["FILE_MODE", "TEMP_SUFFIX", "StagedFile", "fsync_dir"]

FILE_MODE = 0o644
"""The mode of every file written (the temporary file's 0600 would be kept)."""
TEMP_SUFFIX = ".tmp"
"""The ending of the temporary file an atomic write renames into place."""


class StagedFile:
    """``path`` written atomically (see the module): write to :attr:`handle`
    (binary), then :meth:`commit`, or :meth:`discard`. As a ``with`` block it
    commits when the block ends and discards on an exception. ``durable``
    False skips both fsyncs (a file a kill may lose, such as a sweep's kept
    chunk: the rename alone keeps it whole or absent)."""

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = True) -> None:
        self.path = Path(path)
        self.durable = durable
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.",
                                   suffix=TEMP_SUFFIX)
        self.tmp = Path(tmp)
        """The temporary file, beside :attr:`path`."""
        try:  # a file that never opened (Ctrl-C) leaves no temporary file
            self.handle: BinaryIO = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            self.tmp.unlink(missing_ok=True)
            raise

    def commit(self) -> Path:
        """Put the file in place: flush and fsync it (``durable``), close it,
        give it :data:`FILE_MODE`, rename it over :attr:`path`, then fsync the
        directory (``durable``). On a failure before the rename the
        temporary file is removed and the error raised; returns the path."""
        try:
            if self.durable:
                self.handle.flush()
                os.fsync(self.handle.fileno())
            self.handle.close()
            os.chmod(self.tmp, FILE_MODE)
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise
        if self.durable:
            fsync_dir(self.path.parent)
        return self.path

    def discard(self) -> None:
        """Drop what was written: the temporary file is removed, :attr:`path`
        untouched (a close failing on a full disk is ignored: the file is
        being thrown away)."""
        if not self.handle.closed:
            with contextlib.suppress(OSError):
                self.handle.close()
        self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> StagedFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def fsync_dir(directory: Path) -> None:
    """Make a rename durable by fsyncing its directory (where the OS allows)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
