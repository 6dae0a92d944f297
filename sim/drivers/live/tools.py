"""Real tools for live runs: Python functions and shell commands, with timeouts.

A :class:`Tool` has what the model sees (name, description, JSON schema of its
arguments), what the harness's policy needs (effect class, timeout in seconds)
and a way to run; :meth:`Tool.spec` is the harness's
:class:`~sim.harness.params.ToolSpec` of it, from which every model request
declares the tool. :class:`FunctionTool` calls a Python function with the
call's arguments as keyword arguments, in a daemon thread so that a timeout
never waits for it (the abandoned thread runs on until the function returns).
:class:`ShellTool` runs ``/bin/sh -c COMMAND`` as a real subprocess in the
run's working directory, in its own process group, killed (SIGKILL to the
group) at its timeout or when the run is cancelled.

Nothing a tool does escapes as an exception (seed 000): :func:`run_tool`
returns a :class:`~sim.harness.effects.ToolResult` or a structured
:class:`~sim.harness.effects.ToolError`:

==============================================  ===========================
what happened                                    ToolError kind
==============================================  ===========================
arguments that do not fit the function           ``validation``
``TimeoutError`` raised, or the timeout passed   ``timeout``
``FileNotFoundError``, ``LookupError``           ``not_found``
``PermissionError``                              ``permission``
``ConnectionError``                              ``transient``
``ToolFailure(kind, message)``                   ``kind`` (e.g. ``fatal``)
any other exception                              ``exception`` (status 422:
                                                 the model reads it and
                                                 changes its plan)
==============================================  ===========================

Outputs longer than ``max_output_chars`` characters are cut, with a note of
how much was left out (a first page, never an unbounded dump); sizes are in
tokens with the harness's estimate.

The built-in tools a tasks file may name (:func:`builtin`,
:data:`BUILTIN_TOOLS`) are ``shell``, ``read_file``, ``write_file`` and
``list_files``. File tools work inside the run's working directory only: a
path that leaves it (``..``, an absolute path elsewhere, a symbolic link out)
is a permission error the model reads. Timeouts follow seed 000: file
operations 5 s, shell commands 30 s (a tasks file may set others).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.harness.effects import ToolError, ToolResult
from sim.harness.messages import estimate_tokens
from sim.harness.params import EFFECT_CLASSES, ToolSpec

MAX_OUTPUT_CHARS = 20_000
FILE_TIMEOUT_S = 5.0
SHELL_TIMEOUT_S = 30.0
MAX_LISTED = 500


class ToolFailure(Exception):
    """Raised by a tool to fail with a chosen :class:`ToolError` ``kind``
    (``transient``, ``timeout``, ``rate_limit``, ``validation``, ``not_found``,
    ``permission`` or ``fatal``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(slots=True)
class ToolContext:
    """Where a call runs: the run's working directory."""

    workdir: Path


@dataclass
class Tool(ABC):
    """A tool: its definition for the model and its policy for the harness.
    Subclasses implement :meth:`run` (the class is abstract: a bare Tool
    cannot be built)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    effect: str = "read"
    timeout_s: float = 30.0
    polling: bool = False

    def __post_init__(self) -> None:
        if self.effect not in EFFECT_CLASSES:
            raise ValueError(f"tool {self.name}: effect must be one of {EFFECT_CLASSES}, "
                             f"got {self.effect!r}")
        if not self.timeout_s > 0:
            raise ValueError(f"tool {self.name}: timeout_s must be positive, got "
                             f"{self.timeout_s}")

    def spec(self) -> ToolSpec:
        """The tool for the harness: policy (effect class, timeout, required
        arguments) and the definition every model call declares (description,
        schema as canonical JSON text), sized in tokens for the prompt prefix."""
        schema = json.dumps(self.input_schema, sort_keys=True, separators=(",", ":"))
        size = estimate_tokens(json.dumps({"name": self.name, "description": self.description,
                                           "input_schema": self.input_schema}))
        required = tuple(self.input_schema.get("required", ()))
        return ToolSpec(self.name, self.effect, self.timeout_s, self.polling,  # type: ignore[arg-type]
                        size, required, self.description, schema)

    @abstractmethod
    async def run(self, arguments: dict[str, Any], context: ToolContext, timeout_s: float
                  ) -> str | ToolResult:
        """Run once; return the output text (or a full result). Raise to fail."""


@dataclass
class FunctionTool(Tool):
    """A Python function called as ``function(**arguments)``; if it declares a
    parameter named ``context`` it also gets the :class:`ToolContext`. It
    returns a string (the output) or a :class:`ToolResult`."""

    function: Callable[..., Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        Tool.__post_init__(self)
        if not callable(self.function):
            raise ValueError(f"tool {self.name}: function must be callable, got "
                             f"{self.function!r}")

    async def run(self, arguments: dict[str, Any], context: ToolContext, timeout_s: float
                  ) -> str | ToolResult:
        """Call the function in a daemon thread; at ``timeout_s`` stop waiting."""
        kwargs = dict(arguments)
        assert self.function is not None  # checked at construction
        signature = inspect.signature(self.function)
        if "context" in signature.parameters:
            kwargs["context"] = context
        try:
            signature.bind(**kwargs)
        except TypeError as error:
            raise ToolFailure("validation", str(error)) from None
        try:
            value = await asyncio.wait_for(in_daemon_thread(self.function, **kwargs), timeout_s)
        except TimeoutError:
            raise ToolFailure("timeout", f"no answer within {timeout_s:g} s") from None
        if isinstance(value, ToolResult):
            return value
        return value if isinstance(value, str) else json.dumps(value, default=str)


class ShellTool(Tool):
    """``/bin/sh -c`` of the ``command`` argument in the working directory.
    The output is the exit status, stdout and stderr; a non-zero exit is an
    output the model reads, not an error. Killed at the timeout."""

    def __init__(self, name: str = "shell", *, timeout_s: float = 30.0,
                 effect: str = "reversible_write", description: str = "") -> None:
        super().__init__(
            name, description or "Run a shell command in the task's working directory and "
                                 "return its exit status, stdout and stderr.",
            {"type": "object", "properties": {"command": {
                "type": "string", "description": "the command line, run by /bin/sh"}},
             "required": ["command"]}, effect, timeout_s)

    async def run(self, arguments: dict[str, Any], context: ToolContext, timeout_s: float
                  ) -> str:
        """Run the command; kill its process group at ``timeout_s`` or on cancellation."""
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolFailure("validation", "'command' must be a non-empty string")
        process = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", command, cwd=context.workdir, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True)
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout_s)
        except TimeoutError:
            await _kill(process)
            raise ToolFailure("timeout", f"{command!r} ran longer than {timeout_s:g} s "
                                         f"and was killed") from None
        except BaseException:  # cancelled: the run stops, so does the command
            await _kill(process)
            raise
        return (f"exit status {process.returncode}\n--- stdout ---\n"
                f"{out.decode('utf-8', 'replace')}--- stderr ---\n"
                f"{err.decode('utf-8', 'replace')}")


async def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    await process.wait()


async def in_daemon_thread(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` in a new daemon thread, awaited; an abandoned
    call (timeout, cancellation) never holds up the interpreter's exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)

    def work() -> None:
        try:
            value, error = function(*args, **kwargs), None
        except BaseException as caught:
            value, error = None, caught
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name=f"tool-{getattr(function, '__name__', 'call')}",
                     daemon=True).start()
    return await future


class Toolbox:
    """The tools of a run, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> Tool:
        """Register ``tool``; a second tool of the same name is an error."""
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool
        return tool

    def function(self, function: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None, input_schema: dict[str, Any] | None = None,
                 effect: str = "read", timeout_s: float = 30.0) -> FunctionTool:
        """Register a Python function as a tool (schema: every parameter a
        string, those without a default required, unless given)."""
        schema = input_schema if input_schema is not None else _schema_of(function)
        tool = FunctionTool(name or function.__name__,
                            description or inspect.getdoc(function) or "", schema, effect,
                            timeout_s, function=function)
        self.add(tool)
        return tool

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def get(self, name: str) -> Tool | None:
        """The tool named ``name``, or None."""
        return self._tools.get(name)

    def __iter__(self):
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The harness's view of every tool, in registration order."""
        return tuple(t.spec() for t in self._tools.values())



def _schema_of(function: Callable[..., Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required = []
    for name, parameter in inspect.signature(function).parameters.items():
        if name == "context" or parameter.kind in (parameter.VAR_POSITIONAL,
                                                   parameter.VAR_KEYWORD):
            continue
        properties[name] = {"type": "string"}
        if parameter.default is parameter.empty:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


async def run_tool(tool: Tool | None, name: str, arguments: dict[str, Any],
                   context: ToolContext, timeout_s: float, *,
                   max_output_chars: int = MAX_OUTPUT_CHARS) -> ToolResult | ToolError:
    """Run one call of ``tool`` (None: not registered) and time it; every
    failure becomes a :class:`ToolError` (see the module table). Cancellation
    propagates (after a shell command was killed)."""
    start = time.monotonic()
    try:
        if tool is None:
            raise ToolFailure("not_found", f"no tool named {name!r} is registered")
        value = await tool.run(arguments, context, timeout_s)
    except ToolFailure as failure:
        return _error(failure.kind, str(failure), start)
    except TimeoutError as error:
        return _error("timeout", str(error) or "timed out", start)
    except (FileNotFoundError, LookupError) as error:
        return _error("not_found", _describe(error), start)
    except PermissionError as error:
        return _error("permission", _describe(error), start)
    except ConnectionError as error:
        return _error("transient", _describe(error), start)
    except Exception as error:
        return _error("exception", _describe(error), start, status=422)
    duration = time.monotonic() - start
    if isinstance(value, ToolResult):
        output = _bounded(value.output, max_output_chars)
        return ToolResult(output, estimate_tokens(output) if output != value.output
                          else value.tokens or estimate_tokens(output),
                          value.duration_s or duration, value.metric)
    output = _bounded(value, max_output_chars)
    return ToolResult(output, estimate_tokens(output), duration)


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _error(kind: str, message: str, start: float, status: int | None = None) -> ToolError:
    return ToolError(kind, message, estimate_tokens(message), time.monotonic() - start, status)


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[output cut: {len(text) - limit} more characters]"


# ------------------------------------------------------------ built-in tools
def inside(context: ToolContext, path: str) -> Path:
    """``path`` resolved inside the working directory, or a permission error."""
    if not isinstance(path, str) or not path:
        raise ToolFailure("validation", "'path' must be a non-empty string")
    root = context.workdir.resolve()
    target = (root / path).resolve()
    if target != root and not target.is_relative_to(root):
        raise PermissionError(f"{path!r} is outside the working directory")
    return target


def read_file(path: str, context: ToolContext) -> str:
    """Return the text of a file in the working directory."""
    return inside(context, path).read_text(encoding="utf-8", errors="replace")


def write_file(path: str, content: str, context: ToolContext) -> str:
    """Write ``content`` to a file in the working directory (creating folders)."""
    if not isinstance(content, str):
        raise ToolFailure("validation", "'content' must be a string")
    target = inside(context, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    return f"wrote {len(content)} characters to {path}"


def list_files(context: ToolContext, path: str = ".") -> str:
    """List the files under a folder of the working directory (relative paths)."""
    folder = inside(context, path)
    if not folder.is_dir():
        raise FileNotFoundError(f"{path!r} is not a folder")
    root = context.workdir.resolve()
    names = sorted(str(p.relative_to(root)) for p in folder.rglob("*") if p.is_file())
    extra = len(names) - MAX_LISTED
    listing = "\n".join(names[:MAX_LISTED]) or "(no files)"
    return listing + (f"\n[{extra} more files]" if extra > 0 else "")


def _string(description: str) -> dict[str, str]:
    return {"type": "string", "description": description}


def builtin(name: str, timeout_s: float | None = None) -> Tool:
    """A fresh built-in tool (``timeout_s`` None: its default)."""
    if name == "shell":
        return ShellTool(timeout_s=timeout_s or SHELL_TIMEOUT_S)
    file_timeout = timeout_s or FILE_TIMEOUT_S
    if name == "read_file":
        return FunctionTool("read_file", "Read a text file of the working directory.",
                            {"type": "object", "properties": {
                                "path": _string("path relative to the working directory")},
                             "required": ["path"]}, "read", file_timeout, function=read_file)
    if name == "write_file":
        return FunctionTool("write_file", "Write a text file in the working directory, "
                                          "replacing it if it exists.",
                            {"type": "object", "properties": {
                                "path": _string("path relative to the working directory"),
                                "content": _string("the whole new text of the file")},
                             "required": ["path", "content"]}, "reversible_write",
                            file_timeout, function=write_file)
    if name == "list_files":
        return FunctionTool("list_files", "List the files under a folder of the working "
                                          "directory.",
                            {"type": "object", "properties": {
                                "path": _string("folder relative to the working directory "
                                                "(default: the whole directory)")},
                             "required": []}, "read", file_timeout, function=list_files)
    raise KeyError(name)


BUILTIN_TOOLS: tuple[str, ...] = ("shell", "read_file", "write_file", "list_files")
