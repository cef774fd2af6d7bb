"""Reading and writing queue files: the file is the truth, and it is never half-written.

Each queue file has a logs folder of its own (:mod:`spacrq.queue.layout`):
``night.queue.json`` → ``night_logs/``, ``night.backup.queue.json`` →
``night.backup_logs/``, so two queue files never share a journal, a lock,
a runner record or a control file.

How a running queue is persisted (two modes, one bound):

* **Small queues (≤ :data:`DIRECT_MAX_JOBS` jobs, the night's usual size, and
  a file of ≤ :data:`DIRECT_MAX_BYTES`; 500 jobs of a short command are
  ~300 KB)**: the queue file itself is replaced
  atomically at every transition, so whoever reads the file alone — spaCR,
  ``jq``, a script — sees every job's status as it stands.  Each transition
  is made durable by one fsync'd line of ``journal.jsonl``, written before
  the next job starts (a job's end and the next job's start share one
  fsync); the file itself is fsync'd at checkpoints (start, end, every few
  hundred lines or a minute), which also empty the journal.  After a power
  cut the file may be as of its last checkpoint (never torn on ext4 and btrfs,
  which write a renamed file's data before the rename; where it is empty or
  zeros — XFS — the last checkpoint stands in for it: :mod:`spacrq.queue.lastgood`),
  and the first command that opens it folds the journal in.
* **Larger queues**: rewriting a 2000-job file twice per job would make the
  night slower with every job, so the file is replaced only at the
  checkpoints; between them the journal alone has the transitions.  A small
  queue that grows past either bound while it runs (jobs added to it) goes on
  this way from then on, and its runner's log says so.
  :func:`load_queue` replays the lines newer than the file's
  ``journal_seq``; :func:`open_queue` — what every command uses — first
  folds a journal left by a dead runner into the file.

Every writer holds the queue's edit lock (:mod:`spacrq.queue.locks`) from
load to save, so no change is lost between two writers.  Bytes on disk are
parsed by :func:`spacrq.runfiles.loads` only; a file or journal line that is
not what it should be is one sentence (file) or a skipped line with a
warning (journal), never a traceback.  The runner's side is
:mod:`spacrq.queue.persist`.
"""
from __future__ import annotations

import copy
import os
import stat
import time
from pathlib import Path
from typing import Any

from spacrq.queue.journal import (Journal, apply_transition, journal_has_lines,
                                  last_journal_seq, open_journal_file,
                                  replay_journal, transition_problem)
from spacrq.queue.lastgood import (DAMAGED, checkpoint_path, drop_checkpoint, journal_start,
                                   keep_checkpoint, read_checkpoint)
from spacrq.queue.layout import (JOURNAL_FILE, edit_lock, journal_path, legacy_logs_dir,
                                 logs_dir, runner_names)
from spacrq.queue import memcopy
from spacrq.queue.locks import runner_holds
from spacrq.queue.model import Queue, QueueError
from spacrq.queue.render import write_queue_file
from spacrq.runfiles import RunFileError, file_stamp, loads, write_fix

__all__ = ["load_queue", "open_queue", "save_queue", "edit_queue", "read_queue_document",
           "file_key", "write_queue_file", "logs_dir", "legacy_logs_dir", "journal_path",
           "edit_lock", "runner_names", "Journal", "apply_transition", "replay_journal",
           "last_journal_seq", "transition_problem", "JOURNAL_FILE", "DIRECT_MAX_JOBS",
           "DIRECT_MAX_BYTES"]

#: Queues up to this many jobs have their file rewritten at every transition…
DIRECT_MAX_JOBS = 500
#: …while the file is at most this many bytes (jobs with large settings make a large
#: file: each rewrite costs its size, twice per job).
DIRECT_MAX_BYTES = 512 * 1024
#: Largest queue file read (a 2000-job file is about 1 MB).
MAX_QUEUE_BYTES = 64 * 1024 * 1024


def read_queue_document(path: str | os.PathLike) -> Any:
    """The parsed JSON of a queue file.  :raises QueueError: one sentence with the fix."""
    return _read_document(path)[0]


def _refuse_duplicate_keys(data: bytes, where: str | os.PathLike) -> None:
    """:raises QueueError: one sentence when an object of ``data`` holds a key twice.

    JSON keeps the last of them, so a queue file with ``"jobs"`` twice (a hand-made
    merge) loses the first list's jobs at the next save, silently.  Asked for by the
    commands that load a queue to run or change it, not by every reader: it parses the
    bytes a second time (about 25 ms for 2000 jobs), after they parsed once strictly."""
    import json

    def pairs(items: list) -> dict:
        seen = set()
        for key, _ in items:
            if key in seen:
                raise QueueError(f'{where} has the key "{key}" twice in one object; JSON keeps '
                                 "only the last, so what the first holds would be lost at the "
                                 "next save: merge the two, or remove one")
            seen.add(key)
        return dict(items)
    json.loads(data, object_pairs_hook=pairs)


def _read_document(path: str | os.PathLike, unique_keys: bool = False) -> tuple[Any, int]:
    """``(parsed document, inode of the file read)``; with ``unique_keys`` a key twice in
    one object is refused (see :func:`_refuse_duplicate_keys`)."""
    target = Path(path)
    if target.is_dir():
        raise QueueError(f"{target} is a folder, not a queue file; give the path of a "
                         "*.queue.json file")
    try:
        # never blocks: a FIFO or a device in the file's place is refused, not waited on
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise QueueError(f"{target} is not a regular file (a pipe, a socket or a "
                                 "device is in its place); move it away and give the path of "
                                 "a *.queue.json file")
            if st.st_size > MAX_QUEUE_BYTES:
                raise QueueError(f"{target} is {st.st_size:,} bytes, more than a queue file may "
                                 f"hold ({MAX_QUEUE_BYTES:,}); give the path of a *.queue.json file")
            data = handle.read(MAX_QUEUE_BYTES + 1)
    except FileNotFoundError:
        raise QueueError(f"queue file not found: {target}; check the path, or create it "
                         "with 'spacrq queue add'") from None
    except OSError as exc:
        raise QueueError(f"could not read {target} ({exc.strerror or exc}); check its "
                         "permissions") from None
    return _parse_document(data, target, unique_keys), st.st_ino


class DamagedQueueFile(QueueError):
    """The queue file's bytes are not JSON (empty, zero bytes, torn, not text): what a
    power cut can leave of a file replaced without an fsync (see :mod:`spacrq.queue.lastgood`).
    ``what`` says which, in a few words."""

    def __init__(self, message: str, what: str) -> None:
        super().__init__(message)
        self.what = what


def _parse_document(data: bytes, target: str | os.PathLike, unique_keys: bool) -> Any:
    if not data.strip():
        raise DamagedQueueFile(f"{target} is empty; a queue file looks like "
                               '{"spacr_queue": 1, "jobs": [...]}', "empty")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise DamagedQueueFile(f"{target} is not a text file; a queue file is JSON like "
                               '{"spacr_queue": 1, "jobs": [...]}', "not a text file") from None
    try:
        document = loads(data, where=target)
    except RunFileError as exc:  # it names the line and column where it broke
        raise DamagedQueueFile(str(exc), "not valid JSON") from None
    if unique_keys:
        _refuse_duplicate_keys(data, target)
    return document


# -- loading and saving ---------------------------------------------------------

def load_queue(path: str | os.PathLike, unique_keys: bool = False) -> Queue:
    """The queue in ``path`` with every journalled transition applied (reads only); with
    ``unique_keys`` (a command that runs or changes it) a key twice in one object is
    refused, before a save could lose the first.

    A runner may checkpoint while this reads (replace the file, then empty
    the journal); a file that was replaced between reading it and reading the
    journal is read again, so the result is never older than what was read.

    :raises QueueError: when the file is missing or not a queue: one sentence, never a traceback.
    """
    queue = None
    for _ in range(20):
        recovered = None
        try:
            document, inode = _read_document(path, unique_keys)
        except DamagedQueueFile as damage:
            recovered, inode = _from_checkpoint(path, damage, unique_keys)
            what = damage.what
        if recovered is not None:
            queue = recovered
        elif isinstance(document, dict) and "jobs" not in document \
                and "spacr_queue" not in document:
            raise QueueError(f'{path} is not a queue file: it holds neither "jobs" nor '
                             '"spacr_queue"; name a queue file (NAME.queue.json), or write '
                             '{"spacr_queue": 1, "jobs": []} in it to start an empty queue')
        else:
            queue = Queue.from_dict(document)
        replay_journal(queue, path)
        memcopy.take_in(queue, path)  # (a runner's state the disk could not take)
        if recovered is not None:
            queue.recovered_from = str(checkpoint_path(path))
            queue.warnings.append(
                f"{path} could not be read ({what}): its last write did not reach the disk "
                "before a power cut or a crash, so it was read from its last checkpoint "
                f"({logs_dir(path).name}/{checkpoint_path(path).name}) and its journal, "
                "which hold every transition made durable")
            return queue  # (the damaged file was not replaced meanwhile: it is still damaged)
        try:
            if os.stat(path).st_ino == inode:
                return queue
        except OSError:
            return queue
    return queue


def _from_checkpoint(path: str | os.PathLike, damage: DamagedQueueFile,
                     unique_keys: bool) -> tuple[Queue, int]:
    """The queue of ``path``'s last checkpoint and its inode, when it can stand in for the
    damaged file (see :mod:`spacrq.queue.lastgood`).  :raises DamagedQueueFile:
    ``damage`` when there is none to stand in, or one sentence saying why the one there
    cannot (another queue's, transitions missing between it and the journal, not a
    queue), naming both files."""
    kept = read_checkpoint(path, MAX_QUEUE_BYTES)
    if kept is None:
        raise damage
    data, inode = kept
    try:
        if os.stat(path).st_ino == inode:
            raise damage  # (damaged in place: the checkpoint is the same bytes)
    except FileNotFoundError:
        pass
    start = journal_start(path)
    if start is None:
        raise damage  # (no journal of a run: the checkpoint may be of an earlier one)
    checkpoint = checkpoint_path(path)

    def refuse(why: str) -> DamagedQueueFile:
        return DamagedQueueFile(f"{damage}; its last checkpoint {checkpoint} cannot stand in "
                                f"for it: {why}", damage.what)
    if start == DAMAGED:
        raise refuse(f"the first lines of the journal {journal_path(path)} are damaged, so "
                     "whether transitions are missing between the two cannot be told: copy "
                     "the checkpoint over the file to go on from it, and check the jobs "
                     "after it by their logs")
    owner, first = start
    try:
        document = _parse_document(data, checkpoint, unique_keys)
    except DamagedQueueFile as exc:
        raise refuse(f"it is {exc.what}") from None
    if not isinstance(document, dict) or not isinstance(document.get("jobs"), list):
        raise refuse('it is not a queue (it holds no "jobs" list)')
    try:
        queue = Queue.from_dict(document)
    except QueueError as exc:
        raise refuse(str(exc)) from None
    if owner is not None and queue.created_in_file and owner != queue.created:
        raise refuse(f"it is another queue's (created {queue.created}; the journal's queue "
                     f"was created {owner}), so neither is applied to the other: restore the "
                     "file from a copy, or move the journal away to start it afresh")
    if first and first > queue.journal_seq + 1:
        raise refuse(f"it is older than the journal's first transition (seq {first}, the "
                     f"checkpoint has {queue.journal_seq}), so transitions between them are "
                     "missing: copy the checkpoint over the file to go on from it, and check "
                     "the jobs after it by their logs")
    return queue, inode


def open_queue(path: str | os.PathLike) -> Queue:
    """:func:`load_queue` for a command: a journal left by a dead runner is folded in first.

    After a crash the file alone may be behind its journal; folding makes it
    the truth again for every reader that knows only the file (spaCR, ``jq``).
    Never while a runner holds the queue (its journal is live), and a fold
    that cannot be written leaves everything as it was.
    """
    queue = load_queue(path, unique_keys=True)
    if not (journal_has_lines(path) or queue.recovered_from or queue.memory_copy) \
            or runner_holds(logs_dir(path)):
        return queue
    try:
        with edit_lock(path):
            if runner_holds(logs_dir(path)):
                return queue
            queue = load_queue(path, unique_keys=True)
            queue.journal_seq = max(queue.journal_seq, last_journal_seq(path))
            write_queue_file(queue, path)
            _written_in_full(path, queue)
            kept = _empty_journal(path, keep=queue.journal_skipped > 0 or queue.journal_foreign)
            if kept is not None:
                queue.warnings.append(f"the journal, lines that could not be applied "
                                      f"included, is kept as {kept}")
            _checkpoint_superseded(path, queue)
    except (QueueError, OSError) as exc:
        queue.warnings.append(f"the journal could not be folded into {path} "
                              f"({getattr(exc, 'strerror', None) or exc}); it was read instead")
    return queue


def _written_in_full(path: str | os.PathLike, queue: Queue) -> None:
    """After ``queue`` — read with a copy in memory of a dead runner's state, applied or not
    — was written to ``path`` in full: that copy is in the file now (or was not of it), so
    it goes, unless a runner holds the queue (the copy is its own then, and it removes it
    once it saved)."""
    if queue.memory_copy and not runner_holds(logs_dir(path)):
        memcopy.drop(path, also=queue.memory_copy)


def _empty_journal(path: str | os.PathLike, keep: bool) -> Path | None:
    """Empty the journal just folded into the file (never through a link: see
    :func:`journal_problem`); with ``keep`` (lines of it could not be applied) it is moved
    aside instead, named by the time, so what was skipped stays for the operator to read:
    where it went."""
    journal = journal_path(path)
    if keep:
        kept = journal.with_name(f"journal.skipped-{time.time_ns()}.jsonl")
        os.replace(journal, kept)
        return kept
    try:
        fd = open_journal_file(journal, os.O_WRONLY)
    except FileNotFoundError:
        return None  # (no journal: nothing to empty)
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    return None


def save_queue(queue: Queue, path: str | os.PathLike) -> Path:
    """Replace ``path`` with ``queue`` atomically, as indented JSON spaCR can read.

    What is in memory supersedes every transition journalled so far, so the
    written ``journal_seq`` covers the journal's current end.  The caller
    holds :func:`edit_lock` when it loaded the queue from ``path`` first.

    :raises QueueError: one sentence when the file cannot be written.
    """
    queue.journal_seq = max(queue.journal_seq, last_journal_seq(path))
    try:
        written = write_queue_file(queue, path)
    except (OSError, RunFileError) as exc:
        raise QueueError(f"could not write {path} ({getattr(exc, 'strerror', None) or exc}); "
                         f"{write_fix(exc)}") from None
    _written_in_full(path, queue)
    _checkpoint_superseded(path, queue)
    return written


def _checkpoint_superseded(path: str | os.PathLike, queue: Queue) -> None:
    """``queue`` was just written durably to ``path`` by a writer other than its runner
    (who holds the edit lock, so no checkpoint is being made meanwhile): a checkpoint older
    than it must never stand in for it.  A dead runner's is dropped; a live runner's is
    replaced by this file, which holds every transition its journal had (its
    ``journal_seq`` covers them), so the jobs added or changed now are in it until the
    runner's next checkpoint.  A queue read from its checkpoint says it was written again."""
    if queue.recovered_from:
        queue.warnings.append(f"{Path(path).name} was written again from them")
    if not os.path.lexists(checkpoint_path(path)):
        return
    if runner_holds(logs_dir(path)) and keep_checkpoint(path) == "":
        return
    drop_checkpoint(path)  # (and when it cannot be replaced: none, rather than an older one)


def refuse_unreadable(path: str | os.PathLike) -> None:
    """Before a writer makes the queue's logs folder and lock for the first time: a missing
    or garbled file is refused then, leaving the folder as it was.

    :raises QueueError: one sentence, as :func:`load_queue` says it."""
    if not logs_dir(path).exists():
        load_queue(path)


#: what changes when anybody replaces the file (inode, size, mtime); None when absent
file_key = file_stamp


def edit_queue(path: str | os.PathLike, change, *, create: Queue | None = None,
               landed=None) -> Queue:
    """Load → ``change(queue)`` → save, under the edit lock: no concurrent change is lost.

    ``create`` is the queue to start from when the file does not exist yet.
    While a runner holds the queue the change is still saved, and the runner
    takes the new jobs in at its next transition (see :mod:`spacrq.queue.persist`).

    The lock is a file in the queue's logs folder, and a file can be removed
    while it is held (a cleaning script, a hand): a second writer then locks a
    new file and two changes overlap.  So the lock is checked once the file is
    written: when it is no longer the lock at its path, the queue is read again
    under the lock there now and, unless ``landed(queue)`` says the change is in
    it, changed and written again — a change that could have been overwritten
    is made again, never lost in silence.  Without ``landed`` the change is
    taken to be one that may be made twice.

    :raises QueueError: the file cannot be read or written, or ``change`` refused.
    """
    if create is None or os.path.lexists(path):
        refuse_unreadable(path)
    for attempt in range(20):
        with edit_lock(path) as lock:
            if create is not None and not Path(path).exists():
                queue = copy.deepcopy(create)
            else:
                queue = load_queue(path, unique_keys=True)
            if attempt and landed is not None and landed(queue):
                return queue  # it is in the file (nobody overwrote it)
            change(queue)
            try:
                write_queue_file(queue, path)
            except (OSError, RunFileError) as exc:
                raise QueueError(f"could not write {path} "
                                 f"({getattr(exc, 'strerror', None) or exc}); nothing was "
                                 f"changed: {write_fix(exc)}") from None
            if lock.held():  # held from load to the end of the write: nobody overlapped
                _written_in_full(path, queue)
                _checkpoint_superseded(path, queue)
                return queue
    raise QueueError(f"the queue's lock file {logs_dir(path) / 'queue.lock'} keeps being removed "
                     f"while this change is made; {path} may not hold it: find what removes the "
                     "lock file, then check the queue")
