"""Part of the Run Report watch's poller body: the live charts of one running task, built
up from its ``progress.json`` poll after poll.

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

from spacrq.blockwise.report_format import as_number, format_seconds
from spacrq.blockwise.watch_series import CHART_BUCKETS, PeakSeries, Trend

__all__ = ["TIME_BUCKETS", "SLOW_FACTOR", "LiveRun", "as_number", "slowest_id", "slowest_worker"]

#: buckets for the series over run time (cumulative worker time, blocks per second): smooth
#: curves, one point per look, that need far fewer points to draw truly
TIME_BUCKETS = 384
#: a worker whose compute per block is this many times the others' median is called out
SLOW_FACTOR = 1.5


def slowest_id(per_worker: dict):
    """The worker whose compute per block is well above the others' (``SLOW_FACTOR`` × their
    median), or None; only workers with a few blocks count."""
    rates = {w: v["compute"] / v["blocks"] for w, v in per_worker.items()
             if v["blocks"] >= 3 and np.isfinite(v["compute"])}
    if len(rates) < 2:
        return None
    slow = max(rates, key=rates.get)
    others = float(np.median([r for w, r in rates.items() if w != slow]))
    if others <= 0 or rates[slow] < SLOW_FACTOR * others:
        return None
    return slow


def slowest_worker(per_worker: dict) -> str:
    """A sentence naming the straggler when one worker's compute per block is well above the others'.

    ``per_worker`` maps worker id to ``{"blocks": n, "compute": seconds}``;
    empty when no worker stands out (see :func:`slowest_id`).
    """
    slow = slowest_id(per_worker)
    if slow is None:
        return ""
    mine = per_worker[slow]["compute"] / per_worker[slow]["blocks"]
    others = float(np.median([v["compute"] / v["blocks"] for w, v in per_worker.items()
                              if w != slow and v["blocks"] >= 3 and np.isfinite(v["compute"])]))
    return (f"Slowest worker: {slow}, {format_seconds(mine)} of compute per block against "
            f"{format_seconds(others)} for the others (median), {mine / others:.1f}× slower")


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
        self.per_worker: dict[Any, dict] = {}  # the last look's totals per worker

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
            self.per_worker[wid] = {"blocks": int(as_number(w.get("blocks")) or 0),
                                    "compute": as_number(w.get("compute_seconds")) or 0.0,
                                    "idle": as_number(w.get("idle_seconds")) or 0.0}
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
            "rss_measured": len(self.rss) > 0,
            "idle_measured": bool(self.idle),
            "source": "live",
            "per_worker": {wid: dict(v) for wid, v in self.per_worker.items()},
            "slowest": slowest_worker(self.per_worker) if len(self.wall) else "",
            "slowest_id": slowest_id(self.per_worker) if len(self.wall) else None,
            "empty": "",
        }
