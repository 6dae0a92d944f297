"""The built-in tools a tasks file may name: ``shell``, ``read_file``,
``write_file`` and ``list_files``.

File tools work inside the run's working directory only: a path that leaves
it (``..``, an absolute path elsewhere, a symbolic link out) is a permission
error the model reads. Timeouts follow seed 000: file operations 5 s, shell
commands 30 s (a tasks file may set others).
"""

from __future__ import annotations

from pathlib import Path

from sim.drivers.live.tools import FunctionTool, ShellTool, Tool, ToolContext, ToolFailure

FILE_TIMEOUT_S = 5.0
SHELL_TIMEOUT_S = 30.0
MAX_LISTED = 500


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
