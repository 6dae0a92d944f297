"""User text made safe to show: on a terminal, in Markdown, in XML.

Names and labels come from files a user did not write all of (a scenario's
name, a sweep's values, a trace's model name and exit label, a task id, a tool
name). Whatever they hold, showing them must not run anything or break what
holds them:

- :func:`printable`: for a terminal (and for XML, which cannot hold most
  control characters). Every control character (C0 but newline and tab,
  DEL, C1), so every escape sequence ESC or CSI would start, is replaced by
  its visible Python escape (``\\x1b``, ``\\x9b``, ``\\r``); with ``newlines=False``
  newline and tab too (a name on one line). Bidirectional overrides
  (U+202A-U+202E, U+2066-U+2069), which reorder what a terminal shows, are
  escaped as well (``\\u202e``), as is a lone surrogate (``\\ud800``, which
  no UTF-8 file can hold) and the private-use code points U+F0000-U+F007F
  (which :mod:`sim.output.markdown_html` uses for escaped characters).
- :func:`md_text`: for Markdown text, a table cell included: :func:`printable`
  on one line, then ``&`` and ``<`` as HTML entities (no tag, no comment, no
  autolink, no entity; a ``>`` alone is text, so ``->`` stays readable), and
  the backslash, backtick, ``*``, ``[``, ``]`` and ``|`` backslash-escaped (no
  code span, no emphasis, no link or image, no extra table cell).
  CommonMark and GitHub show the value as it was; so does
  :func:`sim.output.markdown_html.markdown_to_html`.
- :func:`md_code`: a value shown as inline code where it is plain (nothing
  :func:`md_text` would change), else as :func:`md_text` (a code span cannot
  escape ``<`` or a pipe in a table).
"""

from __future__ import annotations

import re
from typing import Any

_CONTROLS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
             "\U000f0000-\U000f007f")
_CONTROL = re.compile(f"[{_CONTROLS}]")
_CONTROL_OR_SPACE = re.compile(f"[{_CONTROLS}\t\n]")
_MD_SPECIAL = re.compile(r"([\\`*\[\]|])")
_HTML = {"&": "&amp;", "<": "&lt;"}
_HTML_SPECIAL = re.compile("[&<]")


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(value: Any, *, newlines: bool = True) -> str:
    """``str(value)`` with every control character replaced by its visible
    escape (see the module docstring); newline and tab kept unless
    ``newlines`` is False."""
    return (_CONTROL if newlines else _CONTROL_OR_SPACE).sub(_escape, str(value))


def md_text(value: Any) -> str:
    """``str(value)`` as Markdown text that shows it verbatim on one line
    (see the module docstring): safe in a paragraph, a heading, a list item,
    a table cell and an image's alt text."""
    text = _HTML_SPECIAL.sub(lambda m: _HTML[m.group()], printable(value, newlines=False))
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_code(value: Any) -> str:
    """``str(value)`` as inline code when it is plain, else :func:`md_text`."""
    text = str(value)
    return f"`{text}`" if text and md_text(text) == text else md_text(text)
