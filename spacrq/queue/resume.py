"""Resuming a queue where a crash, a reboot, a Stop or an Abort left it.

Finished jobs are never rerun.  A job left ``running`` by a runner that died
is taken over by the next runner (:mod:`spacrq.queue.adopt`): recorded when
it finished meanwhile, adopted when it still runs, and run again only when
its outcome is truly unknown — then a module that can continue from its own
checkpoints is asked to (``resume=True``) instead of starting over.
"""
from __future__ import annotations

import os
from typing import Any

from spacrq.queue.adopt import resume_override
from spacrq.queue.engine import run_queue
from spacrq.queue.model import STATUS_FAILED, STATUS_NOT_RUN, STATUS_PENDING, STATUS_SKIPPED, Queue
from spacrq.queue.store import edit_lock, file_key, load_queue, logs_dir
from spacrq.queue.summary import QueueResult
from spacrq.queue.validate import Modules
from spacrq.runfiles import clear


def prepare_resume(queue: Queue, retry_failed: bool = False) -> Queue:
    """Make ``not_run`` jobs runnable again (``running`` ones are the runner's to take over).

    ``retry_failed`` also reruns failed jobs and the jobs skipped because of them.
    """
    modules = Modules()
    for job in queue.jobs:
        if job.status == STATUS_NOT_RUN:
            job.status, job.error = STATUS_PENDING, ""
        elif retry_failed and job.status in (STATUS_FAILED, STATUS_SKIPPED):
            if job.status == STATUS_FAILED:
                resume_override(job, modules)
            job.reset()
    queue.stopped_reason = ""
    return queue


def load_for_run(path: str | os.PathLike, resume: bool = False,
                 retry_failed: bool = False) -> tuple[Queue, tuple | None]:
    """The queue as its next runner starts it, and the file's key as read (under the edit lock)."""
    with edit_lock(path):
        queue = load_queue(path, unique_keys=True)
        key = file_key(path)
    if resume or retry_failed:
        prepare_resume(queue, retry_failed)
    return queue, key


def resume_queue(path: str | os.PathLike, retry_failed: bool = False, **kwargs: Any) -> QueueResult:
    """Pick a queue up where a crash, a reboot, a Stop or an Abort left it.

    Finished jobs are never rerun; a job left ``running`` is recorded,
    adopted, or rerun only when its outcome is unknown; ``not_run`` and
    ``pending`` jobs run.  A stale stop request is cleared first.
    """
    queue, key = load_for_run(path, resume=True, retry_failed=retry_failed)
    clear(logs_dir(path))
    kwargs.setdefault("loaded_key", key)
    return run_queue(queue, path, **kwargs)
