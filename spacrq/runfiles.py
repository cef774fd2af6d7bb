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
  file as "nothing asked" (with the reason), because a runner must never crash
  over a request it cannot read.

Nothing here imports Qt; the GUI's pollers call the same functions.
"""
from __future__ import annotations

import gc
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

__all__ = [
    "CONTROL_FILE",
    "PROGRESS_FILE",
    "RunFileError",
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


class RunFileError(RuntimeError):
    """A run file could not be read or written; the message says which and why."""


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


def write_bytes(path: str | os.PathLike, data: bytes, *, durable: bool = True) -> Path:
    """Replace ``path`` with ``data`` atomically.

    ``durable=False`` skips the fsyncs: still atomic against a crashed
    process (readers never see half a file), but not against a power cut.
    Used for high-rate snapshots such as live progress, where losing the
    last one is harmless and fsync at 2 Hz would cost more than the work.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
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
    """Replace ``path`` with ``document`` as JSON, atomically (see :func:`write_text`)."""
    text = json.dumps(document, indent=indent, default=str)
    return write_text(path, text + "\n", durable=durable)


def read_json(path: str | os.PathLike, default: Any = None) -> Any:
    """The JSON document at ``path``; ``default`` when it is missing or empty.

    :raises RunFileError: when the file exists but is not JSON, naming it.
    """
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return default
    except OSError as exc:
        raise RunFileError(f"could not read {target}: {exc.strerror or exc}") from None
    if not text.strip():
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFileError(
            f"{target} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None


def append_jsonl(path: str | os.PathLike, record: Mapping[str, Any] | Any, *,
                 durable: bool = True) -> None:
    """Append ``record`` as one JSON line, in one write, fsync'd by default."""
    target = Path(path)
    line = json.dumps(record, default=str, separators=(",", ":")) + "\n"
    data = line.encode("utf-8")
    try:
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except FileNotFoundError:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        # A line torn by a crash must not swallow this one: start on a fresh line.
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


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
    :attr:`bad_lines` and skipped rather than ending the reading.  If the file
    shrinks or is replaced (a different inode), reading starts again from the
    beginning and :attr:`restarted` is set so the caller can drop what it had.
    """

    path: Path | str
    offset: int = 0
    bad_lines: int = 0
    restarted: bool = False
    _inode: int | None = field(default=None, repr=False)
    _pending: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def _reset(self) -> None:
        self.offset = 0
        self._pending = b""
        self.bad_lines = 0
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

        The first read of a ten-hour run can be 100 000 lines: they are parsed
        in one ``json.loads`` of ``[line,line,…]`` (several times faster than a
        call per line, with the collector paused over the fresh dicts).  A
        batch holding a garbled line falls back to line by line, so one bad
        line still costs only itself.
        """
        data = self.read_bytes(max_bytes)
        if not data:
            return []
        lines = [ln for ln in data.split(b"\n") if ln.strip()]
        pause_gc = gc.isenabled() and len(lines) > 1000
        if pause_gc:
            gc.disable()
        try:
            parsed = json.loads(b"[" + b",".join(lines) + b"]")
            if len(parsed) == len(lines):
                return parsed
        except (ValueError, UnicodeDecodeError):
            pass
        finally:
            if pause_gc:
                gc.enable()
        out: list[Any] = []
        for raw in lines:
            try:
                out.append(json.loads(raw))
            except (ValueError, UnicodeDecodeError):
                self.bad_lines += 1
        return out

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
            st = os.stat(self.path)
        except FileNotFoundError:
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
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read(st.st_size - self.offset)
        self.offset += len(chunk)
        return prefix + chunk.decode("utf-8", errors="replace"), restarted


# -- control -----------------------------------------------------------------

def asked(run_dir: str | os.PathLike, name: str = CONTROL_FILE) -> dict[str, Any]:
    """What a run is being asked for: the control document, ``{}`` when none.

    A garbled control file is read as ``{}`` with the problem under
    ``"_unreadable"``: a runner keeps running rather than crash over a
    request it cannot read, and the window can say why nothing happened.
    """
    path = Path(run_dir) / name
    try:
        doc = read_json(path, default={})
    except RunFileError as exc:
        return {"_unreadable": str(exc)}
    if not isinstance(doc, dict):
        return {"_unreadable": f"{path} holds a {type(doc).__name__}, not an object"}
    return doc


def ask(run_dir: str | os.PathLike, name: str = CONTROL_FILE, **changes: Any) -> dict[str, Any]:
    """Merge ``changes`` into the control document and replace it atomically.

    :returns: the control document as it now stands.
    """
    doc = {k: v for k, v in asked(run_dir, name).items() if not k.startswith("_")}
    doc.update(changes)
    doc["updated_at"] = time.time()
    try:
        write_json(Path(run_dir) / name, doc)
    except OSError as exc:
        raise RunFileError(
            f"could not write {Path(run_dir) / name}: {exc.strerror or exc}; "
            "check that the folder exists and is writable"
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
    try:
        doc = read_json(path, default=None)
    except RunFileError:
        return None
    return doc if isinstance(doc, dict) else None
