"""Ctrl-C for a program that starts with SIGINT ignored.

A sweep stops on Ctrl-C through Python's KeyboardInterrupt (the parent stops
its workers, keeps the finished chunks and says so). A process started with
SIGINT ignored never gets one: a background job of a non-interactive shell
(``sim run ... &`` in a script, a CI step run in the background) inherits
SIGINT ignored, and Python keeps an inherited ignore, so SIGINT sent to it
(``kill -INT``, a CI runner's cancel, Ctrl-C to the script's process group)
did nothing and the sweep ran to its end. :func:`hear_ctrl_c`, called by the
``sim`` command at start-up, puts Python's handler back.
"""

from __future__ import annotations

import signal
import threading


def hear_ctrl_c() -> bool:
    """Make SIGINT raise KeyboardInterrupt in this process when it started
    with SIGINT ignored; return whether it changed anything. For a program's
    entry point, in the main thread (elsewhere, or when SIGINT has any other
    handler, it changes nothing)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN):
        return False
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return True
