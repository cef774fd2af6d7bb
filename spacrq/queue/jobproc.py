"""One job, one process: started in its own process group, logged to its own file.

A separate process is the point: a segfaulting library or a wedged driver
kills that job, not the other eleven and not the runner.  The job gets its
own process group so that stopping it (abort, timeout) stops whatever it
started too: SIGTERM to the group, a grace period (``SPACRQ_GRACE``, 10 s by
default), then SIGKILL.

A ``command`` job is executed directly (it needs no module code); a spaCR
job is ``python -m spacr.cli KEY …``; any other module runs through
``python -m spacrq.run MODULE --settings <resolved settings>``.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from spacrq.modules import ModuleSpec
from spacrq.modules.spacr import cli_argv, is_spacr
from spacrq.procs import ProcessRef, stop_group
from spacrq.queue.control import Control
from spacrq.queue.model import Job, now_iso

HEARTBEAT_SECONDS = 2.0


class JobTimeout(Exception):
    """The job ran past its timeout and was stopped."""


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
    return [sys.executable, "-m", "spacrq.run", spec.name, "--settings", settings_path]


def job_environment(job: Job, settings: dict, spec: ModuleSpec, log_path: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (job.env or {}).items()})
    if spec.name == "command":
        env.update({str(k): str(v) for k, v in (settings.get("env") or {}).items()})
    env["SPACRQ_JOB_ID"] = job.id
    env["SPACRQ_JOB_LOG"] = log_path
    return env


def job_cwd(job: Job, settings: dict, spec: ModuleSpec) -> str | None:
    if spec.name == "command" and settings.get("cwd"):
        return os.path.expanduser(str(settings["cwd"]))
    return os.path.expanduser(job.cwd) if job.cwd else None


@dataclass
class ProcessRunner:
    """Runs jobs as processes and watches them for timeout and abort.

    ``on_spawn(job, ref)`` is told the process as soon as it exists, so the
    queue file records its pid (a resumed queue stops an orphan first);
    ``heartbeat()`` is called every couple of seconds while a job runs.
    """

    control: Control | None = None
    grace: float | None = None
    on_spawn: Callable[[Job, ProcessRef], None] | None = None
    heartbeat: Callable[[], None] | None = None

    def run(self, job: Job, spec: ModuleSpec, settings: dict, settings_path: str,
            log_path: str) -> int:
        argv = job_command(job, spec, settings, settings_path)
        cwd = job_cwd(job, settings, spec)
        with open(log_path, "ab") as log:
            log.write((f"# spacrq job {job.id} ({job.label}), attempt {job.attempts}\n"
                       f"# started {now_iso()}\n# cwd {cwd or os.getcwd()}\n"
                       f"# argv {argv!r}\n# settings {json.dumps(settings, default=str)}\n"
                       ).encode("utf-8", "replace"))
            log.flush()
            try:
                popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=cwd,
                                         env=job_environment(job, settings, spec, log_path),
                                         start_new_session=True)
            except OSError as exc:
                log.write(f"error: could not start {argv[0] if argv else '?'}: "
                          f"{exc.strerror or exc}\n".encode())
                return 127
            try:
                code = self._watch(job, popen, log)
            except BaseException:
                if popen.poll() is None:  # never leave a job running behind the runner's back
                    stop_group(popen.pid, self.grace if self.grace is not None else grace_seconds(),
                               popen=popen)
                raise
            log.write(f"\n# finished {now_iso()} with exit code {code}\n".encode())
            self._stop_leftovers(popen.pid, log)
        return code

    def _stop_leftovers(self, pgid: int, log: Any) -> None:
        """Stop what the job left running in its group: jobs run strictly one at a time.

        A job that started a background process and exited would otherwise
        overlap the next job (two jobs on one GPU).  The check is one
        ``killpg(pgid, 0)``, so a job that cleaned up after itself costs nothing.
        """
        if not _group_exists(pgid):
            return
        grace = grace_seconds() if self.grace is None else self.grace
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _group_exists(pgid) and time.monotonic() < deadline:
            time.sleep(0.02)
        outcome = "terminated"
        if _group_exists(pgid):
            _signal_group(pgid, signal.SIGKILL)
            outcome = "killed"
        log.write(f"# the job left processes running in its group after it ended; they were "
                  f"{outcome}\n".encode())

    def _watch(self, job: Job, popen: subprocess.Popen, log: Any) -> int:
        if self.on_spawn is not None:
            self.on_spawn(job, ProcessRef.of(popen.pid))
        started = time.monotonic()
        deadline = started + job.timeout if job.timeout else None
        beat = started + HEARTBEAT_SECONDS
        grace = grace_seconds() if self.grace is None else self.grace
        with _ExitWaiter(popen) as waiter:
            while True:
                wait = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
                code = waiter.wait(wait)
                if code is not None:
                    return code
                now = time.monotonic()
                if self.control is not None and self.control.abort_requested():
                    outcome = stop_group(popen.pid, grace, popen=popen)
                    log.write(f"\n# aborted by the operator at {now_iso()}; the job's processes "
                              f"were {outcome} (grace {grace:g}s)\n".encode())
                    raise JobCancelled(outcome)
                if deadline is not None and now >= deadline:
                    outcome = stop_group(popen.pid, grace, popen=popen)
                    log.write(f"\n# timeout: still running after {job.timeout:g}s; the job's "
                              f"processes were {outcome}\n".encode())
                    raise JobTimeout(f"still running after its timeout of {job.timeout:g}s; "
                                     f"stopped ({outcome})")
                if self.heartbeat is not None and now >= beat:
                    beat = now + HEARTBEAT_SECONDS
                    self.heartbeat()


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _ExitWaiter:
    """Wait for a child's exit with a timeout, waking the moment it exits.

    ``Popen.wait(timeout)`` polls with growing sleeps, which adds a
    millisecond or more to every short job; a pidfd (Linux 5.3+) lets the
    kernel wake the runner exactly when the job ends.
    """

    def __init__(self, popen: subprocess.Popen) -> None:
        self.popen = popen
        self.fd = -1
        self.poller: Any = None

    def __enter__(self) -> "_ExitWaiter":
        try:
            self.fd = os.pidfd_open(self.popen.pid)
            self.poller = select.poll()
            self.poller.register(self.fd, select.POLLIN)
        except (AttributeError, OSError):
            self.fd, self.poller = -1, None
        return self

    def wait(self, seconds: float) -> int | None:
        """The exit code, or None when the job still runs after ``seconds``."""
        if self.poller is not None:
            if not self.poller.poll(int(seconds * 1000)):
                return None
            return self.popen.wait()
        try:
            return self.popen.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def __exit__(self, *exc: Any) -> None:
        if self.fd >= 0:
            os.close(self.fd)
