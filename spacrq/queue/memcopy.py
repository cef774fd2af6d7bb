"""The runner's state in memory, for the one night the disk takes nothing at all.

A disk that is full from the start (no room could be kept for the journal)
or a share that went away refuses the queue file, its journal and the rescue
copy alike.  The runner then holds the night's ends in its memory only, waits
to save them, and says so (:func:`spacrq.queue.engine._wait_to_save`).  Were
it killed meanwhile — the OOM killer, an operator's ``kill -9``, a logout —
``resume`` would run again every job that ended since.  So while its state
is saved nowhere on disk the runner keeps a copy of it in memory that
outlives it: a small JSON file in the user's runtime folder
(``$XDG_RUNTIME_DIR/spacrq``, else ``/dev/shm/spacrq-UID``; both RAM, so a
full disk cannot refuse it, and gone with a restart of the machine, which
ends every job anyway).

The copy holds, for every job that ran, its run fields as a journal line
would, and the *version* of the queue file it is ahead of (the file's inode,
size and mtime as the runner last read or wrote it).  Every reader of the
queue applies it as it replays the journal (:func:`take_in`, called by
:func:`spacrq.queue.store.load_queue`), but only to that very version: a
file replaced since by anything but spacrq (a copy of a template, a hand
edit) is another queue's, and the copy is not applied to it (every spacrq
writer saves the state it read, the copy applied).  It only moves a job
forward — a later attempt, or the same attempt further on — never back.
A command that opens the queue with no runner holding it writes the file in
full and removes the copy (:func:`spacrq.queue.store.open_queue`); the runner
removes it as soon as a save succeeds.

Nothing of it is trusted: the folder must be the user's own, not a link, and
closed to others; a copy that is not a regular file of the user's, too large,
not JSON, of another queue file or of the wrong types is not applied (said
once as a warning) and is removed by the next command that folds.
"""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from spacrq.queue.journal import transition_problem
from spacrq.queue.model import RESUMABLE_STATUSES, RUN_FIELDS, STATUS_RUNNING, Queue, now_iso
from spacrq.runfiles import RunFileError, dumps, file_stamp, loads

#: The copy's format marker (and version).
FORMAT = "spacrq_state_in_memory"
#: The largest copy read (a 10 000-job queue's run fields are a few MB).
MAX_BYTES = 64 * 1024 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _own_private_folder(folder: Path, make: bool) -> bool:
    """Whether ``folder`` is a real folder of this user's that nobody else can enter (made so
    when ``make`` and missing)."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        if not make:
            return False
        try:
            os.mkdir(folder, 0o700)
            st = os.lstat(folder)
        except OSError:
            return False
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and not st.st_mode & 0o077)


def folder(make: bool = False) -> Path | None:
    """Where the copies are kept, or None where no private folder in memory can be had
    (``SPACRQ_MEMORY_DIR`` names another, for tests)."""
    if not hasattr(os, "getuid"):
        return None
    chosen = os.environ.get("SPACRQ_MEMORY_DIR")
    if chosen:
        return Path(chosen) if _own_private_folder(Path(chosen), make) else None
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _own_private_folder(Path(runtime), False):
        place = Path(runtime) / "spacrq"
    elif os.path.isdir("/dev/shm"):
        place = Path("/dev/shm") / f"spacrq-{os.getuid()}"
    else:
        return None
    return place if _own_private_folder(place, make) else None


def _name(path: str | os.PathLike) -> str:
    real = os.path.realpath(path)
    return f"queue-{hashlib.sha256(real.encode('utf-8', 'surrogateescape')).hexdigest()[:32]}.json"


def copy_path(path: str | os.PathLike, make: bool = False) -> Path | None:
    """The copy of the queue file at ``path`` (whether it exists or not), or None."""
    place = folder(make)
    return place / _name(path) if place is not None else None


def keep(queue: Queue, path: str | os.PathLike, seen: tuple | None) -> str:
    """Write (replace) the copy of ``queue``'s state, ahead of the file version ``seen``;
    its path, or '' when it cannot be kept (no private folder in memory, no version)."""
    target = copy_path(path, make=True)
    if target is None or seen is None:
        return ""
    jobs = [{"job": job.id, "seq": 1, "set": {name: getattr(job, name) for name in RUN_FIELDS}}
            for job in queue.jobs if job.id and job.status not in RESUMABLE_STATUSES]
    data = dumps({FORMAT: 1, "file": os.path.realpath(path), "queue": queue.created,
                  "seen": list(seen), "written_at": now_iso(), "jobs": jobs}).encode()
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(temp, target)
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass
        return ""
    return str(target)


def drop(path: str | os.PathLike) -> None:
    """Remove the copy of the queue at ``path`` (its state is on disk now)."""
    target = copy_path(path)
    if target is not None:
        try:
            os.unlink(target)
        except OSError:
            pass


def stamp(path: str | os.PathLike) -> tuple | None:
    """The copy's change stamp (see :func:`spacrq.runfiles.file_stamp`), None when there is
    none: a watcher reads the queue again when it changes."""
    target = copy_path(path)
    return file_stamp(target) if target is not None else None


def exists(path: str | os.PathLike) -> bool:
    target = copy_path(path)
    return target is not None and os.path.lexists(target)


def _read(target: Path) -> Any:
    fd = os.open(target, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise RunFileError(f"{target} is not a regular file of this user's")
        if st.st_size > MAX_BYTES:
            raise RunFileError(f"{target} is larger than a copy of a queue's state can be")
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return loads(b"".join(chunks), where=target)


def _ahead(record: dict, attempts: int, status: str, started: str) -> bool:
    """Whether a copy's run fields are further on than the job's as the file has them."""
    theirs = record.get("attempts", 0)
    if theirs != attempts:
        return theirs > attempts
    rank = {STATUS_RUNNING: 1}
    mine = 0 if status in RESUMABLE_STATUSES else rank.get(status, 2)
    new = record.get("status", status)
    new_rank = 0 if new in RESUMABLE_STATUSES else rank.get(new, 2)
    return new_rank > mine and (mine == 0 or record.get("started", started) == started)


def take_in(queue: Queue, path: str | os.PathLike) -> int:
    """Apply the copy in memory of ``path``'s queue (when there is one, and it is ahead of
    this very version of the file) to ``queue``, read from that file; the jobs moved on.
    What keeps it from being applied is a warning of ``queue``'s, and ``queue.memory_copy``
    is set to the copy's path whenever one is there (applied or not) for the folding
    command to remove."""
    target = copy_path(path)
    if target is None or not os.path.lexists(target):
        return 0
    queue.memory_copy = str(target)
    try:
        doc = _read(target)
    except (OSError, RunFileError) as exc:
        queue.warnings.append(f"a copy of a runner's state in memory ({target}) could not be "
                              f"read ({getattr(exc, 'strerror', None) or exc}); it was not "
                              "applied")
        return 0
    problem = _problem(doc, path, queue)
    if problem:
        queue.warnings.append(f"a copy of a runner's state in memory ({target}) was not "
                              f"applied: {problem}")
        return 0
    index = {job.id: job for job in queue.jobs}
    moved = 0
    for record in doc["jobs"]:
        job = index.get(record["job"])
        fields = record["set"]
        if job is None or not _ahead(fields, job.attempts, job.status, job.started):
            continue
        for name, value in fields.items():
            setattr(job, name, dict(value) if isinstance(value, dict) else
                    list(value) if isinstance(value, list) else value)
        moved += 1
    if moved:
        queue.warnings.append(f"{moved} job(s) were read from a runner's copy of its state in "
                              f"memory ({target}): the disk could not take it then")
    return moved


def _problem(doc: Any, path: str | os.PathLike, queue: Queue) -> str:
    """Why the copy ``doc`` does not apply to this version of the file, or ''."""
    if not isinstance(doc, dict) or doc.get(FORMAT) != 1 or not isinstance(doc.get("jobs"), list):
        return "it is not such a copy"
    if doc.get("file") != os.path.realpath(path):
        return "it is of another queue file"
    if queue.created_in_file and doc.get("queue") != queue.created:
        return "it is of another queue (the file was replaced by another queue since)"
    seen = doc.get("seen")
    if not isinstance(seen, list) or tuple(seen) != file_stamp(path):
        return ("the file was written since by something other than spacrq, so the copy "
                "may not belong to it")
    bad = next((transition_problem(r) for r in doc["jobs"] if transition_problem(r)), "")
    if bad:
        return f"a job of it is wrong ({bad})"
    return ""
