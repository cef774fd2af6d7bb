"""The queue runner process, and what the window uses to start, watch and stop it.

``spacrq queue run FILE`` runs a queue in its own process, detached from any
window: closing or crashing the window never stops the night, and reopening
it finds the runner through ``runner.json`` in the queue's own logs folder
(:func:`~spacrq.queue.store.logs_dir`).  The runner holds the queue's runner
lock for its whole life (:mod:`spacrq.queue.locks`), so a second runner on
the same file refuses (naming the process that holds it) instead of running
every job twice; the kernel releases it when the runner dies, however it
dies, so a crash never leaves the queue locked.

Pane-facing API (no Qt, cheap enough to call from a poller):
:func:`start_runner`, :func:`runner_state`, :func:`request_stop`,
:func:`logs_dir`.
"""
from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from spacrq.procs import ProcessRef, is_alive, module_argv, spawn_detached
from spacrq.queue.control import ABORT, STOP_AFTER_JOB, Control
from spacrq.queue.engine import _UNSET, run_queue
from spacrq.queue import keeper as keepers
from spacrq.queue.direct import DirectStarter
from spacrq.queue.jobproc import Supervisor
from spacrq.queue.layout import RUNNER_FILE, refuse_other_names
from spacrq.queue.locks import (RUNNER_LOCK_FILE, RunnerLock, flock_holder, linked_logs,
                                refuse_linked_logs, runner_holds)
from spacrq.queue.resume import load_for_run
from spacrq.queue.model import QueueError, now_iso
from spacrq.queue.store import legacy_logs_dir, load_queue, logs_dir
from spacrq.queue.summary import Progress, QueueResult
from spacrq.runfiles import (CONTROL_FILE, RunFileError, append_jsonl, ask, clear, read_json,
                             write_json)

__all__ = ["start_runner", "runner_state", "request_stop", "logs_dir", "serve",
           "RUNNER_FILE", "LOCK_FILE"]

LOCK_FILE = RUNNER_LOCK_FILE
RUNNER_LOG = "runner.log"
_HEARTBEAT_MIN = 0.25


def runner_state(path: str | os.PathLike) -> dict[str, Any] | None:
    """``runner.json`` plus ``"alive"``; None when this queue never had a runner.

    A runner recorded as running whose process is gone is reported as
    ``"crashed"``: the queue needs a Resume, not patience.
    """
    folder = logs_dir(path)
    if not (folder / RUNNER_FILE).exists():
        folder = legacy_logs_dir(path) or folder  # a runner of the old layout
    try:
        doc = read_json(folder / RUNNER_FILE, default=None)
        problem = ("it is empty or missing" if doc is None else
                   "" if isinstance(doc, dict) else "it is not an object")
    except RunFileError as exc:
        doc, problem = None, str(exc).splitlines()[0]
    if not isinstance(doc, dict):
        doc = None
    if doc is not None and isinstance(doc.get("queue"), str) \
            and os.path.realpath(doc["queue"]) != os.path.realpath(path):
        doc, problem = None, "it names another queue"  # (the old shared folder's)
    if doc is None:
        # the record cannot be read (or is not this queue's), but the kernel knows whether a
        # runner holds the queue: never "no runner" while one runs
        if not runner_holds(logs_dir(path)):
            return None
        return {"state": "running", "alive": True, "pid": _lock_holder(logs_dir(path)),
                "problem": f"its record {folder / RUNNER_FILE} cannot be read ({problem}); "
                           "it is rewritten at the runner's next heartbeat"}
    pid = doc.get("pid")
    doc["pid"] = pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None
    if not isinstance(doc.get("state"), str):
        doc["state"] = "unknown"
    if doc["state"] in ("running", "starting"):
        try:
            alive = bool(doc["pid"]) and is_alive(doc["pid"],
                                                  float(doc.get("started") or 0) or None)
        except (TypeError, ValueError):
            alive = False
        held = not alive and runner_holds(logs_dir(path))  # (not rewritten yet, or another's)
    else:
        # A run's last state is written once it let its lock go (or, refusing to start, just
        # before): whatever runs under the pid it names, it runs this queue no more — and a
        # runner that holds the lock now is another, which could not replace this record.
        alive, held = False, runner_holds(logs_dir(path))
    if held:
        holder = _lock_holder(logs_dir(path))
        if doc["state"] in ("running", "starting") and doc["pid"] is not None \
                and holder in (None, doc["pid"]):
            alive = True  # (its own record, whose process looked gone a moment: it holds on)
        elif doc["state"] not in ("running", "starting") and holder is not None \
                and holder == doc["pid"]:
            pass  # (the runner that wrote it is letting its lock go: it runs no more)
        else:
            # an earlier run's record (it "crashed", it "finished", or named a process long
            # gone): the runner that holds the queue now could not replace it (a full disk)
            return {"state": "running", "alive": True, "pid": holder, "queue": str(path),
                    "problem": f"its record {folder / RUNNER_FILE} still describes an earlier "
                               f"run ({doc['state']}): it could not be rewritten yet (a "
                               "full disk?); it is rewritten at the runner's next heartbeat"}
    doc["alive"] = alive
    if doc.get("state") in ("running", "starting") and not alive:
        ended = _ended_in_history(path, doc["pid"])
        linked = linked_logs(logs_dir(path))
        if ended is None and linked:  # (it stops when it finds one, and cannot write it down)
            doc["state"] = "ended"
            doc["problem"] = doc["stopped_reason"] = (
                f"{linked}; its runner could not write down how it ended there, and the "
                "queue file's jobs say what ran")
        elif ended is None:
            doc["state"] = "crashed"
        else:  # (its last write failed, a full disk: its history says how it ended)
            doc["state"] = ended.get("state") if isinstance(ended.get("state"), str) \
                else "finished"
            doc.setdefault("finished_at", ended["at"])
            doc["problem"] = (f"its record {folder / RUNNER_FILE} could not be written when it "
                              "ended (a full disk?); its history says it ended")
    return doc


def _ended_in_history(path: str | os.PathLike, pid: Any) -> dict | None:
    """The "ended" line of runner ``pid``'s last start in the queue's history, if it has one
    (looked at only for a runner whose record says it runs while it is gone)."""
    if not pid:
        return None
    last = None
    for line in runner_history(path):
        if line.get("pid") == pid:
            last = line if line["event"] == "ended" else None
    return last


def _lock_holder(folder: Path) -> int | None:
    """The pid the runner wrote into its lock file, when it reads as one; else (it could
    not write it: a full disk) the pid the kernel says holds the lock."""
    try:
        text = (folder / RUNNER_LOCK_FILE).read_text(encoding="utf-8", errors="replace")
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return flock_holder(folder / RUNNER_LOCK_FILE)


def request_stop(path: str | os.PathLike, now: bool = False) -> dict[str, Any]:
    """Ask the runner to stop after the running job, or (``now``) to abort it.

    An abort that cannot be written down (a full disk: ``control.json`` is replaced
    whole) is sent as a SIGTERM to the runner instead, which aborts the same way; the
    document returned then says so (``signalled``: the pid).

    :returns: the control document as it now stands.
    :raises OSError, RunFileError: the request could not be made.
    """
    try:
        return ask(logs_dir(path), stop=ABORT if now else STOP_AFTER_JOB)
    except (OSError, RunFileError) as exc:
        pid = _signal_runner(path) if now else None
        if pid is None:
            raise
        reason = str(getattr(exc, "strerror", None) or exc).splitlines()[0]
        return {"stop": ABORT, "signalled": pid, "why": reason}


def _signal_runner(path: str | os.PathLike) -> int | None:
    """SIGTERM to the runner of the queue: only to a live process that holds the queue's
    runner lock — as the kernel says where it can (Linux), else as the lock file and the
    runner's record say — and whose command is spacrq's (never a pid reused by something
    else); its pid, or None when there is no such process."""
    import psutil
    logs = logs_dir(path)
    if not runner_holds(logs):
        return None
    # (the kernel's word first: a pid written in a file may name another process)
    pid = flock_holder(logs / RUNNER_LOCK_FILE) or (runner_state(path) or {}).get("pid") \
        or _lock_holder(logs)
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return None
    try:
        command = " ".join(psutil.Process(pid).cmdline())
        if "spacrq" not in command:
            return None
        os.kill(pid, signal.SIGTERM)
    except (psutil.Error, OSError):
        return None
    return pid


def start_runner(path: str | os.PathLike, *, resume: bool = False,
                 retry_failed: bool = False, without_kept_state: bool = False) -> ProcessRef:
    """Start ``spacrq queue run|resume PATH`` detached; returns at once.

    :raises QueueError: the file is not there, or a runner is already running this queue.
    """
    target = Path(path).resolve()
    if not target.is_file():
        load_queue(target)  # raises the one-sentence reason
    refuse_linked_logs(logs_dir(target))  # (before the runner's log is opened in it)
    refuse_other_names(target)
    state = runner_state(target)
    if state and state.get("alive"):
        raise QueueError(f"this queue is already being run by process {state.get('pid')}; "
                         "stop it first or wait for it to finish")
    argv = module_argv("spacrq", "queue", "resume" if resume or retry_failed else "run",
                       str(target))
    if retry_failed:
        argv.append("--retry-failed")
    if without_kept_state:  # (the operator said so: see spacrq.queue.cli._kept_state)
        argv.append("--no-kept-state")
    log = logs_dir(target) / RUNNER_LOG
    told, tell = os.pipe()
    try:
        # the runner starts under its keeper (spacrq.queue.keeper), which tells its pid
        popen = spawn_detached(keepers.keeper_argv(argv, logs_dir(target), tell), log_path=log,
                               cwd=target.parent, pass_fds=(tell,))
    except OSError as exc:
        raise QueueError(f"could not start the runner ({exc.strerror or exc}); check that "
                         f"{log.parent} is a writable folder") from None
    finally:
        os.close(tell)
    try:
        ref = ProcessRef.of(_told_pid(told) or popen.pid)
    finally:
        os.close(told)
    _record_starting(target, ref, keeper=popen.pid)
    return ref


def _told_pid(fd: int, timeout: float = 10.0) -> int | None:
    """The runner's pid as its keeper tells it on ``fd`` (None: it did not, in time)."""
    data, deadline = b"", time.monotonic() + timeout
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 64)
        if not chunk:
            break
        data += chunk
    try:
        return int(data.split(b"\n")[0]) or None
    except ValueError:
        return None


#: one line per runner start and end, so the morning report can tell a night that crashed
HISTORY_FILE = "runner-history.jsonl"


def _history(path: Path, event: str, **fields: Any) -> None:
    """Append the runner's start or end to the queue's history (never fatal).

    A start with no end before the next start is a runner that died: a
    crash, a kill or a reboot, which the morning report names.
    """
    if linked_logs(logs_dir(path)):
        return  # (never through a link: the report's note of this turn is all that is lost)
    try:
        append_jsonl(logs_dir(path) / HISTORY_FILE,
                     {"event": event, "pid": os.getpid(), "at": now_iso(), **fields})
    except (OSError, RunFileError):
        pass  # the run goes on; only the report's crash note is lost


def runner_history(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The queue's runner starts and ends, oldest first (unreadable lines skipped; none when
    the history cannot be read at all: a folder in its place, no permission)."""
    from spacrq.runfiles import read_jsonl
    try:
        lines = read_jsonl(logs_dir(path) / HISTORY_FILE)
    except OSError:
        return []
    return [r for r in lines
            if r.get("event") in ("started", "ended") and isinstance(r.get("at"), str)]


def _record_starting(path: Path, ref: ProcessRef, keeper: int | None = None) -> None:
    """Name the runner in ``runner.json`` as ``starting`` until it writes its own record.

    Between the start and the runner's first write, whoever asks (a second
    Run, ``status --follow``, the pane) must see a runner on its way, not the
    record of the last run.  The runner replaces this record as soon as it
    holds the queue; it is never written over the runner's own.
    """
    target = logs_dir(path) / RUNNER_FILE
    try:
        doc = read_json(target, default=None)
    except RunFileError:
        doc = None
    if isinstance(doc, dict) and doc.get("pid") == ref.pid:
        return  # the runner was quicker
    try:
        write_json(target, {"pid": ref.pid, "started": ref.started, "host": socket.gethostname(),
                            "queue": str(path), "state": "starting", "current_job": None,
                            "started_at": now_iso(), "heartbeat_at": time.time(),
                            **({"keeper": keeper} if keeper and keeper != ref.pid else {})},
                   durable=False)
    except OSError:
        pass  # the runner writes its own record; this one only closes a gap


QueueLock = RunnerLock  # the old name


class _RunnerFile:
    """``runner.json``: who runs the queue, what it is doing, and a heartbeat."""

    def __init__(self, path: Path, keeper: int | None = None) -> None:
        self.file = logs_dir(path) / RUNNER_FILE
        me = ProcessRef.of(os.getpid())
        self.doc: dict[str, Any] = {"pid": me.pid, "started": me.started,
                                    "host": socket.gethostname(), "queue": str(path),
                                    "state": "running", "current_job": None,
                                    "started_at": now_iso(), "heartbeat_at": time.time()}
        if keeper:
            self.doc["keeper"] = keeper
        self._last = 0.0

    def write(self, **changes: Any) -> None:
        """Replace runner.json atomically, without fsync: after a power cut the runner
        is gone whatever the file says, and ``runner_state`` reports it crashed.
        A write that fails is said once in the runner's log; the run goes on."""
        self.doc.update(changes)
        self.doc["heartbeat_at"] = time.time()
        self._last = time.monotonic()
        try:
            problem = linked_logs(self.file.parent)
            if problem:
                raise RunFileError(problem, self.file)
            write_json(self.file, self.doc, durable=False)
            self._problem = ""
        except (OSError, RunFileError) as exc:
            reason = str(getattr(exc, "strerror", None) or exc)
            if reason != getattr(self, "_problem", ""):
                print(f"spacrq: could not write {self.file} ({reason}); the run goes on",
                      file=sys.stderr, flush=True)
            self._problem = reason

    def beat(self) -> None:
        self.write()

    def progress(self, event: Progress) -> None:
        if event.event == "job_started":  # kept current; written at most 4 times a second
            self.doc["current_job"] = event.job_id
            self.doc["index"] = event.index
            self.doc["total"] = event.total
            if time.monotonic() - self._last >= _HEARTBEAT_MIN:
                self.write()


def _report(text: str) -> None:
    print(f"spacrq: {text}", file=sys.stderr, flush=True)


def serve(path: str | os.PathLike, *, resume: bool = False, retry_failed: bool = False,
          on_error: str | None = None, max_consecutive_failures: Any = _UNSET,
          echo: bool = True) -> QueueResult:
    """Be the runner of the queue at ``path`` until it ends (the body of ``queue run``).

    :raises QueueError: another runner holds the queue, or the queue cannot
        start (every problem listed).
    """
    target = Path(path).resolve()
    if not target.is_file():
        load_queue(target)  # raises the one-sentence reason, before any logs folder exists
    keeper = keepers.kept_by()
    os.environ.pop(keepers.KEEPER_ENV, None)  # (the jobs' environment is the runner's)
    lock = RunnerLock(logs_dir(target), path).acquire()
    try:
        refuse_other_names(target)  # (under the lock: a link made meanwhile is seen)
    except QueueError:
        lock.release()
        raise
    if keeper:  # jobs are this process's own children; the keeper records what it leaves
        supervisor: Any = DirectStarter(keeper, fallback=Supervisor())
    else:
        supervisor = Supervisor()
        supervisor.warm()  # its start-up overlaps the runner's own (load, check, first write)
    control = Control(logs_dir(target), report=_report)
    previous = {}

    def on_signal(signum: int, _frame: Any) -> None:
        control.signalled = ABORT

    in_main_thread = threading.current_thread() is threading.main_thread()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP) if in_main_thread else ():
        if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup's choice is kept
            previous[sig] = signal.signal(sig, on_signal)
    info = _RunnerFile(target, keeper)
    try:
        queue, key = load_for_run(target, resume, retry_failed)
        try:
            clear(logs_dir(target))
        except OSError as exc:  # (a folder in its place: read as nothing asked, and said)
            print(f"spacrq: could not remove the old request {logs_dir(target) / CONTROL_FILE}"
                  f" ({exc.strerror or exc}); a control file that cannot be read asks nothing: "
                  "move it away to ask this runner to stop", file=sys.stderr, flush=True)
        info.write()
        _history(target, "started", resume=bool(resume or retry_failed))
        result = run_queue(queue, target, on_error=on_error,
                           max_consecutive_failures=max_consecutive_failures,
                           on_progress=info.progress, control=control,
                           heartbeat=info.beat, echo=echo, loaded_key=key,
                           release_lock=lock.release, supervisor=supervisor,
                           wait_to_save=True)
        info.write(state=result.state, current_job=None,
                   finished_at=result.finished, headline=result.headline(),
                   stopped_reason=result.stopped_reason)
        _history(target, "ended", state=result.state)
        return result
    except QueueError as exc:
        info.write(state="stopped", current_job=None,
                   error=str(exc).splitlines()[0])
        raise
    except BaseException as exc:
        info.write(state="crashed", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        supervisor.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        lock.release()
