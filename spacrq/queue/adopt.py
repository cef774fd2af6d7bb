"""Picking up a job its dead runner left ``running``: record it, adopt it, or (only then) rerun it.

A runner that dies does not take its job with it: the job's supervisor
(:mod:`spacrq.queue.supervise`) keeps watching it and writes its exit
status to the queue's exit record (``NAME_logs/exits.jsonl``, a line per
event, each naming its job and attempt).  So the next runner (``resume``, or a
plain ``run``) asks the record what became of the job:

* it **finished** (the record has its exit status): the outcome is
  recorded as if the runner had seen it — it is never run again;
* it is **still running**: the runner adopts it — waits for it, shows it as
  the running job (its log is followed as usual), and honours Stop, Abort
  and the job's timeout as for a job it started itself;
* the record says nothing usable (the runner died before the job started,
  or the supervisor died too, or the queue ran before supervisors
  existed): the outcome is **unknown**, and only then the job runs again,
  with a line in its log saying so.
"""
from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import psutil

from spacrq.modules import ModuleError
from spacrq.procs import ProcessRef, is_alive, stop_group
from spacrq.queue.control import Control
from spacrq.queue.keeper import valid_pid
from spacrq.queue.model import Job, now_iso, parse_iso
from spacrq.queue.supervise import exit_record_path, legacy_record_path
from spacrq.runfiles import RunFileError, append_text, loads

FINISHED, RUNNING, UNKNOWN = "finished", "running", "unknown"


@dataclass
class Record:
    """What the exit record says about the job's current attempt."""

    state: str
    start: dict = field(default_factory=dict)
    end: dict = field(default_factory=dict)
    why: str = ""

    @property
    def ref(self) -> ProcessRef | None:
        return ProcessRef.from_dict({"pid": self.start.get("pid"),
                                     "started": self.start.get("started")})

    @property
    def exit_code(self) -> int | None:
        code = self.end.get("exit_code")
        return code if isinstance(code, int) and not isinstance(code, bool) else None


#: the exit records read, by path: (what identifies the version read, its lines, why part of
#: it could not be read) — a morning report asks for every job of a night, read once
_READ: dict[str, tuple[tuple, list, str]] = {}
#: how much of the end of an exit record is read (a line per start and end of an attempt, a
#: few hundred bytes each: far more attempts than a night holds); what is before is older
RECORD_BYTES = 32 * 1024 * 1024
_SAFE = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _record_file(path: str) -> tuple[list, str]:
    """The lines of the exit record ``path`` and why part of it could not be read ('').

    Opened never through a link and never waiting on a FIFO in its place; only its last
    :data:`RECORD_BYTES` are read, so a record grown huge costs a bounded read."""
    try:
        fd = os.open(path, _SAFE)
    except FileNotFoundError:
        _READ.pop(path, None)
        return [], ""
    except OSError as exc:
        if os.path.islink(path):
            return [], "it is a symbolic link, which spacrq never reads through"
        return [], exc.strerror or str(exc)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return [], "it is not a regular file"
        stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        known = _READ.get(path)
        if known is not None and known[0] == stamp:
            return known[1], known[2]
        start = max(0, st.st_size - RECORD_BYTES)
        data = os.pread(fd, st.st_size - start, start)
    except OSError as exc:
        return [], exc.strerror or str(exc)
    finally:
        os.close(fd)
    if start:
        data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
    lines, bad = [], 0
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            line = loads(raw, where=path)
        except RunFileError:
            bad += 1
            continue
        if isinstance(line, dict):
            lines.append(line)
        else:
            bad += 1
    unreadable = f"{bad} line(s) of it are not records" if bad else ""
    if len(_READ) > 16:
        _READ.clear()
    _READ[path] = (stamp, lines, unreadable)
    return lines, unreadable


def record_lines(job: Job) -> tuple[list[dict], str, str]:
    """``(lines, why part of the record could not be read, the record's path)`` for ``job``:
    the lines of the queue's exit record that name it, else — a job a spacrq 0.1 runner
    left — those of its own record beside its log."""
    if not job.log_path:
        return [], "", ""
    path = exit_record_path(job.log_path)
    lines, unreadable = _record_file(path)
    mine = [line for line in lines if line.get("job") == job.id]
    if mine:
        return mine, unreadable, path
    legacy = legacy_record_path(job.log_path)
    old, old_unreadable = _record_file(legacy)
    if old or old_unreadable:
        return old, old_unreadable, legacy
    return [], unreadable, path


def examine(job: Job) -> Record:
    """What became of ``job``'s attempt (the one that started at ``job.started``)."""
    if not job.log_path or not job.started:
        return Record(UNKNOWN, why="the queue file does not say where its log is")
    lines, unreadable, path = record_lines(job)
    mine = [line for line in lines if line.get("key") == job.started]
    # read as the keeper reads them: the first start naming a process stands, and an end
    # is one with an exit code (garbage lines of the attempt's key count for nothing)
    start = next((ln for ln in mine if valid_pid(ln.get("pid"))), {})
    end = next((ln for ln in mine if isinstance(ln.get("exit_code"), int)
                and not isinstance(ln.get("exit_code"), bool)), {})
    record = Record(UNKNOWN, start, end)
    # (an end is written once the job was reaped: one beside a job still running was written
    # by something else — the job itself — and is not its end)
    alive = bool(start) and record.ref is not None and record.ref.alive() \
        and is_job_process(record.ref.pid, job)
    if record.exit_code is not None and not alive:
        record.state = FINISHED
    elif alive:
        record.end = {}
        record.state = RUNNING
    elif start and is_supervisor(start.get("supervisor")):
        record.state = RUNNING  # the job just ended; its supervisor is writing it down
    elif start:
        record.why = "its runner and its supervisor both died before its end was written down"
    elif unreadable:  # (lines of earlier attempts only: the usual case below)
        record.why = f"its exit record {path} cannot be read ({unreadable})"
    else:
        record.why = "its runner died before the job was started, or before that was written down"
    return record


def is_job_process(pid: int, job: Job) -> bool:
    """Whether the live process ``pid`` is ``job``'s: it leads its own session, as every job
    does for its whole life, and carries the job's id and log in its environment, as every
    job is started with.  A pid and a start time alone can be written into a file by
    anyone, and name any process (a reused pid, or one picked from ``/proc``): such a
    process is never adopted, nor stopped.  (A job that replaced its whole environment
    is not recognised after its runner died: its outcome is then unknown.)"""
    try:
        if os.getsid(pid) != pid:
            return False
        env = psutil.Process(pid).environ()
    except (OSError, psutil.Error):
        return False
    return env.get("SPACRQ_JOB_ID") == job.id and env.get("SPACRQ_JOB_LOG") == job.log_path


#: The modules a process that records a job's end runs (a runner's keeper, a job supervisor).
_SUPERVISORS = ("spacrq.queue.keeper", "spacrq.queue.supervise")


def is_supervisor(pid: Any) -> bool:
    """Whether ``pid`` (an exit record's ``supervisor``, recorded without a start time) is
    still a keeper or a job supervisor: a pid reused by anything else since is not, so a
    dead job's record is never waited on for a process that will never write it."""
    if not isinstance(pid, int) or isinstance(pid, bool) or not is_alive(pid):
        return False
    try:
        return any(arg in _SUPERVISORS for arg in psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def unwatched(job: Job, file: str) -> str:
    """What became of a job left ``running`` by a runner that is gone, for ``queue status``:
    one sentence with what ``resume`` (of ``file``) will do about it."""
    record = examine(job)
    resume = f"'spacrq queue resume {file}'"
    if record.state == FINISHED:
        when = record.end.get("finished")
        at = f" at {when}" if isinstance(when, str) and when else ""
        said = (f"ended{at} with exit code {record.exit_code} while no runner watched it; "
                f"{resume} records that")
        left = job.retries - job.attempts + 1
        if record.exit_code not in (0, 2) and left > 0:  # (exit 2, a refusal, is not retried)
            return (f"{said} as attempt {job.attempts}'s outcome and makes the next attempt "
                    f"({left} {'retry' if left == 1 else 'retries'} left)")
        return f"{said}, without running it again"
    if record.state == RUNNING:
        pid = record.start.get("pid")
        said = (f"still running (process {pid}) with no runner watching it; {resume} adopts "
                "it: waits for it, and honours Stop and Abort")
        if not is_supervisor(record.start.get("supervisor")):
            said += (" (its keeper is gone too, so nothing will learn its exit status: it "
                     "will be failed as of unknown outcome, never run again)")
        return said
    return (f"its outcome is unknown ({record.why}); {resume} runs it again, and its log "
            "says why")


def wait_for_end(job: Job, record: Record, control: Control | None,
                 heartbeat: Callable[[], None] | None, grace: float) -> tuple[str, Record]:
    """Follow an adopted job to its end: ``("ended"|"aborted"|"timeout"|"lost", record)``."""
    ref = record.ref
    start = parse_iso(job.started)
    deadline = None
    if job.timeout and start is not None:
        deadline = time.monotonic() + job.timeout - (
            parse_iso(now_iso()) - start).total_seconds()
    beat = time.monotonic()
    while True:
        now = examine(job)
        if now.state == FINISHED:
            return "ended", now
        if now.state == UNKNOWN:
            return "lost", now
        if control is not None and control.abort_requested() and ref is not None:
            outcome = stop_group(ref.pid, grace, started=ref.started)
            note(job, f"# aborted by the operator at {now_iso()}; the job's processes were "
                      f"{outcome} (grace {grace:g}s)")
            return "aborted", now
        if deadline is not None and time.monotonic() >= deadline and ref is not None:
            outcome = stop_group(ref.pid, grace, started=ref.started)
            note(job, f"# timeout: still running after {job.timeout:g}s; the job's processes "
                      f"were {outcome}")
            return "timeout", _ended_record(job, now)
        if heartbeat is not None and time.monotonic() - beat >= 2.0:
            beat = time.monotonic()
            heartbeat()
        time.sleep(0.05)


def _ended_record(job: Job, record: Record, within: float = 2.0) -> Record:
    """The job's record once its supervisor wrote how the stopped job ended (within a
    moment), else ``record`` as it was."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        now = examine(job)
        if now.state == FINISHED:
            return now
        time.sleep(0.02)
    return record


def note(job: Job, text: str) -> None:
    """A line in the job's log (never fatal: the log may be what cannot be written)."""
    if not job.log_path:
        return
    try:
        append_text(job.log_path, f"\n{text}\n", durable=False)
    except (OSError, RunFileError):
        pass


def stop_legacy_orphan(job: Job, grace: float) -> str:
    """A queue run before supervisors recorded only the job's pid: stop it before rerunning."""
    if record_lines(job)[0]:
        return ""  # (not a queue run before exit records: its record said what it knows)
    ref = ProcessRef.from_dict(job.process)
    if ref is not None and is_alive(ref.pid, ref.started or None) \
            and is_job_process(ref.pid, job):
        return stop_group(ref.pid, grace, started=ref.started or None)
    return ""


def resume_override(job: Job, modules: Any) -> None:
    """Ask a resumable module to continue from its checkpoints rather than start over."""
    try:
        spec = modules.spec(job.module)
    except ModuleError:  # a broken module fails when the job runs, with its sentence
        return
    if spec is None or not spec.resumable:
        return
    from spacrq.modules.spacr import is_spacr
    if "resume" not in spec.defaults and not is_spacr(spec):
        return
    if isinstance(job.overrides, dict):
        job.overrides = dict(job.overrides, resume=True)
        return
    job.overrides = [o for o in job.override_args if o.split("=", 1)[0].strip() != "resume"]
    job.overrides.append("resume=True")
