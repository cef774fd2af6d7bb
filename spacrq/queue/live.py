"""What a terminal shows of a running queue: jobs done of total, the running job, its last log line.

Read from the queue's own files (the queue file with its journal, the
runner record, the running job's log), so the same lines serve the live
view of ``spacrq queue run`` in the foreground and ``spacrq queue status
--follow`` of a queue the window started.
"""
from __future__ import annotations

import os
import time
from typing import Any

from spacrq.fmt import duration
from spacrq.queue.model import (STATUS_FAILED, STATUS_RUNNING, STATUS_SKIPPED, STATUS_SUCCESS,
                                QueueError, parse_iso)
from spacrq.terminal import Frame, bar

_FINISHED = (STATUS_SUCCESS, STATUS_FAILED, STATUS_SKIPPED)


def queue_lines(path: str | os.PathLike, *, now: float | None = None) -> list[str]:
    """The queue's state as a few short lines (a sentence when it cannot be read)."""
    return _view(path, now)[0]


def _view(path: str | os.PathLike, now: float | None = None) -> tuple[list[str], tuple]:
    """The lines, and the same without their clocks (what a change is: see Frame.key)."""
    from spacrq.queue.store import load_queue, logs_dir
    from spacrq.queue.summary import log_tail
    try:
        queue = load_queue(path)
    except QueueError as exc:
        return [f"cannot read the queue: {exc}"], ()
    now = time.time() if now is None else now
    total = len(queue.jobs)
    finished = [j for j in queue.jobs if j.status in _FINISHED]
    partial = sum(1 for j in finished if j.status == STATUS_SUCCESS and j.is_partial)
    ok = sum(1 for j in finished if j.status == STATUS_SUCCESS) - partial
    failed = sum(1 for j in finished if j.status == STATUS_FAILED)
    skipped = sum(1 for j in finished if j.status == STATUS_SKIPPED)
    outcomes = ", ".join(f"{n} {word}" for n, word in ((ok, "ok"), (partial, "partial"),
                                                       (failed, "failed"), (skipped, "skipped"))
                         if n) or "none yet"
    starts = [t.timestamp() for t in (parse_iso(j.started) for j in queue.jobs) if t]
    elapsed = f"  elapsed {duration(now - min(starts))}" if starts else ""
    head = (f"{queue.name}: {len(finished)} of {total} jobs finished ({outcomes}) "
            f"{bar(len(finished), total)}")
    lines, key = [head + elapsed], [head]
    for i, job in enumerate(queue.jobs, start=1):
        if job.status != STATUS_RUNNING:
            continue
        started = parse_iso(job.started)
        took = duration(now - started.timestamp()) if started else "—"
        lines.append(f"running  {i}. {job.id} ({job.module}) for {took}")
        key.append(f"running {i}")
        last = log_tail(job.log_path, max_lines=1, within=logs_dir(path)) \
            if job.log_path else []
        last = [ln for ln in last if not ln.startswith("# ")]
        if last:
            lines.append(f"         {last[-1][:160]}")
    if queue.stopped_reason:
        lines.append(f"stopped: {queue.stopped_reason}")
        key.append(lines[-1])
    return lines, tuple(key)


def queue_frame(path: str | os.PathLike) -> Frame:
    """The queue now, and whether its runner has ended (exit 0 only if every job completed)."""
    from spacrq.queue.runner import runner_state
    from spacrq.queue.store import load_queue
    from spacrq.queue.summary import QueueResult
    lines, key = _view(path)
    state: dict[str, Any] | None = runner_state(path)
    if state and state.get("alive"):
        return Frame(tuple(lines), key=key)
    try:
        queue = load_queue(path)
    except QueueError:
        return Frame(tuple(lines), ended=True, exit_code=2)
    if state is None:
        lines.append("no runner is running this queue")
    elif state.get("state") == "crashed":
        lines.append(f"the runner (process {state.get('pid')}) is gone without finishing; "
                     "'spacrq queue resume' carries on")
    result = QueueResult(queue=queue)
    return Frame(tuple(lines), ended=True, exit_code=0 if result.ok else 1)
