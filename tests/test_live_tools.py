"""Live tools: Python functions and shell commands with per-tool timeouts; every
failure is a structured ToolError, never an exception; file tools stay inside
the working directory."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from sim.drivers.live.tools import (
    MAX_OUTPUT_CHARS,
    FunctionTool,
    ShellTool,
    Toolbox,
    ToolContext,
    ToolFailure,
    builtin,
    run_tool,
)
from sim.harness import ToolError, ToolResult
from sim.harness.classifier import FATAL, NEEDS_PLAN, TRANSIENT, classify_tool_error


def run(tool, arguments, tmp_path, timeout_s=5.0, **kw):
    name = tool.name if tool is not None else "missing"
    return asyncio.run(run_tool(tool, name, arguments, ToolContext(tmp_path), timeout_s, **kw))


def function_tool(fn, **kw) -> FunctionTool:
    box = Toolbox()
    return box.function(fn, **kw)


@pytest.mark.parametrize(("error", "kind", "cls"), [
    (FileNotFoundError("no such file: a.txt"), "not_found", NEEDS_PLAN),
    (KeyError("missing"), "not_found", NEEDS_PLAN),
    (PermissionError("read-only"), "permission", NEEDS_PLAN),
    (ConnectionError("reset"), "transient", TRANSIENT),
    (TimeoutError("upstream"), "timeout", TRANSIENT),
    (ZeroDivisionError("division by zero"), "exception", NEEDS_PLAN),
    (ToolFailure("fatal", "the sandbox is gone"), "fatal", FATAL),
])
def test_exceptions_become_structured_tool_errors(error, kind, cls, tmp_path):
    """What a function raises decides the kind and thus who handles it: the
    harness retries transient ones, the model reads the others, fatal ends
    the run."""

    def broken() -> str:
        raise error

    result = run(function_tool(broken), {}, tmp_path)
    assert isinstance(result, ToolError)
    assert (result.kind, classify_tool_error(result)) == (kind, cls)
    assert result.tokens > 0 and result.duration_s >= 0


def test_arguments_that_do_not_fit_the_function_are_a_validation_error(tmp_path):
    """The model can fix its arguments: a validation error, not a crash."""
    result = run(function_tool(lambda key: key, name="echo"), {"nope": 1}, tmp_path)
    assert isinstance(result, ToolError) and result.kind == "validation"


def test_a_function_is_given_the_context_when_it_asks_for_it(tmp_path):
    """A parameter named ``context`` receives the working directory."""
    tool = function_tool(lambda context: str(context.workdir), name="where")
    assert tool.input_schema["properties"] == {}
    assert run(tool, {}, tmp_path).output == str(tmp_path)


def test_a_slow_function_times_out_without_waiting_for_it(tmp_path):
    """At its timeout the call is a timeout error; its thread is abandoned
    (a daemon), so the caller does not wait for it."""
    started = time.monotonic()
    result = run(function_tool(lambda: time.sleep(3) or "late", name="slow"), {}, tmp_path,
                 timeout_s=0.2)
    assert isinstance(result, ToolError) and result.kind == "timeout"
    assert time.monotonic() - started < 1.0


def test_outputs_are_bounded_with_a_note(tmp_path):
    """A huge output is cut to its first page and says how much is missing."""
    result = run(function_tool(lambda: "y" * (MAX_OUTPUT_CHARS + 123), name="big"), {},
                 tmp_path)
    assert result.output.endswith("[output cut: 123 more characters]")
    assert len(result.output) < MAX_OUTPUT_CHARS + 100


def test_a_function_returning_data_gets_json_text(tmp_path):
    """Non-text return values are JSON; a ToolResult passes through with its metric."""
    assert run(function_tool(lambda: {"b": 1}, name="data"), {}, tmp_path).output == '{"b": 1}'
    metric = run(function_tool(lambda: ToolResult("3 failing", 2, 0.0, 3.0), name="m"), {},
                 tmp_path)
    assert (metric.output, metric.tokens, metric.metric) == ("3 failing", 2, 3.0)


def test_the_shell_tool_runs_a_real_command_in_the_working_directory(tmp_path):
    """Exit status, stdout and stderr come back; a failing command is an
    output the model reads, not an error."""
    (tmp_path / "data.txt").write_text("a\nb\n")
    result = run(ShellTool(), {"command": "wc -l < data.txt; echo oops >&2; exit 3"},
                 tmp_path)
    assert isinstance(result, ToolResult)
    assert result.output.startswith("exit status 3\n")
    assert "2\n" in result.output and "oops" in result.output


def test_the_shell_tool_is_killed_at_its_timeout(tmp_path):
    """A command that outlives its timeout is killed with its process group:
    a timeout error, quickly, and the command's children are gone."""
    started = time.monotonic()
    result = run(ShellTool(), {"command": "sleep 30 & echo $! > child.pid; wait"}, tmp_path,
                 timeout_s=0.5)
    assert isinstance(result, ToolError) and result.kind == "timeout"
    assert time.monotonic() - started < 3.0
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie is dead too
        return handle.read().split()[2] != "Z"


def test_the_shell_tool_needs_a_command(tmp_path):
    """A missing or empty command is a validation error."""
    for arguments in ({}, {"command": "  "}, {"command": 3}):
        result = run(ShellTool(), arguments, tmp_path)
        assert isinstance(result, ToolError) and result.kind == "validation"


def test_file_tools_stay_inside_the_working_directory(tmp_path):
    """read_file, write_file and list_files work on relative paths; a path
    out of the directory is a permission error; a missing file not found."""
    write, read, listing = builtin("write_file"), builtin("read_file"), builtin("list_files")
    assert run(write, {"path": "sub/a.txt", "content": "hi"}, tmp_path).output.startswith("wrote")
    assert run(read, {"path": "sub/a.txt"}, tmp_path).output == "hi"
    assert run(listing, {}, tmp_path).output == "sub/a.txt"
    for path in ("../escape.txt", "/etc/passwd"):
        result = run(read, {"path": path}, tmp_path)
        assert isinstance(result, ToolError) and result.kind == "permission"
    (tmp_path / "link").symlink_to("/etc")
    assert run(read, {"path": "link/hostname"}, tmp_path).kind == "permission"
    assert run(read, {"path": "none.txt"}, tmp_path).kind == "not_found"


def test_tools_describe_themselves_to_the_model_and_to_the_harness():
    """The harness's spec carries effect, timeout, required arguments, the
    definition's size, and the definition each model request declares
    (description and schema)."""
    shell = builtin("shell", timeout_s=12.0)
    spec = shell.spec()
    assert (spec.name, spec.effect, spec.timeout_s, spec.required_args) == (
        "shell", "reversible_write", 12.0, ("command",))
    assert spec.definition_tokens > 10
    definition = spec.definition()
    assert definition.input_schema == shell.input_schema
    assert definition.description == shell.description
    assert builtin("read_file").spec().timeout_s == 5.0  # seed 000: file operations 5 s


def test_a_toolbox_refuses_a_second_tool_of_the_same_name_and_bad_settings():
    """Names are unique; effect classes and timeouts are checked."""
    box = Toolbox([ShellTool()])
    with pytest.raises(ValueError, match="twice"):
        box.add(ShellTool())
    with pytest.raises(ValueError, match="effect"):
        FunctionTool("x", "", {}, effect="dangerous", function=str)
    with pytest.raises(ValueError, match="timeout"):
        FunctionTool("x", "", {}, timeout_s=0, function=str)
    with pytest.raises(ValueError, match="callable"):
        FunctionTool("x", "", {})


def test_an_unregistered_tool_is_not_found(tmp_path):
    """Calling a name the toolbox does not hold is a not_found error."""
    result = run(None, {}, tmp_path)
    assert isinstance(result, ToolError) and result.kind == "not_found"
