"""Resuming a queue where a crash, a reboot, a Stop or an Abort left it.

Finished jobs are never rerun.  A job left ``running`` by a runner that died
may still be running — its process group outlives the runner — so it is
stopped first, then run again; a module that can continue from its own
checkpoints is asked to (``resume=True``) instead of starting over.
"""
from __future__ import annotations

import os
from typing import Any

from spacrq.modules import ModuleError
from spacrq.procs import ProcessRef, is_alive, stop_group
from spacrq.queue.engine import run_queue
from spacrq.queue.jobproc import grace_seconds
from spacrq.queue.model import (STATUS_FAILED, STATUS_NOT_RUN, STATUS_PENDING, STATUS_RUNNING,
                                STATUS_SKIPPED, Job, Queue)
from spacrq.queue.store import load_queue, logs_dir, save_queue
from spacrq.queue.summary import QueueResult
from spacrq.queue.validate import Modules
from spacrq.runfiles import clear


def _stop_orphan(job: Job) -> None:
    """A job left ``running`` by a killed runner may still be running: stop it first."""
    ref = ProcessRef.from_dict(job.process)
    if ref is not None and is_alive(ref.pid, ref.started or None):
        stop_group(ref.pid, grace_seconds(), started=ref.started or None)


def _resume_override(job: Job, modules: Modules) -> None:
    """Ask a resumable module to continue from its checkpoints rather than start over."""
    try:
        spec = modules.spec(job.module)
    except ModuleError:
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


def prepare_resume(queue: Queue, retry_failed: bool = False) -> Queue:
    """Reset what a resume runs: left-running jobs (orphans stopped first) and not-run ones.

    ``retry_failed`` also reruns failed jobs and the jobs skipped because of them.
    """
    modules = Modules()
    for job in queue.jobs:
        if job.status == STATUS_RUNNING:
            _stop_orphan(job)
            _resume_override(job, modules)
            job.reset()
        elif job.status == STATUS_NOT_RUN:
            job.status, job.error = STATUS_PENDING, ""
        elif retry_failed and job.status in (STATUS_FAILED, STATUS_SKIPPED):
            if job.status == STATUS_FAILED:
                _resume_override(job, modules)
            job.reset()
    queue.stopped_reason = ""
    return queue


def resume_queue(path: str | os.PathLike, retry_failed: bool = False, **kwargs: Any) -> QueueResult:
    """Pick a queue up where a crash, a reboot, a Stop or an Abort left it.

    Finished jobs are never rerun; a job left ``running`` is rerun (with
    ``resume=True`` for a module that can continue); ``not_run`` and
    ``pending`` jobs run.  A stale stop request is cleared first.
    """
    queue = prepare_resume(load_queue(path), retry_failed)
    clear(logs_dir(path))
    save_queue(queue, path)
    return run_queue(queue, path, **kwargs)
