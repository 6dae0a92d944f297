"""Errors that reach the user as a clear message and exit status 2, never a traceback."""

from __future__ import annotations


class InputError(Exception):
    """Bad input from the user: a file, a field or an option. ``str()`` is the
    whole message: where (file and dotted field path) and what is wrong."""

    def __init__(self, message: str, *, source: str = "", path: str = "",
                 line: int | None = None) -> None:
        self.message = message
        self.source = source
        self.path = path
        self.line = line  # 1-based line of ``path`` in ``source``, where known
        where = ": ".join(p for p in (source, path) if p)
        text = f"{message} (line {line})" if line else message
        super().__init__(f"{where}: {text}" if where else text)
