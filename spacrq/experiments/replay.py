"""What a run is doing, replayed by spacrq from the files the run wrote.

Deliberately not the module library's own ``Journal.status()``: the run was
written by a module whose plesty-lib has nothing to do with whatever this
bench has installed (spacrq may not even be able to import it), and the same
run must read the same on every bench.  The journal is an append-only list of
a dozen event names; folding it here is cheaper than the coupling.

Two things make this reading cheap and safe:

* **Incremental.**  :class:`RunWatch` keeps a :class:`~spacrq.runfiles.JsonlTail`
  on ``journal.jsonl`` and ``records.jsonl`` and folds only the lines written
  since the last refresh, so a run ten hours and 100 000 steps in costs a
  ``stat`` and a few hundred bytes per refresh.  A torn last line is left for
  the next refresh.
* **Honest about the process.**  A journal whose last word is "running" says
  nothing about whether anybody is still running it.  spacrq records the
  process it started (pid and start time, ``spacrq-process.json``); when that
  process is gone the run reads ``interrupted`` — and is resumable — instead
  of "running" forever.  A run started elsewhere has its owner looked for
  (:mod:`spacrq.experiments.owner`); when nobody can tell, it reads
  ``not_responding`` with the age of its journal's last line.
* **Checked before folded.**  A journal line whose fields have the wrong
  types (a step named by a list, a count that is text) is skipped and
  counted, and only steps of the plan count as done.

States: ``not_started``, ``created``, ``running``, ``paused``, ``stopping``
(a stop was asked and not yet honoured), ``canceled``, ``aborted``,
``interrupted``, ``not_responding`` (no owner can be found or ruled out),
``completed``, ``failed`` (a step kept failing).
"""
from __future__ import annotations

import os
import time
from collections import deque
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping

from spacrq.experiments.checking import start_refusal
from spacrq.experiments.control import asked
from spacrq.experiments.errors import (ABORT, CANCEL, CREATED_FILE, JOURNAL_FILE, PLAN_FILE,
                                       PROCESS_FILE, PROGRESS_FILE, RECORDS_FILE,
                                       RESUMABLE_STATES, TERMINAL_EVENTS)
from spacrq.experiments.owner import Owner, owner_of
from spacrq.experiments.runs import runs_of
from spacrq.procs import ProcessRef
from spacrq.runfiles import (JsonlTail, RunFileError, control_problem, file_stamp, read_json,
                             read_json_checked)

__all__ = ["JournalReplay", "RecordsTail", "RunWatch", "status_of", "progress_of", "steps_of",
           "records_of", "reports_in", "resumable", "is_resumable", "process_of", "record_row",
           "progress_problem"]

#: Events whose time the fold needs at once (a step's times are read when asked).
_TIMED = frozenset({"run_started", "run_completed", "run_canceled", "run_aborted"})
#: Largest progress snapshot read: a step's few numbers, never megabytes.
_MAX_PROGRESS_BYTES = 1024 * 1024
#: How many recent step durations the ETA is averaged over.
_ETA_WINDOW = 50


#: Events whose fields are checked by type before they are folded.
_CHECKED = frozenset({"run_started", "step_started", "step_completed", "step_failed",
                      "step_aborted", "report", "run_completed", "run_canceled", "run_aborted"})
_STEP_EVENTS = frozenset({"step_started", "step_completed", "step_failed", "step_aborted"})


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _malformed(event: Mapping[str, Any]) -> str | None:
    """Why a journal event cannot be folded (a field of the wrong type), or None.

    The journal is the run's own record, but anything may have written a
    line of it: a line that names a step by a number, a list or nothing is
    not a step done.
    """
    name = event["event"]
    ts = event.get("ts")
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (str, int, float))):
        return "has a 'ts' that is not a time"
    if name in _STEP_EVENTS:
        step_id = event.get("step_id")
        if not isinstance(step_id, str) or not step_id:
            return "names no step (its 'step_id' is not text)"
        if event.get("index") is not None and not _count(event.get("index")):
            return "has an 'index' that is not a step number"
        if event.get("attempt") is not None and not _count(event.get("attempt")):
            return "has an 'attempt' that is not a count"
    if name == "run_started":
        if event.get("total_steps") is not None and not _count(event.get("total_steps")):
            return "has a 'total_steps' that is not a count"
        if event.get("provenance") is not None and not isinstance(event.get("provenance"), Mapping):
            return "has a 'provenance' that is not an object"
    if name == "report" and not isinstance(event.get("text"), str):
        return "holds no report text"
    if name in TERMINAL_EVENTS and not all(_text_or_none(event.get(k))
                                           for k in ("reason", "error", "by")):
        return "has a 'reason', 'error' or 'by' that is not text"
    return None


def _epoch(ts: Any) -> float | None:
    if isinstance(ts, (int, float)):
        return float(ts)
    if not isinstance(ts, str):
        return None
    try:
        return datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return None


class JournalReplay:
    """A run's journal folded event by event into its status.

    :meth:`feed` takes events in journal order; :meth:`status` reads the
    fold.  The fold is what the journal alone says; :class:`RunWatch` adds
    what the process and the control file say.
    """

    def __init__(self) -> None:
        self.events = 0
        self.completed_ids: set[str] = set()
        self.started_ids: set[str] = set()
        #: the plan's step ids when known (:meth:`know_plan` sets them): only those count
        self.known_ids: frozenset[str] | None = None
        self._counted = 0  # completed ids that count, kept as lines are folded
        self.failed = 0
        self.reports: list[str] = []
        self.started: float | None = None
        self.started_ts: str | None = None
        self.ended: float | None = None
        self.ended_ts: str | None = None
        self.provenance: dict[str, Any] = {}
        self.last_event: dict[str, Any] | None = None
        self.last_start: dict[str, Any] | None = None
        self.last_start_at: float | None = None
        self.terminal: dict[str, Any] | None = None
        self.paused = False
        self.total_steps: int | None = None
        self.starts = 0
        #: the ``step_started`` event of the step in flight (its time is read when asked)
        self._flight: Mapping[str, Any] | None = None
        self.last_failure: dict[str, Any] | None = None
        self.stretch_started: float | None = None
        #: events of the right name whose fields have the wrong types: skipped, not folded
        self.bad_events = 0
        self.last_bad: str | None = None
        #: seconds the last steps took; their (started, completed) times wait in
        #: ``_untimed`` as journaled until an ETA is asked, so a history of thousands
        #: of steps has only its last few read as times
        self._durations: deque[float] = deque(maxlen=_ETA_WINDOW)
        self._untimed: list[tuple[Any, Any]] = []

    def feed(self, events: Iterable[Mapping[str, Any]]) -> None:
        for event in events:
            if type(event) is dict or isinstance(event, Mapping):  # the common case without the ABC check
                self._fold(event)

    def _refuse(self, event: Mapping[str, Any], why: str) -> None:
        self.bad_events += 1
        self.last_bad = f"a {str(event.get('event'))[:40]!s} line of the journal {why}; skipped"

    def _fold(self, event: Mapping[str, Any]) -> None:
        name = event.get("event")
        if name in _STEP_EVENTS:  # most lines: checked inline, the full check only when odd
            sid, idx, att = event.get("step_id"), event.get("index"), event.get("attempt")
            plain = (type(sid) is str and sid != "" and type(event.get("ts")) is str
                     and (idx is None or (type(idx) is int and idx >= 0))
                     and (att is None or (type(att) is int and att >= 0)))
            why = None if plain else _malformed(event)
        else:
            why = _malformed(event) if name in _CHECKED else None
        if why is not None:
            self._refuse(event, why)
            return
        self.events += 1
        self.last_event = event if isinstance(event, dict) else dict(event)
        at = _epoch(event.get("ts")) if name in _TIMED else None
        if name == "run_started":
            self.starts += 1
            if self.started is None:
                self.started, self.started_ts = at, event.get("ts")
            self.stretch_started = at
            self.last_start, self.last_start_at = self.last_event, at
            self.terminal, self.ended, self.ended_ts = None, None, None
            self.paused = False
            self._flight = None
            if isinstance(event.get("provenance"), Mapping):
                self.provenance = dict(event["provenance"])
            if _count(event.get("total_steps")):
                self.total_steps = event["total_steps"]
        elif name == "step_started":
            step_id = event["step_id"]
            if step_id not in self.started_ids:
                self.started_ids.add(step_id)
                if self.known_ids is None and step_id in self.completed_ids:
                    self._counted += 1
            self._flight = event
        elif name == "step_completed":
            step_id = event["step_id"]
            if step_id not in self.completed_ids:
                self.completed_ids.add(step_id)
                known = self.known_ids if self.known_ids is not None else self.started_ids
                if step_id in known:
                    self._counted += 1
            flight = self._flight
            if flight is not None and flight.get("step_id") == step_id:
                self._untimed.append((flight.get("ts"), event.get("ts")))
                if len(self._untimed) > 2 * _ETA_WINDOW:
                    del self._untimed[:-_ETA_WINDOW]
            self._flight = None
        elif name == "step_failed":
            self.failed += 1
            self.last_failure = {"step_id": event.get("step_id"), "error": event.get("error"),
                                 "attempt": event.get("attempt")}
        elif name == "step_aborted":
            self._flight = None
        elif name == "run_paused":
            self.paused = True
        elif name == "run_resumed":
            self.paused = False
        elif name == "report":
            self.reports.append(str(event.get("text", "")))
        elif name in ("run_completed", "run_canceled", "run_aborted"):
            self.terminal = dict(event)
            self.ended, self.ended_ts = at, event.get("ts")
            self.paused = False
            self._flight = None

    @property
    def in_flight(self) -> dict[str, Any] | None:
        """The step in flight: ``step_id``, ``index``, ``op``, ``started`` (epoch), ``attempt``."""
        event = self._flight
        if event is None:
            return None
        return {"step_id": event.get("step_id"), "index": event.get("index"),
                "op": event.get("op"), "started": _epoch(event.get("ts")),
                "attempt": event.get("attempt")}

    @property
    def completed(self) -> int:
        """Steps completed: distinct ids of a started step (or of the plan, once known).

        A line naming a step never started (or, with :meth:`know_plan`, one the
        plan does not hold) is not a step done, so "16 of 15" cannot be read.
        """
        return self._counted

    def know_plan(self, ids: frozenset[str] | None) -> None:
        """Count only the steps of this plan from now on (``None``: the steps started)."""
        if ids is self.known_ids:
            return  # the same plan as before: the count stands (no pass over the steps)
        self.known_ids = ids
        known = ids if ids is not None else self.started_ids
        self._counted = len(self.completed_ids & known)

    def journal_state(self) -> str:
        """The state the journal alone says: ``not_started`` before any event."""
        if not self.events:
            return "not_started"
        if self.terminal is not None:
            name = self.terminal.get("event")
            if name == "run_completed":
                return "completed"
            if name == "run_canceled":
                return "canceled"
            if self.terminal.get("error") and not self.terminal.get("by"):
                return "failed"
            return "aborted"
        return "paused" if self.paused else "running"

    def mean_step_seconds(self) -> float | None:
        """The mean time of the last steps (``None`` before a step has been timed)."""
        if self._untimed:
            for started, completed in self._untimed[-_ETA_WINDOW:]:
                a, b = _epoch(started), _epoch(completed)
                if a and b:
                    self._durations.append(max(0.0, b - a))
            self._untimed = []
        return sum(self._durations) / len(self._durations) if self._durations else None

    def status(self) -> dict[str, Any]:
        terminal = self.terminal or {}
        return {
            "state": self.journal_state(),
            "completed": self.completed,
            "failed": self.failed,
            "reports": list(self.reports),
            "started": self.started_ts,
            "ended": self.ended_ts,
            "started_at": self.started,
            "ended_at": self.ended,
            "provenance": dict(self.provenance),
            "last_event": self.last_event,
            "in_flight": self.in_flight,
            "total": self.total_steps,
            "starts": self.starts,
            "reason": terminal.get("reason") or "",
            "error": terminal.get("error") or "",
            "stopped_by": terminal.get("by") or "",
            "last_failure": self.last_failure,
            "bad_events": self.bad_events,
        }


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "at an unknown time"
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min ago"


def record_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record as one flat row: ``index``, ``step_id`` and the fields of its value.

    plesty-lib writes ``{"index", "provenance": {"step_id", ...}, "type", "value"}``;
    a blob-backed record (an array) keeps its ``blob``, ``shape`` and ``dtype``.
    """
    row: dict[str, Any] = {"index": record.get("index")}
    prov = record.get("provenance")
    if isinstance(prov, Mapping):
        row["step_id"] = prov.get("step_id")
    value = record.get("value")
    if isinstance(value, Mapping):
        for key, item in value.items():
            row.setdefault(str(key), item)
    elif value is not None:
        row["value"] = value
    for key in ("blob", "shape", "dtype"):
        if key in record:
            row[key] = record[key]
    return row


class RecordsTail:
    """The committed step records of a run, read incrementally (all kept, in write order)."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.tail = JsonlTail(Path(run_dir) / RECORDS_FILE)
        self.records: list[dict[str, Any]] = []
        #: why the last unreadable line was skipped (naming the file), or ""
        self.problem = ""

    def refresh(self) -> tuple[list[dict[str, Any]], bool]:
        """``(new records, restarted)``; restarted means the file was replaced."""
        new = [r for r in self.tail.read() if isinstance(r, dict)]
        restarted = self.tail.restarted
        self.problem = self.tail.last_problem or ""
        if restarted:
            self.records = []
        self.records.extend(new)
        return new, restarted


def process_of(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The process spacrq recorded for the run (pid, started, launched, log), if any."""
    try:
        doc = read_json(Path(run_dir) / PROCESS_FILE, default=None)
    except RunFileError:
        return None
    return doc if isinstance(doc, dict) else None


class RunWatch:
    """Watches one run directory; each :meth:`refresh` reads only what is new.

    The window's poller keeps one per visible run, and the bench measures it.
    """

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.run_dir = Path(run_dir)
        self.journal_tail = JsonlTail(self.run_dir / JOURNAL_FILE)
        self.replay = JournalReplay()
        self.records = RecordsTail(self.run_dir)
        self._plan_total: int | None = None
        self._plan_ids: frozenset[str] | None = None
        self._plan_stamp: tuple[int, int, int] | None = None
        self._refusal: tuple[Any, str] = (None, "")

    def _refusal_in(self, log: str | None) -> str:
        """What the module said before it exited, read again only when its log changed."""
        stamp = (log, file_stamp(Path(log))) if log else None
        if stamp != self._refusal[0]:
            self._refusal = (stamp, start_refusal(log))
        return self._refusal[1]

    @property
    def bytes_read(self) -> int:
        """Bytes of journal and records read so far (the bench shows only new ones are)."""
        return self.journal_tail.offset + self.records.tail.offset

    def _plan_steps(self) -> tuple[int | None, frozenset[str] | None]:
        """The plan's length and step ids (``None`` for both without a readable plan)."""
        path = self.run_dir / PLAN_FILE
        stamp = file_stamp(path)
        if stamp is None:
            return None, None
        if stamp != self._plan_stamp:
            self._plan_stamp = stamp
            plan, _ = read_json_checked(path, None, expect=dict)
            steps = plan.get("steps") if isinstance(plan, dict) else None
            if isinstance(steps, list):
                self._plan_total = len(steps)
                self._plan_ids = frozenset(s["id"] for s in steps
                                           if isinstance(s, dict) and isinstance(s.get("id"), str))
            else:
                self._plan_total, self._plan_ids = None, None
        return self._plan_total, self._plan_ids

    def _plan_length(self) -> int | None:
        return self._plan_steps()[0]

    def _read_journal(self) -> None:
        events = self.journal_tail.read()
        if self.journal_tail.restarted:
            self.replay = JournalReplay()
        self.replay.feed(events)

    def _journal_age(self) -> float | None:
        try:
            return max(0.0, time.time() - (self.run_dir / JOURNAL_FILE).stat().st_mtime)
        except OSError:
            return None

    def _owner(self, process: Mapping[str, Any] | None) -> tuple[str, Owner | None]:
        """Whether the run's process lives: ``("alive" | "gone" | "unknown", owner)``.

        The live process spacrq recorded settles it.  Once that one is gone,
        the run may have been resumed elsewhere since (plesty's console, a
        terminal), so the other ways are asked before it is called gone.
        """
        ref = ProcessRef.from_dict(process)
        if ref is not None and ref.alive():
            return "alive", None
        found = owner_of(self.run_dir, self.replay.last_start, self.replay.last_start_at)
        if found.verdict == "gone" and ref is not None:
            return "gone", None  # said with the pid and log spacrq recorded
        return found.verdict, found

    def status(self) -> dict[str, Any]:
        """The run's status, the journal folded with what the process and control file say."""
        self._read_journal()
        status = self.replay.status()
        status["run_id"] = self.run_dir.name
        status["total"] = total = status.get("total") or self._plan_length()
        if total is not None and status["completed"] > total:
            # more steps done than the run has: only the plan's own steps count (the plan
            # is read for its ids only then: a 100 000-step plan is megabytes)
            self.replay.know_plan(self._plan_steps()[1])
            status["completed"] = min(self.replay.completed, total)
        status["bad_lines"] = self.journal_tail.bad_lines + self.replay.bad_events
        status["journal_problem"] = self.replay.last_bad or self.journal_tail.last_problem or ""
        status["asked"] = asked(self.run_dir)
        status["control_problem"] = control_problem(self.run_dir) or ""
        process = process_of(self.run_dir)
        ref = ProcessRef.from_dict(process)
        alive = bool(ref and ref.alive())
        status["pid"] = ref.pid if ref else None
        status["alive"] = alive if ref else None
        status["log"] = (process or {}).get("log")
        state = status["state"]
        launched = float((process or {}).get("launched") or 0.0)
        if state == "not_started":
            if (self.run_dir / CREATED_FILE).exists() or (self.run_dir / PLAN_FILE).exists():
                state = "created"
            if ref is not None and alive:
                state = "running"
            elif ref is not None and process and process.get("launched"):
                # it never started: kept (its log says why), and said so wherever it is listed
                said = self._refusal_in(status["log"])
                status["start_failed"] = said
                status["problem"] = ("it never started: the module exited before its run "
                                     "started" + (f", saying: {said}" if said else "")
                                     + f" (its log: {status['log']})")
        elif state in ("running", "paused"):
            verdict, owner = (("alive", None) if alive else self._owner(process))
            if owner is not None:
                status["pid"], status["owner"] = owner.pid, owner.how
                status["alive"] = {"alive": True, "gone": False}.get(verdict)
            if verdict == "gone":
                said = state
                state = "interrupted"
                if owner is not None:
                    status["problem"] = (f"the process running it is gone ({owner.how}); "
                                         "resume it to carry on from its last committed step")
                else:
                    log = f"; read its log {status['log']}" if status.get("log") else ""
                    status["problem"] = (f"its process (pid {ref.pid if ref else '?'}) exited "
                                         f"while its journal says {said}{log}; resume it to "
                                         "carry on from its last committed step")
            elif verdict == "unknown":
                state = "not_responding"
                age = self._journal_age()
                status["silent_s"] = age
                status["problem"] = (f"cannot tell whether its process is still running "
                                     f"({owner.how if owner else 'no process recorded'}); its "
                                     f"journal last changed {_ago(age)}")
            elif status["asked"].get("stop") in (CANCEL, ABORT):
                state = "stopping"
        elif ref is not None and launched and (status["ended_at"] or 0) < launched:
            if alive:
                state = "running"  # resumed: the new process has not journaled run_started yet
            else:
                said = self._refusal_in(status["log"])
                status["start_failed"] = said
                status["problem"] = ("the module exited before its resumed run started"
                                     + (f", saying: {said}" if said else "")
                                     + f" (its log: {status['log']})")
        status["state"] = state
        status["resumable"] = state in RESUMABLE_STATES
        return status

    def progress(self, status: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """How far the run has got and how long it is likely to take.

        The ETA is the mean of the last completed steps times the steps left:
        honest for a sweep of like steps, and ``None`` until a step completed
        rather than a number derived from nothing.
        """
        status = status if status is not None else self.status()
        total = status.get("total") or 0
        completed = int(status.get("completed") or 0)
        step_s = self.replay.mean_step_seconds()
        remaining = max(total - completed, 0)
        live = status.get("state") in ("running", "stopping", "paused")
        started = status.get("started_at")
        last_ts = (status.get("last_event") or {}).get("ts")
        end = time.time() if live else (status.get("ended_at") or _epoch(last_ts))
        flight = status.get("in_flight") or {}
        step, problem = None, None
        if live and flight:  # progress.json speaks only for the step in flight
            step, problem = read_json_checked(self.run_dir / PROGRESS_FILE, None, expect=dict,
                                              max_bytes=_MAX_PROGRESS_BYTES)
            if step is not None and step.get("step_id") not in (None, flight.get("step_id")):
                step = None
        return {
            "state": status.get("state"),
            "completed": completed,
            "failed": int(status.get("failed") or 0),
            "total": total,
            "fraction": (completed / total) if total else 0.0,
            "elapsed_s": (end - started) if (started and end) else None,
            "step_s": step_s,
            "eta_s": (step_s * remaining) if (step_s is not None and remaining and live) else None,
            "in_flight": flight or None,
            "step": step,
            "progress_problem": problem or "",
        }

    def refresh(self) -> dict[str, Any]:
        """One refresh: status, progress and the records written since the last one."""
        status = self.status()
        new, restarted = self.records.refresh()
        return {
            "run_id": self.run_dir.name,
            "run_dir": str(self.run_dir),
            "status": status,
            "progress": self.progress(status),
            "new_records": new,
            "records_restarted": restarted,
            "record_count": len(self.records.records),
            "records_problem": self.records.problem,
        }


def status_of(run_dir: str | os.PathLike) -> dict[str, Any]:
    """What the run's journal (and its process) say about it: ``state``, ``completed``,
    ``failed``, ``reports``, ``started``, ``ended``, ``provenance``, ``last_event`` and more."""
    return RunWatch(run_dir).status()


def progress_of(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """What the step in flight last said about itself (``progress.json``); ``None`` if nothing."""
    doc, _ = read_json_checked(Path(run_dir) / PROGRESS_FILE, None, expect=dict,
                               max_bytes=_MAX_PROGRESS_BYTES)
    return doc


def progress_problem(run_dir: str | os.PathLike) -> str | None:
    """Why ``progress.json`` cannot be read (one sentence naming it), or None."""
    _, problem = read_json_checked(Path(run_dir) / PROGRESS_FILE, None, expect=dict,
                                   max_bytes=_MAX_PROGRESS_BYTES)
    return problem


def steps_of(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The plan's steps, one ``{id, op, params}`` each; ``[]`` when the plan is unreadable."""
    try:
        plan = read_json(Path(run_dir) / PLAN_FILE, default=None)
    except RunFileError:
        return []
    steps = plan.get("steps") if isinstance(plan, dict) else None
    if not isinstance(steps, list):
        return []
    return [{"id": s.get("id"), "op": s.get("op"), "params": s.get("params") or {}}
            for s in steps if isinstance(s, dict)]


def records_of(run_dir: str | os.PathLike, limit: int = 200) -> list[dict[str, Any]]:
    """The newest committed step records, in write order (newest last)."""
    tail = RecordsTail(run_dir)
    tail.refresh()
    return tail.records[-limit:] if limit else list(tail.records)


def reports_in(*documents: Mapping[str, Any]) -> list[str]:
    """Every operator report in the given statuses, in order."""
    out: list[str] = []
    for doc in documents:
        out.extend(str(r) for r in (doc.get("reports") or []))
    return out


def is_resumable(run_dir: str | os.PathLike) -> bool:
    return bool(status_of(run_dir)["resumable"])


def resumable(run_root: str | os.PathLike) -> str | None:
    """The id of the newest run that could be continued: canceled, aborted, failed,
    or left running by a process that is gone.  A completed run is not."""
    for run_dir in runs_of(run_root):
        if status_of(run_dir)["resumable"]:
            return run_dir.name
    return None
