"""The transition journal of a large queue: one fsync'd line per change, replayed on load.

See :mod:`spacrq.queue.store` for when it is used.  Every line is checked
before it is applied (:func:`transition_problem`): a torn line, a line of
the wrong types or with an unknown status is skipped with a warning and
never folded into the file, so one bad line costs only itself.
"""
from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any, Mapping

import orjson

from spacrq.queue.lastgood import keep_checkpoint
from spacrq.queue.layout import JOURNAL_FILE, journal_path, legacy_logs_dir, logs_dir, runner_names
from spacrq.queue.model import ALL_STATUSES, RUN_FIELDS, Job, Queue, QueueError, lost_runs_ok
from spacrq.queue.render import write_queue_file
from spacrq.queue.room import give_back_room, keep_room
from spacrq.rawio import write_all
from spacrq.runfiles import JsonlTail, RunFileError, loads, open_regular, still_named

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: What each journalled field may hold; a line breaking any of them is skipped whole.
_FIELD_OK = {
    "status": lambda v: v in ALL_STATUSES,
    "started": lambda v: isinstance(v, str), "finished": lambda v: isinstance(v, str),
    "error": lambda v: isinstance(v, str), "log_path": lambda v: isinstance(v, str),
    "failure_kind": lambda v: isinstance(v, str),
    "exit_code": lambda v: v is None or _is_int(v),
    "attempts": lambda v: _is_int(v) and v >= 0,
    "run_status": lambda v: v is None or isinstance(v, dict),
    "process": lambda v: v is None or isinstance(v, dict),
    "ran_with": lambda v: v is None or isinstance(v, dict),
    "lost_runs": lost_runs_ok,
    "overrides": lambda v: isinstance(v, dict) or (isinstance(v, list)
                                                   and all(isinstance(i, str) for i in v)),
}
assert set(_FIELD_OK) == set(RUN_FIELDS)


def header_of(queue: Queue) -> dict:
    """The journal's first line: which queue its transitions belong to (the queue's
    ``created``, which no save changes), so they are never applied to another queue copied
    over the file."""
    return {"queue": queue.created, "name": queue.name}


def is_header(record: Any) -> bool:
    return isinstance(record, Mapping) and "queue" in record and "job" not in record


def foreign(queue: Queue, header: Any) -> bool:
    """Whether a journal whose first line is ``header`` was written for another queue than
    ``queue`` (False when either cannot tell: a journal of an older spacrq, a hand-written
    file that never said when it was created)."""
    return (is_header(header) and isinstance(header.get("queue"), str)
            and queue.created_in_file and header["queue"] != queue.created)


def transition_problem(record: Any) -> str:
    """Why a journal line cannot be applied as it stands, or ``''``."""
    if not isinstance(record, Mapping):
        return "it is not an object"
    if not _is_int(record.get("seq")) or record["seq"] <= 0:
        return "its seq is not a positive whole number"
    if not isinstance(record.get("job"), str):
        return "its job is not a job id"
    changes = record.get("set")
    if not isinstance(changes, Mapping) or not changes:
        return 'its "set" is not an object of fields'
    for key, value in changes.items():
        check = _FIELD_OK.get(key)
        if check is None:
            return f"it sets {key!r}, which is not a field a run changes"
        if not check(value):
            return f"its {key} is {value!r:.60}, which a {key} cannot be"
    return ""


def apply_transition(queue: Queue, record: Any, index: dict[str, Job] | None = None) -> bool:
    """Apply one journal record to ``queue``; False when it does not apply.

    A record of the wrong shape or types (see :func:`transition_problem`) never
    applies.  Exposed so a watcher can tail the journal and keep its copy
    current without reloading the whole file.
    """
    if transition_problem(record):
        return False
    if record["seq"] <= queue.journal_seq:
        return False
    job = index.get(record["job"]) if index is not None else queue.find(record["job"])
    if job is None:
        return False
    for key, value in record["set"].items():
        setattr(job, key, dict(value) if isinstance(value, dict) else
                list(value) if isinstance(value, list) else value)
    queue.journal_seq = record["seq"]
    return True




def journal_problem(file: str | os.PathLike) -> str:
    """One sentence when ``file`` (a journal) is in the way — a symbolic link, a FIFO, a
    device, a folder — else '' (a regular file, or none): such a journal is neither read
    nor written, nor emptied (an empty-the-journal through a link emptied its target)."""
    try:
        st = os.lstat(file)
    except OSError:
        return ""
    if stat.S_ISREG(st.st_mode):
        return ""
    what = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else
            "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file")
    return (f"the queue's journal {file} is {what}; spacrq neither reads nor writes it there "
            "(never through a link, never waiting on a pipe): move it away")


def open_journal_file(file: str | os.PathLike, flags: int) -> int:
    """``file`` opened with ``flags``, only if it is a regular file (see :func:`journal_problem`).

    :raises OSError: it is something else, or cannot be opened."""
    try:
        return open_regular(file, flags)
    except OSError as exc:
        if exc.errno:  # (not there, no permission, ELOOP: as the system says it)
            raise
        raise OSError(0, journal_problem(file) or f"{file} is not a regular file: move it "
                      "away") from None


def _journal_files(path: str | os.PathLike) -> list[tuple[Path, bool]]:
    """The journals to replay, each with whether its queue's runner record names another
    file (the old layout's folder, shared by files of one name, whose runner ran the other
    one): such a journal is this file's only if its first line names the queue."""
    files = []
    old = legacy_logs_dir(path)
    if old is not None and (old / JOURNAL_FILE).exists():
        files.append((old / JOURNAL_FILE, False))
    own = journal_path(path)
    try:
        st = os.lstat(own)
    except OSError:
        return files
    if stat.S_ISREG(st.st_mode) and st.st_size == 0:
        return files  # (nothing in it to apply, or to warn of)
    files.append((own, runner_names(logs_dir(path), path) is False))
    return files


def replay_journal(queue: Queue, path: str | os.PathLike) -> int:
    """Apply the journal lines written after the file's checkpoint; how many.

    Unreadable lines and lines of the wrong types are skipped, each file's
    count and reason added to ``queue.warnings``.
    """
    index = {job.id: job for job in queue.jobs}
    applied = 0
    for journal, named_elsewhere in _journal_files(path):
        problem = journal_problem(journal)
        if problem:  # (it may hold transitions the file is behind: nothing is read past it)
            raise QueueError(f"{problem}, then run the command again")
        tail = JsonlTail(journal)
        skipped, reason = 0, ""
        try:
            records = tail.read()
        except OSError as exc:  # a folder, a FIFO, no permission: one sentence, not a traceback
            raise QueueError(f"the queue's journal {journal} cannot be read "
                             f"({exc.strerror or exc}); it holds the transitions since the "
                             "file was last written in full: put the journal back or move "
                             "what is in its place away, then run the command again") from None
        if named_elsewhere and not (records and is_header(records[0])):
            # (a journal that names its queue was written in the file's own folder — this
            # layout's — whatever path its runner's record names: the queue's folder may have
            # been moved or mounted elsewhere since; one that names none may be the other's)
            queue.journal_foreign = True  # (kept aside when folded, never emptied)
            queue.warnings.append(
                f"the journal {journal} was not applied: it names no queue, and its runner's "
                f"record ({logs_dir(path) / 'runner.json'}) names another queue file, so it may "
                "be that file's (the folder was shared by files of one name before spacrq "
                "0.2); if this queue was moved here, put its runner.json's \"queue\" back to "
                "this file's path")
            continue
        if records and foreign(queue, records[0]):
            queue.journal_foreign = True
            queue.warnings.append(
                f"the journal {journal} was written for another queue (created "
                f"{records[0]['queue']}; this file's was created {queue.created}), so its "
                "transitions were not applied: the file was replaced by another queue")
            continue
        for record in records:
            if is_header(record):
                continue
            problem = transition_problem(record)
            if problem:
                skipped, reason = skipped + 1, problem
                continue
            applied += apply_transition(queue, record, index)
        if tail.bad_lines:
            skipped, reason = skipped + tail.bad_lines, tail.last_problem or reason
        queue.journal_skipped += skipped
        if skipped:
            queue.warnings.append(f"skipped {skipped} line(s) of {journal} that cannot be "
                                  f"applied (the last because {reason}); the rest was applied")
    return applied


def last_journal_seq(path: str | os.PathLike) -> int:
    """The seq of the journal's last complete, well-formed line (read from its tail only)."""
    try:
        with open(open_journal_file(journal_path(path), os.O_RDONLY), "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            data = handle.read()
    except OSError:
        return 0
    for raw in reversed(data.splitlines()):
        try:
            record = loads(raw)
        except RunFileError:
            continue
        if isinstance(record, dict) and _is_int(record.get("seq")):
            return record["seq"]
    return 0


def journal_has_lines(path: str | os.PathLike) -> bool:
    try:
        return journal_path(path).stat().st_size > 0
    except OSError:
        return False


class Journal:
    """The append-only record of transitions of one queue file (large queues).

    Each :meth:`job` call is one append, made durable by an fsync (constant
    cost, however long the queue).  A line written with ``sync=False`` is
    made durable by the next synced line or :meth:`flush`: the runner uses
    this as a group commit — a job's "finished" line is fsync'd together
    with the next job's "running" line, before that job starts.
    :meth:`checkpoint` folds everything into the queue file atomically and
    empties the journal.  Appends raise OSError (the runner's writer turns
    that into a note, never a crash).

    ``room`` bytes are allocated past the journal's end when it is opened,
    each time it is emptied and once half of it was written (see
    :mod:`spacrq.queue.room`): its appends do not need a new block, so a disk
    that fills in the night cannot refuse them; :meth:`close` gives back what
    was not used.  ``room_problem`` says why (all of) it could not be kept.
    """

    def __init__(self, queue: Queue, path: str | os.PathLike, *, durable: bool = True,
                 room: int = 0) -> None:
        self.queue = queue
        self.path = Path(path)
        self.file = journal_path(path)
        self.file.parent.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        self.seq = max(queue.journal_seq, last_journal_seq(path))
        self._fd = open_journal_file(self.file, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        self._unsynced = False
        self._syncer: _Syncer | None = None  # the thread of flush_behind, once used
        size = os.fstat(self._fd).st_size
        self._fresh = size == 0  # its first line says whose it is
        # (a line torn by a full disk or a crash must not swallow the next: a fresh line)
        self._torn = bool(size) and os.pread(self._fd, 1, size - 1) != b"\n"
        self.checkpoint_problem = ""  # why the last checkpoint could not be kept, if so
        self.room = room
        self.room_problem = keep_room(self._fd, room) if room else ""
        self._since_room = 0  # bytes written since the room was last kept

    def _append(self, record: dict, sync: bool = True) -> None:
        self.seq += 1
        record["seq"] = self.seq
        line = orjson.dumps(record, default=str, option=orjson.OPT_NON_STR_KEYS) + b"\n"
        if self._fresh:  # an empty journal's first line says whose transitions follow
            line = orjson.dumps(header_of(self.queue)) + b"\n" + line
        self.queue.journal_seq = self.seq
        if self._torn:
            line = b"\n" + line
        try:
            write_all(self._fd, line)  # (a short write — the room used up — is no write)
        except OSError:
            self._torn = True  # (part of it may be there)
            raise
        self._torn = False
        self._fresh = False
        self._since_room += len(line)
        if self.room and self._since_room >= self.room // 2:  # (kept again from the end)
            self._since_room = 0
            self.room_problem = keep_room(self._fd, self.room)
        self._unsynced = True
        if sync:
            self.flush()

    def still_there(self) -> bool:
        """Whether the file written is still the journal at its path (not removed, replaced)."""
        return still_named(self._fd, self.file)

    def flush(self) -> None:
        """Make every line written so far durable (one fsync covers them all); an fsync
        :meth:`flush_behind` started is waited for first.

        :raises OSError: this fsync, or the one started behind, failed.
        """
        self._await()
        if self.durable and self._unsynced and self._fd >= 0:
            os.fsync(self._fd)
        self._unsynced = False

    def flush_behind(self) -> None:
        """Start making every line written so far durable without waiting for it: the fsync
        runs on the journal's own thread (which holds no lock of the interpreter's while
        the disk works), and the runner goes on with the job it just started.  One is in
        flight at most: the next :meth:`flush_behind`, :meth:`flush`, :meth:`checkpoint`
        or :meth:`close` waits for it, and raises its OSError if it failed.

        :raises OSError: the fsync started behind before this one failed.
        """
        self._await()
        if not (self.durable and self._unsynced and self._fd >= 0):
            self._unsynced = False
            return
        if self._syncer is None:
            self._syncer = _Syncer(self._fd)
        self._syncer.begin()
        self._unsynced = False  # (once it completes; a failure is raised when it is awaited)

    def synced_behind(self) -> None:
        """Without waiting: raise the OSError of an fsync started behind that failed."""
        if self._syncer is not None:
            self._syncer.wait(block=False)

    def _await(self) -> None:
        if self._syncer is not None:
            self._syncer.wait()

    def job(self, job: Job, fields, sync: bool = True) -> None:
        """Persist the current values of ``fields`` of ``job``."""
        self._append({"job": job.id, "set": {f: getattr(job, f) for f in fields}}, sync)

    def checkpoint(self, parts: list[bytes] | None = None) -> None:
        """Write the whole queue file (atomically, durably), then start the journal afresh."""
        try:
            self._await()
        except OSError:  # (the lines it covered are in the file written now, durably)
            pass
        self.queue.journal_seq = self.seq
        write_queue_file(self.queue, self.path, durable=self.durable, parts=parts)
        # (before the journal is emptied; why not, when it cannot be: the runner says it)
        self.checkpoint_problem = keep_checkpoint(self.path, durable=self.durable)
        os.ftruncate(self._fd, 0)  # (which frees the room kept too: it is kept again)
        self._unsynced = False
        self._fresh = True
        self._torn = False
        if self.room:
            self._since_room = 0
            self.room_problem = keep_room(self._fd, self.room)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.flush()
            except OSError:
                pass
            if self._syncer is not None:
                self._syncer.stop()
                self._syncer = None
            if self.room:
                give_back_room(self._fd, self.room)
            os.close(self._fd)
            self._fd = -1


class _Syncer:
    """The thread that fsyncs a journal behind the runner (see :meth:`Journal.flush_behind`):
    one fsync at a time, asked for with :meth:`begin` and awaited with :meth:`wait`."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._go = threading.Lock()
        self._go.acquire()  # released: one fsync asked for (or the end)
        self._done = threading.Lock()
        self._done.acquire()  # released: that fsync is over
        self._busy = False  # an fsync asked for and not yet awaited
        self._error: OSError | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="spacrq-journal-fsync",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            if self._stopping:
                return
            try:
                os.fsync(self._fd)
            except OSError as exc:
                self._error = exc
            self._done.release()

    def begin(self) -> None:
        self._busy = True
        self._go.release()

    def wait(self, block: bool = True) -> None:
        """Wait for the fsync asked for (``block=False``: only if it is over already).

        :raises OSError: it failed (once: the error is taken).
        """
        if not self._busy or not self._done.acquire(block):
            return
        self._busy = False
        error, self._error = self._error, None
        if error is not None:
            raise error

    def stop(self) -> None:
        try:
            self.wait()
        except OSError:
            pass
        self._stopping = True
        self._go.release()
        self._thread.join()
