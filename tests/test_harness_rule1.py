"""Rule 1 (DESIGN.md): the harness is real and sans-IO; it imports only the
standard library and itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import sim.harness

HARNESS = Path(sim.harness.__file__).parent
FILES = sorted(HARNESS.rglob("*.py"))


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: inside sim.harness by construction
                found.append((node.lineno, "sim.harness"))
            else:
                found.append((node.lineno, node.module or ""))
    return found


def test_the_harness_has_modules_to_check() -> None:
    """The check below looks at the real package (and finds the loop)."""
    assert HARNESS / "loop.py" in FILES


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_harness_imports_only_the_standard_library_and_itself(path: Path) -> None:
    """Every import in sim/harness is a standard-library module
    (sys.stdlib_module_names) or part of sim.harness: no numpy, simpy, pandas,
    sim.world or sim.engines."""
    bad = [f"{path.name}:{line} imports {name}" for line, name in _imports(path)
           if name.split(".")[0] not in sys.stdlib_module_names
           and name != "sim.harness" and not name.startswith("sim.harness.")]
    assert bad == []


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
