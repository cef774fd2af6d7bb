"""One job, one process: started in its own process group, logged to its own file.

A separate process is the point: a segfaulting library or a wedged driver
kills that job, not the other eleven and not the runner.  The job gets its
own process group so that stopping it (abort, timeout) stops whatever it
started too: SIGTERM to the group, a grace period (``SPACRQ_GRACE``, 10 s by
default), then SIGKILL.

Jobs are started by the runner itself when a keeper watches over it
(:mod:`spacrq.queue.direct`, :mod:`spacrq.queue.keeper`), else by the run's
supervisor process (:mod:`spacrq.queue.supervise`); either way something that
outlives the runner writes down how each job ended.  A ``command``
job is executed directly (it needs no module code); a spaCR
job is ``python -m spacr.cli KEY …``; any other module runs through
``python -m spacrq.run MODULE --settings <resolved settings>``.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import orjson
import psutil

from spacrq.modules import ModuleSpec
from spacrq.modules.spacr import cli_argv, is_spacr
from spacrq.procs import ProcessRef, module_argv, stop_group
from spacrq.queue.control import Control
from spacrq.queue.model import Job, now_iso
from spacrq.queue.supervise import exit_record_path
from spacrq.runfiles import RunFileError, append_text, read_jsonl

HEARTBEAT_SECONDS = 2.0
#: A job that has run this long is one nobody waits on: the runner's housekeeping goes then.
IDLE_AFTER = 0.2


class JobTimeout(Exception):
    """The job ran past its timeout and was stopped; ``code``: its exit code as its
    supervisor saw it end (None when that was not heard within a moment)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class JobCancelled(Exception):
    """The operator aborted the queue while this job ran; it was stopped safely."""


def grace_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get("SPACRQ_GRACE", 10)))
    except ValueError:
        return 10.0


def job_command(job: Job, spec: ModuleSpec, settings: dict, settings_path: str) -> list[str]:
    """The argv that runs ``job`` (never a shell string)."""
    if spec.name == "command":
        return [str(a) for a in settings.get("argv") or []]
    key = is_spacr(spec)
    if key:
        if job.settings_path:
            return cli_argv(key, job.settings_path, job.override_args)
        return cli_argv(key, settings_path, [])
    return module_argv("spacrq.run", spec.name, "--settings", settings_path)


_ENVIRON: list = [None, {}]  # os.environ as last copied: (its raw bytes, its text)


def _here() -> str:
    """The runner's working folder, as the log header names it (one removed under it is
    said, not raised: the job runs, or fails, on its own)."""
    try:
        return os.getcwd()
    except OSError:
        return "(the runner's working folder, which was removed)"


def _environ_base() -> dict[str, str]:
    """``os.environ`` as text, the same object until it changes (never change it): decoded
    again only when it changed (decoding it whole for every job cost more than the rest
    of preparing the job)."""
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):
        return dict(os.environ)
    if raw != _ENVIRON[0]:
        _ENVIRON[0], _ENVIRON[1] = dict(raw), dict(os.environ)
    return _ENVIRON[1]


def _environ() -> dict[str, str]:
    """A copy of ``os.environ`` (see :func:`_environ_base`)."""
    return dict(_environ_base())


def job_env_changes(job: Job, settings: dict, spec: ModuleSpec, log_path: str) -> dict[str, str]:
    """What the job's environment sets on top of the runner's own."""
    env = {str(k): str(v) for k, v in (job.env or {}).items()}
    if spec.name == "command":
        env.update({str(k): str(v) for k, v in (settings.get("env") or {}).items()})
    env["SPACRQ_JOB_ID"] = job.id
    env["SPACRQ_JOB_LOG"] = log_path
    return env


def job_environment(job: Job, settings: dict, spec: ModuleSpec, log_path: str) -> dict[str, str]:
    env = _environ()
    env.update(job_env_changes(job, settings, spec, log_path))
    return env


def _dumps(message: dict) -> bytes:
    """One message line (orjson where it can: the runner waits on every message)."""
    try:
        return orjson.dumps(message, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # (an integer beyond 64 bits)
        return json.dumps(message, default=str).encode()


def job_cwd(job: Job, settings: dict, spec: ModuleSpec) -> str | None:
    if spec.name == "command" and settings.get("cwd"):
        return os.path.expanduser(str(settings["cwd"]))
    return os.path.expanduser(job.cwd) if job.cwd else None


class JobNotStarted(Exception):
    """The job's program could not be started (not found, its log cannot be opened)."""


class SupervisorLost(Exception):
    """The job's supervisor process died: the attempt's outcome is unknown."""


class Supervisor:
    """The runner's end of :mod:`spacrq.queue.supervise`: one per run, started on first use."""

    def __init__(self) -> None:
        self.popen: subprocess.Popen | None = None
        self._buffer = b""
        self._owed = 0  # answers still to come for jobs abandoned mid-run (an interrupt)
        self._base_env: dict | None = None  # the environment this supervisor already has

    def _ensure(self) -> subprocess.Popen:
        if self.popen is None or self.popen.poll() is not None:
            self.popen = None
            try:
                self.popen = subprocess.Popen(module_argv("spacrq.queue.supervise"),
                                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              start_new_session=True, close_fds=True)
            except OSError as exc:  # (no process or no descriptor to be had: the job neither)
                raise JobNotStarted(f"its supervisor process could not be started "
                                    f"({exc.strerror or exc}); the machine is out of processes "
                                    "or open files (ulimit -n, ulimit -u)") from None
            self._buffer, self._owed, self._base_env = b"", 0, None
        return self.popen

    def warm(self) -> None:
        """Start the supervisor now, so its start-up overlaps the runner's own."""
        try:
            self._ensure()
        except JobNotStarted:
            pass  # (said by the first job that needs it)

    def _line(self, timeout: float | None) -> dict | None:
        """The next answer; None when none came within ``timeout``.  :raises SupervisorLost:"""
        if self.popen is None or self.popen.stdout is None:
            raise SupervisorLost("the job's supervisor is not running")
        fd = self.popen.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise SupervisorLost("the job's supervisor process ended unexpectedly")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            answer = orjson.loads(line)
        except ValueError:
            raise SupervisorLost("the job's supervisor answered garbage") from None
        return answer if isinstance(answer, dict) else {}

    def _env_part(self, env: dict | None) -> dict:
        """The request's environment: only what differs from what the supervisor holds.

        Every job's environment is nearly the runner's; sending it whole, and
        parsing it there, was a cost every job paid for nothing.
        """
        if env is None:
            return {}
        base = self._base_env
        if base is not None:
            changed = {k: v for k, v in env.items() if base.get(k) != v}
            gone = [k for k in base if k not in env]
            if len(changed) + len(gone) <= 16:
                return {"env_set": changed, "env_unset": gone}
        self._base_env = dict(env)
        return {"base_env": self._base_env, "env_set": {}}

    def _env_changes(self, base: dict, changes: dict) -> dict:
        """The environment as ``base`` (the runner's, as :func:`_environ_base` gives it) with
        ``changes``: ``base`` is sent once, and again only when it is another object."""
        if self._base_env is not base:
            self._base_env = base
            return {"base_env": base, "env_set": changes}
        return {"env_set": changes, "env_unset": []}

    def _send(self, message: dict) -> None:
        assert self.popen is not None and self.popen.stdin is not None
        try:
            self.popen.stdin.write(_dumps(message) + b"\n")
            self.popen.stdin.flush()
        except (OSError, ValueError):
            raise SupervisorLost("the job's supervisor process is gone") from None

    def start(self, request: dict, ready: Callable[[], None] | None = None) -> dict:
        """Send one job; its first answer (``pid``, or ``exit`` when it ended or could not start).

        With ``ready`` the job is sent ahead and ``ready()`` (the runner's
        durable "running") is called meanwhile; the job starts only once
        it returned, so the supervisor's preparations (the log opened, the
        environment made) overlap the runner's write instead of following it.
        ``ready`` is called exactly once, even when the supervisor is gone.
        """
        self.send(request, ready)
        answer = self._line(120.0)
        if answer is None:
            raise SupervisorLost("the job's supervisor did not answer within 120 s")
        return answer

    def send(self, request: dict, ready: Callable[[], None] | None = None) -> None:
        """:meth:`start` without waiting: the answers come to :meth:`wait`."""
        try:
            self._ensure()
            while self._owed:  # the previous job was stopped: skip its late answer
                answer = self._line(60.0)
                if answer is None or "exit" in answer:
                    self._owed -= 1
            request = dict(request, hold=ready is not None)
            if "env" in request:
                request.update(self._env_part(request.pop("env")))
            elif "env_changes" in request:
                request.update(self._env_changes(request.pop("env_base"),
                                                 request.pop("env_changes")))
            self._send(request)
        except BaseException:
            if ready is not None:
                ready()
            raise
        if ready is not None:
            try:
                ready()
            except BaseException:
                try:  # the job never started: the supervisor drops it
                    self._send({"drop": request["key"]})
                except SupervisorLost:
                    pass
                raise
            self._send({"go": request["key"]})

    def wait(self, timeout: float) -> dict | None:
        """The job's ``exit`` answer, or None while it still runs."""
        while True:
            answer = self._line(timeout)
            if answer is None or "exit" in answer:
                return answer

    def answer(self, timeout: float) -> dict | None:
        """The next answer about the job at hand (``pid`` or ``exit``); None if none came."""
        return self._line(timeout)

    def stop(self, ref: ProcessRef, grace: float) -> str:
        """Stop the job's process group (SIGTERM, ``grace``, SIGKILL); how it went."""
        return stop_group(ref.pid, grace, started=ref.started)

    def abandon(self) -> None:
        self._owed += 1

    # What a starter that starts jobs itself does between jobs (see
    # spacrq.queue.direct.DirectStarter); this supervisor process has none of it to do.
    def open_ahead(self, log: str, record: str) -> None:
        pass

    def settle(self, now: bool = False) -> None:
        pass

    def idle(self) -> None:
        pass

    def lost(self) -> None:
        """The supervisor died or cannot be talked to: let go of it (killed, reaped), so the
        next job starts one of its own instead of writing to a dead pipe."""
        popen, self.popen = self.popen, None
        self._buffer, self._owed, self._base_env = b"", 0, None
        if popen is None:
            return
        try:
            popen.kill()
        except OSError:
            pass
        try:
            popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (popen.stdin, popen.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass

    def close(self, timeout: float = 30.0) -> None:
        """Let the supervisor end (it finishes a job it still watches first)."""
        if self.popen is None:
            return
        try:
            self.popen.stdin.close()
        except OSError:
            pass
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        self.popen = None


@dataclass(frozen=True)
class JobPlan:
    """What starting one job takes that depends only on its settings and its log: made
    while the job before it runs (the runner looks ahead), so the moment between two
    jobs is spent only on what cannot be known before the first one ended."""

    settings: dict
    log_path: str
    argv: list
    cwd: str | None
    env_changes: dict
    record: str
    header: str  # the log header's lines after the "started" one

    @classmethod
    def of(cls, job: Job, spec: ModuleSpec, settings: dict, settings_path: str,
           log_path: str) -> "JobPlan":
        argv = job_command(job, spec, settings, settings_path)
        cwd = job_cwd(job, settings, spec)
        return cls(settings, log_path, argv, cwd, job_env_changes(job, settings, spec, log_path),
                   exit_record_path(log_path),
                   f"# cwd {cwd or _here()}\n# argv {argv!r}\n"
                   f"# settings {_dumps(settings).decode()}\n")

    def fits(self, job: Job, settings: dict, log_path: str) -> bool:
        """Whether this plan was made from these very settings for this log."""
        return self.settings is settings and self.log_path == log_path


@dataclass
class _Attempt:
    """What the runner knows of the job it started: its process once named, and whether
    its end was heard."""

    ref: ProcessRef | None = None
    ended: bool = False


@dataclass
class ProcessRunner:
    """Runs jobs as processes (through the :class:`Supervisor`) and watches them.

    ``on_spawn(job, ref)`` is told the process once it has run for a moment
    (a job that ends first is never announced: it is told by its end);
    ``meanwhile()`` is called once the job was sent, and ``idle()`` once it
    has run a while (:data:`IDLE_AFTER`), for the runner's housekeeping
    nobody should wait for; ``heartbeat()`` is called every couple of
    seconds while a job runs.
    Timeout and abort are the runner's: it stops the job's process group,
    and the supervisor reports the exit.
    """

    control: Control | None = None
    grace: float | None = None
    on_spawn: Callable[[Job, ProcessRef], None] | None = None
    heartbeat: Callable[[], None] | None = None
    supervisor: Supervisor = field(default_factory=Supervisor)
    meanwhile: Callable[[], None] | None = None
    idle: Callable[[], None] | None = None

    def run(self, job: Job, spec: ModuleSpec, settings: dict, settings_path: str,
            log_path: str, *, before: dict | None = None, folders: list | None = None,
            ready: Callable[[], None] | None = None, plan: JobPlan | None = None) -> int:
        """Run the job to its end; its exit code.  ``ready()``: see :meth:`Supervisor.start`;
        ``plan``: the job's :class:`JobPlan`, when it was made ahead (see :meth:`JobPlan.of`)."""
        if plan is None or not plan.fits(job, settings, log_path):
            plan = JobPlan.of(job, spec, settings, settings_path, log_path)
        grace = grace_seconds() if self.grace is None else self.grace
        # The header is written by the supervisor, which opens the log for the job anyway.
        header = (f"# spacrq job {job.id} ({job.label}), attempt {job.attempts}\n"
                  f"# started {now_iso()}\n{plan.header}")
        request = {"job": job.id, "key": job.started, "argv": plan.argv, "cwd": plan.cwd,
                   "header": header, "env_base": _environ_base(),
                   "env_changes": plan.env_changes, "log": log_path,
                   "record": plan.record, "grace": grace,
                   "before": before or {}, "folders": folders or []}
        for chance in (1, 2):  # a second only when the first supervisor died before the job
            attempt = _Attempt()
            try:
                self.supervisor.send(request, ready)
                if self.meanwhile is not None:
                    self.meanwhile()
                end = self._watch(job, attempt, log_path, grace)
            except SupervisorLost as exc:
                self.supervisor.lost()  # the next job gets a supervisor of its own
                ref = attempt.ref or _started_anyway(job, log_path)
                if ref is None and chance == 1:  # it never started: start it now, once
                    ready = None  # (its "running" is on disk already)
                    _log(log_path, f"# spacrq: {exc} before it started this job; starting it "
                                   "again under a new supervisor\n")
                    continue
                outcome = _stop_unended(self.supervisor, ref, attempt, grace)
                if outcome:
                    _log(log_path, f"\n# spacrq: {exc} while the job ran; its processes were "
                                   f"{outcome}, so that nothing runs unwatched (grace "
                                   f"{grace:g}s)\n")
                raise
            except JobNotStarted:  # (from send: no supervisor could be started, so nothing ran
                raise              # and there is nothing to look for or stop)
            except BaseException:
                if attempt.ref is None and not attempt.ended:  # named within a moment
                    try:
                        self._next(job, attempt, 1.0)
                    except SupervisorLost:
                        self.supervisor.lost()
                    attempt.ref = attempt.ref or _started_anyway(job, log_path)
                _stop_unended(self.supervisor, attempt.ref, attempt, grace)
                if not attempt.ended and self.supervisor.popen is not None:
                    self.supervisor.abandon()  # its end is still to come
                raise
            break
        if end.get("not_started"):
            raise JobNotStarted(str(end.get("error") or f"exited with code {end['exit']}"))
        return int(end["exit"])

    def open_ahead(self, plan: JobPlan) -> None:
        """The next job's log and exit record opened now, while the job at hand runs, where
        the supervisor starts jobs itself (:meth:`spacrq.queue.direct.DirectStarter.open_ahead`)."""
        self.supervisor.open_ahead(plan.log_path, plan.record)

    def settle(self, now: bool = False) -> None:
        """The job before, reaped now, where the supervisor starts jobs itself (else when
        the next one is sent); with ``now`` its end written down at once too."""
        self.supervisor.settle(now)

    def let_go_ahead(self) -> None:
        """The job at hand ran a while: what :meth:`open_ahead` opened is let go of."""
        self.supervisor.idle()

    def _next(self, job: Job, attempt: "_Attempt", timeout: float) -> dict | None:
        """The job's ``exit`` answer if it came within ``timeout``; a ``pid`` one names it."""
        answer = self.supervisor.answer(timeout)
        if answer is None:
            return None
        if "exit" in answer:
            attempt.ended = True
            return answer
        if "pid" in answer and attempt.ref is None:
            self._named(job, attempt, ProcessRef(int(answer["pid"]),
                                                 float(answer.get("started") or 0.0)))
        return None

    def _named(self, job: Job, attempt: "_Attempt", ref: ProcessRef) -> None:
        attempt.ref = ref
        if self.on_spawn is not None:
            self.on_spawn(job, ref)

    def _watch(self, job: Job, attempt: "_Attempt", log_path: str, grace: float) -> dict:
        """The job's ``exit`` answer; ``attempt.ref`` is its process once it is named."""
        started = time.monotonic()
        deadline = started + job.timeout if job.timeout else None
        beat = started + HEARTBEAT_SECONDS
        idle = self.idle
        while True:
            wait = 0.2 if deadline is None or attempt.ref is None else \
                max(0.0, min(0.2, deadline - time.monotonic()))
            answer = self._next(job, attempt, wait)
            if answer is not None:
                return answer
            now = time.monotonic()
            if idle is not None and now - started >= IDLE_AFTER:
                idle()
                idle = None
            if attempt.ref is None:  # not named yet (it is, within a moment): its record names it
                ref = _recorded_start(log_path, job.started)
                if ref is not None:
                    self._named(job, attempt, ref)
                elif now - started > 120.0:
                    raise SupervisorLost("the job's supervisor did not answer within 120 s")
                else:
                    continue
            ref = attempt.ref
            if self.control is not None and self.control.abort_requested():
                outcome = self.supervisor.stop(ref, grace)
                end = self._ended_by_itself(job, attempt, outcome)
                if end is not None:
                    return end  # (the queue stops after it: the abort is still asked)
                _log(log_path, f"\n# aborted by the operator at {now_iso()}; the job's "
                               f"processes were {outcome} (grace {grace:g}s)\n")
                raise JobCancelled(outcome)
            if deadline is not None and now >= deadline:
                outcome = self.supervisor.stop(ref, grace)
                end = self._ended_by_itself(job, attempt, outcome)
                if end is not None:
                    return end
                _log(log_path, f"\n# timeout: still running after {job.timeout:g}s; the job's "
                               f"processes were {outcome}\n")
                end = self._next(job, attempt, 2.0)  # its exit code, as the supervisor saw it
                raise JobTimeout(f"still running after its timeout of {job.timeout:g}s; "
                                 f"stopped ({outcome})",
                                 code=int(end["exit"]) if end and "exit" in end else None)
            if self.heartbeat is not None and now >= beat:
                beat = now + HEARTBEAT_SECONDS
                self.heartbeat()

    def _ended_by_itself(self, job: Job, attempt: "_Attempt", outcome: str) -> dict | None:
        """The job's own end when it had ended before it was to be stopped (``outcome``
        "gone": it ended in the moment between the last look and the abort or timeout),
        so what it did is recorded as it ended — a job that succeeded is never recorded
        stopped, and run again."""
        if outcome != "gone":
            return None
        deadline = time.monotonic() + 5.0
        while not attempt.ended and time.monotonic() < deadline:
            end = self._next(job, attempt, max(0.0, deadline - time.monotonic()))
            if end is not None:
                return end
        return None


def _stop_unended(starter: "Supervisor", ref: ProcessRef | None, attempt: "_Attempt",
                  grace: float) -> str:
    """Stop the job's process group if it still runs and its end was not heard: a job is
    never left running behind the runner's back.  How it was stopped, or ''."""
    if ref is None or attempt.ended or not ref.alive():
        return ""
    return starter.stop(ref, grace)


def _started_anyway(job: Job, log_path: str) -> ProcessRef | None:
    """The job's process when its supervisor died and never named it to the runner: from
    its exit record, else found by the environment it was given (``SPACRQ_JOB_LOG``,
    for a supervisor that died between starting it and writing that down); None when
    no such process exists, so the job never started."""
    ref = _recorded_start(log_path, job.started)
    if ref is not None:
        return ref
    for proc in psutil.process_iter(["pid"]):
        try:
            env = proc.environ()
            if env.get("SPACRQ_JOB_LOG") == log_path and env.get("SPACRQ_JOB_ID") == job.id:
                leader = os.getpgid(proc.pid)  # the job leads its own group
                return ProcessRef.of(leader)
        except (psutil.Error, OSError):
            continue
    return None


def _recorded_start(log_path: str, key: str) -> ProcessRef | None:
    """The job's process as its supervisor recorded it (for a job not named to the runner)."""
    try:
        lines = read_jsonl(exit_record_path(log_path))
    except (OSError, RunFileError):
        return None
    for line in lines:
        if isinstance(line, dict) and line.get("key") == key and "pid" in line:
            return ProcessRef.from_dict({"pid": line.get("pid"), "started": line.get("started")})
    return None


def _log(path: str, text: str) -> None:
    """A line in the job's log; a log that cannot be written never stops the queue."""
    try:
        append_text(path, text, durable=False)
    except (OSError, RunFileError) as exc:
        print(f"spacrq: could not write {path} ({exc})", file=sys.stderr, flush=True)
