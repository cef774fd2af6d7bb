"""Keeping the queue's exit record small: what a queue reused night after night leaves behind.

Every attempt of every job appends its lines to the queue's exit record
(``NAME_logs/exits.jsonl``, see :mod:`spacrq.queue.supervise`).  A queue
file run every night for a year — the same ``night.queue.json`` with the
night's jobs in it — would gather hundreds of thousands of attempts there
(115 MB for a thousand jobs a night), and everything that reads the record
reads it whole: ``resume`` after a crash, the morning report (the peak
memory of each job), ``queue status`` for a job its runner left.

Only a little of it can still be asked about: of each job in the queue, its
latest attempt (the one ``resume`` examines, whose peak the report shows)
and the attempt the queue file names (``started``), if that is another.
So a runner about to start a queue whose record has outgrown what its jobs
need (:data:`COMPACT_FROM`, and :data:`ROOM_PER_JOB` a job) rewrites the
record with only those lines, atomically (a new file made whole, fsync'd,
then renamed over the old), before it starts any job; a rewrite killed before
its rename leaves the old record whole, and its temporary file is removed by
the next one.

It leaves the record as it is — and says why in the runner's log, only when
that is not the usual case — when anything else could still write to it:
an attempt with no end whose supervisor (a keeper or a supervisor process of
an earlier run, still waiting for a job its runner left) is alive, or the
record changing while it is read; a line appended by the record's name after
it was read and before the rename is carried over into the new one.  A record that cannot be rewritten (a full
disk, a read-only folder) is kept as it is; the run goes on.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

import orjson

from spacrq.queue.keeper import raw_lines, valid_pid
from spacrq.queue.supervise import EXIT_RECORD, open_append
from spacrq.rawio import write_all
from spacrq.runfiles import remove_stale_temps, write_bytes

#: A record smaller than this is never rewritten (reading it whole costs a few ms).
COMPACT_FROM = 1 << 20
#: ... nor one within this many bytes per job of the queue (an attempt is two or three
#: lines of a few hundred bytes): a large queue's record is rewritten only once it holds
#: several nights of it, so the run's start seldom pays for the scan.
ROOM_PER_JOB = 4096
#: More attempts with a start and no end than this is no record spacrq wrote (each is a
#: runner killed mid-job): such a record is left as it is, and said.
MAX_OPEN = 100_000
_SAFE = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie, or one of another user's, included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _identity(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _bound(jobs: int, compact_from: int | None, room_per_job: int | None) -> int:
    """The size past which a record of a queue of ``jobs`` jobs is rewritten."""
    return max(COMPACT_FROM if compact_from is None else compact_from,
               (ROOM_PER_JOB if room_per_job is None else room_per_job) * jobs)


def outgrown(logs: str | os.PathLike, jobs: int, *, compact_from: int | None = None,
             room_per_job: int | None = None) -> bool:
    """Whether the exit record in ``logs`` is large enough, for a queue of ``jobs`` jobs,
    to be worth a look by :func:`compact_exit_record` (one ``lstat``)."""
    try:
        st = os.lstat(Path(logs) / EXIT_RECORD)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > _bound(jobs, compact_from, room_per_job)


def _tail(fd: int, offset: int) -> bytes:
    """What the file open as ``fd`` holds past ``offset`` (at most 64 MB)."""
    parts, size = [], 0
    while size < 64 << 20:
        chunk = os.pread(fd, 1 << 20, offset + size)
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)


def compact_exit_record(logs: str | os.PathLike, jobs: Iterable, *,
                        compact_from: int | None = None,
                        room_per_job: int | None = None) -> str:
    """Rewrite ``logs``'s exit record with only the attempts ``jobs`` may still be asked
    about (see the module's docstring); one sentence for the runner's log when it did,
    or when it could not, else ''."""
    record = Path(logs) / EXIT_RECORD
    # (what a rewrite killed before its rename left: the caller holds the runner lock, so no
    # other rewrite is under way; a killed one is redone here, the record still outgrown)
    remove_stale_temps(record)
    wanted: dict[str, str] = {}  # job id → the attempt its queue file names ('' for none)
    for job in jobs:
        wanted[job.id] = job.started if isinstance(job.started, str) else ""
    try:
        fd = os.open(record, _SAFE)
    except OSError:
        return ""  # (missing; a link or worse is said by whoever reads it)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) \
                or st.st_size <= _bound(len(wanted), compact_from, room_per_job):
            return ""
        before = _identity(st)
        # Memory stays bounded by the queue, not by the record: of each of its jobs only the
        # lines of two attempts are held (the one its file names, and the newest so far —
        # the one before it is let go when another starts), and of other jobs' attempts
        # only those still open that name a supervisor (a start with no end yet).
        latest: dict[str, str] = {}  # job id → the key of its newest attempt's start so far
        held: dict[tuple[str, str], list[bytes]] = {}  # (job, key) → its lines, kept
        open_: dict[tuple[str, str], int] = {}  # attempt → its supervisor
        count = 0
        for raw in raw_lines(fd):
            raw = raw.strip()
            if raw[:1] != b"{":
                continue
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(line, dict):
                continue
            job, key = line.get("job", ""), line.get("key")
            if not isinstance(job, str) or not isinstance(key, str):
                continue
            count += 1
            attempt = (job, key)
            code = line.get("exit_code")
            ends = isinstance(code, int) and not isinstance(code, bool)
            if ends:
                open_.pop(attempt, None)
            elif valid_pid(line.get("supervisor")) and attempt not in open_:
                open_[attempt] = line["supervisor"]
                if len(open_) > MAX_OPEN:
                    return (f"the exit record {record} ({st.st_size // 1024} KB) is left as "
                            f"it is: it holds more than {MAX_OPEN} attempts that never ended, "
                            "which spacrq does not write; move it away if nothing runs")
            if job not in wanted:
                continue
            if not ends and latest.get(job) != key:  # (a start of another attempt)
                previous = latest.get(job)
                if previous is not None and previous != wanted[job]:
                    held.pop((job, previous), None)
                latest[job] = key
            if key == latest.get(job) or key == wanted[job]:
                held.setdefault(attempt, []).append(raw)
        after = _identity(os.fstat(fd))
    except OSError as exc:
        return (f"the exit record {record} could not be read to keep it small "
                f"({exc.strerror or exc}); it is left as it is")
    finally:
        os.close(fd)
    live = sorted({pid for pid in open_.values() if _alive(pid)})
    if live:
        return (f"the exit record {record} ({st.st_size // 1024} KB) is left as it is for "
                f"now: process {live[0]} of an earlier run may still write to it")
    if after != before:
        return ""  # (written meanwhile: by nothing that is alive now; kept for the next run)
    kept = [raw for lines in held.values() for raw in lines]
    data = b"".join(raw + b"\n" for raw in kept)
    if len(data) * 2 > st.st_size:
        return ""  # (little to gain: the queue's own attempts are most of it)
    try:
        old = os.open(record, _SAFE)  # (the record as read, kept open across the rename)
    except OSError:
        return ""
    try:
        if _identity(os.fstat(old)) != before:
            return ""
        try:
            write_bytes(record, data, durable=True)
        except OSError as exc:
            return (f"the exit record {record} ({st.st_size // 1024} KB) could not be "
                    f"rewritten smaller ({exc.strerror or exc}); it is left as it is and still "
                    "read whole")
        late = _tail(old, st.st_size)
        if late:
            # Appended to the old record after it was read (by its name, before the rename):
            # carried over, so no line written to the record is lost to its rewrite.
            try:
                fd = open_append(str(record))
                try:
                    write_all(fd, b"\n" + late)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                return (f"the exit record {record} was rewritten smaller, but "
                        f"{len(late)} bytes appended to it meanwhile could not be carried over "
                        f"({exc.strerror or exc})")
    finally:
        os.close(old)
    if not count:
        return (f"the exit record {record} ({st.st_size // 1024} KB) held nothing but lines "
                "that are not records (none of it written by spacrq); it was emptied")
    return (f"the exit record {record} held {count} lines ({st.st_size // 1024} KB); kept "
            f"the {len(kept)} of the attempts the queue's jobs may still be asked about "
            f"({len(data) // 1024} KB)")
