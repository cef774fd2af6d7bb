"""A queue as the bytes of its file: indented JSON in spaCR's key order, rendered fast.

The runner of a small queue rewrites the whole file at every transition, so
rendering must cost little: only the jobs that changed since the last write
are serialised again (the runner keeps their bytes in ``parts``), and the
rest is joined.  Serialising is orjson's; anything orjson refuses (an
integer beyond 64 bits in a settings object) falls back to the strict
:func:`spacrq.runfiles.dumps`.  ``NaN`` is written as ``null`` either way.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import orjson

from spacrq.queue.model import Job, Queue
from spacrq.runfiles import dumps, write_bytes

_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS


def _dump(value: Any) -> bytes:
    try:
        return orjson.dumps(value, default=str, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return dumps(value, indent=2).encode("utf-8")


def render_job(job: Job) -> bytes:
    """One job's bytes, indented to sit inside the file's ``"jobs"`` list."""
    return b"    " + _dump(job.to_dict()).replace(b"\n", b"\n    ")


def render_queue(queue: Queue, parts: list[bytes] | None = None) -> bytes:
    """The whole file; ``parts`` (one per job, same order) are used instead of rendering."""
    head = _dump({"spacr_queue": 1, "name": queue.name, "created": queue.created})
    tail = _dump({"on_error": queue.on_error,
                  "max_consecutive_failures": queue.max_consecutive_failures,
                  "notify_command": list(queue.notify_command),
                  "stopped_reason": queue.stopped_reason, "journal_seq": queue.journal_seq})
    jobs = parts if parts is not None else [render_job(job) for job in queue.jobs]
    body = b'  "jobs": [\n' + b",\n".join(jobs) + b"\n  ]" if jobs else b'  "jobs": []'
    return head[:-2] + b",\n" + body + b",\n" + tail[2:] + b"\n"


def write_queue_file(queue: Queue, path: str | os.PathLike, *, durable: bool = True,
                     parts: list[bytes] | None = None) -> Path:
    """Replace ``path`` with ``queue`` atomically (raises OSError; the caller holds the lock)."""
    return write_bytes(path, render_queue(queue, parts), durable=durable)


class Replacer:
    """The runner's quick atomic replace of its queue file, between durable checkpoints.

    The same promise as :func:`spacrq.runfiles.write_bytes` with
    ``durable=False`` (a reader sees the old file or the new one, never part
    of one; nothing is written through a link), at less cost per write,
    which a small queue pays at every job: the caller holds the queue's edit
    lock, so one fixed temporary name next to the file serves (created
    exclusively, a leftover of a crash removed first), and the file's mode
    is looked up once (the mode of the file it replaces, as write_bytes keeps it).
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.temp = self.path.with_name(f".{self.path.name}.runner.tmp")
        self.mode: int | None = None
        self._held: list[int] = []

    def write(self, data: bytes) -> None:
        """:raises OSError: the file could not be replaced (it is as it was)."""
        if self.mode is None:
            try:
                st = os.lstat(self.path)
                self.mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o644
            except OSError:
                self.mode = 0o644
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.temp, flags, self.mode)
        except FileExistsError:  # left by a runner that died mid-write
            os.unlink(self.temp)
            fd = os.open(self.temp, flags, self.mode)
        try:
            os.fchmod(fd, self.mode)  # whatever the umask says
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.replace(self.temp, self.path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(self.temp)
            except OSError:
                pass
            raise
        # The file just replaced stays open, so the rename does not also free it (which waits
        # for its data still being written out, and frees its blocks): :meth:`tidy` lets the
        # old ones go while a job runs, when nobody waits for it.
        self._held.append(fd)
        if len(self._held) > 8:
            self.tidy()

    def tidy(self) -> None:
        """Let go of the replaced files kept open (all but the current one)."""
        while len(self._held) > 1:
            os.close(self._held.pop(0))

    def close(self) -> None:
        """Let go of every file kept open (see :meth:`write`)."""
        while self._held:
            os.close(self._held.pop())
