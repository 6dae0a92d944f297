"""Finding and opening what an import reads: files, folders, gzip, JSON documents.

Formats are told apart by content, never by file name. :func:`sniff` reads a
file's first bytes (through gzip when the gzip magic is there) and says what
kind of container it is; :func:`read_json` then parses a JSON file once, as
one document or as a stream of documents (JSON Lines, or concatenated JSON
values, as OpenTelemetry's file exporters write). Folders are walked in sorted
order (a folder's own files before its subfolders), so imports are
deterministic; a folder that is itself a trace folder is one source.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.traces.model import is_trace_folder
from sim.traces.skips import INVALID_JSON, UNREADABLE, Unusable

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
PARQUET_MAGIC = b"PAR1"
_HEAD = 4096
_INSPECT_JSON_HEAD = re.compile(rb'\A\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:\s*"[a-z_]+"'
                                rb'\s*,\s*"eval"\s*:')


@dataclass(frozen=True, slots=True)
class Input:
    """One thing to import: a file, or a trace folder (``folder`` True).
    ``named`` is True when the user named it (not found inside a folder)."""

    path: Path
    named: bool
    folder: bool = False


def inputs(sources: Sequence[str | os.PathLike]) -> Iterator[Input]:
    """The inputs of ``sources`` (files and folders, in the given order; each
    folder walked in sorted order). A missing source is an InputError."""
    for source in sources:
        path = Path(source)
        if path.is_dir():
            yield from _walk(path, named=True)
        elif path.is_file():
            yield Input(path, named=True)
        else:
            raise InputError("no such file or folder", source=str(path))


def _walk(folder: Path, named: bool) -> Iterator[Input]:
    if is_trace_folder(folder):
        yield Input(folder, named=named, folder=True)
        return
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as error:
        raise InputError(f"cannot list folder ({error.strerror})", source=str(folder)) from None
    subfolders = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            subfolders.append(Path(entry.path))
        elif entry.is_file():
            yield Input(Path(entry.path), named=False)
    for sub in subfolders:
        yield from _walk(sub, named=False)


def sniff(path: Path) -> str:
    """What ``path`` holds, from its first bytes: ``"json"`` (JSON text, plain
    or gzip-compressed), ``"inspect-json"`` (an Inspect AI JSON log, from its
    leading keys), ``"zip"``, ``"parquet"`` or ``"other"``."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD)
        if head.startswith(GZIP_MAGIC):
            head = _gzip_head(path)
    except OSError as error:
        raise Unusable(UNREADABLE, error.strerror or str(error)) from None
    if head.startswith(ZIP_MAGIC):
        return "zip"
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if _INSPECT_JSON_HEAD.match(head):
        return "inspect-json"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return "json" if text[:1] in (b"{", b"[") else "other"


def _gzip_head(path: Path) -> bytes:
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = b""
    with open(path, "rb") as handle:
        while len(out) < _HEAD:
            chunk = handle.read(65536)
            if not chunk:
                break
            try:
                out += decompressor.decompress(chunk, _HEAD - len(out))
            except zlib.error:
                break
    return out


def read_text(path: Path) -> str:
    """The whole text of ``path`` (gunzipped when compressed), as UTF-8."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        if data.startswith(GZIP_MAGIC):
            data = gzip.decompress(data)
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise Unusable(INVALID_JSON, f"truncated or corrupt gzip ({error})") from None
    except OSError as error:
        raise Unusable(UNREADABLE, error.strerror or str(error)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise Unusable(INVALID_JSON, f"not UTF-8 text (byte {error.start})") from None


def read_json(path: Path) -> list[Any]:
    """The JSON values of ``path``: one for a JSON document, several for JSON
    Lines or concatenated values. Truncated or invalid JSON is
    :class:`Unusable` with the line and column."""
    text = read_text(path)
    decoder = json.JSONDecoder()
    values = []
    position = _skip_space(text, 0)
    while position < len(text):
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            ends_inside = (error.pos >= len(text.rstrip())
                           or error.msg.startswith("Unterminated string"))
            what = "truncated" if ends_inside else "invalid"
            raise Unusable(INVALID_JSON, f"{what} JSON at line {error.lineno} column "
                                         f"{error.colno}: {error.msg}") from None
        values.append(value)
        position = _skip_space(text, position)
    if not values:
        raise Unusable(INVALID_JSON, "empty file")
    return values


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position
