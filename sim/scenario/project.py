"""A project's own defaults: the ``[tool.sim]`` table of the nearest
``pyproject.toml`` (the current folder or the closest folder above it).

Recognised keys (anything else is an error naming the key, so a typo is not
silently ignored)::

    [tool.sim]
    out = "results"              # results folders go under here (default: reports)
    scenarios = ["worlds"]       # folders searched for a scenario name (a string or a list)

Relative paths are relative to the folder of that ``pyproject.toml``. The
environment overrides the file: ``SIM_OUT`` for ``out`` (see
:func:`out_root`), ``SIM_SCENARIOS`` adds folders before these.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any

from sim.bad_input import InputError
from sim.user_paths import check_path

KEYS = ("out", "scenarios")


def find_pyproject(cwd: Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``cwd`` (default: the current folder)."""
    here = (Path.cwd() if cwd is None else cwd).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def tool_sim(cwd: Path | None = None) -> tuple[Path | None, dict[str, Any]]:
    """(the file, its ``[tool.sim]`` table); ``(None, {})`` when there is none.
    An unreadable file or an unknown key is an InputError naming the file."""
    path = find_pyproject(cwd)
    if path is None:
        return None, {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise InputError(f"cannot read it as TOML ({error})", source=str(path)) from None
    except RecursionError:  # arrays or tables nested thousands deep
        raise InputError("cannot read it as TOML (arrays or tables nested too deep)",
                         source=str(path)) from None
    table = data.get("tool", {}).get("sim", {}) if isinstance(data.get("tool"), dict) else {}
    if not isinstance(table, dict):
        raise InputError("must be a table", source=str(path), path="tool.sim")
    for key in table:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InputError(f"unknown key: {hint}known keys: {', '.join(KEYS)}",
                             source=str(path), path=f"tool.sim.{key}")
    return path, table


def config_paths(key: str, cwd: Path | None = None) -> list[Path]:
    """The folders ``[tool.sim].<key>`` names (a string or a list of strings),
    relative to its ``pyproject.toml``; an InputError naming the file and the
    field for a path no folder can have (:func:`sim.user_paths.check_path`)."""
    path, table = tool_sim(cwd)
    if path is None or key not in table:
        return []
    value = table[key]
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise InputError("must be a path or a list of paths", source=str(path),
                         path=f"tool.sim.{key}")
    for i, item in enumerate(items):
        field = f"tool.sim.{key}" if isinstance(value, str) else f"tool.sim.{key}[{i}]"
        if not item.strip():  # "" would silently be the pyproject's own folder
            raise InputError("must name a folder, got an empty path", source=str(path),
                             path=field)
        check_path(item, source=str(path), field=field)
    found = [path.parent / Path(v).expanduser() for v in items]
    for i, full in enumerate(found):  # relative to a deep folder, a path may grow too long
        field = f"tool.sim.{key}" if isinstance(value, str) else f"tool.sim.{key}[{i}]"
        check_path(full, source=str(path), field=field)
    return found


def out_root(cwd: Path | None = None) -> Path:
    """Where results folders go when ``--out`` is not given: ``$SIM_OUT``, else
    ``[tool.sim].out``, else ``reports``. A path no folder can have (a NUL
    character, a name or the whole too long) is an InputError naming where
    it came from."""
    env = os.environ.get("SIM_OUT", "").strip()
    if env:
        check_path(env, "$SIM_OUT")
        return Path(env).expanduser()
    paths = config_paths("out", cwd)
    return paths[0] if paths else Path("reports")
