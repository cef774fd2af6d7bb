"""Watching blockwise runs for the Run Report pane: the poller's body, no Qt.

The pane shows every tracking store in the workspace, the report of each run
(one line of ``runs.jsonl``), and while a task runs, live charts fed by its
``progress.json``.  Everything that touches a file happens here, on the
poller's thread; the window only turns the plain snapshot this returns into
tables and curves.

Two rules keep a 10-hour run as cheap to watch as a one-minute one:

* Files are read incrementally.  ``runs.jsonl`` through a
  :class:`~spacrq.blockwise.report.RunsTail` (a JsonlTail: only new bytes), ``progress.json``
  only when its ``written_at`` moved, and only the completions whose ``seq``
  is new.
* Series are bounded.  :class:`PeakSeries` keeps at most ``capacity``
  min/max buckets and halves its resolution when full, so a chart never holds
  more than a few thousand points however many blocks completed, and a slow
  block is never averaged away.  The trend line is fitted over *every*
  completion with running sums (:class:`Trend`), not over the decimated points.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spacrq import procs
from spacrq.blockwise.report import (ReportError, RunsTail, TaskReport, format_bytes,
                                     format_seconds)
from spacrq.blockwise.report import block as report_block
from spacrq.runfiles import PROGRESS_FILE, RunFileError, read_json

RUNS_FILE = "runs.jsonl"
STORE_MARKER = "zarr.json"
#: a "running" progress file older than this, whose writer is gone, was cut off
STALE_AFTER = 10.0
#: at most this many blocks are listed when drilling into one worker
MAX_WORKER_BLOCKS = 5000
#: min/max buckets per chart series: two points per pixel of a wide chart is all a screen shows
CHART_BUCKETS = 1024
#: buckets for the series over run time (cumulative worker time, blocks per second): smooth
#: curves, one point per look, that need far fewer points to draw truly
TIME_BUCKETS = 384
NOT_MEASURED = "not measured: run with resource_tracking=True to measure wall, CPU, memory and IO per block"


# -- bounded series -----------------------------------------------------------

class PeakSeries:
    """An (x, y) series of unbounded length held in bounded memory.

    Points are grouped into buckets of ``stride`` consecutive points; each
    bucket keeps its lowest and its highest point, so peaks survive
    decimation (a slow block or a memory spike is still on the chart after
    ten hours).  When ``capacity`` buckets are full, neighbouring buckets are
    merged pairwise and the stride doubles.  Appending is amortised O(1) per
    point and :meth:`arrays` returns at most ``2 * capacity + 2`` points.
    """

    def __init__(self, capacity: int = CHART_BUCKETS) -> None:
        if capacity < 2:
            raise ValueError("a series needs a capacity of at least 2 buckets")
        self.capacity = int(capacity)
        self.stride = 1
        self.count = 0  # raw points appended, ever
        self._n = 0     # full buckets
        self._b = np.empty((4, self.capacity), dtype=np.float64)  # xmin, ymin, xmax, ymax
        self._part: list[float] | None = None  # the bucket being filled
        self._part_count = 0

    def __len__(self) -> int:
        return self.count

    def append(self, x: float, y: float) -> None:
        self.extend(np.array([x], dtype=np.float64), np.array([y], dtype=np.float64))

    def extend(self, x: Any, y: Any) -> None:
        """Append points in x order; points whose y is NaN are not data and are dropped."""
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.asarray(y, dtype=np.float64).ravel()
        keep = ~np.isnan(y)
        if not keep.all():
            x, y = x[keep], y[keep]
        i = 0
        while i < len(x):
            if self._n >= self.capacity:
                self._compact()
                continue
            if self._part_count:
                take = min(self.stride - self._part_count, len(x) - i)
                self._fold_into_part(x[i:i + take], y[i:i + take])
                i += take
                if self._part_count == self.stride:
                    self._push(np.array([self._part]).T)
                    self._part, self._part_count = None, 0
                continue
            whole = min((len(x) - i) // self.stride, self.capacity - self._n)
            if whole:
                span = whole * self.stride
                xs = x[i:i + span].reshape(whole, self.stride)
                ys = y[i:i + span].reshape(whole, self.stride)
                lo, hi = ys.argmin(axis=1), ys.argmax(axis=1)
                rows = np.arange(whole)
                self._push(np.vstack([xs[rows, lo], ys[rows, lo], xs[rows, hi], ys[rows, hi]]))
                i += span
            else:  # fewer points than one bucket: they start the partial bucket
                self._fold_into_part(x[i:], y[i:])
                i = len(x)
        self.count += len(x)

    def _fold_into_part(self, x: np.ndarray, y: np.ndarray, count: int | None = None) -> None:
        """Fold points (or another bucket's two extremes, with its ``count``) into the partial bucket."""
        lo, hi = int(y.argmin()), int(y.argmax())
        if self._part is None:
            self._part = [float(x[lo]), float(y[lo]), float(x[hi]), float(y[hi])]
        else:
            p = self._part
            if y[lo] < p[1]:
                p[0], p[1] = float(x[lo]), float(y[lo])
            if y[hi] > p[3]:
                p[2], p[3] = float(x[hi]), float(y[hi])
        self._part_count += len(x) if count is None else count

    def _push(self, buckets: np.ndarray) -> None:
        k = buckets.shape[1]
        self._b[:, self._n:self._n + k] = buckets
        self._n += k

    def _compact(self) -> None:
        """Merge neighbouring buckets pairwise and double the stride.

        An odd last bucket and the partial bucket become the new partial
        bucket; together they hold fewer points than the new stride.
        """
        pairs = self._n // 2
        b = self._b
        a, c = b[:, 0:2 * pairs:2], b[:, 1:2 * pairs:2]
        lo_first = a[1] <= c[1]
        hi_first = a[3] >= c[3]
        merged = np.vstack([
            np.where(lo_first, a[0], c[0]), np.where(lo_first, a[1], c[1]),
            np.where(hi_first, a[2], c[2]), np.where(hi_first, a[3], c[3]),
        ])
        odd = b[:, 2 * pairs].copy() if self._n % 2 else None
        part, part_count = self._part, self._part_count
        old_stride = self.stride
        b[:, :pairs] = merged
        self._n = pairs
        self.stride *= 2
        self._part, self._part_count = None, 0
        for bucket, count in ((odd, old_stride), (part, part_count)):
            if bucket is not None:
                self._fold_into_part(np.array([bucket[0], bucket[2]]),
                                     np.array([bucket[1], bucket[3]]), count)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The points to draw, in x order (copies: safe to hand to another thread)."""
        b = self._b[:, :self._n]
        if self._part is not None:
            b = np.hstack([b, np.array([self._part]).T])
        if self.stride == 1 and self._part_count <= 1:
            return b[0].copy(), b[1].copy()
        first = b[0] <= b[2]
        x = np.empty(2 * b.shape[1])
        y = np.empty(2 * b.shape[1])
        x[0::2] = np.where(first, b[0], b[2])
        y[0::2] = np.where(first, b[1], b[3])
        x[1::2] = np.where(first, b[2], b[0])
        y[1::2] = np.where(first, b[3], b[1])
        return x, y


class Trend:
    """Least-squares line through every point ever added, in O(1) memory.

    Keeps count, means and centred co-moments and merges each batch in
    (Chan's parallel update), which stays exact for millions of points where
    raw sums of x² would lose their digits.
    """

    def __init__(self) -> None:
        self.n = 0
        self.mean_x = self.mean_y = 0.0
        self.cxx = self.cxy = 0.0
        self.min_x = math.inf
        self.max_x = -math.inf

    def extend(self, x: Any, y: Any) -> None:
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.asarray(y, dtype=np.float64).ravel()
        ok = ~(np.isnan(x) | np.isnan(y))
        x, y = x[ok], y[ok]
        nb = len(x)
        if not nb:
            return
        mxb, myb = float(x.mean()), float(y.mean())
        dx = x - mxb
        cxx_b = float(dx @ dx)
        cxy_b = float(dx @ (y - myb))
        n = self.n + nb
        ddx, ddy = mxb - self.mean_x, myb - self.mean_y
        self.cxx += cxx_b + ddx * ddx * self.n * nb / n
        self.cxy += cxy_b + ddx * ddy * self.n * nb / n
        self.mean_x += ddx * nb / n
        self.mean_y += ddy * nb / n
        self.n = n
        self.min_x = min(self.min_x, float(x.min()))
        self.max_x = max(self.max_x, float(x.max()))

    @property
    def slope(self) -> float:
        """Change of y per unit of x; 0 until two distinct x were seen."""
        return self.cxy / self.cxx if self.cxx > 0 else 0.0

    def line(self) -> tuple[np.ndarray, np.ndarray]:
        """The fitted line's two end points over the x range seen (empty before 2 points)."""
        if self.n < 2 or self.cxx <= 0:
            return np.empty(0), np.empty(0)
        xs = np.array([self.min_x, self.max_x])
        return xs, self.mean_y + self.slope * (xs - self.mean_x)


# -- the live run of one store -----------------------------------------------

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


@dataclass
class LiveRun:
    """What the charts of one running task need, built up poll after poll."""

    capacity: int = CHART_BUCKETS
    run_id: Any = None
    started_at: float = 0.0
    written_at: float | None = None
    last_seq: int = 0
    missed: int = 0
    version: int = 0
    wall: PeakSeries = field(init=False)
    rss: PeakSeries = field(init=False)
    rate: PeakSeries = field(init=False)
    trend: Trend = field(init=False)
    idle: dict = field(init=False)
    compute: dict = field(init=False)

    def __post_init__(self) -> None:
        self._reset(None, 0.0)

    def _reset(self, run_id: Any, started_at: float) -> None:
        self.run_id, self.started_at = run_id, started_at
        self.written_at, self.last_seq, self.missed = None, 0, 0
        self.wall = PeakSeries(self.capacity)
        self.rss = PeakSeries(self.capacity)
        self.rate = PeakSeries(min(self.capacity, TIME_BUCKETS))
        self.trend = Trend()
        self.idle, self.compute = {}, {}

    def ingest(self, doc: dict) -> bool:
        """Take in one progress snapshot; False when it holds nothing new."""
        run_id = doc.get("run_id")
        started = _num(doc.get("started_at")) or 0.0
        if run_id != self.run_id or (started and started != self.started_at):
            self._reset(run_id, started)  # a new run of the task: its charts start afresh
        written = _num(doc.get("written_at"))
        if written is not None and written == self.written_at:
            return False
        self.written_at = written
        t = (written or time.time()) - (self.started_at or written or 0.0)
        task = doc.get("task") if isinstance(doc.get("task"), dict) else {}
        rate = _num(task.get("blocks_per_second"))
        if rate is not None:
            self.rate.append(t, rate)
        for w in doc.get("workers") or []:
            if not isinstance(w, dict) or w.get("worker_id") is None:
                continue
            wid = w["worker_id"]
            for series, key in ((self.idle, "idle_seconds"), (self.compute, "compute_seconds")):
                v = _num(w.get(key))
                if v is not None:
                    series.setdefault(wid, PeakSeries(min(self.capacity, TIME_BUCKETS))).append(t, v)
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
        seq = _num(doc.get("seq"))
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


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


# -- tables built from one run's report ----------------------------------------

#: (row label, BlockSummary attribute, unit)
BLOCK_MEASURES = (
    ("round trip", "round_trip", "s"),
    ("wall", "wall", "s"),
    ("CPU", "cpu", "s"),
    ("peak RSS", "peak_rss", "B"),
    ("IO read", "io_read", "B"),
    ("IO write", "io_write", "B"),
    ("overhead", "overhead", "s"),
)
BLOCK_COLUMNS = ("per block", "n", "mean", "std", "min", "max", "total")
WORKER_COLUMNS = ("worker", "startup", "blocks", "failed", "idle", "idle / block",
                  "compute", "compute / block", "teardown", "exit")
LIVE_WORKER_COLUMNS = ("worker", "pid", "state", "blocks", "idle", "compute", "exit")
WORKER_BLOCK_COLUMNS = ("block", "grid position", "wall", "CPU", "peak RSS", "returned", "failures")


def format_when(epoch: float | None, *, short: bool = False) -> str:
    """Local wall-clock time; ``short`` drops the year and seconds for the runs list."""
    if not epoch:
        return "—"
    return time.strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def block_table(report: TaskReport) -> tuple[list[dict], str]:
    """Rows of the per-block summary, and a note saying what was not measured.

    Only measured figures get a row: the scheduler's round trip is there for
    any distributed run, the in-worker figures only with resource tracking.
    A table of zeros would read as "free", which is a lie.
    """
    b = report.blocks
    rows = []
    for label, attr, unit in BLOCK_MEASURES:
        stat = getattr(b, attr)
        if not stat or (attr != "round_trip" and not b.has_stats):
            continue
        rows.append({"key": attr, "cells": [label, f"{stat.n:,}", *stat.cells(unit)]})
    if b.has_stats:
        return rows, ""
    if rows:
        return rows, NOT_MEASURED
    return rows, ("nothing was timed in this run (it ran serially without resource tracking); "
                  "run with resource_tracking=True to measure each block")


def worker_table(report: TaskReport) -> tuple[list[dict], str]:
    """One row per worker of a finished run; a note instead of an empty table."""
    rows = []
    for w in sorted(report.workers.by_id.values(), key=lambda r: r.worker_id):
        rows.append({"key": w.worker_id, "cells": [
            str(w.worker_id), format_seconds(w.startup), f"{w.blocks:,}", f"{w.blocks_failed:,}",
            format_seconds(w.idle.total) if w.idle else "—", format_seconds(w.idle.mean) if w.idle else "—",
            format_seconds(w.compute.total) if w.compute else "—",
            format_seconds(w.compute.mean) if w.compute else "—",
            format_seconds(w.teardown), w.exit or "running"]})
    note = "" if rows else "no worker processes: this run was serial (in-process), so there is no worker timeline"
    return rows, note


def live_worker_table(progress: dict) -> list[dict]:
    """One row per worker of a running task, from its progress snapshot."""
    rows = []
    for w in progress.get("workers") or []:
        if not isinstance(w, dict) or w.get("worker_id") is None:
            continue
        rows.append({"key": w["worker_id"], "cells": [
            str(w["worker_id"]), str(w.get("pid") or "—"), str(w.get("state") or "—"),
            f"{int(w.get('blocks') or 0):,}", format_seconds(_num(w.get("idle_seconds"))),
            format_seconds(_num(w.get("compute_seconds"))), str(w.get("exit") or "—")]})
    return rows


def render_report(report: TaskReport) -> str:
    """The seed's text panel for one run, or why there is none."""
    try:
        text = report.render()
    except Exception as exc:  # a line from another version of the format
        return (f"This report could not be rendered ({type(exc).__name__}: {exc}); "
                "the tables show what it holds.")
    if not report.timed:
        return (text + "\n\nNothing was timed in this run: it ran serially without resource "
                "tracking. Run with resource_tracking=True to measure each block.")
    return text


# -- tracking store -------------------------------------------------------------

def _open_store(store_dir: Path):
    """The store's zarr group, or a RunFileError with one sentence."""
    import zarr  # only stores pay for zarr; a bare runs.jsonl does not
    try:
        return zarr.open_group(str(store_dir), mode="r")
    except Exception as exc:
        raise RunFileError(f"the tracking store {store_dir} could not be opened ({exc}); "
                           "delete it to start the task afresh") from None


def _array(group, name: str, store_dir: Path) -> np.ndarray | None:
    try:
        return np.asarray(group[name][...]).ravel() if name in group else None
    except Exception as exc:
        raise RunFileError(f"the array {name!r} of tracking store {store_dir} cannot be read ({exc}); "
                           "delete the store to start the task afresh") from None


def store_counts(store_dir: Path) -> dict:
    """Blocks done, failed (not done, with failures) and in total, from the store's arrays."""
    group = _open_store(store_dir)
    done = _array(group, "done", store_dir)
    if done is None:
        raise RunFileError(f"the tracking store {store_dir} has no 'done' array; "
                           "delete it to start the task afresh")
    done = done.astype(bool)
    failures = _array(group, "failures", store_dir)
    failed = int(np.count_nonzero((failures > 0) & ~done)) if failures is not None else 0
    return {"done": int(done.sum()), "failed": failed, "total": int(done.size)}


def block_detail(store_dir: Path, block_id: int) -> dict:
    """Everything the tracking store holds for one block, as label → text."""
    try:
        rec = report_block(store_dir, int(block_id))
    except ReportError as exc:
        raise RunFileError(str(exc)) from None
    stats = rec.stats
    fields = [
        ("block (spatial id)", str(rec.spatial_id)),
        ("grid position", "(" + ", ".join(str(c) for c in rec.coord) + ")"),
        ("done", "yes" if rec.done else "no"),
        ("failed attempts", str(rec.failures)),
        ("worker", "—" if rec.worker_id is None else str(rec.worker_id)),
        ("sent", format_when(rec.sent_at)),
        ("returned", format_when(rec.returned_at)),
        ("round trip", format_seconds(rec.round_trip)),
        ("wall", format_seconds(stats.wall_seconds if stats else None)),
        ("CPU", format_seconds(stats.cpu_seconds if stats else None)),
        ("peak RSS", format_bytes(stats.peak_rss_bytes if stats else None)),
        ("IO read", format_bytes(stats.io_read_bytes if stats else None)),
        ("IO write", format_bytes(stats.io_write_bytes if stats else None)),
    ]
    note = "" if stats else NOT_MEASURED
    return {"block_id": rec.spatial_id, "fields": fields, "note": note, "record": rec.to_dict()}


def worker_blocks(store_dir: Path, worker_id: int, limit: int = MAX_WORKER_BLOCKS) -> dict:
    """The blocks one worker completed, in completion order (the last ``limit`` of them).

    Vectorised over whole arrays and bounded in the rows it builds, so a
    worker that did half a million blocks costs one array read, not half a
    million record objects.
    """
    group = _open_store(store_dir)
    wid = _array(group, "worker_id", store_dir)
    if wid is None:
        return {"worker_id": worker_id, "rows": [], "total": 0,
                "note": "this store does not record which worker ran each block: " + NOT_MEASURED}
    geometry = group.attrs.get("geometry") or {}
    shape = tuple(int(n) for n in (geometry.get("grid_shape") or group["done"].shape))
    ids = np.flatnonzero(wid == int(worker_id))
    cols = {}
    for name in ("wall_seconds", "cpu_seconds", "peak_rss_bytes", "returned_at", "failures"):
        arr = _array(group, name, store_dir)
        if arr is not None:
            cols[name] = arr[ids]
    if "returned_at" in cols:
        order = np.argsort(cols["returned_at"], kind="stable")
        ids, cols = ids[order], {k: v[order] for k, v in cols.items()}
    total = len(ids)
    if total > limit:
        ids, cols = ids[-limit:], {k: v[-limit:] for k, v in cols.items()}
    coords = np.stack(np.unravel_index(ids, shape), axis=1) if total else np.empty((0, len(shape)), int)
    fmt = {"wall_seconds": format_seconds, "cpu_seconds": format_seconds,
           "peak_rss_bytes": lambda v: format_bytes(v if v >= 0 else None),
           "returned_at": format_when, "failures": lambda v: str(int(v))}
    names = ("wall_seconds", "cpu_seconds", "peak_rss_bytes", "returned_at", "failures")
    lists = {k: v.tolist() for k, v in cols.items()}
    rows = []
    for i, (bid, coord) in enumerate(zip(ids.tolist(), coords.tolist())):
        cells = [str(bid), "(" + ", ".join(str(c) for c in coord) + ")"]
        cells += [fmt[n](lists[n][i]) if n in lists else "—" for n in names]
        rows.append({"key": bid, "cells": cells})
    note = f"showing the last {limit:,} of {total:,} blocks" if total > limit else ""
    if not total:
        note = f"worker {worker_id} has no block recorded in the tracking store"
    return {"worker_id": worker_id, "rows": rows, "total": total, "note": note}


# -- one watched store -----------------------------------------------------------

def resolve_source(path: str | os.PathLike) -> tuple[Path | None, Path]:
    """``(store_dir or None, runs_file)`` for a path the operator opened.

    :raises RunFileError: with one sentence naming what to choose instead.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise RunFileError(f"{p} does not exist; choose a runs.jsonl file or a task's tracking store folder")
    if p.is_dir():
        if any((p / name).exists() for name in (STORE_MARKER, RUNS_FILE, PROGRESS_FILE)):
            return p.resolve(), (p / RUNS_FILE).resolve()
        raise RunFileError(f"{p} is not a tracking store (it holds no zarr.json, runs.jsonl or "
                           "progress.json); choose the task's store folder")
    if p.name == STORE_MARKER:
        return p.parent.resolve(), (p.parent / RUNS_FILE).resolve()
    if p.suffix == ".jsonl":
        parent = p.parent
        store = parent.resolve() if (parent / STORE_MARKER).exists() or (parent / PROGRESS_FILE).exists() else None
        return store, p.resolve()
    raise RunFileError(f"{p} is neither a runs.jsonl file nor a tracking store; "
                       "choose runs.jsonl or the store folder")


def _ends_torn(path: Path) -> bool:
    """True when the file's last byte is not a newline: a report line cut off mid-write."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return False
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"
    except OSError:
        return False


class RunSource:
    """One tracking store (or a bare runs.jsonl) and everything read from it so far."""

    def __init__(self, store_dir: Path | None, runs_file: Path, *, opened: bool = False,
                 capacity: int = CHART_BUCKETS) -> None:
        self.store_dir = store_dir
        self.runs_file = runs_file
        self.progress_file = store_dir / PROGRESS_FILE if store_dir else None
        self.opened = opened
        self.key = str(store_dir or runs_file)
        self.name = (store_dir or runs_file.parent).name
        self.tail = RunsTail(runs_file)
        self.runs: list[TaskReport] = []
        self.live = LiveRun(capacity=capacity)
        self.progress: dict | None = None
        self.problems: list[str] = []
        self.version = 0
        self._progress_stamp: tuple | None = None
        self._counts: dict | None = None
        self._counts_key: tuple | None = None
        self._counts_problem = ""
        self._last_fingerprint: tuple | None = None

    # reading ------------------------------------------------------------------
    def refresh(self, now: float | None = None) -> None:
        """Read what is new; cheap when nothing changed (a stat or two)."""
        now = time.time() if now is None else now
        problems = []
        new = self.tail.read()
        if self.tail.restarted:
            self.runs = []
        self.runs.extend(new)
        if self.tail.bad_lines:
            problems.append(f"{self.tail.bad_lines} line(s) of {self.runs_file} are not valid report "
                            "lines and were skipped; the other runs are shown")
        if _ends_torn(self.runs_file):
            problems.append(f"the last line of {self.runs_file} is incomplete (a run was cut off while "
                            "writing its report); the runs before it are shown, and rerunning the task "
                            "appends a complete report")
        self._read_progress(problems)
        self._read_counts(problems, now)
        self.problems = problems
        fingerprint = (len(self.runs), self.live.version, self.state(now), tuple(problems),
                       tuple(sorted((self._counts or {}).items())))
        if fingerprint != self._last_fingerprint:
            self._last_fingerprint = fingerprint
            self.version += 1

    def _read_progress(self, problems: list[str]) -> None:
        if self.progress_file is None:
            return
        try:
            st = os.stat(self.progress_file)
        except FileNotFoundError:
            self.progress, self._progress_stamp = None, None
            return
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if stamp == self._progress_stamp:
            return
        self._progress_stamp = stamp
        try:
            doc = read_json(self.progress_file, default=None)
        except RunFileError as exc:
            problems.append(f"{exc}; the live view waits for the next snapshot")
            self._progress_stamp = None
            return
        if not isinstance(doc, dict):
            return
        self.progress = doc
        self.live.ingest(doc)

    def _read_counts(self, problems: list[str], now: float) -> None:
        """Blocks done/failed: from live progress while running, else from the store once."""
        if self.state(now) == "running":
            task = self.progress.get("task") if isinstance(self.progress.get("task"), dict) else {}
            self._counts = {k: int(task.get(k) or 0) for k in ("done", "failed", "total", "skipped",
                                                                "orphaned", "in_flight")}
            return
        if self.store_dir is None or not (self.store_dir / STORE_MARKER).exists():
            self._counts = None
            return
        key = (len(self.runs), self.live.written_at, self.state(now))
        if key != self._counts_key:
            self._counts_key = key
            try:
                self._counts, self._counts_problem = store_counts(self.store_dir), ""
            except RunFileError as exc:
                self._counts, self._counts_problem = None, str(exc)
        if self._counts_problem:
            problems.append(self._counts_problem)

    # what it says -----------------------------------------------------------
    def state(self, now: float | None = None) -> str:
        """running / finished / failed / partial / interrupted / no runs yet.

        "finished" only when nothing failed and nothing is left undone: a
        partial run never reads as success.
        """
        p = self.progress
        if p is not None:
            state = str(p.get("state") or "")
            if state == "running":
                written = _num(p.get("written_at")) or 0.0
                now = time.time() if now is None else now
                if now - written > STALE_AFTER and not procs.is_alive(p.get("pid")):
                    return "interrupted"
                return "running"
            if state in ("failed", "interrupted"):
                return state
        counts = self._counts
        if counts:
            if counts.get("failed"):
                return "failed"
            if counts.get("done", 0) < counts.get("total", 0):
                return "partial" if counts.get("done") or self.runs else "no runs yet"
            return "finished"
        if self.runs:
            return "failed" if self.runs[-1].blocks.failures else "finished"
        return "no runs yet"

    def task_id(self) -> str:
        if self.runs:
            return self.runs[-1].task_id
        task = (self.progress or {}).get("task")
        if isinstance(task, dict) and task.get("task_id"):
            return str(task["task_id"])
        return self.name

    def started_at(self) -> float | None:
        if self.state() == "running":
            return _num((self.progress or {}).get("started_at"))
        if self.runs:
            return self.runs[-1].started_at or None
        return _num((self.progress or {}).get("started_at"))

    def row(self) -> dict:
        """This store's line in the runs list, with one child per past run."""
        counts = self._counts or {}
        children = []
        for i, r in enumerate(self.runs):
            children.append({"index": i, "when": format_when(r.started_at, short=True),
                             "elapsed": format_seconds(r.elapsed) if r.elapsed else "—",
                             "count": r.blocks.count, "skipped": r.blocks.skipped,
                             "failures": r.blocks.failures})
        return {"key": self.key, "task_id": self.task_id(), "state": self.state(),
                "started_at": self.started_at(),
                "done": counts.get("done"), "failed": counts.get("failed"), "total": counts.get("total"),
                "when": format_when(self.started_at(), short=True), "runs": children, "opened": self.opened,
                "problems": list(self.problems)}

    def detail(self, run_index: int | None) -> dict:
        """The tables, the text and the live charts for one run of this store.

        ``run_index`` None means "what matters now": the live run while one
        is running, else the last report.
        """
        state = self.state()
        live = run_index is None and state == "running"
        report = None
        if not live and self.runs:
            idx = len(self.runs) - 1 if run_index is None else max(0, min(run_index, len(self.runs) - 1))
            report, run_index = self.runs[idx], idx
        out: dict[str, Any] = {"key": self.key, "task_id": self.task_id(), "state": state,
                               "run_index": run_index, "live": live, "problems": list(self.problems),
                               "counts": dict(self._counts or {}), "store": str(self.store_dir or ""),
                               "version": self.version}
        if live:
            out["block_rows"], out["block_note"] = [], (
                "the run is in progress: its per-block summary is written when it ends "
                "(the charts show each block as it completes)")
            out["worker_columns"] = LIVE_WORKER_COLUMNS
            out["worker_rows"] = live_worker_table(self.progress or {})
            out["worker_note"] = "" if out["worker_rows"] else "no worker has started yet"
            previous = render_report(self.runs[-1]) if self.runs else ""
            out["text"] = ("The run is in progress; its report is written to runs.jsonl when it ends."
                           + (f"\n\nThe previous run:\n{previous}" if previous else ""))
        elif report is not None:
            out["block_rows"], out["block_note"] = block_table(report)
            out["worker_columns"] = WORKER_COLUMNS
            out["worker_rows"], out["worker_note"] = worker_table(report)
            out["text"] = render_report(report)
        else:
            out["block_rows"], out["worker_rows"], out["worker_columns"] = [], [], WORKER_COLUMNS
            out["block_note"] = out["worker_note"] = "this task has no finished run yet"
            out["text"] = "No run of this task has finished yet, so there is no report."
        out["report"] = report.to_dict() if report is not None else None
        latest = live or run_index is None or run_index == len(self.runs) - 1
        out["charts"] = self.live.snapshot() if self.progress is not None and latest else None
        return out


# -- the poller's body -------------------------------------------------------------

class ReportWatcher:
    """Everything the Run Report pane shows, read from disk on the poller's thread.

    ``poll(request)`` is the Poller's function.  The request says what the
    operator is looking at::

        {"opened": [paths opened with "Open…"], "selected": source key,
         "run_index": int | None, "worker": int | None, "block": int | None}

    It returns a plain snapshot (see :meth:`poll`), or None when nothing
    changed since the last one, so an idle night costs the GUI nothing.
    """

    def __init__(self, runs_dir: str | os.PathLike | None, *, discover_every: float = 10.0,
                 drill_every: float = 2.0, capacity: int = CHART_BUCKETS) -> None:
        self.runs_dir = Path(runs_dir) if runs_dir else None
        self.discover_every = discover_every
        self.drill_every = drill_every
        self.capacity = capacity
        self.sources: dict[str, RunSource] = {}
        self._discovered_at = -math.inf
        self._runs_dir_stamp: int | None = None
        self._unrecognised: list[Path] = []
        self._opened: tuple = ()
        self._open_problems: list[str] = []
        self._drill_key: tuple | None = None
        self._drill_at = -math.inf
        self._drill: dict = {}
        self._last_key: tuple | None = None

    def _runs_dir_changed(self) -> bool:
        """True when a folder was added to or removed from the runs folder since the last look."""
        try:
            stamp = os.stat(self.runs_dir).st_mtime_ns if self.runs_dir is not None else None
        except OSError:
            stamp = None
        changed = stamp != self._runs_dir_stamp
        self._runs_dir_stamp = stamp
        return changed

    def discover(self) -> None:
        """Find the tracking stores under the workspace's runs folder (one level deep).

        A folder the engine just made may not hold its files yet; such
        folders are remembered and looked at again on every poll until they
        become stores, so a short run is never missed.
        """
        found: set[str] = set()
        self._unrecognised = []
        if self.runs_dir is not None:
            try:
                entries = sorted(os.scandir(self.runs_dir), key=lambda e: e.name)
            except OSError:
                entries = []
            for entry in entries:
                if not entry.is_dir() or entry.name.startswith("."):
                    continue
                d = Path(entry.path)
                if not self._adopt(d, found):
                    self._unrecognised.append(d)
        for key, src in list(self.sources.items()):
            if not src.opened and key not in found:
                del self.sources[key]  # its folder was removed

    def _adopt(self, d: Path, found: set[str]) -> bool:
        """Watch ``d`` when it is a store; False when it is not (yet)."""
        if not any((d / name).exists() for name in (STORE_MARKER, RUNS_FILE, PROGRESS_FILE)):
            return False
        store = d.resolve()
        found.add(str(store))
        if str(store) not in self.sources:
            self.sources[str(store)] = RunSource(store, store / RUNS_FILE, capacity=self.capacity)
        return True

    def _recheck_unrecognised(self) -> None:
        still = []
        for d in self._unrecognised:
            if not self._adopt(d, set()):
                still.append(d)
        self._unrecognised = still[:100]

    def _open(self, paths: tuple) -> None:
        self._open_problems = []
        wanted = set()
        for path in paths:
            try:
                store, runs_file = resolve_source(path)
            except RunFileError as exc:
                self._open_problems.append(str(exc))
                continue
            src = RunSource(store, runs_file, opened=True, capacity=self.capacity)
            wanted.add(src.key)
            if src.key in self.sources:
                self.sources[src.key].opened = True
            else:
                self.sources[src.key] = src
        for key, src in list(self.sources.items()):
            if src.opened and key not in wanted:
                del self.sources[key]

    def poll(self, request: dict | None = None) -> dict | None:
        """One look at the disk.

        :returns: ``{"runs": [row per store, newest first], "problems": [...],
            "detail": the selected run's tables, text and charts or None,
            "drill": {"worker_blocks": ..., "block_record": ...}}``, or None
            when nothing changed.
        """
        request = request or {}
        now = time.monotonic()
        opened = tuple(str(p) for p in request.get("opened") or ())
        if opened != self._opened:
            self._opened = opened
            self._open(opened)
        if self._runs_dir_changed() or now - self._discovered_at >= self.discover_every:
            self._discovered_at = now
            self.discover()
        elif self._unrecognised:
            self._recheck_unrecognised()
        for src in self.sources.values():
            src.refresh()
        selected = self.sources.get(request.get("selected") or "")
        drill_changed = self._update_drill(selected, request, now)
        key = (tuple((k, s.version) for k, s in self.sources.items()), tuple(self._open_problems),
               request.get("selected"), request.get("run_index"), self._drill_key)
        if key == self._last_key and not drill_changed:
            return None
        self._last_key = key
        rows = sorted((s.row() for s in self.sources.values()),
                      key=lambda r: (r["state"] != "running", -(self.sources[r["key"]].started_at() or 0.0)))
        return {"runs": rows, "problems": list(self._open_problems),
                "selected": request.get("selected"), "run_index": request.get("run_index"),
                "detail": selected.detail(request.get("run_index")) if selected else None,
                "drill": dict(self._drill), "drill_for": (request.get("worker"), request.get("block"))}

    def _update_drill(self, src: RunSource | None, request: dict, now: float) -> bool:
        """Re-read the drill-down when asked for something else, or every few seconds while it runs."""
        worker, block = request.get("worker"), request.get("block")
        key = (src.key if src else None, worker, block)
        due = src is not None and src.state() == "running" and now - self._drill_at >= self.drill_every
        if key == self._drill_key and not due:
            return False
        self._drill_key, self._drill_at = key, now
        drill: dict[str, Any] = {}
        if src is not None and src.store_dir is not None and (src.store_dir / STORE_MARKER).exists():
            try:
                if worker is not None:
                    drill["worker_blocks"] = worker_blocks(src.store_dir, int(worker))
                if block is not None:
                    drill["block_record"] = block_detail(src.store_dir, int(block))
            except RunFileError as exc:
                drill["problem"] = str(exc)
        elif worker is not None or block is not None:
            drill["problem"] = "this run has no tracking store beside its runs.jsonl, so there are no per-block records to show"
        changed = drill != self._drill or due
        self._drill = drill
        return changed
