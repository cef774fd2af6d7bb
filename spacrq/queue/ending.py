"""How a queue run ends: the queue's own verdict stamped, and one notification.

The queue is a ledger of ledgers: its verdict is stamped beside the queue
file in spaCR's run-status format (one record per run; a failed, skipped or
partial job is a failed item), so the same tools that read a module's stamps
read the night's.  When the whole queue ends, ``notify_command`` (an argument
list, never a shell string) is run once, with the outcome in its environment.
"""
from __future__ import annotations

import os
import subprocess
import time

from spacrq.ledger import Ledger
from spacrq.procs import stop_group
from spacrq.queue.model import STATUS_FAILED, STATUS_SKIPPED, STATUS_SUCCESS, Queue
from spacrq.queue.summary import QueueResult

NOTIFY_TIMEOUT = 60.0


def queue_ledger(result: QueueResult) -> Ledger:
    """The night as one ledger: each job an item, failed/skipped/partial ones failures."""
    ledger = Ledger(f"queue:{result.queue.name}")
    for job in result.queue.jobs:
        if job.status == STATUS_SUCCESS and not job.is_partial:
            ledger.succeeded(job.id, stage=job.module)
        elif job.status in (STATUS_FAILED, STATUS_SKIPPED) or job.is_partial:
            kind = job.failure_kind or ("Skipped" if job.status == STATUS_SKIPPED else "Partial")
            ledger.failures.append({"item": job.id, "stage": job.module, "exc_type": kind,
                                    "message": job.error, "traceback_str": "",
                                    "timestamp": time.time()})
    return ledger


def write_morning_report(path: str | os.PathLike) -> tuple[str, str]:
    """Write the night's morning report beside the queue's logs: ``(its path, problem)``.

    Never fatal: a report that cannot be written is a note in the summary,
    not the end of a night that has already run.
    """
    from spacrq.queue.locks import linked_logs
    from spacrq.queue.store import logs_dir
    problem = linked_logs(logs_dir(path))
    if problem:
        return "", f"the morning report was not written: {problem}"
    try:
        from spacrq.night import write_report
        return str(write_report(path)), ""
    except Exception as exc:  # the night is over; the report is its epilogue
        return "", f"the morning report could not be written: {exc}"


def notify(queue: Queue, result: QueueResult) -> str:
    """Run the queue's ``notify_command`` once (argv, no shell); a note when it failed."""
    if not queue.notify_command:
        return ""
    env = dict(os.environ, SPACRQ_QUEUE_NAME=queue.name, SPACRQ_QUEUE_FILE=result.path,
               SPACRQ_QUEUE_STATE=result.state, SPACRQ_QUEUE_OK="1" if result.ok else "0",
               SPACRQ_QUEUE_SUMMARY=f"{queue.name}: {result.headline()}"
               + (f"; {result.save_problem}" if result.save_problem else ""),
               SPACRQ_QUEUE_SAVE_FAILED="1" if result.save_problem else "0",
               SPACRQ_NIGHT_REPORT=result.report_path)
    try:
        proc = subprocess.Popen(list(queue.notify_command), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    except OSError as exc:
        return f"the notify command could not start ({exc.strerror or exc}); fix notify_command"
    try:
        code = proc.wait(timeout=NOTIFY_TIMEOUT)
    except subprocess.TimeoutExpired:
        stop_group(proc.pid, 2.0, popen=proc)
        return f"the notify command ran longer than {NOTIFY_TIMEOUT:g}s and was stopped"
    return f"the notify command exited with code {code}" if code else ""
