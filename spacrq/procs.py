"""Starting, finding and stopping the processes that do the night's work.

Every runner spacrq starts — a queue runner, a job, a block worker, an
experiment — gets its own process group, so that stopping it stops whatever it
started too, and none of them is a child the window must wait for: closing the
window never stops the night.

A process is remembered as a :class:`ProcessRef` (pid *and* start time):
a pid alone is reused by the system after a reboot or a long night, and a
stale pid that now belongs to somebody's editor must never be signalled.

Stopping is an escalation, never a first move: :func:`stop_group` sends
SIGTERM to the whole group, waits a grace period, then SIGKILLs what is left.
"""
from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import psutil

__all__ = ["ProcessRef", "spawn_detached", "stop_group", "is_alive", "DEFAULT_GRACE",
           "grace_seconds", "interpreter", "module_argv", "code_argv"]

#: Seconds between SIGTERM and SIGKILL, unless ``SPACRQ_GRACE`` says otherwise.
DEFAULT_GRACE = 10.0


def grace_seconds() -> float:
    """The one grace setting: seconds a job, run or worker gets between being asked to
    stop (SIGTERM, or an abort request) and being killed.  ``SPACRQ_GRACE`` sets it."""
    try:
        value = float(os.environ.get("SPACRQ_GRACE", DEFAULT_GRACE))
    except ValueError:
        return DEFAULT_GRACE
    return max(0.0, value) if value == value and value != float("inf") else DEFAULT_GRACE


@dataclass(frozen=True)
class ProcessRef:
    """A process as it can be found again: pid plus its start time."""

    pid: int
    started: float = 0.0

    @classmethod
    def of(cls, pid: int) -> "ProcessRef":
        try:
            return cls(pid, psutil.Process(pid).create_time())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return cls(pid, 0.0)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> "ProcessRef | None":
        if not isinstance(doc, Mapping):
            return None
        try:
            return cls(int(doc["pid"]), float(doc.get("started") or 0.0))
        except (KeyError, TypeError, ValueError):
            return None

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "started": self.started}

    def alive(self) -> bool:
        return is_alive(self.pid, self.started)


def is_alive(pid: int | None, started: float | None = None) -> bool:
    """True when ``pid`` runs and (if ``started`` is given) is the same process.

    A zombie counts as gone: it has finished, nobody reaped it yet.
    """
    if not pid or pid <= 0:
        return False
    try:
        proc = psutil.Process(int(pid))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return not (started and abs(proc.create_time() - float(started)) > 1.0)
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def booted_at() -> float | None:
    """When this machine started, in seconds since the epoch (None when unknown).

    ``SPACRQ_BOOTED_AT`` stands in for it where a test plays a reboot by
    killing a runner, its keeper and its job at once."""
    try:
        given = float(os.environ["SPACRQ_BOOTED_AT"])
        if 0.0 < given <= time.time():  # (a moment past: not nan, inf, 1e400 or tomorrow)
            return given
    except (KeyError, ValueError):
        pass
    try:
        return float(psutil.boot_time())
    except (OSError, RuntimeError, ValueError, psutil.Error):
        return None


def _open_log(log_path: str | os.PathLike) -> int:
    """A detached process's log opened for appending: never through a link, and only a
    regular file — a FIFO in its place blocked the open (and the start) for good.
    :raises OSError: it cannot be, in a sentence."""
    not_regular = f"{log_path} is not a regular file (a pipe, a device): move it away"
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
                     | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # (a FIFO nobody reads)
            raise OSError(errno.EINVAL, not_regular) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, not_regular)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def spawn_detached(argv: Sequence[str], *, log_path: str | os.PathLike | None = None,
                   cwd: str | os.PathLike | None = None,
                   env: Mapping[str, str] | None = None,
                   pass_fds: Sequence[int] = ()) -> subprocess.Popen:
    """Start ``argv`` in a new session (its own process group), no shell.

    stdin is closed, stdout and stderr go to ``log_path`` (appended) or are
    discarded.  The caller may drop the returned handle: the process does not
    depend on the caller staying alive.
    """
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv must be a list of arguments, never a shell string")
    out: Any = subprocess.DEVNULL
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        out = _open_log(log_path)
    try:
        return subprocess.Popen(
            [str(a) for a in argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(cwd) if cwd else None,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
    finally:
        if out is not subprocess.DEVNULL:
            os.close(out)


def _group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid:
                members.append(proc)
        except (ProcessLookupError, PermissionError, OSError):
            continue
    return members


def stop_group(pid: int, grace: float = DEFAULT_GRACE, *, started: float | None = None,
               popen: subprocess.Popen | None = None) -> str:
    """Stop the process group led by ``pid``: SIGTERM, ``grace`` seconds, SIGKILL.

    :returns: ``"gone"`` (nothing to stop), ``"terminated"`` (it left on
        SIGTERM) or ``"killed"`` (it had to be SIGKILLed).
    """
    if not is_alive(pid, started):
        if popen is not None:
            popen.poll()
        return "gone"
    try:
        pgid = os.getpgid(pid)
    except (ProcessLookupError, OSError):
        return "gone"
    # Only a group ``pid`` leads is signalled as a group: a pid that leads none (one reused
    # by some other process since it was recorded, or a child in this process's group) is
    # signalled alone, never the group it happens to be in.
    own = pgid == os.getpgid(0) or pgid != pid
    members = [psutil.Process(pid)] if own else _group_members(pgid)

    def signal_all(sig: int) -> None:
        if own:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
            return
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    signal_all(signal.SIGTERM)
    deadline = time.monotonic() + max(0.0, grace)
    while time.monotonic() < deadline:
        if popen is not None:
            popen.poll()
        _, alive = psutil.wait_procs(members, timeout=min(0.05, max(0.0, deadline - time.monotonic())))
        members = alive
        if not members:
            return "terminated"
    signal_all(signal.SIGKILL)
    for proc in members:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(members, timeout=5)
    if popen is not None:
        try:
            popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    return "killed"


def interpreter() -> str:
    """The program that runs ``-m MODULE`` and ``-c CODE`` for spacrq.

    Python itself, or in a bundle the bundle's executable, whose dispatcher
    (:mod:`spacrq.frozen`) answers both like an interpreter.  Built-in and
    demo experiments name this as their ``python``.
    """
    return sys.executable


def module_argv(module: str, *args: str) -> list[str]:
    """The argv that runs ``python -m module args…`` in spacrq's own interpreter.

    Every place that starts a spacrq child process (a queue runner, a job, a
    block worker, a supervisor) asks this one function, so that a frozen
    build answers with its own executable and dispatcher: ``spacrq`` itself
    becomes ``<bundle> ARGS…`` (the command), any other module
    ``<bundle> -m module ARGS…``.
    """
    if getattr(sys, "frozen", False) and module == "spacrq":
        return [sys.executable, *map(str, args)]
    return [interpreter(), "-m", module, *map(str, args)]


def code_argv(code: str, *args: str) -> list[str]:
    """The argv that runs ``python -c code args…`` in spacrq's own interpreter (or the bundle)."""
    return [interpreter(), "-c", code, *map(str, args)]
