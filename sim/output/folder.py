"""Results folders written safely: checked before a run, replaced whole after it.

A command that writes a results folder (``run``, ``sweep``, ``capacity``,
``compare``) calls :func:`prepare` before it simulates anything and
:func:`replace` to write. :func:`prepare` refuses (an
:class:`~sim.bad_input.InputError`, exit status 2):

* an ``--out`` that is a file, or whose folder cannot be created or written
  (``/proc/x``, a read-only place): found in a second, not after a long run;
* a non-empty folder holding anything but the files sim writes (it is not
  a results folder; nothing of yours is ever deleted);
* a results folder of a *different* run (its recorded identity, the
  resolved scenario, differs), unless ``force``: a 10-task experiment never
  silently replaces a 10,000-task result. The same run may be written again.

:func:`replace` writes every file into a fresh temporary folder beside the
target and only then swaps it in (the old folder is renamed aside, the new
one renamed into place, the old one deleted). A failure while writing leaves
the previous results as they were and no temporary folder behind; a reader
sees the old folder or the new one, never a mix.

Without ``--out`` each distinct run gets its own folder under the results
root (:func:`run_folder_name`): ``bounded`` for ``sweep bounded``,
``bounded-run`` for ``run bounded``, ``bounded-run-harness.budgets.steps=30``
for ``run bounded --set harness.budgets.steps=30``. So trying a variant never
needs ``--force``, and the same command run again lands in the same folder
(where :func:`prepare` still refuses a changed scenario without ``force``).

Two commands writing one ``--out`` at once would trample each other's kept
chunks and folders: :func:`prepare` takes an exclusive lock
(``.<name>.lock`` beside the folder, ``flock``: released when the command
ends, even by SIGKILL) and a second command is refused at once with a
clear message; :func:`replace` releases it.

A disk that fills up or turns read-only while results are written is bad
luck, not a bug: :func:`disk_errors` turns such an :class:`OSError` (ENOSPC,
EDQUOT, EROFS, EACCES, EPERM, EIO, EFBIG) into an
:class:`~sim.bad_input.InputError` (exit status 2) naming the path and what to
do, after the writer has dropped its temporary files; :func:`replace`
applies it, so earlier results stay as they were and nothing half-written is
left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sim.bad_input import InputError
from sim.output.provenance import identity
from sim.user_paths import NAME_MAX, check_path

RESULT_ENTRIES = frozenset({
    "results.parquet", "summary.json", "report.md", "report.html", "timeseries.parquet",
    "comparison.json", "figures", "base", "candidate", "junit.xml", "summary.md",
    "runs.parquet", "calls.parquet",
    "recommended.yaml", "frontier.csv", "tune.json", "stopped_runs.csv", "models"})
"""Names sim writes into a results folder; anything else makes a folder foreign."""

IDENTITY_FILES = ("summary.json", "comparison.json", "tune.json")
"""Files whose ``provenance`` says which run a folder holds (:func:`identity`)."""


WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                          errno.EIO, errno.EFBIG})
"""Errors of a disk being written, rather than of the program writing it."""
_WRITE_WORDS = ("no space left", "read-only file system", "disk quota", "permission denied",
                "file too large", "input/output error")


def write_error(error: BaseException) -> bool:
    """True when ``error`` is a failure of the disk being written (full,
    read-only, over quota, not permitted, failing): by errno, or by its words
    for errors (pyarrow's) that carry none."""
    if not isinstance(error, OSError):
        return False
    if error.errno is not None:
        return error.errno in WRITE_ERRNOS
    text = str(error).lower()
    return any(words in text for words in _WRITE_WORDS)


def describe_write_error(error: OSError) -> str:
    """What went wrong, in a few words (``no space left on device (ENOSPC)``)."""
    name = errno.errorcode.get(error.errno or 0, "")
    text = (error.strerror or str(error)).splitlines()[0]
    return f"{text[:1].lower()}{text[1:]}" + (f" ({name})" if name else "")


class WriteFailed(InputError):
    """A disk's write failure: ``target`` could not be written because of
    ``reason``; the message adds what was kept and what to do."""

    def __init__(self, target: str | os.PathLike, reason: str, after: str = "") -> None:
        super().__init__(f"cannot write {target}: {reason}{'; ' + after if after else ''}")
        self.target = target
        self.reason = reason


@contextlib.contextmanager
def disk_errors(target: str | os.PathLike, after: str = "") -> Iterator[None]:
    """Turn a disk's write failure inside the block into a :class:`WriteFailed`
    (an InputError): ``cannot write <target>: <what>; <after>`` (what was kept,
    what to do). An inner block's WriteFailed is told again with this block's
    ``after`` (the outer block knows what the failure means); any other error
    passes unchanged."""
    try:
        yield
    except WriteFailed as failed:
        raise WriteFailed(failed.target, failed.reason, after or "") from None
    except OSError as error:
        if not write_error(error):
            raise
        raise WriteFailed(target, describe_write_error(error), after) from None


SIBLING_EXTRA = 16
"""The most bytes the names sim writes beside a target add to its name
(``.<name>.check.`` and 8 random characters; ``.<name>.partial``,
``.<name>.new.`` and 8 random characters, and ``.<name>.<random>.tmp`` are
shorter)."""
MAX_TARGET_NAME = NAME_MAX - SIBLING_EXTRA
"""The longest name of a folder or file sim writes (bytes), so that every
temporary name beside it fits in :data:`~sim.user_paths.NAME_MAX`."""


MAX_READABLE_SUFFIX = 48
"""The longest suffix of overrides written as they are in a default folder's
name; longer ones (or ones with characters unsafe in a name) are a hash."""
_NAME_SAFE = re.compile(r"[A-Za-z0-9._=,+-]*")


@contextlib.contextmanager
def secondary_output(target: str | os.PathLike, flag: str, kept: str) -> Iterator[None]:
    """Writing a secondary output (``--otel``, ``--junit``, ``--summary-md``)
    after the main results are written: any OSError inside (a full or
    read-only disk, a folder made at the target meanwhile) becomes an
    InputError (exit status 2) naming ``flag`` and its target, what went
    wrong and ``kept`` (where the main results are), never a traceback."""
    try:
        yield
    except WriteFailed as failed:
        raise InputError(f"{flag} {target}: cannot write it ({failed.reason}); {kept}"
                         ) from None
    except OSError as error:
        raise InputError(f"{flag} {target}: cannot write it ({describe_write_error(error)}); "
                         f"{kept}") from None


def run_folder_name(name: str, command: str = "", overrides: Sequence[str] = (), *,
                    plain: str = "sweep") -> str:
    """The default results folder name of ``command`` run on the scenario
    ``name`` with ``overrides`` (``path=value`` as given, in order: ``--set``,
    then ``tasks=``, ``seed=``): ``name``, then ``-command`` unless it is the
    ``plain`` command (``sweep``: the scenario as its file says), then
    ``-overrides`` joined by commas when that is short and safe in a file
    name (at most :data:`MAX_READABLE_SUFFIX` characters of letters, digits
    and ``._=,+-``, and the whole name at most :data:`MAX_TARGET_NAME`
    bytes), else ``-set-`` and the first 8 hex digits of their SHA-256.
    Distinct commands and overrides give distinct names; the same ones give
    the same name.

    >>> run_folder_name("bounded", "sweep")
    'bounded'
    >>> run_folder_name("bounded", "run", ["harness.budgets.steps=30"])
    'bounded-run-harness.budgets.steps=30'
    """
    parts = [name]
    if command and command != plain:
        parts.append(command)
    if overrides:
        text = ",".join(overrides)
        readable = len(text) <= MAX_READABLE_SUFFIX and _NAME_SAFE.fullmatch(text)
        if readable and len(os.fsencode("-".join([*parts, text]))) <= MAX_TARGET_NAME:
            parts.append(text)
        else:
            digest = hashlib.sha256(json.dumps(list(overrides)).encode("utf-8")).hexdigest()
            parts.append(f"set-{digest[:8]}")
    return "-".join(parts)


_LOCKS: dict[str, int] = {}
"""Locks this process holds: lock file path -> its open descriptor."""


@atexit.register
def _release_all() -> None:
    """At exit, remove the lock files this process still holds (a command
    that failed before :func:`replace`); the kernel releases the locks."""
    for key in list(_LOCKS):
        with contextlib.suppress(OSError):
            Path(key).unlink()
        os.close(_LOCKS.pop(key))


def lock_path(target: Path) -> Path:
    """The lock file of the results folder ``target``."""
    return target.parent / f".{target.name}.lock"


def lock(target: str | os.PathLike, flag: str = "--out") -> None:
    """Hold the exclusive lock of ``target`` for this process (again: a no-op),
    or raise an InputError when another process holds it."""
    path = lock_path(Path(target))
    key = str(path.resolve())
    if key in _LOCKS:
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode("ascii", "replace").strip() or "another process"
        os.close(fd)
        raise InputError(f"{flag} {target} is being written by another sim command "
                         f"(pid {holder}); wait for it to finish, or choose another "
                         f"folder") from None
    except OSError:  # a filesystem without locks (ENOLCK): write unlocked, as before
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        return
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _LOCKS[key] = fd


def unlock(target: str | os.PathLike) -> None:
    """Release the lock of ``target`` if this process holds it (the lock file
    is removed first, so a waiting command finds it free or gone)."""
    path = lock_path(Path(target))
    fd = _LOCKS.pop(str(path.resolve()), None)
    if fd is None:
        return
    with contextlib.suppress(OSError):
        path.unlink()
    os.close(fd)


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def recorded_identity(folder: Path) -> Any:
    """The identity recorded in ``folder`` (None when no file records one)."""
    for name in IDENTITY_FILES:
        path = folder / name
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            provenance = data.get("provenance") if isinstance(data, dict) else None
            if isinstance(provenance, dict):
                return identity(provenance)
    return None


def prepare(out: str | os.PathLike, provenance: Mapping[str, Any], *, force: bool = False,
            flag: str = "--out") -> Path:
    """Check that ``out`` may receive the results of the run ``provenance``
    describes (see the module docstring); return it as a Path. Creates the
    parent folders; leaves ``out`` itself as it was."""
    check_target_name(out, flag)
    target = Path(out)
    if target.exists() and not target.is_dir():
        kind = "a file" if target.is_file() else _kind(target)
        raise InputError(f"{flag} {target} is {kind}, not a folder")
    if target.is_dir():
        try:
            entries = _entries(target)
        except OSError as error:
            raise InputError(f"{flag} {target}: cannot list it ({error.strerror})") from None
        foreign = [e for e in entries if e not in RESULT_ENTRIES and not e.startswith(".")]
        if foreign:
            shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
            raise InputError(f"{flag} {target} is not empty and not a results folder (it "
                             f"holds {shown}); choose another folder")
        if entries and not force:
            recorded, wanted = recorded_identity(target), _plain(identity(provenance))
            if recorded != wanted:
                what = ("results of a different run" if recorded is not None
                        else "results whose run is not recorded")
                raise InputError(f"{flag} {target} holds {what}"
                                 f"{_difference(recorded, wanted)}; pass --force to "
                                 f"replace them, or choose another folder")
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        probe = tempfile.mkdtemp(dir=parent, prefix=f".{target.name}.check.")
        os.rmdir(probe)
        lock(target, flag)
    except OSError as error:
        raise InputError(f"{flag} {target}: cannot write there ({error.__class__.__name__}: "
                         f"{error.strerror or error})") from None
    return target


def check_target_name(target: str | os.PathLike, flag: str) -> None:
    """An InputError when ``target`` is no path a file can have
    (:func:`check_path`) or its last name is over :data:`MAX_TARGET_NAME`
    bytes (the temporary names sim writes beside it would be too long: the
    write would fail after the work, with ``File name too long``)."""
    check_path(target, flag)
    name = os.fsencode(Path(target).name)
    if len(name) > MAX_TARGET_NAME:
        raise InputError(f"{flag} {os.fsdecode(name[:24])}...: the name is {len(name):,} bytes "
                         f"long; sim writes temporary names {SIBLING_EXTRA} bytes longer beside "
                         f"it, so it may hold at most {MAX_TARGET_NAME}")


def results_folder(folder: Path) -> bool:
    """Whether ``folder`` is a results folder (it holds a file that records
    its run, :data:`IDENTITY_FILES`)."""
    try:
        return any((folder / name).is_file() for name in IDENTITY_FILES)
    except OSError:
        return False


def check_file_target(value: str | os.PathLike, flag: str, *, replaced: bool = True,
                      results: Sequence[str | os.PathLike] = ()) -> Path:
    """``value`` as a file a command may write, checked before any long work
    (one check for ``--otel``, ``--junit``, ``--summary-md``, ``--checkpoints``),
    or an InputError (exit status 2) saying why not:

    * a bad path (a NUL character, a name or path too long: :func:`check_target_name`);
    * a folder; with ``replaced`` (the file is written beside the target and
      renamed over it) anything but a regular file: a device such as
      ``/dev/null``, a FIFO or a socket would be replaced by a regular file;
    * a file inside a results folder (another run's ``summary.json``, or one of
      ``results``, the folders this command writes): the file would replace
      that run's results or make the folder foreign to later runs;
    * a place where no file can be created (a parent that is a file, a
      read-only or missing folder that cannot be made).

    Creates the missing parent folders; returns the path."""
    check_target_name(value, flag)
    path = Path(value)
    if path.is_dir():
        raise InputError(f"{flag} {path} is a folder, not a file")
    if replaced and path.exists() and not path.is_file():
        raise InputError(f"{flag} {path} is {_kind(path)}, not a regular file: writing it "
                         f"would replace it with a file; give a file path")
    parent = path.parent
    owned = [Path(r) for r in results]
    if results_folder(parent) or any(_same(parent, r) for r in owned):
        raise InputError(f"{flag} {path} is inside the results folder {parent}: it would "
                         f"replace or add to those results; give a path outside it")
    for ancestor in (parent, *parent.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                raise InputError(f"{flag} {path}: {ancestor} is a file, not a folder")
            break
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.check.")
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot write there ({error.strerror or error})"
                         ) from None
    return path


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one folder (by their resolved paths)."""
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return False


def _kind(path: Path) -> str:
    """What the non-regular ``path`` is, in words (``a character device``)."""
    mode = path.stat().st_mode
    for test, kind in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


@contextlib.contextmanager
def replace(out: str | os.PathLike) -> Iterator[Path]:
    """A temporary folder to write the results into; on leaving the block
    without an error it becomes ``out`` (see the module docstring). On an
    error it is removed and ``out`` is left as it was."""
    target = Path(out)
    kept = (f"the previous results in {target} are as they were" if target.exists()
            else "nothing was written")
    try:
        with disk_errors(target, kept):
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.new."))
            try:
                yield staging
                os.chmod(staging, 0o755)
                _swap(staging, target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
    finally:
        unlock(target)


def _swap(staging: Path, target: Path) -> None:
    """Put ``staging`` at ``target``, moving an old ``target`` aside first."""
    if not target.exists():
        os.rename(staging, target)
        return
    foreign = [e for e in _entries(target) if e not in RESULT_ENTRIES and not e.startswith(".")]
    if foreign:  # something was added while the run went on: keep it all
        raise InputError(f"{target} gained files that are not results ({', '.join(foreign)}) "
                         f"while the run went on; nothing was replaced")
    old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old."))
    os.rmdir(old)
    os.rename(target, old)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples as lists, and so on)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _difference(recorded: Any, wanted: Any, path: str = "") -> str:
    """`` (first difference: at x, y recorded, z now)`` or ``""``."""
    if recorded is None:
        return ""
    found = _first_difference(recorded, wanted, path)
    if found is None:
        return ""
    where, old, new = found
    return f" (first difference at {where or 'the top'}: {_short(old)} there, {_short(new)} now)"


def _first_difference(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = _first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)
            if found is not None:
                return found
        return None
    return None if a == b else (path, a, b)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
