"""The doors of issue 41: one generated hostile case of each command and flag
the README documents beyond ``run``/``sweep``/``compare`` scenarios (those
are the ``scenario`` and ``cli`` surfaces of ``benchmarks/fuzz_campaign.py``).

Each door is a function ``door(rng, lab) -> list[Finding]``: it draws one
case from ``rng`` (a :class:`random.Random`), runs the command in this
process inside ``lab`` (a :class:`Lab`: a work folder with a bystander
results folder and small trace folders made once), and returns what the
detectors of :mod:`benchmarks.fuzz.checks` found. :data:`DOORS` lists them
with their default case counts; the campaign and ``tests/test_fuzz_doors.py``
call the same functions.

Doors: ``otel`` (``run``/``live --otel`` to hostile targets), ``project``
(``[tool.sim]`` of a generated ``pyproject.toml``, by ``run NAME`` and
``scenarios``), ``sim_out`` (``$SIM_OUT``), ``summary_md`` (``compare
--summary-md``, hostile targets, a full disk, scenario names with markup),
``view``, ``scenarios`` (headers with terminal escapes and markup), ``cost``
(``--model``/``--prices``/price flags), ``tune``, ``replay``, ``calibrate``,
``importers`` (every trace format, values aimed at tool and model names and
token counts).
"""

from __future__ import annotations

import copy
import errno
import json
import os
import random
import shutil
import stat
import time
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from benchmarks.fuzz.checks import (
    RESULT_FILES,
    Finding,
    Ran,
    calls_nonsense,
    digest,
    escapes,
    leftovers,
    run_cli,
    short,
    tracebacks,
    untouched,
    whole,
)

REPO = Path(__file__).resolve().parents[2]
BOUNDED = REPO / "scenarios" / "bounded.yaml"
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
ESC = "\x1b[31mRED\x1b[0m"
HOSTILE_TEXT = [SCRIPT, IMG, ESC, "a\x07b", "", " ", "x" * 300, "é\u202eevil", "../../etc",
                "None", "$(rm -rf /)", "%s%n", "a\nb"]
"""Text values aimed at names: markup, terminal escapes, empty, long, odd."""


class Lab:
    """A case's surroundings, made once per work folder: ``work``, a
    bystander results folder (another run's, which no case may change) and
    small trace folders (``traces(n)``: ``n`` runs written by sim's trace
    writer, models and tool names drawn from the hostile text)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self._count = 0

    def fresh(self, stem: str = "c") -> Path:
        """A new empty folder under ``work`` for one case."""
        self._count += 1
        folder = self.work / f"{stem}{self._count}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder

    def device(self, case: Path) -> Path | None:
        """A stand-in for ``/dev/null`` in ``case``: a character device of the
        same numbers (made as root), so that a command which replaces its
        target by a rename replaces this one, never the machine's (issue 41:
        ``run --otel /dev/null`` did); None where devices cannot be made."""
        path = case / "null"
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except OSError:
            return None
        return path

    @staticmethod
    def device_kept(path: Path) -> list[Finding]:
        """Data lost: the stand-in device is no longer a device."""
        try:
            if stat.S_ISCHR(path.lstat().st_mode):
                return []
        except OSError:
            pass
        return [Finding("data_lost", "device-replaced",
                        f"the device {path} was replaced or removed (as /dev/null would be)")]

    @cached_property
    def bystander(self) -> Path:
        """Another run's results folder (``run bounded --tasks 3``)."""
        out = self.work / "bystander"
        ran = run_cli(["run", str(BOUNDED), "--tasks", "3", "--workers", "1", "--quiet",
                       "--format", "json", "--out", str(out), "--force"])
        assert ran.status == 0, ran.stderr
        return out

    def guard(self) -> dict[str, str]:
        """The bystander's files, to compare after a case."""
        return digest([self.bystander])

    def check_guard(self, before: dict[str, str]) -> list[Finding]:
        return untouched(before, [self.bystander], "another run's results folder")

    def traces(self, rng: random.Random, runs: int, hostile: bool, limits: bool = True
               ) -> Path:
        """A trace folder of ``runs`` runs (0 to 12 calls each), written by
        sim's trace writer; with ``hostile``, model and tool names drawn from
        :data:`HOSTILE_TEXT`; with ``limits``, some runs state a step limit
        (``tune`` then calibrates a world: 40 s and more for 10 runs)."""
        from datetime import UTC, datetime, timedelta

        from sim.traces.model import CallRecord, RunRecord, ToolCallRecord, Usage
        from sim.traces.writer import write_runs

        folder = self.fresh("traces")
        start = datetime(2025, 1, 1, tzinfo=UTC)
        records = []
        for i in range(runs):
            model = rng.choice([*HOSTILE_TEXT[:4], "gpt-4o", "x"]) if hostile else \
                rng.choice(["gpt-4o", "claude-3-5-sonnet-20241022"])
            tool = rng.choice([SCRIPT, ESC, "t", "bash"]) if hostile else "t"
            calls = [CallRecord(Usage(input_tokens=rng.choice([10, 100, 5_000]) * (k + 1),
                                      output_tokens=rng.choice([1, 10, 600])),
                                tool_calls=[ToolCallRecord(name=tool, id=f"c{k}",
                                                           arguments="{}")],
                                cost_usd=rng.choice([None, 0.0, 0.01]), model=model)
                     for k in range(rng.randint(0, 12))]
            resolved = rng.choice([True, True, False, None])
            records.append(RunRecord(
                run_id=f"r{i}", source="sim", file="fuzz", model=model, calls=calls,
                resolved=resolved,
                exit=None if resolved is None else ("done" if resolved else "error"),
                started_at=start + timedelta(days=i),
                step_limit=rng.choice([None, None, 12, 50]) if limits else None))
        write_runs(folder, records)
        return folder


def _tainted(*values: Any) -> bool:
    """Whether any value holds markup or a control byte (so an output that
    holds them took them from the input)."""
    from benchmarks.fuzz.checks import CONTROL

    text = " ".join(str(v) for v in values)
    return "<script" in text.lower() or "<img" in text.lower() or bool(CONTROL.search(text))


def _reports(folder: Path) -> list[tuple[str, str]]:
    """(name, text) of the Markdown reports under ``folder``."""
    if not folder.is_dir():
        return []
    return [(str(p), p.read_text(encoding="utf-8", errors="replace"))
            for p in sorted(folder.rglob("*.md"))]


# ---------------------------------------------------------------------- otel

def _live(rng: random.Random, case: Path, extra: list[str]) -> Ran:
    """``live TASKS.yaml`` (one task, the shell tool) against the test suite's
    fake provider answering "DONE", with ``extra`` flags."""
    import sys

    sys.path.insert(0, str(REPO / "tests"))
    from fake_providers import FakeProvider, Reply

    tasks = case / "tasks.yaml"
    tasks.write_text(yaml.safe_dump({"tasks": [
        {"id": "t", "instruction": "say DONE", "tools": ["shell"], "workdir": "."}]}))
    provider = rng.choice(["openai", "anthropic"])
    with FakeProvider([Reply([("text", "DONE")], input_tokens=20, output_tokens=2)] * 3,
                      lifetime_s=30) as server:
        url = server.openai_url if provider == "openai" else server.base_url
        argv = ["live", str(tasks), "--provider", provider, "--model",
                "gpt-4o" if provider == "openai" else "claude-sonnet-4-20250514",
                "--base-url", url, "--scenario", str(BOUNDED), "--approve", "all", *extra]
        return run_cli(argv, env={"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"})

def _targets(lab: Lab, case: Path, rng: random.Random) -> tuple[str, str]:
    """(kind, path) of a hostile output file target."""
    kind = rng.choice(["folder", "devnull", "bystander", "read-only parent", "long name",
                       "nul", "missing parent", "inside --out", "plain", "empty",
                       "existing file"])
    if kind == "folder":
        (case / "dir").mkdir()
        return kind, str(case / "dir")
    if kind == "devnull":
        device = lab.device(case)
        return (kind, str(device)) if device else ("plain", str(case / "spans.json"))
    if kind == "bystander":
        return kind, str(lab.bystander / rng.choice(["summary.json", "results.parquet",
                                                     "report.md"]))
    if kind == "read-only parent":
        (case / "ro").mkdir()
        (case / "ro").chmod(0o500)
        return kind, str(case / "ro" / "x.json")
    if kind == "long name":
        return kind, str(case / ("n" * rng.choice([256, 300, 5000]) + ".json"))
    if kind == "nul":
        return kind, str(case / "a\x00b.json")
    if kind == "missing parent":
        return kind, str(case / "no" / "such" / "x.json")
    if kind == "inside --out":
        return kind, str(case / "out" / rng.choice(["summary.json", "spans.json"]))
    if kind == "empty":
        return kind, ""
    if kind == "existing file":
        (case / "keep.txt").write_text("keep me")
        return kind, str(case / "keep.txt")
    return kind, str(case / "spans.json")


def otel(rng: random.Random, lab: Lab) -> list[Finding]:
    """``run SCENARIO --otel TARGET`` (or ``live``, against a port where no
    server listens) with a hostile TARGET: exit 0 or 2, never a traceback;
    another run's files unchanged; exit 0 means the results folder is whole
    and TARGET holds OTLP JSON; a refused target leaves no half folder."""
    case = lab.fresh("otel")
    kind, target = _targets(lab, case, rng)
    before = lab.guard()
    out = case / "out"
    if rng.random() < 0.8:
        argv = ["run", str(BOUNDED), "--tasks", str(rng.choice([1, 2, 3])), "--workers", "1",
                "--quiet", "--format", "json", "--out", str(out), "--otel", target]
        ran = run_cli(argv)
    else:
        ran = _live(rng, case, ["--out", str(out), "--quiet", "--format", "json", "--otel",
                                target])
        argv = ran.argv
    found = tracebacks(ran) + lab.check_guard(before) + leftovers(case)
    if kind == "devnull":
        found += lab.device_kept(Path(target))
    if found:
        return [Finding(f.column, "otel-target" if f.check in ("device-replaced", "bystander")
                        or (f.check == "traceback" and "otel" in f.detail.split("\n", 1)[-1])
                        else f.check,
                        f"[{kind}] {f.detail}") for f in found]
    if ran.status == 0:
        if argv[0] == "run" and not whole(out):
            found.append(Finding("data_lost", "otel-target",
                                 f"[{kind}] exit 0 without the whole results folder"))
        if kind in ("folder", "bystander", "empty", "nul", "long name"):
            found.append(Finding("nonsense", "otel-target",
                                 f"[{kind}] --otel {target[:80]!r} accepted (exit 0)"))
        elif kind != "devnull":
            try:
                json.loads(Path(target).read_text().splitlines()[0])
            except (OSError, ValueError, IndexError) as error:
                found.append(Finding("data_lost", "otel-target",
                                     f"[{kind}] exit 0 but {target[:80]} holds no OTLP JSON "
                                     f"({error})"))
    elif out.exists() and not whole(out) and any(out.iterdir()):
        found.append(Finding("data_lost", "otel-target",
                             f"[{kind}] exit {ran.status} left a half results folder "
                             f"{sorted(p.name for p in out.iterdir())}"))
    return found


# ------------------------------------------------------------------- project
TOML_VALUES = [
    '"results"', '""', "5", "true", "1.5", "[]", '["worlds"]', '["worlds", "worlds"]',
    '"worlds"', '"no/such/folder"', "DEVICE", '"a\\u0000b"', '"\\u001b[31m"',
    "{a = {b = {c = 1}}}", '"' + "n" * 300 + '"', "[1, 2]", '[["worlds"]]',
    "[" + ", ".join(f'"w{i}"' for i in range(5000)) + "]", '"../.."', "nan", "inf",
    '"pyproject.toml"', "BYSTANDER",
]
"""Values given to ``[tool.sim].out`` and ``.scenarios``: odd types, NUL and
ESC escapes, deep tables, a huge array, paths that do not exist, a file;
``BYSTANDER`` is another run's results folder, ``DEVICE`` a stand-in of
``/dev/null`` (:meth:`Lab.device`)."""


def project(rng: random.Random, lab: Lab) -> list[Finding]:
    """A folder whose ``pyproject.toml`` has a generated ``[tool.sim]``
    (sometimes broken TOML, a NUL byte, an unknown key), its scenario
    ``worlds/mine.yaml``: ``run mine`` (no ``--out``) and ``scenarios`` exit
    0 or 2, never a traceback; another run's folder unchanged; a wrong type
    under ``out`` or ``scenarios`` is refused, not silently ignored; exit 0
    of ``run`` leaves a whole folder."""
    case = lab.fresh("proj")
    (case / "worlds").mkdir()
    shutil.copy(BOUNDED, case / "worlds" / "mine.yaml")
    table: dict[str, str] = {}
    for key in ("out", "scenarios"):
        if rng.random() < 0.7:
            value = rng.choice(TOML_VALUES)
            if value == "BYSTANDER":
                value = '"' + str(lab.bystander) + '"'
            elif value == "DEVICE":
                device = lab.device(case)
                value = f'"{device}"' if device else '"no/such/folder"'
            table[key] = value
    if rng.random() < 0.1:
        table["outt"] = '"x"'
    body = "".join(f"{k} = {v}\n" for k, v in table.items())
    text = f'[project]\nname = "p"\n\n[tool.sim]\n{body}'
    shape = rng.random()
    if shape < 0.05:
        text = text[: rng.randrange(len(text))]
    elif shape < 0.1:
        text = text.replace("name", "na\x00me")
    elif shape < 0.15:
        text = '[tool]\nsim = "x"\n'
    elif shape < 0.2:
        text = "[tool.sim]\n" + "".join(f"[tool.sim.{'a.' * 200}b]\n")
    (case / "pyproject.toml").write_text(text, encoding="utf-8")
    before = lab.guard()
    found: list[Finding] = []
    command = rng.choice(["run", "scenarios"])
    argv = (["run", "mine", "--tasks", "2", "--workers", "1", "--quiet", "--format", "json"]
            if command == "run" else ["scenarios", "--format", rng.choice(["table", "json"])])
    began = time.time()
    ran = run_cli(argv, cwd=case)
    found += tracebacks(ran) + lab.check_guard(before)
    if (case / "null").exists() or (case / "null").is_symlink():
        found += lab.device_kept(case / "null")
    if ran.status == 0:
        used = ("out", "scenarios") if command == "run" else ("scenarios",)
        wrong = [k for k in used if k in table and not _toml_ok(k, table[k])]
        if wrong:
            found.append(Finding("nonsense", "tool-sim",
                                 f"[tool.sim] {', '.join(f'{k} = {table[k][:60]}' for k in wrong)}"
                                 f" accepted by {command} (exit 0)"))
        if command == "run":
            # the results go under [tool.sim] out, relative to the project (it may be outside)
            root = case if "out" not in table else _out_root(case, table["out"])
            made = [p.parent for p in root.rglob("summary.json")
                    if p.stat().st_mtime >= began - 1.0]  # this run's, not an earlier case's
            if not made or not any(whole(p) for p in made):
                found.append(Finding("data_lost", "tool-sim",
                                     f"run exit 0 without a whole results folder ({table})"))
    return [Finding(f.column, "tool-sim" if f.check == "bystander" or
                    (f.check == "traceback" and "embedded null byte" in f.detail) else f.check,
                    f"{f.detail}\npyproject.toml: {text[:300]!r}") for f in found]


def _out_root(case: Path, value: str) -> Path:
    """Where ``[tool.sim] out = VALUE`` puts a project's results (relative to
    the project folder ``case``); ``case`` when the value is not a path."""
    import tomllib

    try:
        out = tomllib.loads(f"v = {value}")["v"]
    except (tomllib.TOMLDecodeError, ValueError):
        return case
    return (case / out).resolve() if isinstance(out, str) and out and "\x00" not in out \
        else case


def _toml_ok(key: str, value: str) -> bool:
    """Whether a ``[tool.sim]`` value is one sim may accept: a non-empty
    string (or, for scenarios, a list of them) without NUL (a folder that
    does not exist may be accepted, as ``$PATH`` does)."""
    import tomllib

    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return True
    items = parsed if key == "scenarios" and isinstance(parsed, list) else [parsed]
    if not items and key == "scenarios":
        return True
    return all(isinstance(item, str) and "\x00" not in item and item != "" for item in items)


# ------------------------------------------------------------------- SIM_OUT
def sim_out(rng: random.Random, lab: Lab) -> list[Finding]:
    """``run SCENARIO`` without ``--out`` under a hostile ``$SIM_OUT`` (empty,
    a file, /dev/null, another run's folder or file, terminal escapes, a long
    name, missing parents): exit 0 or 2, never a traceback; another run's
    folder unchanged; exit 0 writes a whole folder under it; no raw escape
    from it on the terminal."""
    case = lab.fresh("simout")
    (case / "file.txt").write_text("keep")
    device = lab.device(case)
    value = rng.choice(["", str(case / "file.txt"), str(device or case / "file.txt"),
                        str(lab.bystander),
                        str(lab.bystander / "summary.json"), str(case / ESC),
                        str(case / ("n" * 300)), str(case / "no" / "such"),
                        str(case / "ok"), "~", str(case / SCRIPT)])
    before = lab.guard()
    ran = run_cli(["run", str(BOUNDED), "--tasks", "2", "--workers", "1", "--quiet"],
                  env={"SIM_OUT": value, "HOME": str(case / "home")}, cwd=case)
    found = tracebacks(ran) + lab.check_guard(before) + leftovers(case)
    if device is not None:
        found += lab.device_kept(device)
    found += escapes(ran.stdout + ran.stderr, _tainted(value), "stdout/stderr",
                     markup=False)
    if ran.status == 0:
        place = case / value.replace("~", str(case / "home"), 1) if value else case / "reports"
        made = [p.parent for p in place.rglob("summary.json")] if place.is_dir() else []
        if value in (str(device), str(case / "file.txt"), str(lab.bystander / "summary.json")):
            found.append(Finding("nonsense", "sim-out",
                                 f"SIM_OUT={value!r} (not a folder) accepted (exit 0)"))
        elif value == str(lab.bystander):
            pass  # a subfolder of another run's folder: the guard says if it changed
        elif not any(whole(p) for p in made):
            found.append(Finding("data_lost", "sim-out",
                                 f"exit 0 without a whole folder under SIM_OUT={value[:80]!r}"))
    return [Finding(f.column, "sim-out" if f.check == "bystander" else "long-name"
                    if f.check == "traceback" and "File name too long" in f.detail else f.check,
                    f"SIM_OUT={value[:100]!r}: {f.detail}") for f in found]


# ----------------------------------------------------------------- summary-md
def summary_md(rng: random.Random, lab: Lab) -> list[Finding]:
    """``compare BASE CANDIDATE --summary-md TARGET`` with a hostile TARGET,
    sometimes a full disk (ENOSPC on the append) and scenario names with
    markup or escapes: exit 0/1/2/3, never a traceback; another run's files
    unchanged but for an append; no raw markup or escape from the names in
    the summary or the report; a failing summary leaves the report whole or
    nothing."""
    from unittest import mock

    case = lab.fresh("smd")
    kind, target = _targets(lab, case, rng)
    name = rng.choice(["bounded", SCRIPT, IMG, ESC, "a|b", "x" * 200])
    doc = yaml.safe_load(BOUNDED.read_text())
    doc["name"] = "base"
    doc["description"] = rng.choice(["plain", SCRIPT, ESC, IMG])
    base = case / "base.yaml"
    base.write_text(yaml.safe_dump(doc, allow_unicode=True))
    doc["name"] = name
    doc["harness"]["budgets"]["steps"] = rng.choice([50, 20, 5])
    candidate = case / "cand.yaml"
    candidate.write_text(yaml.safe_dump(doc, allow_unicode=True))
    before = lab.guard()
    prior = Path(target).read_bytes() if kind == "bystander" else b""
    out = case / "cmp"
    argv = ["compare", str(base), str(candidate), "--tasks", str(rng.choice([3, 5])),
            "--workers", "1", "--quiet", "--out", str(out), "--summary-md", target]
    full = rng.random() < 0.2
    if full:
        def enospc(*args: Any, **kwargs: Any) -> Any:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        with mock.patch("sim.output.ci.open", enospc, create=True):
            ran = run_cli(argv)
    else:
        ran = run_cli(argv)
    kind = kind + (" + ENOSPC" if full else "")
    found = tracebacks(ran) + leftovers(case)
    if kind.startswith("devnull"):
        found += lab.device_kept(Path(target))
    changed = lab.check_guard(before)
    if changed and kind.startswith("bystander"):
        # an append to a named Markdown file is what --summary-md does; into
        # another run's JSON or Parquet it breaks that file
        now = Path(target).read_bytes() if Path(target).exists() else b""
        if not now.startswith(prior) or not target.endswith(".md"):
            changed = [Finding("data_lost", "summary-md-target",
                               f"--summary-md into another run's {Path(target).name}: "
                               f"exit {ran.status}")]
        else:
            changed = []
    found += changed
    tainted = _tainted(name, doc["description"])
    texts = _reports(out) + ([("summary-md", Path(target).read_text(errors="replace"))]
                             if kind.startswith("plain") and Path(target).is_file() else [])
    for where, text in texts:
        found += escapes(text, tainted, where)
    found += escapes(ran.stdout, tainted, "stdout", markup=False)
    if ran.status in (0, 1, 3) and kind.split(" ")[0] in ("folder", "nul", "long name",
                                                           "empty"):
        found.append(Finding("nonsense", "summary-md-target",
                             f"--summary-md {target[:60]!r} ({kind}) accepted"))
    if out.exists() and any(out.iterdir()) and not (out / "report.md").exists():
        found.append(Finding("data_lost", "summary-md-target",
                             f"a half comparison folder {sorted(p.name for p in out.iterdir())}"))
    return [Finding(f.column, "summary-md-target" if f.check == "bystander" or
                    (f.check == "traceback" and ("append_summary" in f.detail
                                                 or "_writable" in f.detail)) else f.check,
                    f"[{kind}, name {short(name)}] {f.detail}") for f in found]


# ---------------------------------------------------------------------- view
def view(rng: random.Random, lab: Lab) -> list[Finding]:
    """``view [--print] PATH`` of a results folder, a file, a missing path, a
    folder without its report, a name with escapes or markup, a NUL byte:
    exit 0 or 2, never a traceback (the browser is never opened); no raw
    escape from the path on stdout."""
    from unittest import mock

    case = lab.fresh("view")
    kind = rng.choice(["results", "file", "missing", "no report", "escape name", "nul",
                       "empty folder", "report is a folder", "symlink loop", "tune"])
    path: Path | str
    if kind == "results":
        path = lab.bystander
    elif kind == "file":
        path = lab.bystander / "summary.json"
    elif kind == "missing":
        path = case / "missing"
    elif kind == "no report":
        path = case / "r"
        shutil.copytree(lab.bystander, path)
        (path / rng.choice(["report.html", "summary.json"])).unlink()
    elif kind == "escape name":
        path = case / rng.choice([ESC, SCRIPT.replace("/", "_"), "a\x07b"])
        shutil.copytree(lab.bystander, path)
    elif kind == "nul":
        path = str(case) + "/a\x00b"
    elif kind == "empty folder":
        path = case
    elif kind == "report is a folder":
        path = case / "r"
        (path / "report.html").mkdir(parents=True)
    elif kind == "symlink loop":
        path = case / "loop"
        os.symlink(path, path)
    else:
        path = case / "t"
        path.mkdir()
        (path / "tune.json").write_text(rng.choice(["{}", "[]", "null", "{", '{"a": 1}']))
    argv = ["view", *(["--print"] if rng.random() < 0.7 else []), str(path)]
    with mock.patch("webbrowser.open", return_value=True):
        ran = run_cli(argv)
    found = tracebacks(ran)
    found += escapes(ran.stdout + ran.stderr, _tainted(str(path)), "stdout/stderr",
                     markup=False)
    return [Finding(f.column, f.check, f"[{kind}] {f.detail}") for f in found]


# ----------------------------------------------------------------- scenarios
def scenarios(rng: random.Random, lab: Lab) -> list[Finding]:
    """``scenarios`` in a folder whose ``scenarios/`` holds files with
    generated headers (terminal escapes, markup, NUL, bad UTF-8, a list
    document, a long line, an escape in the file name), sometimes under a
    hostile ``$SIM_SCENARIOS``: exit 0 or 2, never a traceback; no raw escape
    from the files on the terminal."""
    case = lab.fresh("scen")
    folder = case / "scenarios"
    folder.mkdir()
    tainted = False
    for i in range(rng.randint(1, 4)):
        header = rng.choice([*HOSTILE_TEXT, "plain"])
        description = rng.choice([*HOSTILE_TEXT, "plain"])
        tainted |= _tainted(header, description)
        shape = rng.random()
        name = rng.choice([f"s{i}", f"{ESC}{i}", f"x{i}\x07", f"s {i}"])
        tainted |= _tainted(name)
        path = folder / f"{name}.yaml"
        if shape < 0.1:
            path.write_bytes(b"# \xff\xfe bad utf-8\nname: x\n")
        elif shape < 0.15:
            path.write_text("- a\n- b\n")
        elif shape < 0.2:
            path.write_text("name: [unclosed\n")
        else:
            text = "".join(f"# {line}\n" for line in header.split("\n"))
            text += yaml.safe_dump({"name": name, "description": description},
                                   allow_unicode=True)
            text += "harness: {}\n"
            path.write_text(text, encoding="utf-8")
    env: dict[str, str | None] = {}
    if rng.random() < 0.3:
        env["SIM_SCENARIOS"] = rng.choice(["", str(case / "no"), ":::",
                                           str(folder / "s0.yaml"), str(folder)])
    ran = run_cli(["scenarios", "--format", rng.choice(["table", "json"])], env=env, cwd=case)
    found = tracebacks(ran) + escapes(ran.stdout + ran.stderr, tainted,
                                          "scenarios output", markup=False)
    return [Finding(f.column, f.check, f"{f.detail}\nfiles: "
                    f"{[p.name for p in folder.iterdir()]}") for f in found]


# ---------------------------------------------------------------------- cost
def cost(rng: random.Random, lab: Lab) -> list[Finding]:
    """``cost`` with generated ``--model``/``--provider``/``--prices`` and
    price flags: exit 0 or 2, never a traceback; exit 0 gives finite,
    non-negative dollars, names the ``--model`` asked for (not another one),
    and prices no model the catalogue does not know without price flags; no
    raw escape from the model name on stdout."""
    model = rng.choice([None, None, "gpt-4o", "claude-sonnet-4-20250514", "nope-model-x",
                        SCRIPT, ESC, "", "gpt-4o\x00", "x" * 500])
    def odd(good: str, *bad: str) -> str:
        return rng.choice(bad) if rng.random() < 0.15 else good

    argv = ["cost", "--steps", odd("10", "1", "0", "-1", "nan", "1e9", "x", "100000"),
            "--prefix", odd("100", "0", "-5", "1e308", "nan"),
            "--per-step", odd("10", "0", "-1", "inf"), "--output", odd("5", "0", "-1")]
    if model is not None:
        argv += ["--model", model]
    if rng.random() < 0.3:
        argv += ["--provider", rng.choice(["openai", "anthropic", "nope", "", SCRIPT])]
    prices = rng.random() < (0.4 if model is not None else 0.9)
    if prices:
        argv += ["--prices", odd("seed001", "nope", "", ESC)]
    flags = rng.random() < 0.3
    if flags:
        argv += [rng.choice(["--price-in", "--price-out", "--price-cache-read"]),
                 rng.choice(["3", "0", "-1", "nan", "inf", "1e308"])]
    if rng.random() < 0.3:
        argv += ["--cache", rng.choice(["none", "append-only", "expired"])]
    if rng.random() < 0.2:
        argv += ["--cache-ttl", rng.choice(["5m", "1h", "2h"])]
    if rng.random() < 0.2:
        argv += ["--thinking", odd("100", "-1", "nan", "1e13")]
    if rng.random() < 0.2:
        argv += [rng.choice(["--price-cache-write", "--price-thinking"]),
                 odd("3", "-1", "nan", "inf", "1e308")]
    if rng.random() < 0.3:
        argv += ["--format", "json"]
    ran = run_cli(argv)
    found = tracebacks(ran) + escapes(ran.stdout + ran.stderr, _tainted(*argv),
                                      "stdout/stderr", markup=False)
    found += _cost_output(ran.stdout if ran.status == 0 else "", model, prices, flags)
    return [Finding(f.column, f.check, f"{f.detail}\n    argv: {[short(a) for a in argv]}")
            for f in found]


def _cost_output(text: str, model: str | None, prices: bool, flags: bool) -> list[Finding]:
    """Accepted nonsense in ``cost`` output on exit 0 (``text`` empty
    otherwise)."""
    found: list[Finding] = []
    if text:
        for token in ("nan", "inf", "-$", "$-"):
            if token in text.lower().replace("info", "").replace("inflation", ""):
                found.append(Finding("nonsense", "cost-value", f"{token!r} in the output"))
                break
        if model and prices and model not in text:
            found.append(Finding("nonsense", "cost-model",
                                 f"--model {short(model)} beside --prices: the output names "
                                 f"another model"))
        elif model and model not in text and not _control(model):
            found.append(Finding("nonsense", "cost-model",
                                 f"--model {short(model)}: the output does not name it"))
        if model in ("nope-model-x", SCRIPT, ESC, "") and not prices and not flags:
            found.append(Finding("nonsense", "cost-unknown",
                                 f"a cost for --model {short(model)} the catalogue does not "
                                 f"know"))
    return found


def _control(text: str) -> bool:
    from benchmarks.fuzz.checks import CONTROL

    return bool(CONTROL.search(text))


# ---------------------------------------------------------------------- tune
def tune(rng: random.Random, lab: Lab) -> list[Finding]:
    """``tune TRACES`` on a generated trace folder of 1-10 runs (hostile model
    and tool names sometimes) with odd ``--where``, ``--candidates``,
    ``--knobs``, ``--keep-successes``, ``--objective``, ``--forecast-runs``:
    exit 0, 2 or 3, never a traceback; another run's folder unchanged; exit 0
    writes tune.json and report.md; no raw markup or escape from the names
    in report.md or on stdout."""
    hostile = rng.random() < 0.5
    runs = rng.randint(1, 10)
    traces = lab.traces(rng, runs, hostile, limits=runs <= 5)
    out = traces.parent / (traces.name + "-tune")
    argv = ["tune", str(traces), "--out", str(out), "--quiet", "--force"]
    if rng.random() < 0.5:
        argv += ["--where", rng.choice(["model=gpt-4o", f"model={SCRIPT}", "started>=garbage",
                                        "nosuch=1", "steps>=-1", "=", "model", "model=\x00",
                                        "started>=2025-01-03", "resolved=true", ""])]
    if rng.random() < 0.5:
        argv += ["--candidates", rng.choice(["tokens=1.2M,1.5M", "steps=30,40", "steps=-5",
                                             "steps=nan", "foo=1", "tokens=", "money=1e308",
                                             "steps=0", "=", "steps=1,1,1", "detector=x"])]
    if rng.random() < 0.3:
        argv += ["--knobs", rng.choice(["tokens", "steps,money", "nope", "", "detector",
                                        "tokens,tokens"])]
    if rng.random() < 0.3:
        argv += ["--keep-successes", rng.choice(["0.9", "nan", "2", "-1", "0", "1", "x"])]
    if rng.random() < 0.3:
        argv += ["--objective", rng.choice(["cost", "p95-cost", "time"])]
    argv += ["--forecast-runs", rng.choice(["1", "0", "-1", "x"]) if rng.random() < 0.2
             else rng.choice(["20", "50"])]
    if rng.random() < 0.2:
        argv.append("--pooled")
    before = lab.guard()
    ran = run_cli(argv)
    found = tracebacks(ran, {0, 2, 3}) + lab.check_guard(before) + leftovers(traces.parent)
    tainted = hostile or _tainted(*argv)
    for where, text in _reports(out):
        found += escapes(text, tainted, where)
    found += escapes(ran.stdout, tainted, "stdout", markup=False)
    if ran.status == 0 and not whole(out, frozenset({"tune.json", "report.md"})):
        found.append(Finding("data_lost", "tune-out", "exit 0 without tune.json and report.md"))
    return found


# -------------------------------------------------------------------- replay
def replay(rng: random.Random, lab: Lab) -> list[Finding]:
    """``replay TRACES SCENARIO`` on a generated trace folder with odd
    ``--set``, ``--polling``, ``--tool-error-kind``, ``--after-intervention``:
    exit 0 or 2, never a traceback; exit 0 writes the whole results folder;
    no raw markup or escape from the trace's names in report.md or stdout."""
    hostile = rng.random() < 0.5
    traces = lab.traces(rng, rng.randint(1, 10), hostile)
    out = traces.parent / (traces.name + "-replay")
    argv = ["replay", str(traces), rng.choice(["bounded", str(BOUNDED), "naive"]),
            "--out", str(out), "--quiet", "--force"]
    if rng.random() < 0.5:
        argv += ["--set", rng.choice(["harness.budgets.tokens=100000", "harness.budgets.steps=2",
                                      "harness.budgets.steps=-1", "harness.budgets.tokens=nan",
                                      "harness.nope=1", "=", "harness.budgets.money=0"])]
    if rng.random() < 0.3:
        argv += ["--polling", rng.choice(["t", "", SCRIPT, ESC])]
    if rng.random() < 0.3:
        argv += ["--tool-error-kind", rng.choice(["validation", "transient", "fatal"])]
    if rng.random() < 0.3:
        argv += ["--after-intervention", rng.choice(["continue", "stop"])]
    if rng.random() < 0.3:
        argv += ["--format", "json"]
    before = lab.guard()
    ran = run_cli(argv)
    found = tracebacks(ran) + lab.check_guard(before) + leftovers(traces.parent)
    tainted = hostile or _tainted(*argv)
    for where, text in _reports(out):
        found += escapes(text, tainted, where)
    found += escapes(ran.stdout, tainted, "stdout", markup=False)
    if ran.status == 0 and not whole(out, RESULT_FILES):
        found.append(Finding("data_lost", "replay-out", "exit 0 without the whole folder"))
    return found


# ----------------------------------------------------------------- calibrate
def calibrate(rng: random.Random, lab: Lab) -> list[Finding]:
    """``calibrate TRACES --out W.yaml`` (small: no search, no ladder) on a
    generated folder of 8-14 runs with odd ``--name``, ``--folds``,
    ``--classes``, ``--sample``: exit 0, 1 or 2, never a traceback; exit 0
    (or 1, a rejected fit) writes a scenario that loads; no raw markup or
    escape from the names in its report."""
    from sim.bad_input import InputError
    from sim.scenario.model import load_scenario

    hostile = rng.random() < 0.5
    traces = lab.traces(rng, rng.randint(8, 14), hostile)
    world = traces.parent / (traces.name + ".yaml")
    report = traces.parent / (traces.name + "_calibration")
    argv = ["calibrate", str(traces), "--out", str(world), "--quiet", "--evaluations", "0",
            "--no-ladder", "--folds", rng.choice(["0", "1", "-1", "100"]) if rng.random() < 0.2
            else rng.choice(["2", "3"]),
            "--seed", "1"]
    if rng.random() < 0.4:
        argv += ["--name", rng.choice(["w", SCRIPT, ESC, "", "../x", "a b", "x" * 300])]
    if rng.random() < 0.3:
        argv += ["--classes", rng.choice(["1", "2", "auto", "0", "-1", "x"])]
    if rng.random() < 0.2:
        argv += ["--sample", rng.choice(["5", "0", "-1"])]
    before = lab.guard()
    ran = run_cli(argv)
    found = tracebacks(ran) + lab.check_guard(before) + leftovers(traces.parent)
    tainted = hostile or _tainted(*argv)
    for where, text in _reports(report):
        found += escapes(text, tainted, where)
    found += escapes(ran.stdout, tainted, "stdout", markup=False)
    if ran.status in (0, 1):
        try:
            load_scenario(world)
        except (InputError, OSError) as error:
            found.append(Finding("nonsense", "calibrate-world",
                                 f"exit {ran.status} but the world written does not load: "
                                 f"{str(error)[:300]}"))
    return found


# --------------------------------------------------------------------- flags
SCHEDULERS = ["local", "", "x", "tcp://127.0.0.1:9", "local:2", "\x00"]
"""``--scheduler`` values: the default, empty, nonsense, an address where no
Dask scheduler listens (10 s to give up), a NUL byte."""


def flags(rng: random.Random, lab: Lab) -> list[Finding]:
    """The flags no other surface reaches, one to three at a time with odd
    values: ``run --traces/--resume/--scheduler/--allow-plugins/-v/-vv``,
    ``capacity --target-p95-wait``, ``compare --junit/--base-set/
    --candidate-set/--pairing/--save-results``, ``traces import --strict/
    --workers/--scheduler/--format/--force``, ``traces summary --format``,
    ``live --checkpoints/--approve/--no-stream``, ``calibrate --report/--by/
    --search-runs/--format``, ``tune --scenario/--seed/--format``, ``replay
    --workers/--scheduler``, ``--version``, ``--help``: exit 0-3, never a
    traceback; another run's folder and a device target unchanged; no
    temporary file left; exit 0 of run/capacity/replay writes a whole folder."""
    case = lab.fresh("flags")
    out = case / "out"
    command = rng.choice(["run", "run", "capacity", "compare", "import", "summary", "live",
                          "calibrate", "tune", "replay", "top"])
    kind, target = _targets(lab, case, rng)
    choices: dict[str, list[str]]
    if command == "run":
        argv = (["run", str(BOUNDED)] if rng.random() < 0.7
                else ["sweep", str(REPO / "scenarios" / "cached.yaml")])
        argv += ["--tasks", "2", "--workers", "1", "--quiet", "--out", str(out)]
        choices = {"--traces": [], "--resume": [], "--scheduler": SCHEDULERS,
                   "--allow-plugins": [], "-v": [], "-vv": [], "--force": [],
                   "--cost-ceiling": ["1", "nan", "-1", "x"]}
    elif command == "capacity":
        argv = ["capacity", str(REPO / "scenarios" / "capacity.yaml"), "--tasks", "3",
                "--workers", "1", "--quiet", "--out", str(out)]
        choices = {"--target-p95-wait": ["10", "0", "-1", "nan", "inf", "1e308", "x"],
                   "--traces": [], "--force": []}
    elif command == "compare":
        argv = ["compare", str(BOUNDED), str(REPO / "scenarios" / "naive.yaml"), "--tasks",
                "3", "--workers", "1", "--quiet", "--out", str(out)]
        choices = {"--junit": [target], "--base-set": ["harness.budgets.steps=5", "=", "x=1",
                                                       "harness.budgets.steps=nan"],
                   "--candidate-set": ["harness.budgets.steps=3", "harness.nope=1", ""],
                   "--pairing": ["auto", "paired", "unpaired"], "--save-results": [],
                   "--seed": ["1", "-1", "x"], "--allow-plugins": [],
                   "--set": ["harness.budgets.steps=4", "nope"],
                   "--format": ["json"], "--force": []}
    elif command in ("import", "summary"):
        traces = lab.traces(rng, rng.randint(1, 4), rng.random() < 0.5)
        if command == "import":
            argv = ["traces", "import", str(traces), "--out", str(out), "--quiet"]
            choices = {"--strict": [], "--workers": ["1", "2", "0", "-1", "x", "1000"],
                       "--scheduler": SCHEDULERS, "--format": ["json", "table"],
                       "--force": []}
        else:
            argv = ["traces", "summary", rng.choice([str(traces), str(case), target])]
            choices = {"--format": ["json", "table", "xml"]}
    elif command == "live":
        argv = ["--out", str(out), "--quiet"]
        choices = {"--checkpoints": [target], "--approve": ["ask", "all", "none"],
                   "--no-stream": [], "--format": ["json"], "--force": []}
    elif command == "calibrate":
        traces = lab.traces(rng, rng.randint(10, 12), False)
        argv = ["calibrate", str(traces), "--out", str(case / "w.yaml"), "--quiet",
                "--evaluations", "0", "--no-ladder", "--folds", "2"]
        choices = {"--report": [target], "--by": ["model", "x"],
                   "--search-runs": ["1", "0", "-1", "x"], "--format": ["json"],
                   "--workers": ["1", "0", "x"], "--scheduler": SCHEDULERS}
    elif command == "tune":
        traces = lab.traces(rng, rng.randint(1, 6), False, limits=False)
        argv = ["tune", str(traces), "--out", str(out), "--quiet", "--forecast-runs", "20"]
        choices = {"--scenario": [str(BOUNDED), "naive", target, "nope"],
                   "--seed": ["0", "-1", "x", str(2**64)], "--format": ["json"]}
    elif command == "replay":
        traces = lab.traces(rng, rng.randint(1, 6), False)
        argv = ["replay", str(traces), str(BOUNDED), "--out", str(out), "--quiet"]
        choices = {"--workers": ["1", "2", "0", "-1", "x", "300"], "--scheduler": SCHEDULERS,
                   "--format": ["json"]}
    else:
        argv = [rng.choice(["--version", "--help", "-v", "-vv"]),
                *rng.choice([[], ["scenarios"], ["nope"], ["run"], ["traces"]])]
        choices = {}
    for flag in rng.sample(sorted(choices), min(len(choices), rng.randint(1, 3))):
        argv += [flag, *([rng.choice(choices[flag])] if choices[flag] else [])]
    before = lab.guard()
    device = Path(target) if kind == "devnull" and target in argv else None
    ran = _live(rng, case, argv) if command == "live" else run_cli(argv)
    found = tracebacks(ran) + lab.check_guard(before) + leftovers(case)
    if device is not None:
        found += lab.device_kept(device)
    if ran.status == 0 and command in ("run", "capacity", "replay") and not whole(out):
        found.append(Finding("data_lost", "flags-out", "exit 0 without the whole folder"))
    return [Finding(f.column, f.check, f"[{command}, target {kind}] {f.detail}")
            for f in found]


# ----------------------------------------------------------------- importers
TARGET_VALUES: list[Any] = [None, "", 0, 123, {"a": 1}, ["x"], SCRIPT, ESC, -5, -1e30,
                            10**30, float("nan"), True, "None", " "]
"""Values aimed at the fields importers read names and counts from."""

TARGET_KEYS = ("name", "tool", "model", "function", "token", "usage", "cost", "input",
               "output", "prompt", "completion", "value", "intValue", "stringValue")
"""Substrings of the keys whose values the importers' mutations aim at."""


def import_samples() -> dict[str, tuple[str, Any]]:
    """``{format: (file suffix, document)}``: a small valid file of every
    trace format (the test suite's fixtures; a list of JSONL lines for the
    line formats)."""
    import sys

    sys.path.insert(0, str(REPO / "tests"))
    sys.path.insert(0, str(REPO))
    from test_traces_harbor import SAMPLES as HARBOR
    from test_traces_openhands import SAMPLES as OPENHANDS
    from test_traces_sources_fuzz import SEEDS
    from test_traces_sweagent import v0_doc, v1_doc

    from benchmarks.fuzz_traces import json_samples

    samples: dict[str, tuple[str, Any]] = {k: (".json", v) for k, v in json_samples().items()}
    samples.update({k: (".jsonl", v) for k, v in SEEDS.items()})
    samples.update({k: (".json", v) for k, v in {**HARBOR, **OPENHANDS}.items()})
    samples["swe-agent-1"] = (".traj", v1_doc())
    samples["swe-agent-0"] = (".traj", v0_doc())
    return json.loads(json.dumps(samples))


def _aimed(doc: Any, rng: random.Random) -> tuple[Any, list[str]]:
    """``doc`` with one to three values under keys of :data:`TARGET_KEYS`
    replaced by :data:`TARGET_VALUES`; the dotted places changed."""
    doc = copy.deepcopy(doc)
    places: list[tuple[Any, Any, str]] = []
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, dotted = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else ()
        for key, value in items:
            here = f"{dotted}.{key}"
            aimed = isinstance(key, str) and any(k.lower() in key.lower() for k in TARGET_KEYS)
            if aimed or (isinstance(node, list) and isinstance(value, str | int | float)):
                places.append((node, key, here))
            if isinstance(value, dict | list):
                stack.append((value, here))
    named = [p for p in places if isinstance(p[1], str)
             and (p[1].lower().endswith("name") or p[1] in ("stringValue", "model"))]
    changed = []
    for _ in range(rng.randint(1, 3)):
        if not places:
            break
        node, key, here = rng.choice(named if named and rng.random() < 0.6 else places)
        new = rng.choice(TARGET_VALUES)
        node[key] = new
        changed.append(f"{here}={short(new)}")
    return doc, changed


def importers(rng: random.Random, lab: Lab, samples: dict[str, tuple[str, Any]] | None = None
              ) -> list[Finding]:
    """``traces import`` of a small valid file of one format with values aimed
    at tool names, model names and token counts (null, empty, non-string,
    markup, escapes, negative, huge, NaN), then ``traces summary``: exit 0
    or 2, never a traceback; on exit 0 every reader accepts the folder, no
    tool is named ``None``/empty/a stringified object, no count is negative
    or NaN, and the summary shows no raw markup or escape."""
    from benchmarks.fuzz_traces import _dumps, run_case

    samples = samples if samples is not None else cached_samples()
    fmt = rng.choice(sorted(samples))
    suffix, sample = samples[fmt]
    doc, changed = _aimed(sample, rng)
    case = lab.fresh("imp")
    (case / "in").mkdir()
    path = case / "in" / f"{fmt}{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(_dumps(line) + "\n" for line in doc), encoding="utf-8")
    else:
        path.write_text(_dumps(doc), encoding="utf-8")
    outcome, detail = run_case(case / "in", case, 20.0)
    where = f"[{fmt}: {', '.join(changed)}]"
    if outcome in ("traceback", "hang"):
        return [Finding("tracebacks" if outcome == "traceback" else "hangs", outcome,
                        f"{where} {detail}")]
    if outcome == "nonsense":
        return [Finding("nonsense", "read-back", f"{where} {detail}")]
    if outcome != "ok":
        return []
    found = [Finding(f.column, f.check, f"{where} {f.detail}")
             for f in calls_nonsense(case / "out", True)]
    ran = run_cli(["traces", "summary", str(case / "out")])
    found += [Finding(f.column, f.check, f"{where} {f.detail}") for f in
              tracebacks(ran) + escapes(ran.stdout, _tainted(*changed), "traces summary",
                                      markup=False)]
    return found


_SAMPLE_CACHE: dict[str, tuple[str, Any]] = {}


def cached_samples() -> dict[str, tuple[str, Any]]:
    """:func:`import_samples`, made once."""
    if not _SAMPLE_CACHE:
        _SAMPLE_CACHE.update(import_samples())
    return _SAMPLE_CACHE


DOORS: dict[str, tuple[Callable[[random.Random, Lab], list[Finding]], int]] = {
    "otel": (otel, 150),
    "project": (project, 400),
    "sim_out": (sim_out, 100),
    "summary_md": (summary_md, 60),
    "view": (view, 600),
    "scenarios": (scenarios, 600),
    "cost": (cost, 1_500),
    "tune": (tune, 60),
    "replay": (replay, 100),
    "calibrate": (calibrate, 10),
    "importers": (importers, 600),
    "flags": (flags, 300),
}
"""Each door and its default case count in the campaign."""
