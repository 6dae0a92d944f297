"""Detectors of the generated-input campaign (issue 41): what counts as a
traceback, accepted nonsense or data lost after one command.

A case runs ``python -m sim ARGV`` in this process (:func:`run_cli`) and
each detector returns :class:`Finding` values: a column of the campaign's
table (``tracebacks``, ``nonsense``, ``data_lost``) and a check name, so a
check known to fail on this branch (:data:`KNOWN`) can be named.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXITS = {0, 1, 2, 3}
"""Exit statuses a command may give on generated input (README: 75 and 130
need a lost worker or Ctrl-C)."""

RESULT_FILES = frozenset({"results.parquet", "summary.json", "report.md", "report.html"})
"""The whole set of a run/sweep/replay results folder."""

HOSTILE_MARKUP = ("<script", "<img")
FENCED = re.compile(r"^```[^\n]*\n.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
"""A fenced code block of Markdown (a fence at the start of a line to the next)."""
"""Raw HTML that must never reach a Markdown or HTML report from the input."""

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""C0 control bytes and DEL (not tab, not newline) that must never reach a
terminal or a report from the input."""

TEMPORARY = re.compile(r"(\.tmp$|\.partial$|\.new\.|^\.tmp|~$)")
"""Names of the temporary files a command must not leave behind (a
``.NAME.lock`` is not one: an flock released when the process ends, and
:func:`run_cli` releases it after each in-process command)."""


@dataclass(frozen=True)
class Finding:
    """One failure of a case: ``column`` of the table and ``check`` (a short
    stable name, see :data:`KNOWN`), with ``detail`` for the report."""

    column: str
    check: str
    detail: str = ""


KNOWN: dict[str, str] = {}
"""Checks known to fail, with the defect (printed by the campaign as
"known"): none. The defects issue 41 listed (output targets, ``[tool.sim]``,
``SIM_OUT``, ``cost --model``, nameless tool calls, raw markup and terminal
escapes) are fixed, and every check counts again."""


@dataclass
class Ran:
    """What one command did: exit ``status``, ``stdout``, ``stderr``, and
    the exception that escaped ``main`` (None if none)."""

    argv: list[str]
    status: int | None
    stdout: str
    stderr: str
    error: BaseException | None = None


@contextlib.contextmanager
def environment(env: Mapping[str, str | None] | None = None,
                cwd: Path | None = None) -> Iterator[None]:
    """Run the body with ``env`` set (a None value unsets) and in ``cwd``;
    both restored after."""
    saved = {k: os.environ.get(k) for k in (env or {})}
    here = os.getcwd()
    try:
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(here)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_cli(argv: list[str], env: Mapping[str, str | None] | None = None,
            cwd: Path | None = None) -> Ran:
    """``python -m sim ARGV`` in this process (``sim.cli.main``), stdout and
    stderr captured; an exception out of ``main`` is kept, not raised (a
    KeyboardInterrupt or the campaign's hang alarm is raised)."""
    import sim.cli

    out, err = io.StringIO(), io.StringIO()
    status: int | None = None
    error: BaseException | None = None
    with environment(env, cwd):
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = sim.cli.main(argv)
        except SystemExit as exit_:  # argparse refusing a flag: exit 2 is fine
            status = exit_.code if isinstance(exit_.code, int) else 2
        except Exception as caught:  # the finding
            error = caught
    _release_locks(argv, cwd)
    return Ran(argv, status, out.getvalue(), err.getvalue(), error)


def _release_locks(argv: list[str], cwd: Path | None) -> None:
    """Release the output locks an in-process command kept (a command that
    ends its process releases them; this process goes on), and remove their
    files: ``.NAME.lock`` beside each path of ``argv`` and under ``cwd``."""
    from sim.output.folder import unlock

    places = {Path(a).parent for a in argv if "\x00" not in a and len(a) < 4000}
    if cwd is not None:
        places |= {cwd, cwd / "reports"}
    for place in places:
        with contextlib.suppress(OSError):
            for lock in place.glob(".*.lock"):
                unlock(place / lock.name[1:-5])


def tracebacks(ran: Ran, exits: set[int] = EXITS) -> list[Finding]:
    """A traceback: an exception out of ``main``, "Traceback" on stderr, or
    an exit status outside ``exits``."""
    if ran.error is not None:
        import traceback

        text = "".join(traceback.format_exception(ran.error))
    elif "Traceback" in ran.stderr or ran.status not in exits:
        text = f"exit {ran.status}\n{ran.stderr}"
    else:
        return []
    check = "long-name" if "File name too long" in text else "traceback"
    return [Finding("tracebacks", check, f"{_argv(ran)}\n{_shorten(text, 1500)}")]


def _shorten(text: str, size: int) -> str:
    """``text`` with every run of one character longer than 40 cut to 40 and
    ``...``, then its last ``size`` characters (a long name stays readable)."""
    return re.sub(r"(.)\1{40,}", lambda m: m.group(1) * 40 + "...", text)[-size:]


def escapes(text: str, tainted: bool, where: str, check: str = "escape",
            markup: bool = True) -> list[Finding]:
    """Accepted nonsense: ``text`` (a report or summary; with ``markup``
    False, a terminal's stdout or stderr) holds a C0 control byte or, with
    ``markup``, raw ``<script``/``<img``, when ``tainted`` (the input held
    them, so they came from it)."""
    if not tainted:
        return []
    # markup inside a fenced code block is text to every Markdown renderer (and our HTML
    # escapes it): only what is outside the fences can be markup
    lowered = FENCED.sub("", text).lower()
    found = [m for m in HOSTILE_MARKUP if m in lowered] if markup else []
    control = CONTROL.search(text)
    if control:
        found.append(repr(control.group()))
    if found:
        return [Finding("nonsense", check, f"{where} holds raw {', '.join(found)} from the "
                                           f"input")]
    return []


def whole(folder: Path, files: frozenset[str] = RESULT_FILES) -> bool:
    """``folder`` holds every file of ``files``."""
    return folder.is_dir() and {p.name for p in folder.iterdir()} >= files


def digest(paths: list[Path]) -> dict[str, str]:
    """SHA-256 of every file under ``paths`` (folders walked), by path: what
    a command must leave alone."""
    out: dict[str, str] = {}
    for root in paths:
        if root.is_file():
            out[str(root)] = hashlib.sha256(root.read_bytes()).hexdigest()
        elif root.is_dir():
            for path in sorted(root.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def untouched(before: dict[str, str], paths: list[Path], what: str,
              check: str = "bystander") -> list[Finding]:
    """Data lost: a file of ``before`` (:func:`digest`) changed or gone."""
    after = digest(paths)
    changed = sorted(k for k in before if after.get(k) != before[k])
    if changed:
        return [Finding("data_lost", check, f"{what} changed {changed[:3]}")]
    return []


def leftovers(folder: Path, check: str = "leftovers") -> list[Finding]:
    """Data lost: temporary files left under ``folder`` after the command."""
    if not folder.is_dir():
        return []
    left = [str(p.relative_to(folder)) for p in folder.rglob("*")
            if TEMPORARY.search(p.name) and not p.name.startswith(".sim")]
    if left:
        return [Finding("data_lost", check, f"temporary files left: {sorted(left)[:4]}")]
    return []


NAMELESS = {"", "None", "none", "null", "nan", "NaN"}
"""Tool names an importer must not write (what a missing or null name turns
into when stringified)."""


def calls_nonsense(folder: Path, tainted: bool) -> list[Finding]:
    """Accepted nonsense in an imported trace folder: a tool name in
    :data:`NAMELESS` or shaped like a stringified list/object, a negative or
    NaN token count or cost."""
    import pyarrow.parquet as pq

    found: list[Finding] = []
    calls = pq.read_table(folder / "calls.parquet").to_pylist()
    for call in calls:
        for tool in call.get("tool_calls") or []:
            name = tool.get("name")
            if name is None or name.strip() in NAMELESS or name[:1] in "[{":
                found.append(Finding("nonsense", "nameless-tool",
                                     f"tool name {name!r} in call {call['run_id']}:"
                                     f"{call['call']}"))
                break
        for column in ("input_tokens", "cache_read_tokens", "cache_write_tokens",
                       "output_tokens", "reasoning_tokens", "cost_usd", "latency_s"):
            value = call.get(column)
            if value is not None and (not math.isfinite(value) or value < 0):
                found.append(Finding("nonsense", "negative-count",
                                     f"{column}={value} in call {call['run_id']}:"
                                     f"{call['call']}"))
                break
        if found:
            break
    runs = pq.read_table(folder / "runs.parquet").to_pylist()
    for run in runs:
        for column in ("steps", "input_tokens", "output_tokens", "cost_usd", "duration_s"):
            value = run.get(column)
            if value is not None and (not math.isfinite(value) or value < 0):
                found.append(Finding("nonsense", "negative-count",
                                     f"runs.{column}={value} in run {run['run_id']}"))
                break
    return found


def _argv(ran: Ran) -> str:
    return _shorten(" ".join(repr(a) if not re.fullmatch(r"[\w./=,:-]+", a) else a
                             for a in ran.argv), 600)


def short(value: Any) -> str:
    """``value`` as a short one-line repr for reproducers."""
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."
