"""The Experiments pane's watch: reads the runs, carries out the operator's actions.

The pane's poller calls :meth:`ExperimentsWatch.poll` twice a second with a
view naming the experiment and the run looked at.  Every run of the
experiment is watched by a :class:`~spacrq.experiments.replay.RunWatch`,
which reads only the journal lines written since the last look, so twenty
live runs cost twenty ``stat`` calls and a few hundred bytes a refresh; a run
opened for the first time has its history read in chunks over a few polls
(it shows "reading…" meanwhile).  Only the looked-at run's records, log,
notes, configuration and report are read, its records as columns
(:mod:`spacrq.experiments.records`).

Actions (``submit(token, action, **args)``) are carried out on the poller's
thread at the start of the next poll; the slow ones — starting or resuming
a run, asking a module for its manifest — on threads of their own, so the
table keeps refreshing, and their :class:`~spacrq.watching.Outcome` comes
in a later snapshot.  An abort's escalation (grace, then its process group
stopped) is handed to a detached ``spacrq exp abort``: the window never
waits for it, and it finishes even if the window closes.
"""
from __future__ import annotations

import getpass
import inspect
import math
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from spacrq import procs
from spacrq.experiments import control, launch
from spacrq.experiments.asking import ManifestAsker
from spacrq.experiments.declarations import (ExperimentSpec, declarations_path, declare,
                                             load_experiments, probe_of, undeclare)
from spacrq.experiments.environment import missing_sentence
from spacrq.experiments.errors import (JOURNAL_FILE, MANIFEST_TIMEOUT, NOTES_FILE,
                                       RECORDS_FILE, RUN_CONFIG_FILE, ExperimentError)
from spacrq.experiments.manifest import read_manifest
from spacrq.experiments.notes import add_note, notes_of
from spacrq.experiments.pane import RunRow, reading_row, rows, run_row
from spacrq.experiments.records import RecordsChunk, chunk_of
from spacrq.experiments.replay import JournalReplay, RunWatch
from spacrq.experiments.runs import (config_text_of, created_of, duplicate_run, kept_log,
                                     new_run_id, reconfigure_run, rename_run, report_of,
                                     run_config_of, run_dir_of, runs_of)
from spacrq.runfiles import JsonlTail, RunFileError, TextTail, file_stamp, loads
from spacrq.watching import Code, Outcome, Row, WatchBase

__all__ = ["Detail", "Snapshot", "ExperimentsWatch", "Refused", "ACTIONS", "SLOW_ACTIONS",
           "log_of"]


@dataclass(frozen=True)
class Detail:
    """What is new about the run looked at since the last poll.

    ``records`` are the records committed since (``records.reset``: start
    afresh); ``log`` the new log text (``log_reset``: the log was replaced or
    another one is shown).  ``notes``, ``config`` and ``report`` are given
    only when they changed (``*_changed``).
    """

    run_id: str
    records: RecordsChunk
    more_records: bool = False
    log: str = ""
    log_reset: bool = False
    log_path: str = ""
    notes_changed: bool = False
    notes: tuple[Mapping[str, str], ...] = ()
    config_changed: bool = False
    config: Mapping[str, Any] | None = None
    config_error: str = ""
    report_changed: bool = False
    report: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Snapshot:
    """One poll of the Experiments pane: declarations, runs, the looked-at run, outcomes.

    ``more`` says a history is still being read (a few polls long): the pane
    polls again at once instead of waiting the interval.
    """

    experiments: tuple[Mapping[str, Any], ...] = ()
    declaration_error: str = ""
    experiment: str | None = None
    runs: tuple[RunRow, ...] = ()
    rows: tuple[Row, ...] = ()
    detail: Detail | None = None
    outcomes: tuple[Outcome, ...] = ()
    more: bool = False
    polled_at: float = 0.0

    def run(self, run_id: str | None) -> RunRow | None:
        return next((r for r in self.runs if r.run_id == run_id), None)


@dataclass
class _Detail:
    """What is read of the one run the operator is looking at, incrementally."""

    run_dir: Path
    records: JsonlTail = field(init=False)
    sent: int = 0
    swept: tuple[str, ...] = ()
    log: TextTail | None = None
    log_path: Path | None = None
    notes_stamp: tuple | None = None
    config_stamp: tuple | None = None
    report_stamp: tuple = ()
    first: bool = True

    def __post_init__(self) -> None:
        self.records = JsonlTail(self.run_dir / RECORDS_FILE)


def _size(path: Path) -> int:
    stamp = file_stamp(path)
    return stamp[1] if stamp else 0


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in a service account
        return "operator"


def log_of(run_dir: Path, run: RunRow) -> Path | None:
    """The log of the process that last ran the run: the one spacrq recorded, else the kept one."""
    if run.log:
        path = Path(run.log)
        if path.is_file():
            return path
    return kept_log(run_dir)


def _code_of(exc: BaseException) -> Code:
    """How a refused action ended, from the kind of error (never from its text)."""
    code = getattr(exc, "code", None)
    if isinstance(code, Code):
        return code
    if isinstance(exc, (ValueError, RunFileError)):
        return Code.INVALID
    if isinstance(exc, ExperimentError):
        return Code.REFUSED
    return Code.FAILED


# -- the operator's actions on a run ----------------------------------------------------

def _run_dir(spec: ExperimentSpec, run_id: str) -> Path:
    return run_dir_of(spec.run_root, run_id)


class Refused(ExperimentError):
    """An action refused at the door; ``code`` says how."""

    def __init__(self, message: str, code: Code) -> None:
        super().__init__(message)
        self.code = code


def _checked_manifest(watch: ExperimentsWatch, spec: ExperimentSpec) -> dict[str, Any] | None:
    """The module's manifest (the one the form was built from, else asked now), after
    refusing a start whose module needs an environment variable the run would lack."""
    manifest = watch.asker.known.get(spec.name)
    if manifest is None:
        try:
            manifest = read_manifest(spec)
        except ExperimentError:
            return None  # a module that cannot say is left to say so when it starts
    missing = launch.missing_environment(spec, manifest)
    if missing:
        raise Refused(missing_sentence(missing, str(manifest.get("title") or spec.name)),
                      Code.INVALID)
    return manifest


def _create(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str,
            config: Mapping[str, Any], run_id: str | None = None, start: bool = False,
            options: Mapping[str, Any] | None = None,
            devices: list[str] | None = None) -> dict[str, Any]:
    """Name a new run with the form's configuration, options and devices (and start it
    when asked)."""
    run_id = (run_id or "").strip() or new_run_id(spec.name)
    if start:
        launched = launch.start_run(spec, run_id, dict(config), options=options, devices=devices,
                                    manifest=_checked_manifest(watch, spec))
        return {"run_id": run_id, "select": run_id, "child": launched.popen,
                "text": f"run {run_id} started (pid {launched.ref.pid})"}
    launch.prepare_run(spec, run_id, dict(config), options=options, devices=devices,
                       manifest=watch.asker.known.get(spec.name), created_by=by)
    return {"run_id": run_id, "select": run_id, "text": f"run {run_id} created; Run starts it"}


def _start(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str, run_id: str,
           options: Mapping[str, Any] | None = None,
           devices: list[str] | None = None) -> dict[str, Any]:
    launched = launch.start_run(spec, run_id, options=options, devices=devices,
                                manifest=_checked_manifest(watch, spec))
    return {"child": launched.popen, "text": f"run {run_id} started (pid {launched.ref.pid})"}


def _resume(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str, run_id: str) -> dict[str, Any]:
    launched = launch.resume_run(spec, run_id)
    if launched is None:
        return {"text": f"run {run_id} continues"}
    return {"child": launched.popen,
            "text": f"run {run_id} resumed from its last committed step (pid {launched.ref.pid})"}


def _pause(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str, run_id: str) -> dict[str, Any]:
    launch.pause_run(_run_dir(spec, run_id))
    return {"text": f"run {run_id} will pause before its next step"}


def _continue(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str, run_id: str) -> dict[str, Any]:
    launch.continue_run(_run_dir(spec, run_id))
    return {"text": f"run {run_id} continues"}


def _stop(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str, run_id: str) -> dict[str, Any]:
    launch.stop_run(_run_dir(spec, run_id), reason=f"stopped by {by}")
    return {"text": f"run {run_id} will stop after the step in flight"}


def _abort(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str, run_id: str) -> dict[str, Any]:
    """Ask the run to abort now, and leave the escalation to a detached ``spacrq exp abort``:
    if the module does not honour it within the grace period, that stops its process group."""
    reason = f"aborted by {by}"
    control.request_abort(_run_dir(spec, run_id), reason)
    argv = procs.module_argv("spacrq", "exp", "abort", spec.name, run_id,
                             "--workspace", str(watch.root), "--reason", reason)
    child = procs.spawn_detached(argv)
    return {"child": child,
            "text": f"run {run_id} asked to abort; its process is stopped if it has not "
                    f"ended within {procs.grace_seconds():g} s"}


def _duplicate(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str, run_id: str,
               new_id: str | None = None) -> dict[str, Any]:
    new_id = (new_id or "").strip() or new_run_id(spec.name)
    if new_id == run_id or (Path(spec.run_root) / new_id).exists():
        raise ExperimentError(f"a run called {new_id!r} already exists; type another name for "
                              "the copy")
    duplicate_run(_run_dir(spec, run_id), new_id)
    return {"select": new_id, "text": f"run {new_id} created as a copy of {run_id}"}


def _rename(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str, run_id: str,
            new_id: str) -> dict[str, Any]:
    target = rename_run(_run_dir(spec, run_id), new_id)
    return {"select": target.name, "text": f"run {run_id} is now called {target.name}"}


def _reconfigure(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str, run_id: str,
                 config: Mapping[str, Any]) -> dict[str, Any]:
    reconfigure_run(_run_dir(spec, run_id), config_text_of(dict(config)), "the Experiments pane")
    return {"text": f"run {run_id} will run with the new configuration"}


def _note(watch: ExperimentsWatch, spec: ExperimentSpec, *, by: str, run_id: str,
          text: str) -> dict[str, Any]:
    add_note(_run_dir(spec, run_id), text, by=by)
    return {"text": f"note added to run {run_id}"}


#: what the pane can ask of a run of a declared experiment, by name
ACTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "create": _create, "start": _start, "resume": _resume, "pause": _pause,
    "continue": _continue, "stop": _stop, "abort": _abort, "duplicate": _duplicate,
    "rename": _rename, "reconfigure": _reconfigure, "note": _note,
}
#: actions that may take seconds (a module asked for its plan): carried out beside the poll
SLOW_ACTIONS = ("create", "start", "resume")


def _first_event_time(journal: Path) -> float | None:
    """The time of a run journal's first event (its start), read from its first line only."""
    try:  # (never waiting on a pipe or a device put in its place)
        fd = os.open(journal, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_NOFOLLOW", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            line = os.read(fd, 4096).split(b"\n", 1)[0]
        finally:
            os.close(fd)
        event = loads(line, where=journal)
    except (OSError, RunFileError):
        return None
    if not isinstance(event, dict) or not isinstance(event.get("ts"), str):
        return None
    try:
        when = datetime.fromisoformat(event["ts"]).timestamp()
    except (ValueError, OverflowError, OSError):
        return None
    return when if math.isfinite(when) else None


class ExperimentsWatch(WatchBase):
    """The Experiments pane's watch: ``poll(view) -> Snapshot``.

    ``view`` holds ``experiment`` (a declared name) and ``run`` (the run id
    looked at).
    """

    #: seconds between rescans of the run root for new run directories
    RESCAN = 1.0
    #: seconds one poll may spend reading runs it has not read before; the
    #: rest wait for the next poll, which the pane asks for once it has painted
    #: this one.  Short, because while this thread parses, every return of the
    #: window's thread to Python waits its turn for the interpreter: a 50 ms
    #: read cost the window 100-200 ms stalls, a 10 ms one none over 50 ms,
    #: and twenty runs 5000 steps in still reach the table within about a second
    #: (bench/bench_gui_experiments.py)
    FIRST_READ_BUDGET = 0.01
    #: bytes of history read at a time
    CHUNK = 32 * 1024
    #: bytes of records one poll hands the window at most
    RECORDS_PER_POLL = 32 * 1024

    def __init__(self, workspace_root: str | os.PathLike, *,
                 clock: Callable[[], float] = time.time,
                 manifest_timeout: float = MANIFEST_TIMEOUT) -> None:
        super().__init__()
        self.root = Path(workspace_root)
        self.clock = clock
        self.asker = ManifestAsker(manifest_timeout)
        self._watches: dict[Path, RunWatch] = {}
        self._caught_up: set[Path] = set()  # runs whose history has been read once
        self._began: dict[Path, float] = {}  # when each run started (or was created), once known
        self._detail: _Detail | None = None
        self._specs: list[ExperimentSpec] = []
        self._specs_stamp: Any = ()
        self._specs_error = ""
        self._listed_at = -math.inf
        self._run_dirs: list[Path] = []
        self._run_root: Path | None = None
        self._lock = threading.Lock()
        self._finished: list[Outcome] = []
        self._background: list[threading.Thread] = []
        #: processes this window started (runs, abort escalations): its children
        #: until they exit, reaped here so none is left a zombie; none depends
        #: on the window, all go on when it closes
        self._children: list = []

    # -- the protocol -------------------------------------------------------------------
    def close(self, timeout: float = 1.0) -> bool:
        """Stop: kill any module being asked for its manifest, wait for the poll in flight.

        Starts in flight are not waited for (their threads are daemons; the
        run's own files say how far they got)."""
        self.asker.close()
        return super().close(timeout)

    # -- what the pane and tests ask ------------------------------------------------------
    def busy(self) -> bool:
        """Whether a slow action (a start, a resume, a manifest) is still being carried out."""
        with self._lock:
            alive = any(t.is_alive() for t in self._background)
        return alive or self.asker.busy()

    def started_running(self) -> int:
        """How many processes this window started are still running (reaping the rest)."""
        with self._lock:  # an action's thread may be adding one right now
            self._children = [c for c in self._children if c.poll() is None]
            return len(self._children)

    def spec(self, name: str | None) -> ExperimentSpec | None:
        return next((s for s in self._specs if s.name == name), None)

    def journal_read(self, run_id: str) -> int:
        """Bytes of a run's journal read so far (a refresh reads only what it gained)."""
        watch = next((w for path, w in self._watches.items() if path.name == run_id), None)
        return watch.journal_tail.offset if watch is not None else 0

    # -- carrying out actions ----------------------------------------------------------------
    def _keep_child(self, child: Any) -> None:
        if child is not None:
            with self._lock:
                self._children.append(child)

    def _done(self, token: int, action: str, handler: Callable[..., dict[str, Any]],
              spec: ExperimentSpec, args: dict[str, Any]) -> Outcome:
        run_id = str(args.get("run_id") or "")
        by = _user()
        try:
            inspect.signature(handler).bind(self, spec, by=by, **args)
        except TypeError as exc:  # arguments the action does not take, or lacks
            return Outcome(token, action, Code.INVALID, f"spacrq cannot {action} a run so: {exc}",
                           {"run_id": run_id})
        try:
            result = dict(handler(self, spec, by=by, **args) or {})
        except Exception as exc:  # an operator's action never takes the poller down
            return Outcome(token, action, _code_of(exc), str(exc) or type(exc).__name__,
                           {"run_id": run_id})
        self._keep_child(result.pop("child", None))
        text = result.pop("text", "")
        return Outcome(token, action, Code.DONE, text, {"run_id": run_id, **result})

    def _in_background(self, token: int, action: str, handler, spec, args) -> None:
        def work() -> None:
            outcome = self._done(token, action, handler, spec, args)
            with self._lock:
                self._finished.append(outcome)

        thread = threading.Thread(target=work, name=f"experiment-{action}", daemon=True)
        with self._lock:
            self._background = [t for t in self._background if t.is_alive()] + [thread]
        thread.start()

    def _carry_out(self, token: int, action: str, args: dict[str, Any]) -> Outcome | None:
        """One action; its outcome now, or ``None`` when it comes in a later poll."""
        if action in ("manifest", "probe"):
            return self._ask_manifest(token, action, args)
        if action == "devices":
            return self._ask_devices(token, args)
        if action == "declare":
            return self._declare(token, args)
        if action == "undeclare":
            return self._undeclare(token, args)
        handler = ACTIONS.get(action)
        run_id = str(args.get("run_id") or "")
        if handler is None:
            return Outcome(token, action, Code.INVALID, f"spacrq cannot {action} a run",
                           {"run_id": run_id})
        name = args.pop("experiment", None)
        spec = self.spec(name)
        if spec is None:
            return Outcome(token, action, Code.MISSING,
                           f"the experiment {name!r} is no longer declared; declare it again "
                           "or choose another", {"run_id": run_id})
        if action in SLOW_ACTIONS:
            self._in_background(token, action, handler, spec, args)
            return None
        return self._done(token, action, handler, spec, args)

    def _ask_manifest(self, token: int, action: str, args: dict[str, Any]) -> Outcome | None:
        if action == "manifest":
            spec = self.spec(args.get("experiment"))
            if spec is None:
                return Outcome(token, action, Code.MISSING,
                               f"the experiment {args.get('experiment')!r} is not declared")
        else:  # what `spacrq exp declare` checks too (spacrq.experiments.declarations)
            try:
                spec = probe_of(self.root, str(args.get("module") or ""), args.get("python"),
                                args.get("cwd"))
            except ExperimentError as exc:
                return Outcome(token, action, _code_of(exc), str(exc))
        self.asker.ask(token, action, spec)
        return None

    def _ask_devices(self, token: int, args: dict[str, Any]) -> Outcome | None:
        """Which devices a run of ``config`` would use, asked of a ``chooses_devices`` module."""
        name = args.get("experiment")
        spec = self.spec(name)
        if spec is None:
            return Outcome(token, "devices", Code.MISSING, f"the experiment {name!r} is not declared",
                           {"experiment": name})
        config = args.get("config")
        if not isinstance(config, Mapping):
            return Outcome(token, "devices", Code.INVALID, "a device question needs a configuration",
                           {"experiment": name})
        self.asker.ask_devices(token, spec, config)
        return None

    def _declare(self, token: int, args: dict[str, Any]) -> Outcome:
        try:
            spec = declare(self.root, name=str(args.get("name") or ""),
                           module=str(args.get("module") or ""), python=args.get("python"),
                           cwd=args.get("cwd"), run_root=args.get("run_root"))
        except Exception as exc:
            return Outcome(token, "declare", _code_of(exc), str(exc) or type(exc).__name__)
        self._specs_stamp = None  # read the declarations again this poll
        return Outcome(token, "declare", Code.DONE, f"experiment {spec.name} declared",
                       {"experiment": spec.name, "spec": spec.to_dict()})

    def _undeclare(self, token: int, args: dict[str, Any]) -> Outcome:
        try:
            gone = undeclare(self.root, str(args.get("name") or ""))
        except Exception as exc:
            return Outcome(token, "undeclare", _code_of(exc), str(exc) or type(exc).__name__)
        self._specs_stamp = None
        return Outcome(token, "undeclare", Code.DONE,
                       f"experiment {gone.name} removed; its runs stay in {gone.run_root}",
                       {"experiment": gone.name, "run_root": gone.run_root})

    def _collect(self) -> list[Outcome]:
        """Outcomes of slow actions that ended since the last poll."""
        with self._lock:
            taken, self._finished = self._finished, []
        self.started_running()
        return taken + self.asker.answers()

    # -- declarations ---------------------------------------------------------------------
    def _load_specs(self) -> None:
        stamp = file_stamp(declarations_path(self.root))
        if stamp == self._specs_stamp:
            return
        self._specs_stamp = stamp
        try:
            self._specs, self._specs_error = load_experiments(self.root), ""
        except Exception as exc:  # shown inline; the rest of the pane goes on
            self._specs, self._specs_error = [], str(exc)

    # -- runs ---------------------------------------------------------------------------------
    def _list_runs(self, run_root: Path, force: bool) -> list[Path]:
        """The run directories, newest first; rescanned at most once a second."""
        now = self.clock()
        if force or run_root != self._run_root or now - self._listed_at >= self.RESCAN:
            self._run_root, self._listed_at = run_root, now
            self._run_dirs = runs_of(run_root)
        return self._run_dirs

    def _catch_up(self, watch: RunWatch, deadline: float) -> bool:
        """Read a new run's journal history chunk by chunk until it is read or ``deadline``
        (one chunk at least).  :returns: True when the history is read."""
        tail = watch.journal_tail
        while True:
            size = _size(tail.path)
            if tail.offset >= size:
                return True
            events = tail.read(max_bytes=self.CHUNK)
            if tail.restarted:
                watch.replay = JournalReplay()
            watch.replay.feed(events)
            del events
            if (time.monotonic() > deadline or self.interrupted()) and tail.offset < size:
                return False

    def _watch(self, run_dir: Path) -> RunWatch:
        watch = self._watches.get(run_dir)
        if watch is None:
            watch = self._watches[run_dir] = RunWatch(run_dir)
        return watch

    def _runs(self, run_dirs: list[Path]) -> tuple[RunRow, ...]:
        now = self.clock()
        out: list[RunRow] = []
        deadline = time.monotonic() + self.FIRST_READ_BUDGET
        read_history = False
        for run_dir in run_dirs:
            if self.interrupted():
                out.append(reading_row(run_dir.name))
                continue
            watch = self._watch(run_dir)
            if run_dir not in self._caught_up:
                # one history a poll at least, so every run is read in the end
                if (read_history and time.monotonic() > deadline) or \
                        not self._catch_up(watch, deadline):
                    read_history = True
                    out.append(reading_row(run_dir.name))
                    continue
                read_history = True
                self._caught_up.add(run_dir)
            status = watch.status()
            out.append(run_row(status, watch.progress(status), now))
        began = [self._began_of(run_dir, row) for run_dir, row in zip(run_dirs, out)]
        order = sorted(range(len(out)), key=lambda i: -began[i])  # (stable: ties by name)
        return tuple(out[i] for i in order)

    def _began_of(self, run_dir: Path, row: RunRow) -> float:
        """When the run started, as the table orders runs (newest first, as ``exp list``):
        from its status, or — its history still being read — from its journal's first
        line; a run that never started counts from when it was created.  Looked up once."""
        if row.started is not None:
            self._began[run_dir] = float(row.started)
            return float(row.started)
        known = self._began.get(run_dir)
        if known is not None:
            return known
        when = _first_event_time(run_dir / JOURNAL_FILE)
        if when is None:
            created = created_of(run_dir).get("created")
            if isinstance(created, (int, float)) and not isinstance(created, bool) \
                    and math.isfinite(created):
                when = float(created)
        if when is None:
            try:
                when = run_dir.stat().st_mtime
            except OSError:
                when = 0.0
        self._began[run_dir] = when
        return when

    # -- the poll -------------------------------------------------------------------------------
    def _poll(self, view: Mapping[str, Any]) -> Snapshot:
        self._load_specs()
        submitted = self.take_submissions()
        outcomes = [o for o in (self._carry_out(t, a, dict(args)) for t, a, args in submitted) if o]
        if submitted:
            self._load_specs()  # a declare or undeclare changed them
        finished = self._collect()
        outcomes += finished
        spec = self.spec(view.get("experiment"))
        base = dict(experiments=tuple(s.to_dict() for s in self._specs),
                    declaration_error=self._specs_error,
                    experiment=spec.name if spec else None, outcomes=tuple(outcomes),
                    polled_at=self.clock())
        if spec is None:
            self._detail = None
            return Snapshot(**base)
        run_root = Path(spec.run_root)
        run_dirs = self._list_runs(run_root, force=bool(submitted or finished))
        listed = set(run_dirs)
        for gone in [p for p in self._watches if p not in listed]:
            del self._watches[gone]
            self._caught_up.discard(gone)
            self._began.pop(gone, None)
        runs = self._runs(run_dirs)
        more = any(run.state == "reading" for run in runs)
        chosen = next((run for run in runs if run.run_id == view.get("run")), None)
        detail = None
        if chosen is not None and not self.interrupted():
            detail = self._read_detail(run_root / chosen.run_id, chosen)
            more = more or detail.more_records
        elif chosen is None:
            self._detail = None
        return Snapshot(**base, runs=runs, rows=rows(runs), detail=detail, more=more)

    # -- the run looked at --------------------------------------------------------------------
    def _new_records(self, detail: _Detail) -> RecordsChunk:
        """Records committed since the last poll, chunk by chunk, up to :attr:`RECORDS_PER_POLL`
        bytes and :attr:`FIRST_READ_BUDGET` seconds (one chunk at least), so a long run's
        hundred thousand records reach the window over some polls."""
        tail = detail.records
        deadline = time.monotonic() + self.FIRST_READ_BUDGET
        reset = detail.first
        start = tail.offset
        read: list[Any] = []
        while True:
            chunk = tail.read(max_bytes=self.CHUNK)
            if tail.restarted:  # replaced since: what was read belongs to the old file
                read, reset, start, detail.sent, detail.swept = [], True, 0, 0, ()
            read += chunk
            del chunk
            if tail.offset >= _size(tail.path) or time.monotonic() > deadline \
                    or tail.offset - start >= self.RECORDS_PER_POLL or self.interrupted():
                break
        new = chunk_of(read, detail.sent, reset=reset, known=detail.swept)
        detail.sent += new.count
        detail.swept = tuple(dict.fromkeys(detail.swept + new.swept))
        return new

    def _read_detail(self, run_dir: Path, run: RunRow) -> Detail:
        """New records and log text; notes, configuration and report when they changed."""
        detail = self._detail
        if detail is None or detail.run_dir != run_dir:
            detail = self._detail = _Detail(run_dir)
        first = detail.first
        records = self._new_records(detail)
        out: dict[str, Any] = {"run_id": run_dir.name, "records": records,
                               "more_records": detail.records.offset < _size(detail.records.path)}
        log_path = log_of(run_dir, run)
        log_reset = False
        if log_path != detail.log_path or first:
            detail.log_path = log_path
            detail.log = TextTail(log_path) if log_path else None
            log_reset = True
        text, restarted = detail.log.read() if detail.log is not None else ("", False)
        out.update(log=text, log_reset=log_reset or restarted, log_path=str(log_path or ""))
        stamp = file_stamp(run_dir / NOTES_FILE)
        if stamp != detail.notes_stamp or first:
            detail.notes_stamp = stamp
            out.update(notes_changed=True, notes=tuple(notes_of(run_dir)))
        stamp = file_stamp(run_dir / RUN_CONFIG_FILE)
        if stamp != detail.config_stamp or first:
            detail.config_stamp = stamp
            try:
                out.update(config_changed=True, config=run_config_of(run_dir))
            except Exception as exc:
                out.update(config_changed=True, config=None, config_error=str(exc))
        report = report_of(run_dir)
        stamp = (report or {}).get("bytes"), (report or {}).get("written")
        if stamp != detail.report_stamp or first:
            detail.report_stamp = stamp
            out.update(report_changed=True, report=report)
        detail.first = False
        return Detail(**out)

