"""Finding and opening what an import reads: files, folders, gzip, JSON documents.

Formats are told apart by content, never by file name. :func:`sniff` reads a
file's first bytes (through gzip when the gzip magic is there) and says what
kind of container it is; :func:`read_json` then parses a JSON file once, as
one document or as a stream of documents (JSON Lines, or concatenated JSON
values, as OpenTelemetry's file exporters write). Folders are walked in sorted
order (a folder's own files before its subfolders), so imports are
deterministic; a folder that is itself a trace folder is one source.

Reads are bounded: a file (or what its gzip holds) larger than
:data:`MAX_FILE_BYTES` is skipped (``file too large``) without being read
whole; JSON nested deeper than Python's parser goes is skipped (``nested too
deep``), as is a number too long to read; a folder reached twice through
symbolic links (a loop) is walked once, and a link that cannot be followed
(``ELOOP``, dangling) is an unreadable file, counted.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.bad_input import InputError
from sim.traces.model import bounded_int, is_trace_folder
from sim.traces.skips import INVALID_JSON, TOO_DEEP, TOO_LARGE, UNREADABLE, Unusable

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
PARQUET_MAGIC = b"PAR1"
_HEAD = 4096
MAX_FILE_BYTES = 256 * 2**20
"""The largest file (after gunzip) an import reads, in bytes: 256 MiB of JSON
already takes a few GB as Python objects (the real tau2-bench and
mini-swe-agent files are a few MB)."""
_CHUNK = 1 << 20
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
    seen: set[tuple[int, int]] = set()
    for source in sources:
        path = Path(source)
        if path.is_dir():
            yield from _walk(path, named=True, seen=seen)
        elif path.is_file():
            yield Input(path, named=True)
        elif path.is_symlink():
            raise InputError(f"a symbolic link that cannot be followed ({_link_problem(path)})",
                             source=str(path))
        elif path.exists():
            raise InputError("not a regular file or folder (a device, FIFO or socket)",
                             source=str(path))
        else:
            raise InputError("no such file or folder", source=str(path))


def _link_problem(path: Path) -> str:
    try:
        os.stat(path)
    except OSError as error:
        return error.strerror or str(error)
    return "unknown"


def _walk(folder: Path, named: bool, seen: set[tuple[int, int]]) -> Iterator[Input]:
    """The inputs under ``folder`` (a folder reached again, through a link
    loop, is walked once; ``seen`` holds the folders walked)."""
    pending = [folder]
    while pending:  # depth-first, in sorted order, without recursion
        current = pending.pop()
        try:
            info = os.stat(current)
        except OSError:
            continue
        key = (info.st_dev, info.st_ino)
        if key in seen:
            continue
        seen.add(key)
        if is_trace_folder(current):
            yield Input(current, named=named and current == folder, folder=True)
            continue
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError as error:
            raise InputError(f"cannot list folder ({error.strerror})",
                             source=str(current)) from None
        subfolders = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()
                is_file = entry.is_file() or entry.is_symlink()
            except OSError:  # ELOOP: a link to itself
                is_dir, is_file = False, True
            if is_dir:
                subfolders.append(Path(entry.path))
            elif is_file:  # a dangling link or a loop too: said, not silently passed over
                yield Input(Path(entry.path), named=False)
        pending.extend(reversed(subfolders))


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
    if not path.is_file():
        raise Unusable(UNREADABLE, "not a regular file")
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


def read_text(path: Path, limit: int | None = None) -> str:
    """The whole text of ``path`` (gunzipped when compressed), as UTF-8; a
    file (or gzip content) above ``limit`` bytes (default
    :data:`MAX_FILE_BYTES`) is Unusable without being read whole."""
    limit = MAX_FILE_BYTES if limit is None else limit
    too_large = Unusable(TOO_LARGE, f"more than {limit:,} bytes (the import reads at most "
                                    f"{limit // 2**20:,} MiB per file)")
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
            if len(data) > limit:
                raise too_large
            if data.startswith(GZIP_MAGIC):
                data = _gunzip(data, limit, too_large)
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise Unusable(INVALID_JSON, f"truncated or corrupt gzip ({error})") from None
    except OSError as error:
        raise Unusable(UNREADABLE, error.strerror or str(error)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise Unusable(INVALID_JSON, f"not UTF-8 text (byte {error.start})") from None


def _gunzip(data: bytes, limit: int, too_large: Unusable) -> bytes:
    """The content of gzip ``data`` (members concatenated), at most ``limit`` bytes."""
    out = bytearray()
    while data:
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = decompressor.decompress(data, limit + 1 - len(out))
        out += chunk
        while decompressor.unconsumed_tail and len(out) <= limit:
            out += decompressor.decompress(decompressor.unconsumed_tail, limit + 1 - len(out))
        if len(out) > limit:
            raise too_large
        if not decompressor.eof:
            raise EOFError("compressed file ended before the end-of-stream marker")
        data = decompressor.unused_data.lstrip(b"\x00")
    return bytes(out)


def read_json(path: Path) -> list[Any]:
    """The JSON values of ``path``: one for a JSON document, several for JSON
    Lines or concatenated values. Truncated or invalid JSON is
    :class:`Unusable` with the line and column."""
    text = read_text(path)
    decoder = json.JSONDecoder(parse_int=bounded_int)
    values = []
    position = _skip_space(text, 0)
    while position < len(text):
        try:
            value, position = decoder.raw_decode(text, position)
        except RecursionError:
            raise Unusable(TOO_DEEP, "JSON nested deeper than the parser reads") from None
        except json.JSONDecodeError as error:
            ends_inside = (error.pos >= len(text.rstrip())
                           or error.msg.startswith("Unterminated string"))
            what = "truncated" if ends_inside else "invalid"
            raise Unusable(INVALID_JSON, f"{what} JSON at line {error.lineno} column "
                                         f"{error.colno}: {error.msg}") from None
        except ValueError as error:  # pragma: no cover - bounded_int reads any integer
            raise Unusable(INVALID_JSON, f"a value that cannot be read ({error})") from None
        values.append(value)
        position = _skip_space(text, position)
    if not values:
        raise Unusable(INVALID_JSON, "empty file")
    return values


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def inspect_archive(path: Path) -> bool:
    """Whether the zip archive at ``path`` is an Inspect AI ``.eval`` log."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return False
    return "header.json" in names or any(n.startswith("_journal/") for n in names)


def describe(doc: Any) -> str:
    """What an unrecognised JSON document looks like, for the message."""
    if isinstance(doc, dict):
        keys = ", ".join(sorted(map(str, doc))[:6])
        return f"a JSON object with keys {keys}" + ("..." if len(doc) > 6 else "") if doc \
            else "an empty JSON object"
    if isinstance(doc, list):
        return f"a JSON list of {len(doc)} items" + (
            f" ({type(doc[0]).__name__}s)" if doc else "")
    return f"a JSON {type(doc).__name__}"
