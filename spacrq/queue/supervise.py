"""The job supervisor: starts each job, waits for it, and writes down how it ended.

Why a process of its own: the runner can die mid-job (SIGKILL, the OOM
killer, a bug) while its job — a GPU segmentation, an instrument sweep —
goes on for hours.  A job is a child of this supervisor, not of the runner,
so when the job ends the supervisor still sees its exit status and writes
it, with the end time, to the *exit record* in the job's logs folder
(``night_logs/exits.jsonl``: one file for all the queue's jobs, one complete
line per event, written in one ``write``, each naming its job and attempt).
``spacrq queue resume`` reads that record: a
job that finished while its runner was dead is recorded, never run again;
a job still running is adopted (see :mod:`spacrq.queue.adopt`).

One supervisor per run, not per job: starting a Python interpreter for each
job would cost more than a short job itself.  The runner starts it with
``python -m spacrq.queue.supervise`` and sends one JSON line per job on its
stdin; it answers ``{"exit", "finished"}`` when the job ended, preceded by
``{"pid", "started"}`` once the job has run for :data:`ANNOUNCE_AFTER`
seconds (a job that ends sooner is told in one answer: waking the runner
for a process that is already gone costs a short job more than its
start).  The start — pid, this supervisor's pid — is in the exit record as
soon as the job runs, whatever the runner hears.  When its stdin closes (the
runner ended or died) it finishes the job at hand, records it durably, and
exits.

A request is kept small because the runner waits on every one: the log's
header comes with it (the supervisor opens the log for the job anyway), and
the environment is sent whole once (``base_env``) and then only as what a
job changes in it (``env_set``, ``env_unset``; a request with ``env`` gives
the whole environment of that job), and a job is sent ahead (``hold``) and
started by a one-line ``{"go": key}`` once its "running" is on disk.

It also stops what a job left running in its process group before it
answers, so jobs never overlap even across a runner's death.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import resource
import select
import signal
import stat
import subprocess
import sys
import time
from datetime import datetime, timezone
from typing import Any

import orjson

from spacrq.rawio import write_all

# Deliberately not spacrq.runfiles: this process starts once per run and the
# runner waits for it, so it imports only what it uses (orjson: the runner
# waits on every message too).  Its appends follow the run-file rules all the
# same: one write per line, never through a link.
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)

#: The exit record of every job of a queue, in its logs folder.  One file, not one per job:
#: each line names its job (``job``) and attempt (``key``, the attempt's start), and a
#: burst of short jobs creates no file but each one's log.
EXIT_RECORD = "exits.jsonl"
#: spacrq 0.1 wrote one record per job beside its log (``01_mask.exit.jsonl``): still read,
#: for a job such a runner left, never written.
EXIT_SUFFIX = ".exit.jsonl"
#: A job still running after this many seconds is announced (``{"pid"}``) to the runner
#: (``SPACRQ_QUEUE_ANNOUNCE_AFTER`` moves it, for tests).
ANNOUNCE_AFTER = 0.02


def announce_after() -> float:
    try:
        return max(0.0, float(os.environ.get("SPACRQ_QUEUE_ANNOUNCE_AFTER", ANNOUNCE_AFTER)))
    except ValueError:
        return ANNOUNCE_AFTER


def exit_record_path(log_path: str) -> str:
    """Where the job of ``log_path`` is recorded: the exit record of its logs folder."""
    return os.path.join(os.path.dirname(log_path), EXIT_RECORD)


def legacy_record_path(log_path: str) -> str:
    """Where spacrq 0.1 recorded the job of ``log_path`` (see :data:`EXIT_SUFFIX`)."""
    stem = log_path[:-4] if log_path.endswith(".log") else log_path
    return stem + EXIT_SUFFIX


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _stop_leftovers(pgid: int, grace: float) -> str:
    """Stop what the job left in its group; '' when it left nothing."""
    if not _group_exists(pgid):
        return ""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return ""
    deadline = time.monotonic() + grace
    while _group_exists(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if not _group_exists(pgid):
        return "terminated"
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return "killed"


def open_append(path: str) -> int:
    """``path`` opened for appending: created if missing, never through a link, and only a
    regular file — a FIFO or a device planted in its place would block the open (or the
    writes) for good.  :raises OSError: it cannot be, or is not a regular file."""
    fd = os.open(path, _APPEND | os.O_NONBLOCK, 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _append(path: str, data: bytes, durable: bool = False) -> None:
    """One write at the end of ``path`` (a line torn by a crash is skipped by its reader)."""
    fd = open_append(path)
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


#: the writes that fail: the exit record's, or a folder's job logs' → [the reason said, how
#: many failed, since when]
_FAILING: dict[str, list] = {}


def _failing_key(path: str) -> tuple[str, str]:
    """What a failure of ``path`` is said as: the exit record on its own, the jobs' logs of
    one folder together (a full disk fails every job's log: one line, not one a job)."""
    if os.path.basename(path) == EXIT_RECORD:
        return path, path
    folder = os.path.dirname(path)
    return f"logs:{folder}", f"the job logs in {folder}"


def _failed(path: str, exc: OSError) -> None:
    """Say that a write to ``path`` failed — once while it keeps failing for the same reason
    (a full disk fails every job's three writes: the log would drown in the same line)."""
    reason = f"[Errno {exc.errno}] {exc.strerror}" if exc.strerror else str(exc)  # (no name)
    key, _what = _failing_key(path)
    failing = _FAILING.get(key)
    if failing is not None and failing[0] == reason:
        failing[1] += 1
        return
    _FAILING[key] = [reason, 1, _now()]
    also = "" if key == path else f", nor any other job log in {os.path.dirname(path)}"
    print(f"spacrq: could not write {path}: {reason} (said once while it lasts{also})",
          file=sys.stderr, flush=True)


def _written(path: str) -> None:
    """A write to ``path`` succeeded: if some had failed, say how many, once."""
    key, what = _failing_key(path)
    failing = _FAILING.pop(key, None)
    if failing is not None:
        print(f"spacrq: {what} {'is' if key == path else 'are'} written again; {failing[1]} "
              f"write(s) failed since {failing[2]} ({failing[0]})", file=sys.stderr,
              flush=True)


def _note(path: str, text: str, fd: int = -1) -> None:
    try:
        if fd < 0:
            _append(path, text.encode("utf-8", "replace"))
        else:
            write_all(fd, text.encode("utf-8", "replace"))
    except OSError as exc:
        _failed(path, exc)
        return
    if _FAILING:
        _written(path)


def _dumps(doc: dict) -> bytes:
    try:
        return orjson.dumps(doc, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # (an integer beyond 64 bits)
        return json.dumps(doc, default=str).encode()


def _record(path: str, line: dict, durable: bool, fd: int = -1) -> None:
    """One line of the exit record (through ``fd`` when the record is already open)."""
    data = b"\n" + _dumps(line) + b"\n"  # a fresh line first, in case a crash tore one
    try:
        if fd < 0:
            _append(path, data, durable)
        else:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
    except OSError as exc:  # the runner still gets the answer on the pipe
        _failed(path, exc)
        return
    if _FAILING:
        _written(path)


def _open_append(path: str) -> int:
    """``path`` opened for appending (never through a link), or -1."""
    try:
        return open_append(path)
    except OSError:
        return -1


def _answer(out, reply: dict) -> None:
    """One answer line on ``out`` (binary: the runner waits on every answer)."""
    try:
        out.write(_dumps(reply) + b"\n")
        out.flush()
    except (OSError, ValueError):
        pass  # the runner is gone; the exit record says it all


def _ended_within(pid: int, seconds: float) -> bool:
    """Whether the job ``pid`` ended within ``seconds`` (not reaped: :func:`_wait` does that).

    False at once where the kernel has no process descriptors (Linux < 5.3):
    the job is then announced as soon as it runs.
    """
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return False
    try:
        return bool(select.select([fd], [], [], seconds)[0])
    except OSError:
        return False
    finally:
        os.close(fd)


#: the kernel's resident-memory figures are approximate (per-CPU counters, a few hundred KiB
#: on a small machine): a job is told exactly only when it is clearly above this supervisor
SLACK_KIB = 1024
#: this supervisor's own high-water mark as last read (KiB); 0 before the first look
_own_seen_kib = 0


def _own_hwm_kib() -> int:
    """This supervisor's own high-water resident memory (``VmHWM``, KiB), or 0 when unknown.

    Unlike ``getrusage`` it leaves out the peak of whoever started this
    process (the runner's, folded in at this process's own exec).  Read only
    for a job whose figure lies between the two, never while a job runs.
    """
    try:
        with open("/proc/self/status", "rb") as status:
            data = status.read()
        at = data.index(b"VmHWM:") + 6
        return int(data[at:data.index(b"kB", at)])
    except (OSError, ValueError):
        return 0


def _peak_of(kib: int) -> dict:
    """What a job's ``ru_maxrss`` (``kib``) tells of its peak memory, for its exit record.

    Linux folds into a process's ``ru_maxrss``, when it execs, the high-water
    mark of the memory it ran in before: a job started by vfork (posix_spawn,
    Popen) ran in this supervisor's memory until its exec, so a job that stays
    smaller than this supervisor (``sleep``, ``true``, a shell script) is
    given this supervisor's peak, never its own.  So the figure is told as the
    job's (``peak_rss_bytes``) only when it is clearly above this process's
    high-water mark, read after the job ended (it only ever grows, so it
    covers the moment the job was started); otherwise the job's peak is known
    only to be at most the figure (``peak_rss_at_most_bytes``, with
    ``peak_rss_bytes`` null, which older readers take as "not measured").

    ``getrusage`` (a microsecond) settles it for most jobs; it also holds the
    runner's peak when the runner was larger when it started this process, so
    a job between the two is settled by this process's own ``VmHWM``, looked
    at only when such a job ended above the last look.  A job no bigger than
    this process was (``true``) costs no look.
    """
    global _own_seen_kib
    if kib <= 0:
        return {"peak_rss_bytes": None}
    exact = {"peak_rss_bytes": kib * 1024}
    if kib > resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + SLACK_KIB:
        return exact
    if kib > _own_seen_kib + SLACK_KIB:
        own = _own_hwm_kib()
        _own_seen_kib = max(_own_seen_kib, own)
        if own and kib > own + SLACK_KIB:
            return exact
    return {"peak_rss_bytes": None, "peak_rss_at_most_bytes": kib * 1024}


def _wait(popen: subprocess.Popen) -> tuple[int, int]:
    """``(exit code, the job's ru_maxrss in KiB, 0 when unknown)`` once the job ended.

    ``wait4`` gives the job's resource use with its exit status, measured by
    the kernel rather than sampled: the morning report shows its peak memory
    (and that of any child it waited for) per job, as :func:`_peak_of` tells it
    (once the runner was told the job ended: it waits for that, not for this).
    """
    try:
        _, status, usage = os.wait4(popen.pid, 0)
    except ChildProcessError:
        return popen.wait(), 0
    popen.returncode = os.waitstatus_to_exitcode(status)
    return popen.returncode, int(usage.ru_maxrss)  # Linux: KiB


class _Env:
    """The environment jobs start with: sent whole once, then only as changes."""

    def __init__(self) -> None:
        self.base: dict | None = None

    def of(self, request: dict) -> dict | None:
        """The job's environment (None: the supervisor's own)."""
        if isinstance(request.get("base_env"), dict):
            self.base = {str(k): str(v) for k, v in request["base_env"].items()}
        if "env_set" not in request and "env_unset" not in request:
            return request.get("env") if isinstance(request.get("env"), dict) else self.base
        env = dict(self.base if self.base is not None else os.environ)
        env.update({str(k): str(v) for k, v in (request.get("env_set") or {}).items()})
        for name in request.get("env_unset") or ():
            env.pop(str(name), None)
        return env


_SIGNALS_RESET = tuple(s for s in (getattr(signal, "SIGPIPE", None),
                                   getattr(signal, "SIGXFSZ", None)) if s is not None)
_DEVNULL = -1


class _Spawned:
    """The little of ``subprocess.Popen`` the supervisor uses, for a job started by posix_spawn."""

    def __init__(self, pid: int) -> None:
        self.pid, self.returncode = pid, None

    def wait(self) -> int:
        try:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        except ChildProcessError:  # as Popen: reaped elsewhere, nothing more to know
            self.returncode = 0
        return self.returncode


def _spawn(argv: list, log_fd: int, cwd: str | None, env: dict | None):
    """Start the job in a session of its own, its output into its log.

    ``posix_spawn`` (a vfork) when the program is given by its path and no
    working folder is asked for: what a short job costs is mostly its start,
    and this start costs less than ``Popen``'s.  Otherwise ``Popen``, which
    searches the job's own PATH and changes folder.  Either way: stdin from
    /dev/null, only the three standard descriptors inherited (spacrq's own
    are close-on-exec), SIGPIPE and SIGXFSZ back to their defaults.
    """
    global _DEVNULL
    program = argv[0] if argv and isinstance(argv[0], str) else ""
    if cwd is None and os.sep in program and hasattr(os, "posix_spawn") \
            and all(isinstance(a, str) for a in argv):
        if _DEVNULL < 0:
            _DEVNULL = os.open(os.devnull, os.O_RDONLY)
        pid = os.posix_spawn(program, argv, os.environ if env is None else env,
                             file_actions=[(os.POSIX_SPAWN_DUP2, _DEVNULL, 0),
                                           (os.POSIX_SPAWN_DUP2, log_fd, 1),
                                           (os.POSIX_SPAWN_DUP2, log_fd, 2)],
                             setsid=True, setsigdef=_SIGNALS_RESET)
        return _Spawned(pid)
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_fd,
                            stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True)


def open_log(request: dict, fd: int = -1) -> tuple[int, str | None, str]:
    """``(log fd, working folder, '')`` for the job of ``request``, its log opened for its
    output (``fd``: opened already) and its header written; the fd is -1 or the problem
    set when it cannot start (its log cannot be opened, its working folder is not there)."""
    log, cwd = request["log"], request.get("cwd") or None
    if fd < 0:
        try:
            fd = open_append(log)
        except OSError as exc:
            return -1, cwd, (f"could not open its log {log} ({exc.strerror or exc}); make the "
                             "logs folder writable, or move what is in the log's place away")
    header = request.get("header")
    if isinstance(header, str) and header:
        try:
            os.write(fd, header.encode("utf-8", "replace"))
        except OSError:
            pass  # the job's own output will say the same about the log
    if cwd and not os.path.isdir(cwd):
        return fd, cwd, f"its working folder {cwd} does not exist"
    return fd, cwd, ""


def start(request: dict, log_fd: int, cwd: str | None, env: dict | None) -> tuple[Any, str]:
    """The job of ``request`` started: ``(its process, '')``, or ``(None, why not)``."""
    try:
        return _spawn(request["argv"], log_fd, cwd, env), ""
    except (OSError, ValueError, TypeError) as exc:
        argv = request.get("argv") or ["?"]
        return None, f"could not start {argv[0]}: {getattr(exc, 'strerror', None) or exc}"


def _held(request: dict, requests) -> tuple[bool, dict | None]:
    """For a request sent ahead (``hold``): ``(go, the next request)``.

    The runner sends a job before its "running" is on disk, so this process
    opens the log and readies the environment while the runner writes;
    the job starts only at the runner's ``{"go": key}``, after that write.
    Anything else (the runner went away, or sent another job) drops it.
    """
    if not request.get("hold"):
        return True, None
    following = next(requests, None)
    if isinstance(following, dict) and following.get("go") == request["key"] \
            and "argv" not in following:
        return True, None
    return False, following if isinstance(following, dict) and "argv" in following else None


def supervise(request: dict, out, parent: int, envs: _Env | None = None,
              requests=None, announce: float = ANNOUNCE_AFTER) -> dict | None:
    """Run one job to its end and record it; the request read after it, if it was dropped."""
    log, record, key = request["log"], request["record"], request["key"]
    base = {"key": key, "job": request.get("job", "")}
    log_fd, cwd, problem = open_log(request)
    popen = None
    env = None
    if not problem:
        try:
            env = (envs or _Env()).of(request)
        except (ValueError, TypeError, AttributeError) as exc:
            problem = f"its environment cannot be used ({exc})"
    go, following = _held(request, requests if requests is not None else iter(()))
    if not go:
        if log_fd >= 0:
            os.close(log_fd)
        _note(log, "# spacrq: not started: the runner took it back before it began\n")
        return following
    if not problem:
        popen, problem = start(request, log_fd, cwd, env)
    if popen is None:
        if log_fd >= 0:
            os.close(log_fd)
        _note(log, f"error: {problem}\n")
        finished = _now()
        _record(record, dict(base, exit_code=127, finished=finished, error=problem), False)
        _answer(out, {"exit": 127, "finished": finished, "error": problem, "not_started": True})
        return None
    started = time.time()
    # The start record first, from this process, which outlives the runner: a runner that
    # dies from here on leaves a job that the next one adopts or records, never reruns.
    record_fd = _open_append(record)  # kept open: the job's end is one write, no open
    try:
        _record(record, dict(base, pid=popen.pid, started=started, supervisor=os.getpid(),
                             before=request.get("before") or {},
                             folders=request.get("folders") or []), False, record_fd)
        if not _ended_within(popen.pid, announce):
            _answer(out, {"pid": popen.pid, "started": started})
        code, maxrss = _wait(popen)
        finished = _now()
        orphaned = os.getppid() != parent  # nobody else will record it: survive a power cut
        answer = {"exit": code, "finished": finished, "pid": popen.pid, "started": started}
        # A job that succeeded and left nothing behind is told before it is written down:
        # the runner makes its end durable in its own journal before the next job starts,
        # so the two writes overlap (the record is for a runner that died, and this
        # process writes it either way).  A failure is written down first: the runner
        # reads its log to tell why it failed, and its own notes come after this one.
        early = code == 0 and not orphaned and not _group_exists(popen.pid)
        if early:
            _answer(out, answer)
        _record(record, dict(base, exit_code=code, finished=finished, **_peak_of(maxrss)),
                orphaned, record_fd)
    finally:
        if record_fd >= 0:
            os.close(record_fd)
    _note(log, f"\n# finished {finished} with exit code {code}\n", log_fd)
    left = "" if early else _stop_leftovers(popen.pid, float(request.get("grace", 10.0)))
    if left:
        _note(log, f"# the job left processes running in its group after it ended; they were "
                   f"{left}\n", log_fd)
    if log_fd >= 0:
        os.close(log_fd)
    if not early:
        _answer(out, answer)
    return None


def _requests(stream):
    """The JSON objects sent on ``stream``, one a line (a garbled line costs only itself)."""
    for line in stream:
        try:
            request = orjson.loads(line)
        except ValueError:
            continue
        if isinstance(request, dict):
            yield request


def main() -> int:
    from spacrq import steadylog
    steadylog.install()  # (its stderr is the runner's log: a full disk never ends it)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner decides when a job stops
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    parent = os.getppid()
    out = sys.stdout.buffer
    envs = _Env()
    announce = announce_after()
    requests = _requests(sys.stdin)
    request = next(requests, None)
    while request is not None:
        following = None
        if {"argv", "log", "record", "key"} <= set(request):
            following = supervise(request, out, parent, envs, requests, announce)
        request = following if following is not None else next(requests, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
