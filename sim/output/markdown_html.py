"""Markdown to self-contained HTML (styles inline, figures embedded as base64
PNG, nothing fetched): the subset of Markdown our reports write (headings,
paragraphs, tables, code blocks, lists, images, inline code and emphasis).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping

_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #1b1b1b; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f1ea; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f4f4f4; padding: 0 0.2em; border-radius: 3px; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
pre code { background: none; padding: 0; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
"""


_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
"""A backslash escape of ASCII punctuation (CommonMark): the character itself."""
_HIDDEN = 0xF0000
_HIDDEN_CHAR = re.compile("[\U000F0000-\U000F007F]")


def _hide(text: str) -> str:
    """``text`` with each backslash-escaped character moved to a private-use
    code point, out of reach of the code-span, bold and cell splitting below."""
    return _ESCAPE.sub(lambda m: chr(_HIDDEN + ord(m.group(1))), text)


def _reveal(text: str, *, literal: bool = False) -> str:
    """Undo :func:`_hide`: each hidden character HTML-escaped, or (``literal``)
    as its Markdown escape again."""
    def shown(match: re.Match[str]) -> str:
        char = chr(ord(match.group()) - _HIDDEN)
        return "\\" + char if literal else html.escape(char)

    return _HIDDEN_CHAR.sub(shown, text)


def _plain(text: str) -> str:
    """The text a run of Markdown text stands for: escapes and entities decoded."""
    return html.unescape(_reveal(_hide(text)))


def _inline(text: str) -> str:
    """Inline Markdown (code spans, bold, backslash escapes, entities) of one
    line, HTML-escaped."""
    parts = _hide(text).split("`")
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # inside a code span: no escapes, no entities
            out.append(f"<code>{html.escape(_reveal(part, literal=True))}</code>")
        else:
            escaped = html.escape(html.unescape(part))
            out.append(_reveal(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)))
    return "".join(out)


def _cells(line: str) -> list[str]:
    """The cells of a table row, split at pipes that are not escaped."""
    return [_reveal(c, literal=True).strip()
            for c in _hide(line).strip().strip("|").split("|")]


def _table(lines: list[str]) -> str:
    head, align, body = _cells(lines[0]), _cells(lines[1]), [_cells(x) for x in lines[2:]]
    right = [a.endswith(":") for a in align]

    def row(cells: list[str], tag: str) -> str:
        # as GitHub's tables: a row as wide as the header (excess cells
        # dropped, missing ones empty)
        cells = (cells + [""] * len(head))[:len(head)]
        attrs = [' class="r"' if r else "" for r in (right + [False] * len(head))]
        return "<tr>" + "".join(f"<{tag}{attrs[i]}>{_inline(c)}</{tag}>"
                                for i, c in enumerate(cells)) + "</tr>"

    return ("<table><thead>" + row(head, "th") + "</thead><tbody>"
            + "".join(row(r, "td") for r in body) + "</tbody></table>")


_IMAGE = re.compile(r"^!\[(?P<alt>(?:\\.|[^\]\\])*)\]\((?P<src>[^)]+)\)$")


def markdown_to_html(markdown: str, images: Mapping[str, bytes], *, title: str) -> str:
    """A self-contained HTML page of ``markdown`` (the subset reports use:
    headings, paragraphs, pipe tables, fenced code, ``-`` lists, code spans,
    bold, and images alone on a line). An image's source is looked up in
    ``images`` ({source: PNG bytes}) and embedded as a base64 data URI; an
    unknown source is an error rather than a broken picture."""
    lines = markdown.splitlines()
    out: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append("<p>" + " ".join(_inline(x) for x in paragraph) + "</p>")
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            out.append("<pre><code>" + html.escape("\n".join(lines[i + 1:j])) + "</code></pre>")
            i = j + 1
            continue
        if stripped.startswith("|"):
            flush()
            j = i
            while j < len(lines) and lines[j].strip().startswith("|"):
                j += 1
            out.append(_table(lines[i:j]))
            i = j
            continue
        if stripped.startswith("- "):
            flush()
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(f"<li>{_inline(lines[i].strip()[2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        heading = re.match(r"^(#{1,6}) (.*)$", stripped)
        image = _IMAGE.match(stripped)
        if heading:
            flush()
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif image:
            flush()
            src, alt = image.group("src"), image.group("alt")
            if src not in images:
                raise KeyError(f"no image data for {src!r}")
            data = base64.b64encode(images[src]).decode("ascii")
            out.append(f'<figure><img src="data:image/png;base64,{data}" '
                       f'alt="{html.escape(_plain(alt))}"><figcaption>{_inline(alt)}</figcaption>'
                       "</figure>")
        elif not stripped:
            flush()
        else:
            paragraph.append(stripped)
        i += 1
    flush()
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(out) + "\n</body>\n</html>\n")
