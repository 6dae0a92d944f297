"""Executed notebooks: run the notebooks of ``notebooks/`` top to bottom in a
fresh kernel and store them with their outputs, so they render where the code
is hosted, stamped with a hash of what made those outputs.

    python -m tools.notebooks                 # execute and store every notebook
    python -m tools.notebooks notebooks/explore_budgets.ipynb
    python -m tools.notebooks --check         # exit 1 if a stored notebook is stale
    python -m tools.notebooks --set TASKS=100 # execute with other parameters; store nothing

The stamp (``metadata.sim`` of the notebook) holds a SHA-256 of the code
cells' sources and one of every input the kernel used: each module of
``sim`` it imported and each file it read under the repository (scenarios,
data), as measured while it ran (an audit hook on ``open``; files the
notebook wrote, or that changed while it ran, are not inputs). Files outside
the repository, such as the project's shared trace data, and files git does
not track (an install's ``sim.egg-info``) are not stamped: the repository
does not version them, and a fresh clone does not have them. A stored
notebook is stale when a stamped input or a code cell changed;
:func:`staleness` says which.

A notebook's *parameters* cell (tagged ``parameters``) holds the values a
test or ``--set`` may replace: the replacements run in a cell inserted after
it. Notebooks run with the repository root as working directory and first on
the kernel's ``PYTHONPATH``. Exit status: 0 done (or fresh), 1 a cell raised
(or a notebook is stale), 2 bad input.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.bad_input import InputError

ROOT = Path(__file__).resolve().parent.parent
FOLDER = "notebooks"
STAMP = "sim"
COMMAND = "python -m tools.notebooks"
KERNEL = "python3"

_PROBE_SETUP = """
import os as _os, sys as _sys, types as _types
_probe = _types.ModuleType("_sim_notebook_probe")
_probe.read, _probe.written = set(), set()
def _audit(event, args, _probe=_probe, _os=_os):
    if event != "open" or not isinstance(args[0], (str, bytes, _os.PathLike)):
        return
    mode, flags = args[1] or "", args[2] or 0
    write = any(c in mode for c in "wax+") or flags & (_os.O_WRONLY | _os.O_RDWR | _os.O_CREAT)
    (_probe.written if write else _probe.read).add(_os.path.abspath(_os.fsdecode(args[0])))
_sys.modules[_probe.__name__] = _probe
_sys.addaudithook(_audit)
del _os, _sys, _types, _probe, _audit
"""

_PROBE_REPORT = """
import json as _json, sys as _sys
_probe = _sys.modules["_sim_notebook_probe"]
print(_json.dumps({"modules": sorted({m.__file__ for m in list(_sys.modules.values())
                                      if (getattr(m, "__name__", "") == "sim"
                                          or getattr(m, "__name__", "").startswith("sim."))
                                      and getattr(m, "__file__", None)}),
                   "read": sorted(_probe.read - _probe.written)}))
del _json, _sys, _probe
"""


class NotebookError(Exception):
    """A cell raised while a notebook ran (the message names the notebook,
    the cell and the error)."""


def notebook_paths(root: Path = ROOT) -> list[Path]:
    """The notebooks of the repository at ``root``, by name."""
    return sorted((root / FOLDER).glob("*.ipynb"))


def read(path: Path) -> Any:
    """The notebook at ``path`` (nbformat 4); InputError if it is not one."""
    import nbformat

    try:
        return nbformat.read(path, as_version=4)
    except (OSError, ValueError, KeyError) as error:
        raise InputError(f"not a readable notebook ({error.__class__.__name__}: {error})",
                         source=str(path)) from None


def write(path: Path, nb: Any) -> None:
    """Store ``nb`` at ``path`` atomically (a temporary file, then a rename)."""
    import nbformat

    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            nbformat.write(nb, handle)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


# ------------------------------------------------------------- parameters

def parameters_cell(nb: Any) -> int | None:
    """Index of the cell tagged ``parameters``, or None."""
    for i, cell in enumerate(nb.cells):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return i
    return None


def with_parameters(nb: Any, parameters: Mapping[str, Any], source: str = "notebook") -> Any:
    """A copy of ``nb`` with a cell assigning ``parameters`` (Python values)
    right after its parameters cell; each name must be assigned there."""
    import copy

    import nbformat

    index = parameters_cell(nb)
    if index is None:
        raise InputError("has no cell tagged 'parameters' to override", source=source)
    assigned = {t.id for node in ast.walk(ast.parse(nb.cells[index].source))
                if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    unknown = sorted(set(parameters) - assigned)
    if unknown:
        raise InputError(f"its parameters cell does not set {', '.join(unknown)} (it sets "
                         f"{', '.join(sorted(assigned)) or 'nothing'})", source=source)
    out = copy.deepcopy(nb)
    code = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    cell = nbformat.v4.new_code_cell(f"# Injected parameters\n{code}")
    cell.metadata["tags"] = ["injected-parameters"]
    out.cells.insert(index + 1, cell)
    return out


# --------------------------------------------------------------- running

class Kernel:
    """A notebook's kernel, kept alive after its cells ran: :meth:`run`
    executes more code in it; ``client`` is the nbclient client (its ``km``
    the kernel manager)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name

    def run(self, code: str) -> str:
        """Execute ``code`` in the kernel (not added to the notebook); its
        standard output. NotebookError if it raises."""
        import nbformat
        from nbclient.exceptions import CellExecutionError

        cell = nbformat.v4.new_code_cell(code)
        nb = self.client.nb
        nb.cells.append(cell)
        try:
            self.client.execute_cell(cell, len(nb.cells) - 1, store_history=False)
        except CellExecutionError as error:
            raise NotebookError(f"{self.name}: {error}") from None
        finally:
            nb.cells.pop()
        return "".join(o.get("text", "") for o in cell.outputs
                       if o.output_type == "stream" and o.name == "stdout")


@contextmanager
def running(nb: Any, *, root: Path = ROOT, name: str = "notebook", timeout: float = 600
            ) -> Iterator[Kernel]:
    """Execute every cell of ``nb`` (in place) in a fresh kernel whose
    working directory is ``root`` and whose ``PYTHONPATH`` starts with it;
    yield the live :class:`Kernel`, shut down on exit. The kernel talks over
    local sockets (ipc), not TCP. NotebookError names the first cell that
    raised."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from traitlets.config import Config

    path = os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="sim-kernel-") as sockets:
        config = Config()
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = str(Path(sockets) / "kernel")
        client = NotebookClient(nb, config=config, timeout=timeout, kernel_name=KERNEL,
                                record_timing=False, store_widget_state=False,
                                resources={"metadata": {"path": str(root)}})
        with client.setup_kernel(env={**os.environ, "PYTHONPATH": path}):
            kernel = Kernel(client, name)
            kernel.run(_PROBE_SETUP)
            count = 0
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                count += 1
                try:
                    client.execute_cell(cell, index, execution_count=count)
                except CellExecutionError as error:
                    raise NotebookError(f"{name}: cell {index} raised:\n{error}") from None
            yield kernel


@dataclass(frozen=True)
class Executed:
    """A notebook run: the executed notebook ``nb``, its ``inputs``
    (repository-relative path -> SHA-256) and the ``seconds`` it took."""

    nb: Any
    inputs: dict[str, str]
    seconds: float


def execute(path: Path, *, root: Path = ROOT, parameters: Mapping[str, Any] | None = None,
            timeout: float = 600) -> Executed:
    """Run the notebook at ``path`` (with ``parameters`` replaced, if given)
    and measure its inputs; the notebook returned carries the stamp only
    when it ran with its own parameters."""
    start, started = time.perf_counter(), time.time()
    nb = read(path)
    if parameters:
        nb = with_parameters(nb, parameters, str(path))
    with running(nb, root=root, name=path.name, timeout=timeout) as kernel:
        report = json.loads(kernel.run(_PROBE_REPORT))
    inputs = _inputs(report, root, started)
    nb.metadata.pop(STAMP, None)
    if not parameters:
        nb.metadata[STAMP] = {"command": COMMAND, "code_sha256": code_hash(nb),
                              "inputs": inputs}
    return Executed(nb, inputs, time.perf_counter() - start)


def _inputs(report: Mapping[str, list[str]], root: Path, started: float) -> dict[str, str]:
    modules = [Path(f) for f in report["modules"]]
    outside = [f for f in modules if not f.is_relative_to(root / "sim")]
    if outside:
        raise InputError(f"the kernel imported sim from {outside[0].parent}, not from the "
                         f"checkout at {root}", source="kernel")
    read = [Path(f) for f in report["read"]]
    tracked = _tracked(root)
    data = [f for f in read if f.is_file() and f.is_relative_to(root)
            and "__pycache__" not in f.parts and not f.is_relative_to(root / ".git")
            and not f.is_relative_to(sys.prefix) and not f.is_relative_to(sys.base_prefix)
            and f.stat().st_mtime < started
            and (tracked is None or _relative(f, root) in tracked)]
    return {_relative(f, root): file_hash(f) for f in sorted(set(modules) | set(data))}


def _tracked(root: Path) -> set[str] | None:
    """The files git tracks under ``root`` (None outside a git checkout): a
    file it ignores (an install's ``sim.egg-info``, results under
    ``reports/``) is not in a fresh clone, so it is no input to stamp."""
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {name for name in out.decode("utf-8", "surrogateescape").split("\0") if name}


def _relative(path: Path, root: Path) -> str:
    return Path(os.path.relpath(path, root)).as_posix()


# ------------------------------------------------------------- freshness

def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def code_hash(nb: Any) -> str:
    """SHA-256 of the kernel name and the code cells' sources, in order
    (markdown edits do not change outputs, so they do not count)."""
    digest = hashlib.sha256(KERNEL.encode())
    for cell in nb.cells:
        if cell.cell_type == "code":
            digest.update(b"\0" + cell.source.encode())
    return digest.hexdigest()


def staleness(path: Path, root: Path = ROOT) -> list[str]:
    """Why the stored outputs of the notebook at ``path`` are not those its
    code and inputs make now (empty when they are): no stamp, code cells
    edited, an input changed or gone, a cell never run or stored with an error."""
    nb = read(path)
    stamp = nb.metadata.get(STAMP)
    if not stamp:
        return [f"it was not executed by {COMMAND} (no stamp)"]
    reasons = []
    if stamp.get("code_sha256") != code_hash(nb):
        reasons.append("its code cells changed since its outputs were made")
    for name, digest in sorted(stamp.get("inputs", {}).items()):
        file = root / name
        if not file.is_file():
            reasons.append(f"{name} is gone")
        elif file_hash(file) != digest:
            reasons.append(f"{name} changed")
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    reasons += [f"cell {i} was not run" for i, c in code if c.execution_count is None]
    reasons += [f"cell {i} is stored with an error" for i, c in code
                if any(o.output_type == "error" for o in c.outputs)]
    return reasons


# ------------------------------------------------------------------- CLI

def _parameter(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise InputError(f"--set wants NAME=VALUE (a Python literal), got {text!r}")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise InputError(f"--set {name}: {value!r} is not a Python literal") from None


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.notebooks``: see the module docstring."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=(
        "Execute the notebooks and store them with their outputs and a stamp of their inputs."))
    parser.add_argument("paths", nargs="*", type=Path,
                        help=f"notebooks (default: every {FOLDER}/*.ipynb)")
    parser.add_argument("--check", action="store_true",
                        help="execute nothing; exit 1 if a stored notebook is stale")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="replace a parameter (the notebook is executed, not stored)")
    parser.add_argument("--timeout", type=float, default=600, help="per cell (seconds)")
    args = parser.parse_args(argv)
    try:
        paths = [p.resolve() for p in args.paths] or notebook_paths()
        for p in paths:
            if not p.is_file():
                raise InputError("no such notebook", source=str(p))
        parameters = dict(_parameter(t) for t in args.set)
        if args.check:
            return _check(paths)
        for p in paths:
            print(f"executing {_relative(p, ROOT)} ...", file=sys.stderr, flush=True)
            run = execute(p, parameters=parameters, timeout=args.timeout)
            if not parameters:
                write(p, run.nb)
            print(f"  {'stored' if not parameters else 'ran (not stored)'} in "
                  f"{run.seconds:.1f} s; {len(run.inputs)} inputs stamped", file=sys.stderr)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except NotebookError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _check(paths: list[Path]) -> int:
    stale = 0
    for p in paths:
        reasons = staleness(p)
        print(f"{_relative(p, ROOT)}: {'fresh' if not reasons else 'stale'}")
        for reason in reasons:
            print(f"  {reason}")
        stale += bool(reasons)
    if stale:
        print(f"refresh with: {COMMAND}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
