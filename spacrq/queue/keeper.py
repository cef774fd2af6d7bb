"""The runner's keeper: the small parent process that records a job whose runner died.

A queue runner starts each job as its own child and waits for it directly:
no second process has to wake up, be told and answer between two jobs, which
for a short job cost more than the job itself.  What a job's end must
survive — the runner SIGKILLed, the OOM killer, a bug — is then kept by this
process, the runner's parent:

* it makes itself the *child subreaper* of everything below it
  (``PR_SET_CHILD_SUBREAPER``), so a job whose runner died becomes its child,
  not init's;
* the runner sees a job's end with ``waitid(…, WNOWAIT)`` and makes it durable
  in the queue's journal *before* it reaps the job, so a runner that dies in
  between leaves a zombie that this process reaps;
* for each such job it finds the start its runner wrote in the queue's exit
  record (``NAME_logs/exits.jsonl``, whose line names this process as the
  job's ``supervisor``, and the job's log) and appends the job's end to it,
  durably, with a line in the job's log; ``spacrq queue resume`` then records that outcome, or adopts
  the job while it still runs, and never runs it again;
* a job its runner died too soon to write down by pid is found by its
  ``starting`` line (it leads its own session and started just after it),
  waited for a moment if it does not lead its session yet (a job with a
  working folder changes folder first), and a runner killed with a second
  thread — which hands its jobs on before it can be waited for — counts as
  ended from that moment.

It starts the runner (``python -m spacrq.queue.keeper --logs FOLDER -- RUNNER
ARGV…``), passes SIGTERM, SIGHUP and SIGINT on to it, reaps whatever else is
left to it, and once the runner
and every job left to it have ended exits with the runner's exit code.  Where
the kernel has no subreapers, or ``SPACRQ_QUEUE_KEEPER=0`` asks for it, it
becomes the runner itself (``exec``), which then starts its jobs under the
supervisor process of :mod:`spacrq.queue.supervise`, as a runner started by a
script does.

It imports nothing of spacrq's but the exit record's name: it starts, and
stays, small.
"""
from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from datetime import datetime, timezone

from spacrq.rawio import write_all

#: the runner's environment names its keeper (a runner whose parent it is not is not kept)
KEEPER_ENV = "SPACRQ_QUEUE_KEEPER"
EXIT_RECORD = "exits.jsonl"  # (as spacrq.queue.supervise names it; a test holds them equal)
PR_SET_CHILD_SUBREAPER = 36
_APPEND = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK


def _open_append(path: str) -> int:
    """An existing regular file opened for appending (never a link, a FIFO, a device)."""
    fd = os.open(path, _APPEND)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


#: set by the ``spacrq`` command's entry (:func:`spacrq.cli.command`): only a process that is
#: the command may replace itself with a keeper (never a test's or a script's)
MAY_KEEP = False


def keeper_argv(runner_argv: list[str], logs: "str | os.PathLike", tell: int | None = None
                ) -> list[str]:
    """The argv that starts ``runner_argv`` under a keeper (``tell``: a descriptor the
    keeper writes the runner's pid to)."""
    from spacrq.procs import module_argv
    return module_argv("spacrq.queue.keeper", "--logs", str(logs),
                       *(("--tell", str(tell)) if tell is not None else ()), "--", *runner_argv)


def run_kept(logs: "str | os.PathLike") -> None:
    """Become, for a foreground ``spacrq queue run``, a keeper that runs this same command
    as its runner (``exec``: the terminal's process is the keeper, and waits for it).

    Returns only when this process is not the ``spacrq`` command, is already a
    keeper's runner, or cannot be replaced; the run then goes on unkept, its jobs
    under a supervisor process.
    """
    if not MAY_KEEP or KEEPER_ENV in os.environ:
        return
    from spacrq.procs import module_argv
    argv = keeper_argv(module_argv("spacrq", *sys.argv[1:]), logs)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        os.execv(argv[0], argv)
    except OSError:
        return


def kept_by() -> int | None:
    """This process's keeper (its parent, named in its environment), or None when not kept."""
    value = os.environ.get(KEEPER_ENV, "")
    try:
        keeper = int(value)
    except ValueError:
        return None
    return keeper if keeper > 1 and os.getppid() == keeper else None


def become_subreaper() -> bool:
    """Ask the kernel to give this process the orphans below it; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _lines(path: str, wanted: tuple[bytes, ...] = ()) -> list[dict]:
    """The complete JSON-object lines of the exit record ``path`` (never read through a
    link, never from a FIFO) that hold one of ``wanted`` (all when empty).

    Read whole, from its start, a chunk at a time — not just its end: whatever was
    appended after a job's start (a huge line, a flood of lines from another writer)
    never hides that start.  Memory stays bounded: a line longer than
    :data:`LINE_MAX` is nobody's record and is skipped unread, and only the lines
    wanted are parsed and kept.  The last line counts too (each line is written with
    the newline before it, so the newest has none after it yet)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except OSError:
        return []
    found: list[dict] = []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        for raw in raw_lines(fd):
            if wanted and not any(w in raw for w in wanted):
                continue
            try:
                line = json.loads(raw)
            except (ValueError, RecursionError):
                continue  # a torn line, or one nested beyond reason
            if isinstance(line, dict):
                found.append(line)
    except OSError:
        pass  # (what was read stands)
    finally:
        os.close(fd)
    return found


#: A record line longer than this is garbage (a job's start with a large ``before``
#: snapshot of its output folders stays far below it): skipped without being kept.
LINE_MAX = 16 * 1024 * 1024
_CHUNK = 1024 * 1024


def raw_lines(fd: int):
    """Each line (without its newline) of the file open as ``fd``, from where it is to its
    end, lines over :data:`LINE_MAX` left out."""
    tail = bytearray()
    skipping = False
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            break
        parts = chunk.split(b"\n")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if not skipping:
                tail += part
                if len(tail) > LINE_MAX:
                    tail.clear()
                    skipping = True
            if last:
                break
            if not skipping and tail:
                yield bytes(tail)
            tail.clear()
            skipping = False
    if tail and not skipping:
        yield bytes(tail)


def open_starts(logs: str, keeper: int, since: float
                ) -> tuple[dict[int, tuple[str, dict]], list[tuple[str, dict]]]:
    """The jobs started under ``keeper`` whose end is not written down, from the exit
    record in ``logs`` (if changed since ``since``): ``({pid: (record, start line)},
    [(record, "starting" line)])`` — the second for a job whose runner died between
    starting it and writing down its pid (see :func:`_match`)."""
    found: dict[int, tuple[str, dict]] = {}
    unnamed: list[tuple[str, dict]] = []
    record = os.path.join(logs, EXIT_RECORD)
    try:
        st = os.lstat(record)
    except OSError:
        return found, unnamed
    if not stat.S_ISREG(st.st_mode) or st.st_mtime < since:
        return found, unnamed
    starts: dict[tuple, dict] = {}  # (job, attempt) → its start, until its end
    # (only lines naming this keeper, or an end, are parsed: a flood of others costs a scan)
    for line in _lines(record, (str(keeper).encode(), b"exit_code")):
        key = line.get("key")
        ends = _code(line.get("exit_code"))
        if not isinstance(key, str) or line.get("supervisor") != keeper and not ends:
            continue
        attempt = (str(line.get("job", "")), key)
        if ends:
            starts.pop(attempt, None)
        elif valid_pid(line.get("pid")):
            # the first start that names a process stands, as resume reads it (a line
            # written after it, naming another process, is not the runner's)
            if not valid_pid(starts.get(attempt, {}).get("pid")):
                starts[attempt] = line
        elif _number(line.get("starting")) and attempt not in starts:
            starts[attempt] = line
    for line in starts.values():
        if valid_pid(line.get("pid")):
            found[line["pid"]] = (record, line)
        else:
            unnamed.append((record, line))
    return found, unnamed


#: Linux's largest process id (``PID_MAX_LIMIT``): a pid beyond it is garbage.
PID_LIMIT = 1 << 22


def valid_pid(value) -> bool:
    """Whether ``value`` (read from a file) can be a process id: an int, not a bool, in
    1 … :data:`PID_LIMIT` — anything else would reach a system call as -1 (every
    process), 0 (the caller's group) or an overflow."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= PID_LIMIT


def _code(value) -> bool:
    """Whether ``value`` is an exit code as the runner and the keeper write one (an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _identity(pid: int) -> tuple[int, float] | None:
    """``(session, start time as a Unix time)`` of the process ``pid`` — readable for a
    zombie too, so it is read before the process is reaped."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as f:
            boot = next(float(ln.split()[1]) for ln in f if ln.startswith(b"btime"))
        return int(fields[3]), boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _match(unnamed: list[tuple[str, dict]], pid: int, identity: tuple[int, float] | None
           ) -> tuple[str, dict] | None:
    """The "starting" line naming the process ``pid``, if it is that job: a job leads a
    session of its own (so a leftover of the job before cannot pass for it) and started
    just after its runner wrote the line (so one of an older job cannot either)."""
    if identity is None or identity[0] != pid:
        return None
    fits = [(record, line) for record, line in unnamed if _started_after(line, identity[1])]
    return max(fits, key=lambda fit: fit[1]["starting"]) if fits else None


def _started_after(line: dict, began: float) -> bool:
    """Whether a process that began at ``began`` (``/proc``'s clock: to a second) may be the
    job of the "starting" line ``line``."""
    return line["starting"] - 1.0 <= began <= line["starting"] + 30.0


def _children(me: int) -> list[int]:
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []


def _append_line(record: str, line: dict) -> None:
    """One line at the end of an exit record, durably (nobody else will write it)."""
    fd = _open_append(record)
    try:
        write_all(fd, b"\n" + json.dumps(line).encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def name_orphans(logs: str, me: int, since: float, runner: int) -> None:
    """Once the runner died: write down the pid of a job it started but never named (it
    died in between), so the next runner adopts the job instead of running it again."""
    starts, unnamed = open_starts(logs, me, since)
    if not unnamed:
        return
    for pid in _children(me):
        if pid == runner or pid in starts:
            continue
        hit = _match(unnamed, pid, _identity(pid))
        if hit is None:
            continue
        record, line = hit
        identity = _identity(pid)
        try:
            _append_line(record, {"key": line.get("key"), "job": line.get("job", ""),
                                  "log": line.get("log", ""), "pid": pid,
                                  "started": identity[1] if identity else line["starting"],
                                  "supervisor": me, "named_by": "keeper",
                                  "before": line.get("before") or {},
                                  "folders": line.get("folders") or []})
        except OSError as exc:
            print(f"spacrq keeper: could not write {record}: {exc}", file=sys.stderr, flush=True)


def _exit_code(status: int) -> int:
    try:
        return os.waitstatus_to_exitcode(status)
    except ValueError:
        return -1


def record_end(record: str, start: dict, code: int, maxrss_kib: int, pid: int = 0) -> None:
    """Append the end of the job ``start`` names to its record, durably, and say so in its log.

    Nobody else will: its runner is dead.  The peak is an upper bound only
    (the kernel counts into a job's figure the memory of the runner that
    started it, which is gone and cannot be compared with).
    """
    finished = _now()
    line = {"key": start.get("key"), "job": start.get("job", ""), "exit_code": code,
            "finished": finished, "peak_rss_bytes": None, "recorded_by": "keeper"}
    if pid:
        line["pid"] = pid
    if maxrss_kib > 0:
        line["peak_rss_at_most_bytes"] = maxrss_kib * 1024
    try:
        _append_line(record, line)
    except OSError as exc:
        print(f"spacrq keeper: could not write {record}: {exc}", file=sys.stderr, flush=True)
    _log_note(record, start, f"\n# finished {finished} with exit code {code} (its runner had "
                             f"died; written down by the runner's keeper, process {os.getpid()})\n")


def log_of(record: str, start: dict) -> str:
    """The log of the job whose start line is ``start``: the file its line names in the
    record's folder — a plain name only (read from a file: it never leads elsewhere),
    else ''."""
    name = start.get("log")
    if not isinstance(name, str) or not name.endswith(".log") or name.startswith(".") \
            or "/" in name or "\\" in name or "\0" in name or name != os.path.basename(name):
        return ""
    return os.path.join(os.path.dirname(record), name)


def _log_note(record: str, start: dict, text: str) -> None:
    log = log_of(record, start)
    if not log:
        return
    try:
        fd = _open_append(log)
        try:
            write_all(fd, text.encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # the exit record is what resume reads


def _reap_ready() -> None:
    """Reap whatever child has ended (leftovers of a job are this process's once orphaned)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return


def _group_left(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_leftovers(pgid: int, record: str, start: dict) -> None:
    """Stop what the job ``pgid`` left in its group once it ended (as its runner would have):
    SIGTERM, the grace (``SPACRQ_GRACE``, 10 s), SIGKILL; a line in its log when anything
    was left."""
    _reap_ready()
    if not _group_left(pgid):
        return
    try:
        grace = float(os.environ.get("SPACRQ_GRACE", "10"))
    except ValueError:
        grace = 10.0
    how = "terminated"
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            break
        deadline = time.monotonic() + max(0.0, wait)
        while _group_left(pgid) and time.monotonic() < deadline:
            time.sleep(0.02)
            _reap_ready()
        if not _group_left(pgid):
            break
        how = "killed"
    _log_note(record, start, f"# the job left processes running in its group after it ended; "
                             f"they were {how} by the runner's keeper\n")


def _ended(pid: int) -> bool:
    """Whether this process's child ``pid`` has ended (seen, not reaped)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and bool(info.si_pid)


def _ours(pid: int) -> bool:
    """Whether ``pid`` is still this process's child (running, or ended and not reaped)."""
    if not valid_pid(pid):
        return False
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (ChildProcessError, OSError, OverflowError):
        return False
    return True


#: How long after its runner died the keeper waits for a job the runner had just started to
#: lead its session (a job started with a working folder changes folder first), so that it
#: is named and recorded rather than run again.
NAMING_WAIT = 30.0
#: ``PF_EXITING`` in a process's ``/proc/PID/stat`` flags: it is being torn down.
_PF_EXITING = 0x4


def _dying(pid: int) -> bool:
    """Whether the process ``pid`` is dying but cannot be waited for yet: its main thread
    ended (a zombie) or is ending while its other threads still run.  A runner killed with
    a second thread (numpy's, once it imported numpy) is such a process for a moment, and
    the kernel hands its jobs on to this keeper in that moment."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0] in (b"Z", b"X") or bool(int(fields[6]) & _PF_EXITING)
    except (OSError, ValueError, IndexError):
        return False


def _unsettled(unnamed: list[tuple[str, dict]], me: int, runner: int) -> bool:
    """Whether a child of this keeper may be the job of an unnamed "starting" line but does
    not lead its own session yet (see :data:`NAMING_WAIT`)."""
    if not unnamed:
        return False
    for pid in _children(me):
        identity = None if pid == runner else _identity(pid)
        if identity is not None and identity[0] != pid and any(
                _started_after(line, identity[1]) for _, line in unnamed):
            return True
    return False


def keep(runner: int, logs: str, since: float) -> int:
    """Reap the children until the runner ended and no job it left is still running,
    recording the jobs a dead runner left; the runner's exit code (``128 + signal`` when a
    signal ended it).  Whatever else is left (a daemon a job started) is not waited for."""
    code = 1
    me = os.getpid()
    runner_alive = True
    naming_until = 0.0
    while True:
        unsettled = False
        if not runner_alive:
            starts, unnamed = open_starts(logs, me, since)
            if not any(_ours(pid) for pid in starts) and unnamed \
                    and time.monotonic() < naming_until:
                name_orphans(logs, me, since, runner)  # (a job that now leads its session)
                starts, unnamed = open_starts(logs, me, since)
            if not any(_ours(pid) for pid in starts):
                unsettled = time.monotonic() < naming_until and _unsettled(unnamed, me, runner)
                if not unsettled:
                    return code
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT
                             | (os.WNOHANG if unsettled else 0))
        except ChildProcessError:
            return code
        if info is None or not info.si_pid:
            if unsettled:
                time.sleep(0.02)
            continue
        pid = info.si_pid
        # While the runner runs, no job is this process's child: what ends is a leftover,
        # reaped and forgotten with no look at the records (a job's daemons may be many).
        # A runner that is dying but cannot be waited for yet (killed with a second
        # thread) has handed its jobs on already: it counts as ended.
        running = runner_alive and not _ended(runner) and not _dying(runner)
        orphan = pid != runner and not running
        identity = _identity(pid) if orphan else None  # (read before it is reaped)
        try:
            _, status, usage = os.wait4(pid, 0)
        except ChildProcessError:
            continue
        if pid == runner:
            ended = _exit_code(status)
            code = 128 - ended if ended < 0 else ended
            runner_alive = False
            naming_until = time.monotonic() + NAMING_WAIT
            name_orphans(logs, me, since, runner)
            continue
        if not orphan:
            continue
        # Only a job whose runner died is both this process's child and named, by an end
        # not written down, in an exit record of this keeper's (anything else left to it is
        # a job's own leftover, reaped and forgotten).
        starts, unnamed = open_starts(logs, me, since)
        hit = starts.get(pid) or _match(unnamed, pid, identity)
        if hit is not None:
            record_end(hit[0], hit[1], _exit_code(status), int(usage.ru_maxrss), pid)
            stop_leftovers(pid, hit[0], hit[1])


def main(argv: list[str] | None = None) -> int:
    from spacrq import steadylog
    steadylog.install()  # (its stderr is the runner's log: a full disk never ends it)
    args = list(sys.argv[1:] if argv is None else argv)
    logs, tell, runner_argv = "", -1, []
    while args:
        arg = args.pop(0)
        if arg == "--logs" and args:
            logs = args.pop(0)
        elif arg == "--tell" and args:
            tell = int(args.pop(0))
        elif arg == "--":
            runner_argv = args
            break
    if not runner_argv or not logs:
        print("spacrq keeper: usage: python -m spacrq.queue.keeper --logs FOLDER [--tell FD] "
              "-- RUNNER ARGV…", file=sys.stderr)
        return 2

    def told(pid: int) -> None:
        if tell >= 0:
            try:
                os.write(tell, f"{pid}\n".encode())
                os.close(tell)
            except OSError:
                pass

    # SPACRQ_QUEUE_KEEPER=0 asks for a runner with no keeper (its jobs under a supervisor)
    if os.environ.get(KEEPER_ENV) == "0" or not become_subreaper():  # be the runner itself
        told(os.getpid())
        os.environ[KEEPER_ENV] = "0"  # (a runner not kept: it must not try again)
        os.execv(runner_argv[0], runner_argv)
    since = time.time() - 5.0  # (records are written after this; a coarse clock is allowed)
    if tell >= 0:
        os.set_inheritable(tell, False)
    runner = 0
    early: list[int] = []  # signals that came before the runner was there to be told

    def forward(signum: int, _frame) -> None:
        if not runner:
            early.append(signum)
            return
        try:
            os.kill(runner, signum)
        except OSError:
            pass  # it ended: this process only records what it left

    # SIGINT too: a terminal's Ctrl-C reaches the runner's process group anyway (the runner
    # takes a second one as the first), but a `kill -INT` of this process, the one an
    # operator sees, reached nobody.  A handler, not SIG_IGN: an ignored signal stays
    # ignored through exec, in the runner and its jobs.
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, forward)
    env = dict(os.environ)
    env[KEEPER_ENV] = str(os.getpid())
    try:
        runner = os.posix_spawn(runner_argv[0], runner_argv, env)
    except OSError as exc:
        print(f"spacrq keeper: could not start the runner {runner_argv[0]}: {exc}",
              file=sys.stderr, flush=True)
        return 127
    told(runner)
    for signum in early:
        forward(signum, None)
    return keep(runner, logs, since)


if __name__ == "__main__":
    sys.exit(main())
