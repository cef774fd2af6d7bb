"""The Queue pane's logic, without Qt: its rows, its buttons, its progress caption.

Everything the window shows is decided here, from plain values, so a test
reaches every rule without a window and the window only applies answers:

* :func:`rows` — one :class:`spacrq.watching.Row` per job, its cells already
  text (built on the poller thread; painting is a tuple lookup);
* :func:`controls` — which buttons are live in which state, each with the
  tooltip saying why (THE place "Resume is enabled" is decided);
* :func:`progress` — "ended / total" and how they ended (the bar's words and
  colours), and the caption counting each status;
* :func:`ending` — what the pane says when the runner it watched is gone;
* :func:`changed_on_disk` — what Save will do with a file changed under
  unsaved edits (:mod:`spacrq.queue.merge` does it);
* :func:`edit_refusal` — the sentence refusing an edit while a runner owns
  the file;
* how the job editor's text fields read (:func:`parse_timeout`,
  :func:`parse_overrides`, :func:`parse_after`).
"""
from __future__ import annotations

import os
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spacrq.fmt import duration
from spacrq.queue.edits import edit_refusal as edit_refusal_of
from spacrq.queue.model import STATUS_RUNNING, Job, parse_iso
from spacrq.watching import Button, Row

__all__ = ["JobFacts", "Button", "Controls", "PaneState", "Progress", "FINISHED_STATUSES",
           "BAR_COLOURS", "Ending", "ending", "changed_on_disk",
           "COLUMNS", "COL_NUMBER", "COL_JOB", "COL_MODULE", "COL_LABEL", "COL_AFTER",
           "COL_STATUS", "COL_TIME", "COL_LOG", "STATUS_LOOK", "job_row", "rows",
           "status_word", "status_tip", "time_text", "progress", "controls", "edit_refusal",
           "parse_timeout", "parse_overrides", "parse_after"]

#: statuses that count towards "done" in "done / total jobs"
FINISHED_STATUSES = ("success", "failed", "skipped")

#: the table's columns: (title, header tooltip)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("#", "Run order: jobs run one at a time, top to bottom."),
    ("Job", "The job's id; 'After' refers to jobs by it."),
    ("Module", ""),
    ("Label", ""),
    ("After", "Jobs that must succeed first; if one does not, this job is skipped."),
    ("Status", "Hover a failed or skipped job to read why."),
    ("Time", "How long the job took, counting up while it runs."),
    ("Log", "The job's own log file; select the job to follow it below."),
)
COL_NUMBER, COL_JOB, COL_MODULE, COL_LABEL, COL_AFTER, COL_STATUS, COL_TIME, COL_LOG = range(8)

#: status word -> (text colour, background); dark text on pale fills stays
#: readable on light and dark desktop themes alike
STATUS_LOOK: dict[str, tuple[str, str | None]] = {
    "pending": ("#3c3c3c", None),
    "running": ("#0b3d91", "#cfe2ff"),
    "succeeded": ("#1b5e20", "#d4edda"),
    "partial": ("#7a4f00", "#ffe8a3"),
    "failed": ("#8b0000", "#f8d0d0"),
    "skipped": ("#5b2a86", "#e8dcf4"),
    "not run": ("#3c3c3c", "#e2e2e2"),
}


# -- rows ---------------------------------------------------------------------------

@dataclass(frozen=True)
class JobFacts:
    """What the pane reads about one job besides its cells (a row's ``value``)."""

    number: int
    job_id: str
    status: str
    label: str = ""
    after: str = ""
    partial: bool = False
    error: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    attempts: int = 0
    log_path: str = ""
    timeout: float | None = None
    lost: int = 0  # runs lost with their runner, then run again


def status_word(status: str, partial: bool = False) -> str:
    """The word an operator reads for a status; a partial success never reads as success."""
    if status == "success":
        return "partial" if partial else "succeeded"
    return "not run" if status == "not_run" else status


#: Sorting by Status puts what needs the operator first: what runs, then what went wrong
#: (failed, partial, skipped), then what did not run, what waits, and what succeeded.
STATUS_ORDER = {"running": 0, "failed": 1, "partial": 2, "skipped": 3, "not run": 4,
                "pending": 5, "succeeded": 6}


def status_tip(facts: JobFacts) -> str:
    """Why a job is in its state: its error, its exit code, its attempts, its timeout."""
    parts = []
    if facts.error:
        parts.append(facts.error)
    if facts.partial:
        parts.append("It exited 0, but its own ledger records failed items: check its log.")
    if facts.exit_code is not None and facts.status in ("failed", "success"):
        parts.append(f"exit code {facts.exit_code}")
    if facts.attempts > 1:
        parts.append(f"{facts.attempts} attempts")
    if facts.lost:
        parts.append(f"ran again from its start after {facts.lost} run(s) lost with their "
                     "runner (outcome unknown)")
    if facts.timeout:
        parts.append(f"timeout {facts.timeout:g} s")
    return "\n".join(parts)


def _epoch(text: Any) -> float | None:
    """ISO-8601 (what the queue file stores) as epoch seconds, or None."""
    moment = parse_iso(text)
    return None if moment is None else moment.timestamp()


def time_text(facts: JobFacts, now: float) -> str:
    """How long the job took, or how long it has been running (ticks with ``now``)."""
    if facts.started_at is None:
        return "—"
    if facts.finished_at is not None:
        return duration(facts.finished_at - facts.started_at)
    if facts.status == "running":
        return duration(now - facts.started_at)
    return "—"


def job_row(number: int, job: Job) -> Row:
    """The table row of one job: cells, tooltips, look and sort keys, all computed here."""
    facts = JobFacts(
        number=number, job_id=str(job.id), status=str(job.status),
        label=str(job.label or ""), after=", ".join(job.depends_on),
        partial=job.is_partial and job.status == "success", error=str(job.error or ""),
        started_at=_epoch(job.started), finished_at=_epoch(job.finished),
        exit_code=job.exit_code, attempts=int(job.attempts or 0),
        log_path=str(job.log_path or ""), timeout=job.timeout, lost=len(job.lost_runs))
    word = status_word(facts.status, facts.partial)
    took = (facts.finished_at - facts.started_at
            if facts.finished_at is not None and facts.started_at is not None else None)
    return Row(
        key=facts.job_id,
        cells=(str(number), facts.job_id, str(job.module), facts.label, facts.after, word, "",
               os.path.basename(facts.log_path) if facts.log_path else ""),
        tips=("", "", "", facts.label, "", status_tip(facts), "", facts.log_path),
        look=word,
        sort=(number, None, None, None, None, STATUS_ORDER.get(word, len(STATUS_ORDER)),
              took if took is not None else facts.started_at, None),
        value=facts)


def rows(jobs: Sequence[Job], old: Sequence[Row] = (), touched: set[str] | None = None,
         stop=None) -> tuple[Row, ...] | None:
    """The rows of ``jobs`` in run order, reusing ``old`` rows that did not change.

    With the ids ``touched`` since ``old`` was built (same jobs, same order),
    only the touched jobs get new rows.  Otherwise every row is built and any
    equal to the old row of its job is replaced by that old object.  Either
    way the rows of unchanged jobs are the very objects shown already, so
    the table's diff is an identity check for all but the changed few.
    ``stop`` is asked between jobs; None when it said stop.
    """
    if touched is not None and len(old) == len(jobs):
        made = list(old)
        positions = {row.key: i for i, row in enumerate(old)}
        for job_id in touched:
            i = positions.get(job_id)
            if i is not None and jobs[i].id == job_id:
                made[i] = job_row(i + 1, jobs[i])
        return tuple(made)
    before = {row.key: row for row in old}
    made = []
    for number, job in enumerate(jobs, start=1):
        if stop is not None and number % 256 == 0 and stop():
            return None
        row = job_row(number, job)
        same = before.get(row.key)
        made.append(same if same is not None and same == row else row)
    return tuple(made)


# -- progress -----------------------------------------------------------------------

#: the order the caption counts statuses in
_CAPTION_ORDER = ("running", "succeeded", "partial", "failed", "skipped", "not run", "pending")
#: the ended statuses, in the order the bar shows them
_ENDED_WORDS = ("succeeded", "partial", "failed", "skipped")
#: the bar's fill per ended status: green only for what succeeded
BAR_COLOURS = {"succeeded": "#8cc59a", "partial": "#e3c163", "failed": "#e08585",
               "skipped": "#b79ad8"}


@dataclass(frozen=True)
class Progress:
    """``done`` of ``total`` jobs finished; ``counts`` jobs per status word.

    Worked out by the watch for each new set of rows, so the window does not
    count 2000 rows on every poll.
    """

    done: int = 0
    total: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def caption(self) -> str:
        return "  ·  ".join(f"{self.counts[w]} {w}" for w in _CAPTION_ORDER if self.counts.get(w))

    @property
    def summary(self) -> str:
        order = _ENDED_WORDS + ("running", "not run", "pending")
        words = [w for w in order if self.counts.get(w)]
        words += [w for w in self.counts if w not in order and self.counts[w]]
        return ", ".join(f"{self.counts[w]} {w}" for w in words)

    @property
    def running(self) -> bool:
        return bool(self.counts.get("running"))

    @property
    def bar_text(self) -> str:
        """The bar's words: how many jobs ended, and how — a failure never reads as done well.

        "7 / 7 ended: 5 succeeded, 1 failed, 1 skipped"; "7 / 7 ended: all succeeded".
        """
        head = f"{self.done} / {self.total} ended"
        ended = [(w, self.counts.get(w, 0)) for w in _ENDED_WORDS if self.counts.get(w)]
        if not ended:
            return head
        if len(ended) == 1 and ended[0][0] == "succeeded":
            return (f"{head}: all succeeded" if self.done == self.total
                    else f"{head}: {self.done} succeeded")
        return f"{head}: " + ", ".join(f"{n} {w}" for w, n in ended)

    @property
    def bar_segments(self) -> tuple[tuple[str, int, str], ...]:
        """``(status word, jobs, colour)`` for each part of the bar, left to right."""
        return tuple((w, self.counts[w], BAR_COLOURS[w]) for w in _ENDED_WORDS
                     if self.counts.get(w))

    @property
    def bar_look(self) -> str:
        """``"failed"`` when a job failed, ``"warning"`` when one was skipped or is partial,
        ``"ok"`` when every job that ended succeeded (``""`` before any ended)."""
        if self.counts.get("failed"):
            return "failed"
        if self.counts.get("skipped") or self.counts.get("partial"):
            return "warning"
        return "ok" if self.done else ""

    @property
    def statuses(self) -> frozenset[str]:
        """The statuses (as the queue file writes them) of the jobs counted."""
        return frozenset(_STATUS_OF_WORD.get(w, w) for w, n in self.counts.items() if n)


#: status word -> the status the queue file writes
_STATUS_OF_WORD = {"succeeded": "success", "partial": "success", "not run": "not_run"}


def progress(shown: Sequence[Row]) -> Progress:
    """How far the queue is, from its rows."""
    tally = Counter(row.look for row in shown)
    done = sum(n for word, n in tally.items() if word in ("succeeded", "partial", "failed",
                                                            "skipped"))
    return Progress(done, len(shown), dict(tally))


# -- how a run ended ------------------------------------------------------------------

@dataclass(frozen=True)
class Ending:
    """What the pane says when its queue's runner ends: ``level`` of the message line,
    the ``message`` itself and the desktop ``notice``."""

    level: str
    message: str
    notice: str


def ending(runner: Mapping[str, Any], counted: Progress, name: str,
           jobs: Sequence[Job] = ()) -> Ending:
    """The line the pane shows when the runner it watched is gone.

    The reason comes from what the ending runner itself wrote in
    ``runner.json`` — never from the queue file's ``stopped_reason``, which an
    earlier run (an abort before a Resume) may have left there.  A runner
    that crashed or was killed wrote nothing: it ends with a sentence saying
    so, and that Resume adopts the job it left running (or records how that
    job ended), instead of any old reason.  That job is the one the queue file
    shows ``running`` (``jobs``: the queue's, as last read), which is current at every
    transition; ``runner.json``'s ``current_job`` is written at most a few
    times a second and may still name a job before it.
    """
    state = str(runner.get("state") or "ended")
    summary = counted.summary or "no jobs"
    notice = f"Queue {name} {state}: {summary}"
    if state == "crashed":
        running = [j.id for j in jobs if j.status == STATUS_RUNNING]
        job = ", ".join(running) if running else runner.get("current_job")
        error = runner.get("error")
        where = f"while {job} was running" if job else "mid-run"
        why = f" ({error})" if error else ""
        left = (f"{job} may still be running: Resume adopts it (or records how it ended) "
                if job else "Resume adopts a job left running (or records how it ended) ")
        return Ending("warning", f"The queue's runner crashed or was killed {where}{why}: "
                                 f"{summary}. {left}and runs only what has not run; finished "
                                 "jobs are not run again.",
                      f"Queue {name} crashed: {summary}")
    why = str(runner.get("stopped_reason") or "")
    if not why and state == "stopped":
        why = str(runner.get("error") or "")
    level = "info" if state == "finished" and not counted.counts.get("failed") else "warning"
    return Ending(level, f"The queue {state}{f' ({why})' if why else ''}: {summary}. Hover a "
                         "status to read why a job failed or was skipped.", notice)


def changed_on_disk(file_name: str, news: Any) -> str:
    """The warning shown when the file changed under unsaved edits: what Save will do.

    ``news`` is a :class:`spacrq.queue.merge.DiskNews`.
    """
    bits = []
    if news.added:
        bits.append(f"{_few(news.added)} added there")
    if news.changed:
        bits.append(f"{_few(news.changed)} changed there")
    if news.removed:
        bits.append(f"{_few(news.removed)} removed there")
    if news.settings:
        bits.append(f"{', '.join(news.settings)} changed there")
    said = f" ({'; '.join(bits)})" if bits else ""
    return (f"{file_name} changed on disk{said}: Save keeps those changes and adds yours; "
            "Open reloads it and drops yours.")


def _few(ids: Sequence[str], most: int = 3) -> str:
    return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")


# -- buttons --------------------------------------------------------------------------

@dataclass(frozen=True)
class PaneState:
    """Everything the buttons depend on.

    ``progress`` counts the shown rows' statuses; ``selected`` are the
    selected row indices (in run order) and ``picked`` what those rows say;
    ``on_disk`` the file exists; ``checking`` an Add is being checked;
    ``sorted`` the table is sorted by another column than ``#``.
    """

    runner_alive: bool = False
    runner_pid: Any = None
    stop_asked: bool = False
    on_disk: bool = False
    dirty: bool = False
    progress: Progress = Progress()
    selected: tuple[int, ...] = ()
    picked: tuple[JobFacts, ...] = ()
    checking: bool = False
    sorted: bool = False


@dataclass(frozen=True)
class Controls:
    """Each control of the Queue pane.  Editing is off while a runner owns the file,
    except adding a job, which goes into the file under its lock as ``queue add`` does.

    ``editor`` is the job editor's fields, ``add`` its Add button (off while
    the job typed last is being checked).
    """

    editor: Button
    add: Button
    duplicate: Button
    edit: Button
    remove: Button
    move_up: Button
    move_down: Button
    validate: Button
    open: Button
    new: Button
    save: Button
    save_as: Button
    run: Button
    stop: Button
    abort: Button
    resume: Button
    retry_failed: Button
    edit_options: Button


def controls(state: PaneState) -> Controls:
    """The pane's controls as a function of its state."""
    alive = state.runner_alive
    owned = (f"The queue runs (runner process {state.runner_pid or '?'} owns the file): "
             "Stop it first.")

    def edit(on: bool, tip: str, off: str = "") -> Button:
        if alive:
            return Button(False, owned)
        return Button(on, tip if on or not off else off)

    total = state.progress.total
    selected = [i for i in state.selected if 0 <= i < total]
    statuses = state.progress.statuses
    runnable = "pending" in statuses
    resumable = bool(statuses & {"not_run", "running"}) or (
        runnable and bool(statuses & set(FINISHED_STATUSES)))
    select_first = "Select a job first."
    if state.sorted:
        unmoved = ("Move changes the run order, which the sorted view does not show: press "
                   "Run order first.")
    else:
        unmoved = select_first if not selected else ""
    if alive:  # added through the file, under its lock; a runner asked to stop ends soon and
        # will not take the job in
        stopping = state.stop_asked
        editor = Button(True, "Line up one more job: " + (
            "a stop was asked, so it runs when the queue is resumed." if stopping else
            "the runner takes it in and runs it after the jobs already queued."))
        add = Button(not state.checking, "Adding the job…" if state.checking else (
            "Check this job and add it to the queue's file; a stop was asked, so it runs when "
            "the queue is resumed (Enter)." if stopping else
            "Check this job and add it to the running queue's file; its runner runs it after "
            "the jobs already queued (Enter)."))
    else:
        editor = edit(True, "Line up one more job: Enter in any field adds it.")
        add = edit(not state.checking, "Check this job and add it to the end of the queue "
                                       "(Enter).", "Checking the job…")
    return Controls(
        editor=editor,
        add=add,
        duplicate=edit(bool(selected), "Add a never-run copy of the selected job(s).",
                       select_first),
        remove=edit(bool(selected), "Remove the selected job(s); jobs after them stop "
                                    "depending on them.", select_first),
        move_up=edit(not state.sorted and bool(selected) and min(selected) > 0,
                     "Run the selected job(s) earlier.", unmoved or "Already at the top."),
        move_down=edit(not state.sorted and bool(selected) and max(selected) < total - 1,
                       "Run the selected job(s) later.", unmoved or "Already at the bottom."),
        edit=_edit_button(state),
        validate=Button(bool(total), "Check every job now, without running anything; "
                        "problems are listed below." if total else "Add a job first."),
        open=Button(True, "Open a queue file; a running queue shows live."),
        new=edit(True, "Start an empty queue (saved when you press Save)."),
        save=edit(state.dirty or not state.on_disk, "Write your changes onto the queue file as "
                  "it is now: jobs others added meanwhile are kept.",
                  "Nothing to save: the file holds these jobs."),
        save_as=edit(True, "Write the queue under another name."),
        run=edit(runnable, "Check the queue, save it and start it in its own process; closing "
                           "the window does not stop it.", "No job is waiting to run."),
        stop=Button(alive and not state.stop_asked,
                    "Let the running job finish, then start no other." if alive and not
                    state.stop_asked else "Stop asked already." if alive else
                    "The queue is not running."),
        abort=Button(alive, "Stop the running job now (it can be run again)." if alive
                     else "The queue is not running."),
        resume=edit(resumable, "Start the runner again on this file: jobs not yet run, and a "
                               "job cut off mid-run, run now.", "Nothing was cut off to resume."),
        retry_failed=edit(bool(statuses & {"failed", "skipped"}),
                          "Resume, also running failed jobs again and the jobs skipped because "
                          "of them.", "No job failed."),
        edit_options=edit(True, "What happens when a job fails."),
    )


def _edit_button(state: PaneState) -> Button:
    """Edit… changes one waiting job in its file, even while the queue runs."""
    if len(state.picked) != 1:
        return Button(False, "Select one job to edit it.")
    facts = state.picked[0]
    refusal = edit_refusal_of(Job(module="", id=facts.job_id, status=facts.status))
    if refusal:
        return Button(False, refusal[0].upper() + refusal[1:] + ".")
    if state.dirty:
        return Button(False, "Save the queue first: Edit… changes the file, and a later Save "
                             "of this unsaved queue would undo it.")
    return Button(True, f"Change {facts.job_id}'s settings, overrides, after, timeout or label "
                        "in the file (it has not run yet).")


def edit_refusal(runner: Mapping[str, Any] | None, action: str = "edit the queue") -> str | None:
    """The sentence that refuses an edit while a runner owns the file, else None."""
    if runner and runner.get("alive"):
        pid = runner.get("pid", "?")
        return (f"Cannot {action} while the queue runs (runner process {pid} owns the file); "
                f"Stop it first, then edit.")
    return None


# -- reading the job editor's fields ----------------------------------------------

_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_timeout(text: str, what: str = "timeout") -> tuple[float | None, str | None]:
    """``"90"``, ``"90s"``, ``"30m"``, ``"2h"``, ``"1h30m"`` or empty -> ``(seconds or None, error)``
    (``what``: the field named in the error, a timeout or a retry delay)."""
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
        return None, (f"the {what} {text!r} is not a duration; write it like 90s, 30m, 2h or "
                      "1h30m, or leave it empty for none")
    if total <= 0:
        return None, None
    return total, None


def parse_overrides(text: str) -> tuple[list[str], str | None]:
    """``key=value`` words (quotes allowed for spaces) -> ``(overrides, error)``."""
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
