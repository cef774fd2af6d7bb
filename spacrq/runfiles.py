"""The run-file protocol every kind of spacrq run speaks.

A queue, a blockwise run and an experiment are all watched through files: the
window reads them, the runner writes them, and the operator's requests travel
back through a control file.  The rules are the same for all three, so they
live here once:

* **Whole documents are replaced, never rewritten.**  :func:`write_json` writes
  a sibling temp file, fsyncs it and ``os.replace``\\ s it over the target, so a
  reader (or a machine that loses power) sees the old document or the new one
  and never half of each.  A queue file truncated by a crash is worse than no
  queue file at all.
* **Logs of events are appended, one JSON object a line, fsync'd.**
  :func:`append_jsonl` writes the whole line in one ``write`` so two appenders
  never interleave inside a line.
* **Readers read only what is new.**  :class:`JsonlTail` remembers its byte
  offset and returns the complete lines written since the last call.  A last
  line without its newline is a write in progress (or a crash mid-write): it
  is left for the next call, never parsed half-way and never fatal.  A file
  that shrank was replaced, so the tail starts over.
* **Control is a small document merged by key.**  :func:`ask` merges fields
  into ``control.json`` atomically; :func:`asked` reads it and treats a garbled
  file as "nothing asked" (``{}``; :func:`control_problem` says why), because a
  runner must never crash over a request it cannot read.
* **One rule for bytes that may hold anything.**  Every JSON document and line
  spacrq reads goes through :func:`loads`: strict JSON (no ``NaN``, no
  ``Infinity``, no number that overflows a double), valid UTF-8, nested no
  deeper than :data:`MAX_DEPTH`, no larger than the reader allows.  Anything
  else is a :class:`RunFileError` whose message names the file and the fix,
  never a ``UnicodeDecodeError`` or ``RecursionError`` escaping to the operator.
* **Never through a link.**  Appends open with ``O_NOFOLLOW``; whole documents
  replace the link itself, never its target; :func:`refuse_link` lets a
  command refuse a symlinked run directory in one sentence.

Nothing here imports Qt; the GUI's pollers call the same functions.
"""
from __future__ import annotations

import errno
import json
import math
import os
import re
import stat as stat_mod
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import orjson

from spacrq.rawio import write_all

__all__ = [
    "read_regular",
    "still_named",
    "remove_stale_temps",
    "write_all",
    "write_fix",
    "CONTROL_FILE",
    "PROGRESS_FILE",
    "RunFileError",
    "MAX_DEPTH",
    "loads",
    "parse_document",
    "file_stamp",
    "dumps",
    "read_json_checked",
    "append_text",
    "refuse_link",
    "safe_name",
    "control_problem",
    "write_bytes",
    "write_text",
    "write_json",
    "read_json",
    "append_jsonl",
    "read_jsonl",
    "JsonlTail",
    "TextTail",
    "ask",
    "asked",
    "clear",
    "write_progress",
    "read_progress",
]

CONTROL_FILE = "control.json"
PROGRESS_FILE = "progress.json"


#: Deepest nesting of arrays and objects a run file may hold.  spacrq's own
#: files are a few levels deep; a thousand levels is an attack or an accident
#: that would otherwise surface later as a ``RecursionError`` somewhere else.
MAX_DEPTH = 64
#: Largest JSON document :func:`read_json` reads by default (a 2000-job queue
#: file is about 1 MB).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
#: Largest control document: a few keys; anything bigger is not a request.
MAX_CONTROL_BYTES = 64 * 1024

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class RunFileError(RuntimeError):
    """A run file could not be read or written; the message says which and why.

    :attr:`path` is the file concerned (``None`` when the bytes came from
    elsewhere), so a caller can act on it without parsing the sentence; for
    JSON that does not parse, :attr:`offset` is the byte where it broke (the
    message names its line and column).
    """

    def __init__(self, message: str, path: str | os.PathLike | None = None,
                 offset: int | None = None) -> None:
        super().__init__(message)
        self.path = Path(path) if path is not None else None
        self.offset = offset


def _too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers deeper than ``limit`` (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def _brackets(data: bytes | bytearray | memoryview | str) -> int:
    """An upper bound on the nesting depth of ``data`` (cheap: two C-level counts)."""
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    raw = bytes(data) if isinstance(data, memoryview) else data
    return raw.count(b"[") + raw.count(b"{")


def loads(data: bytes | bytearray | memoryview | str, *, where: str | os.PathLike = "",
          max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` as strict JSON, the one way spacrq parses what it reads.

    Refused, each with a sentence naming ``where``: bytes that are not UTF-8,
    anything that is not JSON, ``NaN``/``Infinity`` and numbers beyond a
    double (``1e400``), and nesting deeper than ``max_depth``.  An integer beyond 64 bits
    (none of spacrq's own fields can hold one) is read as the nearest double.

    :raises RunFileError: for each of those.
    """
    name = str(where) or "the input"
    too_deep = RunFileError(f"{name} nests objects and arrays more than {max_depth} deep; "
                            "replace it with a valid file or remove it", where or None)
    try:
        if max_depth and max_depth < _ORJSON_DEPTH and _brackets(data) > max_depth:
            value = _loads_bounded(data, max_depth)
            if value is _TOO_DEEP:
                raise too_deep
        else:
            value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        reason = str(exc).split(": line")[0]
        raise RunFileError(f"{name} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                           f"{reason}); fix that spot or replace the file", where or None,
                           offset=exc.pos) from None
    except RecursionError:
        raise RunFileError(f"{name} is nested too deeply to be a spacrq file; "
                           "replace it with a valid file or remove it", where or None) from None
    return value


#: the nesting orjson itself accepts (it refuses 1025 levels)
_ORJSON_DEPTH = 1024
_TOO_DEEP = object()


def _loads_bounded(data: bytes | bytearray | memoryview | str, max_depth: int) -> Any:
    """``orjson.loads(data)``, or :data:`_TOO_DEEP` when it nests deeper than ``max_depth``.

    The depth is checked by orjson itself, in the same parse: ``data`` is
    wrapped in ``1024 - max_depth`` one-element arrays, so orjson's own limit
    of 1024 levels falls exactly at ``max_depth`` levels of ``data`` — no walk
    of the parsed value in Python.  Each wrapper must come back as an array
    of one element, which proves ``data`` was one JSON value on its own.
    When the wrapped text does not parse, ``data`` is parsed alone: its own
    error (with its own line and column) is raised, and if it parses, it was
    too deep.
    """
    pad = _ORJSON_DEPTH - max_depth
    if isinstance(data, str):
        wrapped: Any = "[" * pad + data + "]" * pad
    else:
        wrapped = b"[" * pad + bytes(data) + b"]" * pad
    try:
        value = orjson.loads(wrapped)
    except orjson.JSONDecodeError:
        orjson.loads(data)  # raises the input's own error where it has one
        return _TOO_DEEP
    for _ in range(pad):
        if type(value) is not list or len(value) != 1:
            return orjson.loads(data)  # not one value on its own: let orjson say why
        value = value[0]
    return value


def parse_document(data: bytes | str, *, where: str | os.PathLike = "") -> Any:
    """A settings or configuration document, JSON or YAML: the one reader of both.

    JSON goes through :func:`loads`.  Text that looks like JSON (it starts
    with ``{``, ``[`` or ``"``) must be valid JSON: YAML would read ``NaN`` or
    a torn object as text and a run would start on nonsense.  Anything else is
    YAML (``yaml.safe_load``); the value must then pass the same rules as JSON
    (no ``.nan``/``.inf``, no runaway nesting).  An empty or comments-only
    document is ``None``.

    :raises RunFileError: naming ``where`` and the fix.
    """
    name = str(where) or "the document"
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise RunFileError(f"{name} is not UTF-8 text; save it as UTF-8 JSON or YAML",
                               where or None) from None
    else:
        text = data.lstrip("\ufeff")
    if not text.strip():
        return None
    try:
        return loads(text, where=where)
    except RunFileError:
        if text.lstrip().startswith(("{", "[", '"')):
            raise
    import yaml  # noqa: PLC0415 (PyYAML is only needed for YAML, most documents are JSON)
    try:
        value = yaml.safe_load(text)
    except RecursionError:
        raise RunFileError(f"{name} is nested too deeply; replace it with a valid document",
                           where or None) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise RunFileError(f"{name} is neither JSON nor YAML{at}; fix that spot or replace it",
                           where or None) from None
    if _finite(value) != value or (isinstance(value, (dict, list)) and _too_deep(value, MAX_DEPTH)):
        raise RunFileError(f"{name} holds NaN, an infinity or nesting deeper than {MAX_DEPTH}; "
                           "give plain numbers and settings", where or None)
    return value


def file_stamp(path: str | os.PathLike) -> tuple[int, int, int] | None:
    """The one file-change stamp: ``(inode, size, mtime_ns)``, ``None`` when it is not there.

    Equal stamps mean "unchanged" for every watcher: a file replaced
    atomically gets a new inode, an append a new size, a rewrite in place a
    new mtime.
    """
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _plain(value: Any) -> Any:
    """What ``json`` cannot write as strict JSON, made writable (``default`` hook)."""
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    return str(value)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (recursively)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(document: Any, *, indent: int | None = None) -> str:
    """``document`` as strict JSON text: what :func:`loads` reads back.

    A non-finite float (a NaN statistic, an infinite timeout) is written as
    ``null`` rather than as the ``NaN`` that no strict reader accepts.
    """
    separators = (",", ": ") if indent is not None else (",", ":")
    try:
        return json.dumps(document, indent=indent, default=_plain, allow_nan=False,
                          separators=separators)
    except ValueError:
        return json.dumps(_finite(document), indent=indent, default=_plain,
                          allow_nan=False, separators=separators)


def write_fix(exc: BaseException) -> str:
    """What to do about a write that failed with ``exc``, in a few words."""
    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT):
        return "free some space on its disk"
    if code == errno.EROFS:
        return "its disk is mounted read-only: remount it writable"
    return "check that the folder exists and is writable"


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable: fsync the directory entry (POSIX only)."""
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` would race other threads)."""
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _mode_for(target: Path) -> int:
    """The mode the new file gets: the replaced file's own, else what ``open`` would give.

    ``mkstemp`` makes its file ``0600``; renamed as it is, a morning report
    meant for the next shift, or a queue file the group shares, would become
    private to whoever wrote it last.
    """
    try:
        st = os.lstat(target)
        if stat_mod.S_ISREG(st.st_mode):
            return stat_mod.S_IMODE(st.st_mode)
    except OSError:
        pass
    return 0o666 & ~_umask()


def write_bytes(path: str | os.PathLike, data: bytes, *, durable: bool = True) -> Path:
    """Replace ``path`` with ``data`` atomically.

    ``durable=False`` skips the fsyncs: still atomic against a crashed
    process (readers never see half a file), but not against a power cut.
    Used for high-rate snapshots such as live progress, where losing the
    last one is harmless and fsync at 2 Hz would cost more than the work.
    The file keeps the mode of the one it replaces (a new one gets the umask's).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            if mode != 0o600:
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(target.parent)
    return target


def write_text(path: str | os.PathLike, text: str, *, durable: bool = True) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) atomically; see :func:`write_bytes`."""
    return write_bytes(path, text.encode("utf-8"), durable=durable)


def write_json(path: str | os.PathLike, document: Any, *, indent: int | None = 2,
               durable: bool = True) -> Path:
    """Replace ``path`` with ``document`` as strict JSON, atomically (see :func:`write_text`)."""
    return write_text(path, dumps(document, indent=indent) + "\n", durable=durable)


_KIND_NAMES = {dict: "an object", list: "an array", str: "a string", int: "a number",
               float: "a number", bool: "true or false", type(None): "null"}


def _kind(value: Any) -> str:
    return _KIND_NAMES.get(type(value), type(value).__name__)


def read_regular(path: str | os.PathLike, max_bytes: int = MAX_DOCUMENT_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, read without ever waiting on what stands
    in its place (a FIFO, a device) and never past ``max_bytes``.

    :raises FileNotFoundError: it is not there.
    :raises RunFileError: it cannot be read, is not a regular file, or is too large,
        naming it and the fix.
    """
    target = Path(path)
    try:
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise RunFileError(f"could not read {target}: {exc.strerror or exc}; "
                           "check that it is a readable file", target) from None
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            raise RunFileError(f"{target} is not a regular file (a folder, device or pipe "
                               "stands there); put the file there, or remove what stands in "
                               "its place", target)
        if st.st_size > max_bytes:
            raise RunFileError(f"{target} is {st.st_size:,} bytes, more than the {max_bytes:,} "
                               "such a file may hold; replace it with a valid file or remove it",
                               target)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            if sum(map(len, chunks)) > max_bytes:
                raise RunFileError(f"{target} grew past the {max_bytes:,} bytes such a file "
                                   "may hold; replace it with a valid file or remove it", target)
    except OSError as exc:
        raise RunFileError(f"could not read {target}: {exc.strerror or exc}; "
                           "check that it is a readable file", target) from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_json(path: str | os.PathLike, default: Any = None, *,
              expect: type | tuple[type, ...] | None = None,
              max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """The JSON document at ``path``; ``default`` when it is missing or empty.

    ``expect`` (``dict``, ``list``, …) is the shape the caller needs; a file
    holding anything else is refused like a garbled one.  A file larger than
    ``max_bytes``, a folder, a device or a FIFO in the file's place is refused
    without reading it.

    :raises RunFileError: when the file exists but cannot be used, naming it
        and the fix.
    """
    target = Path(path)
    try:
        data = read_regular(target, max_bytes)
    except FileNotFoundError:
        return default
    if not data.strip():
        return default
    doc = loads(data, where=target)
    if expect is not None and not isinstance(doc, expect):
        wanted = expect if isinstance(expect, tuple) else (expect,)
        names = " or ".join(dict.fromkeys(_KIND_NAMES.get(k, k.__name__) for k in wanted))
        raise RunFileError(f"{target} holds {_kind(doc)} where {names} belongs; "
                           "replace it with a valid file or remove it", target)
    return doc


def read_json_checked(path: str | os.PathLike, default: Any = None, *,
                      expect: type | tuple[type, ...] | None = None,
                      max_bytes: int = MAX_DOCUMENT_BYTES) -> tuple[Any, str | None]:
    """``(document, None)``, or ``(default, the sentence saying why)`` when unusable.

    For readers that must carry on whatever the file holds (a runner, a
    poller): the problem is something to show, not something to raise.
    """
    try:
        return read_json(path, default, expect=expect, max_bytes=max_bytes), None
    except RunFileError as exc:
        return default, str(exc)


def append_jsonl(path: str | os.PathLike, record: Mapping[str, Any] | Any, *,
                 durable: bool = True) -> None:
    """Append ``record`` as one JSON line, in one write, fsync'd by default."""
    line = dumps(record) + "\n"
    _append(path, line.encode("utf-8"), durable=durable, fresh_line=True)


def append_text(path: str | os.PathLike, text: str, *, durable: bool = True) -> None:
    """Append ``text`` to a text file (a note, a log) in one write, never through a link."""
    _append(path, text.encode("utf-8"), durable=durable, fresh_line=False)


def _open_append(target: Path) -> int:
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | _O_NOFOLLOW
    try:
        try:
            return os.open(target, flags, 0o644)
        except FileNotFoundError:
            target.parent.mkdir(parents=True, exist_ok=True)
            return os.open(target, flags, 0o644)
    except OSError:
        if target.is_symlink():
            raise RunFileError(f"{target} is a symbolic link; spacrq does not write through "
                               "links: replace it with a regular file", target) from None
        raise


def _append(path: str | os.PathLike, data: bytes, *, durable: bool, fresh_line: bool) -> None:
    target = Path(path)
    fd = _open_append(target)
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            raise RunFileError(f"{target} is not a regular file; remove it so that spacrq "
                               "can write the file there", target)
        # A line torn by a crash must not swallow this one: start on a fresh line.
        size = os.fstat(fd).st_size
        if fresh_line and size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temps(target: str | os.PathLike, older_than: float = 0.0) -> int:
    """Remove the temporary files an atomic replace of ``target`` left when its writer was
    killed mid-write (``.NAME.*.tmp`` beside it, regular files only, last changed more
    than ``older_than`` seconds ago); how many.  Call it only where no other writer can be
    mid-write (holding the file's lock), or with an age no write takes."""
    path = Path(target)
    removed = 0
    now = time.time()
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return 0
    own = re.compile(re.escape(f".{path.name}.") + r"(?:[a-z0-9_]{8}|runner)\.tmp")
    for entry in entries:  # (mkstemp's names for it, and the runner's own: nothing else)
        if not own.fullmatch(entry.name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if stat_mod.S_ISREG(st.st_mode) and now - st.st_mtime >= older_than:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed


def open_regular(path: str | os.PathLike, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """``path`` opened with ``flags`` only if it is a regular file: never through a link in
    its place, never waiting on a FIFO or a device there (a name read from a file — a job's
    log, a copy of a runner's state — may have been made to point anywhere).

    :raises OSError: it is something else, or cannot be opened."""
    fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0),
                 mode)
    if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(0, f"{path} is not a regular file")
    return fd


def directly_in(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    """Whether ``path`` names a file right in ``folder`` (both as the links along them
    resolve): a job's log named in a queue file is read only in the queue's logs folder."""
    return os.path.realpath(os.path.dirname(os.path.abspath(path))) == os.path.realpath(folder)


def refuse_link(path: str | os.PathLike, what: str = "folder", fix: str = "") -> Path:
    """``path``, or :class:`RunFileError` when it is a symbolic link.

    For run directories and the files a command is about to write: spacrq
    writes only where the operator's folder really is, never where a link
    planted in it points.  ``what`` names it ("run folder"); ``fix`` is the
    advice when "use the … it points to" is not (a file spacrq makes itself).
    """
    target = Path(path)
    if target.is_symlink():
        raise RunFileError(f"{target} is a symbolic link; spacrq does not write through links: "
                           + (fix or f"use the {what} it points to directly"), target)
    return target


def still_named(fd: int, path: str | os.PathLike) -> bool:
    """Whether ``path`` still names the file (or folder) open as ``fd``: not removed, not
    replaced by another file or by a link (a writer that kept a file open checks this
    before it trusts the name again)."""
    try:
        mine, there = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return mine.st_nlink > 0 and (mine.st_ino, mine.st_dev) == (there.st_ino, there.st_dev)


def safe_name(name: Any, what: str = "name") -> str:
    """``name`` when it can be a file or folder name inside a directory, else RunFileError.

    Ids and names read from files become paths; one that holds a separator,
    is ``.``/``..``, is empty, or holds a NUL would escape (or break) the
    directory it names a child of.
    """
    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name
            or "\\" in name or "\0" in name or name != name.strip()):
        raise RunFileError(f"{what} {name!r} cannot name a file: use letters, digits, "
                           "'-', '_' and '.', without '/' or leading or trailing spaces")
    return name


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """Every complete, parseable line of a JSONL file (torn or garbled lines skipped)."""
    tail = JsonlTail(path)
    return tail.read()


@dataclass
class JsonlTail:
    """Incremental reader of an append-only JSONL file.

    Each :meth:`read` returns only the records completed since the previous
    call, reading only the new bytes.  A torn last line (no newline yet) is
    held back until it is finished; a line that is not JSON is counted in
    :attr:`bad_lines` and skipped rather than ending the reading (a line that is
    valid JSON but not an object counts as bad too, unless ``objects_only`` is
    off).  If the file
    shrinks or is replaced (a different inode), reading starts again from the
    beginning and :attr:`restarted` is set so the caller can drop what it had.
    """

    path: Path | str
    offset: int = 0
    bad_lines: int = 0
    restarted: bool = False
    objects_only: bool = True
    max_depth: int = MAX_DEPTH
    last_problem: str | None = None
    _inode: int | None = field(default=None, repr=False)
    _pending: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def _reset(self) -> None:
        self.offset = 0
        self._pending = b""
        self.bad_lines = 0
        self.last_problem = None
        self.restarted = True

    def read_bytes(self, max_bytes: int | None = None) -> bytes:
        """The complete lines (as bytes) appended since the last call."""
        self.restarted = False
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self.offset or self._pending:
                self._reset()
            self._inode = None
            return b""
        if (self._inode is not None and st.st_ino != self._inode) or st.st_size < self.offset:
            self._reset()
        self._inode = st.st_ino
        if st.st_size == self.offset:
            return b""
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read(max_bytes) if max_bytes else handle.read()
        self.offset += len(chunk)
        data = self._pending + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._pending = data
            return b""
        self._pending = data[cut + 1:]
        return data[: cut + 1]

    def read(self, max_bytes: int | None = None) -> list[Any]:
        """The records completed since the last call, in file order.

        Lines are parsed with :func:`loads`' rules; a line that breaks them (or,
        with ``objects_only``, holds something other than an object) is counted
        in :attr:`bad_lines`, its reason kept in :attr:`last_problem`, and
        skipped: one bad line costs only itself.
        """
        data = self.read_bytes(max_bytes)
        if not data:
            return []
        out: list[Any] = []
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                self._bad(f"a line of {self.path} is not valid JSON "
                          f"({str(exc).split(': line')[0]})")
                continue
            if self.objects_only and not isinstance(value, dict):
                self._bad(f"a line of {self.path} holds {_kind(value)}, not an object")
                continue
            if (isinstance(value, (dict, list)) and _brackets(raw) > self.max_depth
                    and _too_deep(value, self.max_depth)):
                self._bad(f"a line of {self.path} nests more than {self.max_depth} deep")
                continue
            out.append(value)
        return out

    def _bad(self, reason: str) -> None:
        self.bad_lines += 1
        self.last_problem = reason

    def __iter__(self) -> Iterator[Any]:
        return iter(self.read())


@dataclass
class TextTail:
    """Incremental reader of a growing text log, bounded in what it keeps.

    A job writing hundreds of megabytes of log must not make the window read
    hundreds of megabytes: on the first read (or after the file was replaced)
    only the last ``max_initial`` bytes are read, and each call returns at most
    ``max_chunk`` new bytes, skipping ahead (and saying so) when the writer is
    faster than the reader.
    """

    path: Path | str
    max_initial: int = 64 * 1024
    max_chunk: int = 256 * 1024
    offset: int = -1
    _inode: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def read(self) -> tuple[str, bool]:
        """``(new text, restarted)``; ``restarted`` means drop what you had.

        The first read, a replaced or truncated file, and a writer that got
        more than ``max_chunk`` ahead all restart the view at the tail end.
        """
        try:
            st = os.lstat(self.path)  # (a link in a log's place is not read through)
        except OSError:
            st = None
        if st is None or not stat_mod.S_ISREG(st.st_mode):
            restarted = self.offset > 0
            self.offset, self._inode = -1, None
            return "", restarted
        restarted = False
        if self.offset < 0 or st.st_ino != self._inode or st.st_size < self.offset:
            self.offset = max(0, st.st_size - self.max_initial)
            restarted = True
        self._inode = st.st_ino
        prefix = ""
        behind = st.st_size - self.offset
        if behind > self.max_chunk:
            self.offset = st.st_size - self.max_chunk
            prefix = f"[… {behind - self.max_chunk:,} bytes of log skipped; open the file to read them …]\n"
            restarted = True
        if st.st_size == self.offset:
            return prefix, restarted
        try:
            fd = open_regular(self.path)
        except OSError:
            return prefix, restarted
        try:
            chunk = os.pread(fd, st.st_size - self.offset, self.offset)
        finally:
            os.close(fd)
        self.offset += len(chunk)
        return prefix + chunk.decode("utf-8", errors="replace"), restarted


# -- control -----------------------------------------------------------------

def asked(run_dir: str | os.PathLike, name: str = CONTROL_FILE) -> dict[str, Any]:
    """What a run is being asked for: the control document, ``{}`` when none.

    Anything unreadable — not UTF-8, not JSON, not an object, too large, a
    folder — is ``{}`` too ("nothing asked"): a runner keeps running rather
    than crash over a request it cannot read.  :func:`control_problem` says why.
    """
    doc, _ = read_json_checked(Path(run_dir) / name, {}, expect=dict,
                               max_bytes=MAX_CONTROL_BYTES)
    return doc


def control_problem(run_dir: str | os.PathLike, name: str = CONTROL_FILE) -> str | None:
    """Why the control document cannot be read (one sentence), or None when it can."""
    _, problem = read_json_checked(Path(run_dir) / name, {}, expect=dict,
                                   max_bytes=MAX_CONTROL_BYTES)
    return problem


def ask(run_dir: str | os.PathLike, name: str = CONTROL_FILE, **changes: Any) -> dict[str, Any]:
    """Merge ``changes`` into the control document and replace it atomically.

    :returns: the control document as it now stands.
    """
    doc = {k: v for k, v in asked(run_dir, name).items() if not k.startswith("_")}
    doc.update(changes)
    doc["updated_at"] = time.time()
    try:
        write_json(refuse_link(run_dir) / name, doc)
    except OSError as exc:
        raise RunFileError(
            f"could not write {Path(run_dir) / name}: {exc.strerror or exc}; {write_fix(exc)}"
        ) from None
    return doc


def clear(run_dir: str | os.PathLike, name: str = CONTROL_FILE) -> None:
    """Remove the control document, so a resumed run is asked for nothing."""
    try:
        os.unlink(Path(run_dir) / name)
    except FileNotFoundError:
        pass


# -- progress ----------------------------------------------------------------

def write_progress(path: str | os.PathLike, snapshot: Mapping[str, Any]) -> None:
    """Publish a progress snapshot (atomic, not fsync'd: it is replaced often)."""
    doc = dict(snapshot)
    doc.setdefault("written_at", time.time())
    write_json(path, doc, indent=None, durable=False)


def read_progress(path: str | os.PathLike) -> dict[str, Any] | None:
    """The last progress snapshot, or None when there is none or it is unreadable."""
    doc, _ = read_json_checked(path, None, expect=dict)
    return doc
