"""What a run measured, gathered as results arrive, turned into the report at the end.

Executors hand every result here: the per-block figures a worker measured
(wall, CPU, peak RSS, IO), the scheduler's own stamps (sent, returned), and
each worker's life (spawned, ready, idle and compute per block, final wait,
teardown, how it exited).  The tracking store is updated from the same
numbers, so the report and the store never disagree.

Per-block samples are kept in plain lists in completion order (cheap to
append, a few floats a block) and turned into numpy arrays once, when the
report is built with report.py's builders.  The live progress view reads
:attr:`TaskFigures.recent` and the worker lives.
"""
from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from spacrq.blockwise.report import (
    Stat,
    TaskReport,
    WorkerRecord,
    summarize_blocks,
    summarize_workers,
)
from spacrq.blockwise.tracking import TrackingStore

__all__ = ["WorkerLife", "TaskFigures", "RECENT"]

#: completed blocks kept for the live charts (CONVENTIONS: last ≤ 2000)
RECENT = 2000


@dataclass
class WorkerLife:
    """One worker process's lifecycle, as the scheduler saw it."""

    worker_id: int
    pid: int | None = None
    spawned_at: float = field(default_factory=time.time)
    startup: float | None = None
    state: str = "starting"  # starting | idle | busy | exited
    idle: list = field(default_factory=list)
    compute: list = field(default_factory=list)
    blocks_ok: int = 0
    blocks_failed: int = 0
    final_wait: float | None = None
    stop_sent_at: float | None = None
    teardown: float | None = None
    exit: str | None = None

    idle_total: float = 0.0
    compute_total: float = 0.0

    def add(self, idles, computes) -> None:
        """Per-block idle gaps and compute times of one batch."""
        idles = [max(0.0, x) for x in idles]
        self.idle.extend(idles)
        self.compute.extend(computes)
        self.idle_total += sum(idles)
        self.compute_total += sum(computes)

    def record(self) -> WorkerRecord:
        return WorkerRecord(worker_id=self.worker_id, startup=self.startup, blocks_ok=self.blocks_ok,
                            blocks_failed=self.blocks_failed, idle=Stat.of(self.idle),
                            compute=Stat.of(self.compute), final_wait=self.final_wait,
                            teardown=self.teardown, exit=self.exit)

    def progress(self) -> dict:
        return {"worker_id": self.worker_id, "pid": self.pid, "state": self.state,
                "idle_seconds": self.idle_total, "compute_seconds": self.compute_total,
                "blocks": self.blocks_ok + self.blocks_failed, "exit": self.exit}


def _shared_transport(queued, own, walls, round_trip: float) -> list:
    """Each block's queued time, counting its wait for the rest of its batch's transport.

    The worker sends, per block, its wait behind other blocks (``queued``)
    and its own bookkeeping gap just before it (``own``).  One message
    carries a batch's results: what is left of the round trip once a
    block's queued, own gap and wall are taken out (the pipe both ways, the
    pickling, the scheduler's turn) is the same for all ``k`` blocks of the
    message and paid once for all of them.  A block's own share of it is
    ``1/k``; the rest it spent waiting for its batch-mates' share, which is
    waiting like any other.  So a block's overhead is its own gap plus its
    share of the transport, and the overheads of a run add up to what
    spacrq itself cost the workers.
    """
    k = len(queued)
    if k <= 1:
        return list(queued)
    share = (k - 1) / k
    return [q + (round_trip - q - g - w) * share for q, g, w in zip(queued, own, walls)]


class TaskFigures:
    """Everything measured for one task during one run."""

    def __init__(self, task_id: str, store: TrackingStore | None, resource_tracking: bool) -> None:
        self.task_id = task_id
        self.store = store
        self.tracking = bool(resource_tracking)
        self.started_at = time.time()
        self.finished_at: float | None = None
        self.round_trip: list[float] = []
        self.queued: list[float] = []
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.peak_rss: list[int] = []
        self.io_read: list[int] = []
        self.io_write: list[int] = []
        self.workers: dict[int, WorkerLife] = {}
        self.unmanaged_clients = 0
        self.seq = 0
        self.recent: deque = deque(maxlen=RECENT)
        self.rate_marks: deque = deque(maxlen=64)  # (time, completions) for blocks/s

    def worker(self, worker_id: int) -> WorkerLife:
        life = self.workers.get(worker_id)
        if life is None:
            life = self.workers[worker_id] = WorkerLife(worker_id)
        return life

    def results(self, worker_id: int, results: list, sent_at: float, returned_at: float,
                worker_life: bool = True) -> tuple[list, list]:
        """Record a batch of results; returns ``(ok ids, [(id, error)...])``.

        Each result is ``(spatial id, error or None, wall, cpu, peak_rss,
        read, write, idle before[, queued, own gap])`` as the worker sends it
        (an executor that cannot tell how long a block waited in its worker
        leaves them out: queued is then not measured, never 0).  Batches
        are handled column-wise: a batch of cheap blocks costs a few list
        extends, not a loop of appends per block.
        """
        if not results:
            return [], []
        life = self.worker(worker_id) if worker_life else WorkerLife(-1)
        columns = list(zip(*results))
        sids, errors, walls, cpus, rss, reads, writes, idles = columns[:8]
        if len(columns) > 9:
            queued = _shared_transport(columns[8], columns[9], walls, returned_at - sent_at)
        elif len(columns) > 8:
            queued = columns[8]
        else:
            queued = (float("nan"),) * len(sids)
        life.add(idles, walls)
        idles = [max(0.0, x) for x in idles]
        if any(e is not None for e in errors):
            failed = [(sid, e) for sid, e in zip(sids, errors) if e is not None]
            keep = [i for i, e in enumerate(errors) if e is None]
            sids, walls, cpus, rss, reads, writes, idles, queued = (
                [col[i] for i in keep] for col in (sids, walls, cpus, rss, reads, writes, idles, queued))
            life.blocks_failed += len(failed)
        else:
            failed = []
        n = len(sids)
        life.blocks_ok += n
        if not n:
            return [], failed
        self.round_trip.extend([returned_at - sent_at] * n)
        self.queued.extend(queued)
        if self.tracking:
            self.wall.extend(walls)
            self.cpu.extend(cpus)
            self.peak_rss.extend(rss)
            self.io_read.extend(reads)
            self.io_write.extend(writes)
        seq = self.seq
        self.recent.extend(zip(range(seq + 1, seq + n + 1), walls, rss, itertools.repeat(worker_id)))
        self.seq = seq + n
        ok = list(sids)
        if self.store is not None:
            columns: dict = {"done": True}
            if self.store.has_stats and self.tracking:
                columns.update(
                    wall_seconds=walls, cpu_seconds=cpus, peak_rss_bytes=rss, io_read_bytes=reads,
                    io_write_bytes=writes, worker_id=worker_id if worker_life else -1,
                    sent_at=sent_at, returned_at=returned_at, queued_seconds=queued,
                    idle_seconds=idles)
            self.store.record(np.asarray(ok, dtype=np.int64), **columns)
        return ok, failed

    def failure(self, spatial_id: int) -> None:
        if self.store is not None:
            self.store.add_failure(spatial_id)

    def blocks_per_second(self, now: float) -> float:
        self.rate_marks.append((now, self.seq))
        t0, n0 = self.rate_marks[0]
        if now - t0 <= 0:
            return 0.0
        return (self.seq - n0) / (now - t0)

    # -- the report -------------------------------------------------------------
    def report(self, *, count: int, skipped: int, failures: int) -> TaskReport:
        end = self.finished_at or time.time()
        kw = {}
        if self.tracking:
            kw = dict(wall=np.asarray(self.wall), cpu=np.asarray(self.cpu),
                      peak_rss=np.asarray(self.peak_rss, dtype=np.float64),
                      io_read=np.asarray(self.io_read, dtype=np.float64),
                      io_write=np.asarray(self.io_write, dtype=np.float64))
        blocks = summarize_blocks(count=count, skipped=skipped, failures=failures,
                                  round_trip=np.asarray(self.round_trip),
                                  queued=np.asarray(self.queued, dtype=np.float64), **kw)
        workers = summarize_workers([w.record() for w in self.workers.values()],
                                    unmanaged_clients=self.unmanaged_clients)
        return TaskReport(self.task_id, blocks=blocks, workers=workers, started_at=self.started_at,
                          finished_at=end, tracked=self.store is not None,
                          store=self.store.path if self.store is not None else None)
