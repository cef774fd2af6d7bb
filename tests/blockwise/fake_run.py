"""A blockwise run faked on disk, file for file as docs/CONVENTIONS.md describes it.

The Run Report pane and its watcher only read files, so tests drive them by
writing those files: a tracking store (zarr v3 group), ``progress.json``
replaced as blocks complete, and one ``runs.jsonl`` line when the run ends.
Tests call :meth:`FakeRun.complete` step by step instead of running a
thread, so every state the watcher sees is one the test chose.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from spacrq.blockwise.report import (Stat, TaskReport, WorkerRecord, append_run,
                                     summarize_blocks, summarize_workers)
from spacrq.blockwise.watch_source import RunSource
from spacrq.runfiles import write_progress

RECENT = 2000
#: seconds each fake block waited in its worker (of the 2 ms its round trip adds to its wall)
QUEUED = 0.0005


def create_tracking_arrays(group, shape, *, tracked: bool = True) -> None:
    """The store's arrays as docs/CONVENTIONS.md lays them out, every one at its fill value."""
    group.create_array("done", shape=shape, dtype=bool, fill_value=False)
    group.create_array("failures", shape=shape, dtype=np.int32, fill_value=0)
    if tracked:
        for name in ("wall_seconds", "cpu_seconds", "sent_at", "returned_at", "queued_seconds",
                     "idle_seconds"):
            group.create_array(name, shape=shape, dtype=np.float64, fill_value=np.nan)
        for name in ("peak_rss_bytes", "io_read_bytes", "io_write_bytes"):
            group.create_array(name, shape=shape, dtype=np.int64, fill_value=-1)
        group.create_array("worker_id", shape=shape, dtype=np.int32, fill_value=-1)


class FakeRun:
    def __init__(self, store_dir: Path, task_id: str = "smooth", grid_shape=(4, 5), workers: int = 2,
                 tracked: bool = True, store: bool = True, run_id: str = "run-1",
                 slowing_ms: float = 0.0, noise: float = 0.0) -> None:
        self.dir = Path(store_dir)
        self.task_id = task_id
        self.grid_shape = tuple(grid_shape)
        self.total = int(np.prod(self.grid_shape))
        self.workers = workers
        self.tracked = tracked
        self.run_id = run_id
        self.slowing = slowing_ms / 1000.0
        self.noise = noise  # seconds of random extra wall per block (seeded: reproducible)
        self._rng = np.random.default_rng(7)
        self.started_at = time.time()
        self.seq = 0
        self.failed: list[int] = []
        self.recent: list[list] = []
        self.idle = [0.0] * workers
        self.compute = [0.0] * workers
        self.blocks = [0] * workers
        self.walls: list[float] = []
        self.rss: list[int] = []
        self.worker_of: list[int] = []
        self.dir.mkdir(parents=True, exist_ok=True)
        self.group = self._create_store() if store else None

    def _create_store(self):
        import zarr
        g = zarr.open_group(str(self.dir), mode="a", zarr_format=3)
        g.attrs.update({"spacrq_tracking": 1, "task_id": self.task_id, "layout_hash": "fake",
                        "geometry": {"total_roi": {"offset": [0] * len(self.grid_shape),
                                                   "shape": [10 * n for n in self.grid_shape]},
                                     "read_roi": {"offset": [0] * len(self.grid_shape),
                                                  "shape": [10] * len(self.grid_shape)},
                                     "write_roi": {"offset": [0] * len(self.grid_shape),
                                                   "shape": [10] * len(self.grid_shape)},
                                     "grid_shape": list(self.grid_shape), "fit": "valid"}})
        if "done" not in g:
            create_tracking_arrays(g, self.grid_shape, tracked=self.tracked)
        return g

    def complete(self, n: int, *, fail: int = 0, state: str = "running") -> None:
        """Complete the next ``n`` blocks (the last ``fail`` of them fail) and publish progress."""
        now = time.time()
        for i in range(n):
            sid = self.seq + len(self.failed)
            if sid >= self.total and self.group is not None:
                break
            w = sid % self.workers
            wall = 0.010 + self.slowing * self.seq + self.noise * self._rng.random()
            rss = 50_000_000 + 1000 * self.seq + int(self.noise * 1e8 * self._rng.random())
            if i >= n - fail:
                self.failed.append(sid)
                if self.group is not None:
                    coord = np.unravel_index(sid, self.grid_shape)
                    self.group["failures"][coord] = 3
                continue
            self.seq += 1
            self.walls.append(wall)
            self.rss.append(rss)
            self.worker_of.append(w)
            self.compute[w] += wall
            self.idle[w] += 0.001
            self.blocks[w] += 1
            self.recent.append([self.seq, wall if self.tracked else None,
                                rss if self.tracked else None, w])
            if self.group is not None:
                coord = np.unravel_index(sid, self.grid_shape)
                self.group["done"][coord] = True
                if self.tracked:
                    for name, v in (("wall_seconds", wall), ("cpu_seconds", wall * 0.9),
                                    ("peak_rss_bytes", rss), ("io_read_bytes", 4096),
                                    ("io_write_bytes", 2048), ("worker_id", w),
                                    ("sent_at", now - wall - 0.002), ("returned_at", now + 1e-6 * i),
                                    ("queued_seconds", QUEUED + 1e-6 * i), ("idle_seconds", 0.001)):
                        self.group[name][coord] = v
        self.recent = self.recent[-RECENT:]
        self.publish(state)

    def publish(self, state: str = "running", written_at: float | None = None) -> None:
        elapsed = max(time.time() - self.started_at, 1e-3)
        write_progress(self.dir / "progress.json", {
            "run_id": self.run_id, "state": state, "pid": 0 if state != "running" else _me(),
            "started_at": self.started_at, "written_at": written_at or time.time(),
            "task": {"task_id": self.task_id, "total": self.total, "done": self.seq, "skipped": 0,
                     "failed": len(self.failed), "orphaned": 0, "in_flight": 0,
                     "blocks_per_second": self.seq / elapsed},
            "workers": [{"worker_id": w, "pid": 1000 + w, "state": "busy" if state == "running" else "exited",
                         "idle_seconds": self.idle[w], "compute_seconds": self.compute[w],
                         "blocks": self.blocks[w], "exit": None if state == "running" else "clean"}
                        for w in range(self.workers)],
            "seq": self.seq, "recent": self.recent, "ran_on": getattr(self, "ran_on", None)})

    def report(self) -> TaskReport:
        walls = np.array(self.walls) if self.tracked else None
        blocks = summarize_blocks(
            count=self.seq + len(self.failed), skipped=0, failures=3 * len(self.failed),
            round_trip=np.array(self.walls) + 0.002 if self.workers else np.empty(0),
            wall=walls, cpu=None if walls is None else walls * 0.9,
            peak_rss=np.array(self.rss) if self.tracked else None,
            io_read=np.full(self.seq, 4096) if self.tracked else None,
            io_write=np.full(self.seq, 2048) if self.tracked else None,
            queued=np.full(self.seq, QUEUED) if self.workers else None)
        mine = np.array(self.worker_of)
        records = [WorkerRecord(w, startup=0.2, blocks_ok=self.blocks[w],
                                idle=Stat.of(np.full(self.blocks[w], 0.001)),
                                compute=Stat.of(np.array(self.walls)[mine == w]) if self.seq else Stat(),
                                teardown=0.05, exit="clean") for w in range(self.workers)]
        return TaskReport(self.task_id, blocks, summarize_workers(records), self.started_at,
                          time.time(), tracked=self.group is not None)

    def finish(self, state: str = "finished") -> TaskReport:
        """End the run: final progress, and its report line appended to runs.jsonl."""
        report = self.report()
        append_run(self.dir / "runs.jsonl", report)
        self.publish(state)
        return report


def _me() -> int:
    import os
    return os.getpid()


def look(watcher, key=None, run_index=None, *, worker=None, block=None, opened=(), token=1):
    """What the Run Report's watch shows after the operator's choices: opened paths, a run, a drill-down.

    Submits the actions the pane would (``open`` each path, ``select``, ``worker``,
    ``block``) and polls once; returns the snapshot (None when nothing changed).
    """
    for path in opened:
        watcher.submit(token, "open", path=str(path))
        token += 1
    if key is not None:
        watcher.submit(token, "select", key=key, run_index=run_index)
        token += 1
    if worker is not None:
        watcher.submit(token, "worker", worker_id=worker)
        token += 1
    if block is not None:
        watcher.submit(token, "block", block_id=block)
    return watcher.poll({})


def heavy_poll(workspace, monkeypatch, stores=40, each=0.05):
    """Make every store of ``stores`` cost ``each`` seconds of CPU to look at (a slow disk, a
    big store), so one poll takes seconds; returns an Event set once a poll is under way."""
    for i in range(stores):
        write_progress(workspace.runs / f"t{i:02d}" / "progress.json",
                       {"run_id": "r", "state": "finished", "task": {"task_id": f"t{i}"}})
    started = threading.Event()
    real = RunSource.refresh

    def slow_refresh(self, now=None):
        started.set()
        end = time.perf_counter() + each
        while time.perf_counter() < end:  # real work, holding the interpreter as parsing does
            pass
        real(self, now)

    monkeypatch.setattr(RunSource, "refresh", slow_refresh)
    return started
