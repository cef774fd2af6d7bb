"""Jobs started by the runner itself, for a runner its keeper watches over.

The runner's side of :mod:`spacrq.queue.keeper`: with a keeper as its parent
the runner needs no supervisor process to outlive it, so it starts each job
as its own child, and the moment between two jobs costs no second process's
wake-up and answer.  :class:`DirectStarter` speaks the interface of
:class:`spacrq.queue.jobproc.Supervisor` (``send``, ``answer``, ``wait``,
``stop``, ``abandon``, ``close``), so :class:`~spacrq.queue.jobproc.ProcessRunner`
runs jobs the same way through either.

The order is what keeps a finished job from being run twice:

1. the job's start (its pid, this runner's keeper as its ``supervisor``, its
   log's name) is written to the queue's exit record as soon as it runs;
2. its end is seen with ``waitid(…, WNOWAIT)``, which leaves it a zombie, and
   told to the engine, which makes it durable in the queue's journal;
3. only then — before the next job starts, or when the run ends — is it
   reaped (``wait4``: its peak memory) and whatever it left in its process
   group stopped; its end is written to its exit record once the next job
   started (the journal has it already: see :meth:`DirectStarter._write_down`).

The next job's log is opened while the job before it runs
(:meth:`DirectStarter.open_ahead`, from the runner's look-ahead), and the
exit record — one file for all the queue's jobs — stays open, so starting a
short job creates no file; a job that runs a while lets the log opened ahead
go again (:meth:`DirectStarter.idle`), so no empty log of a job still waiting
lies in the logs folder while a long job runs.

A runner that dies before 3 leaves the job (running, or a zombie) to its
keeper, which reaps it and writes its end to the exit record.  A runner
whose keeper died (its parent changed) starts the rest of its jobs under a
supervisor process, as an unkept runner does.
"""
from __future__ import annotations

import os
import select
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from spacrq.queue import supervise
from spacrq.queue.supervise import _now, _peak_of, _stop_leftovers, announce_after
from spacrq.runfiles import still_named

#: how long the end of a job that was stopped (an abort, an interrupt) is waited for before
#: it is left to the keeper
STOPPED_WAIT = 10.0


@dataclass
class _Job:
    pid: int
    handle: Any  # what started it (a Popen is kept until reaped: it would reap it itself)
    key: str
    job: str
    record: str
    log: str
    log_fd: int
    record_fd: int  # (the starter's: not this job's to close)
    pidfd: int
    started: float
    announce_at: float
    grace: float
    announced: bool = False
    code: int | None = None  # once its end was seen (not yet reaped)
    finished: str = ""


@dataclass
class _Opened:
    """The next job's log, opened ahead (see :meth:`DirectStarter.open_ahead`)."""
    log: str
    log_fd: int
    made: bool  # whether it was created by this starter (else it was there)


def _open_ahead(path: str) -> tuple[int, bool]:
    """``(fd, created)``: ``path`` opened for appending, created if missing (exclusively,
    so a file made here is known to be this starter's), never through a link, only a
    regular file.  :raises OSError: it cannot be."""
    try:
        return os.open(path, supervise._APPEND | os.O_EXCL, 0o644), True
    except FileExistsError:
        return supervise.open_append(path), False


def _siginfo_code(info: Any) -> int:
    """A ``waitid`` result as ``os.waitstatus_to_exitcode`` gives it (a signal: negative)."""
    if info.si_code == os.CLD_EXITED:
        return int(info.si_status)
    return -int(info.si_status)


class DirectStarter:
    """Starts the runner's jobs as its own children (see the module's docstring)."""

    #: (ProcessRunner asks ``popen is not None`` for "the starter is there")
    popen: object = True

    def __init__(self, keeper: int, fallback: Any = None) -> None:
        self.keeper = keeper
        self._fallback = fallback  # a Supervisor, once the keeper is gone
        self._job: _Job | None = None
        self._answers: list[dict] = []
        self._announce = announce_after()
        self._owed = False  # the job at hand was stopped without its end being heard
        self._active: Any = self  # who started the job at hand (the fallback, once used)
        self._kept = True  # until the keeper is seen gone (then the fallback, for good)
        self._opened: _Opened | None = None  # the next job's log, opened ahead
        self._record: tuple[str, int] | None = None  # the exit record, kept open
        self._unrecorded: tuple[str, str] | None = None  # (record, why) it could not be opened
        self._reaped: tuple[_Job, int] | None = None  # (job, its ru_maxrss) to write down

    # -- the keeper -----------------------------------------------------------------------
    def _via(self) -> Any:
        """The supervisor jobs go through when the keeper died (None while it lives)."""
        if self._fallback is None:
            return None
        if self._kept and os.getppid() == self.keeper:
            return None
        if self._kept:
            print(f"spacrq: the runner's keeper (process {self.keeper}) is gone; the rest of "
                  "the jobs start under a supervisor process, which records them instead",
                  file=sys.stderr, flush=True)
        self._kept = False
        return self._fallback

    def warm(self) -> None:
        pass

    def _open_record(self, record: str, log: str, log_fd: int) -> int:
        """The exit record, open (kept open from job to job while it is still the file at
        its path), or -1 — said in the job's log and the runner's: the job still runs,
        but a runner that dies while it runs leaves an outcome nobody can tell, and resume
        runs the job again."""
        kept, self._record = self._record, None
        if kept is not None:
            if kept[0] == record and still_named(kept[1], record):
                self._record = kept
                return kept[1]
            _close(kept[1])  # (moved, removed or replaced: its lines would be read by nobody)
        try:
            fd = supervise.open_append(record)
        except OSError as exc:
            why = exc.strerror or str(exc)
        else:
            self._record, self._unrecorded = (record, fd), None
            return fd
        text = (f"its exit record {record} cannot be written ({why}): the job runs, but if "
                "the runner dies meanwhile its outcome is unknown and resume runs it again; "
                "move what is in the record's place away (spacrq makes it again)")
        supervise._note(log, f"# spacrq: {text}\n", log_fd)
        if self._unrecorded != (record, why):  # (the runner's log: once, not at every job)
            self._unrecorded = (record, why)
            print(f"spacrq: job {os.path.basename(log)[:-4]} and the jobs after it while this "
                  f"lasts: {text}", file=sys.stderr, flush=True)
        return -1

    # -- the next job's log, opened ahead ----------------------------------------------------
    def open_ahead(self, log: str, record: str = "") -> None:
        """Open the next job's log now, while the job at hand runs, so that its start
        creates no file (:meth:`send` takes it if the job it starts has this very log,
        and it is still the file at its path).  Never fatal: whatever fails here is met
        again, and said, when that job starts.  (``record``: the exit record, which stays
        open from job to job anyway.)"""
        self._drop_opened()
        if not self._kept:
            return
        try:
            log_fd, log_made = _open_ahead(log)
        except OSError:
            return
        self._opened = _Opened(log, log_fd, log_made)

    def idle(self) -> None:
        """The job at hand ran a while: nobody waits for the next one's start now, so its
        log opened ahead is let go of (an empty log of a job that has not started would
        lie in the logs folder as long as this job runs)."""
        self._drop_opened()

    def _take_opened(self, log: str) -> int:
        """The log opened ahead for exactly this file, else -1."""
        opened, self._opened = self._opened, None
        if opened is not None and opened.log == log and still_named(opened.log_fd, log):
            return opened.log_fd
        self._let_go_of(opened)
        return -1

    def _drop_opened(self) -> None:
        opened, self._opened = self._opened, None
        self._let_go_of(opened)

    def _let_go_of(self, opened: _Opened | None) -> None:
        if opened is not None:
            self._let_go(opened.log, opened.log_fd, opened.made)

    @staticmethod
    def _let_go(path: str, fd: int, made: bool) -> None:
        """Close a file opened ahead; remove it if this starter made it and it is still
        that file, empty (nothing was ever written to it, and nobody put another there)."""
        try:
            if made and still_named(fd, path) and os.fstat(fd).st_size == 0:
                os.unlink(path)
        except OSError:
            pass
        _close(fd)

    # -- one job --------------------------------------------------------------------------
    def send(self, request: dict, ready: Callable[[], None] | None = None) -> None:
        self._settle()
        via = self._via()
        if via is not None:
            self._drop_opened()
            self._write_down()
            self._active = via
            return via.send(request, ready)
        self._active = self
        log, record, key = request["log"], request["record"], request["key"]
        base = {"key": key, "job": request.get("job", "")}
        # (its "starting" and start lines: the log's name, for the keeper's note in it)
        start = dict(base, supervisor=self.keeper, log=os.path.basename(log),
                     before=request.get("before") or {}, folders=request.get("folders") or [])
        log_fd, cwd, problem = supervise.open_log(request, self._take_opened(log))
        env = None
        if not problem:
            try:
                env = _environment(request)
            except (ValueError, TypeError, AttributeError) as exc:
                problem = f"its environment cannot be used ({exc})"
        if ready is not None:
            try:
                ready()
            except BaseException:
                if log_fd >= 0:
                    supervise._note(log, "# spacrq: not started: the runner took it back "
                                         "before it began\n", log_fd)
                    os.close(log_fd)
                raise
        handle, record_fd = None, -1
        if not problem:
            # "starting" first: a runner that dies between the spawn and the start's line
            # below leaves a job its keeper still knows (see spacrq.queue.keeper._match)
            record_fd = self._open_record(record, log, log_fd)
            if record_fd >= 0:
                supervise._record(record, dict(start, starting=time.time()), False, record_fd)
            handle, problem = supervise.start(request, log_fd, cwd, env)
        if handle is None:
            if log_fd >= 0:
                supervise._note(log, f"error: {problem}\n", log_fd)
                os.close(log_fd)
            finished = _now()
            supervise._record(record, dict(base, exit_code=127, finished=finished,
                                           error=problem), False, record_fd)
            self._answers.append({"exit": 127, "finished": finished, "error": problem,
                                  "not_started": True})
            self._write_down()
            return
        started = time.time()
        # The start first: a runner that dies from here on leaves a job its keeper records
        # (and the next runner adopts), never one run again.
        if record_fd >= 0:
            supervise._record(record, dict(start, pid=handle.pid, started=started), False,
                              record_fd)
        try:
            pidfd = os.pidfd_open(handle.pid)
        except (AttributeError, OSError):
            pidfd = -1
        self._job = _Job(handle.pid, handle, key, base["job"], record, log, log_fd, record_fd,
                         pidfd, started, time.monotonic() + self._announce,
                         float(request.get("grace", 10.0)))
        self._write_down()  # (the job before's end: see _write_down)

    def _ended(self, job: _Job, seconds: float) -> bool:
        """Whether the job ended within ``seconds`` (seen, not reaped)."""
        if job.code is not None:
            return True
        deadline = time.monotonic() + max(0.0, seconds)
        while True:
            try:
                info = os.waitid(os.P_PID, job.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped behind this starter's back: it ended
                job.code = -1 if job.code is None else job.code
                return True
            if info is not None and info.si_pid:
                job.code = _siginfo_code(info)
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if job.pidfd >= 0:
                try:
                    select.select([job.pidfd], [], [], left)
                except InterruptedError:
                    pass
            else:  # (no process descriptors: Linux < 5.3)
                time.sleep(min(left, 0.005))

    def _end(self, job: _Job) -> dict:
        """The job's end, told (its log says so first; it is written down when reaped)."""
        job.finished = _now()
        supervise._note(job.log, f"\n# finished {job.finished} with exit code {job.code}\n",
                        job.log_fd)
        return {"exit": job.code, "finished": job.finished, "pid": job.pid,
                "started": job.started}

    def answer(self, timeout: float) -> dict | None:
        """The next answer about the job at hand (``pid`` once it ran a moment, or ``exit``)."""
        if self._active is not self:
            return self._active.answer(timeout)
        if self._answers:
            return self._answers.pop(0)
        job = self._job
        if job is None or job.finished:
            select.select([], [], [], max(0.0, timeout))
            return None
        if not job.announced:
            wait = min(timeout, max(0.0, job.announce_at - time.monotonic()))
            if self._ended(job, wait):
                return self._end(job)
            if time.monotonic() >= job.announce_at:
                job.announced = True
                return {"pid": job.pid, "started": job.started}
            return None
        return self._end(job) if self._ended(job, timeout) else None

    def wait(self, timeout: float) -> dict | None:
        while True:
            answer = self.answer(timeout)
            if answer is None or "exit" in answer:
                return answer

    def stop(self, ref: Any, grace: float) -> str:
        """Stop the job's process group (SIGTERM, ``grace``, SIGKILL) without reaping it:
        how it went, as :func:`spacrq.procs.stop_group` says it."""
        if self._active is not self:
            return self._active.stop(ref, grace)
        job = self._job
        if job is None or job.pid != ref.pid or job.finished:
            from spacrq.procs import stop_group
            return stop_group(ref.pid, grace, started=ref.started)
        if self._ended(job, 0):
            return "gone"
        for sig, wait in ((15, grace), (9, 5.0)):
            try:
                os.killpg(job.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            if self._ended(job, wait):
                return "terminated" if sig == 15 else "killed"
        return "killed"

    def abandon(self) -> None:
        if self._active is not self:
            return self._active.abandon()
        self._owed = True

    def lost(self) -> None:
        if self._active is not self:
            self._active.lost()

    def settle(self, now: bool = False) -> None:
        """Settle the job before now (:meth:`send` would, first thing); with ``now`` its end
        is written to its exit record at once too, not once the next job has started."""
        if self._active is self:
            self._settle()
            if now:
                self._write_down()

    def _settle(self) -> None:
        """Reap the job at hand, write its end down, stop what it left (before the next)."""
        self._write_down()
        job, self._job, self._owed = self._job, None, False
        self._answers.clear()
        if job is None:
            return
        if job.code is None and not self._ended(job, STOPPED_WAIT):
            _close(job.pidfd, job.log_fd)  # still running: the keeper's now
            return
        maxrss = 0
        try:
            _, status, usage = os.wait4(job.pid, 0)
            job.code, maxrss = os.waitstatus_to_exitcode(status), int(usage.ru_maxrss)
        except ChildProcessError:
            pass  # reaped elsewhere: what was seen stands
        if hasattr(job.handle, "returncode"):
            job.handle.returncode = job.code  # (a Popen must not reap it again)
        left = _stop_leftovers(job.pid, job.grace)
        if left:
            supervise._note(job.log, "# the job left processes running in its group after it "
                                     f"ended; they were {left}\n", job.log_fd)
        job.finished = job.finished or _now()
        self._reaped = (job, maxrss)  # written down by _write_down, once the next job started

    def _write_down(self) -> None:
        """The end of the job last reaped, in its exit record, and its files closed.

        Left from :meth:`_settle` until the next job started (or the run ended): its end
        is in the queue's journal already, which is what ``resume`` reads for a job that
        ended, so a runner that dies before this line loses nothing — the line is for
        whoever reads exit records, and the moment between two jobs does not wait for it.
        """
        if self._reaped is None:
            return
        (job, maxrss), self._reaped = self._reaped, None
        if job.record_fd >= 0:  # (one that could not be opened was said in the job's log)
            kept = self._record  # (its descriptor, unless the record was opened anew since)
            fd = job.record_fd if kept == (job.record, job.record_fd) else -1
            supervise._record(job.record, {"key": job.key, "job": job.job,
                                           "exit_code": job.code, "finished": job.finished,
                                           **_peak_of(maxrss)}, False, fd)
        _close(job.pidfd, job.log_fd)

    def close(self, timeout: float = 30.0) -> None:
        """Settle the last job; a job still running is left to the keeper."""
        self._drop_opened()
        self._settle()
        self._write_down()
        kept, self._record = self._record, None
        if kept is not None:
            _close(kept[1])
        if self._fallback is not None:
            self._fallback.close(timeout)


def _environment(request: dict) -> dict | None:
    """The job's environment from its request, as the supervisor makes it."""
    if isinstance(request.get("env"), dict):
        return request["env"]
    base = request.get("env_base")
    if not isinstance(base, dict):
        return None
    env = dict(base)
    env.update(request.get("env_changes") or {})
    return env


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
