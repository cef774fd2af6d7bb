"""Whether a blockwise run is still going, and what it has durably done: one answer for all.

``progress.json`` says ``running`` from a run's first snapshot to its last,
and a scheduler that is SIGKILLed (or loses its machine) never writes the
last one, so the file alone would say "running" forever.  A run is therefore
*running* only while the scheduler process that wrote the snapshot lives —
the same pid **and** the same start time (:class:`spacrq.procs.ProcessRef`),
so a pid the system handed to somebody's editor since does not count.
Otherwise it is *interrupted*, and its counts are the durable ones: the done
marks the tracking store holds on disk.  The scheduler's in-memory count
runs ahead of them by up to one flush (done marks are written in batches,
figures first and ``done`` last, each chunk fsync'd before it replaces the
old one), and a block whose mark never reached the disk will be redone, so
it must not be reported done.

``spacrq report`` and the Run Report pane both ask :func:`run_state` and
:func:`durable_outcome` (read from disk by
:func:`spacrq.blockwise.report_store.durable_counts`); neither decides on its own.
"""
from __future__ import annotations

import functools
import math
import os
import socket
import time
from typing import Any, Mapping

import numpy as np

from spacrq.procs import ProcessRef

__all__ = ["STALE_AFTER", "scheduler_ref", "scheduler_record", "scheduler_running", "run_state",
           "durable_outcome"]

#: a snapshot written on another machine cannot have its process checked from here; it counts
#: as running while it is fresher than this (the scheduler replaces it four times a second)
STALE_AFTER = 10.0


@functools.lru_cache(maxsize=4)
def _record_of(pid: int) -> dict:
    ref = ProcessRef.of(pid)
    return {"pid": ref.pid, "started": ref.started, "host": socket.gethostname()}


def scheduler_record() -> dict:
    """What a snapshot says about the process writing it: pid, start time, host."""
    return dict(_record_of(os.getpid()))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def scheduler_ref(progress: Mapping[str, Any]) -> tuple[ProcessRef | None, str | None]:
    """``(the scheduler's ProcessRef or None, its host or None)`` from a snapshot.

    Snapshots written before the start time was recorded name only a pid; it
    is checked as a pid alone.  A pid that is not a positive whole number is
    no process at all.
    """
    record = progress.get("scheduler")
    record = record if isinstance(record, Mapping) else {}
    pid = record.get("pid", progress.get("pid"))
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None, None
    started = _number(record.get("started")) or 0.0
    host = record.get("host") if isinstance(record.get("host"), str) else None
    return ProcessRef(pid, started), host


def scheduler_running(progress: Mapping[str, Any] | None, now: float | None = None) -> bool:
    """Whether the run a snapshot describes is going: it says running and its scheduler lives."""
    if not isinstance(progress, Mapping) or progress.get("state") != "running":
        return False
    ref, host = scheduler_ref(progress)
    written = _number(progress.get("written_at"))
    now = time.time() if now is None else now
    fresh = written is not None and now - written <= STALE_AFTER
    if host is not None and host != socket.gethostname():
        return fresh
    if ref is None:
        return False
    if ref.alive():
        return True
    try:  # another user's process may be hidden from us (/proc hidepid): then trust a fresh one
        os.kill(ref.pid, 0)
    except PermissionError:
        return fresh
    except OSError:
        return False
    return False


def run_state(progress: Mapping[str, Any] | None, now: float | None = None) -> str | None:
    """``running``, ``interrupted``, the snapshot's own final state, or None without one.

    A snapshot saying ``running`` whose scheduler is gone is ``interrupted``.
    """
    if not isinstance(progress, Mapping):
        return None
    state = progress.get("state")
    if not isinstance(state, str) or not state:
        return None
    if state == "running":
        return "running" if scheduler_running(progress, now) else "interrupted"
    return state


def durable_outcome(done: np.ndarray, failures: np.ndarray | None,
                    returned_at: np.ndarray | None, started_at: float | None) -> dict:
    """The counts the store's own arrays (as read from disk) give for the run since ``started_at``.

    ``done`` counts every block marked done, ``skipped`` those done before the
    run started (returned before it, or never timed), ``failed`` the blocks
    with failed attempts and no done mark.
    """
    done = np.asarray(done).astype(bool, copy=False).ravel()
    failed = 0
    if failures is not None:
        failed = int(np.count_nonzero((np.asarray(failures).ravel() > 0) & ~done))
    skipped = 0
    if started_at is not None and returned_at is not None:
        returned = np.asarray(returned_at, dtype=np.float64).ravel()
        in_run = np.isfinite(returned) & (returned >= started_at)
        skipped = int(np.count_nonzero(done & ~in_run))
    return {"total": int(done.size), "done": int(done.sum()), "skipped": skipped, "failed": failed}

