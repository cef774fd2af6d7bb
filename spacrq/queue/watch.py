"""What the Queue pane sees, worked out away from the GUI thread.

The window never reads a file in a slot.  Its poller thread calls
:meth:`QueueWatch.poll`, which reads only what changed since the last call —
the queue file when its size/mtime/inode moved, ``runner.json`` (small), and
the new bytes of one job's log — and hands back a :class:`QueueSnapshot`
holding plain, immutable rows.  Turning rows into a table is then a cheap
comparison (:func:`diff_rows`), so a 2000-job queue whose runner rewrites the
file at every transition costs the view a handful of changed rows, never a
reset.

The pane's decisions live here too, as plain functions a test reaches
without Qt: which buttons are live in which state (:func:`controls_for`), the
sentence that refuses an edit while a runner owns the file
(:func:`edit_refusal`), how far along the night is (:func:`progress_of`).
"""
from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

from spacrq.problems import Problem
from spacrq.queue.model import RUN_FIELDS, Queue, QueueError, fmt_duration
from spacrq.queue.runner import RUNNER_LOG, request_stop, runner_state, start_runner
from spacrq.queue.store import (apply_transition, journal_path, load_queue, logs_dir,
                                read_queue_document, save_queue)
from spacrq.queue.validate import validate_queue
from spacrq.runfiles import JsonlTail, RunFileError, TextTail, asked

__all__ = [
    "JobRow", "RowDiff", "QueueSnapshot", "QueueWatch", "ActionResult", "Controls", "PaneState",
    "rows_of", "diff_rows", "progress_of", "controls_for", "edit_refusal",
    "status_text", "time_text", "newest_queue", "queue_to_open", "trim_log", "FINISHED_STATUSES",
    "parse_timeout", "parse_overrides", "parse_after",
]

#: statuses that count towards "done" in "done / total jobs"
FINISHED_STATUSES = ("success", "failed", "skipped")

_JOURNAL_SEQ = re.compile(r'"journal_seq":\s*(\d+)\s*}\s*$')

#: the log view keeps at most this much of one poll's new text, and cuts
#: any single line longer than :data:`LOG_LINE_CHARS` — a job printing a
#: 100 MB line without a newline must not freeze the text layout.
LOG_KEEP_CHARS = 64 * 1024
LOG_LINE_CHARS = 2000


def _epoch(text: Any) -> float | None:
    """ISO-8601 (what the queue file stores) to epoch seconds, or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class JobRow:
    """One job as the table shows it: immutable, so rows compare with ``==``."""

    number: int
    job_id: str
    module: str
    label: str
    after: str
    status: str
    error: str = ""
    partial: bool = False
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    attempts: int = 0
    log_path: str = ""
    timeout: float | None = None


def _row(number: int, job: Any) -> JobRow:
    run_status = getattr(job, "run_status", None)
    partial = bool(getattr(job, "is_partial", False))
    if not partial and isinstance(run_status, Mapping):
        partial = int(run_status.get("n_failed", 0) or 0) > 0
    return JobRow(
        number=number,
        job_id=str(job.id),
        module=str(job.module),
        label=str(job.label or ""),
        after=", ".join(job.depends_on),
        status=str(job.status),
        error=str(job.error or ""),
        partial=partial and job.status == "success",
        started_at=_epoch(job.started),
        finished_at=_epoch(job.finished),
        exit_code=job.exit_code,
        attempts=int(getattr(job, "attempts", 0) or 0),
        log_path=str(job.log_path or ""),
        timeout=getattr(job, "timeout", None),
    )


def rows_of(queue: Any) -> tuple[JobRow, ...]:
    """The table rows of a :class:`spacrq.queue.model.Queue`, in run order."""
    return tuple(_row(number, job) for number, job in enumerate(queue.jobs, start=1))


def status_text(row: JobRow) -> str:
    """The status word an operator reads; a partial success never reads as success."""
    if row.status == "success":
        return "partial" if row.partial else "succeeded"
    return {"not_run": "not run"}.get(row.status, row.status)


def time_text(row: JobRow, now: float) -> str:
    """How long the job took, or how long it has been running (ticks with ``now``)."""
    if row.started_at is None:
        return "—"
    if row.finished_at is not None:
        return fmt_duration(max(0.0, row.finished_at - row.started_at))
    if row.status == "running":
        return fmt_duration(max(0.0, now - row.started_at))
    return "—"


@dataclass(frozen=True)
class RowDiff:
    """How a table goes from ``old`` rows to ``new`` rows, in the fewest signals.

    ``kind`` is ``"same"``, ``"update"`` (``changed`` rows only), ``"insert"``
    (``count`` rows at ``first``, then ``changed``), ``"remove"`` (``count``
    rows at ``first``, then ``changed``) or ``"reset"`` (anything else).
    ``changed`` indices refer to the *new* rows.
    """

    kind: str
    changed: tuple[int, ...] = ()
    first: int = 0
    count: int = 0


def diff_rows(old: Sequence[JobRow], new: Sequence[JobRow]) -> RowDiff:
    """The smallest change that turns ``old`` into ``new``.

    Rows are matched by job id.  A block of ids inserted or removed in one
    place (add, duplicate, remove) becomes an insert or a remove; ids that
    kept their positions, or swapped within an equal-length span (move up /
    down), become an update of the rows whose content differs.  Only a
    reshuffle that is none of these resets the table.
    """
    old_ids = [r.job_id for r in old]
    new_ids = [r.job_id for r in new]
    if old_ids == new_ids:
        changed = tuple(i for i, (a, b) in enumerate(zip(old, new)) if a is not b and a != b)
        return RowDiff("update", changed) if changed else RowDiff("same")
    prefix = 0
    limit = min(len(old_ids), len(new_ids))
    while prefix < limit and old_ids[prefix] == new_ids[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < limit - prefix
           and old_ids[len(old_ids) - 1 - suffix] == new_ids[len(new_ids) - 1 - suffix]):
        suffix += 1
    gone = len(old_ids) - prefix - suffix
    came = len(new_ids) - prefix - suffix
    if gone == 0 and came > 0:
        aligned = list(old[:prefix]) + [None] * came + list(old[prefix:])
        changed = tuple(i for i, row in enumerate(new)
                        if not prefix <= i < prefix + came and aligned[i] != row)
        return RowDiff("insert", changed, prefix, came)
    if came == 0 and gone > 0:
        aligned = list(old[:prefix]) + list(old[prefix + gone:])
        changed = tuple(i for i, row in enumerate(new) if aligned[i] != row)
        return RowDiff("remove", changed, prefix, gone)
    if gone == came and sorted(old_ids[prefix:prefix + gone]) == sorted(new_ids[prefix:prefix + came]):
        changed = tuple(i for i, (a, b) in enumerate(zip(old, new)) if a is not b and a != b)
        return RowDiff("update", changed)
    return RowDiff("reset")


def progress_of(rows: Sequence[JobRow]) -> tuple[int, int, dict[str, int]]:
    """``(done, total, jobs per status word)`` for the progress bar and its caption."""
    tally = Counter((row.status, row.partial and row.status == "success") for row in rows)
    counts: dict[str, int] = {}
    done = 0
    for (status, partial), n in tally.items():
        word = "partial" if partial else status_text(JobRow(0, "", "", "", "", status))
        counts[word] = counts.get(word, 0) + n
        if status in FINISHED_STATUSES:
            done += n
    return done, len(rows), counts


def trim_log(text: str, keep: int = LOG_KEEP_CHARS, line_chars: int = LOG_LINE_CHARS) -> tuple[str, bool]:
    """Bound what one poll hands the log view: ``(text, trimmed)``.

    Only the last ``keep`` characters survive, and any line longer than
    ``line_chars`` is cut with a note of how much was left out.
    """
    trimmed = False
    if len(text) > keep:
        cut = text.find("\n", len(text) - keep)
        start = cut + 1 if 0 <= cut < len(text) - 1 else len(text) - keep
        skipped = start
        text = f"[… {skipped:,} characters of log skipped; open the file to read them …]\n" + text[start:]
        trimmed = True
    if any(len(line) > line_chars for line in text.split("\n")):
        lines = []
        for line in text.split("\n"):
            if len(line) > line_chars:
                line = line[:line_chars] + f" […{len(line) - line_chars:,} more characters]"
            lines.append(line)
        text = "\n".join(lines)
    return text, trimmed


def queue_to_open(folder: str | os.PathLike) -> Path | None:
    """The queue the pane opens on start: one that is running now, else the newest.

    Reopening the window in the middle of the night must land on the queue
    that is running, even when a newer queue file was written since.
    """
    running = []
    try:
        names = [e.name for e in os.scandir(folder) if e.name.endswith(".queue.json")]
    except OSError:
        return None
    for name in names:
        try:
            state = runner_state(Path(folder) / name) or {}
        except Exception:  # an unreadable runner.json says nothing about liveness
            state = {}
        if state.get("alive"):
            running.append(name)
    if running:
        return Path(folder) / sorted(running)[0]
    return newest_queue(folder)


def newest_queue(folder: str | os.PathLike) -> Path | None:
    """The most recently modified ``*.queue.json`` in ``folder``, or None."""
    best: tuple[float, str] | None = None
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    for entry in entries:
        if not entry.name.endswith(".queue.json"):
            continue
        try:
            if not entry.is_file():
                continue
            key = (entry.stat().st_mtime, entry.name)
        except OSError:
            continue
        if best is None or key > best:
            best = key
    return Path(folder) / best[1] if best else None


# -- the poller body ----------------------------------------------------------

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
    :param actions: one :class:`ActionResult` per save / run / stop asked.
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
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except (ValueError, OSError):
        return False


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
    _log_key: tuple[str, str] = ("", "")
    _tail: TextTail | None = None
    _validated: int = 0
    _error: str | None = None
    _log_cache: dict = field(default_factory=dict)
    _queue: Any = None
    _journal: JsonlTail | None = None
    _handed: Any = None
    _gap: bool = False
    _acted: dict = field(default_factory=dict)
    _saved_now: bool = False
    _must_reload: bool = True  # the next change of the file is read in full, no shortcut

    def poll(self, request: Mapping[str, Any]) -> QueueSnapshot | None:
        path = str(request.get("path") or "")
        first = path != self.path
        if first:
            self.path, self._file_key, self._rows, self._runner = path, "unread", (), None
            self._log_key, self._tail, self._error = ("", ""), None, None
            self._queue, self._journal, self._handed = None, None, None
            self._must_reload = True
            self._log_cache.clear()
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

        The runner journals each transition to ``<stem>_logs/journal.jsonl``
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
                    rows[i] = _row(i + 1, self._queue.jobs[i])
            self._publish(tuple(rows), snap)

    def _full_reload(self, path: Path, key: Any, snap: QueueSnapshot) -> None:
        self._file_key, self._gap, self._must_reload = key, False, False
        if key is None:
            self._set_error(snap, f"{path.name} is not on disk; Save writes it there, "
                                  "or Open another queue")
            self._queue = None
            return
        try:
            queue = Queue.from_dict(read_queue_document(path))
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
        try:
            document = read_queue_document(path)
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
        try:
            self._queue.journal_seq = max(self._queue.journal_seq, int(document.get("journal_seq") or 0))
        except (TypeError, ValueError):
            return None
        self._queue.stopped_reason = str(document.get("stopped_reason") or "")
        return touched

    def _apply_journal(self) -> set[str]:
        """Apply new journal lines; a gap in their numbering means lines were missed
        (the journal was emptied and refilled between two polls) and sets ``_gap``."""
        index = {job.id: job for job in self._queue.jobs}
        touched: set[str] = set()
        for record in self._journal.read():
            seq = record.get("seq") if isinstance(record, dict) else None
            if isinstance(seq, int) and seq > self._queue.journal_seq + 1:
                self._gap = True
                break
            if apply_transition(self._queue, record, index) and isinstance(record, dict):
                if "job" in record:
                    touched.add(str(record["job"]))
        return touched

    def _publish(self, rows: tuple[JobRow, ...], snap: QueueSnapshot) -> None:
        if rows != self._rows or snap.load_error == "":
            self._rows = rows
            snap.rows = rows

    def _hand_over(self, snap: QueueSnapshot) -> None:
        """Give the editor its own copy of the queue, but only while no runner runs.

        The watch keeps applying journal lines to its queue, so the editor
        must never hold that object; a copy is made once per change, and
        not at all while a runner owns the file (edits are refused then).
        """
        if self._queue is None or (self._runner or {}).get("alive"):
            return
        if self._handed is self._rows:
            return
        snap.queue = Queue.from_dict(self._queue.to_dict())
        snap.rows = self._rows
        self._handed = self._rows

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
        current = (self._runner or {}).get("current_job") if (self._runner or {}).get("alive") else None
        if current:
            return str(current)
        for row in self._rows:
            if row.status == "running":
                return row.job_id
        return ""

    def _log_path_of(self, path: Path, job_id: str) -> str:
        """Where ``job_id``'s log is, kept inside the queue's folder."""
        row = next((r for r in self._rows if r.job_id == job_id), None)
        if row is not None and row.log_path:
            candidate = Path(row.log_path)
            if not candidate.is_absolute():
                candidate = path.parent / candidate
            if _inside(candidate, path.parent):
                return str(candidate)
        cached = self._log_cache.get(job_id)
        if cached and os.path.exists(cached):
            return cached
        folder = Path(logs_dir(path))
        try:
            names = sorted(e.name for e in os.scandir(folder)
                           if e.name.endswith(f"_{job_id}.log") and e.name[:1].isdigit())
        except OSError:
            names = []
        found = str(folder / names[-1]) if names else ""
        if found and _inside(Path(found), folder):
            self._log_cache[job_id] = found
            return found
        return ""

    def _read_log(self, path: Path, wanted: str, snap: QueueSnapshot) -> None:
        """Tail the selected job's log, else the running job's, else the runner's own.

        The runner's log ends with the last run's summary — what ran, what
        failed and why — which is what the operator reads in the morning.
        """
        job_id = wanted or self._running_job()
        if job_id:
            log_path = self._log_path_of(path, job_id)
        else:
            runner_log = logs_dir(path) / RUNNER_LOG
            log_path = str(runner_log) if runner_log.is_file() else ""
        if (job_id, log_path) != self._log_key:
            self._log_key = (job_id, log_path)
            self._tail = TextTail(log_path, self.max_initial_log, self.max_log_chunk) if log_path else None
            snap.log_restarted = True
        snap.log_job, snap.log_path = job_id, log_path
        if self._tail is None:
            return
        text, restarted = self._tail.read()
        text, trimmed = trim_log(text)
        snap.log_text = text
        snap.log_restarted = snap.log_restarted or restarted or trimmed

    def _validate(self, wanted: Any, snap: QueueSnapshot) -> None:
        if not wanted:
            return
        token, document = wanted
        if token == self._validated:
            return
        self._validated = token
        try:
            queue = Queue.from_dict(document)
            snap.problems = list(validate_queue(queue))
        except QueueError as exc:
            snap.problems = [Problem("", "error", str(exc).splitlines()[0],
                                     "Fix the queue file in an editor, then Open it again.")]
        snap.problems_token = token

    # -- what the operator asked for -------------------------------------------------

    def _act(self, path: Path, request: Mapping[str, Any], snap: QueueSnapshot) -> None:
        """Save, run and stop on this thread: a 2000-job save is fsync'd, and
        starting the runner forks a process — neither may freeze the window."""
        for kind in ("save", "run", "stop"):
            wanted = request.get(kind)
            if not wanted or wanted[0] <= self._acted.get(kind, 0):
                continue
            self._acted[kind] = wanted[0]
            result = getattr(self, f"_{kind}")(path, *wanted)
            snap.actions.append(result)
            if result.ok and kind in ("save", "run", "stop"):
                self._read_runner(path, snap)

    def _refusal(self, path: Path, action: str) -> str | None:
        try:
            return edit_refusal(runner_state(path), action)
        except Exception:  # an unreadable runner.json is no reason to refuse
            return None

    def _save(self, path: Path, token: int, document: Mapping[str, Any]) -> "ActionResult":
        refusal = self._refusal(path, "save the queue")
        if refusal:
            return ActionResult("save", token, False, refusal)
        try:
            save_queue(Queue.from_dict(document), path)
        except QueueError as exc:
            return ActionResult("save", token, False, f"Not saved: {exc}")
        except OSError as exc:
            return ActionResult("save", token, False,
                                f"Not saved: could not write {path} ({exc.strerror or exc}).")
        self._must_reload = True  # a runner may start on it next: never take it for a checkpoint
        return ActionResult("save", token, True, f"Saved {path.name}.", saved=True)

    def _run(self, path: Path, token: int, how: str,
             document: Mapping[str, Any] | None) -> "ActionResult":
        result = self._start(path, token, how, document)
        return dataclasses.replace(result, saved=document is not None and self._saved_now)

    def _start(self, path: Path, token: int, how: str,
               document: Mapping[str, Any] | None) -> "ActionResult":
        self._saved_now = False
        if document is not None:
            saved = self._save(path, token, document)
            if not saved.ok:
                return ActionResult("run", token, False, saved.message)
            self._saved_now = True
        refusal = self._refusal(path, "start the queue again")
        if refusal:
            return ActionResult("run", token, False, refusal)
        try:
            problems = list(validate_queue(load_queue(path)))
        except QueueError as exc:
            return ActionResult("run", token, False, f"Not started: {exc}")
        errors = [p for p in problems if p.is_error]
        if errors:
            return ActionResult("run", token, False,
                                f"Not started: {len(errors)} problem(s) must be fixed first; "
                                "each is listed below with its fix.", problems=problems)
        try:
            ref = start_runner(path, resume=how != "run", retry_failed=how == "retry")
        except (QueueError, OSError) as exc:
            return ActionResult("run", token, False, f"Not started: {str(exc).splitlines()[0]}",
                                problems=problems)
        return ActionResult("run", token, True, how, problems=problems, pid=ref.pid)

    def _stop(self, path: Path, token: int, now: bool) -> "ActionResult":
        try:
            request_stop(path, now=now)
        except (RunFileError, OSError) as exc:
            return ActionResult("stop", token, False, f"{'Abort' if now else 'Stop'} not "
                                f"sent: {exc}")
        return ActionResult("stop", token, True, "abort" if now else "after_job")


@dataclass(frozen=True)
class ActionResult:
    """How a save, run or stop went: ``message`` is one sentence for the operator."""

    kind: str
    token: int
    ok: bool
    message: str
    problems: list | None = None
    pid: int | None = None
    saved: bool = False


# -- the pane's decisions -------------------------------------------------------

@dataclass(frozen=True)
class PaneState:
    """Everything the buttons depend on."""

    runner_alive: bool = False
    stop_asked: bool = False
    has_path: bool = False
    dirty: bool = False
    rows: tuple[JobRow, ...] = ()
    selected: tuple[int, ...] = ()


@dataclass(frozen=True)
class Controls:
    """Which controls are live.  Editing is off while a runner owns the file."""

    add: bool
    duplicate: bool
    remove: bool
    move_up: bool
    move_down: bool
    validate: bool
    open: bool
    save: bool
    run: bool
    stop: bool
    abort: bool
    resume: bool
    retry_failed: bool
    edit_options: bool


def controls_for(state: PaneState) -> Controls:
    """The pane's buttons as a function of the state, testable without Qt."""
    idle = not state.runner_alive
    has_jobs = bool(state.rows)
    selected = [i for i in state.selected if 0 <= i < len(state.rows)]
    statuses = {r.status for r in state.rows}
    runnable = "pending" in statuses
    resumable = bool(statuses & {"not_run", "running"}) or (runnable and bool(
        statuses & {"success", "failed", "skipped"}))
    return Controls(
        add=idle,
        duplicate=idle and bool(selected),
        remove=idle and bool(selected),
        move_up=idle and bool(selected) and min(selected) > 0,
        move_down=idle and bool(selected) and max(selected) < len(state.rows) - 1,
        validate=has_jobs,
        open=True,
        save=idle and (state.dirty or not state.has_path),
        run=idle and runnable,
        stop=state.runner_alive and not state.stop_asked,
        abort=state.runner_alive,
        resume=idle and resumable,
        retry_failed=idle and bool(statuses & {"failed", "skipped"}),
        edit_options=idle,
    )


def edit_refusal(runner: Mapping[str, Any] | None, action: str = "edit the queue") -> str | None:
    """The sentence that refuses an edit while a runner owns the file, else None."""
    if runner and runner.get("alive"):
        pid = runner.get("pid", "?")
        return (f"Cannot {action} while the queue runs (runner process {pid} owns the file); "
                f"Stop it first, then edit.")
    return None


# -- reading the job editor's fields ----------------------------------------------

_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_timeout(text: str) -> tuple[float | None, str | None]:
    """``"90"``, ``"90s"``, ``"30m"``, ``"2h"``, ``"1h30m"`` or empty -> ``(seconds or None, error)``."""
    text = text.strip().lower().replace(" ", "")
    if not text or text in ("none", "0"):
        return None, None
    total, number, unit = 0.0, "", ""
    pieces: list[tuple[str, str]] = []
    for ch in text:
        if ch.isdigit() or ch == ".":
            if unit:
                pieces.append((number, unit))
                number, unit = "", ""
            number += ch
        elif ch.isalpha():
            unit += ch
        else:
            number = "?"
            break
    pieces.append((number, unit))
    try:
        for number, unit in pieces:
            total += float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        return None, (f"the timeout {text!r} is not a duration; write it like 90s, 30m, 2h or "
                      "1h30m, or leave it empty for none")
    if total <= 0:
        return None, None
    return total, None


def parse_overrides(text: str) -> tuple[list[str], str | None]:
    """``key=value`` words (quotes allowed for spaces) -> ``(overrides, error)``."""
    import shlex
    try:
        words = shlex.split(text)
    except ValueError as exc:
        return [], f"the overrides could not be read ({exc}); close the quote or remove it"
    bad = [w for w in words if "=" not in w or w.startswith("=")]
    if bad:
        return [], (f"the override {bad[0]!r} has no key=value; write overrides like "
                    "diameter=30 src=/data/plate1")
    return words, None


def parse_after(text: str) -> list[str]:
    """Job ids separated by commas or spaces, duplicates dropped, order kept."""
    out: list[str] = []
    for word in text.replace(",", " ").split():
        if word not in out:
            out.append(word)
    return out
