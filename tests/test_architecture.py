"""The architecture holds: imports follow ``tests/layering.toml`` (which part of
sim may import which), the layering has no cycle, and the harness imports only
the standard library and itself (DESIGN.md, Rule 1)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import sim

SIM = Path(sim.__file__).parent
LAYERING = tomllib.loads((Path(__file__).parent / "layering.toml").read_text())
MAY_IMPORT: dict[str, list[str]] = LAYERING["may_import"]
STDLIB_ONLY: list[str] = LAYERING["stdlib_only"]
FILES = sorted(SIM.rglob("*.py"))


def part_of(path: Path) -> str:
    """The layering key of a source file: its folder under sim/, or its module
    name for a top-level module (``__init__`` for sim/__init__.py)."""
    parts = path.relative_to(SIM).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imports(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path`` (or in
    ``source``, read as if it were that file); ``from sim import x`` gives
    ``sim.x``; a relative import is resolved against the file's package."""
    found = []
    package = ".".join(("sim", *path.relative_to(SIM).parts[:-1]))
    for node in ast.walk(ast.parse(path.read_text() if source is None else source, str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module == "sim":
                found += [(node.lineno, f"sim.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, module))
    return found


def target_part(module: str) -> str | None:
    """The layering key ``module`` belongs to, or None outside sim."""
    parts = module.split(".")
    if parts[0] != "sim":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_part_of_sim_is_declared_in_the_layering_file() -> None:
    """A new folder or top-level module must say what it may import."""
    assert sorted({part_of(p) for p in FILES} - set(MAY_IMPORT)) == []


def test_the_layering_file_names_only_declared_parts_and_has_no_cycle() -> None:
    """Each allowed import names a declared part, and following them never
    comes back to where it started (so the layers have one direction)."""
    undeclared = {t for targets in MAY_IMPORT.values() for t in targets} - set(MAY_IMPORT)
    assert undeclared == set()
    done: set[str] = set()

    def visit(part: str, path: tuple[str, ...]) -> None:
        assert part not in path, f"cycle: {' -> '.join((*path, part))}"
        if part in done:
            return
        for target in MAY_IMPORT[part]:
            visit(target, (*path, part))
        done.add(part)

    for part in MAY_IMPORT:
        visit(part, ())


def violations(path: Path, source: str | None = None) -> list[str]:
    """The imports of ``path`` that layering.toml forbids: another part of sim
    not in its list, or, for a stdlib-only part, anything outside the standard
    library and sim."""
    own = part_of(path)
    allowed = set(MAY_IMPORT.get(own, ())) | {own}
    bad = []
    for line, module in imports(path, source):
        target = target_part(module)
        if target is None:
            if own in STDLIB_ONLY and module.split(".")[0] not in sys.stdlib_module_names:
                bad.append(f"{line}: {module} (not standard library)")
        elif target not in allowed:
            bad.append(f"{line}: {module} ({own} may not import {target})")
    return bad


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(SIM)) for p in FILES])
def test_imports_follow_the_layering(path: Path) -> None:
    """Every import of another part of sim is allowed by layering.toml; a
    stdlib-only part imports nothing outside the standard library and sim."""
    assert violations(path) == []


def test_a_forbidden_import_is_caught() -> None:
    """The check can fail: numpy, the world or the API imported from the
    harness are each reported; a relative import inside the harness is not."""
    probe = SIM / "harness" / "probe.py"
    source = ("import numpy\nfrom sim.world import world\nfrom sim import api\n"
              "from . import loop\nimport json\n")
    assert violations(probe, source) == [
        "1: numpy (not standard library)", "2: sim.world (harness may not import world)",
        "3: sim.api (harness may not import api)"]


def test_importing_the_harness_pulls_in_nothing_else() -> None:
    """Importing sim.harness in a fresh interpreter loads no third-party or
    simulation module."""
    code = ("import sys; before = set(sys.modules); import sim.harness; "
            "new = set(sys.modules) - before; "
            "bad = [m for m in new if m.split('.')[0] not in sys.stdlib_module_names "
            "and m != 'sim' and not m.startswith('sim.harness')]; "
            "print(','.join(sorted(bad)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ""


# --------------------------------------------------- modules: circles, privacy

def module_name(path: Path) -> str:
    """The dotted module name of a source file under sim/ (a package's
    ``__init__.py`` is the package)."""
    parts = ("sim", *path.relative_to(SIM).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in FILES}


def module_edges(path: Path, source: str | None = None) -> set[str]:
    """The sim modules ``path`` imports (``from sim.a import b`` is the module
    ``sim.a.b`` when that is a module, else ``sim.a``), at any depth of the file."""
    edges = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(
        ".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text() if source is None else source, str(path))):
        if isinstance(node, ast.Import):
            edges |= {a.name for a in node.names if a.name in MODULES}
        elif isinstance(node, ast.ImportFrom):
            base = (package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    ) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            for alias in node.names:
                if f"{module}.{alias.name}" in MODULES:
                    edges.add(f"{module}.{alias.name}")
                elif module in MODULES:
                    edges.add(module)
    edges.discard(module_name(path))
    return edges


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's
    algorithm, iterative): each is an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_two_modules_of_sim_import_each_other_in_a_circle() -> None:
    """The module import graph (imports inside functions and under
    TYPE_CHECKING included) has no circle: a type two modules share lives in a
    module below both (docs/architecture.md)."""
    graph = {name: module_edges(path) for name, path in MODULES.items()}
    assert circles(graph) == []


def test_a_circle_is_caught() -> None:
    """The circle finder sees a three-module circle and a self-contained chain."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def private_imports(path: Path, source: str | None = None) -> list[str]:
    """``module.name`` of every private name (``_name``, not dunder) imported
    from another sim module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text() if source is None else source, str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sim"):
            found += [f"{node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SIM)))
def test_no_private_name_is_imported_from_another_module(path: Path) -> None:
    """Privacy at module level (h11): a module's ``_name`` is its own."""
    assert private_imports(path) == []


def test_a_private_import_is_caught() -> None:
    """The privacy check sees ``from sim.x import _y`` and lets dunders pass."""
    source = "from sim.traces.repairs import _short, __all__, PUBLIC\n"
    assert private_imports(FILES[0], source) == ["sim.traces.repairs._short"]
