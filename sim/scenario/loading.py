"""Reading scenario files: a file or a scenario name in, the validated
:class:`~sim.scenario.schema.Scenario` out, or one clear error.

Every kind of bad input (missing file, a folder, a binary or Parquet file,
malformed YAML, a duplicate key, a bad ``--set``) raises
:class:`~sim.bad_input.InputError` naming the file and, where there is one,
the dotted field path; the CLI prints it and exits with status 2. YAML is read
by :mod:`sim.scenario.safeyaml` (duplicate keys, alias bombs and deep nesting
refused); validation is :mod:`sim.scenario.validation`'s.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from sim.bad_input import InputError
from sim.scenario.catalog import resolve
from sim.scenario.dotted import apply_overrides, blame
from sim.scenario.limits import MAX_FILE_BYTES
from sim.scenario.safeyaml import key_lines, parse
from sim.scenario.schema import Scenario
from sim.scenario.validation import validate
from sim.user_paths import check_path

__all__ = ["MAX_FILE_BYTES", "load_scenario", "read_text", "read_yaml"]



def load_scenario(path: str | os.PathLike, overrides: list[str] | tuple[str, ...] = (), *,
                  allow_plugins: bool = False, labels: list[str] | None = None) -> Scenario:
    """Read, override (``dotted.path=value``, value parsed as YAML) and validate
    a scenario: a file, or a scenario name (see :mod:`sim.scenario.catalog`;
    a path that exists wins). Errors name the YAML line of the field where
    the file has it. ``allow_plugins`` lets it name a detector or verifier by import
    path (code that is imported and run); without it such a name is an error.
    A path no file can have (a NUL character, a name or path too long) is an
    InputError saying so (:func:`sim.user_paths.check_path`)."""
    check_path(path, "the scenario file")
    source = resolve(path)
    text = read_text(source)
    raw = _top_mapping(parse(text, source), source)
    given = apply_overrides(raw, overrides, source, labels=labels)
    if raw.get("name", "") == "":  # absent or empty: the file's name (null, 0, [] are errors)
        raw["name"] = Path(source).stem
    _anchor_paths(raw, Path(source).parent)
    try:
        return validate(raw, source, allow_plugins=allow_plugins, lines=key_lines(text))
    except InputError as error:  # a bad --set is the override's fault, not the file's
        raise blame(error, given, source) from None


def _anchor_paths(raw: dict[str, Any], base: Path) -> None:
    """Make a relative arrivals CSV path relative to the scenario's folder."""
    arrivals = (raw.get("des") or {}).get("arrivals") if isinstance(raw.get("des"), dict) else None
    if isinstance(arrivals, dict) and isinstance(arrivals.get("path"), str):
        path = Path(arrivals["path"])
        if not path.is_absolute():
            arrivals["path"] = str(base / path)


def read_yaml(source: str) -> dict[str, Any]:
    """The top-level mapping of a YAML file (read strictly, see
    :mod:`sim.scenario.safeyaml`), or an InputError."""
    check_path(source, "the scenario file")
    source = resolve(source)
    return _top_mapping(parse(read_text(source), source), source)


def read_text(source: str) -> str:
    """The text of the scenario file ``source``; an InputError saying what the
    path is instead (a folder, a Parquet or other binary file, too large)."""
    path = Path(source)
    try:
        info = path.stat()  # never blocks, unlike opening a FIFO
        if stat.S_ISDIR(info.st_mode):
            raise InputError(_folder_kind(path), source=source)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"not a regular file ({_file_kind(info.st_mode)}): give a "
                             f"scenario file", source=source)
        if info.st_size > MAX_FILE_BYTES:
            raise InputError(f"the file is larger than {MAX_FILE_BYTES:,} bytes", source=source)
        with path.open("rb") as handle:  # bounded: the file may grow after the stat
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise InputError(f"the file is larger than {MAX_FILE_BYTES:,} bytes", source=source)
    except FileNotFoundError:
        raise InputError("file not found", source=source) from None
    except OSError as error:
        raise InputError(f"cannot read the file ({error.strerror or error})",
                         source=source) from None
    if data[:4] == b"PAR1":
        raise InputError("is a Parquet file, not a scenario: give a scenario YAML file or "
                         "name ('sim scenarios' lists them)", source=source)
    try:
        if b"\0" in data[:8192]:
            raise UnicodeDecodeError("utf-8", data[:1], 0, 1, "NUL byte")
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("is a binary file, not YAML text: give a scenario YAML file or "
                         "name ('sim scenarios' lists them)", source=source) from None


def _folder_kind(path: Path) -> str:
    """What a folder given as a scenario is, and what to give instead."""
    if (path / "runs.parquet").is_file() or (path / "calls.parquet").is_file():
        kind = "a trace folder (runs.parquet), not a scenario file (were two arguments swapped?)"
    elif (path / "summary.json").is_file() or (path / "results.parquet").is_file():
        kind = "a results folder, not a scenario file"
    else:
        inside = sorted(p.name for p in path.glob("*.y*ml"))[:3]
        kind = "a folder, not a scenario file" + (
            f" (it holds {', '.join(inside)})" if inside else "")
    return f"is {kind}: give a scenario YAML file or name ('sim scenarios' lists them)"


def _top_mapping(data: Any, source: str) -> dict[str, Any]:
    """A parsed document as the scenario's top-level mapping ({} when empty)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"the top level must be a mapping, got {type(data).__name__}",
                         source=source)
    return data


def _file_kind(mode: int) -> str:
    """What a path that is not a regular file is, in words."""
    for test, kind in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a file"


