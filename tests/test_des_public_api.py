"""The simulator uses SimPy through its public API only (issue 39): no module
of ``sim/`` reads or writes a private attribute of SimPy's environments,
events, processes or resources (``env._queue``, ``event._value``,
``process._target``, ...); a class's own private attributes
(``self._value``) are its business."""

from __future__ import annotations

import ast
from collections.abc import Generator
from pathlib import Path

import simpy

SIM = Path(__file__).resolve().parent.parent / "sim"
# set only in some states (a defused failure), so not found by looking at fresh objects
LATE = frozenset({"_defused", "_triggered"})


def simpy_private_names() -> frozenset[str]:
    """The single-underscore names of SimPy's environment, events, processes
    and resources: their classes' members and a fresh instance's fields."""
    env = simpy.Environment()

    def waiting() -> Generator[simpy.Event, None, None]:
        yield env.timeout(1)

    resource = simpy.Resource(env, 1)
    objects = (env, env.event(), env.timeout(1), env.process(waiting()), resource,
               resource.request(), simpy.Container(env), simpy.Store(env))
    names = set(LATE)
    for obj in objects:
        for cls in type(obj).__mro__:
            names.update(vars(cls))
        names.update(getattr(obj, "__dict__", ()))
    return frozenset(n for n in names if n.startswith("_") and not n.startswith("__"))


def private_uses(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of each attribute in ``names`` read or written on
    anything but ``self``, or on ``self`` too inside a class derived from a
    SimPy class (named through ``import simpy`` or ``from simpy... import``)."""
    tree = ast.parse(source)
    from_simpy = {"simpy"} | {alias.asname or alias.name for node in ast.walk(tree)
                              if isinstance(node, ast.ImportFrom)
                              and (node.module or "").split(".")[0] == "simpy"
                              for alias in node.names}
    subclassed = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                  and any(_root(base) in from_simpy for base in node.bases)]
    inside = {id(node) for cls in subclassed for node in ast.walk(cls)}
    return sorted((node.lineno, node.attr) for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr in names
                  and (id(node) in inside
                       or not (isinstance(node.value, ast.Name) and node.value.id == "self")))


def _root(node: ast.expr) -> str | None:
    """The leftmost name of a dotted expression (``simpy.Environment``: simpy)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def test_simpys_private_names_are_found() -> None:
    """The names the issue lists are among those checked."""
    assert {"_queue", "_eid", "_now", "_ok", "_value", "_defused", "_target",
            "_resume"} <= simpy_private_names()


def test_a_private_attribute_of_another_object_is_caught() -> None:
    names = simpy_private_names()
    source = ("def f(env, event):\n"
              "    head = env._queue[0]\n"
              "    event._value = None\n"
              "    self._value = 1\n")
    assert private_uses(source, names) == [(2, "_queue"), (3, "_value")]
    derived = ("import simpy\n"
               "class Clock(simpy.Environment):\n"
               "    def run_all(self):\n"
               "        self._now = self.peek()\n")
    assert private_uses(derived, names) == [(4, "_now")]


def test_no_module_of_sim_touches_a_simpy_private_attribute() -> None:
    names = simpy_private_names()
    found = [f"{path.relative_to(SIM.parent)}:{line}: .{name}"
             for path in sorted(SIM.rglob("*.py"))
             for line, name in private_uses(path.read_text(encoding="utf-8"), names)]
    assert found == []
