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
    # (one join: the bytes are copied once more, not once per piece added — a long
    # queue's file is hundreds of KB, rewritten at every job)
    if not jobs:
        return b"".join((head[:-2], b',\n  "jobs": [],\n', tail[2:], b"\n"))
    return b"".join((head[:-2], b',\n  "jobs": [\n', b",\n".join(jobs), b"\n  ],\n",
                     tail[2:], b"\n"))


def write_queue_file(queue: Queue, path: str | os.PathLike, *, durable: bool = True,
                     parts: list[bytes] | None = None) -> Path:
    """Replace ``path`` with ``queue`` atomically (raises OSError; the caller holds the lock)."""
    return write_bytes(path, render_queue(queue, parts), durable=durable)
