"""What the Queue pane sees, worked out away from the GUI thread.

The window never reads a file in a slot.  Its poller thread calls
:meth:`QueueWatch.poll`, which reads only what changed since the last call —
the queue file when its size/mtime/inode moved, else only the runner's new
journal lines, plus ``runner.json`` (small) and the new bytes of one job's
log — and hands back a :class:`QueueSnapshot` holding plain, immutable rows
(:mod:`spacrq.queue.watch_rows`).

Its neighbours: :mod:`spacrq.queue.watch_read` reads and checks the file
without freezing the window, :mod:`spacrq.queue.watch_log` follows a log,
:mod:`spacrq.queue.watch_actions` carries out save / run / stop, and the
pane's decisions live in :mod:`spacrq.queue.pane_rules`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from spacrq.problems import Problem
from spacrq.queue.model import RUN_FIELDS, QueueError
from spacrq.queue.runner import runner_state
from spacrq.queue.store import apply_transition, journal_path, logs_dir
from spacrq.queue.watch_actions import save_document, send_stop, start_queue
from spacrq.queue.watch_log import LogFollower
from spacrq.queue.watch_read import breathe, build_queue, check_queue, read_document, short_turns
from spacrq.queue.watch_rows import JobRow, row_of, rows_of
from spacrq.runfiles import JsonlTail, asked

__all__ = ["QueueSnapshot", "QueueWatch"]

#: what the poller carries out for each kind of request, once per token
_ACTIONS = {"save": save_document, "run": start_queue, "stop": send_stop}

_JOURNAL_SEQ = re.compile(r'"journal_seq":\s*(\d+)\s*}\s*$')


@dataclass
class QueueSnapshot:
    """What one poll found.  Fields left ``None`` did not change since the last one.

    :param rows: the queue file's rows, when the file changed.
    :param queue: the parsed queue the rows came from (the editor adopts it).
    :param load_error: one sentence when the queue file cannot be read.
    :param runner: ``runner_state(path)`` when it changed (``{}`` = no runner).
    :param log_text: new text of the watched job's log; ``log_restarted``
        means drop what is shown first.
    :param problems: the result of a validation request (``problems_token``
        names which request).
    :param actions: one :class:`~spacrq.queue.watch_actions.ActionResult` per
        save / run / stop asked.
    """

    path: str
    rows: tuple[JobRow, ...] | None = None
    queue: Any = None
    load_error: str | None = None
    runner: dict | None = None
    log_job: str = ""
    log_path: str = ""
    log_text: str = ""
    log_restarted: bool = False
    problems: list | None = None
    problems_token: int = 0
    actions: list = field(default_factory=list)

    def is_empty(self) -> bool:
        return (self.rows is None and self.load_error is None and self.runner is None
                and not self.log_text and not self.log_restarted and self.problems is None
                and not self.actions)


def _file_key(path: Path) -> tuple | None:
    """What says the file was replaced or rewritten: inode, size and mtime (None: not there)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class QueueWatch:
    """The poller's state between polls: what was read, and from where.

    ``poll(request)`` takes the pane's current wishes — ``path`` (the queue
    file), ``log_job`` (the selected job id, or ``""`` for "the running
    one"), ``validate`` (``(token, queue_dict)`` to check off the GUI
    thread), ``reload`` (any new value forces a re-read of the file), and
    the operator's requests ``save`` (``(token, queue_dict)``), ``run``
    (``(token, "run"|"resume"|"retry", queue_dict or None)``) and ``stop``
    (``(token, now)``), each carried out once per token — and returns a
    snapshot, or None when nothing changed.
    """

    max_initial_log: int = 64 * 1024
    max_log_chunk: int = 256 * 1024
    path: str = ""
    _file_key: Any = "unread"
    _reload: Any = None
    _rows: tuple[JobRow, ...] = ()
    _runner: dict | None = None
    _validated: int = 0
    _error: str | None = None
    _log: LogFollower = field(default_factory=LogFollower)
    _queue: Any = None
    _journal: JsonlTail | None = None
    _handed: Any = None
    _gap: bool = False
    _acted: dict = field(default_factory=dict)
    _must_reload: bool = True  # the next change of the file is read in full, no shortcut
    _shared: bool = False  # the editor holds ``_queue``: the watch must not change it

    def poll(self, request: Mapping[str, Any]) -> QueueSnapshot | None:
        path = str(request.get("path") or "")
        first = path != self.path
        if first:
            self.path, self._file_key, self._rows, self._runner = path, "unread", (), None
            self._log, self._error = LogFollower(self.max_initial_log, self.max_log_chunk), None
            self._queue, self._journal, self._handed = None, None, None
            self._must_reload, self._shared = True, False
        snap = QueueSnapshot(path=path)
        if not path:
            return snap if first else None
        if request.get("reload") != self._reload:
            self._reload = request.get("reload")
            self._file_key, self._handed, self._must_reload = "unread", None, True
        self._read_runner(Path(path), snap)
        self._read_queue(Path(path), snap)
        self._hand_over(snap)
        self._read_log(Path(path), str(request.get("log_job") or ""), snap)
        self._validate(request.get("validate"), snap)
        self._act(Path(path), request, snap)
        if first or not snap.is_empty():
            return snap
        return None

    # -- pieces ---------------------------------------------------------------

    def _read_queue(self, path: Path, snap: QueueSnapshot) -> None:
        """Reload the file when it was replaced; otherwise apply only new journal lines.

        A large queue's runner journals each transition to ``journal.jsonl``
        and rewrites the queue file only at checkpoints, so between
        checkpoints the watch tails the journal and rebuilds just the rows
        of the jobs it names.
        """
        key = _file_key(path)
        touched: set[str] = set()
        if key != self._file_key and key is not None and self._live() and not self._must_reload:
            touched |= self._apply_journal()  # lines written before the checkpoint emptied it
            merged = set() if self._is_own_checkpoint(path) else self._merge_checkpoint(path)
            if merged is not None:
                touched |= merged
                self._file_key, self._gap = key, False
                self._journal = JsonlTail(journal_path(path))
        if key == self._file_key and self._queue is not None and self._journal is not None:
            touched |= self._apply_journal()
        if self._gap or key != self._file_key:
            self._full_reload(path, key, snap)
            return
        if touched:
            rows = list(self._rows)
            positions = {r.job_id: i for i, r in enumerate(rows)}
            for job_id in touched:
                i = positions.get(job_id)
                if i is not None:
                    rows[i] = row_of(i + 1, self._queue.jobs[i])
            self._publish(tuple(rows), snap)

    def _full_reload(self, path: Path, key: Any, snap: QueueSnapshot) -> None:
        self._file_key, self._gap, self._must_reload = key, False, False
        self._shared = False
        if key is None:
            self._set_error(snap, f"{path.name} is not on disk; Save writes it there, "
                                  "or Open another queue")
            self._queue = None
            return
        try:
            queue = build_queue(read_document(path))
        except QueueError as exc:
            self._set_error(snap, str(exc).splitlines()[0])
            self._queue = None
            return
        self._set_error(snap, None)
        self._queue = queue
        self._journal = JsonlTail(journal_path(path))
        self._apply_journal()
        self._gap = False
        self._publish(rows_of(queue), snap)

    def _live(self) -> bool:
        return (self._queue is not None and self._journal is not None
                and bool((self._runner or {}).get("alive")))

    def _is_own_checkpoint(self, path: Path) -> bool:
        """True when a running queue's file was rewritten with what the watch already has.

        A live runner folds its journal into the queue file every few
        seconds; the result is exactly the state the watch built from the
        journal, so it reads only the file's last bytes (``journal_seq`` is
        its last field) instead of re-parsing 2000 jobs.  Only while a runner
        owns the file, and never for the first change after a save or an
        open (``_must_reload``): those are read in full.
        """
        try:
            with open(path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 256))
                tail = handle.read().decode("utf-8", "replace")
        except OSError:
            return False
        found = _JOURNAL_SEQ.search(tail)
        return bool(found) and int(found.group(1)) <= self._queue.journal_seq

    def _merge_checkpoint(self, path: Path) -> set[str] | None:
        """Fold a running queue's checkpoint into the watch's queue; the jobs it changed.

        The runner empties its journal after each checkpoint, so lines
        written since the last poll are only in the file now.  Its jobs are
        the same jobs in the same order (only run fields change while it
        runs), so they are compared field by field instead of rebuilt: the
        JSON is parsed, but 2000 jobs are not re-made.  None when the file
        is not such a checkpoint (then it is read in full).
        """
        if self._shared:
            return None  # the editor holds this queue object: read the file afresh instead
        try:
            document = read_document(path)
        except QueueError:
            return None
        entries = document.get("jobs") if isinstance(document, dict) else None
        if not isinstance(entries, list) or len(entries) != len(self._queue.jobs):
            return None
        if any(not isinstance(e, dict) or e.get("id") != job.id
               for e, job in zip(entries, self._queue.jobs)):
            return None
        touched: set[str] = set()
        for entry, job in zip(entries, self._queue.jobs):
            for name in RUN_FIELDS:
                if name in entry and getattr(job, name) != entry[name]:
                    setattr(job, name, entry[name])
                    touched.add(job.id)
            breathe()
        try:
            self._queue.journal_seq = max(self._queue.journal_seq, int(document.get("journal_seq") or 0))
        except (TypeError, ValueError):
            return None
        self._queue.stopped_reason = str(document.get("stopped_reason") or "")
        return touched

    def _apply_journal(self) -> set[str]:
        """Apply new journal lines; a gap in their numbering means lines were missed
        (the journal was emptied and refilled between two polls) and sets ``_gap``."""
        records = self._journal.read()
        if records and self._shared:
            self._gap = True  # the editor holds this queue object: read the file afresh
            return set()
        index = {job.id: job for job in self._queue.jobs}
        touched: set[str] = set()
        for record in records:
            breathe()
            seq = record.get("seq") if isinstance(record, dict) else None
            if isinstance(seq, int) and seq > self._queue.journal_seq + 1:
                self._gap = True
                break
            if apply_transition(self._queue, record, index):  # only a dict naming a job applies
                touched.add(str(record["job"]))
        return touched

    def _publish(self, rows: tuple[JobRow, ...], snap: QueueSnapshot) -> None:
        if rows != self._rows or snap.load_error == "":
            self._rows = rows
            snap.rows = rows

    def _hand_over(self, snap: QueueSnapshot) -> None:
        """Give the editor the queue to edit, but only while no runner runs.

        The object itself is handed over (copying 2000 jobs would cost more
        than reading the file again), and from then on the watch never
        touches it: a journal line or a checkpoint makes it read the file
        afresh into a queue of its own (``_shared``).
        """
        if self._queue is None or (self._runner or {}).get("alive"):
            return
        if self._handed is self._rows:
            return
        snap.queue = self._queue
        snap.rows = self._rows
        self._handed = self._rows
        self._shared = True

    def _set_error(self, snap: QueueSnapshot, message: str | None) -> None:
        """Report a load error once (and its clearing once, as ``""``)."""
        if message == self._error:
            return
        snap.load_error = "" if message is None else message
        self._error = message

    def _read_runner(self, path: Path, snap: QueueSnapshot) -> None:
        try:
            state = runner_state(path) or {}
        except Exception as exc:  # a garbled runner.json is reported, not fatal
            state = {"alive": False, "unreadable": f"{type(exc).__name__}: {exc}"}
        state = dict(state)
        if state.get("alive"):
            stop = asked(logs_dir(path)).get("stop")
            if stop:
                state["stop"] = stop
        if state != self._runner:
            self._runner = snap.runner = state

    def _running_job(self) -> str:
        """The job the runner says it runs, else the first row that reads running."""
        runner = self._runner or {}
        if runner.get("alive") and runner.get("current_job"):
            return str(runner["current_job"])
        return next((row.job_id for row in self._rows if row.status == "running"), "")

    def _read_log(self, path: Path, wanted: str, snap: QueueSnapshot) -> None:
        """Follow the selected job's log, else the running job's, else the runner's own."""
        news = self._log.follow(path, wanted or self._running_job(), self._rows)
        snap.log_job, snap.log_path = news.job_id, news.path
        snap.log_text, snap.log_restarted = news.text, news.restarted

    def _validate(self, wanted: Any, snap: QueueSnapshot) -> None:
        if not wanted:
            return
        token, document = wanted
        if token == self._validated:
            return
        self._validated = token
        try:
            queue = build_queue(document)
            snap.problems = check_queue(queue)
        except QueueError as exc:
            snap.problems = [Problem("", "error", str(exc).splitlines()[0],
                                     "Fix the queue file in an editor, then Open it again.")]
        snap.problems_token = token

    # -- what the operator asked for -------------------------------------------------

    def _act(self, path: Path, request: Mapping[str, Any], snap: QueueSnapshot) -> None:
        """Carry out each save, run and stop the pane asked for, once per token."""
        for kind, act in _ACTIONS.items():
            wanted = request.get(kind)
            if not wanted or wanted[0] <= self._acted.get(kind, 0):
                continue
            self._acted[kind] = wanted[0]
            with short_turns():
                result = act(path, *wanted)
            if result.saved:  # a runner may start on it next: never take it for a checkpoint
                self._must_reload = True
            snap.actions.append(result)
            if result.ok:
                self._read_runner(path, snap)
