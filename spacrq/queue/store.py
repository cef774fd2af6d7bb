"""Reading and writing queue files, and the transition journal that keeps runs flat.

Every transition of a running queue (job started, finished, skipped…) must
survive a power cut.  Rewriting a 2000-job queue file twice per job would make
a long queue slower with every job (quadratic), so the runner instead appends
each transition as one fsync'd line to ``<stem>_logs/journal.jsonl`` and
rewrites the queue file only at checkpoints (at the start, every few seconds,
and at the end).  The queue file records the last journal line it already
includes (``journal_seq``); :func:`load_queue` replays the lines after it, so
whoever loads the file — the window, ``spacrq queue status``, a resume after a
crash — sees every transition.  The queue file itself is only ever replaced
atomically, so it always parses, and spaCR, which knows nothing of the
journal, still reads it (as of the last checkpoint).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from spacrq.queue.model import RUN_FIELDS, Job, Queue, QueueError
from spacrq.runfiles import JsonlTail, write_json

JOURNAL_FILE = "journal.jsonl"


def logs_dir(path: str | os.PathLike) -> Path:
    """``<dir>/<stem>_logs`` where stem is the file name up to its first dot."""
    target = Path(path)
    stem = target.name.split(".")[0] or "queue"
    return target.parent / f"{stem}_logs"


def journal_path(path: str | os.PathLike) -> Path:
    return logs_dir(path) / JOURNAL_FILE


def read_queue_document(path: str | os.PathLike) -> Any:
    """The parsed JSON of a queue file.  :raises QueueError: one sentence with the fix."""
    return _read_document(path)[0]


def _read_document(path: str | os.PathLike) -> tuple[Any, int]:
    """``(parsed document, inode of the file read)``."""
    target = Path(path)
    if target.is_dir():
        raise QueueError(f"{target} is a folder, not a queue file; give the path of a "
                         "*.queue.json file")
    try:
        with open(target, "rb") as handle:
            inode = os.fstat(handle.fileno()).st_ino
            text = handle.read().decode("utf-8")
    except FileNotFoundError:
        raise QueueError(f"queue file not found: {target}; check the path, or create it "
                         "with 'spacrq queue add'") from None
    except UnicodeDecodeError:
        raise QueueError(f"{target} is not a text file; a queue file is JSON like "
                         '{"spacr_queue": 1, "jobs": [...]}') from None
    except OSError as exc:
        raise QueueError(f"could not read {target} ({exc.strerror or exc}); check its "
                         "permissions") from None
    if not text.strip():
        raise QueueError(f"{target} is empty; a queue file looks like "
                         '{"spacr_queue": 1, "jobs": [...]}')
    try:
        return json.loads(text), inode
    except json.JSONDecodeError as exc:
        raise QueueError(f"{target} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                         f"{exc.msg}); fix that spot in an editor") from None


def apply_transition(queue: Queue, record: Any, index: dict[str, Job] | None = None) -> bool:
    """Apply one journal record to ``queue``; False when it does not apply.

    Exposed so a watcher can tail the journal and keep its copy current
    without reloading the whole file.
    """
    if not isinstance(record, dict):
        return False
    seq = record.get("seq")
    if not isinstance(seq, int) or seq <= queue.journal_seq:
        return False
    changes = record.get("set")
    if not isinstance(changes, dict):
        return False
    job_id = record.get("job")
    job = index.get(job_id) if index is not None else queue.find(job_id)
    if job is None:
        return False
    for key, value in changes.items():
        if key in RUN_FIELDS:
            setattr(job, key, value)
    queue.journal_seq = seq
    return True


def replay_journal(queue: Queue, path: str | os.PathLike) -> int:
    """Apply the journal lines written after the queue file's checkpoint; how many."""
    journal = journal_path(path)
    if not journal.exists():
        return 0
    index = {job.id: job for job in queue.jobs}
    applied = 0
    for record in JsonlTail(journal).read():
        applied += apply_transition(queue, record, index)
    return applied


def last_journal_seq(path: str | os.PathLike) -> int:
    """The seq of the journal's last complete line (read from its tail only)."""
    journal = journal_path(path)
    try:
        with open(journal, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            data = handle.read()
    except OSError:
        return 0
    for raw in reversed(data.splitlines()):
        try:
            seq = json.loads(raw).get("seq")
        except (ValueError, AttributeError, UnicodeDecodeError):
            continue
        if isinstance(seq, int):
            return seq
    return 0


def load_queue(path: str | os.PathLike) -> Queue:
    """The queue in ``path`` with every journalled transition applied.

    A runner may checkpoint while this reads (replace the file, then empty
    the journal); a file that was replaced between reading it and reading the
    journal is read again, so the result is never older than what was read.

    :raises QueueError: when the file is missing or not a queue: one sentence, never a traceback.
    """
    for _ in range(20):
        document, inode = _read_document(path)
        queue = Queue.from_dict(document)
        replay_journal(queue, path)
        try:
            if os.stat(path).st_ino == inode:
                return queue
        except OSError:
            return queue
    return queue


def save_queue(queue: Queue, path: str | os.PathLike) -> Path:
    """Replace ``path`` with ``queue`` atomically, as indented JSON spaCR can read.

    What is in memory supersedes every transition journalled so far, so the
    written ``journal_seq`` covers the journal's current end.
    """
    queue.journal_seq = max(queue.journal_seq, last_journal_seq(path))
    try:
        return write_json(path, queue.to_dict())
    except OSError as exc:
        raise QueueError(f"could not write {path} ({exc.strerror or exc}); check that the "
                         "folder exists and is writable") from None


class Journal:
    """The runner's append-only record of transitions for one queue file.

    Each :meth:`job` call is one append, made durable by an fsync (constant
    cost, however long the queue).  A line written with ``sync=False`` is
    made durable by the next synced line: the runner uses this as a group
    commit — a job's "finished" line is fsync'd together with the next job's
    "running" line, before that job starts, so nothing that happens outside
    the runner ever depends on a line that is not yet durable, at one fsync
    per job.  :meth:`checkpoint` folds everything into the queue file
    atomically and empties the journal.
    """

    def __init__(self, queue: Queue, path: str | os.PathLike, *, durable: bool = True) -> None:
        self.queue = queue
        self.path = Path(path)
        self.file = journal_path(path)
        self.file.parent.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        self.seq = max(queue.journal_seq, last_journal_seq(path))
        self._fd = os.open(self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._unsynced = False

    def _append(self, record: dict, sync: bool = True) -> None:
        self.seq += 1
        record["seq"] = self.seq
        line = json.dumps(record, default=str, separators=(",", ":")) + "\n"
        os.write(self._fd, line.encode("utf-8"))
        self._unsynced = True
        if sync:
            self.flush()
        self.queue.journal_seq = self.seq

    def flush(self) -> None:
        """Make every line written so far durable (one fsync covers them all)."""
        if self.durable and self._unsynced and self._fd >= 0:
            os.fsync(self._fd)
        self._unsynced = False

    def job(self, job: Job, fields: Iterable[str], sync: bool = True) -> None:
        """Persist the current values of ``fields`` of ``job``.

        ``sync=False`` makes the line visible to every other process at once
        but skips the fsync: for facts a power cut makes moot (the pid of a
        job that a reboot has killed anyway).
        """
        self._append({"job": job.id, "set": {f: _plain(getattr(job, f)) for f in fields}}, sync)

    def checkpoint(self) -> None:
        """Write the whole queue file (atomically), then start the journal afresh."""
        self.queue.journal_seq = self.seq
        write_json(self.path, self.queue.to_dict())
        os.ftruncate(self._fd, 0)
        self._unsynced = False

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value
