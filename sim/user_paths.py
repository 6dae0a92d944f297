"""Paths a user gives, checked as text before anything is read or written.

Every path that comes from the user (a scenario file, ``--out``, ``--otel``,
``--summary-md``, ``--junit``, ``$SIM_OUT``, the paths of ``[tool.sim]``)
goes through :func:`path_problem` (or :func:`check_path`, which raises):
a NUL character (which no file name can hold; Python raises ``ValueError``
deep in ``os``), a component longer than :data:`NAME_MAX` bytes or a path
longer than :data:`PATH_MAX` bytes (the kernel's ``ENAMETOOLONG``) is told
as bad input naming the flag or field, never met as a traceback after a
long run. Lengths count the bytes of the file-system encoding (UTF-8 with
surrogate escapes), as the kernel does.
"""

from __future__ import annotations

import os

from sim.bad_input import InputError

NAME_MAX = 255
"""The longest name of one path component (bytes; Linux, macOS and most file systems)."""
PATH_MAX = 4096
"""The longest path the kernel takes (bytes, with its terminating NUL; Linux)."""


def path_problem(text: str | os.PathLike[str]) -> str | None:
    """What is wrong with ``text`` as a path (None: nothing): a NUL
    character, a component over :data:`NAME_MAX` bytes, or the whole over
    ``PATH_MAX - 1`` bytes."""
    value = os.fspath(text)
    if "\0" in value:
        return "a path cannot hold a NUL character"
    encoded = os.fsencode(value)
    if len(encoded) >= PATH_MAX:
        return f"the path is {len(encoded):,} bytes long; at most {PATH_MAX - 1:,} are allowed"
    for part in encoded.split(b"/"):
        if len(part) > NAME_MAX:
            shown = os.fsdecode(part[:24])
            return (f"the name {shown}... is {len(part):,} bytes long; a file or folder "
                    f"name holds at most {NAME_MAX}")
    return None


def check_path(text: str | os.PathLike[str], what: str = "", *, source: str = "",
               field: str = "") -> None:
    """An InputError when :func:`path_problem` finds something wrong with
    ``text``: ``<what> <text>: <problem>`` (``what`` names the flag, e.g.
    ``--out``), with ``source`` and ``field`` (the file and dotted field the
    path came from, where there is one)."""
    problem = path_problem(text)
    if problem is None:
        return
    value = os.fspath(text)
    shown = repr(value if len(value) <= 50 else value[:47] + "...")
    lead = f"{what} {shown}" if what else shown
    raise InputError(f"{lead}: {problem}", source=source, path=field)
