"""The live charts of one running task, built up from its ``progress.json`` poll after poll.

Each snapshot lists the last completions with their ``seq``; only the ones
not seen before are taken in, so a ten-hour run costs each poll the same as
a one-minute one.  Completions that scrolled out of the snapshot between two
looks are counted as missed, never invented.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from spacrq.blockwise.watch_series import CHART_BUCKETS, PeakSeries, Trend

__all__ = ["TIME_BUCKETS", "LiveRun", "as_number"]

#: buckets for the series over run time (cumulative worker time, blocks per second): smooth
#: curves, one point per look, that need far fewer points to draw truly
TIME_BUCKETS = 384


def as_number(v: Any) -> float | None:
    """A JSON figure as a float; None when it is missing, not a number, NaN or a bool."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _recent_array(recent: Any) -> np.ndarray:
    """``recent`` as an (n, 4) float array; nulls (unmeasured figures) become NaN."""
    if not isinstance(recent, list) or not recent:
        return np.empty((0, 4))
    try:
        arr = np.array(recent, dtype=np.float64)
    except (TypeError, ValueError):
        rows = [[math.nan if v is None else v for v in (list(r) + [None] * 4)[:4]]
                for r in recent if isinstance(r, (list, tuple))]
        try:
            arr = np.array(rows, dtype=np.float64).reshape(-1, 4)
        except (TypeError, ValueError):
            return np.empty((0, 4))
    if arr.ndim != 2 or arr.shape[1] < 4:
        return np.empty((0, 4))
    return arr[:, :4]


class LiveRun:
    """What the charts of one running task need, built up poll after poll.

    ``wall`` and ``rss`` are per completed block (x: its ``seq``), ``rate``
    and each worker's ``idle`` and ``compute`` over run time; ``version``
    moves whenever a snapshot brought something new.  A new run of the task
    starts every series afresh.
    """

    def __init__(self, capacity: int = CHART_BUCKETS) -> None:
        self.capacity = capacity
        self.version = 0
        self._reset(None, 0.0)

    def _reset(self, run_id: Any, started_at: float) -> None:
        self.run_id, self.started_at = run_id, started_at
        self.written_at: float | None = None
        self.last_seq = self.missed = 0
        self.wall = PeakSeries(self.capacity)
        self.rss = PeakSeries(self.capacity)
        self.rate = PeakSeries(min(self.capacity, TIME_BUCKETS))
        self.trend = Trend()
        self.idle: dict[Any, PeakSeries] = {}
        self.compute: dict[Any, PeakSeries] = {}

    def ingest(self, doc: dict) -> bool:
        """Take in one progress snapshot; False when it holds nothing new."""
        run_id = doc.get("run_id")
        started = as_number(doc.get("started_at")) or 0.0
        if run_id != self.run_id or (started and started != self.started_at):
            self._reset(run_id, started)  # a new run of the task: its charts start afresh
        written = as_number(doc.get("written_at"))
        if written is not None and written == self.written_at:
            return False
        self.written_at = written
        t = (written or time.time()) - (self.started_at or written or 0.0)
        task = doc.get("task") if isinstance(doc.get("task"), dict) else {}
        rate = as_number(task.get("blocks_per_second"))
        if rate is not None:
            self.rate.append(t, rate)
        for w in doc.get("workers") or []:
            if not isinstance(w, dict) or w.get("worker_id") is None:
                continue
            wid = w["worker_id"]
            for series, key in ((self.idle, "idle_seconds"), (self.compute, "compute_seconds")):
                v = as_number(w.get(key))
                if v is not None:
                    if wid not in series:  # a series is made once per worker, not once per look
                        series[wid] = PeakSeries(min(self.capacity, TIME_BUCKETS))
                    series[wid].append(t, v)
        recent = _recent_array(doc.get("recent"))
        if len(recent):
            fresh = recent[recent[:, 0] > self.last_seq]
            if len(fresh):
                fresh = fresh[np.argsort(fresh[:, 0], kind="stable")]
                first = int(fresh[0, 0])
                if first > self.last_seq + 1:
                    self.missed += first - self.last_seq - 1
                self.last_seq = int(fresh[-1, 0])
                self.wall.extend(fresh[:, 0], fresh[:, 1])
                rss = np.where(fresh[:, 2] >= 0, fresh[:, 2], np.nan)  # -1: the store's "not measured"
                self.rss.extend(fresh[:, 0], rss)
                self.trend.extend(fresh[:, 0], fresh[:, 1])
        seq = as_number(doc.get("seq"))
        if seq is not None and int(seq) > self.last_seq:  # completions the snapshot no longer lists
            self.missed += int(seq) - self.last_seq
            self.last_seq = int(seq)
        self.version += 1
        return True

    def snapshot(self) -> dict:
        """Decimated copies of every series, ready to hand to the GUI thread."""
        trend_x, trend_y = self.trend.line()
        return {
            "version": self.version,
            "run_id": self.run_id,
            "completions": self.last_seq,
            "missed": self.missed,
            "wall": self.wall.arrays(),
            "rss": self.rss.arrays(),
            "rate": self.rate.arrays(),
            "trend": (trend_x, trend_y),
            "trend_slope_ms": self.trend.slope * 1000.0,
            "idle": {wid: s.arrays() for wid, s in sorted(self.idle.items())},
            "compute": {wid: s.arrays() for wid, s in sorted(self.compute.items())},
            "measured": len(self.wall) > 0,
        }
