"""The tasks file of ``python -m sim live``: instructions and the tools they may use.

A YAML list of tasks, or a mapping with ``tasks`` and an optional
``system_prompt`` shared by all of them::

    system_prompt: You are a careful engineer. Use the tools; say DONE when done.
    tasks:
      - id: greet
        instruction: Create hello.txt containing the word hello.
        tools: [write_file, shell]       # built-in tools (see sim.drivers.live.tools)
        check: grep -q hello hello.txt   # optional: the verifier, run in the workdir
      - id: count
        instruction: How many lines has data.csv?
        tools: [{name: shell, timeout_s: 10}]
        workdir: examples/count          # optional, relative to this file

``id`` defaults to ``task-<n>`` (1-based) and must be unique; a task without
``workdir`` runs in a fresh temporary folder. Every problem is an
:class:`~sim.bad_input.InputError` naming the file and the field's dotted path
(exit status 2), never a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sim.bad_input import InputError
from sim.drivers.live.tools import BUILTIN_TOOLS

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolChoice(_Strict):
    """A built-in tool, optionally with its own timeout in seconds."""

    name: str
    timeout_s: Annotated[float, Field(gt=0, le=3600)] | None = None

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in BUILTIN_TOOLS:
            raise ValueError(f"unknown tool {name!r}; built-in tools: "
                             f"{', '.join(BUILTIN_TOOLS)}")
        return name


class LiveTask(_Strict):
    """One task: the instruction (the first user message), its tools, where
    it runs and how its success is checked."""

    id: str = ""
    instruction: Annotated[str, Field(min_length=1)]
    tools: list[ToolChoice] = Field(default_factory=list)
    workdir: str | None = None
    check: Annotated[str, Field(min_length=1)] | None = None
    check_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0

    @field_validator("tools", mode="before")
    @classmethod
    def _names(cls, tools: Any) -> Any:
        if isinstance(tools, list):
            return [{"name": t} if isinstance(t, str) else t for t in tools]
        return tools

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if value and not _ID.match(value):
            raise ValueError("must be 1-100 letters, digits, '_', '.' or '-', starting with a "
                             "letter or digit")
        return value


class TasksFile(_Strict):
    """A tasks file: the tasks, and the system prompt they share."""

    system_prompt: str = ""
    tasks: Annotated[list[LiveTask], Field(min_length=1)]


def load_tasks(path: str | Path) -> tuple[TasksFile, Path]:
    """The validated tasks of ``path`` (ids filled in, unique; each ``workdir``
    resolved against the file's folder and existing) and that folder."""
    import yaml

    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", source=source) from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read: {error}", source=source) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(f"not valid YAML{where}", source=source) from None
    if isinstance(raw, list):
        raw = {"tasks": raw}
    if not isinstance(raw, dict):
        raise InputError("expected a list of tasks, or a mapping with 'tasks'", source=source)
    try:
        tasks = TasksFile.model_validate(raw)
    except ValidationError as error:
        problem = error.errors()[0]
        raise InputError(_message(problem), source=source, path=_dotted(problem["loc"])
                         ) from None
    base = Path(path).resolve().parent
    filled = []
    seen: set[str] = set()
    for i, task in enumerate(tasks.tasks):
        task_id = task.id or f"task-{i + 1}"
        if task_id in seen:
            raise InputError(f"duplicate task id {task_id!r}", source=source,
                             path=f"tasks[{i}].id")
        seen.add(task_id)
        workdir = task.workdir
        if workdir is not None:
            folder = (base / workdir).resolve()
            if not folder.is_dir():
                raise InputError(f"working directory {workdir!r} does not exist",
                                 source=source, path=f"tasks[{i}].workdir")
            workdir = str(folder)
        names = [t.name for t in task.tools]
        if len(set(names)) != len(names):
            raise InputError(f"a tool is listed twice: {names}", source=source,
                             path=f"tasks[{i}].tools")
        filled.append(task.model_copy(update={"id": task_id, "workdir": workdir}))
    return tasks.model_copy(update={"tasks": filled}), base


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(problem: Mapping[str, Any]) -> str:
    text = str(problem.get("msg", "invalid"))
    text = text.removeprefix("Value error, ")
    if problem.get("type") == "extra_forbidden":
        return "unknown field"
    if problem.get("type") == "missing":
        return "required field is missing"
    return text
