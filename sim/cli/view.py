"""``sim view DIR``: open a results, comparison or calibration report (its
path printed with control characters shown as escapes)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sim.bad_input import InputError

REPORTS = ("report.html", "calibration.html", "report.md", "calibration.md")
"""The files opened, first found first: every results folder (run, sweep,
capacity, replay, compare) has ``report.html``; a calibration has its own."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``view`` command."""
    parser = subparsers.add_parser(
        "view", help="open a results, comparison or calibration report in the browser",
        description="Open the report of a results folder (run, sweep, capacity, replay, "
                    "compare) or of a calibration in the web browser. Where no browser is "
                    "available (a server, CI), print the report's path instead.")
    parser.add_argument("folder", metavar="DIR",
                        help="a results folder, or the report file itself")
    parser.add_argument("--print", dest="print_only", action="store_true",
                        help="only print the report's path")
    parser.set_defaults(handler=run)


def report_of(target: Path) -> Path:
    """The report file of a folder (or the file given); an InputError otherwise
    (a path no file can have, a device or FIFO, a folder without a report)."""
    from sim.user_paths import check_path

    check_path(target)
    if target.exists() and not target.is_file() and not target.is_dir():
        raise InputError("is not a file nor a folder (a device, a FIFO or a socket): give a "
                         "results folder (--out of a command)", source=str(target))
    if target.is_file():
        if target.suffix not in (".html", ".md"):
            raise InputError("is not a report (an .html or .md file) nor a results folder",
                             source=str(target))
        return target
    if not target.is_dir():
        raise InputError("not found: give a results folder (--out of a command)",
                         source=str(target))
    for name in REPORTS:
        if (target / name).is_file():
            return target / name
    found = sorted(p.name for p in target.glob("*.html"))
    if found:
        return target / found[0]
    raise InputError(f"holds no report ({', '.join(REPORTS)}): give a results folder",
                     source=str(target))


def run(args: argparse.Namespace) -> int:
    """Open the report, or print its path when no browser is available."""
    import webbrowser

    from sim.output.safe_text import printable

    path = report_of(Path(args.folder)).resolve()
    if not args.print_only and _has_browser():
        try:
            if webbrowser.open(path.as_uri()):
                print(f"opened {printable(path, newlines=False)}", file=sys.stderr)
                return 0
        except webbrowser.Error:
            pass
    print(printable(path, newlines=False))
    return 0


def _has_browser() -> bool:
    """Whether :mod:`webbrowser` knows a browser to start (not a text-mode one,
    and not under CI, where no one would see it)."""
    import os
    import webbrowser

    if os.environ.get("CI"):
        return False

    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return False
    return not isinstance(browser, webbrowser.GenericBrowser) or browser.name not in (
        "www-browser", "links", "elinks", "lynx", "w3m")
