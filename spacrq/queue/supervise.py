"""The job supervisor: starts each job, waits for it, and writes down how it ended.

Why a process of its own: the runner can die mid-job (SIGKILL, the OOM
killer, a bug) while its job — a GPU segmentation, an instrument sweep —
goes on for hours.  A job is a child of this supervisor, not of the runner,
so when the job ends the supervisor still sees its exit status and writes
it, with the end time, to the job's *exit record* next to its log
(``01_mask.log`` → ``01_mask.exit.jsonl``, one complete line per event,
written in one ``write``).  ``spacrq queue resume`` reads that record: a
job that finished while its runner was dead is recorded, never run again;
a job still running is adopted (see :mod:`spacrq.queue.adopt`).

One supervisor per run, not per job: starting a Python interpreter for each
job would cost more than a short job itself.  The runner starts it with
``python -m spacrq.queue.supervise`` and sends one JSON line per job on its
stdin; it answers ``{"pid", "started"}`` once the job runs and ``{"exit",
"finished"}`` when it ended.  When its stdin closes (the runner ended or
died) it finishes the job at hand, records it durably, and exits.

It also stops what a job left running in its process group before it
answers, so jobs never overlap even across a runner's death.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

# Deliberately not spacrq.runfiles: this process starts once per run and the
# runner waits for it, so it imports only what it uses.  Its appends follow the
# run-file rules all the same: one write per line, never through a link.
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)

EXIT_SUFFIX = ".exit.jsonl"


def exit_record_path(log_path: str) -> str:
    """Where the supervisor writes how the job of ``log_path`` ended."""
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


def _append(path: str, data: bytes, durable: bool = False) -> None:
    """One write at the end of ``path`` (a line torn by a crash is skipped by its reader)."""
    fd = os.open(path, _APPEND, 0o644)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def _note(path: str, text: str) -> None:
    try:
        _append(path, text.encode("utf-8", "replace"))
    except OSError as exc:
        print(f"spacrq supervisor: could not write {path}: {exc}", file=sys.stderr, flush=True)


def _record(path: str, line: dict, durable: bool) -> None:
    try:  # a fresh line first, in case a crash tore the last one
        _append(path, ("\n" + json.dumps(line, default=str) + "\n").encode(), durable)
    except OSError as exc:  # the runner still gets the answer on the pipe
        print(f"spacrq supervisor: could not write {path}: {exc}", file=sys.stderr, flush=True)


def _answer(out, reply: dict) -> None:
    try:
        out.write(json.dumps(reply) + "\n")
        out.flush()
    except (OSError, ValueError):
        pass  # the runner is gone; the exit record says it all


def _wait(popen: subprocess.Popen) -> tuple[int, int | None]:
    """``(exit code, peak resident memory in bytes)`` of the job once it ended.

    ``wait4`` gives the job's resource use with its exit status: its peak
    memory (and that of any child it waited for) is what the morning report
    shows per job, measured by the kernel rather than sampled.
    """
    try:
        _, status, usage = os.wait4(popen.pid, 0)
    except ChildProcessError:
        return popen.wait(), None
    popen.returncode = os.waitstatus_to_exitcode(status)
    peak = int(usage.ru_maxrss) * 1024 if usage.ru_maxrss > 0 else None  # Linux: kilobytes
    return popen.returncode, peak


def supervise(request: dict, out, parent: int) -> None:
    """Run one job to its end and record it."""
    log, record, key = request["log"], request["record"], request["key"]
    base = {"key": key, "job": request.get("job", "")}
    try:
        log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                         | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        log_fd, problem = -1, f"could not open its log {log} ({exc.strerror or exc})"
    else:
        problem = ""
    popen = None
    cwd = request.get("cwd") or None
    if not problem and cwd and not os.path.isdir(cwd):
        problem = f"its working folder {cwd} does not exist"
    if not problem:
        try:
            popen = subprocess.Popen(request["argv"], stdin=subprocess.DEVNULL, stdout=log_fd,
                                     stderr=subprocess.STDOUT, cwd=cwd,
                                     env=request.get("env"), start_new_session=True)
        except (OSError, ValueError, TypeError) as exc:
            argv = request.get("argv") or ["?"]
            problem = f"could not start {argv[0]}: {getattr(exc, 'strerror', None) or exc}"
    if log_fd >= 0:
        os.close(log_fd)
    if popen is None:
        _note(log, f"error: {problem}\n")
        finished = _now()
        _record(record, dict(base, exit_code=127, finished=finished, error=problem), False)
        _answer(out, {"exit": 127, "finished": finished, "error": problem})
        return
    started = time.time()
    _record(record, dict(base, pid=popen.pid, started=started, supervisor=os.getpid(),
                         before=request.get("before") or {},
                         folders=request.get("folders") or []), False)
    _answer(out, {"pid": popen.pid, "started": started})
    code, peak = _wait(popen)
    finished = _now()
    orphaned = os.getppid() != parent  # nobody else will record it: make it survive a power cut
    _record(record, dict(base, exit_code=code, finished=finished, peak_rss_bytes=peak), orphaned)
    _note(log, f"\n# finished {finished} with exit code {code}\n")
    left = _stop_leftovers(popen.pid, float(request.get("grace", 10.0)))
    if left:
        _note(log, f"# the job left processes running in its group after it ended; they were "
                   f"{left}\n")
    _answer(out, {"exit": code, "finished": finished})


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner decides when a job stops
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    parent = os.getppid()
    out = sys.stdout
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if isinstance(request, dict) and {"argv", "log", "record", "key"} <= set(request):
            supervise(request, out, parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
