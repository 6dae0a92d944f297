"""Scenarios by name: the built-in ones shipped with the package, and the
user's own (calibrated worlds, variants) in the folders that are searched.

A scenario argument is resolved by :func:`resolve`:

1. a path that exists is used as it is (a path always wins);
2. otherwise a bare name (``bounded`` or ``bounded.yaml``, no folder part) is
   looked up, first match wins, as ``NAME.yaml`` (or ``NAME.yml``) in
   :func:`search_folders`: the current folder, its ``scenarios/`` folder, each
   folder of ``$SIM_SCENARIOS`` (separated by ``os.pathsep``), the
   ``scenarios`` folders of ``[tool.sim]`` in the nearest ``pyproject.toml``,
   and last the package's own scenarios (package data, so a plain
   ``pip install`` has them);
3. a path such as ``scenarios/bounded.yaml`` that does not exist here but
   names a built-in scenario is that built-in scenario, so the documented
   commands work from any folder.

Anything else is an :class:`~sim.bad_input.InputError` naming the argument, the
closest names (did you mean) and ``sim scenarios``, which lists them all.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from sim.bad_input import InputError
from sim.scenario.project import config_paths
from sim.user_paths import check_path

log = logging.getLogger(__name__)

SUFFIXES = (".yaml", ".yml")
ENV = "SIM_SCENARIOS"


def builtin_folder() -> Path:
    """The folder of the scenarios shipped with sim (``sim/scenarios``: package
    data when installed; in a source tree, a link to the repository's
    ``scenarios/``)."""
    return Path(str(resources.files("sim") / "scenarios"))


def search_folders(cwd: Path | None = None) -> list[tuple[str, Path]]:
    """(origin, folder) pairs searched for a scenario name, in order (see the
    module docstring); folders that do not exist, or whose name no folder can
    have (longer than the system allows, a NUL byte), are left out."""
    here = Path.cwd() if cwd is None else cwd
    folders: list[tuple[str, Path]] = [("here", here), ("here", here / "scenarios")]
    for part in os.environ.get(ENV, "").split(os.pathsep):
        if part.strip():
            check_path(part.strip(), f"${ENV}")
            folders.append((f"${ENV}", Path(part.strip()).expanduser()))
    folders += [("pyproject.toml", p) for p in config_paths("scenarios", here)]
    folders.append(("built-in", builtin_folder()))
    seen: set[Path] = set()
    kept = []
    for origin, folder in folders:
        try:
            key = folder.resolve()
        except (OSError, ValueError):  # a NUL byte, a loop: no folder has that name
            continue
        if key not in seen and _holds(folder.is_dir):
            seen.add(key)
            kept.append((origin, folder))
    return kept


def _holds(test: Callable[[], bool]) -> bool:
    """``test()``: a path's ``is_dir``, ``is_file`` or ``exists``; False for a
    name the system refuses to look up (ENAMETOOLONG, ELOOP: nothing has it)."""
    try:
        return test()
    except OSError:
        return False


@dataclass(frozen=True)
class Entry:
    """A scenario found by name: its ``name``, ``path``, where it was found
    (``origin``) and the first line of its header comment (``summary``)."""

    name: str
    path: Path
    origin: str
    summary: str


def _summary(path: Path, width: int = 100) -> str:
    """The first sentence of a scenario file's header comment (at most
    ``width`` characters), or ''."""
    words: list[str] = []
    try:
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                text = line.strip()
                if not text.startswith("#") or (words and not text.lstrip("#").strip()):
                    break
                words += text.lstrip("#").split()
    except OSError:
        return ""
    header = " ".join(words)
    if ". " in header:
        header = header[:header.index(". ") + 1]
    return header if len(header) <= width else header[:width - 3].rstrip() + "..."


def entries(cwd: Path | None = None) -> list[Entry]:
    """The scenarios of the search folders, in search order (the current
    folder itself is searched by :func:`resolve` but not listed: it may hold
    any YAML); a name found in two folders is listed once, where it resolves."""
    here = (Path.cwd() if cwd is None else cwd).resolve()
    found: dict[str, Entry] = {}
    for origin, folder in search_folders(cwd):
        if folder.resolve() == here:  # any YAML file here resolves, but is not listed
            continue
        try:
            paths = sorted(folder.iterdir())
        except OSError:  # an unreadable folder holds nothing we can list
            continue
        for path in paths:
            if path.suffix in SUFFIXES and path.is_file() and path.stem not in found:
                found[path.stem] = Entry(path.stem, path, origin, _summary(path))
    return list(found.values())


def _builtin_of(text: str) -> Path | None:
    """The built-in scenario that a missing ``.../scenarios/NAME.yaml`` names."""
    path = Path(text)
    if path.parent.name != "scenarios" or path.suffix not in SUFFIXES:
        return None
    candidate = builtin_folder() / path.name
    return candidate if _holds(candidate.is_file) else None


def resolve(source: str | os.PathLike[str], cwd: Path | None = None) -> str:
    """The file a scenario argument names (see the module docstring), as a
    string; an InputError when there is none."""
    text = os.fspath(source)
    if _holds(Path(text).exists):
        return text
    name = text
    if Path(text).suffix in SUFFIXES:
        name = Path(text).stem
    if text and os.sep not in text and "/" not in text:
        for _, folder in search_folders(cwd):
            for suffix in SUFFIXES:
                candidate = folder / f"{name}{suffix}"
                if _holds(candidate.is_file):
                    log.info("scenario %s: %s", text, candidate)
                    return str(candidate)
    builtin = _builtin_of(text)
    if builtin is not None:
        log.info("scenario %s: not here, the built-in %s", text, builtin)
        return str(builtin)
    names = [e.name for e in entries(cwd)]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise InputError(f"file not found, and no scenario of that name: {hint}"
                     f"'sim scenarios' lists the names ({', '.join(names[:12])})",
                     source=text)
