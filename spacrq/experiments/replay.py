"""What a run is doing, replayed by spacrq from the files the run wrote.

Deliberately not the module library's own ``Journal.status()``: the run was
written by a module whose plesty-lib has nothing to do with whatever this
bench has installed (spacrq may not even be able to import it), and the same
run must read the same on every bench.  The journal is an append-only list of
a dozen event names; folding it here is cheaper than the coupling.

Two things are better than PLESTY's reading:

* **Incremental.**  :class:`RunWatch` keeps a :class:`~spacrq.runfiles.JsonlTail`
  on ``journal.jsonl`` and ``records.jsonl`` and folds only the lines written
  since the last refresh, so a run ten hours and 100 000 steps in costs a
  ``stat`` and a few hundred bytes per refresh.  A torn last line is left for
  the next refresh.
* **Honest about the process.**  A journal whose last word is "running" says
  nothing about whether anybody is still running it.  spacrq records the
  process it started (pid and start time, ``spacrq-process.json``); when that
  process is gone the run reads ``interrupted`` — and is resumable — instead
  of "running" forever.

States: ``not_started``, ``created``, ``running``, ``paused``, ``stopping``
(a stop was asked and not yet honoured), ``canceled``, ``aborted``,
``interrupted``, ``completed``, ``failed`` (a step kept failing).
"""
from __future__ import annotations

import os
import time
from collections import deque
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping

from spacrq.experiments.control import asked
from spacrq.experiments.errors import (ABORT, CANCEL, CREATED_FILE, JOURNAL_FILE, PLAN_FILE,
                                       PROCESS_FILE, PROGRESS_FILE, RECORDS_FILE,
                                       RESUMABLE_STATES)
from spacrq.procs import ProcessRef
from spacrq.runfiles import JsonlTail, RunFileError, control_problem, read_json, read_progress

__all__ = ["JournalReplay", "RecordsTail", "RunWatch", "status_of", "progress_of", "steps_of",
           "records_of", "reports_in", "resumable", "is_resumable", "process_of", "record_row"]

#: Events whose time the fold needs (the rest are not parsed for it).
_TIMED = frozenset({"run_started", "step_started", "step_completed", "run_completed",
                    "run_canceled", "run_aborted"})
#: How many recent step durations the ETA is averaged over.
_ETA_WINDOW = 50


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
        self.failed = 0
        self.reports: list[str] = []
        self.started: float | None = None
        self.started_ts: str | None = None
        self.ended: float | None = None
        self.ended_ts: str | None = None
        self.provenance: dict[str, Any] = {}
        self.last_event: dict[str, Any] | None = None
        self.terminal: dict[str, Any] | None = None
        self.paused = False
        self.total_steps: int | None = None
        self.starts = 0
        self.in_flight: dict[str, Any] | None = None
        self.last_failure: dict[str, Any] | None = None
        self.stretch_started: float | None = None
        self._durations: deque[float] = deque(maxlen=_ETA_WINDOW)

    def feed(self, events: Iterable[Mapping[str, Any]]) -> None:
        for event in events:
            if type(event) is dict or isinstance(event, Mapping):  # the common case without the ABC check
                self._fold(event)

    def _fold(self, event: Mapping[str, Any]) -> None:
        name = event.get("event")
        self.events += 1
        self.last_event = event if isinstance(event, dict) else dict(event)
        at = _epoch(event.get("ts")) if name in _TIMED else None
        if name == "run_started":
            self.starts += 1
            if self.started is None:
                self.started, self.started_ts = at, event.get("ts")
            self.stretch_started = at
            self.terminal, self.ended, self.ended_ts = None, None, None
            self.paused = False
            self.in_flight = None
            if isinstance(event.get("provenance"), Mapping):
                self.provenance = dict(event["provenance"])
            if isinstance(event.get("total_steps"), int):
                self.total_steps = event["total_steps"]
        elif name == "step_started":
            self.in_flight = {"step_id": event.get("step_id"), "index": event.get("index"),
                              "op": event.get("op"), "started": at,
                              "attempt": event.get("attempt")}
        elif name == "step_completed":
            step_id = event.get("step_id")
            if step_id is not None:
                self.completed_ids.add(str(step_id))
            flight = self.in_flight
            if flight and flight.get("step_id") == step_id and flight.get("started") and at:
                self._durations.append(max(0.0, at - flight["started"]))
            self.in_flight = None
        elif name == "step_failed":
            self.failed += 1
            self.last_failure = {"step_id": event.get("step_id"), "error": event.get("error"),
                                 "attempt": event.get("attempt")}
        elif name == "step_aborted":
            self.in_flight = None
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
            self.in_flight = None

    @property
    def completed(self) -> int:
        return len(self.completed_ids)

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
            "in_flight": dict(self.in_flight) if self.in_flight else None,
            "total": self.total_steps,
            "starts": self.starts,
            "reason": terminal.get("reason") or "",
            "error": terminal.get("error") or "",
            "stopped_by": terminal.get("by") or "",
            "last_failure": self.last_failure,
        }


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

    def refresh(self) -> tuple[list[dict[str, Any]], bool]:
        """``(new records, restarted)``; restarted means the file was replaced."""
        new = [r for r in self.tail.read() if isinstance(r, dict)]
        restarted = self.tail.restarted
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
        self._plan_stamp: tuple[int, int] | None = None

    @property
    def bytes_read(self) -> int:
        """Bytes of journal and records read so far (the bench shows only new ones are)."""
        return self.journal_tail.offset + self.records.tail.offset

    def _plan_length(self) -> int | None:
        path = self.run_dir / PLAN_FILE
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (st.st_ino, st.st_mtime_ns)
        if stamp != self._plan_stamp:
            self._plan_stamp = stamp
            try:
                plan = read_json(path, default=None)
                steps = plan.get("steps") if isinstance(plan, dict) else None
                self._plan_total = len(steps) if isinstance(steps, list) else None
            except RunFileError:
                self._plan_total = None
        return self._plan_total

    def _read_journal(self) -> None:
        events = self.journal_tail.read()
        if self.journal_tail.restarted:
            self.replay = JournalReplay()
        self.replay.feed(events)

    def status(self) -> dict[str, Any]:
        """The run's status, the journal folded with what the process and control file say."""
        self._read_journal()
        status = self.replay.status()
        status["run_id"] = self.run_dir.name
        status["total"] = status.get("total") or self._plan_length()
        status["bad_lines"] = self.journal_tail.bad_lines
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
                status["problem"] = ("the module exited before its run started; read its log "
                                     f"{status['log']} for why")
        elif state in ("running", "paused"):
            if ref is not None and not alive:
                state = "interrupted"
            elif status["asked"].get("stop") in (CANCEL, ABORT):
                state = "stopping"
        elif ref is not None and alive and launched and (status["ended_at"] or 0) < launched:
            state = "running"  # resumed: the new process has not journaled run_started yet
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
        step = None
        if live and flight:  # progress.json speaks only for the step in flight
            step = read_progress(self.run_dir / PROGRESS_FILE)
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
        }


def status_of(run_dir: str | os.PathLike) -> dict[str, Any]:
    """What the run's journal (and its process) say about it: ``state``, ``completed``,
    ``failed``, ``reports``, ``started``, ``ended``, ``provenance``, ``last_event`` and more."""
    return RunWatch(run_dir).status()


def progress_of(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """What the step in flight last said about itself (``progress.json``); ``None`` if nothing."""
    return read_progress(Path(run_dir) / PROGRESS_FILE)


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
    from spacrq.experiments.runs import runs_of
    for run_dir in runs_of(run_root):
        if status_of(run_dir)["resumable"]:
            return run_dir.name
    return None
