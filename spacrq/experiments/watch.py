"""What the Experiments pane shows, computed off the GUI thread.

The pane's poller calls :meth:`ExperimentsWatch.poll` twice a second.  Every
run of the chosen experiment is watched by the core's
:class:`~spacrq.experiments.replay.RunWatch`, which reads only the journal
lines written since the last look, so twenty live runs cost twenty ``stat``
calls and a few hundred bytes a refresh.  The snapshot it returns is plain
data the pane turns into rows, badges and curves.  Everything the pane
*decides* — which buttons a state allows, what a badge says, when a run will
end — is a plain function here, so a test reaches it without a window.

The operator's requests (start, pause, stop, add a note …) are queued with
:meth:`ExperimentsWatch.submit` and carried out on the poller's thread at the
start of the next poll: the GUI thread never writes a file or starts a
process, and the snapshot that follows already shows the effect.
"""
from __future__ import annotations

import collections
import contextlib
import gc
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from spacrq.experiments.declarations import declarations_path, find_experiment, load_experiments
from spacrq.experiments.errors import NOTES_FILE, RECORDS_FILE, RESUMABLE_STATES, RUN_CONFIG_FILE
from spacrq.experiments.launch import (abort_run, continue_run, pause_run, resume_run, start_run,
                                       stop_run)
from spacrq.experiments.manifest import read_dotenv, read_manifest, run_environment
from spacrq.experiments.notes import add_note, notes_of
from spacrq.experiments.replay import JournalReplay, RunWatch
from spacrq.experiments.runs import (config_text_of, create_run, duplicate_run, kept_log,
                                     new_run_id, reconfigure_run, rename_run, report_of,
                                     run_config_of, run_dir_of, runs_of)
from spacrq.runfiles import JsonlTail, TextTail

__all__ = [
    "BADGES", "LIVE_STATES", "badge", "buttons_for", "eta_seconds", "format_duration",
    "numeric_fields", "field_value", "plot_columns", "record_cells", "record_columns",
    "RecordsBatch", "Pace", "collector_paused", "run_row", "reading_row", "environment_check",
    "ExperimentsWatch", "ManifestAsker",
]

# -- the pane's decisions ------------------------------------------------------

#: state → (badge text, colour).  On a light table: blue is busy, amber waits
#: on the operator, green is done, red and brown are outcomes to look at.
BADGES: dict[str, tuple[str, str]] = {
    "created": ("created", "#7f8c8d"),
    "running": ("running", "#2471a3"),
    "paused": ("paused", "#b7950b"),
    "stopping": ("stopping after this step", "#ca6f1e"),
    "canceled": ("canceled", "#76448a"),
    "aborted": ("aborted", "#c0392b"),
    "interrupted": ("interrupted", "#a04000"),
    "not_responding": ("not responding", "#a04000"),
    "completed": ("completed", "#1e8449"),
    "failed": ("failed", "#922b21"),
    "not_started": ("not started", "#7f8c8d"),
    "reading": ("reading…", "#aab7b8"),
}

#: states in which the run's process is there to be asked something
LIVE_STATES = ("running", "paused", "stopping")


def badge(state: str | None) -> tuple[str, str]:
    """The text and colour of a run's state badge (an unknown state reads as itself)."""
    return BADGES.get(state or "", (state or "unknown", "#7f8c8d"))


def buttons_for(state: str | None, *, pause_asked: bool = False,
                stop_asked: str | None = None) -> dict[str, Any]:
    """Which run buttons are enabled for a run in ``state``, and the toggle's label.

    ``state`` is ``None`` when no run is selected.  Pause and Continue are one
    button: it reads *Continue* as soon as a pause is asked — before the run
    reaches the step boundary where it takes effect — so a second click never
    asks for the same thing twice.  Stop is refused once any stop is asked;
    Abort stays until an abort is asked, because Abort is what an operator
    reaches for when a Stop is not being answered.  Resume restarts a run
    whose process has ended; a paused run's process is still there and
    Continue is its resume.  Rename and Reconfigure
    exist only before the start: after it the configuration is frozen in the
    plan, and Duplicate is the way to run it again differently.
    """
    if state == "reading":  # not read yet: nothing is known to be possible
        state = None
    live = state in LIVE_STATES
    # nobody can tell whether its process is there: asking costs nothing, resuming
    # could start a second writer on the same journal
    asking = live or state == "not_responding"
    pausing = bool(pause_asked) or state == "paused"
    return {
        "run": state == "created",
        "pause": live and not stop_asked,
        "pause_label": "Continue" if pausing else "Pause",
        "stop": asking and not stop_asked,
        "abort": asking and stop_asked != "abort",
        "resume": state in RESUMABLE_STATES and not live,
        "duplicate": state is not None,
        "rename": state == "created",
        "reconfigure": state == "created",
        "note": state is not None,
    }


def eta_seconds(step_seconds: float | None, remaining: int, in_flight_for: float = 0.0) -> float | None:
    """Seconds until the run ends: the mean step time times the steps left,
    less what the step in flight has already spent (never below zero).

    ``None`` when no step has completed yet — an ETA guessed from no data
    reads as a promise.
    """
    if remaining <= 0:
        return 0.0
    if step_seconds is None or not math.isfinite(step_seconds) or step_seconds < 0:
        return None
    spent = max(0.0, min(in_flight_for, step_seconds))
    return max(0.0, step_seconds * remaining - spent)


def format_duration(seconds: float | None) -> str:
    """``"1 h 05 min"``, ``"3 min 20 s"``, ``"12 s"``; empty for unknown."""
    if seconds is None or not math.isfinite(seconds):
        return ""
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


def reading_row(run_id: str) -> dict[str, Any]:
    """The row of a run whose journal has not been read yet (a long history loads over a few polls)."""
    text, colour = badge("reading")
    return {"run_id": run_id, "state": "reading", "badge": text, "colour": colour, "done": 0,
            "total": None, "eta": None, "started": None, "ended": None, "failed_attempts": 0,
            "error": "", "problem": "", "step": None, "step_progress": None,
            "pause_asked": False, "stop_asked": None, "control_problem": "",
            "journal_problem": "", "progress_problem": "", "reports": [], "log": ""}


def run_row(status: Mapping[str, Any], progress: Mapping[str, Any],
            now: float | None = None) -> dict[str, Any]:
    """The run table's row for one run: plain values, already decided."""
    state = status.get("state") or "not_started"
    text, colour = badge(state)
    if state == "not_responding" and status.get("silent_s") is not None:
        text = f"{text} (silent {format_duration(status['silent_s'])})"
    asked = status.get("asked") or {}
    total = progress.get("total") or status.get("total") or None
    done = int(progress.get("completed") or 0)
    flight = status.get("in_flight") or {}
    eta = None
    if total and state in LIVE_STATES:
        now = time.time() if now is None else now
        in_flight_for = now - flight["started"] if (flight.get("started") and state != "paused") else 0.0
        eta = eta_seconds(progress.get("step_s"), total - done, in_flight_for)
    failure = status.get("last_failure") or {}
    return {
        "run_id": status.get("run_id", ""),
        "state": state,
        "badge": text,
        "colour": colour,
        "done": done,
        "total": total,
        "eta": eta,
        "started": status.get("started_at"),
        "ended": status.get("ended_at"),
        "failed_attempts": int(status.get("failed") or 0),
        "error": status.get("error") or failure.get("error") or "",
        "problem": status.get("problem", ""),
        "step": flight.get("step_id"),
        "step_progress": progress.get("step"),
        "pause_asked": bool(asked.get("paused")),
        "stop_asked": asked.get("stop") or None,
        "control_problem": status.get("control_problem", ""),
        "journal_problem": status.get("journal_problem", ""),
        "progress_problem": progress.get("progress_problem", ""),
        "reports": list(status.get("reports") or []),
        "log": status.get("log") or "",
    }


# -- records -------------------------------------------------------------------

def field_value(record: Mapping[str, Any], name: str) -> float | None:
    """The number a record holds under a dotted ``name`` (``value``, ``value.x``, ``index``)."""
    node: Any = record
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if node is True or node is False or not isinstance(node, (int, float)):
        return None
    return float(node)


def numeric_fields(record: Mapping[str, Any]) -> list[str]:
    """The plottable fields of a record: its scalar value, or the numbers inside it.

    A result's own measurements come first; numbers that only echo the step's
    inputs (a key of its ``params``) or its position (a ``step``/``index``
    equal to its index) go last, so the plot starts on what was measured.
    """
    value = record.get("value")
    if isinstance(value, (int, float)) and value is not True and value is not False:
        return ["value"]
    if not isinstance(value, dict):
        return []
    provenance = record.get("provenance")
    params = provenance.get("params") if isinstance(provenance, dict) else None
    inputs = params if isinstance(params, dict) else {}
    index = record.get("index")
    measured, echoes = [], []
    for key, inner in value.items():
        if inner is True or inner is False or not isinstance(inner, (int, float)):
            continue
        echo = key in inputs or (key in ("step", "index", "i") and inner == index)
        (echoes if echo else measured).append(f"value.{key}")
    return measured + echoes


def plot_columns(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The records as plottable columns: ``{"fields": [...], "series": {field: (xs, ys)}, "swept": [...]}``.

    Worked out on the poller's thread so the GUI only extends arrays; x is
    the record's step index, and a record lacking a field adds no point to it.
    ``swept`` lists the fields that echo a step's input (a key of its
    ``params``, like the demo's ``setpoint_mV``): what a scientist plots against.
    """
    fields: list[str] = []
    series: dict[str, tuple[list[float], list[float]]] = {}
    swept: list[str] = []
    for record in records:
        index = record.get("index")
        if isinstance(index, bool) or not isinstance(index, (int, float)):
            continue
        provenance = record.get("provenance")
        params = provenance.get("params") if isinstance(provenance, dict) else None
        if isinstance(params, dict) and isinstance(record.get("value"), dict):
            for key in params:
                name = f"value.{key}"
                if name not in swept and key in record["value"]:
                    swept.append(name)
        for name in numeric_fields(record):
            y = field_value(record, name)
            if y is None:
                continue
            column = series.get(name)
            if column is None:
                fields.append(name)
                column = series[name] = ([], [])
            column[0].append(float(index))
            column[1].append(y)
    return {"fields": fields, "series": series, "swept": [n for n in swept if n in series]}


def record_cells(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record as the cells of its table row: ``{column: value}``, flat.

    A record's value fields are its cells; a record whose value is not a
    mapping gives it as ``value`` (and its other top-level fields under their
    own names).  Index and step always come from the record itself.  Being
    flat matters at length: a dict holding only numbers and strings is left
    out of the garbage collector's scans, so the window's table of 100 000
    rows adds nothing to the collector's pauses, where the records as read (a
    dict within a dict within a dict) made each full collection walk 200 000
    more objects — 40 to 80 ms with the interpreter held.
    """
    value = record.get("value")
    if isinstance(value, dict):
        cells = {str(key): inner for key, inner in value.items()}
    else:
        cells = {str(key): inner for key, inner in record.items() if key != "provenance"}
    provenance = record.get("provenance")
    cells["index"] = record.get("index")
    cells["step"] = provenance.get("step_id") if isinstance(provenance, dict) else None
    return cells


def record_columns(record: Mapping[str, Any]) -> list[str]:
    """The table columns a record brings: its value's keys, else ``value`` (or ``type``)."""
    value = record.get("value")
    if isinstance(value, dict):
        return [str(key) for key in value]
    return ["value" if "value" in record else "type"]


class RecordsBatch:
    """Records read in one poll, in the shapes the window takes them.

    ``cells`` (one flat dict a row, see :func:`record_cells`) with ``committed``
    (each row's ``saved_at``) and the ``columns`` they bring, in order of first
    appearance; ``plot`` as :func:`plot_columns` gives it.  The records as read
    are dropped once converted.
    """

    def __init__(self) -> None:
        self.cells: list[dict[str, Any]] = []
        self.committed: list[str] = []
        self.columns: list[str] = []
        self.plot: dict[str, Any] = {"fields": [], "series": {}, "swept": []}

    def add(self, records: list[Mapping[str, Any]]) -> None:
        seen = set(self.columns)
        for record in records:
            for column in record_columns(record):
                if column not in seen:
                    seen.add(column)
                    self.columns.append(column)
            self.cells.append(record_cells(record))
            self.committed.append(str(record.get("saved_at", "?")))
        plot = plot_columns(records)
        for name in plot["fields"]:
            xs, ys = plot["series"][name]
            if name in self.plot["series"]:
                self.plot["series"][name][0].extend(xs)
                self.plot["series"][name][1].extend(ys)
            else:
                self.plot["fields"].append(name)
                self.plot["series"][name] = (xs, ys)
        self.plot["swept"] += [n for n in plot["swept"] if n not in self.plot["swept"]]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector from running over a short burst of parsing.

    A chunk of records parses into thousands of nested dicts that live only
    until they are turned into flat rows a millisecond later.  Left to run,
    the collector would find them alive and promote them to its oldest
    generation, and a long run's records promote enough to set off full
    collections (40 ms or more, holding the interpreter) every few polls.
    Paused over the burst, they are freed by their reference counts first.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# -- reading -------------------------------------------------------------------

class Pace:
    """Work in short slices with rests between, so the GUI thread keeps the interpreter.

    The poller and the window share one interpreter lock.  While the poller
    computes without a pause, the window waits for the lock at every one of
    the hundreds of calls a repaint makes into Qt (each gives the lock up and
    takes it back, and getting it back from a busy thread takes up to the
    switch interval, 5 ms): a repaint that costs 5 ms alone then takes 100 ms
    or more.  So the poller rests — a real sleep, which frees the lock
    outright — after each ``work`` seconds of computing, for ``rest``
    seconds.  Reading twenty long histories takes about twice as long, and
    the window never waits long for anything; a poll with only a few new
    lines to read finishes inside one slice and never rests.
    """

    def __init__(self, work: float = 0.004, rest: float = 0.006) -> None:
        self.work, self.rest = work, rest
        self.rests = 0
        self._since = time.perf_counter()

    def breathe(self) -> None:
        """Rest if the current slice of work has lasted ``work`` seconds."""
        if time.perf_counter() - self._since >= self.work:
            time.sleep(self.rest)
            self.rests += 1
            self._since = time.perf_counter()


def _stamp(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return ()
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no login name in a service account
        return "operator"


@dataclass
class _Detail:
    """What is read of the one run the operator is looking at, incrementally."""

    run_dir: Path
    records: JsonlTail = field(init=False)
    log: TextTail | None = None
    log_path: Path | None = None
    notes_stamp: tuple = ()
    config_stamp: tuple = ()
    report_stamp: tuple = ()
    first: bool = True

    def __post_init__(self) -> None:
        self.records = JsonlTail(self.run_dir / RECORDS_FILE)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def log_of(run_dir: Path, row: Mapping[str, Any]) -> Path | None:
    """The log of the process that last ran the run: the one spacrq recorded, else the kept one."""
    recorded = row.get("log")
    if recorded:
        path = Path(recorded)
        if path.is_file():
            return path
    return kept_log(run_dir)


# -- the operator's requests -----------------------------------------------------

def _run_dir(spec, run_id: str) -> Path:
    return run_dir_of(spec.run_root, run_id)


def _create(spec, *, by: str, config: Mapping[str, Any], run_id: str | None = None,
            start: bool = False) -> dict[str, Any]:
    """Name a new run with the form's configuration (and start it when asked)."""
    run_id = (run_id or "").strip() or new_run_id(spec.name)
    if start:
        launched = start_run(spec, run_id, dict(config))
        return {"run_id": run_id, "select": run_id, "child": launched.popen,
                "text": f"run {run_id} started (pid {launched.ref.pid})"}
    create_run(_run_dir(spec, run_id), config_text_of(dict(config)), experiment=spec.name,
               module=spec.module, created_by=by)
    return {"run_id": run_id, "select": run_id, "text": f"run {run_id} created; Run starts it"}


def _start(spec, *, by: str, run_id: str) -> dict[str, Any]:
    launched = start_run(spec, run_id)
    return {"child": launched.popen, "text": f"run {run_id} started (pid {launched.ref.pid})"}


def _resume(spec, *, by: str, run_id: str) -> dict[str, Any]:
    launched = resume_run(spec, run_id)
    if launched is None:
        return {"text": f"run {run_id} continues"}
    return {"child": launched.popen,
            "text": f"run {run_id} resumed from its last committed step (pid {launched.ref.pid})"}


def _pause(spec, *, by: str, run_id: str) -> dict[str, Any]:
    pause_run(_run_dir(spec, run_id))
    return {"text": f"run {run_id} will pause before its next step"}


def _continue(spec, *, by: str, run_id: str) -> dict[str, Any]:
    continue_run(_run_dir(spec, run_id))
    return {"text": f"run {run_id} continues"}


def _stop(spec, *, by: str, run_id: str) -> dict[str, Any]:
    stop_run(_run_dir(spec, run_id), reason=f"stopped by {by}")
    return {"text": f"run {run_id} will stop after the step in flight"}


def _abort(spec, *, by: str, run_id: str) -> dict[str, Any]:
    status = abort_run(_run_dir(spec, run_id), reason=f"aborted by {by}")
    how = f" (its process group was {status['escalated']})" if status.get("escalated") else ""
    return {"text": f"run {run_id} {status.get('state', 'aborted')}{how}"}


def _duplicate(spec, *, by: str, run_id: str, new_id: str | None = None) -> dict[str, Any]:
    new_id = (new_id or "").strip() or new_run_id(spec.name)
    if new_id == run_id or (Path(spec.run_root) / new_id).exists():
        raise ValueError(f"a run called {new_id!r} already exists; type another name for the copy")
    duplicate_run(_run_dir(spec, run_id), new_id)
    return {"select": new_id, "text": f"run {new_id} created as a copy of {run_id}"}


def _rename(spec, *, by: str, run_id: str, new_id: str) -> dict[str, Any]:
    target = rename_run(_run_dir(spec, run_id), new_id)
    return {"select": target.name, "text": f"run {run_id} is now called {target.name}"}


def _reconfigure(spec, *, by: str, run_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
    reconfigure_run(_run_dir(spec, run_id), config_text_of(dict(config)), "the Experiments pane")
    return {"text": f"run {run_id} will run with the new configuration"}


def _note(spec, *, by: str, run_id: str, text: str) -> dict[str, Any]:
    add_note(_run_dir(spec, run_id), text, by=by)
    return {"text": f"note added to run {run_id}"}


#: what the pane can ask for, by name
ACTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "create": _create, "start": _start, "resume": _resume, "pause": _pause,
    "continue": _continue, "stop": _stop, "abort": _abort, "duplicate": _duplicate,
    "rename": _rename, "reconfigure": _reconfigure, "note": _note,
}
#: requests that may take seconds: carried out beside the poll, not in it
SLOW_ACTIONS = ("create", "start", "resume", "abort")


def _outcome(handler: Callable[..., dict[str, Any]], spec, base: dict[str, Any],
             call: dict[str, Any], keep: Callable[[Any], None]) -> dict[str, Any]:
    """Carry out one request; a process it started is handed to ``keep`` to be reaped."""
    try:
        result = dict(handler(spec, by=_user(), **call) or {})
    except Exception as exc:  # an operator's request never takes the poller down
        return {**base, "ok": False, "text": str(exc) or type(exc).__name__}
    child = result.pop("child", None)
    if child is not None:
        keep(child)
    return {**base, "ok": True, **result}


class ExperimentsWatch:
    """The Experiments pane's poller body: ``poll(request) -> snapshot``.

    ``request`` holds ``experiment`` (a declared name) and ``run`` (the run
    id looked at).  The snapshot holds the declarations, one row per run of
    the experiment (newest first), the looked-at run's new records, new log
    text, and its notes, configuration and report when they changed, and the
    outcome of every request carried out since the last poll.  ``more`` says
    a history is still being read (in chunks, a few polls long): the pane
    polls again at once instead of waiting the interval.
    """

    #: seconds between rescans of the run root for new run directories
    RESCAN = 1.0
    #: seconds one poll may spend reading runs it has not read before; the
    #: rest wait for the next poll, so twenty runs hours in do not hold the
    #: interpreter (and with it the window) for seconds at once
    FIRST_READ_BUDGET = 0.05
    #: bytes of history read at a time.  A chunk is parsed in one C call, which
    #: holds the interpreter lock throughout: 32 KB take a fraction of a
    #: millisecond, and between two chunks the window can have the lock back
    CHUNK = 32 * 1024
    #: bytes of records one poll hands the window at most: the window adds them
    #: to its table and plot in one go, which must stay far below a 50 ms stall
    RECORDS_PER_POLL = 128 * 1024
    #: (work, rest) seconds of :class:`Pace`: the poller computes at most
    #: ``work`` at a stretch before resting ``rest``, the window's share
    PACE = (0.004, 0.006)

    def __init__(self, workspace_root: str | os.PathLike, *,
                 clock: Callable[[], float] = time.time, actions: Mapping[str, Callable] | None = None) -> None:
        self.root = Path(workspace_root)
        self.clock = clock
        self._watches: dict[Path, RunWatch] = {}
        self._caught_up: set[Path] = set()  # runs whose history has been read once
        #: how often the poller has rested for the window (see :class:`Pace`)
        self.rests = 0
        self._detail: _Detail | None = None
        self._pending: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._specs: list = []
        self._specs_stamp: tuple | None = None
        self._specs_error = ""
        self._listed_at = -math.inf
        self._run_dirs: list[Path] = []
        self._run_root: Path | None = None
        self.actions = dict(ACTIONS if actions is None else actions)
        self._background: list[threading.Thread] = []
        #: runs this window started: the processes are its children until they
        #: exit, and are reaped here so none is left a zombie (the runs never
        #: depend on the window: they go on when it closes)
        self._children: list = []
        self._finished: collections.deque = collections.deque()

    # requests -----------------------------------------------------------------
    def submit(self, action: str, **args: Any) -> None:
        """Queue an operator's request; it is carried out at the start of the next poll."""
        with self._lock:
            self._pending.append((action, args))

    def _take_pending(self) -> list[tuple[str, dict]]:
        with self._lock:
            out = list(self._pending)
            self._pending.clear()
        return out

    def _carry_out(self, action: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """Do one request; its outcome is a message, never an exception.

        Starting, resuming and aborting can take seconds (a module asked for
        its plan, a grace period before a process group is stopped), so they
        run on a thread of their own and report at a later poll; the table
        keeps refreshing meanwhile.
        """
        spec = self.spec(args.get("experiment"))
        base = {"action": action, "run_id": args.get("run_id") or ""}
        handler = self.actions.get(action)
        if handler is None:
            return {**base, "ok": False, "text": f"spacrq cannot {action} a run"}
        if spec is None:
            return {**base, "ok": False,
                    "text": f"the experiment {args.get('experiment')!r} is no longer declared; "
                            "declare it again or choose another"}
        call = {k: v for k, v in args.items() if k != "experiment"}
        if action in SLOW_ACTIONS:
            thread = threading.Thread(target=lambda: self._finished.append(
                _outcome(handler, spec, base, call, self._keep_child)),
                name=f"experiment-{action}", daemon=True)
            self._background.append(thread)
            thread.start()
            return None
        return _outcome(handler, spec, base, call, self._keep_child)

    def _collect(self) -> list[dict[str, Any]]:
        """Outcomes of slow requests that have finished since the last poll."""
        self._background = [t for t in self._background if t.is_alive()]
        self.started_running()
        out = []
        while self._finished:
            out.append(self._finished.popleft())
        return out

    def _keep_child(self, child) -> None:
        with self._lock:
            self._children.append(child)

    def started_running(self) -> int:
        """How many processes this window started are still running (reaping the rest)."""
        with self._lock:  # a request's thread may be adding one right now
            self._children = [c for c in self._children if c.poll() is None]
            return len(self._children)

    def busy(self) -> bool:
        """Whether a slow request (start, resume, abort) is still being carried out."""
        return any(t.is_alive() for t in self._background)

    def close(self, timeout: float = 30.0) -> bool:
        """Wait for slow requests still in flight (the pane's shutdown); True when none is left."""
        deadline = time.monotonic() + timeout
        for thread in list(self._background):
            thread.join(max(0.0, deadline - time.monotonic()))
        self.started_running()
        return not self.busy()

    # declarations -------------------------------------------------------------
    def _load_specs(self) -> None:
        stamp = _stamp(declarations_path(self.root))
        if stamp == self._specs_stamp:
            return
        self._specs_stamp = stamp
        try:
            self._specs, self._specs_error = load_experiments(self.root), ""
        except Exception as exc:  # shown inline; the rest of the pane goes on
            self._specs, self._specs_error = [], str(exc)

    def spec(self, name: str | None):
        return next((s for s in self._specs if s.name == name), None)

    # runs ---------------------------------------------------------------------
    def _list_runs(self, run_root: Path, force: bool) -> list[Path]:
        """The run directories, newest first; rescanned at most once a second."""
        now = self.clock()
        if force or run_root != self._run_root or now - self._listed_at >= self.RESCAN:
            self._run_root, self._listed_at = run_root, now
            self._run_dirs = runs_of(run_root)
        return self._run_dirs

    def _catch_up(self, watch: RunWatch, deadline: float, pace: Pace) -> bool:
        """Read a new run's journal history chunk by chunk until it is read or ``deadline``
        (one chunk at least).  :returns: True when the history is read."""
        tail = watch.journal_tail
        while True:
            try:
                size = tail.path.stat().st_size
            except OSError:
                return True  # nothing journaled yet: status() says what it is
            if tail.offset >= size:
                return True
            events = tail.read(max_bytes=self.CHUNK)
            if tail.restarted:
                watch.replay = JournalReplay()
            watch.replay.feed(events)
            pace.breathe()  # let the window have the interpreter between chunks
            if time.monotonic() > deadline and tail.offset < size:
                return False

    def _watch(self, run_dir: Path) -> RunWatch:
        watch = self._watches.get(run_dir)
        if watch is None:
            watch = self._watches[run_dir] = RunWatch(run_dir)
        return watch

    # the poll -------------------------------------------------------------------
    def poll(self, request: Mapping[str, Any]) -> dict[str, Any]:
        self._load_specs()
        pending = self._take_pending()
        messages = [m for m in (self._carry_out(a, args) for a, args in pending) if m]
        finished = self._collect()
        messages += finished
        spec = self.spec(request.get("experiment"))
        snapshot: dict[str, Any] = {
            "experiments": [s.to_dict() for s in self._specs],
            "declaration_error": self._specs_error,
            "experiment": spec.name if spec else None,
            "rows": [],
            "detail": None,
            "messages": messages,
            "more": False,
            "polled_at": self.clock(),
        }
        if spec is None:
            return snapshot
        run_root = Path(spec.run_root)
        run_dirs = self._list_runs(run_root, force=bool(pending or finished))
        for gone in [p for p in self._watches if p not in set(run_dirs)]:
            del self._watches[gone]
            self._caught_up.discard(gone)
        now = self.clock()
        rows = []
        deadline = time.monotonic() + self.FIRST_READ_BUDGET
        pace = Pace(*self.PACE)
        read_history = False
        for run_dir in run_dirs:
            watch = self._watch(run_dir)
            if run_dir not in self._caught_up:
                # one history a poll at least, so every run is read in the end
                if (read_history and time.monotonic() > deadline) or \
                        not self._catch_up(watch, deadline, pace):
                    read_history = True
                    rows.append(reading_row(run_dir.name))
                    continue
                read_history = True
                self._caught_up.add(run_dir)
            status = watch.status()
            rows.append(run_row(status, watch.progress(status), now))
            pace.breathe()
        snapshot["rows"] = rows
        snapshot["more"] = any(row["state"] == "reading" for row in rows)
        chosen = request.get("run")
        by_id = {row["run_id"]: row for row in rows}
        if chosen in by_id:
            snapshot["detail"] = self._read_detail(run_root / chosen, by_id[chosen], pace)
            snapshot["more"] = snapshot["more"] or snapshot["detail"]["more_records"]
        else:
            self._detail = None
        self.rests += pace.rests
        return snapshot

    def _new_records(self, tail: JsonlTail, pace: Pace) -> tuple[RecordsBatch, bool]:
        """Records committed since the last poll: chunk by chunk, resting between, up to
        :attr:`RECORDS_PER_POLL` bytes and :attr:`FIRST_READ_BUDGET` seconds (one
        chunk at least), so a long run's hundred thousand records reach the window
        over some polls, each a few milliseconds of work for the window.

        The poller hands them on without keeping them: the window keeps what it
        shows, and a second copy here would only lengthen the collector's pauses.
        """
        deadline = time.monotonic() + self.FIRST_READ_BUDGET
        new = RecordsBatch()
        restarted = False
        start = tail.offset
        while True:
            with collector_paused():
                chunk = [r for r in tail.read(max_bytes=self.CHUNK) if isinstance(r, dict)]
                if tail.restarted:  # replaced since: what was read belongs to the old file
                    new, restarted, start = RecordsBatch(), True, 0
                new.add(chunk)
                del chunk
            pace.breathe()
            if tail.offset >= _size(tail.path) or time.monotonic() > deadline \
                    or tail.offset - start >= self.RECORDS_PER_POLL:
                return new, restarted

    def _read_detail(self, run_dir: Path, row: Mapping[str, Any], pace: Pace) -> dict[str, Any]:
        """New records and log text; notes, configuration and report when they changed."""
        detail = self._detail
        if detail is None or detail.run_dir != run_dir:
            detail = self._detail = _Detail(run_dir)
        records, restarted = self._new_records(detail.records, pace)
        out: dict[str, Any] = {"run_id": run_dir.name, "records": records.cells,
                               "committed": records.committed, "columns": records.columns,
                               "plot": records.plot,
                               "records_reset": restarted or detail.first,
                               "more_records": detail.records.offset < _size(detail.records.path)}
        log_path = log_of(run_dir, row)
        if log_path != detail.log_path or detail.first:
            detail.log_path = log_path
            detail.log = TextTail(log_path) if log_path else None
            out["log_reset"] = True
        text, restarted = detail.log.read() if detail.log is not None else ("", False)
        out["log"] = text
        out["log_reset"] = out.get("log_reset", False) or restarted
        out["log_path"] = str(log_path or "")
        stamp = _stamp(run_dir / NOTES_FILE)
        if stamp != detail.notes_stamp or detail.first:
            detail.notes_stamp = stamp
            out["notes"] = notes_of(run_dir)
        stamp = _stamp(run_dir / RUN_CONFIG_FILE)
        if stamp != detail.config_stamp or detail.first:
            detail.config_stamp = stamp
            try:
                out["config"] = run_config_of(run_dir)
            except Exception as exc:
                out["config"], out["config_error"] = None, str(exc)
        report = report_of(run_dir)
        stamp = (report or {}).get("bytes"), (report or {}).get("written")
        if stamp != detail.report_stamp or detail.first:
            detail.report_stamp = stamp
            out["report"] = report
        detail.first = False
        return out


def environment_check(manifest: Mapping[str, Any], env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The variables the module says a run reads, each with whether the run would get it.

    ``env`` is the run's environment (bench, ``.env``, declaration); a
    required variable missing from it is a run that will fail at its first
    step, better said before it is started.
    """
    out = []
    for entry in manifest.get("environment") or []:
        if isinstance(entry, Mapping) and entry.get("name"):
            name = str(entry["name"])
            out.append({"name": name, "description": str(entry.get("description") or ""),
                        "required": bool(entry.get("required", True)), "set": bool(env.get(name))})
    return out


class ManifestAsker:
    """The manifest poller's body: asks the chosen experiment's module what it takes.

    The module is a subprocess that may take seconds (or hang until the
    timeout), so it is asked on its own thread, never the GUI's and never the
    run table's.  It asks only when the request names a new ``ask`` number,
    and returns ``None`` (nothing to emit) otherwise.
    """

    def __init__(self, workspace_root: str | os.PathLike, timeout: float | None = None) -> None:
        self.root = Path(workspace_root)
        self.timeout = timeout
        self._asked: Any = None

    def poll(self, request: Mapping[str, Any]) -> dict[str, Any] | None:
        name, ask = request.get("experiment"), request.get("ask")
        if not name or ask is None or ask == self._asked:
            return None
        self._asked = ask
        out: dict[str, Any] = {"experiment": name, "ask": ask, "manifest": None, "error": ""}
        try:
            spec = find_experiment(self.root, name)
            # the environment a run gets (bench, then the module's .env, then the
            # declaration), so a module that reads its settings at import answers alike
            dotenv = read_dotenv(Path(spec.cwd) / ".env") if spec.cwd else {}
            env = run_environment(spec, os.environ, dotenv)
            kwargs = {"timeout": self.timeout} if self.timeout else {}
            out["manifest"] = read_manifest(spec, env=env, **kwargs)
            out["environment"] = environment_check(out["manifest"], env)
        except Exception as exc:  # said inline beside the form
            out["error"] = str(exc) or type(exc).__name__
        return out
