"""Bad input generated, not only listed: hypothesis builds scenario documents
from the field reference (:mod:`sim.scenario.docs`: every dotted path with its
type and allowed values) and runs each through the command line as a user
would. Every document must end in one of two ways:

* a clean run: exit status 0, a JSON summary on stdout, and the whole results
  folder (results.parquet, summary.json, report.md, report.html) written; or
* bad input: exit status 2 and one ``error: <file>: <dotted path>: ...``
  message whose path is a field of the reference (or a prefix of one),
  never a traceback.

Values are drawn around each field's documented bounds and beyond them:
valid values, edges, out-of-range numbers, huge and tiny numbers, infinities
and NaN, booleans and strings where numbers belong, and so on; documents mix a
few fields, list entries, a shape of ``world.difficulty``, the DES engine
and sometimes a sweep. Each run gets 2 tasks and a time limit: a hang fails
the test like a traceback does.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import re
import signal
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim.cli
from sim.scenario import docs

TIME_LIMIT_S = 60
RESULT_FILES = {"results.parquet", "summary.json", "report.md", "report.html"}
SKIPPED = {"tasks", "des.arrivals.path", "des.arrivals.kind", "sweep", "harness",
           "world", "des"}  # run size is --tasks; an arrivals file is a path on disk


def _sections() -> dict[str, list[docs.Section]]:
    by_path: dict[str, list[docs.Section]] = {}
    for section in docs.sections():
        by_path.setdefault(section.path, []).append(section)
    return by_path


SECTIONS = _sections()
KNOWN = {re.sub(r"\[\]", "", f.path) for f in docs.field_docs()}
KEYED = {re.sub(r"\[\]", "", f.path) for f in docs.field_docs()
         if f.type.startswith("mapping of strings")}
"""Fields whose keys are the user's own names (``harness.model_prices.<model>``)."""


def _bounds(allowed: str) -> tuple[float | None, float | None]:
    """The numeric bounds in an ``allowed`` text: ``> 0``, ``[0, 1]``, ..."""
    match = re.match(r"^[\[(]([-\d.e+]+), ([-\d.e+]+)[\])]", allowed)
    if match:
        return float(match.group(1)), float(match.group(2))
    match = re.match(r"^>=? ([-\d.e+]+)", allowed)
    if match:
        return float(match.group(1)), None
    match = re.match(r"^<=? ([-\d.e+]+)", allowed)
    if match:
        return None, float(match.group(1))
    return None, None


def _literals(allowed: str) -> list[str]:
    return re.findall(r"`([^`]*)`", allowed) if allowed.startswith("`") else []


BAD_SCALARS = st.sampled_from([True, False, "20", "x", "0.1", "", None, [], {}, [1], {"a": 1},
                               float("inf"), float("-inf"), float("nan"), 10**13, 2**63,
                               -(10**13), 5e-324, 1e300, -1, 0, 1.5, "2025-01-01"])


def numbers(allowed: str, integer: bool) -> st.SearchStrategy:
    """Numbers in and around the bounds of ``allowed``, and beyond them."""
    low, high = _bounds(allowed)
    low = -5.0 if low is None else low
    high = low + 50.0 if high is None else high
    if integer:
        inside = st.integers(int(max(low, -10**6)), int(min(high, low + 10**4)))
        edges = st.sampled_from([int(low) - 1, int(low), int(low) + 1, int(high),
                                 int(high) + 1, 0, 10**9])
    else:
        inside = st.floats(low, high, allow_nan=False, allow_infinity=False)
        edges = st.sampled_from([low, high, low - 1e-9, high + 1e-3, 0.0, 1e-300, 1e9])
    return st.one_of(inside, inside, edges, BAD_SCALARS)


def value_of(row: docs.FieldDoc) -> st.SearchStrategy:
    """A value for the field ``row`` (its type and allowed values), right or wrong."""
    kind, allowed = row.type, row.allowed
    literals = _literals(allowed)
    base: list[st.SearchStrategy] = []
    if literals:
        base.append(st.sampled_from([yaml.safe_load(v) if v in ("true", "false", "null")
                                     else v for v in literals]))
    if kind.startswith("integer"):
        base.append(numbers(allowed, integer=True))
    elif kind.startswith("number"):
        base.append(numbers(allowed, integer=False))
    elif kind.startswith("boolean"):
        base.append(st.booleans())
    elif kind.startswith("date"):
        base.append(st.dates(datetime.date(2023, 1, 1), datetime.date(2027, 1, 1)))
    elif kind.startswith("list of"):
        item = st.integers(1, 20) if "integer" in kind else st.floats(0, 5) if (
            "number" in kind) else st.sampled_from(["read", "external", "irreversible", "x"])
        base.append(st.lists(item, min_size=0, max_size=3))
    elif kind.startswith("mapping of"):
        base.append(st.dictionaries(st.sampled_from(["false_accept", "false_reject", "x"]),
                                    st.floats(0, 1), max_size=2))
    elif kind.startswith("string"):
        if row.path.endswith("detector.name"):
            base.append(st.sampled_from(["default", "nope", "builtins:input"]))
        elif row.path.endswith("verifier.name"):
            base.append(st.sampled_from(["none", "oracle", "noisy", "model_grader",
                                         "this:s"]))
        elif row.path.endswith("prices"):
            base.append(st.sampled_from(["seed001", "nope"]))
        elif row.path.endswith("scope"):
            base.append(st.sampled_from(["all", "tenant:default", "tenant:x"]))
        else:
            base.append(st.text(alphabet="abc/._-: 1", min_size=0, max_size=12))
    if "null" in kind:
        base.append(st.none())
    base.append(BAD_SCALARS)
    return st.one_of(*base)


def _set(doc: dict, path: str, value) -> None:
    node = doc
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            return
    node[parts[-1]] = value


def leaf_rows(section: docs.Section) -> list[docs.FieldDoc]:
    """The section's fields that take a value (not a nested section)."""
    return [f for f in section.fields if f.default != "see below" and f.path not in SKIPPED
            and not f.default.endswith("(see below)") and f.type != "list of mappings"]


@st.composite
def entries(draw, path: str, required: dict[str, st.SearchStrategy]) -> list:
    """1 or 2 entries of the list of mappings at ``path`` (``world.tools``, ...)."""
    rows = [r for s in SECTIONS.get(f"{path}[]", []) for r in leaf_rows(s)]
    out = []
    for i in range(draw(st.integers(1, 2))):
        entry = {key: draw(strategy) for key, strategy in required.items()}
        entry = {k: (f"{v}{i}" if k == "name" and isinstance(v, str) else v)
                 for k, v in entry.items()}
        for row in draw(st.lists(st.sampled_from(rows), max_size=3, unique=True)) if rows else ():
            entry[row.path.removeprefix(f"{path}[].")] = draw(value_of(row))
        out.append(entry)
    return out


@st.composite
def documents(draw) -> dict:
    """A scenario document of a few fields drawn from the reference."""
    doc: dict = {"harness": {"prices": "seed001"}}
    plain = [r for path, sections in SECTIONS.items() if "[]" not in path
             and path != "world.difficulty" for s in sections for r in leaf_rows(s)]
    for row in draw(st.lists(st.sampled_from(plain), min_size=1, max_size=5, unique=True)):
        _set(doc, row.path, draw(value_of(row)))
    if draw(st.booleans()):
        shape = draw(st.sampled_from(SECTIONS["world.difficulty"]))
        difficulty = {}
        if draw(st.booleans()) or "lognormal" not in shape.variant:
            difficulty["distribution"] = shape.variant.strip("`").split(": ")[1]
        for row in draw(st.lists(st.sampled_from(leaf_rows(shape)), max_size=3, unique=True)):
            if not row.path.endswith("distribution"):
                difficulty[row.path.rsplit(".", 1)[1]] = draw(value_of(row))
        _set(doc, "world.difficulty", difficulty)
    if draw(st.integers(0, 4)) == 0:
        _set(doc, "world.tools", draw(entries("world.tools", {"name": st.just("tool")})))
    if draw(st.booleans()):
        doc["engine"] = "des"
        if draw(st.booleans()):
            _set(doc, "des.tenants", draw(entries("des.tenants", {"name": st.just("t")})))
    if draw(st.integers(0, 5)) == 0:
        row = draw(st.sampled_from(plain))
        doc["sweep"] = {row.path: draw(st.lists(value_of(row), min_size=1, max_size=3))}
    return doc


class TimeLimit(Exception):
    """A run took longer than TIME_LIMIT_S: a hang."""


def _alarm(signum, frame):
    raise TimeLimit(f"no answer within {TIME_LIMIT_S} s")


def reported_paths(stderr: str) -> list[str]:
    """The dotted paths an ``error: <file>: ...`` message names."""
    first = stderr.rstrip("\n").split("\n")[0]
    body = first.split(": ", 2)[2] if first.count(": ") >= 2 else ""
    paths = [body.split(": ", 1)[0]]
    paths += [part.split(": ", 1)[0] for part in body.split("; also ")[1:]]
    return [p for p in paths if p]


def is_known(path: str) -> bool:
    """A field of the reference, a prefix of one, an index into one, or an
    entry (by the user's own key) of a mapping the reference keys by name."""
    path = re.sub(r"\[\d+\]", "", path).removeprefix("sweep.")
    if path in ("sweep", "tasks", "(top level)"):
        return True
    if any(path.startswith(f"{k}.") and path != f"{k}." for k in KEYED):
        return True
    return any(k == path or k.startswith(f"{path}.") for k in KNOWN)


@pytest.mark.slow
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(documents())
def test_every_generated_scenario_runs_cleanly_or_is_refused_with_a_dotted_path(tmp_path, doc):
    """A clean run writes the whole results folder and prints JSON; anything
    else is exit 2 with one error message naming a field of the reference;
    nothing raises, nothing hangs."""
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    out = Path(tmp_path) / "out"
    command = "sweep" if "sweep" in doc else "run"
    stdout, stderr = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT_S)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = sim.cli.main([command, str(path), "--tasks", "2", "--workers", "1",
                                   "--quiet", "--format", "json", "--out", str(out),
                                   "--force"])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    err = stderr.getvalue()
    assert status in (0, 2), (status, doc, err)
    if status == 0:
        summary = json.loads(stdout.getvalue())
        assert summary["cells"] and all(c["tasks"] == 2 for c in summary["cells"])
        assert {p.name for p in out.iterdir()} >= RESULT_FILES, doc
        return
    if stdout.getvalue():  # --format json: the error, and only it, as one JSON object
        assert json.loads(stdout.getvalue())["error"]["status"] == 2, doc
    assert err.startswith(f"error: {path}: "), (doc, err)
    assert sum(line.startswith("error: ") for line in err.splitlines()) == 1, (doc, err)
    assert "Traceback" not in err
    paths = reported_paths(err)
    assert paths and all(is_known(p) for p in paths), (doc, err)
