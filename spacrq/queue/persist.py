"""The runner's side of the queue file: every transition on disk, and saving never fatal.

Two modes, chosen when the run starts (see :mod:`spacrq.queue.store` for
why).  In both, each change is a journal line and :meth:`QueueWriter.commit`
— before a job starts, and when the queue ends — makes them durable with one
fsync (a group commit: a job's end and the next job's start, one fsync per
job).  ``"file"`` — queues of up to :data:`~spacrq.queue.store.DIRECT_MAX_JOBS`
jobs — then also replaces the queue file (atomically; its own fsync waits
for the next checkpoint), so the file alone shows every status as it
stands; ``"journal"`` replaces the file only at checkpoints.  Checkpoints
(start, end, every few hundred lines or a minute) write the file durably
and empty the journal.  Only the jobs touched since the last write are
serialised again, so a write costs little more than the bytes it writes.

Every whole-file write holds the queue's edit lock and first takes in the
jobs somebody added to the file since the runner last wrote it (``spacrq
queue add`` on a running queue): they run after the jobs already queued.
Edits of jobs still waiting (:mod:`spacrq.queue.edits`) are taken in the
same way, and again, with the job marked running, just before each job
starts (:meth:`QueueWriter.claim`).  Any other change made to the file
behind the runner's back is overwritten by the runner's state — the runner
owns the file while it runs.

A failed write (a folder where the file was, a full disk, a share that
blinked) is reported once on the runner's stderr (its log) and the run goes
on with the state in memory; the next write that succeeds puts it all on
disk.  If it never does, :meth:`QueueWriter.finish` returns the sentence the
summary and the notification carry: that saving failed, and where the state
is — in the journal, whose appends a full disk cannot refuse (room is kept
for them, see :mod:`spacrq.queue.room`), so every spacrq command still reads
the final state and the next one that can writes it into the file; only
when the journal failed too, in a rescue copy in the logs folder if that
can be written.
"""
from __future__ import annotations

import operator
import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

from spacrq.queue import memcopy
from spacrq.queue.edits import take_edits, unapplied_edits
from spacrq.queue.lastgood import drop_checkpoint
from spacrq.queue.locks import HeldEditLock, UnsavedFlag, linked_logs, refuse_linked_logs
from spacrq.queue.model import STATUS_RUNNING, Job, Queue, QueueError, now_iso
from spacrq.queue.render import render_job, render_queue
from spacrq.queue.replacing import QuickReplacer
from spacrq.queue.room import JOURNAL_ROOM, room_for
from spacrq.queue.layout import JOURNAL_FILE, RUNNER_FILE
from spacrq.queue.store import (DIRECT_MAX_BYTES, DIRECT_MAX_JOBS, Journal, file_key,
                                last_journal_seq, logs_dir, read_queue_document,
                                write_queue_file)
from spacrq.runfiles import CONTROL_FILE, RunFileError, remove_stale_temps

#: A temporary file of the runner's own files older than this is a killed write's leftover.
STALE_TEMP_SECONDS = 600.0
#: The queue file is rewritten after this many seconds with transitions pending…
CHECKPOINT_SECONDS = 60.0
#: …or once the journal holds four lines per job of the queue, and at least
#: this many: a rewrite costs O(jobs), so it is paid once per O(jobs) lines.
CHECKPOINT_MIN_LINES = 256


def direct_bounds() -> tuple[int, int]:
    """``"file"`` mode's bounds, ``(jobs, bytes of the file)``; ``SPACRQ_QUEUE_DIRECT_MAX_JOBS``
    and ``SPACRQ_QUEUE_DIRECT_MAX_BYTES`` move them, for benchmarks and tests."""
    def bound(name: str, default: int) -> int:
        try:
            return int(os.environ.get(name, default))
        except ValueError:
            return default
    return (bound("SPACRQ_QUEUE_DIRECT_MAX_JOBS", DIRECT_MAX_JOBS),
            bound("SPACRQ_QUEUE_DIRECT_MAX_BYTES", DIRECT_MAX_BYTES))


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc).splitlines()[0]


class QueueWriter:
    """Keeps one queue file current for its runner (``mode``: ``"file"`` or ``"journal"``)."""

    def __init__(self, queue: Queue, path: str | os.PathLike, *, durable: bool = True,
                 mode: str | None = None, loaded_key: tuple | None = None) -> None:
        self.queue, self.path, self.durable = queue, Path(path), durable
        self._file = str(self.path)  # (stat'ed at every write: no Path to turn into text)
        self._bounds = direct_bounds()  # (read once: each write of a small queue checks them)
        self.mode = mode or ("file" if len(queue.jobs) <= self._bounds[0] else "journal")
        self._chosen = mode is None  # (a mode chosen by size changes when the queue grows)
        self._parts: list[bytes] = []      # each job's bytes, in the queue's order…
        self._rendered: list[Job] = []     # …of these jobs (re-rendered when the list changed)
        self._stale: set[int] = set()      # id() of the jobs changed since their bytes were made
        self._index: dict[int, int] = {}   # id() of a job -> its place in _parts
        self._replacer = QuickReplacer(self.path)
        self._lock = HeldEditLock(logs_dir(self.path))
        # raised while the state is nowhere on disk, so that an edit is refused rather than
        # accepted for a job this runner already ran (see spacrq.queue.locks)
        self._unsaved_flag = UnsavedFlag(logs_dir(self.path))
        self._key = loaded_key  # the file as last read or written by this runner
        # the file as this runner last wrote it — or read it, until it writes it: with the
        # journal, the file as read holds every transition too (its start write may fail)
        self._written: tuple | None = loaded_key
        self._rescued: str | None = None  # the rescue copy's path, once tried ('' none)
        # the copy in memory of the state saved nowhere ('' none): a dead runner's, read with
        # the queue, goes once this runner wrote the file (see spacrq.queue.memcopy)
        self._in_memory = queue.memory_copy
        self.problem = ""       # why the last write failed ('' once one succeeds)
        self.generation = 0     # counts the merges that changed or added jobs
        self.notes: list[str] = []
        self._failed_at = ""
        self._said: set[tuple[str, str]] = set()  # the failures said: (what, why)
        self.journal: Journal | None = None
        self._lines = 0
        self._last_write = time.monotonic()
        self._sync_owed = False  # a commit's fsync left for sync(), as the job starts
        self._held = False  # the edit lock kept from a claim to the job's start (see claim)
        self._taken_in = False  # the file was changed by another writer since the last checkpoint
        self._checkpoint_said = ""  # why no checkpoint could be kept, once said
        self._room_said = ""  # why the journal's room could not be kept, once said
        # every transition since the last durable write is in the journal (both modes make
        # each one durable with a journal line; False once a line of it failed)
        self._journal_whole = self._open_journal()

    def _open_journal(self) -> bool:
        """Start writing the journal; False when it cannot be opened (said, and from then on
        every commit is a durable write of the whole file)."""
        try:
            refuse_linked_logs(logs_dir(self.path))
            self.journal = Journal(self.queue, self.path, durable=self.durable,
                                   room=self._room())
        except (OSError, QueueError) as exc:
            self._failed(exc, "open the journal")
            return False
        self._note_room()
        return True

    def _room(self) -> int:
        return room_for(self.queue.jobs, JOURNAL_ROOM, str(logs_dir(self.path)))

    def _note_room(self) -> None:
        """Say when the journal's room could not be kept (all of it), once per reason."""
        problem = self.journal.room_problem if self.journal is not None else ""
        if problem != self._room_said:
            self._room_said = problem
            if problem:
                print(f"spacrq: room could not be kept for the journal {self.journal.file}: "
                      f"{problem}, so a disk that fills up in the night may refuse its lines "
                      "too", file=sys.stderr, flush=True)

    # -- what the engine calls ------------------------------------------------------
    def touch(self, job: Job, fields: Iterable[str], sync: bool = False) -> None:
        """``job``'s ``fields`` changed: journalled now (journal mode), written at the next commit."""
        self._stale.add(id(job))
        if self.journal is not None:
            try:
                self.journal.job(job, list(fields), sync=sync)
                self._lines += 1
                if self.journal.room_problem != self._room_said:
                    self._note_room()
            except OSError as exc:
                self._failed(exc, "append to the journal")
                self.journal.close()
                self.journal = None  # from now on every commit writes the whole file
        elif sync:
            self.commit()

    def commit(self, defer_sync: bool = False) -> list[Job]:
        """Make every change so far durable; the jobs somebody added meanwhile (now queued).

        With ``defer_sync`` the journal's fsync is left to :meth:`sync`, which
        the runner calls once the next job was started: its lines are written
        (so a runner killed from here on loses nothing: they are in the
        kernel's cache, which any reader sees), and the fsync — only a power cut
        or a kernel crash needs it — runs on the journal's own thread
        (:meth:`Journal.flush_behind`) while the job and the runner go on, instead
        of delaying either: a slow disk slows the fsyncs, not the night.  One runs
        at a time (the next job's waits for it), so a job's transitions are
        durable by the time the job after it has started.  A power cut before it
        completes loses the transitions it covers, as one during the fsync
        itself would: the job that ended is then run again, and the one that
        started (killed by the same power cut) run afresh.

        One fsync of the journal makes the transitions durable; in ``"file"``
        mode the file is replaced first (atomically, without an fsync of its
        own) so it shows them too — first, so that a runner killed between the
        two leaves a file ahead of its journal, never one still showing a job
        that finished as running (a reader of the file alone would run it
        again); both are done before the next job starts.  Every few hundred
        lines, or a minute, the file itself is made durable and the journal
        emptied.
        """
        if self.journal is None:
            return self.write(durable=True)
        due = max(CHECKPOINT_MIN_LINES, 4 * len(self.queue.jobs))
        checkpoint = self.problem or self._lines >= due or (
            self._lines and time.monotonic() - self._last_write > CHECKPOINT_SECONDS)
        added = self.write(durable=False) if self.mode == "file" and not checkpoint else []
        if defer_sync and not checkpoint and not self.problem:
            self._sync_owed = True
            return added
        self._sync_owed = False
        try:
            self.journal.flush()
        except OSError as exc:
            self._failed(exc, "sync the journal")
        if checkpoint or self.problem:
            return added + self.write(durable=True)
        return added

    def sync(self) -> None:
        """The fsync a ``commit(defer_sync=True)`` left (nothing when none is owed)."""
        if not self._sync_owed:
            return
        self._sync_owed = False
        if self.journal is None:
            return
        try:
            self.journal.flush_behind()  # (the runner goes on; the next one waits for it)
        except OSError as exc:
            self._failed(exc, "sync the journal")

    def write(self, durable: bool = True) -> list[Job]:
        """Replace the whole file now (under the edit lock); the jobs merged in from it."""
        added: list[Job] = []
        try:
            if self._held:  # (kept since the claim: the file was taken in then)
                self._write_locked(durable)
            elif self._unlockable():
                self._write_locked(durable=True)
            else:
                with self._lock:
                    try:
                        added = self._merge()
                        self._write_locked(durable)
                    except (OSError, QueueError, RunFileError) as exc:
                        # (said under the lock: an editor who takes it next sees the flag)
                        self._failed(exc, "write")
        except (OSError, QueueError, RunFileError) as exc:
            self._failed(exc, "write")
        return added

    def _write_locked(self, durable: bool = True) -> None:
        parts = self._all_parts()
        # A file another writer changed (a job added or edited, durably) is replaced
        # durably too: the journal holds transitions, not jobs, so were this replace lost
        # to a power cut, the last checkpoint — from before the change — could not bring
        # the change back (see spacrq.queue.lastgood).
        durable = durable or self._taken_in
        if self.journal is not None and durable:
            self.journal.checkpoint(parts)  # the file durable, then the journal emptied
            self._lines, self._last_write = 0, time.monotonic()
            self._taken_in = False
            self._journal_whole = True
            self._note_checkpoint()
            self._note_room()
            self._outgrown(sum(map(len, parts)))
        elif self.journal is not None:  # current for every reader; durable through the journal
            self.queue.journal_seq = self.journal.seq
            data = render_queue(self.queue, parts)
            self._replacer.write(data)
            self._outgrown(len(data))
        else:  # no journal: each write durable, and numbered so a watcher tells it is new
            self.queue.journal_seq = max(self.queue.journal_seq, last_journal_seq(self.path)) + 1
            write_queue_file(self.queue, self.path, durable=self.durable, parts=parts)
            self._lines, self._last_write = 0, time.monotonic()
            self._taken_in = False
            self._journal_whole = self.durable  # (the file holds it all)
        self._key = self._written = file_key(self._file)
        if self.problem:
            self.notes.append(f"saving {self.path} failed from {self._failed_at} until "
                              f"{now_iso()} ({self.problem}); everything was saved since")
            print(f"spacrq: saved {self.path} again; nothing was lost", file=sys.stderr,
                  flush=True)
            self.problem = ""
            self._said.clear()
            self._unsaved_flag.set(False)
        if self._in_memory:  # (on disk now: the copy in memory would only lag behind)
            memcopy.drop(self.path, also=self._in_memory)
            self._in_memory = ""

    def _outgrown(self, size: int) -> None:
        """A queue in ``"file"`` mode by its size that grew past a bound of it (jobs added
        while it runs): its file is written at checkpoints only from now on (the rewrite at
        every transition costs its size, twice per job), and the runner's log says so."""
        if self.mode != "file" or not self._chosen:
            return
        jobs, (most, largest) = len(self.queue.jobs), self._bounds
        if jobs <= most and size <= largest:
            return
        self.mode = "journal"
        self._replacer.close()  # (the temporary file made ahead, and the files kept open)
        past = f"{jobs} jobs (more than {most})" if jobs > most else \
            f"{size // 1024} KB (more than {largest // 1024} KB)"
        print(f"spacrq: the queue file holds {past}, so from now on it is written at "
              "checkpoints (every few hundred transitions, or a minute) and its journal has "
              "every transition in between, which every spacrq command reads",
              file=sys.stderr, flush=True)

    def start(self) -> None:
        """The first write: every job with its status, and any stale journal folded in; and
        what a runner killed mid-write left (the temporary files of the queue file, under
        its lock so no other writer is mid-write; of the runner's own files in the logs
        folder, once they are older than any write takes)."""
        try:
            with self._lock:
                remove_stale_temps(self.path)
        except (OSError, QueueError):
            pass  # (the write below says what is wrong with the lock)
        from spacrq.night import REPORT_FILE
        logs = logs_dir(self.path)
        if not logs.is_symlink():  # (what is behind a link is not the queue's to tidy)
            for name in (RUNNER_FILE, REPORT_FILE, CONTROL_FILE):
                remove_stale_temps(logs / name, older_than=STALE_TEMP_SECONDS)
        self.write(durable=True)

    def finish(self, release: Callable[[], None] | None = None,
               take_more: bool = True) -> list[Job]:
        """The last write, unless jobs were added meanwhile: then those, and nothing written.

        ``release`` (the runner lock's) is called while the edit lock is still
        held, so whoever adds a job sees either a runner that will take it in
        or no runner at all.
        """
        self.let_go()
        try:
            if self._unlockable():
                self._write_locked()
                if release is not None:
                    release()
            else:
                with self._lock:
                    added = self._merge()
                    if added and take_more:
                        return added
                    self._write_locked()
                    if release is not None:
                        release()
        except (OSError, QueueError, RunFileError) as exc:
            self._failed(exc, "write")
        if not self.problem:  # the file durable: no checkpoint need stand in for it
            drop_checkpoint(self.path)
        if self.journal is not None:
            try:
                self.journal.flush()  # (the final lines durable, whatever the file's write did)
            except OSError as exc:
                self._failed(exc, "sync the journal")
            self.journal.close()
            self.journal = None
        return []

    def _unlockable(self) -> bool:
        """Whether the edit lock cannot be taken because the logs folder became a symbolic
        link: every writer takes that lock first and refuses a linked folder, so nobody
        else can write the file either, and the runner writes it unlocked (whole, durably,
        nothing to take in) rather than leave it behind its state."""
        return bool(linked_logs(logs_dir(self.path)))

    def claim(self, job: Job, keep: bool = False) -> list[Job]:
        """Before ``job`` starts: take in the edits and additions made to the file, and mark
        ``job`` running in the journal, all under the edit lock — an edit either reaches
        the job now or sees it running and is refused (see :mod:`spacrq.queue.edits`).

        The lock is not kept while the job is prepared: preparing may read its settings
        or wait for its output folders' run status, and an edit must never wait for that.
        With ``keep`` — a job prepared ahead, whose start waits for nothing — it is kept
        until :meth:`let_go`, which the runner calls once the job's start is written
        (its commit): the start then takes no second lock and no second look at the
        file, and the job's "running" is the start's own journal line, written before
        the lock is let go of, so no edit ever sees it otherwise.
        """
        added: list[Job] = []
        try:
            self._lock.__enter__()
        except (OSError, QueueError) as exc:
            self._failed(exc, "write")
            return added
        keep = keep and self.journal is not None
        try:
            generation = self.generation
            added = self._merge()
            keep = keep and self.generation == generation  # (changed: prepared again, unlocked)
            job.status = STATUS_RUNNING
            if not keep:
                self.touch(job, ("status",))
                if self.journal is None:
                    self._write_locked(durable=False)
        except (OSError, QueueError, RunFileError) as exc:
            self._failed(exc, "write")
        finally:
            if keep:
                self._held = True
            else:
                self._lock.__exit__(None, None, None)
        return added

    def let_go(self) -> None:
        """Let go of the edit lock a :meth:`claim` kept (nothing when none is kept)."""
        if self._held:
            self._held = False
            self._lock.__exit__(None, None, None)

    def prepare(self) -> None:
        """Make the next replace's temporary file now (the runner calls it once a job was
        sent, so the replace before the next job is one write and one rename), and see
        that the journal is still the file at its path."""
        if self.journal is not None and not self.journal.still_there():
            self._journal_lost()
        if self.mode == "file":
            self._replacer.prepare()

    def _note_checkpoint(self) -> None:
        """Say once why the last checkpoint could not be kept beside the journal (a folder
        in its place, no hard links): after a power cut the file could then not be
        brought back from it (see :mod:`spacrq.queue.lastgood`)."""
        problem = self.journal.checkpoint_problem if self.journal is not None else ""
        if problem and problem != self._checkpoint_said:
            note = (f"the queue file's last checkpoint could not be kept beside its journal "
                    f"({problem}), so a file a power cut damaged could not be read from it")
            print(f"spacrq: {note}", file=sys.stderr, flush=True)
            self.notes.append(note)
        self._checkpoint_said = problem

    def _journal_lost(self) -> None:
        """Somebody removed or replaced the journal while the queue runs: what was written
        to it since the last checkpoint is in memory; a new journal is started and the
        whole file written durably at the next commit, so nothing is lost."""
        lost = self.journal.file if self.journal is not None else None
        self._journal_whole = False  # (until the whole file is written, which it is next)
        if self.journal is not None:
            self.journal.close()
            self.journal = None
        opened = self._open_journal()
        if opened:
            self._lines = max(CHECKPOINT_MIN_LINES, 4 * len(self.queue.jobs))  # checkpoint next
        note = (f"the journal {lost} was removed or replaced while the queue ran; "
                + ("the queue file was written in full and a new journal started"
                   if opened else "the queue file is written in full at every transition "
                                  "instead") + ", so nothing was lost")
        print(f"spacrq: {note}", file=sys.stderr, flush=True)
        self.notes.append(note)

    def tidy(self) -> None:
        """Let go of the files replaced (the runner calls it once a job ran a while)."""
        try:
            self._replacer.tidy()
        except OSError:
            pass
        if self.journal is not None:
            try:
                self.journal.synced_behind()
            except OSError as exc:
                self._failed(exc, "sync the journal")

    def in_journal(self) -> bool:
        """Whether the file as this runner last wrote it is still there and its journal holds
        every transition since: together they are the state, which every command reads."""
        return self._journal_whole and self._written is not None \
            and file_key(self._file) == self._written

    def unsaved(self) -> bool:
        """Whether the state is nowhere a spacrq command reads it (only in memory, or in a
        rescue copy: see :meth:`rescue`)."""
        return bool(self.problem) and not self.in_journal()

    def rescue(self) -> str:
        """Write the state to a rescue copy in the logs folder, once; its path, or '' when it
        cannot be written either (a full disk) or is not needed."""
        if self._rescued is None:
            self._rescued = ""
            if self.unsaved():
                rescue = logs_dir(self.path) / f"{self.path.name}.unsaved.json"
                try:
                    refuse_linked_logs(rescue.parent)
                    write_queue_file(self.queue, rescue)
                    self._rescued = str(rescue)
                except (OSError, RunFileError, QueueError):
                    pass
        return self._rescued

    def final_problem(self) -> str:
        """'' when the file holds the final state; else where the state is: in the journal,
        durably, or else in a rescue copy if one can be written."""
        if not self.problem:
            return ""
        since = (f"saving failed: {self.path} could not be written since {self._failed_at} "
                 f"({self.problem})")
        if self.in_journal():
            journal = logs_dir(self.path) / JOURNAL_FILE
            return (f"{since}, but every transition since is in its journal {journal}, which "
                    "every spacrq command reads with the file: nothing is lost, and the next "
                    "spacrq command on the queue (status, resume) writes the file in full "
                    "once it can be written (a full disk: free some space)")
        rescue = self.rescue()
        where = (f"the final state was written to {rescue} instead (copy it over the queue "
                 "file before resuming, or the jobs that ended since would run again)"
                 if rescue else
                 f"the final state is kept as {self._in_memory}, which every spacrq command "
                 "on the queue reads and the first one that can writes into the file (a "
                 "restart of the machine may lose it: the jobs that ended since would then "
                 "run again on resume)" if self._in_memory else
                 "the final state is only in this summary and the runner's log")
        return f"{since}; it shows the queue as it was then, and {where}"

    @property
    def in_memory(self) -> str:
        """The copy of the state saved nowhere on disk, kept where it outlives the runner
        (see :mod:`spacrq.queue.memcopy`; '' when none is kept)."""
        return self._in_memory

    @property
    def failed_at(self) -> str:
        """When the writes began to fail ('' while none does)."""
        return self._failed_at if self.problem else ""

    def close(self) -> None:
        self.let_go()
        self._unsaved_flag.close()
        if self.journal is not None:
            self.journal.close()
            self.journal = None
        self._lock.close()
        self._replacer.close()

    # -- pieces ----------------------------------------------------------------------
    def _all_parts(self) -> list[bytes]:
        """Every job's bytes: only the jobs changed since the last write are rendered again
        (walking the whole queue in Python at every write made a long queue slower per job)."""
        jobs = self.queue.jobs
        if len(jobs) != len(self._rendered) or any(map(operator.is_not, jobs, self._rendered)):
            old = {id(job): part for job, part in zip(self._rendered, self._parts)}
            self._parts = [old[id(job)] if id(job) in old and id(job) not in self._stale
                           else render_job(job) for job in jobs]
            self._rendered = list(jobs)
            self._index = {id(job): i for i, job in enumerate(jobs)}
        else:
            for key in self._stale:
                i = self._index.get(key)
                if i is not None:
                    self._parts[i] = render_job(jobs[i])
        self._stale.clear()
        return self._parts

    def _merge(self) -> list[Job]:
        """Take in the jobs added to the file since this runner last wrote it."""
        now = file_key(self._file)
        if self._key is None or now is None or now == self._key:
            return []
        self._key = now  # read once per change, whatever it holds
        self._taken_in = True  # (its next write is a checkpoint: see _write_locked)
        try:
            other = Queue.from_dict(read_queue_document(self.path))
        except QueueError as exc:
            print(f"spacrq: {self.path} was changed by another program and cannot be read "
                  f"({exc}); the runner's state replaces it", file=sys.stderr, flush=True)
            return []
        self.generation += 1  # (whatever it held: a job planned ahead is planned again)
        for job in unapplied_edits(self.queue, other):
            note = (f"job {job.id} was edited in {self.path.name} after it had started (the "
                    "file could not show that then); it ran as it was, so the edit was not "
                    "applied: duplicate the job to run it as edited")
            print(f"spacrq: {note}", file=sys.stderr, flush=True)
            self.notes.append(note)
        for job in take_edits(self.queue, other):  # a waiting job edited in the file
            self._stale.add(id(job))
            print(f"spacrq: job {job.id} was edited while the queue runs; it runs as edited",
                  file=sys.stderr, flush=True)
        mine = {job.id for job in self.queue.jobs}
        added = [job for job in other.jobs if job.id and job.id not in mine]
        self.queue.jobs.extend(added)
        if added and self.journal is not None:  # (its room, kept again at each checkpoint)
            self.journal.room = self._room()
        for job in added:
            print(f"spacrq: job {job.id} was added while the queue runs; it runs after the "
                  "jobs already queued", file=sys.stderr, flush=True)
        return added

    def _failed(self, exc: BaseException, doing: str) -> None:
        reason = _reason(exc)
        logs = logs_dir(self.path)
        if isinstance(exc, (FileExistsError, NotADirectoryError)) \
                and os.path.lexists(logs) and not os.path.isdir(logs):
            reason = f"{logs} is not a folder: move it away"
        what = logs / JOURNAL_FILE if "journal" in doing else self.path
        if "journal" in doing:  # (a line of it may be missing: it no longer holds them all)
            self._journal_whole = False
        if not self.problem:
            self._failed_at = now_iso()
        if (str(what), reason) not in self._said:  # (each once, until a save succeeds)
            self._said.add((str(what), reason))
            print(f"spacrq: could not {doing} {what} ({reason}); the run goes on with the "
                  "state in memory, and it is written at the next save that succeeds",
                  file=sys.stderr, flush=True)
        self.problem = reason
        unsaved = self.unsaved()
        self._unsaved_flag.set(unsaved)
        if unsaved:  # (kept at every failed save, so it follows the state as the night goes)
            self._in_memory = memcopy.keep(self.queue, self.path, self._key)
