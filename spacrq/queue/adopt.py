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
* it **ran and ended unseen** (its process was written down and is gone, and
  nothing recorded how it ended: its runner and its keeper were both killed
  while it ran, and only a process's parent learns its exit status): it is
  failed as of unknown outcome and never run again (``restart-failed`` runs
  it, if it must) — unless the machine restarted since it began, which ended it;
* otherwise the outcome is **unknown** (the runner died before the job
  started, the machine restarted, the queue ran before supervisors existed):
  only then the job runs again, with a line in its log saying so.  Before
  that, a job whose pid nothing wrote down is looked for among the running
  processes (:func:`find_job_process`): one still running is adopted.
"""
from __future__ import annotations

import os
import stat
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

import orjson
import psutil

from spacrq.modules import ModuleError
from spacrq.procs import ProcessRef, booted_at, is_alive, stop_group
from spacrq.queue.control import Control
from spacrq.queue.keeper import raw_lines, valid_pid
from spacrq.queue.model import Job, now_iso, parse_iso
from spacrq.queue.supervise import exit_record_path, legacy_record_path
from spacrq.runfiles import RunFileError, append_text

#: ``UNSEEN``: it ran and ended while nothing that could learn its exit status was alive
FINISHED, RUNNING, UNKNOWN, UNSEEN = "finished", "running", "unknown", "unseen"


@dataclass
class Record:
    """What the exit record says about the job's current attempt."""

    state: str
    start: dict = field(default_factory=dict)
    end: dict = field(default_factory=dict)
    why: str = ""
    #: what of the exit record could not be read, for the job's log (it is read all the same)
    skipped: str = ""

    @property
    def ref(self) -> ProcessRef | None:
        return ProcessRef.from_dict({"pid": self.start.get("pid"),
                                     "started": self.start.get("started")})

    @property
    def exit_code(self) -> int | None:
        code = self.end.get("exit_code")
        return code if isinstance(code, int) and not isinstance(code, bool) else None


#: the exit records read, by path: (what identifies the version read, its lines by job, why
#: part of it could not be read) — a morning report asks for every job of a night, read once
_READ: dict[str, tuple[tuple, dict[str, list[dict]], str]] = {}
#: the most attempts of an exit record kept (three lines each at most, a few hundred bytes a
#: line): far more than a night holds; a record flooded beyond it is read no further
MAX_ATTEMPTS = 100_000
_SAFE = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _kind(line: dict) -> str:
    """Which line of an attempt ``line`` is: its ``end`` (an int exit code), its ``start``
    (a pid), its ``starting`` (before the spawn), or '' (nothing an attempt is read by)."""
    code = line.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return "end"
    if valid_pid(line.get("pid")):
        return "start"
    starting = line.get("starting")
    if isinstance(starting, (int, float)) and not isinstance(starting, bool):
        return "starting"
    return ""


#: the fields of a record line that are read (anything else a line holds is not kept)
_FIELDS = ("job", "key", "starting", "pid", "started", "supervisor", "exit_code", "finished",
           "peak_rss_bytes", "peak_rss_at_most_bytes", "before", "folders")
#: A record line longer than this is no record (a start's snapshot of the job's output folders,
#: its largest part, is a number per folder): skipped unparsed, for parsing megabytes of
#: nested junk costs many times their size in memory.
RECORD_LINE_MAX = 1 << 20


def _kept(line: dict) -> dict:
    """What is kept of the record line ``line``: the fields read, and only those."""
    return {name: line[name] for name in _FIELDS if name in line}


def _record_file(path: str) -> tuple[dict[str, list[dict]], str]:
    """The lines of the exit record ``path``, by job, and why part of it could not be read.

    Opened never through a link and never waiting on a FIFO in its place, and read whole,
    a chunk at a time (as the keeper reads it): what was appended after a job's start —
    a huge line, a flood of lines — never hides it.  Memory stays bounded: of each
    attempt only its first line of each kind is kept (the first start naming a process
    stands, the first end with an exit code is its end), and of a line only the fields
    read; a line over :data:`RECORD_LINE_MAX` is skipped unparsed (one over
    :data:`~spacrq.queue.keeper.LINE_MAX`, unread); and of
    more than :data:`MAX_ATTEMPTS` attempts only the latest are kept (a job's current
    attempt is the newest of its lines)."""
    try:
        fd = os.open(path, _SAFE)
    except FileNotFoundError:
        _READ.pop(path, None)
        return {}, ""
    except OSError as exc:
        if os.path.islink(path):
            return {}, "it is a symbolic link, which spacrq never reads through"
        return {}, exc.strerror or str(exc)
    # (job, key) → kind → its line; ordered so the oldest attempt goes in O(1) (a plain dict
    # walks past the holes its deletions leave at its front: a flood would read in O(n²))
    attempts: OrderedDict[tuple[str, str], dict[str, dict]] = OrderedDict()
    bad = dropped = 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return {}, "it is not a regular file"
        stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        known = _READ.get(path)
        if known is not None and known[0] == stamp:
            return known[1], known[2]
        for raw in raw_lines(fd):
            raw = raw.strip()
            if not raw:
                continue
            if raw[:1] != b"{" or len(raw) > RECORD_LINE_MAX:  # (no record: not parsed)
                bad += 1
                continue
            try:  # (strict JSON, no NaN; nesting is bounded by the parser, which has no stack)
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                bad += 1
                continue
            # (spacrq 0.1's records, one per job, name no job: theirs is the job "")
            job, key = (line.get("job", ""), line.get("key")) if isinstance(line, dict) \
                else (0, 0)
            kind = _kind(line) if isinstance(job, str) and isinstance(key, str) else ""
            if not kind:
                bad += 1
                continue
            kinds = attempts.get((job, key))
            if kinds is None:
                if len(attempts) >= MAX_ATTEMPTS:  # the oldest attempt goes
                    attempts.popitem(last=False)
                    dropped += 1
                kinds = attempts[(job, key)] = {}
            if kind not in kinds:  # (a later line of a kind the attempt has is not read)
                kinds[kind] = _kept(line)
    except OSError as exc:
        return {}, exc.strerror or str(exc)
    finally:
        os.close(fd)
    by_job: dict[str, list[dict]] = {}
    for (job, _key), kinds in attempts.items():
        by_job.setdefault(job, []).extend(kinds.values())
    problems = []
    if bad:
        problems.append(f"{bad} line(s) of it are not records and were skipped")
    if dropped:
        problems.append(f"it holds more than {MAX_ATTEMPTS} attempts: the {dropped} oldest "
                        "were not kept")
    unreadable = "; ".join(problems)
    if len(_READ) > 16:
        _READ.clear()
    _READ[path] = (stamp, by_job, unreadable)
    return by_job, unreadable


def record_lines(job: Job) -> tuple[list[dict], str, str]:
    """``(lines, why part of the record could not be read, the record's path)`` for ``job``:
    the lines of the queue's exit record that name it, else — a job a spacrq 0.1 runner
    left — those of its own record beside its log."""
    if not job.log_path:
        return [], "", ""
    path = exit_record_path(job.log_path)
    by_job, unreadable = _record_file(path)
    mine = by_job.get(job.id, [])
    if mine:
        return mine, unreadable, path
    legacy = legacy_record_path(job.log_path)
    old, old_unreadable = _record_file(legacy)
    if old or old_unreadable:  # (a record of the job's own: whatever job its lines name)
        return [line for lines in old.values() for line in lines], old_unreadable, legacy
    return [], unreadable, path


def examine(job: Job) -> Record:
    """What became of ``job``'s attempt (the one that started at ``job.started``)."""
    if not job.log_path or not job.started:
        return Record(UNKNOWN, why="the queue file does not say where its log is")
    lines, unreadable, path = record_lines(job)
    # the attempt's lines by kind, one each (the first of its kind, as the keeper reads them:
    # the first start naming a process stands, and an end is one with an exit code)
    kinds = {_kind(line): line for line in reversed(lines) if line.get("key") == job.started}
    start, end, starting = kinds.get("start", {}), kinds.get("end", {}), kinds.get("starting", {})
    record = Record(UNKNOWN, start, end,
                    skipped=f"its exit record {path}: {unreadable}" if unreadable else "")
    # (an end is written once the job was reaped: one beside a job still running was written
    # by something else — the job itself — and is not its end)
    alive = bool(start) and _is_running_job(record.ref, job)
    filed = _filed_ref(job)  # the process the runner wrote into the queue file, if any
    if not alive and not start and filed is not None and _is_running_job(filed, job):
        record.start, alive = {"pid": filed.pid, "started": filed.started}, True
    if record.exit_code is not None and not alive:
        record.state = FINISHED
        return record
    if not alive and not start and filed is None:
        # no pid written down anywhere (the record lost, or its runner died between the
        # spawn and its start line): the job is looked for among the running processes
        found = find_job_process(job, starting.get("starting"))
        if found is not None:
            record.start, alive = {"pid": found.pid, "started": found.started}, True
    if alive:
        record.end = {}
        record.state = RUNNING
    elif start and is_supervisor(start.get("supervisor")):
        record.state = RUNNING  # the job just ended; its supervisor is writing it down
    elif start or filed is not None:
        _ran_unseen(record, job, start or {"pid": filed.pid, "started": filed.started})
    elif starting:  # (spawned or not, nothing can tell: it may have run)
        _ran_unseen(record, job, starting)
    elif unreadable:  # (lines of earlier attempts only: the usual case below)
        record.why = f"its exit record {path} cannot be read ({unreadable})"
    else:
        record.why = "its runner died before it started the job"
    return record


def _ran_unseen(record: Record, job: Job, start: dict) -> None:
    """The job's process was written down, is gone, and nothing recorded how it ended.

    If the machine restarted since the attempt began, the restart ended it: it is
    run again (its outcome unknown, a resumable module continuing from its
    checkpoints).  Otherwise it ran — perhaps to its end — while neither its
    runner nor its keeper was alive to learn its exit status (only a process's
    parent can): it is never run again, for nothing is done twice."""
    began = parse_iso(job.started)
    booted = booted_at()
    if began is not None and booted and began.timestamp() < booted:
        at = datetime.fromtimestamp(booted, timezone.utc).isoformat(timespec="seconds")
        what = f"(process {start.get('pid')})" if valid_pid(start.get("pid")) else "or started"
        record.why = (f"the machine restarted at {at} while it ran {what}, which ended it with "
                      "its runner")
        return
    keeper = start.get("supervisor")  # (the runner's keeper, or the job's supervisor)
    pid = start.get("pid")
    record.state = UNSEEN
    if not valid_pid(pid):  # (a "starting" line: the runner died in the middle of the start)
        record.why = ("its runner died as it started the job, before the job's process was "
                      "written down, and no process of the job runs now: it may have run, "
                      "and nothing could learn how it ended")
        return
    record.why = (f"its runner and its supervisor (process {keeper}) were gone when its process "
                  f"{pid} ended, and only they could learn its exit status" if valid_pid(keeper)
                  else f"its runner was gone when its process {pid} ended, and nothing else "
                  "could learn its exit status")


def _filed_ref(job: Job) -> ProcessRef | None:
    """The job's process as the queue file names it (``process``), if it can be one."""
    process = job.process if isinstance(job.process, dict) else None
    if process is None or not valid_pid(process.get("pid")):
        return None
    return ProcessRef.from_dict(process)


def _is_running_job(ref: ProcessRef | None, job: Job) -> bool:
    return ref is not None and ref.alive() and is_job_process(ref.pid, job)


#: how long after its attempt's start (its "starting" line, else the queue file's
#: ``started``) a job's process may have been created: it is spawned at once
SPAWN_WINDOW = 5.0


def find_job_process(job: Job, starting: float | None = None) -> ProcessRef | None:
    """The running process of ``job``'s current attempt, for a job whose pid nothing wrote
    down: the earliest created of the processes that lead their own session with the
    job's id and log in their environment, created within :data:`SPAWN_WINDOW` of the
    attempt's start (``starting``, the time of its "starting" line, else ``job.started``).
    and its output or error output going to the job's log, as the job's are started.  A
    process the job started in a session of its own (a daemon, which inherits that
    environment) is not taken for it when it was created later or sends its output
    elsewhere, as a daemon does.  (A job that moved both its outputs away is not found:
    its outcome is then unknown, and it is failed, never run again.)  Only this user's
    processes can be read (another's environment is not), as it should be."""
    if starting is not None:  # (a number: the line was read as a "starting" for it)
        since = float(starting)
    else:
        began = parse_iso(job.started)
        if began is None:
            return None
        since = began.timestamp()
    me = os.getuid()
    found: ProcessRef | None = None
    for proc in psutil.process_iter(["pid", "uids", "create_time"]):
        try:
            info = proc.info
            uids, created = info.get("uids"), info.get("create_time") or 0.0
            if uids is None or uids.real != me or not since - 1.0 <= created <= since + SPAWN_WINDOW:
                continue
            if found is not None and created >= found.started:
                continue
            pid = info["pid"]
            if is_job_process(pid, job) and proc.status() != psutil.STATUS_ZOMBIE \
                    and _writes_to(pid, job.log_path):
                found = ProcessRef(pid, created)
        except (OSError, psutil.Error, KeyError, TypeError):
            continue
    return found


def _writes_to(pid: int, log: str) -> bool:
    """Whether the output (or the error output) of process ``pid`` goes to the file ``log``:
    a job is started with both in its log; a daemon it leaves sends them elsewhere."""
    try:
        mine = os.stat(log)
    except OSError:
        return False
    for fd in (1, 2):
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
            return True
    return False


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
    log = env.get("SPACRQ_JOB_LOG")
    if env.get("SPACRQ_JOB_ID") != job.id or not isinstance(log, str):
        return False
    # (the queue's folder moved since the job started: its log is the same file, elsewhere)
    return log == job.log_path or (os.path.basename(log) == os.path.basename(job.log_path)
                                   and _writes_to(pid, job.log_path))


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
        keeper = record.start.get("supervisor")
        if not is_supervisor(keeper):
            gone = ("its keeper is gone too" if valid_pid(keeper)
                    else "no keeper of it is written down")
            said += (f" ({gone}, so nothing will learn its exit status: it will be failed "
                     "as of unknown outcome, never run again)")
        return said
    if record.state == UNSEEN:
        return (f"ran and has ended, but its exit status is unknown ({record.why}); {resume} "
                "fails it as of unknown outcome and never runs it again ('spacrq queue "
                "restart-failed' does, if it must)")
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
        if now.state in (UNKNOWN, UNSEEN):
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
