"""Scenario files: every kind of bad input gets one clear message naming the
file and the dotted field path, exit status 2 and no traceback; ``--set``
overrides and components given by import path really take effect.

Each bad input is checked three ways: :func:`sim.scenario.load_scenario`
raises :class:`~sim.bad_input.InputError` (in-process); the CLI's entry point
``sim.cli.main`` returns 2 with the message on stderr (in-process); and
``python -m sim run ...`` in a real interpreter exits with status 2, prints
``error: ...`` and no traceback. An interpreter costs two to three CPU seconds
(the CLI imports pandas, pyarrow and scipy before reading the file), so those
runs cover one case per way a message is raised (reading the file, validating
fields, importing components, checking options) and run concurrently, with the
check that components given by import path work in worker processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import sim.cli
from sim.bad_input import InputError
from sim.harness.state import DetectorMemory
from sim.scenario.model import (
    VerifierConfig,
    build_verifier,
    expand,
    harness_params,
    load_scenario,
    resolve_detector,
)
from sim.world.verifiers import NoisyVerifier, OracleVerifier

REPO = Path(__file__).resolve().parents[1]
BOUNDED = REPO / "scenarios" / "bounded.yaml"
VALID = "tasks: 5\nseed: 1\n"


@dataclass(frozen=True)
class Bad:
    """One kind of bad input and the fragments its message must contain."""

    text: str | None  # the scenario file; None: the file does not exist
    expect: tuple[str, ...]  # the dotted path (or option) and what is wrong
    args: tuple[str, ...] = ()  # extra options (--set ...)
    tasks: bool = True  # pass --tasks 5 (it would hide a bad ``tasks`` in the file)
    interpreter: bool = False  # also run in a real interpreter
    names_file: bool = True  # False for option errors, which no file caused
    plugins: bool = False  # pass --allow-plugins (allow_plugins=True in process)


BAD = {
    "missing_file": Bad(None, ("file not found",), interpreter=True),
    "malformed_yaml": Bad("harness:\n  budgets:\n    steps: 5\n   tokens: 10\n",
                          ("malformed YAML", "line 4")),
    "yaml_tab": Bad("harness:\n\tbudgets: {}\n", ("malformed YAML", "line 2")),
    "top_level_list": Bad("- tasks: 5\n- seed: 1\n", ("top level must be a mapping", "list")),
    "top_level_scalar": Bad("just some words\n", ("top level must be a mapping", "str")),
    "unknown_top_level_key": Bad("taskz: 5\n", ("taskz", "unknown field")),
    "unknown_nested_key": Bad("harness:\n  budgets:\n    stepz: 10\n",
                              ("harness.budgets.stepz: unknown field",
                               "did you mean 'steps'? (line 3)"),
                              interpreter=True),
    "unknown_world_key": Bad("world:\n  policy:\n    lop: 0.1\n",
                             ("world.policy.lop", "unknown field", "did you mean 'loop'?")),
    "misplaced_key": Bad("budgets:\n  steps: 10\n",
                         ("budgets: unknown field", "did you mean 'harness.budgets'? (line 1)")),
    "wrong_type": Bad("harness:\n  budgets:\n    steps: ten\n",
                      ("harness.budgets.steps", "valid integer", "'ten'")),
    "nested_section_not_a_mapping": Bad("harness:\n  budgets: 10\n",
                                        ("harness.budgets", "should be a mapping")),
    "probability_above_one": Bad("world:\n  policy:\n    loop: 1.5\n",
                                 ("world.policy.loop", "less than or equal to 1", "1.5")),
    "negative_budget": Bad("harness:\n  budgets:\n    tokens: -1\n",
                           ("harness.budgets.tokens", "greater than 0", "-1")),
    "zero_tasks": Bad("tasks: 0\n", ("tasks:", "greater than or equal to 1"), tasks=False),
    "difficulty_variant_field": Bad("world:\n  difficulty:\n    distribution: fixed\n"
                                    "    steps: 0\n", ("world.difficulty.steps",)),
    "tool_entry_field": Bad("world:\n  tools:\n    - name: a\n    - name: b\n      "
                            "timeout_s: 0\n", ("world.tools[1].timeout_s", "greater than 0")),
    "probabilities_sum_above_one": Bad(
        "world:\n  policy:\n    loop: 0.5\n    transient: 0.4\n    validation: 0.2\n",
        ("world.policy", "exceeds 1")),
    "thinking_with_temperature": Bad(
        "harness:\n  temperature: 0.7\n  thinking:\n    enabled: true\n    budget_tokens: 100\n",
        ("harness.thinking.enabled", "temperature")),
    "max_output_above_context_window": Bad(
        "harness:\n  max_output_tokens: 300000\n  context_window: 200000\n",
        ("harness.max_output_tokens", "exceeds the context window")),
    "unknown_verifier": Bad("harness:\n  verifier:\n    name: nope\n",
                            ("harness.verifier.name", "unknown name 'nope'")),
    "unknown_detector": Bad("harness:\n  detector:\n    name: nope\n",
                            ("harness.detector.name", "unknown name 'nope'")),
    "bad_detector_import_path": Bad("harness:\n  detector:\n    name: nope.module:Cls\n",
                                    ("harness.detector.name", "cannot import 'nope.module'"),
                                    interpreter=True, plugins=True),
    "bad_verifier_import_path": Bad("harness:\n  verifier:\n    name: nope.module:Cls\n",
                                    ("harness.verifier.name", "cannot import 'nope.module'"),
                                    plugins=True),
    "missing_attribute": Bad("harness:\n  verifier:\n    name: json:NoSuchVerifier\n",
                             ("harness.verifier.name", "has no attribute 'NoSuchVerifier'"),
                             plugins=True),
    # no code from data: an import path runs only with --allow-plugins
    "plugin_exit": Bad('harness:\n  verifier:\n    name: "builtins:exit"\n',
                       ("harness.verifier.name", "'builtins:exit' is an import path",
                        "--allow-plugins"), interpreter=True),
    "plugin_this": Bad('harness:\n  verifier:\n    name: "this:s"\n',
                       ("harness.verifier.name", "'this:s' is an import path"),
                       interpreter=True),
    "plugin_input": Bad('harness:\n  detector:\n    name: "builtins:input"\n',
                        ("harness.detector.name", "'builtins:input' is an import path"),
                        interpreter=True),
    "plugin_in_a_sweep": Bad('sweep:\n  harness.verifier.name: [oracle, "builtins:exit"]\n',
                             ("harness.verifier.name", "import path")),
    "plugin_by_set": Bad(VALID, ("error: --set harness.detector.name=builtins:input: "
                                 "harness.detector.name", "import path"),
                         args=("--set", "harness.detector.name=builtins:input"),
                         names_file=False),
    # strict types: no bool for an integer, no string for a number
    "bool_for_int": Bad("harness:\n  budgets:\n    steps: true\n",
                        ("harness.budgets.steps", "valid integer", "True")),
    "string_for_int": Bad('harness:\n  budgets:\n    steps: "20"\n',
                          ("harness.budgets.steps", "valid integer", "'20'")),
    "string_for_number": Bad('world:\n  policy:\n    loop: "0.1"\n',
                             ("world.policy.loop", "valid number", "'0.1'")),
    "float_for_int": Bad("harness:\n  budgets:\n    steps: 20.5\n",
                         ("harness.budgets.steps", "valid integer")),
    "number_for_string": Bad("harness:\n  model: 5\n", ("harness.model", "valid string")),
    "string_for_bool": Bad('harness:\n  detector:\n    enabled: "yes"\n',
                           ("harness.detector.enabled", "valid boolean")),
    # finite numbers of bounded size everywhere
    "infinite_budget": Bad("harness:\n  budgets:\n    money_usd: .inf\n",
                           ("harness.budgets.money_usd", "finite")),
    "nan_weight": Bad("world:\n  tools:\n    - name: a\n      weight: .nan\n",
                      ("world.tools[0].weight", "finite")),
    "infinite_ttft": Bad("world:\n  latency:\n    ttft_s: .inf\n",
                         ("world.latency.ttft_s", "finite"), interpreter=True),
    "huge_int": Bad("harness:\n  budgets:\n    steps: 9223372036854775808\n",
                    ("harness.budgets.steps", "at most 1e+12")),
    "huge_number": Bad("world:\n  latency:\n    ttft_s: 1.0e+300\n",
                       ("world.latency.ttft_s", "at most 1e+12")),
    "tiny_rate": Bad("engine: des\ndes:\n  capacity:\n    requests_per_minute: 5.0e-324\n",
                     ("des.capacity.requests_per_minute", "greater than or equal to 0.000001")),
    "tiny_speed": Bad("world:\n  latency:\n    decode_tps: 1.0e-300\n",
                      ("world.latency.decode_tps", "greater than or equal")),
    "too_many_tasks": Bad("tasks: 1000000000\n", ("tasks", "less than or equal to 1000000"),
                          tasks=False),
    "long_string": Bad("description: " + "x" * 10_001 + "\n",
                       ("description", "at most 10,000")),
    "name_with_a_slash": Bad("name: ../elsewhere\n", ("name", "pattern")),
    # the document's shape: duplicate keys, nesting, alias bombs
    "duplicate_key": Bad("harness:\n  budgets:\n    steps: 5\n    steps: 6\n",
                         ("harness.budgets.steps", "duplicate key", "lines 3 and 4")),
    "duplicate_top_level_key": Bad("tasks: 5\nseed: 1\ntasks: 6\n",
                                   ("tasks", "duplicate key"), tasks=False),
    "deep_nesting": Bad("world: " + "[" * 3000 + "]" * 3000 + "\n",
                        ("world[0]", "nests deeper than 32"), interpreter=True),
    "alias_bomb_in_a_sweep": Bad(
        "description: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        + "".join(f"x{i}: &{b} [{', '.join([f'*{a}'] * 9)}]\n"
                  for i, (a, b) in enumerate(zip("abcdefgh", "bcdefghi", strict=True)))
        + "sweep:\n  harness.budgets.steps: *i\n",
        ("more than 100,000 values",), interpreter=True),
    "recursive_alias": Bad("world: &w {policy: *w}\n", ("world.policy", "recursive")),
    "non_string_key": Bad("harness:\n  budgets:\n    1: 5\n",
                          ("harness.budgets", "keys must be strings")),
    # grids: bounded, named uniquely
    "million_cell_grid": Bad("sweep:\n" + "".join(
        f"  {path}: [{', '.join(str(v) for v in range(1, 11))}]\n" for path in (
            "harness.budgets.steps", "harness.budgets.retries", "harness.detector.nudges",
            "harness.detector.repeat_threshold", "harness.retry.max_attempts",
            "harness.tool_failure_limit")), ("sweep", "1,000,000 cells", "at most 1,000"),
        interpreter=True),
    "too_many_tasks_in_all": Bad("tasks: 100000\nsweep:\n  harness.budgets.steps: "
                                 "[10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, "
                                 "140, 150, 160, 170, 180, 190, 200, 210]\n",
                                 ("tasks", "2,100,000 tasks", "at most 2,000,000"),
                                 tasks=False),
    "colliding_cell_names": Bad(
        'harness: {prices: seed001}\nsweep:\n  harness.model: ["m", "m,fallback_model=n"]\n'
        '  harness.retry.fallback_model: ["n,fallback_model=o", "o"]\n',
        ("sweep", "two cells would share the name")),
    "repeated_sweep_value": Bad("sweep:\n  world.unsolvable.share: [0.5, 0.2, 0.5]\n",
                                ("sweep.world.unsolvable.share", "repeated value(s) 0.5")),
    "sweep_values_the_same_number": Bad(
        "sweep:\n  world.unsolvable.share: [0.0, 0.1, -0.0]\n",
        ("sweep.world.unsolvable.share", "values 0.0 and -0.0 are the same number")),
    "sweep_values_int_and_float": Bad(
        "sweep:\n  world.unsolvable.share: [1, 1.0]\n",
        ("sweep.world.unsolvable.share", "values 1 and 1.0 are the same number")),
    # files that cannot be read
    "arrivals_path_is_a_folder": Bad("engine: des\ndes:\n  arrivals: {kind: csv, path: .}\n",
                                     ("des.arrivals.path", "is not a file")),
    "bad_verifier_options": Bad(
        "harness:\n  verifier:\n    name: noisy\n    options: {false_accept: 2}\n",
        ("harness.verifier.options", "false_accept")),
    "unknown_price_set": Bad("harness:\n  prices: nope\n", ("harness.prices", "nope")),
    "invalid_sweep_value": Bad("sweep:\n  harness.budgets.steps: [10, -1]\n",
                               ("sweep cell harness.budgets.steps=-1", "harness.budgets.steps",
                                "greater than 0")),
    "invalid_sweep_combination": Bad(
        "sweep:\n  harness.temperature: [0, 0.7]\n  harness.thinking.enabled: [false, true]\n"
        "harness:\n  thinking:\n    budget_tokens: 100\n",
        ("harness.temperature=0.7, harness.thinking.enabled=True", "harness.thinking.enabled")),
    "sweep_unknown_path": Bad("sweep:\n  harness.budgets.stepz: [10]\n",
                              ("harness.budgets.stepz", "unknown field")),
    "sweep_axis_not_a_list": Bad("sweep:\n  harness.budgets.steps: 10\n",
                                 ("sweep.harness.budgets.steps", "should be a list")),
    "sweep_axis_empty": Bad("sweep:\n  harness.budgets.steps: []\n"
                            "  harness.budgets.tokens: [1000000]\n",
                            ("sweep.harness.budgets.steps", "at least 1 item")),
    "set_without_equals": Bad(VALID, ("--set expects dotted.path=value",
                                      "'harness.budgets.steps'"),
                              args=("--set", "harness.budgets.steps")),
    "set_unknown_path": Bad(VALID, ("error: --set harness.budgetz.steps=5: harness.budgetz",
                                    "unknown field"),
                            args=("--set", "harness.budgetz.steps=5"), names_file=False),
    "set_below_a_scalar": Bad(VALID, ("error: --set tasks.x=5: tasks: is not a mapping",
                                      "'tasks.x'"),
                              args=("--set", "tasks.x=5"), names_file=False),
    "set_invalid_value": Bad(VALID, ("error: --set harness.budgets.steps=-3: "
                                     "harness.budgets.steps", "greater than 0"),
                             args=("--set", "harness.budgets.steps=-3"), names_file=False),
    "negative_tasks": Bad(VALID, ("--tasks must be >= 1", "-3"), args=("--tasks", "-3"),
                          tasks=False, interpreter=True, names_file=False),
    "negative_seed": Bad(VALID, ("--seed must be >= 0", "-1"), args=("--seed", "-1"),
                         names_file=False),
    "zero_workers": Bad(VALID, ("--workers must be between 1 and 256",), args=("--workers", "0"),
                        names_file=False),
    "a_trillion_workers": Bad(VALID, ("--workers must be between 1 and 256",),
                              args=("--workers", "1000000000000"), names_file=False,
                              interpreter=True),
    "a_billion_tasks": Bad(VALID, ("error: --tasks 1000000000: tasks",
                                   "less than or equal to 1000000"),
                           args=("--tasks", "1000000000"), tasks=False, interpreter=True,
                           names_file=False),
    "out_is_a_file": Bad(VALID, ("--out", "is a file"), args=("--out", "{folder}/VALID.txt"),
                         names_file=False),
    "out_in_proc": Bad(VALID, ("--out /proc/x", "cannot write there"),
                       args=("--out", "/proc/x"), names_file=False, interpreter=True),
}


def scenario_file(folder: Path, name: str, case: Bad) -> Path:
    """Write the case's scenario (unless it is the missing file); return its path."""
    path = folder / f"{name}.yaml"
    if case.text is not None:
        path.write_text(case.text, encoding="utf-8")
    return path


def cli_args(path: Path, case: Bad, out: Path) -> list[str]:
    """``run PATH --tasks 5 --quiet --out OUT ...``; a later --out in the
    case's arguments wins (``{folder}`` is the scenario's folder)."""
    tasks = ["--tasks", "5"] if case.tasks else []
    plugins = ["--allow-plugins"] if case.plugins else []
    args = [a.replace("{folder}", str(path.parent)) for a in case.args]
    if "{folder}/VALID.txt" in case.args:
        (path.parent / "VALID.txt").write_text("not a folder\n", encoding="utf-8")
    return ["run", str(path), *tasks, "--quiet", "--out", str(out), *plugins, *args]


def check_message(stderr: str, path: Path, case: Bad) -> None:
    """One message, prefixed ``error: ``, naming the file, the path, the problem."""
    assert stderr.startswith("error: "), stderr
    assert stderr.count("error: ") == 1, stderr
    assert "Traceback" not in stderr, stderr
    first = stderr.splitlines()[0]
    if case.names_file:
        assert first.startswith(f"error: {path}: "), stderr
    for fragment in case.expect:
        assert fragment in stderr, (fragment, stderr)


# ---------------------------------------------------------- in-process checks
LOADABLE = sorted(k for k, c in BAD.items() if c.names_file and "--tasks" not in c.args)


@pytest.mark.parametrize("name", LOADABLE)
def test_load_scenario_raises_input_error_naming_file_and_path(name, tmp_path):
    """load_scenario raises InputError whose source is the file and whose text
    names the dotted path and the problem (--set overrides included)."""
    case = BAD[name]
    path = scenario_file(tmp_path, name, case)
    overrides = [v for flag, v in zip(case.args[::2], case.args[1::2], strict=True)
                 if flag == "--set"]
    with pytest.raises(InputError) as caught:
        load_scenario(path, overrides, allow_plugins=case.plugins)
    error = caught.value
    assert error.source == str(path)
    assert str(error).startswith(f"{path}: ")
    for fragment in case.expect:
        assert fragment in str(error), (fragment, str(error))


@pytest.mark.parametrize("name", sorted(BAD))
def test_cli_reports_bad_input_in_one_message_with_status_2(name, tmp_path, capsys):
    """sim.cli.main returns 2 and prints one ``error: <file>: <path>: ...``
    message on stderr, nothing on stdout, and raises nothing."""
    case = BAD[name]
    path = scenario_file(tmp_path, name, case)
    status = sim.cli.main(cli_args(path, case, tmp_path / "out"))
    captured = capsys.readouterr()
    assert status == 2, captured
    assert captured.out == ""
    check_message(captured.err, path, case)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------ real interpreter runs
PLUGINS = '''\
"""Components given by import path in the scenario tests."""


class FireAlways:
    """A no-progress detector that fires on every executed call."""

    def __init__(self, params):
        self.params = params

    def observe(self, memory, call_key, observation_key, polling, metric):
        memory.detections += 1
        return "custom"


class RejectAll:
    """A verifier that rejects every claim of success."""

    def __init__(self, note="never"):
        self.note = note

    def check(self, correct, draws):
        return False


class Nothing:
    """Neither a detector nor a verifier."""

    def __init__(self, *args, **kwargs):
        pass
'''

COMPONENTS = """\
name: components
tasks: 60
seed: 3
harness:
  prices: seed001
  budgets: {tokens: 2000000, steps: 50}
  detector: {nudges: 1}
sweep:
  harness.detector.name: [default, "scenario_plugins_cli:FireAlways"]
  harness.verifier.name: [oracle, "scenario_plugins_cli:RejectAll"]
"""


def _python_path(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), env.get("PYTHONPATH")) if p)
    return env


@pytest.fixture(scope="module")
def interpreter_runs(tmp_path_factory):
    """``python -m sim ...`` for the interpreter cases and the components
    sweep, all started at once; ``{name: (path, CompletedProcess)}``."""
    folder = tmp_path_factory.mktemp("cli")
    (folder / "scenario_plugins_cli.py").write_text(PLUGINS, encoding="utf-8")
    (folder / "components.yaml").write_text(COMPONENTS, encoding="utf-8")
    commands: dict[str, tuple[Path, list[str]]] = {}
    for name, case in BAD.items():
        if case.interpreter:
            path = scenario_file(folder, name, case)
            commands[name] = (path, cli_args(path, case, folder / f"out_{name}"))
    commands["components"] = (folder / "components.yaml", [
        "sweep", str(folder / "components.yaml"), "--quiet", "--format", "json",
        "--workers", "2", "--out", str(folder / "out_components"), "--allow-plugins"])
    env = _python_path(folder)
    started = {name: (path, subprocess.Popen(
        [sys.executable, "-m", "sim", *argv], cwd=folder, env=env, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        for name, (path, argv) in commands.items()}
    runs = {}
    for name, (path, process) in started.items():
        out, err = process.communicate(timeout=300)
        runs[name] = (path, subprocess.CompletedProcess(process.args, process.returncode,
                                                        out, err))
    return runs


INTERPRETER = sorted(k for k, c in BAD.items() if c.interpreter)


@pytest.mark.parametrize("name", INTERPRETER)
def test_interpreter_exits_2_with_one_message_and_no_traceback(name, interpreter_runs):
    """``python -m sim run BAD ...`` exits with status 2; stderr is one
    ``error: `` message naming the file and the dotted path; no traceback;
    nothing on stdout (``this:s`` was not imported: it would print the Zen
    of Python), no hang (``builtins:input`` was not called)."""
    path, done = interpreter_runs[name]
    assert done.returncode == 2, done
    assert done.stdout == ""
    check_message(done.stderr, path, BAD[name])


def test_set_overrides_a_nested_field_in_the_cli(tmp_path, capsys):
    """``--set harness.budgets.steps=5`` on bounded.yaml caps every run at 5
    model calls: budget_exhausted:steps appears in the JSON summary."""
    status = sim.cli.main(["run", str(BOUNDED), "--tasks", "40", "--quiet", "--format", "json",
                           "--workers", "1", "--out", str(tmp_path / "out"),
                           "--set", "harness.budgets.steps=5"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    (cell,) = json.loads(captured.out)["cells"]
    assert cell["tasks"] == 40
    assert cell["outcomes"].get("budget_exhausted:steps", 0) > 0.5
    assert cell["steps"]["max"] <= 5


def test_custom_detector_and_verifier_by_import_path_are_used(interpreter_runs):
    """Classes named ``module:Class`` (importable from PYTHONPATH) replace the
    built-ins in every worker: a detector that always fires ends every run as
    needs_human:no_progress after one nudge; a verifier that rejects every
    claim leaves no succeeded run; the built-ins still succeed."""
    _, done = interpreter_runs["components"]
    assert done.returncode == 0, done.stderr
    cells = {(c["params"]["harness.detector.name"], c["params"]["harness.verifier.name"]): c
             for c in json.loads(done.stdout)["cells"]}
    detector, verifier = "scenario_plugins_cli:FireAlways", "scenario_plugins_cli:RejectAll"
    assert len(cells) == 4
    assert cells[("default", "oracle")]["outcomes"].get("succeeded", 0) > 0.5
    rejecting = cells[("default", verifier)]
    assert "succeeded" not in rejecting["outcomes"]
    assert "false_success" not in rejecting["outcomes"]
    assert rejecting["verifier_rejections_mean"] > 0
    for name in ("oracle", verifier):
        firing = cells[(detector, name)]
        assert firing["outcomes"] == {"needs_human:no_progress": 1.0}
        assert firing["nudges_mean"] == 1.0


def test_repeated_sweep_values_are_refused(tmp_path):
    """Cells are named by their values, so an axis may not repeat a value."""
    path = tmp_path / "dup.yaml"
    path.write_text("sweep:\n  harness.budgets.steps: [10, 10]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"harness\.budgets\.steps"):
        load_scenario(path)


def test_a_sweep_over_tasks_is_refused_or_honoured(tmp_path, capsys):
    """``sweep: {tasks: [...]}`` either is an input error or runs each cell
    with its own number of tasks; it must not report params it did not use."""
    path = tmp_path / "tasks.yaml"
    path.write_text("tasks: 3\nharness: {prices: seed001}\nsweep:\n  tasks: [2, 4]\n",
                    encoding="utf-8")
    status = sim.cli.main(["sweep", str(path), "--quiet", "--format", "json", "--workers", "1",
                           "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    if status == 2:
        assert "tasks" in captured.err
    else:
        assert [c["tasks"] for c in json.loads(captured.out)["cells"]] == [2, 4]


# ------------------------------------------------------------ --set in-process
def test_set_overrides_nested_fields_with_yaml_values(tmp_path):
    """--set values are parsed as YAML and land on the dotted path; the file's
    other settings stay; missing sections are created; the last --set wins."""
    scenario = load_scenario(BOUNDED, [
        "harness.budgets.steps=7", "world.policy.loop=0", "harness.budgets.steps=9",
        "harness.verifier.name=noisy", "harness.verifier.options={false_accept: 0.2}",
        "harness.approval_required=[external]", "world.faults.rate_limit=0.01"])
    h = scenario.harness
    assert h.budgets.steps == 9
    assert h.budgets.tokens == 2_000_000  # from the file
    assert scenario.world.policy.loop == 0.0
    assert h.verifier.name == "noisy" and h.verifier.options == {"false_accept": 0.2}
    assert h.approval_required == ("external",)
    assert scenario.world.faults.rate_limit == 0.01
    path = tmp_path / "plain.yaml"
    path.write_text("tasks: 3\n", encoding="utf-8")
    assert load_scenario(path, ["harness.detector.nudges=0"]).harness.detector.nudges == 0


def test_empty_file_is_all_defaults_named_after_the_file(tmp_path):
    """An empty file is a valid scenario of defaults named after the file."""
    path = tmp_path / "defaults.yaml"
    path.write_text("# nothing yet\n", encoding="utf-8")
    scenario = load_scenario(path)
    assert scenario.name == "defaults"
    assert scenario.tasks == 1000 and scenario.sweep == {}
    assert scenario.world.policy.loop == 0.015


def test_sweep_cells_are_named_by_axis_values_in_grid_order(tmp_path):
    """A 2 x 2 sweep expands into 4 cells, named ``last.path.part=value`` and
    each validated with its values set."""
    path = tmp_path / "grid.yaml"
    path.write_text("sweep:\n  harness.budgets.steps: [10, 20]\n"
                    "  world.policy.loop: [0.0, 0.1]\n", encoding="utf-8")
    cells = expand(load_scenario(path))
    assert [name for name, _, _ in cells] == [
        "steps=10,loop=0.0", "steps=10,loop=0.1", "steps=20,loop=0.0", "steps=20,loop=0.1"]
    for _, cell, values in cells:
        assert cell.sweep == {}
        assert dict(values) == {"harness.budgets.steps": cell.harness.budgets.steps,
                                "world.policy.loop": cell.world.policy.loop}


# -------------------------------------------------------- components in-process
@pytest.fixture(scope="module")
def plugins(tmp_path_factory):
    """An importable module ``scenario_plugins_inproc`` with test components."""
    folder = tmp_path_factory.mktemp("plugins")
    (folder / "scenario_plugins_inproc.py").write_text(PLUGINS, encoding="utf-8")
    sys.path.insert(0, str(folder))
    yield "scenario_plugins_inproc"
    sys.path.remove(str(folder))
    sys.modules.pop("scenario_plugins_inproc", None)


def test_custom_detector_is_built_with_the_detector_parameters(plugins, tmp_path):
    """A detector class given by import path is built per run with the
    harness's DetectorParams and its observe() is what the loop calls."""
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(f"""\
        harness:
          detector: {{name: "{plugins}:FireAlways", repeat_threshold: 5}}
        """), encoding="utf-8")
    scenario = load_scenario(path, allow_plugins=True)
    factory = resolve_detector(scenario.harness.detector.name)
    params = harness_params(scenario.harness, scenario.world)
    detector = factory(params)
    assert type(detector).__name__ == "FireAlways"
    assert detector.params.repeat_threshold == 5
    assert detector.observe(DetectorMemory(), "k", "o", False, None) == "custom"


def test_verifiers_by_name_and_import_path_get_their_options(plugins):
    """none -> no verifier; oracle and noisy are built-ins (noisy with its
    options); an import path is built with the options as keyword arguments."""
    assert build_verifier(VerifierConfig(name="none")) is None
    assert isinstance(build_verifier(VerifierConfig(name="oracle")), OracleVerifier)
    noisy = build_verifier(VerifierConfig(name="noisy", options={"false_reject": 0.3}))
    assert isinstance(noisy, NoisyVerifier) and noisy.false_reject == 0.3
    custom = build_verifier(VerifierConfig(name=f"{plugins}:RejectAll",
                                           options={"note": "strict"}))
    assert type(custom).__name__ == "RejectAll" and custom.note == "strict"


@pytest.mark.parametrize("section,options,expect", [
    ("detector", "", ("harness.detector.name", "has no observe() method")),
    ("verifier", "", ("harness.verifier.name", "has no check() method")),
    ("verifier", "\n    options: {colour: red}",
     ("harness.verifier.name", "has no check() method")),
])
def test_import_paths_must_name_usable_components(plugins, tmp_path, section, options, expect):
    """A class without the component's method is refused at load time, with
    the field's dotted path."""
    path = tmp_path / "c.yaml"
    path.write_text(f"harness:\n  {section}:\n    name: {plugins}:Nothing{options}\n",
                    encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_scenario(path, allow_plugins=True)
    assert caught.value.source == str(path)
    for fragment in expect:
        assert fragment in str(caught.value)


def test_verifier_options_the_class_rejects_name_the_options_path(plugins, tmp_path):
    """Options the class does not accept are an InputError at
    harness.verifier.options."""
    path = tmp_path / "v.yaml"
    path.write_text(f"harness:\n  verifier:\n    name: {plugins}:RejectAll\n"
                    "    options: {colour: red}\n", encoding="utf-8")
    with pytest.raises(InputError, match="colour") as caught:
        load_scenario(path, allow_plugins=True)
    assert caught.value.path == "harness.verifier.options"


# --------------------------------------------------- accepted values run cleanly
CLEAN = {
    "difficulty_without_its_distribution": ("world:\n  difficulty: {mu: 2.5}\n", ()),
    "a_huge_lognormal_mean": ("harness:\n  budgets: {steps: 30}\nworld:\n  difficulty: "
                              "{mu: 50, sigma: 10}\n", ()),  # the largest allowed: cut to 1e9
    "numbers_at_the_bounds": ("harness:\n  budgets: {steps: 1000000000000}\n", ()),
    "exponent_floats_are_numbers": ("engine: des\ndes:\n  capacity: {tokens_per_minute: 1e6,"
                                    " requests_per_minute: 1.0e-6}\n", ()),
    "one_task": (VALID, ("--tasks", "1")),
    "every_task_free": ("harness:\n  prices: {input: 0, output: 0, cache_read: 0, "
                        "cache_write: 0}\nsweep:\n  harness.budgets.steps: [5, 10]\n", ()),
}


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_accepted_edge_values_run_cleanly_and_write_every_file(name, tmp_path, capsys):
    """Values the limits accept simulate without a traceback and the whole
    results folder is written: a difficulty without ``distribution`` (the
    documented lognormal), ``mu: 1000`` (needs are cut to 10^9 steps, no
    overflow), a step budget of 10^12, YAML 1.2 exponent floats, one task
    and cells where every task costs $0 (report.html has no log scale of
    zeros)."""
    text, args = CLEAN[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    argv = ["sweep", str(path), "--quiet", "--workers", "1", "--format", "json",
            "--out", str(out), *(args or ("--tasks", "3"))]
    status = sim.cli.main(argv)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert {"results.parquet", "summary.json", "report.md", "report.html"} <= {
        p.name for p in out.iterdir()}
    if name == "difficulty_without_its_distribution":
        difficulty = load_scenario(path).world.difficulty
        assert (difficulty.distribution, difficulty.mu, difficulty.sigma) == ("lognormal", 2.5,
                                                                              0.6)
    if name == "exponent_floats_are_numbers":
        capacity = load_scenario(path).des.capacity
        assert (capacity.tokens_per_minute, capacity.requests_per_minute) == (1e6, 1e-6)


def test_an_arrivals_symlink_loop_exits_2_with_the_field(tmp_path, capsys):
    """An arrivals path that is a loop of symlinks: exit 2 naming des.arrivals.path."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    path = tmp_path / "loop.yaml"
    path.write_text(f"engine: des\ndes:\n  arrivals: {{kind: csv, path: {tmp_path / 'a'}}}\n",
                    encoding="utf-8")
    assert sim.cli.main(["run", str(path), "--tasks", "2", "--quiet",
                         "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: des.arrivals.path: cannot read")


def test_an_integer_of_thousands_of_digits_is_refused_naming_its_field(tmp_path) -> None:
    """An integer longer than Python reads (4,300 digits: a ValueError from
    the YAML loader) or than sim reads (300) is an input error naming its
    dotted path, in a file and in ``--set``."""
    from sim.bad_input import InputError
    from sim.scenario.safeyaml import parse

    for digits in (301, 5_000):
        with pytest.raises(InputError, match=f"{digits:,} characters") as refused:
            parse("harness:\n  budgets:\n    steps: " + "9" * digits + "\n", "s.yaml")
        assert refused.value.path == "harness.budgets.steps"
    assert parse("steps: " + "9" * 300)["steps"] == int("9" * 300)


def test_a_lone_surrogate_is_refused_naming_its_field_and_a_pair_is_its_character() -> None:
    """A double-quoted ``\\udc80`` is no Unicode character: an input error
    naming the dotted path (it was pydantic's "Invalid JSON", naming no
    field). A high-low pair, as JSON writes a character beyond U+FFFF, reads
    as that character, in values and in keys."""
    from sim.bad_input import InputError
    from sim.scenario.safeyaml import parse

    for text, path, code in (('name: "bo\\udc80x"', "name", "udc80"),
                             ('harness: {model: "a\\ud83d"}', "harness.model", "ud83d"),
                             ('tags: [ok, "\\ude00\\ud83d"]', "tags[1]", "ude00")):
        with pytest.raises(InputError, match=f"lone surrogate \\\\{code}") as refused:
            parse(text, "s.yaml")
        assert refused.value.path == path
    assert parse('name: "a\\ud83d\\ude00b"\n"k\\ud83d\\ude00": 1') == {
        "name": "a\U0001F600b", "k\U0001F600": 1}


def test_a_set_value_the_loader_refuses_is_said_of_the_set_and_its_field(tmp_path, capsys):
    """An integer of 400 digits or a lone surrogate in a ``--set`` value was
    an error of the scenario file at "(top level)"; it is the override's, at
    its path (inside the value where the value has one)."""
    path = tmp_path / "s.yaml"
    path.write_text(VALID, encoding="utf-8")
    steps = "harness.budgets.steps=" + "9" * 400
    for item, where in ((steps, "harness.budgets.steps: an integer of 400 characters"),
                        ('world={a: ["x\\udc80"]}', "world.a[0]: a lone surrogate \\udc80")):
        assert sim.cli.main(["sweep", str(path), "--quiet", "--out", str(tmp_path / "o"),
                             "--set", item]) == 2
        assert capsys.readouterr().err.startswith(f"error: --set {item}: {where}")
