"""Results folders written safely: checked before a run, replaced whole after it.

A command that writes a results folder (``run``, ``sweep``, ``capacity``,
``compare``) calls :func:`prepare` before it simulates anything and
:func:`replace` to write. :func:`prepare` refuses (an
:class:`~sim.errors.InputError`, exit status 2):

* an ``--out`` that is a file, or whose folder cannot be created or written
  (``/proc/x``, a read-only place): found in a second, not after a long run;
* a non-empty folder holding anything but the files sim writes (it is not
  a results folder; nothing of yours is ever deleted);
* a results folder of a *different* run (its recorded identity, the
  resolved scenario, differs), unless ``force``: a 10-task experiment never
  silently replaces a 10,000-task result. The same run may be written again.

:func:`replace` writes every file into a fresh temporary folder beside the
target and only then swaps it in (the old folder is renamed aside, the new
one renamed into place, the old one deleted). A failure while writing leaves
the previous results as they were and no temporary folder behind; a reader
sees the old folder or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.output.provenance import identity

RESULT_ENTRIES = frozenset({
    "results.parquet", "summary.json", "report.md", "report.html", "timeseries.parquet",
    "comparison.json", "figures", "base", "candidate", "junit.xml", "summary.md",
    "runs.parquet", "calls.parquet"})
"""Names sim writes into a results folder; anything else makes a folder foreign."""

IDENTITY_FILES = ("summary.json", "comparison.json")
"""Files whose ``provenance`` says which run a folder holds (:func:`identity`)."""


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def recorded_identity(folder: Path) -> Any:
    """The identity recorded in ``folder`` (None when no file records one)."""
    for name in IDENTITY_FILES:
        path = folder / name
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            provenance = data.get("provenance") if isinstance(data, dict) else None
            if isinstance(provenance, dict):
                return identity(provenance)
    return None


def prepare(out: str | os.PathLike, provenance: Mapping[str, Any], *, force: bool = False,
            flag: str = "--out") -> Path:
    """Check that ``out`` may receive the results of the run ``provenance``
    describes (see the module docstring); return it as a Path. Creates the
    parent folders; leaves ``out`` itself as it was."""
    target = Path(out)
    if target.exists() and not target.is_dir():
        raise InputError(f"{flag} {target} is a file, not a folder")
    if target.is_dir():
        try:
            entries = _entries(target)
        except OSError as error:
            raise InputError(f"{flag} {target}: cannot list it ({error.strerror})") from None
        foreign = [e for e in entries if e not in RESULT_ENTRIES and not e.startswith(".")]
        if foreign:
            shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
            raise InputError(f"{flag} {target} is not empty and not a results folder (it "
                             f"holds {shown}); choose another folder")
        if entries and not force:
            recorded, wanted = recorded_identity(target), _plain(identity(provenance))
            if recorded != wanted:
                what = ("results of a different run" if recorded is not None
                        else "results whose run is not recorded")
                raise InputError(f"{flag} {target} holds {what}"
                                 f"{_difference(recorded, wanted)}; pass --force to "
                                 f"replace them, or choose another folder")
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        probe = tempfile.mkdtemp(dir=parent, prefix=f".{target.name}.check.")
        os.rmdir(probe)
    except OSError as error:
        raise InputError(f"{flag} {target}: cannot write there ({error.__class__.__name__}: "
                         f"{error.strerror or error})") from None
    return target


@contextlib.contextmanager
def replace(out: str | os.PathLike) -> Iterator[Path]:
    """A temporary folder to write the results into; on leaving the block
    without an error it becomes ``out`` (see the module docstring). On an
    error it is removed and ``out`` is left as it was."""
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.new."))
    try:
        yield staging
        os.chmod(staging, 0o755)
        _swap(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap(staging: Path, target: Path) -> None:
    """Put ``staging`` at ``target``, moving an old ``target`` aside first."""
    if not target.exists():
        os.rename(staging, target)
        return
    foreign = [e for e in _entries(target) if e not in RESULT_ENTRIES and not e.startswith(".")]
    if foreign:  # something was added while the run went on: keep it all
        raise InputError(f"{target} gained files that are not results ({', '.join(foreign)}) "
                         f"while the run went on; nothing was replaced")
    old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old."))
    os.rmdir(old)
    os.rename(target, old)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples as lists, and so on)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _difference(recorded: Any, wanted: Any, path: str = "") -> str:
    """`` (first difference: at x, y recorded, z now)`` or ``""``."""
    if recorded is None:
        return ""
    found = _first_difference(recorded, wanted, path)
    if found is None:
        return ""
    where, old, new = found
    return f" (first difference at {where or 'the top'}: {_short(old)} there, {_short(new)} now)"


def _first_difference(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = _first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)
            if found is not None:
                return found
        return None
    return None if a == b else (path, a, b)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
