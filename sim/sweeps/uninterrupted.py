"""Ctrl-C held back while a sweep creates a file, then raised.

A file is written atomically (a temporary file, then a rename), and its
writer removes the temporary file when interrupted. But between the
temporary file's creation (``tempfile.mkstemp``, which returns its name only
after a few more lines of Python) and the ``try`` that removes it, a
KeyboardInterrupt leaves it behind. A Ctrl-C at a sweep's start lands there
often enough to see: a ``.manifest.json.*.tmp`` or ``.results.parquet.*.tmp``
was left in the kept chunks' folder in 2 of 12 Ctrl-Cs sent as that folder
appeared. Likewise a progress bar interrupted while it was made printed
a traceback at exit (``tqdm.__del__`` of an object without its attributes).
:func:`held_ctrl_c` wraps where the sweep's thread creates its files (the
kept chunks' folder, the streams, each kept chunk) and its bar: a Ctrl-C
there is raised when the block ends, a few milliseconds later.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def held_ctrl_c() -> Iterator[None]:
    """Run the block with SIGINT recorded instead of handled; once it ends
    (however), SIGINT's handler is put back and, if a SIGINT came, called:
    Python's raises KeyboardInterrupt there. Only in the main thread, and
    only while SIGINT has a handler of Python code (ignored or at its default
    action, it is left as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        yield
        return
    came: list[Any] = []
    signal.signal(signal.SIGINT, lambda signum, frame: came.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        if came:
            handler(*came[0])
