"""Progress of a sweep's chunks: a DES cell, one chunk however long, counts its
finished tasks into a small file as it runs (:class:`TaskCounter`, in the
worker), and the parent reads those counts four times a second
(:class:`ChunkProgress`), so its bar moves between chunks too.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from tqdm import tqdm

from sim.atomic import StagedFile
from sim.sweeps.plan import Job

PROGRESS_INTERVAL_S = 0.25
"""How often a DES chunk writes its count of finished tasks, and the parent reads it (seconds)."""


class TaskCounter:
    """Counts a running DES chunk's finished tasks into a small file
    (``path``: the count as text, replaced atomically at most every
    :data:`PROGRESS_INTERVAL_S` seconds), for the parent's progress bar. A
    worker that cannot write there (a remote Dask worker) counts silently."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.done = 0
        self._next = time.monotonic() + PROGRESS_INTERVAL_S

    def __call__(self) -> None:
        self.done += 1
        now = time.monotonic()
        if now >= self._next:
            self._next = now + PROGRESS_INTERVAL_S
            self.write()

    def write(self) -> None:
        """Write the count now (:class:`sim.atomic.StagedFile`, not fsynced:
        a count a kill may lose)."""
        with contextlib.suppress(OSError), StagedFile(self.path, durable=False) as staged:
            staged.handle.write(str(self.done).encode("ascii"))


def read_count(path: Path) -> int:
    """The count a :class:`TaskCounter` wrote (0 before its first write)."""
    try:
        return int(path.read_text(encoding="ascii") or 0)
    except (OSError, ValueError):
        return 0


class ChunkProgress:
    """Moves ``bar`` as chunks finish and, between, as running DES chunks
    count their finished tasks (``counting``: their count files by chunk
    key, read by a thread every :data:`PROGRESS_INTERVAL_S` seconds)."""

    def __init__(self, bar: tqdm, counting: dict[str, Path]) -> None:
        self.bar = bar
        self.counting = dict(counting)
        self.base = bar.n
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start reading the count files (only if any DES chunk runs; the
        counts a killed run left behind are removed first)."""
        for path in self.counting.values():
            path.unlink(missing_ok=True)
        if self.counting:
            self._thread = threading.Thread(target=self._poll, name="sim-des-progress",
                                            daemon=True)
            self._thread.start()

    def finished(self, job: Job) -> None:
        """Count ``job`` whole (its count file is no longer read)."""
        with self._lock:
            path = self.counting.pop(job.key, None)
            self.base += job.tasks
            self._show()
        if path is not None:
            path.unlink(missing_ok=True)

    def _show(self) -> None:
        partial = sum(read_count(path) for path in self.counting.values())
        shown = self.base + partial
        if shown > self.bar.n:
            self.bar.update(shown - self.bar.n)

    def _poll(self) -> None:
        while not self._stopped.wait(PROGRESS_INTERVAL_S):
            with self._lock:
                self._show()

    def stop(self) -> None:
        """Stop reading and remove the count files left."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        for path in self.counting.values():
            path.unlink(missing_ok=True)
