"""Reading YAML that someone else wrote: PyYAML's safe loader, made strict.

:func:`parse` differs from ``yaml.safe_load`` in six ways, each a way a
document could otherwise mislead or hang the loader:

* a key repeated in one mapping is an error naming its dotted path and both
  lines (PyYAML silently keeps the last);
* nesting deeper than :data:`~sim.scenario.limits.MAX_DEPTH` levels is an
  error while the document is read (no RecursionError);
* a document whose values, with every alias expanded, number more than
  :data:`~sim.scenario.limits.MAX_NODES` is an error as soon as the count
  passes it (an alias bomb is refused in milliseconds, not expanded), and so
  is an alias inside its own anchor (a recursive document);
* numbers in exponent form without a dot or a signed exponent (``1e6``,
  ``1.0e12``) are floats, as in YAML 1.2, not strings;
* an integer longer than :data:`LONGEST_INT` characters is an error naming
  its path (Python would raise a ValueError past 4,300 digits);
* a string holding a lone surrogate (``"\\udc80"``: an escape that is no
  Unicode character) is an error naming its path; a surrogate pair (as JSON
  writes a character beyond U+FFFF) is read as the character it encodes.

Errors are :class:`~sim.bad_input.InputError` naming the source, and the dotted
path where one is known.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from sim.bad_input import InputError
from sim.scenario.limits import MAX_DEPTH, MAX_NODES, join

_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LONE_SURROGATE = re.compile(
    "[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")
_MERGE = "tag:yaml.org,2002:merge"
_INT = "tag:yaml.org,2002:int"
LONGEST_INT = 300
"""Characters of the longest integer read (Python refuses to read one of more
than 4,300 digits, with a ValueError; no figure of a scenario comes near)."""


class _Refused(yaml.YAMLError):
    """A document the strict loader refuses: ``message`` at dotted ``path``."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


class StrictLoader(yaml.SafeLoader):
    """The safe loader with duplicate keys, deep nesting, expansion and
    recursive aliases refused (see the module docstring)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str | int] = []
        self._sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded values, depth)
        self._paths: dict[int, str] = {}  # id(mapping node) -> its dotted path

    def _where(self) -> str:
        path = ""
        for part in self._path:
            path = join(path, part)
        return path

    def compose_node(self, parent, index):
        part = None
        if isinstance(parent, MappingNode) and isinstance(index, ScalarNode):
            part = index.value
        elif isinstance(parent, SequenceNode) and isinstance(index, int):
            part = index
        if part is not None:
            self._path.append(part)
        try:
            if len(self._path) > MAX_DEPTH:
                raise _Refused(f"nests deeper than {MAX_DEPTH} levels", self._where())
            alias = self.check_event(AliasEvent)
            node = super().compose_node(parent, index)
            self._measure(node, alias)
            if not alias and isinstance(node, MappingNode):
                self._paths[id(node)] = self._where()
            return node
        finally:
            if part is not None:
                self._path.pop()

    def _measure(self, node, alias: bool) -> None:
        """Record the expanded size and depth of ``node`` (its children are
        measured already); refuse it when either passes its bound. An alias
        to a node not measured yet is an alias inside its own anchor."""
        known = self._sizes.get(id(node))
        if known is not None:
            size, depth = known
        elif alias:
            raise _Refused("an alias refers to the mapping or list that contains it "
                           "(a recursive document)", self._where() or "(top level)")
        elif isinstance(node, ScalarNode):
            size, depth = 1, 1
            if node.tag == _INT and len(node.value) > LONGEST_INT:
                raise _Refused(f"an integer of {len(node.value):,} characters (sim reads "
                               f"integers of at most {LONGEST_INT})",
                               self._where() or "(top level)")
            if _SURROGATE.search(node.value):
                node.value = self._paired(node.value)
        else:
            children = (node.value if isinstance(node, SequenceNode)
                        else [n for pair in node.value for n in pair])
            measured = [self._sizes[id(child)] for child in children]
            size = 1 + sum(m[0] for m in measured)
            depth = 1 + max((m[1] for m in measured), default=0)
        where = self._where() or "(top level)"
        if size > MAX_NODES:
            raise _Refused(f"the document holds more than {MAX_NODES:,} values once its "
                           f"aliases are expanded", where)
        if depth + len(self._path) > MAX_DEPTH + 1:
            raise _Refused(f"nests deeper than {MAX_DEPTH} levels once its aliases are "
                           f"expanded", where)
        self._sizes[id(node)] = (size, depth)

    def _paired(self, text: str) -> str:
        """``text`` with each surrogate pair (``"\\ud83d\\ude00"``, as JSON
        writes a character beyond U+FFFF) made the one character it encodes;
        a lone surrogate is refused."""
        lone = _LONE_SURROGATE.search(text)
        if lone:
            raise _Refused(f"a lone surrogate \\u{ord(lone.group()):04x} (an escape that is "
                           f"no Unicode character)", self._where() or "(top level)")
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")

    def construct_mapping(self, node, deep=False):
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE:
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: PyYAML reports it below
                    continue
                if first is not None:
                    where = "line" if first == line else "lines"
                    lines = str(line) if first == line else f"{first} and {line}"
                    raise _Refused(f"duplicate key {key!r} ({where} {lines})",
                                   join(self._paths.get(id(node), ""), str(key)))
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT,
                                   list("-+0123456789."))


def parse(text: str, source: str = "", *, malformed_as_text: bool = False) -> Any:
    """The value of the YAML document ``text`` (None when empty), read by
    :class:`StrictLoader`; an InputError naming ``source`` otherwise. With
    ``malformed_as_text`` (a ``--set`` value), text that is not YAML is
    returned as the string it is; a refused document is still an error."""
    try:  # the reader checks the characters as it is made (a control byte)
        loader = StrictLoader(text)
    except yaml.YAMLError as error:
        if malformed_as_text:
            return text
        raise InputError(f"malformed YAML: {_problem(error)}", source=source) from None
    try:
        return loader.get_single_data()
    except _Refused as refused:
        raise InputError(refused.message, source=source, path=refused.path) from None
    except yaml.YAMLError as error:
        if malformed_as_text:
            return text
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise InputError(f"malformed YAML: {where}{problem}", source=source) from None
    finally:
        loader.dispose()


def key_lines(text: str) -> dict[str, int]:
    """The 1-based line of every key and list item of the YAML document
    ``text``, by dotted path (``a.b``, ``a[2].c``), for error messages; {} when
    the text is not a YAML document (:func:`parse` reports that). Call it on a
    document :func:`parse` accepted (it composes the node tree once more)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}
    stack: list[tuple[Any, str]] = [(root, "")]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if node is None or id(node) in seen:  # an alias: its lines are its anchor's
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            for key_node, value in node.value:
                if isinstance(key_node, ScalarNode):
                    child = join(path, key_node.value)
                    lines.setdefault(child, key_node.start_mark.line + 1)
                    stack.append((value, child))
        elif isinstance(node, SequenceNode):
            for index, value in enumerate(node.value):
                child = join(path, index)
                lines.setdefault(child, value.start_mark.line + 1)
                stack.append((value, child))
    return lines


def line_of(lines: dict[str, int], path: str) -> int | None:
    """The line of ``path``, or of its nearest ancestor in ``lines``."""
    while path:
        if path in lines:
            return lines[path]
        cut = max(path.rfind("."), path.rfind("["))
        if cut <= 0:
            return None
        path = path[:cut]
    return None


def _problem(error: yaml.YAMLError) -> str:
    """A reader's error (a character YAML does not allow) in one line."""
    if isinstance(error, yaml.reader.ReaderError):
        return (f"character {error.character:#06x} at position {error.position} is not "
                f"allowed in YAML ({error.reason})")
    return str(error).splitlines()[0]
