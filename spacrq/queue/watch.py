"""The Queue pane's watch: what the pane sees and what it asks for, away from the GUI thread.

The window never reads a file in a slot.  Its poller thread calls
:meth:`QueueWatch.poll`, which reads only what changed since the last call —
the queue file when its stamp (inode, size, mtime) moved, else only the
runner's new journal lines, plus ``runner.json`` (small) and the new bytes of
one job's log — and hands back a :class:`QueueSnapshot` of immutable rows
(:func:`spacrq.queue.pane.rows`).  Rows of jobs that did not change are the
very objects of the last snapshot, so the table's diff costs nothing for them.

The pane's requests (:meth:`~spacrq.watching.WatchBase.submit`) are carried
out by the next poll, each answered by one :class:`~spacrq.watching.Outcome`:

``save`` (document), ``run`` (how, document), ``stop`` (now)
    write the queue file, check and start the detached runner, write the
    runner's control file; each re-reads the runner's state first, so a
    window that has not yet seen a runner start never overwrites its file.
``validate`` (document), ``check_job`` (job, document)
    every problem of the queue, or of one job about to be added (its
    settings file read, its paths looked at, its module imported).
``choose_queue`` (folder), ``new_name`` (folder), ``open`` (path)
    which queue the pane shows first (the running one, else the newest),
    a fresh name for a new queue, and whether a file to open is a queue.
``describe`` (module), ``read_settings`` (paths), ``edit`` (job_id, changes)
    what a module takes, the contents of settings files, and a change to
    one job of the file (:func:`spacrq.queue.edits.edit_job`).
``keep_unsaved`` (document, base)
    a runner started while the pane had unsaved edits: its new jobs are
    added to the running queue, the rest kept as a copy beside the file
    (:mod:`spacrq.queue.aside`).
``add_job`` (job)
    one job added to the file itself, checked, under its lock, as
    ``spacrq queue add`` does (:func:`spacrq.queue.edits.add_job`): how the
    pane adds to a running queue, whose runner takes the job in.

``save`` merges: the pane's changes since the queue it last loaded are
applied onto the file as it is now (:mod:`spacrq.queue.merge`), so a job
added from a terminal meanwhile is kept, and a job changed on both sides is
named and refused rather than overwritten.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from spacrq.modules import ModuleError, describe_module, registry
from spacrq.problems import Problem
from spacrq.queue import edits, memcopy
from spacrq.queue.aside import keep_unsaved
from spacrq.queue.control import ABORT, STOP_AFTER_JOB
from spacrq.queue.locks import runner_holds
from spacrq.queue.merge import Conflict, DiskNews, disk_news, merge_queues
from spacrq.queue.model import RUN_FIELDS, Job, Queue, QueueError
from spacrq.queue.pane import Progress, edit_refusal, progress, rows
from spacrq.queue.runner import RUNNER_LOG, request_stop, runner_state, start_runner
from spacrq.queue.settings import SettingsError, load_settings_file
from spacrq.queue.store import (apply_transition, edit_lock, journal_path, legacy_logs_dir,
                                load_queue, logs_dir,
                                open_queue, read_queue_document, save_queue)
from spacrq.queue.journal import foreign, is_header
from spacrq.queue.validate import Modules, validate_job, validate_queue
from spacrq.runfiles import (JsonlTail, RunFileError, TextTail, asked, directly_in,
                             file_stamp)
from spacrq.watching import Code, Outcome, Row, WatchBase

__all__ = ["QueueSnapshot", "QueueWatch", "LogFollower", "trim_log", "queue_to_open",
           "newest_queue", "fresh_queue_path", "save_document", "start_queue", "send_stop"]

_JOURNAL_SEQ = re.compile(rb'"journal_seq":\s*(\d+)\s*}\s*$')
_UNREAD: Any = "unread"


@dataclass(frozen=True)
class QueueSnapshot:
    """What one poll found.  Fields left ``None`` did not change since the last one.

    :param rows: the queue file's rows, when they changed, and ``progress``
        counting them.
    :param queue: the parsed queue the rows came from, handed to the editor
        (only while no runner runs; the watch never touches it again), and
        ``base`` a copy of it: what the pane's next Save merges its changes
        against (:mod:`spacrq.queue.merge`); ``news`` how it differs from the
        pane's last base (``view["base"]``), for the "changed on disk" line.
    :param load_error: one sentence when the queue file cannot be read
        (``""``: the earlier error is gone); ``load_code`` says why
        (:attr:`Code.MISSING`: not on disk, :attr:`Code.INVALID`: not a queue);
        ``load_notice`` what reading it had to do, when that is new: a file a power cut
        damaged, read from its last checkpoint and written again (see
        :mod:`spacrq.queue.lastgood`), journal lines skipped.
    :param on_disk: whether the queue file exists, when that changed.
    :param runner: ``runner_state(path)`` (plus a pending ``stop``) when it
        changed; empty when no runner ever ran.
    :param log_text: new text of the followed log; ``log_restarted`` means
        drop what is shown first.
    :param modules: every module a job may name, on the first poll.
    :param outcomes: one per action carried out.
    """

    path: str
    rows: tuple[Row, ...] | None = None
    progress: Progress | None = None
    queue: Queue | None = None
    base: Queue | None = None
    news: DiskNews | None = None
    load_error: str | None = None
    load_code: Code | None = None
    load_notice: str = ""
    on_disk: bool | None = None
    runner: Mapping[str, Any] | None = None
    log_job: str = ""
    log_path: str = ""
    log_text: str = ""
    log_restarted: bool = False
    modules: tuple[str, ...] | None = None
    outcomes: tuple[Outcome, ...] = ()


class _Found:
    """A snapshot being filled by one poll: :class:`QueueSnapshot`'s fields, settable."""

    def __init__(self, path: str) -> None:
        for name, spec in QueueSnapshot.__dataclass_fields__.items():
            setattr(self, name, spec.default)
        self.path = path
        self.outcomes: list[Outcome] = []

    def empty(self) -> bool:
        return (self.rows is None and self.load_error is None and self.runner is None
                and self.on_disk is None and not self.log_text and not self.log_restarted
                and self.modules is None and not self.outcomes)

    def freeze(self) -> QueueSnapshot:
        values = {name: getattr(self, name) for name in QueueSnapshot.__dataclass_fields__}
        values["outcomes"] = tuple(self.outcomes)
        return QueueSnapshot(**values)


# -- which queue the pane shows ------------------------------------------------------

def _queue_files(folder: str | os.PathLike) -> list[os.DirEntry]:
    """The ``*.queue.json`` entries of ``folder`` (none when it cannot be read)."""
    try:
        return [e for e in os.scandir(folder) if e.name.endswith(".queue.json")]
    except OSError:
        return []


def queue_to_open(folder: str | os.PathLike) -> Path | None:
    """The queue the pane opens on start: one that is running now, else the newest.

    Reopening the window in the middle of the night must land on the queue
    that is running, even when a newer queue file was written since.
    """
    running = []
    for entry in _queue_files(folder):
        try:
            state = runner_state(Path(folder) / entry.name) or {}
        except Exception:  # an unreadable runner.json says nothing about liveness
            state = {}
        if state.get("alive"):
            running.append(entry.name)
    if running:
        return Path(folder) / sorted(running)[0]
    return newest_queue(folder)


def newest_queue(folder: str | os.PathLike) -> Path | None:
    """The most recently modified ``*.queue.json`` in ``folder``, or None."""
    best: tuple[float, str] | None = None
    for entry in _queue_files(folder):
        try:
            if not entry.is_file():
                continue
            key = (entry.stat().st_mtime, entry.name)
        except OSError:
            continue
        if best is None or key > best:
            best = key
    return Path(folder) / best[1] if best else None


def fresh_queue_path(folder: str | os.PathLike, now: datetime | None = None) -> Path:
    """An unused ``queue-YYYYmmdd-HHMM[-N].queue.json`` in ``folder``, for a new queue."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M")
    n, path = 1, Path(folder) / f"queue-{stamp}.queue.json"
    while path.exists():
        n += 1
        path = Path(folder) / f"queue-{stamp}-{n}.queue.json"
    return path


# -- following a log -----------------------------------------------------------------

#: one poll hands the log view at most this much new text, and cuts any
#: single line longer than :data:`LOG_LINE_CHARS`
LOG_KEEP_CHARS = 64 * 1024
LOG_LINE_CHARS = 2000


def trim_log(text: str, keep: int = LOG_KEEP_CHARS, line_chars: int = LOG_LINE_CHARS) -> tuple[str, bool]:
    """Bound what one poll hands the log view: ``(text, trimmed)``.

    A job can print hundreds of megabytes, or one 100 MB line without a
    newline: only the last ``keep`` characters survive, and any line longer
    than ``line_chars`` is cut with a note of how much was left out.
    """
    trimmed = False
    if len(text) > keep:
        cut = text.find("\n", len(text) - keep)
        start = cut + 1 if 0 <= cut < len(text) - 1 else len(text) - keep
        text = f"[… {start:,} characters of log skipped; open the file to read them …]\n" + text[start:]
        trimmed = True
    if any(len(line) > line_chars for line in text.split("\n")):
        text = "\n".join(line[:line_chars] + f" […{len(line) - line_chars:,} more characters]"
                         if len(line) > line_chars else line for line in text.split("\n"))
    return text, trimmed


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except (ValueError, OSError):
        return False


@dataclass(frozen=True)
class LogNews:
    """What one poll found in the followed log: ``restarted`` means drop what is shown."""

    job_id: str
    path: str
    text: str = ""
    restarted: bool = False


@dataclass
class LogFollower:
    """The log followed for one queue file: the selected job's, else the runner's own.

    The runner's log ends with the last run's summary — what ran, what
    failed and why — which is what the operator reads in the morning.  A
    job's log is only ever read inside the queue's folder.
    """

    max_initial: int = 64 * 1024
    max_chunk: int = 256 * 1024
    _key: tuple[str, str] = ("", "")
    _tail: TextTail | None = None
    _found: dict[str, str] = field(default_factory=dict)

    def follow(self, queue_path: Path, job_id: str, shown: Sequence[Row]) -> LogNews:
        """The new text of ``job_id``'s log (of the runner's own log when ``job_id`` is empty)."""
        if os.path.islink(logs_dir(queue_path)):  # (a runner refuses it: nothing is read there)
            log_path = ""
        elif job_id:
            log_path = self._log_of(queue_path, job_id, shown)
        else:
            runner_log = logs_dir(queue_path) / RUNNER_LOG
            log_path = str(runner_log) if runner_log.is_file() else ""
        switched = (job_id, log_path) != self._key
        if switched:
            self._key = (job_id, log_path)
            self._tail = TextTail(log_path, self.max_initial, self.max_chunk) if log_path else None
        if self._tail is None:
            return LogNews(job_id, log_path, "", switched)
        text, restarted = self._tail.read()
        if restarted and text and self._tail.offset > len(text.encode()):
            cut = text.find("\n")  # the tail began mid-file: drop the partial first line
            text = "[… earlier lines not shown; open the file to read them …]\n" + text[cut + 1:]
        text, trimmed = trim_log(text)
        return LogNews(job_id, log_path, text, switched or restarted or trimmed)

    def _log_of(self, queue_path: Path, job_id: str, shown: Sequence[Row]) -> str:
        """Where ``job_id``'s log is, kept inside the queue's folder; ``""`` when nowhere."""
        row = next((r for r in shown if r.key == job_id), None)
        logged = getattr(row.value, "log_path", "") if row is not None else ""
        if logged:
            candidate = Path(logged)
            if not candidate.is_absolute():
                candidate = queue_path.parent / candidate
            # (in the queue's own logs folder — or the older layout's, which this file's
            # runner may have used — never anywhere else in its folder, never through a link)
            folders = [f for f in (logs_dir(queue_path), legacy_logs_dir(queue_path))
                       if f is not None and not f.is_symlink()]
            if not candidate.is_symlink() and any(directly_in(candidate, f) for f in folders):
                return str(candidate)
        cached = self._found.get(job_id)
        if cached and os.path.exists(cached):
            return cached
        folder = Path(logs_dir(queue_path))
        try:  # the runner names each log NN_<id>.log
            names = sorted(e.name for e in os.scandir(folder)
                           if e.name.endswith(f"_{job_id}.log") and e.name[:1].isdigit())
        except OSError:
            names = []
        found = str(folder / names[-1]) if names else ""
        if found and _inside(Path(found), folder):
            self._found[job_id] = found
            return found
        return ""


# -- the operator's actions on the file ---------------------------------------------

def _answer(token: int, action: str, code: Code, message: str = "", **data: Any) -> Outcome:
    return Outcome(token, action, code, message, MappingProxyType(data))


def _refusal(path: Path, action: str) -> str | None:
    try:
        return edit_refusal(runner_state(path), action)
    except Exception:  # an unreadable runner.json is no reason to refuse
        return None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def save_document(path: Path, token: int, document: Mapping[str, Any],
                  base: Queue | None = None, keep_ours: Sequence[Conflict] = (),
                  replace: bool = False) -> Outcome:
    """Save the pane's queue ``document`` onto ``path``, unless a runner owns the file.

    The file as it is now is read under the edit lock, and the pane's changes
    since ``base`` (the queue it last loaded or saved) are applied onto it
    (:func:`spacrq.queue.merge.merge_queues`): jobs others added are kept,
    a job changed on both sides refuses the save (``CONFLICT``, the
    conflicts in ``data["conflicts"]``), unless it is in ``keep_ours``.
    ``replace`` writes the document as it is (Save as…, over a file the
    operator chose to replace).  ``data["queue"]`` is the queue written (the
    pane's to keep), ``data["base"]`` a copy of it for the next save,
    ``data["sent"]`` the document as a queue.
    """
    refusal = _refusal(path, "save the queue")
    if refusal:
        return _answer(token, "save", Code.REFUSED, refusal, saved=False)
    if path.is_symlink():  # spacrq never writes through a link, nor replaces one unasked
        return _answer(token, "save", Code.REFUSED, f"Not saved: {path.name} is a symbolic "
                       "link, and spacrq never writes through one or replaces it; Save as… "
                       "a real file instead.", saved=False)
    try:
        queue = Queue.from_dict(document)
        sent = Queue.from_dict(document)
    except QueueError as exc:
        return _answer(token, "save", Code.INVALID, f"Not saved: {_first_line(exc)}", saved=False)
    note = ""
    try:
        with edit_lock(path):  # the same lock as every writer: a runner cannot start meanwhile
            if runner_holds(logs_dir(path)):
                return _answer(token, "save", Code.CONFLICT, "Not saved: a runner started on "
                               "this queue a moment ago; its file is the runner's until it ends.",
                               saved=False)
            if not replace and path.exists():
                try:
                    theirs = load_queue(path)
                except QueueError as exc:
                    return _answer(token, "save", Code.CONFLICT, f"Not saved: {path.name} on "
                                   f"disk cannot be read ({_first_line(exc)}), so what is in it "
                                   "cannot be kept; repair it, or Save as another file.",
                                   saved=False)
                merged = merge_queues(base, queue, theirs, keep_ours)
                if not merged.ok:
                    return _answer(token, "save", Code.CONFLICT, merged.refusal(path.name),
                                   saved=False, conflicts=merged.conflicts)
                queue, note = merged.queue, merged.note()
            save_queue(queue, path)
    except QueueError as exc:
        return _answer(token, "save", Code.FAILED, f"Not saved: {_first_line(exc)}", saved=False)
    except (OSError, RunFileError) as exc:
        return _answer(token, "save", Code.FAILED, f"Not saved: could not write {path} "
                       f"({getattr(exc, 'strerror', None) or exc}).", saved=False)
    return _answer(token, "save", Code.DONE, f"Saved {path.name}.{f' {note}' if note else ''}",
                   saved=True, queue=queue, base=queue.clone(), sent=sent)


def start_queue(path: Path, token: int, how: str, document: Mapping[str, Any] | None,
                stop=None, current: Queue | None = None, base: Queue | None = None,
                keep_ours: Sequence[Conflict] = ()) -> Outcome:
    """Save ``document`` (when given), check the file, then start the detached runner.

    ``how`` is ``"run"``, ``"resume"`` or ``"retry"`` (resume, running failed
    jobs again); ``data["how"]`` says which started.  ``current`` is the
    file's queue as already read (file and journal), checked instead of
    reading the file again; only without a ``document`` to save.
    """
    saved, kept = False, {}
    if document is not None:
        result = save_document(path, token, document, base, keep_ours)
        if not result.ok:
            return _answer(token, "run", result.code, result.message, saved=False,
                           **{k: v for k, v in result.data.items() if k == "conflicts"})
        saved = True
        kept = {k: result.data[k] for k in ("queue", "base", "sent")}
    refusal = _refusal(path, "start the queue again")
    if refusal:
        return _answer(token, "run", Code.REFUSED, refusal, saved=saved, **kept)
    try:
        queue = current if current is not None and document is None else load_queue(path)
        problems = validate_queue(queue, Modules(), stop=stop)
    except QueueError as exc:
        return _answer(token, "run", Code.INVALID, f"Not started: {exc}", saved=saved, **kept)
    errors = [p for p in problems if p.is_error]
    if errors:
        return _answer(token, "run", Code.INVALID, f"Not started: {len(errors)} problem(s) must "
                       "be fixed first; each is listed below with its fix.",
                       saved=saved, problems=tuple(problems), **kept)
    if stop is not None and stop():
        return _answer(token, "run", Code.FAILED, "Not started: the window closed.", saved=saved,
                       **kept)
    try:
        ref = start_runner(path, resume=how != "run", retry_failed=how == "retry")
    except (QueueError, OSError) as exc:
        alive = bool((runner_state(path) or {}).get("alive"))
        return _answer(token, "run", Code.CONFLICT if alive else Code.FAILED,
                       f"Not started: {_first_line(exc)}", saved=saved, problems=tuple(problems),
                       **kept)
    return _answer(token, "run", Code.DONE, f"Started {path.name}.", saved=saved,
                   problems=tuple(problems), pid=ref.pid, how=how, **kept)


def send_stop(path: Path, token: int, now: bool) -> Outcome:
    """Ask the runner to stop after the running job, or (``now``) to abort it."""
    try:
        asked = request_stop(path, now=now)
    except (RunFileError, OSError) as exc:
        why = str(getattr(exc, "strerror", None) or exc).splitlines()[0]
        return _answer(token, "stop", Code.FAILED,
                       f"{'Abort' if now else 'Stop'} not sent: {why}"
                       + ("" if now else "; Abort still reaches the runner (as a signal)"))
    if asked.get("signalled"):
        return _answer(token, "stop", Code.DONE, f"Abort sent as a signal to process "
                       f"{asked['signalled']} (the request could not be written: "
                       f"{asked.get('why')}); a runner waiting for room to save its final "
                       "state gives that up.", how="abort")
    return _answer(token, "stop", Code.DONE, "Abort asked." if now else "Stop asked.",
                   how="abort" if now else "after_job")


def _problem_of(exc: QueueError) -> Problem:
    return Problem("", "error", _first_line(exc),
                   "Fix the queue file in an editor, then Open it again.")


# -- the watch -----------------------------------------------------------------------

class QueueWatch(WatchBase):
    """The poller's state between polls: what was read, and from where.

    ``poll(view)`` reads ``view["path"]`` (the queue file), follows the log
    of ``view["log_job"]`` (a job id, or ``""`` for the running job, else
    the runner's own log), reads the file afresh when ``view["reload"]``
    changes, and carries out the actions submitted since the last poll.
    """

    def __init__(self, max_initial_log: int = 64 * 1024, max_log_chunk: int = 256 * 1024) -> None:
        super().__init__()
        self.max_initial_log, self.max_log_chunk = max_initial_log, max_log_chunk
        self.path = ""
        self._polled = False
        self._reload: Any = None
        self._forget()

    def _forget(self) -> None:
        """Drop everything known about the file watched (another file, or a fresh read)."""
        self._stamp: Any = _UNREAD
        self._copy: Any = None  # the stamp of the copy in memory of a runner's state, if any
        self._rows: tuple[Row, ...] = ()
        self._progress = Progress()
        self._runner: dict | None = None
        self._error: str | None = None
        self._on_disk: bool | None = None
        self._log = LogFollower(self.max_initial_log, self.max_log_chunk)
        self._queue: Queue | None = None
        self._journal: JsonlTail | None = None
        self._foreign_journal = False  # the journal read is another queue's (see journal.foreign)
        self._handed: Any = None
        self._gap = False
        self._must_reload = True  # the next change of the file is read in full, no shortcut
        self._shared = False  # the editor holds ``_queue``: the watch must not change it
        self._notice = ""  # the load_notice last published

    # -- the poll ---------------------------------------------------------------------

    def _poll(self, view: Mapping[str, Any]) -> QueueSnapshot | None:
        path = str(view.get("path") or "")
        first = path != self.path or not self._polled
        if path != self.path:
            self.path = path
            self._forget()
        found = _Found(path)
        if not self._polled:
            self._polled = True
            found.modules = tuple(sorted(registry()))
        if path:
            if view.get("reload") != self._reload:
                self._reload = view.get("reload")
                self._stamp, self._handed, self._must_reload = _UNREAD, None, True
            target = Path(path)
            self._read_runner(target, found)
            self._read_queue(target, found)
            self._hand_over(found, view.get("base"))
            self._read_log(target, str(view.get("log_job") or ""), found)
        for token, action, args in self.take_submissions():
            if self.interrupted():
                return None
            found.outcomes.append(self._act(token, action, args, Path(path) if path else None,
                                            found))
        if self.interrupted():
            return None
        if first or not found.empty():
            return found.freeze()
        return None

    # -- reading the queue ------------------------------------------------------------

    def _read_queue(self, path: Path, found: _Found) -> None:
        """Reload the file when it was replaced; otherwise apply only new journal lines.

        A large queue's runner journals each transition to ``journal.jsonl``
        and rewrites the queue file only at checkpoints, so between
        checkpoints the watch tails the journal and rebuilds just the rows
        of the jobs it names.
        """
        stamp = file_stamp(path)
        copy = memcopy.stamp(path)  # (a runner's state the disk could not take: read it in)
        if copy != self._copy:
            self._copy, self._gap = copy, True
        touched: set[str] = set()
        if stamp != self._stamp and stamp is not None and self._live() and not self._must_reload:
            touched |= self._apply_journal()  # lines written before the checkpoint emptied it
            merged = set() if self._is_own_checkpoint(path) else self._merge_checkpoint(path)
            if merged is not None:
                touched |= merged
                self._stamp, self._gap = stamp, False
                self._journal = JsonlTail(journal_path(path))
                self._foreign_journal = False
        if stamp == self._stamp and self._queue is not None and self._journal is not None:
            touched |= self._apply_journal()
        if self._gap or stamp != self._stamp:
            self._full_reload(path, stamp, found)
            return
        if touched:
            self._publish(rows(self._queue.jobs, self._rows, touched), found)

    def _full_reload(self, path: Path, stamp: Any, found: _Found) -> None:
        self._stamp, self._gap, self._must_reload, self._shared = stamp, False, False, False
        self._queue = None
        if stamp is None:
            self._set_on_disk(found, False)
            self._set_error(found, f"{path.name} is not on disk; Save writes it there, "
                                   "or Open another queue", Code.MISSING)
            return
        self._set_on_disk(found, True)
        try:
            queue = load_queue(path)
            if queue.recovered_from and not runner_holds(logs_dir(path)):
                queue = open_queue(path)  # written again (as every command that opens it does)
        except QueueError as exc:
            self._set_error(found, _first_line(exc), Code.INVALID)
            return
        self._set_error(found, None, None)
        notice = "; ".join(w.rstrip(".") for w in queue.warnings)
        notice += "." if notice else ""
        if notice != self._notice:
            self._notice = found.load_notice = notice
        self._queue = queue
        self._journal = JsonlTail(journal_path(path))
        self._foreign_journal = False
        self._apply_journal()  # lines load_queue replayed already are skipped by their seq
        self._gap = False
        made = rows(queue.jobs, self._rows, stop=self.interrupted)
        if made is None:  # cut short by close(): nothing half-read is kept
            self._stamp, self._queue = _UNREAD, None
            return
        self._publish(made, found, force=True)

    def _live(self) -> bool:
        return (self._queue is not None and self._journal is not None
                and bool((self._runner or {}).get("alive")))

    def _is_own_checkpoint(self, path: Path) -> bool:
        """True when a running queue's file was rewritten with what the watch already has.

        A live runner folds its journal into the queue file every few
        seconds; the result is exactly the state the watch built from the
        journal, so it reads only the file's last bytes (``journal_seq`` is
        its last field) instead of parsing 2000 jobs.  Only while a runner
        owns the file, and never for the first change after a save or an
        open (``_must_reload``): those are read in full.
        """
        try:
            with open(path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 256))
                tail = handle.read()
        except OSError:
            return False
        found = _JOURNAL_SEQ.search(tail)
        return bool(found) and int(found.group(1)) <= self._queue.journal_seq

    def _merge_checkpoint(self, path: Path) -> set[str] | None:
        """Fold a running queue's checkpoint into the watch's queue; the jobs it changed.

        The runner empties its journal after each checkpoint, so lines
        written since the last poll are only in the file now.  Its jobs are
        the same jobs in the same order (only run fields change while it
        runs), so they are compared field by field instead of rebuilt.  None
        when the file is not such a checkpoint (then it is read in full).
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
        try:
            seq = max(self._queue.journal_seq, int(document.get("journal_seq") or 0))
        except (TypeError, ValueError):
            return None
        if not self._own_queue():
            return None
        touched: set[str] = set()
        for entry, job in zip(entries, self._queue.jobs):
            for name in RUN_FIELDS:
                if name in entry and getattr(job, name) != entry[name]:
                    setattr(job, name, entry[name])
                    touched.add(job.id)
        self._queue.journal_seq = seq
        self._queue.stopped_reason = str(document.get("stopped_reason") or "")
        return touched

    def _apply_journal(self) -> set[str]:
        """Apply new journal lines; a gap in their numbering means lines were missed
        (the journal was emptied and refilled between two polls) and sets ``_gap``."""
        records = self._journal.read()
        if records and not self._own_queue():
            return set()
        index = {job.id: job for job in self._queue.jobs} if records else {}
        touched: set[str] = set()
        for record in records:
            if is_header(record):  # whose journal it is: another queue's is never applied
                self._foreign_journal = foreign(self._queue, record)
                continue
            if self._foreign_journal:
                continue
            seq = record.get("seq") if isinstance(record, dict) else None
            if isinstance(seq, int) and seq > self._queue.journal_seq + 1:
                self._gap = True
                break
            if apply_transition(self._queue, record, index):  # only a dict naming a job applies
                touched.add(str(record["job"]))
        return touched

    def _own_queue(self) -> bool:
        """Stop sharing the queue handed to the editor: the watch changes a clone of its own.

        The editor's object is never touched again.  False (and the file is
        read afresh) when the editor's object no longer holds the jobs the
        watch read from the file, in their order.
        """
        if not self._shared:
            return True
        twin = self._queue.clone()
        if [job.id for job in twin.jobs] != [row.key for row in self._rows]:
            self._gap = True
            return False
        self._queue, self._shared = twin, False
        return True

    def _publish(self, made: tuple[Row, ...], found: _Found, force: bool = False) -> None:
        if force or made != self._rows:
            self._rows, self._progress = made, progress(made)
            found.rows, found.progress = made, self._progress

    def _hand_over(self, found: _Found, base: Queue | None = None) -> None:
        """Give the editor the queue to edit, but only while no runner runs.

        The object itself is handed over, and from then on the watch never
        touches it: before a journal line or a checkpoint changes anything
        the watch takes a clone of its own (``_shared``, :meth:`_own_queue`).
        """
        if self._queue is None or (self._runner or {}).get("alive"):
            return
        if self._handed is self._rows:
            return
        found.queue, found.base = self._queue, self._queue.clone()
        found.news = disk_news(base, self._queue)
        found.rows, found.progress = self._rows, self._progress
        self._handed = self._rows
        self._shared = True

    def _set_error(self, found: _Found, message: str | None, code: Code | None) -> None:
        """Report a load error once (and its clearing once, as ``""``)."""
        if message == self._error:
            return
        found.load_error = "" if message is None else message
        found.load_code = code
        self._error = message

    def _set_on_disk(self, found: _Found, on_disk: bool) -> None:
        if on_disk != self._on_disk:
            self._on_disk = found.on_disk = on_disk

    def _read_runner(self, path: Path, found: _Found) -> None:
        try:
            state = dict(runner_state(path) or {})
        except Exception as exc:  # a garbled runner.json is reported, not fatal
            state = {"alive": False, "unreadable": f"{type(exc).__name__}: {exc}"}
        if state.get("alive"):
            stop = asked(logs_dir(path)).get("stop")
            if stop:
                state["stop"] = stop
        if state != self._runner:
            self._runner = state
            found.runner = MappingProxyType(dict(state))

    def _running_job(self) -> str:
        """The job the runner says it runs, else the first row that reads running."""
        runner = self._runner or {}
        if runner.get("alive") and runner.get("current_job"):
            return str(runner["current_job"])
        return next((str(row.key) for row in self._rows if row.look == "running"), "")

    def _read_log(self, path: Path, wanted: str, found: _Found) -> None:
        news = self._log.follow(path, wanted or self._running_job(), self._rows)
        found.log_job, found.log_path = news.job_id, news.path
        found.log_text, found.log_restarted = news.text, news.restarted

    # -- the actions ----------------------------------------------------------------------

    def _act(self, token: int, action: str, args: dict, path: Path | None,
             found: _Found) -> Outcome:
        """Carry out one action; anything it raises is a FAILED outcome, never a dead poller."""
        handler = getattr(self, f"_do_{action}", None)
        if handler is None:
            return _answer(token, action, Code.INVALID, f"The queue watch has no action {action!r}.")
        target = Path(args.pop("path")) if args.get("path") else path
        try:
            outcome = handler(token, target, **args)
        except Exception as exc:  # one sentence to the operator, the poller goes on
            return _answer(token, action, Code.FAILED, f"{action} failed: "
                           f"{type(exc).__name__}: {exc}")
        if outcome.data.get("saved") or (action in ("edit", "add_job", "keep_unsaved")
                                          and outcome.ok):
            self._must_reload = True  # a runner may start on it next: never a checkpoint
            if target is not None and str(target) == self.path:
                self._read_runner(target, found)
        elif outcome.ok and target is not None and str(target) == self.path:
            self._read_runner(target, found)
        return outcome

    def _current(self, path: Path) -> Queue | None:
        """The watch's own queue when it is exactly the file's (file unchanged, journal read)."""
        if str(path) != self.path or self._queue is None or self._journal is None:
            return None
        if file_stamp(path) != self._stamp or self._gap:
            return None
        self._apply_journal()
        if self._gap or not self._own_queue():
            return None
        return self._queue

    def _no_file(self, token: int, action: str) -> Outcome:
        return _answer(token, action, Code.MISSING, "No queue file is open; Save the queue first.")

    def _do_save(self, token: int, path: Path | None, document: Mapping[str, Any],
                 base: Queue | None = None, keep_ours: Sequence[Conflict] = (),
                 replace: bool = False) -> Outcome:
        if path is None:
            return self._no_file(token, "save")
        return save_document(path, token, document, base, keep_ours, replace)

    def _do_run(self, token: int, path: Path | None, how: str = "run",
                document: Mapping[str, Any] | None = None, base: Queue | None = None,
                keep_ours: Sequence[Conflict] = ()) -> Outcome:
        if path is None:
            return self._no_file(token, "run")
        return start_queue(path, token, how, document, stop=self.interrupted,
                           current=self._current(path) if document is None else None,
                           base=base, keep_ours=keep_ours)

    def _do_add_job(self, token: int, path: Path | None, job: Mapping[str, Any]) -> Outcome:
        """Add one job to the file itself, as ``queue add`` does (the queue is running)."""
        if path is None:
            return self._no_file(token, "add_job")
        warnings: list[str] = []
        try:
            added, held = edits.add_job(path, Job.from_dict(job), warnings=warnings)
        except QueueError as exc:
            return _answer(token, "add_job", Code.INVALID, f"Not added: {_first_line(exc)}")
        except edits.EditError as exc:
            return _answer(token, "add_job", exc.code, str(exc))
        stop = asked(logs_dir(path)).get("stop") if held else None
        if stop in (STOP_AFTER_JOB, ABORT):  # the runner ends after this job (or now): it will not take the new one
            tail = ("; a stop was asked, so the runner will not take it in: it runs when "
                    "the queue is resumed")
        elif held:
            tail = "; its runner takes it in and runs it after the jobs already queued"
        else:
            tail = "; Run or Resume runs it"
        return _answer(token, "add_job", Code.DONE, f"Added {added.id} to {path.name}{tail}.",
                       job_id=added.id, held=held, warnings=tuple(warnings))

    def _do_keep_unsaved(self, token: int, path: Path | None, document: Mapping[str, Any],
                         base: Queue | None = None) -> Outcome:
        """A runner started while the pane had unsaved edits: keep them
        (:func:`spacrq.queue.aside.keep_unsaved`), and say exactly how."""
        if path is None:
            return self._no_file(token, "keep_unsaved")
        try:
            ours = Queue.from_dict(document)
        except QueueError as exc:
            return _answer(token, "keep_unsaved", Code.INVALID, "A runner started on "
                           f"{path.name}; your unsaved edits could not be read "
                           f"({_first_line(exc)}).", kept=False)
        kept = keep_unsaved(path, ours, base)
        whole = kept.copy is not None or not (kept.failed or kept.problem)
        return _answer(token, "keep_unsaved", Code.DONE if whole else Code.FAILED,
                       kept.sentence(path.name), kept=whole, added=kept.added,
                       copy=str(kept.copy) if kept.copy else "")

    def _do_stop(self, token: int, path: Path | None, now: bool = False) -> Outcome:
        if path is None:
            return self._no_file(token, "stop")
        return send_stop(path, token, now)

    def _do_validate(self, token: int, path: Path | None,
                     document: Mapping[str, Any]) -> Outcome:
        try:
            problems = validate_queue(Queue.from_dict(document), Modules(), stop=self.interrupted)
        except QueueError as exc:
            problems = [_problem_of(exc)]
        return _answer(token, "validate", Code.DONE, "", problems=tuple(problems))

    def _do_check_job(self, token: int, path: Path | None, job: Mapping[str, Any],
                      document: Mapping[str, Any]) -> Outcome:
        """Every problem of one job about to be added, against the queue it joins."""
        try:
            candidate = Job.from_dict(job)
            queue = Queue.from_dict(document)
        except QueueError as exc:
            return _answer(token, "check_job", Code.INVALID, _first_line(exc),
                           problems=(_problem_of(exc),), job=job)
        problems = tuple(validate_job(candidate, queue, Modules()))
        errors = [p for p in problems if p.is_error]
        code = Code.INVALID if errors else Code.DONE
        message = f"{errors[0].message} — {errors[0].fix}" if errors else ""
        return _answer(token, "check_job", code, message, problems=problems, job=job)

    def _do_describe(self, token: int, path: Path | None, module: str) -> Outcome:
        try:
            info = describe_module(module)
        except ModuleError as exc:
            return _answer(token, "describe", Code.INVALID, str(exc), module=module)
        if info is None:
            return _answer(token, "describe", Code.MISSING, f"unknown module {module!r}",
                           module=module)
        return _answer(token, "describe", Code.DONE, info.about, module=module, info=info)

    def _do_choose_queue(self, token: int, path: Path | None, folder: str) -> Outcome:
        chosen = queue_to_open(folder)
        if chosen is not None:
            return _answer(token, "choose_queue", Code.DONE, "", path=str(chosen), exists=True)
        return _answer(token, "choose_queue", Code.DONE, "",
                       path=str(fresh_queue_path(folder)), exists=False)

    def _do_new_name(self, token: int, path: Path | None, folder: str) -> Outcome:
        return _answer(token, "new_name", Code.DONE, "", path=str(fresh_queue_path(folder)))

    def _do_open(self, token: int, path: Path | None) -> Outcome:
        """Whether ``path`` is a file the pane can show (a running queue shows live).

        What is wrong inside the file is shown once the pane watches it, the
        way any load error is, so the operator sees which file and why.
        """
        if path is None:
            return _answer(token, "open", Code.INVALID, "Give the path of a *.queue.json file.")
        if not path.exists():
            return _answer(token, "open", Code.MISSING, f"queue file not found: {path}; check "
                           "the path", path=str(path))
        if path.is_dir():
            return _answer(token, "open", Code.INVALID, f"{path} is a folder, not a queue file; "
                           "give the path of a *.queue.json file", path=str(path))
        return _answer(token, "open", Code.DONE, f"Opened {path.name}.", path=str(path))

    def _do_read_settings(self, token: int, path: Path | None,
                          paths: Sequence[str]) -> Outcome:
        read = []
        for name in paths:
            try:
                read.append({"path": str(name), "settings": load_settings_file(str(name))})
            except SettingsError as exc:
                return _answer(token, "read_settings", Code.INVALID, str(exc), path=str(name))
        return _answer(token, "read_settings", Code.DONE, "", settings=tuple(read))

    def _do_edit(self, token: int, path: Path | None, job_id: str,
                 changes: Mapping[str, Any]) -> Outcome:
        """Change one waiting job of the file (its settings, overrides, after, timeout, label)."""
        if path is None:
            return self._no_file(token, "edit")
        warnings: list[str] = []
        try:
            job = edits.edit_job(path, job_id, dict(changes), warnings=warnings)
        except edits.EditError as exc:
            return _answer(token, "edit", exc.code, str(exc), job_id=job_id)
        return _answer(token, "edit", Code.DONE, f"Changed {job_id}.", job_id=job_id,
                       job=job.to_dict(), warnings=tuple(warnings))
