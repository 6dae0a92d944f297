"""Command line: ``python -m sim <command> ...`` (or ``sim <command> ...``
once installed).

Each command lives in its own module under :mod:`sim.cli` with a
``register(subparsers)`` function that adds its parser and sets ``handler``.

Exit status of every command: 0 done (for ``compare``: no regression), 1 a
regression, 2 bad input (one ``error: ...`` message on stderr naming the file
and field, never a traceback; argparse's usage errors too), 3 inconclusive
(``compare`` without the tasks to decide); ``run`` and ``sweep`` stopped early
keep their finished chunks for ``--resume``: 75 a lost worker, 130 Ctrl-C.
No command gives help and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Iterator
from typing import NoReturn

from sim.bad_input import InputError

COMMANDS = ("run", "sweep", "cost", "compare", "capacity", "traces", "replay", "live",
            "calibrate", "tune")
NEWCOMER_COMMANDS = ("scenarios", "view")  # finding scenarios by name; opening a report

EXIT_STATUS = ("Exit status: 0 done (compare: no regression), 1 a regression, 2 bad input, "
               "3 inconclusive (compare: not enough tasks to decide either way), 75 a lost "
               "worker and 130 Ctrl-C (run, sweep: --resume continues). Results "
               "folders hold results.parquet, summary.json, report.md and report.html (a "
               "self-contained page with the figures); see README.md.")


def program_name(argv0: str | None = None) -> str:
    """``sim`` when run as the installed script, ``python -m sim`` otherwise."""
    name = os.path.basename(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else ""))
    return "sim" if name == "sim" else "python -m sim"


class UsageError(Exception):
    """A command line argparse refuses (exit 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but a usage error is raised (and reported by
    :func:`main` in one line, or as JSON) instead of printed with the usage."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with every command registered."""
    from sim.output.provenance import sim_version

    parser = _Parser(
        prog=prog or program_name(),
        description="Simulate LLM agent harnesses: outcomes, cost and capacity.",
        epilog=EXIT_STATUS)
    parser.add_argument("--version", action="version", version=f"%(prog)s {sim_version()}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (*COMMANDS, *NEWCOMER_COMMANDS):
        importlib.import_module(f"sim.cli.{name}").register(sub)
    for command in sub.choices.values():
        command.epilog = command.epilog or EXIT_STATUS
        if not any("-v" in a.option_strings for a in command._actions):
            command.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                                 help=VERBOSE_HELP)
    return parser


VERBOSE_HELP = ("more detail on stderr: -v logs what runs (files read, folders written), "
                "-vv also a traceback with any error")


def _wants_json(argv: list[str]) -> bool:
    """Whether the command line asks for --format json (read before parsing,
    for usage errors)."""
    for i, item in enumerate(argv):
        if item == "--format=json" or (item == "--format" and argv[i + 1:i + 2] == ["json"]):
            return True
    return False


def report_error(kind: str, message: str, as_json: bool, error: InputError | None = None) -> None:
    """One line on stderr (``error: ...``); with ``as_json`` also, as the only
    thing on stdout, one JSON object: ``{"error": {"kind", "message",
    "status", and for bad input "file", "field", "line", "problem"}}``."""
    from sim.output.safe_text import printable  # names from the input, shown as text

    print(f"error: {printable(message, newlines=False)}", file=sys.stderr)
    if not as_json:
        return
    detail: dict[str, object] = {"kind": kind, "message": message, "status": 2}
    if error is not None:
        detail.update({"file": error.source or None, "field": error.path or None,
                       "line": error.line, "problem": error.message})
    json.dump({"error": detail}, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


def _log_to_stderr(verbose: int) -> None:
    """``-v``: sim's log (logger ``sim``) on stderr, INFO (``-vv``: DEBUG);
    without it, nothing (the handler of an earlier call in this process goes)."""
    logger = logging.getLogger("sim")
    for handler in list(logger.handlers):
        if getattr(handler, "sim_cli", False):
            logger.removeHandler(handler)
    if not verbose:
        logger.setLevel(logging.NOTSET)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.sim_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("sim: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)


def _texts(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """``(name, text)`` of every text argument (each item of a list)."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str):
                yield name, item


def _not_text(args: argparse.Namespace, argv: list[str]) -> str | None:
    """What is wrong with the first argument that is not text (a file name of
    bytes no encoding reads, which Python hands over with lone surrogates:
    Arrow, which opens every table, takes UTF-8 names only), or None."""
    for name, item in _texts(args):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            option = "--" + name.replace("_", "-")
            label = option if any(a.startswith(option) for a in argv) else name
            return (f"{label}: {item!r} is not UTF-8 text (a name of bytes no encoding "
                    f"reads); sim reads and writes files by UTF-8 names: rename it")
    return None


WRITTEN_FILES = ("otel", "junit", "summary_md")
"""The options naming a file a command writes (replaces or appends to) beside
its results folder."""


def _writes_an_input(args: argparse.Namespace) -> str | None:
    """What is wrong when an option of :data:`WRITTEN_FILES` names a file the
    same command reads (its scenario, say: ``--otel`` or ``--junit`` replaced
    it, ``--summary-md`` appended to it), or None."""
    given = vars(args)
    read = [item for name, item in _texts(args)
            if name not in (*WRITTEN_FILES, "out") and os.path.isfile(item)]
    for name in WRITTEN_FILES:
        target = given.get(name)
        if not isinstance(target, str) or not os.path.isfile(target):
            continue
        for source in read:
            try:
                same = os.path.samefile(target, source)
            except OSError:
                continue
            if same:
                flag = "--" + name.replace("_", "-")
                return (f"{flag}: {target} is a file this command reads ({source}): writing "
                        f"it would replace what it reads; give another path")
    return None


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run one command; return its exit status (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(argv)
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        report_error("usage", str(error), as_json)
        return 2
    except SystemExit as done:  # --help, --version (0)
        return int(done.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    not_text = _not_text(args, argv) or _writes_an_input(args)
    if not_text:
        report_error("usage", not_text, as_json)
        return 2
    verbose = getattr(args, "verbose", 0) or 0
    _log_to_stderr(verbose)
    try:
        return int(args.handler(args) or 0)
    except InputError as error:
        if verbose > 1:
            traceback.print_exc()
        report_error("input", str(error), as_json, error)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout closed early (| head): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as error:  # a sweep stopped early: the API is loaded only to tell
        from sim.api.simulating import SweepStopped

        if not isinstance(error, SweepStopped):
            raise
        print(f"stopped: {error}", file=sys.stderr)
        return error.status
