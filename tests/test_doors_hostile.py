"""The command-line and output doors against hostile input (issue 41, part A):
never a traceback, never data lost. Bad input is one ``error: ...`` line
naming the file (and dotted field) and what is wrong, exit status 2, refused
before the simulation where it can be known up front; a secondary output
(``--otel``, ``--summary-md``) that fails after the main results are written
leaves them intact and exits 2.

Full and read-only disks are simulated as ``tests/test_faults.py`` does: the
write raises the OSError the kernel gives. A device node is made with
``mknod`` in a temporary folder (root only), never ``/dev/null`` itself: a
regression would replace the machine's ``/dev/null`` with a regular file.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import stat
from pathlib import Path

import pytest

import sim.cli
from sim.bad_input import InputError
from sim.output.chunks import ChunkStore

REPO = Path(__file__).resolve().parents[1]
BOUNDED = REPO / "scenarios" / "bounded.yaml"
LONG = "s" * 300


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = sim.cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def run(out: Path, *extra: str, tasks: str = "20") -> tuple[int, str, str]:
    return cli("run", str(BOUNDED), "--tasks", tasks, "--workers", "1", "--quiet",
               "--out", str(out), *extra)


def one_error(status: int, stderr: str, *words: str) -> None:
    """Exit 2 and one ``error:`` line holding every one of ``words``."""
    assert status == 2, stderr
    assert stderr.startswith("error: ") and "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    for word in words:
        assert word in stderr, (word, stderr)


@pytest.fixture
def no_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any simulation fails the test: what is refused must be refused before."""
    def simulated(*args, **kwargs):
        raise AssertionError("the simulation started")

    monkeypatch.setattr("sim.sweeps.chunks.run_to_file", simulated)


def fail_with(code: int):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))
    return fail


# ------------------------------------------------------------------ --otel
def test_otel_naming_a_folder_is_refused_before_the_simulation(tmp_path, no_simulation) -> None:
    """``run --otel FOLDER`` gave IsADirectoryError after the whole simulation."""
    (tmp_path / "spans").mkdir()
    status, _, stderr = run(tmp_path / "out", "--otel", str(tmp_path / "spans"))
    one_error(status, stderr, "--otel", "is a folder")
    assert not (tmp_path / "out").exists()


def test_otel_naming_a_device_is_refused_and_the_device_stays_a_device(
        tmp_path, no_simulation) -> None:
    """``run --otel`` on a character device (as ``/dev/null``, made here with
    mknod: major 1, minor 3) replaced it with a regular file."""
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("making a device node needs root")
    status, _, stderr = run(tmp_path / "out", "--otel", str(device))
    one_error(status, stderr, "--otel", "character device")
    assert stat.S_ISCHR(device.stat().st_mode)


def test_otel_naming_another_runs_summary_json_is_refused_and_that_run_kept(tmp_path) -> None:
    """``--otel other/summary.json`` overwrote another run's summary (a later
    ``compare`` on that folder failed): refused, the other folder unchanged."""
    other = tmp_path / "other"
    assert run(other)[0] == 0
    before = (other / "summary.json").read_bytes()
    status, _, stderr = run(tmp_path / "out", "--otel", str(other / "summary.json"))
    one_error(status, stderr, "--otel", "inside the results folder")
    assert (other / "summary.json").read_bytes() == before
    assert not (tmp_path / "out").exists()


def test_otel_inside_the_runs_own_out_is_refused_before_the_simulation(
        tmp_path, no_simulation) -> None:
    """``--out X --otel X/spans.json`` would make X foreign to the next run."""
    out = tmp_path / "out"
    status, _, stderr = run(out, "--otel", str(out / "spans.json"))
    one_error(status, stderr, "--otel", "inside the results folder")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS], ids=["ENOSPC", "EROFS"])
def test_otel_on_a_full_or_read_only_disk_keeps_the_results_and_exits_2(
        tmp_path, monkeypatch, code) -> None:
    """The spans fail to write after the results folder is written: exit 2
    naming --otel and saying where the results are; they are all there."""
    monkeypatch.setattr("sim.drivers.live.otel.SpanRecorder.write", fail_with(code))
    out = tmp_path / "out"
    status, _, stderr = run(out, "--otel", str(tmp_path / "spans.json"))
    one_error(status, stderr, "--otel", os.strerror(code).lower(), f"results are in {out}")
    assert json.loads((out / "summary.json").read_text())["cells"]
    assert not (tmp_path / "spans.json").exists()


def test_live_and_run_refuse_otel_with_one_check() -> None:
    """``live`` and ``run`` share :func:`sim.output.folder.check_file_target`
    (there is no second copy of the rule in sim/cli; ``run``'s check is in
    :func:`sim.api.simulating.write_cells`)."""
    import sim.cli.live

    assert not hasattr(sim.cli.live, "check_file_target") or (
        sim.cli.live.check_file_target.__module__ == "sim.output.folder")
    text = (REPO / "sim" / "api" / "simulating.py").read_text()
    assert "check_file_target(otel" in text


# -------------------------------------------------------------- [tool.sim]
def _project(tmp_path: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.sim]\n{body}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIM_OUT", raising=False)
    monkeypatch.delenv("SIM_SCENARIOS", raising=False)
    return tmp_path / "pyproject.toml"


@pytest.mark.parametrize("command", [["run", "bounded", "--tasks", "5"], ["scenarios"]],
                         ids=["run", "scenarios"])
def test_tool_sim_path_with_a_nul_byte_is_exit_2_naming_the_field(
        tmp_path, monkeypatch, no_simulation, command) -> None:
    """``scenarios = ["a\\u0000b"]`` gave ValueError: embedded null byte."""
    pyproject = _project(tmp_path, 'scenarios = ["a\\u0000b"]', monkeypatch)
    status, _, stderr = cli(*command)
    one_error(status, stderr, str(pyproject), "tool.sim.scenarios[0]", "NUL")


@pytest.mark.parametrize("setting", ['scenarios = ""', 'scenarios = ["worlds", " "]',
                                     'out = ""'], ids=["scenarios", "scenarios-list", "out"])
def test_tool_sim_empty_path_is_exit_2_naming_the_field(tmp_path, monkeypatch, no_simulation,
                                                        setting) -> None:
    """``scenarios = ""`` was accepted (an empty path is the pyproject's own
    folder, silently); every empty path of ``[tool.sim]`` is refused."""
    pyproject = _project(tmp_path, setting, monkeypatch)
    key = setting.split(" ")[0]
    command = ("run", str(BOUNDED), "--tasks", "5", "--quiet") if key == "out" else ("scenarios",)
    status, _, stderr = cli(*command)
    one_error(status, stderr, str(pyproject), f"tool.sim.{key}", "empty path")


@pytest.mark.parametrize("command", [["run", "bounded", "--tasks", "5"], ["scenarios"]],
                         ids=["run", "scenarios"])
def test_tool_sim_nested_5000_deep_is_exit_2(tmp_path, monkeypatch, no_simulation,
                                             command) -> None:
    """An array nested 5,000 deep gave RecursionError."""
    pyproject = _project(tmp_path, "scenarios = " + "[" * 5000 + "]" * 5000, monkeypatch)
    status, _, stderr = cli(*command)
    one_error(status, stderr, str(pyproject), "nested too deep")


def test_tool_sim_out_of_a_300_character_name_is_exit_2(tmp_path, monkeypatch,
                                                        no_simulation) -> None:
    """``out = "sss...(300)"``: refused naming the field, before the simulation."""
    pyproject = _project(tmp_path, f'out = "{LONG}"', monkeypatch)
    status, _, stderr = cli("run", str(BOUNDED), "--tasks", "5", "--quiet")
    one_error(status, stderr, str(pyproject), "tool.sim.out", "at most 255")


def test_sim_out_with_a_300_character_name_is_exit_2(tmp_path, monkeypatch,
                                                     no_simulation) -> None:
    """``SIM_OUT=<300 characters>``: refused naming $SIM_OUT."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SIM_OUT", str(tmp_path / LONG))
    status, _, stderr = cli("run", str(BOUNDED), "--tasks", "5", "--quiet")
    one_error(status, stderr, "$SIM_OUT", "at most 255")


# -------------------------------------------------------------- --summary-md
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS], ids=["ENOSPC", "EROFS"])
def test_summary_md_on_a_full_disk_keeps_the_comparison_and_exits_2(
        tmp_path, monkeypatch, code) -> None:
    """``compare --summary-md`` whose append fails after the comparison: exit
    2 naming --summary-md and where the comparison is; comparison.json is there."""
    monkeypatch.setattr("sim.output.ci.append_summary", fail_with(code))
    out = tmp_path / "out"
    status, _, stderr = cli("compare", str(BOUNDED), str(BOUNDED), "--tasks", "20",
                            "--resamples", "200", "--workers", "1", "--quiet",
                            "--out", str(out), "--summary-md", str(tmp_path / "s.md"))
    one_error(status, stderr, "--summary-md", os.strerror(code).lower(),
              f"results are in {out}")
    assert json.loads((out / "comparison.json").read_text())


def test_a_summary_append_cut_short_leaves_the_earlier_summaries(tmp_path,
                                                                 monkeypatch) -> None:
    """The disk fills half-way through an append: the file is cut back to its
    earlier text (2 lines), never half of the new summary."""
    from sim.output import ci

    path = tmp_path / "summary.md"
    path.write_text("# earlier\nkept\n", encoding="utf-8")
    real_open = open

    def failing_open(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        if str(file) == str(path) and "a" in mode:
            real_write = handle.write

            def write(text: str) -> int:
                real_write(text[: len(text) // 2])
                handle.flush()
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            handle.write = write  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr("builtins.open", failing_open)
    with pytest.raises(OSError):
        ci.append_summary(path, "# new\n" + "x" * 100 + "\n")
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == "# earlier\nkept\n"


# --------------------------------------------------------------- frailty
@pytest.mark.parametrize("value", ["5.0e-324", "1.0e-300", "9.0e-7"])
def test_a_tiny_positive_frailty_is_refused_by_the_field_check(tmp_path, value) -> None:
    """``world.endings.frailty: 5.0e-324`` passed the field check and made a
    gamma shape of inf (a pydantic traceback in the simulation): now the
    scenario's validation refuses any frailty in (0, 1e-6) naming the field."""
    from sim.scenario.model import load_scenario

    path = tmp_path / "frail.yaml"
    path.write_text(f"name: frail\nworld:\n  endings:\n    frailty: {value}\n",
                    encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    assert caught.value.path == "world.endings.frailty"
    assert "at least 1e-06" in caught.value.message


def test_frailty_zero_and_the_smallest_allowed_simulate(tmp_path) -> None:
    """0 and 1e-6 (the bound, what calibration's 6-decimal rounding can give)
    are accepted and simulate 5 tasks each."""
    import sim.api as api

    for value in (0.0, 1e-6):
        rows = api.simulate(BOUNDED, {"world.endings": {"frailty": value}}, tasks=5,
                            workers=1, progress=False)
        assert len(rows) == 5


# ------------------------------------------------------- names too long, NUL
def test_a_300_character_scenario_file_name_is_exit_2(tmp_path) -> None:
    """A scenario path with a 300-character name gave OSError: File name too long."""
    status, _, stderr = cli("run", str(tmp_path / f"{LONG}.yaml"), "--tasks", "5")
    one_error(status, stderr, "scenario file", "305 bytes long", "at most 255")


@pytest.mark.parametrize("flag", ["--out", "--otel"])
def test_a_300_character_output_name_is_exit_2(tmp_path, no_simulation, flag) -> None:
    """``--out`` (or ``--otel``) with a 300-character name: a usage error, exit 2."""
    extra = ["--out", str(tmp_path / "o"), flag, str(tmp_path / LONG)]
    status, _, stderr = cli("run", str(BOUNDED), "--tasks", "5", "--quiet", *extra)
    one_error(status, stderr, flag, "at most 255")


def test_a_compare_summary_md_with_a_nul_byte_is_exit_2(tmp_path) -> None:
    """``compare --summary-md 'a<NUL>b'``: a usage error before anything runs."""
    status, _, stderr = cli("compare", str(BOUNDED), str(BOUNDED), "--tasks", "5",
                            "--out", str(tmp_path / "o"), "--summary-md", "a\0b")
    one_error(status, stderr, "--summary-md", "NUL")


# ---------------------------------------------------------------- --resume
def test_resume_with_a_folder_in_place_of_a_kept_chunk_recomputes_it(tmp_path,
                                                                      monkeypatch) -> None:
    """A kept chunk that is a folder gave IsADirectoryError on --resume: it is
    sim's own hidden folder, so the chunk is removed and computed again, and
    the results are the bytes of an uninterrupted run."""
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    with monkeypatch.context() as patch:
        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        patch.setattr("sim.output.results.write_streamed_results", interrupted)
        status, _, _ = run(out, tasks="400")
    assert status == 130
    chunks = sorted((tmp_path / ".out.partial").glob("*.arrow"))
    assert len(chunks) >= 2
    chunks[1].unlink()
    chunks[1].mkdir()
    (chunks[1] / "inside").write_text("x")
    status, _, stderr = run(out, "--resume", tasks="400")
    assert status == 0, stderr
    assert run(fresh, tasks="400")[0] == 0
    assert (out / "results.parquet").read_bytes() == (fresh / "results.parquet").read_bytes()


def test_a_fifo_in_place_of_a_kept_chunk_is_dropped_without_blocking(tmp_path) -> None:
    """A FIFO named as a chunk is never opened (it would block): dropped, 1 key."""
    store = ChunkStore(tmp_path / "kept", "fp", resume=False)
    os.mkfifo(tmp_path / "kept" / "c0.arrow")
    again = ChunkStore(tmp_path / "kept", "fp", resume=True)
    assert again.dropped == ["c0"] and again.keys() == set()
    assert store.folder == again.folder


# ------------------------------------------------------- accepted nonsense
def test_a_yaml_date_as_the_name_is_refused(tmp_path) -> None:
    """``name: 2024-01-01`` (a YAML date) was taken as the name 2024-01-01."""
    path = tmp_path / "dated.yaml"
    path.write_text("name: 2024-01-01\n", encoding="utf-8")
    status, _, stderr = cli("run", str(path), "--tasks", "5")
    one_error(status, stderr, str(path), "name", "YAML date", "quote it")


def test_a_yaml_date_where_a_date_is_expected_is_accepted(tmp_path) -> None:
    """``harness.prices_date: 2024-06-01`` stays a date field's date."""
    import datetime

    from sim.scenario.model import load_scenario

    path = tmp_path / "priced.yaml"
    path.write_text("name: priced\nharness:\n  prices_date: 2024-06-01\n", encoding="utf-8")
    assert load_scenario(path).harness.prices_date == datetime.date(2024, 6, 1)


@pytest.mark.parametrize("flag", [["--model", "gpt-4o"], ["--provider", "openai"]])
def test_cost_refuses_a_model_with_a_named_price_set(flag) -> None:
    """``cost --model gpt-4o --prices seed001`` silently ignored --model."""
    status, stdout, stderr = cli("cost", "--steps", "30", "--prefix", "12000", "--per-step",
                                 "1500", "--output", "600", "--prices", "seed001", *flag)
    one_error(status, stderr, "--prices seed001", flag[0], "not both")
    assert stdout == ""


# ------------------------------------------------------------- neighbours
@pytest.mark.parametrize("kind", ["folder", "device", "results"])
def test_calibrate_out_naming_a_folder_device_or_results_file_is_refused_before_fitting(
        tmp_path, monkeypatch, kind) -> None:
    """``calibrate --out x.yaml`` where x.yaml is a folder gave IsADirectoryError
    after the whole fit; a device was replaced by a regular file; a YAML put
    into another run's results folder made it foreign. Refused before fitting."""
    import sim.calibration.pipeline as pipeline

    def never(*args, **kwargs):
        raise AssertionError("calibration ran before the output was checked")

    monkeypatch.setattr(pipeline, "calibrate", never)
    target = tmp_path / "fit.yaml"
    if kind == "folder":
        target.mkdir()
        words = "is a folder"
    elif kind == "device":
        try:
            os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except (PermissionError, OSError):
            pytest.skip("making a device node needs root")
        words = "character device"
    else:
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "summary.json").write_text("{}")
        target = tmp_path / "other" / "fit.yaml"
        words = "inside the results folder"
    status, _, stderr = cli("calibrate", str(tmp_path / "traces"), "--out", str(target))
    one_error(status, stderr, "--out", words)
    assert kind != "device" or stat.S_ISCHR(target.stat().st_mode)


@pytest.mark.parametrize("command", [["replay", "t", "s.yaml"], ["tune", "t"],
                                     ["calibrate", "t"]], ids=["replay", "tune", "calibrate"])
def test_other_commands_refuse_an_out_with_a_300_character_name(command) -> None:
    """``replay``, ``tune`` and ``calibrate`` ``--out`` with a 300-character
    name: a usage error naming --out (they gave OSError: File name too long)."""
    status, _, stderr = cli(*command, "--out", f"/tmp/{LONG}.yaml")
    one_error(status, stderr, "--out", "at most 255")


def test_an_out_that_is_a_device_is_named_as_a_device(tmp_path) -> None:
    """``run --out`` on a character device: 'is a character device, not a
    folder' (it said 'is a file')."""
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("making a device node needs root")
    status, _, stderr = cli("run", str(BOUNDED), "--tasks", "5", "--out", str(device))
    one_error(status, stderr, "--out", "is a character device, not a folder")


def test_sim_scenarios_with_a_300_character_name_is_exit_2(tmp_path, monkeypatch) -> None:
    """``SIM_SCENARIOS=<300 characters>`` gave OSError in the name search."""
    monkeypatch.setenv("SIM_SCENARIOS", str(tmp_path / LONG))
    for command in (["run", "bounded", "--tasks", "5", "--out", str(tmp_path / "o")],
                    ["scenarios"]):
        status, _, stderr = cli(*command)
        one_error(status, stderr, "$SIM_SCENARIOS", "at most 255")


def test_view_of_a_300_character_name_or_a_device_is_exit_2(tmp_path) -> None:
    """``view`` of a 300-character name gave OSError; of a device it said 'not found'."""
    status, _, stderr = cli("view", str(tmp_path / LONG))
    one_error(status, stderr, "at most 255")
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("making a device node needs root")
    status, _, stderr = cli("view", str(device))
    one_error(status, stderr, str(device), "not a file nor a folder")


def test_resume_when_the_kept_chunks_folder_is_a_file_starts_afresh(tmp_path) -> None:
    """A file where sim keeps its chunks (``.out.partial``): removed, 0 chunks
    resumed, the store usable (a chunk kept after it is 1 key)."""
    import pyarrow as pa

    (tmp_path / "kept").write_text("not a folder")
    store = ChunkStore(tmp_path / "kept", "fp", resume=True)
    assert store.resumed == 0 and store.folder.is_dir()
    store.put("c0", pa.table({"x": [1, 2]}))
    assert store.keys() == {"c0"}


def test_an_otel_name_of_250_bytes_is_refused_before_the_simulation(tmp_path,
                                                                    no_simulation) -> None:
    """A 250-byte --otel name passed the check (it probed a 200-byte prefix)
    and failed with File name too long after the simulation: the temporary
    names beside it are 16 bytes longer, so at most 239 are taken."""
    status, _, stderr = run(tmp_path / "out", "--otel", str(tmp_path / ("s" * 250)))
    one_error(status, stderr, "--otel", "250 bytes long", "at most 239")


def test_an_out_name_of_240_bytes_is_refused_saying_how_long_it_may_be(
        tmp_path, no_simulation) -> None:
    """A 240-byte --out name: refused with its length and the limit, 239
    (it said only 'cannot write there (File name too long)')."""
    status, _, stderr = run(tmp_path / ("s" * 240))
    one_error(status, stderr, "--out", "240 bytes long", "at most 239")


def test_a_default_folder_name_never_exceeds_239_bytes() -> None:
    """A 200-character scenario name (the schema's most) with a 40-character
    override: the readable suffix would make 245 bytes, so it is hashed."""
    from sim.output.folder import MAX_TARGET_NAME, run_folder_name

    name = run_folder_name("n" * 200, "run", ["x" * 40])
    assert MAX_TARGET_NAME == 239
    assert len(name) == 200 + len("-run-set-") + 8 and name.startswith("n" * 200 + "-run-set-")
    assert run_folder_name("n" * 20, "run", ["x" * 40]) == "n" * 20 + "-run-" + "x" * 40


def test_an_arrivals_path_with_a_nul_byte_is_exit_2_naming_the_field(tmp_path) -> None:
    """``des.arrivals.path: "a\\0b.csv"`` gave ValueError: embedded null byte."""
    path = tmp_path / "arrivals.yaml"
    path.write_text('name: arr\nengine: des\ndes:\n  arrivals:\n    kind: csv\n'
                    '    path: "a\\0b.csv"\n', encoding="utf-8")
    status, _, stderr = cli("run", str(path), "--tasks", "2", "--out", str(tmp_path / "o"))
    one_error(status, stderr, str(path), "des.arrivals.path", "NUL", "(line 6)")


def test_the_span_writer_never_replaces_a_folder_or_a_device(tmp_path) -> None:
    """``SpanRecorder.write`` itself (the last line of defence, should a
    folder appear at the target during a run): an InputError, the folder
    kept with its 1 file, no temporary file left."""
    from sim.drivers.live.otel import SpanRecorder

    target = tmp_path / "spans.json"
    target.mkdir()
    (target / "inside").write_text("x")
    with pytest.raises(InputError, match="not a regular file"):
        SpanRecorder().write(target)
    assert [p.name for p in target.iterdir()] == ["inside"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spans.json"]


@pytest.mark.parametrize(("flag", "kind", "words"), [
    ("--junit", "device", "character device"), ("--junit", "folder", "is a folder"),
    ("--summary-md", "folder", "is a folder"), ("--junit", "results", "inside the results")])
def test_compare_secondary_outputs_are_checked_before_the_comparison(
        tmp_path, monkeypatch, flag, kind, words) -> None:
    """``compare --junit``/``--summary-md`` at a device, a folder or inside
    another results folder: exit 2 before anything is simulated."""
    def never(*args, **kwargs):
        raise AssertionError("the comparison ran")

    monkeypatch.setattr("sim.api.comparing.run_comparison", never)
    target = tmp_path / "t"
    if kind == "device":
        try:
            os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except (PermissionError, OSError):
            pytest.skip("making a device node needs root")
    elif kind == "folder":
        target.mkdir()
    else:
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "comparison.json").write_text("{}")
        target = tmp_path / "other" / "junit.xml"
    status, _, stderr = cli("compare", str(BOUNDED), str(BOUNDED), "--tasks", "5",
                            "--out", str(tmp_path / "o"), flag, str(target))
    one_error(status, stderr, flag, words)
    assert kind != "device" or stat.S_ISCHR(target.stat().st_mode)


def mini_swe() -> str:
    """The shared mini-swe-agent samples (the test skips without the data)."""
    from traces_helpers import data_folder

    return str(data_folder("mini-swe-agent"))


def status_err(result: tuple[int, str, str]) -> tuple[int, str]:
    return result[0], result[2]


def test_traces_import_and_summary_refuse_a_300_character_name_before_reading(tmp_path):
    """``traces import --out`` and ``traces summary DIR`` with a 300-character
    name: exit 2 naming the flag (it was an ENAMETOOLONG traceback)."""
    long = str(tmp_path / ("n" * 300))
    one_error(*status_err(cli("traces", "import", mini_swe(), "--out", long)), "--out",
              "300 bytes")
    one_error(*status_err(cli("traces", "summary", long)), "DIR", "300 bytes")


def test_traces_import_under_a_parent_that_cannot_be_made_is_exit_2(tmp_path):
    """An ``--out`` whose parent is a file: exit 2 saying the folder cannot be
    made, nothing written (it was a NotADirectoryError traceback)."""
    (tmp_path / "file").write_text("x")
    one_error(*status_err(cli("traces", "import", mini_swe(), "--out",
                              str(tmp_path / "file" / "t"))), "cannot make a folder")
    assert (tmp_path / "file").read_text() == "x"


def test_import_traces_from_python_refuses_a_name_too_long(tmp_path):
    """The Python API checks the path too: an InputError, not an OSError."""
    from sim.traces import import_traces

    with pytest.raises(InputError, match="at most 255"):
        import_traces([mini_swe()], tmp_path / ("n" * 300))


def test_cost_refuses_a_price_beyond_a_dollar_a_token():
    """``cost --model M --price-out 1e308``: exit 2 naming the flag and the
    bound (it was a decimal.InvalidOperation traceback after the catalogue
    lookup; with --format json the cost read "inf")."""
    one_error(*status_err(cli("cost", "--steps", "10", "--prefix", "100", "--per-step", "10",
                              "--output", "5", "--model", "claude-sonnet-4-20250514",
                              "--price-out", "1e308")), "--price-out", "1,000,000")


def test_an_output_folder_with_escape_bytes_is_printed_as_text(tmp_path, monkeypatch):
    """``SIM_OUT`` holding ESC: the "results in ..." line shows ``\\x1b`` as
    text, never the raw byte (the campaign's sim_out door found it)."""
    monkeypatch.setenv("SIM_OUT", str(tmp_path / "\x1b[31mRED\x1b[0m"))
    status, out, err = cli("run", str(BOUNDED), "--tasks", "2", "--workers", "1", "--quiet")
    assert status == 0, err
    assert "\x1b" not in out + err
    assert "\\x1b[31mRED" in out


@pytest.mark.parametrize("name", ["None", "null", " NULL ", "undefined"])
def test_a_tool_named_by_the_text_of_a_missing_value_is_no_tool_name(name):
    """A writer that stringified a missing name leaves "None" or "null": the
    importers' one check takes it as nameless (the run is skipped with the
    reason), as it does null and "" (the campaign's importers door found a
    Harbor file with function_name "None" imported)."""
    from sim.traces.repairs import is_tool_name

    assert not is_tool_name(name)
    assert is_tool_name("bash") and is_tool_name("none_of_these")


@pytest.mark.parametrize("flag", ["--otel", "--junit", "--summary-md"])
def test_a_written_file_that_is_the_commands_own_input_is_refused(tmp_path, flag) -> None:
    """``--otel``, ``--junit`` or ``--summary-md`` naming the scenario the
    command reads (the same file, by another path too) is exit 2 before any
    work, and the scenario is left as it was (``--otel`` and ``--junit``
    replaced it with spans or XML, ``--summary-md`` appended to it)."""
    scenario = tmp_path / "mine.yaml"
    scenario.write_bytes(BOUNDED.read_bytes())
    other_path = str(tmp_path / "sub" / ".." / "mine.yaml")
    (tmp_path / "sub").mkdir()
    command = (["run", str(scenario), "--tasks", "5"] if flag == "--otel" else
               ["compare", str(scenario), str(scenario), "--tasks", "30"])
    status, _, err = cli(*command, "--out", str(tmp_path / "out"), flag, other_path)
    assert status == 2 and f"{flag}:" in err and "is a file this command reads" in err
    assert scenario.read_bytes() == BOUNDED.read_bytes()
    assert not (tmp_path / "out").exists()
