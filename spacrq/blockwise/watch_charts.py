"""Part of the Run Report watch's poller body: the charts of a finished or reopened run,
built from its tracking store.

A run's progress snapshots are gone once it ends, and a short run never had
many; the tracking store keeps, per block, the worker that ran it, when it
was sent and returned, its wall time, its peak memory and how long the
worker waited for it.  That is enough for every chart the pane draws:

* each worker's cumulative compute and idle time over run time,
* blocks per second over run time,
* wall time per block against completion order, with its trend over every block,
* peak RSS per block against completion order.

**Run time** on every chart, live or finished, in the Run Report or in the
morning report, is counted from the *run's start*: the ``started_at`` the
task wrote when it began running blocks in its job process (its
``runs.jsonl`` line, or its ``progress.json`` while it runs), the zero
:class:`~spacrq.blockwise.watch_live.LiveRun` uses too.  Not the job's start
(the interpreter and the module's imports come before it) and not the first
block sent: a chart read beside another of the same run shows the same
second at the same place.  :func:`run_window` finds that start for a job.

The store is read once (the arrays side by side), every series is built
with whole-array numpy operations and decimated to what a screen shows
(:data:`~spacrq.blockwise.watch_series.CHART_BUCKETS` min/max buckets per
per-block series, :data:`~spacrq.blockwise.watch_live.TIME_BUCKETS` points
per series over run time), so a million-block store charts in well under a
second on the poller's thread: the work is whole-array numpy (which lets go of
the interpreter while it sorts and sums), never a Python loop per block, so
the window keeps its share of the interpreter without any pacing.  The result has the shape of
:meth:`~spacrq.blockwise.watch_live.LiveRun.snapshot`, so the pane draws a
live run and a finished one the same way.  Where something was not
measured the snapshot says so in a sentence, never with an empty chart.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from spacrq.blockwise.report import ReportError
from spacrq.blockwise.report_store import read_store_arrays
from spacrq.blockwise.watch_live import SLOW_FACTOR, TIME_BUCKETS, slowest_id, slowest_worker
from spacrq.blockwise.watch_series import CHART_BUCKETS, PeakSeries, Trend
from spacrq.runfiles import RunFileError

__all__ = ["CHART_ARRAYS", "store_charts", "run_window", "slowest_worker", "SLOW_FACTOR"]

#: the store arrays the charts are built from, read in one batch
CHART_ARRAYS = ("returned_at", "sent_at", "wall_seconds", "peak_rss_bytes", "worker_id",
                "idle_seconds")
#: blocks per bucket of the blocks-per-second chart, at least (fewer make a comb of 0s and 1s)
RATE_BLOCKS_PER_BIN = 8


def _thin(x: np.ndarray, y: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``points`` of a monotone series, evenly spread, first and last kept."""
    if x.size <= points:
        return x.copy(), y.copy()
    keep = np.unique(np.linspace(0, x.size - 1, points).astype(np.int64))
    return x[keep], y[keep]


def _rate(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Blocks per second over run time: completions counted in equal bins, divided by the bin width.

    Each bin's count over its width, so the area under the curve is the
    number of blocks that ran (an honest rate, not a smoothed guess).
    """
    n = t.size
    if not n:
        return np.empty(0), np.empty(0)
    span = float(t.max() - min(0.0, float(t.min())))
    bins = int(np.clip(n // RATE_BLOCKS_PER_BIN, 1, TIME_BUCKETS))
    width = max(span, 1e-3) / bins
    lo = min(0.0, float(t.min()))
    which = np.minimum(((t - lo) / width).astype(np.int64), bins - 1)
    counts = np.bincount(which, minlength=bins)
    centres = lo + (np.arange(bins) + 0.5) * width
    return centres, counts / width


def run_window(store_dir: str | Path, lo: float | None, hi: float | None,
               runs: list | None = None) -> tuple[float | None, float | None]:
    """``(start, end)`` of the store's run that began between ``lo`` and ``hi`` (epoch seconds).

    For a caller that knows when the run's *job* ran (the morning report) and
    must chart it from the same zero as the Run Report: the run's own start
    (the last one begun in the window, from ``runs.jsonl``, else from the
    ``progress.json`` of a run that never wrote its line), and as its end the
    next run's start, else ``hi``.  ``(lo, hi)`` when the store names no run
    in the window (then the chart's zero is the job's start, the best known).
    ``runs`` lets a caller that already read ``runs.jsonl`` pass its reports.
    """
    from spacrq.blockwise.report_runs import read_runs, runs_file
    from spacrq.runfiles import PROGRESS_FILE, read_json_checked
    path = Path(store_dir)
    reports = [r for r in (runs if runs is not None else read_runs(runs_file(path)))
               if r.started_at and r.started_at > 0]
    starts = sorted(float(r.started_at) for r in reports)
    progress, _ = read_json_checked(path / PROGRESS_FILE, None, expect=dict)
    live = (progress or {}).get("started_at")
    # the snapshot of a run with no report line yet: one begun after the last line's run
    # ended (the snapshot of a run that wrote its line is that run's, a clock tick apart)
    ended = max((max(float(r.finished_at), float(r.started_at) + 1e-3) for r in reports),
                default=float("-inf"))
    if isinstance(live, (int, float)) and not isinstance(live, bool) and live >= ended:
        starts.append(float(live))

    def inside(t: float) -> bool:
        return (lo is None or t >= lo) and (hi is None or t <= hi)

    mine = [t for t in starts if inside(t)]
    if not mine:
        return lo, hi
    start = mine[-1]
    later = [t for t in starts if t > start]
    return start, later[0] if later else hi


def _arrays(store_dir: Path) -> dict:
    try:
        return read_store_arrays(Path(store_dir), CHART_ARRAYS)
    except ReportError as exc:
        raise RunFileError(str(exc)) from None


def store_charts(store_dir: str | Path, start: float | None = None, end: float | None = None, *,
                 capacity: int = CHART_BUCKETS, arrays: dict | None = None,
                 interrupted: Callable[[], bool] | None = None) -> dict | None:
    """The chart series of the run that returned its blocks between ``start`` and ``end``.

    ``start``/``end`` are epoch seconds (None: open ended); run time is
    counted from ``start``, which callers give as the run's start (see the
    module's note and :func:`run_window`); only with no start at all is it
    counted from the first block sent.  ``arrays``
    lets a caller that already read the store pass its arrays.  ``interrupted``
    (the watch's) is asked between the steps: when it says stop, the result
    is None and nothing half-built is returned.

    :returns: the snapshot :meth:`LiveRun.snapshot` returns, plus ``per_worker``
        (blocks, compute and idle seconds per worker: the charts' last points),
        ``slowest`` (a sentence or ""), ``blocks`` (how many are charted) and
        ``empty`` (why there is nothing to chart, or "").
    :raises RunFileError: the store cannot be read; one sentence with the fix.
    """
    stop = interrupted or (lambda: False)
    a = arrays if arrays is not None else _arrays(Path(store_dir))
    if stop():
        return None
    out = {"source": "store", "version": ("store", start, end), "run_id": ("store", start),
           "completions": 0, "missed": 0, "measured": False, "rss_measured": False,
           "idle_measured": False, "blocks": 0, "per_worker": {}, "slowest": "", "slowest_id": None,
           "empty": "",
           "wall": (np.empty(0), np.empty(0)), "rss": (np.empty(0), np.empty(0)),
           "rate": (np.empty(0), np.empty(0)), "trend": (np.empty(0), np.empty(0)),
           "trend_slope_ms": 0.0, "idle": {}, "compute": {}}
    returned = a.get("returned_at")
    if returned is None:
        out["empty"] = ("No per-block times in this tracking store: the run had no resource "
                        "tracking. Run with resource_tracking=True to chart each block and worker.")
        return out
    returned = np.asarray(returned, dtype=np.float64)
    in_run = np.isfinite(returned)
    if start is not None:
        in_run &= returned >= start
    if end is not None:
        in_run &= returned < end
    idx = np.flatnonzero(in_run)
    if not idx.size:
        out["empty"] = "No block of this run is recorded in the tracking store, so there is nothing to chart."
        return out
    order = idx[np.argsort(returned[idx], kind="stable")]
    if stop():
        return None
    n = int(order.size)
    sent = a.get("sent_at")
    t0 = start
    if t0 is None:
        first_sent = np.asarray(sent, dtype=np.float64)[order] if sent is not None else np.empty(0)
        t0 = float(np.nanmin(first_sent)) if np.isfinite(first_sent).any() else float(returned[order[0]])
    t = returned[order] - t0
    seq = np.arange(1, n + 1, dtype=np.float64)
    # a store read again after more blocks returned is a new picture of the same run
    out.update(blocks=n, completions=n, rate=_rate(t), version=("store", start, end, n,
                                                               float(returned[order[-1]])))

    wall = a.get("wall_seconds")
    wall = np.asarray(wall, dtype=np.float64)[order] if wall is not None else np.full(n, np.nan)
    measured = bool(np.isfinite(wall).any())
    if measured:
        series, trend = PeakSeries(capacity), Trend()
        series.extend(seq, wall)
        trend.extend(seq, wall)
        out.update(wall=series.arrays(), trend=trend.line(), trend_slope_ms=trend.slope * 1e3,
                   measured=True)
    rss = a.get("peak_rss_bytes")
    if rss is not None:
        rss = np.asarray(rss, dtype=np.float64)[order]
        rss[rss < 0] = np.nan  # -1: the store's "not measured"
        if np.isfinite(rss).any():
            series = PeakSeries(capacity)
            series.extend(seq, rss)
            out.update(rss=series.arrays(), rss_measured=True)
    if stop():
        return None

    wid = a.get("worker_id")
    if wid is not None:
        _per_worker(out, np.asarray(wid)[order], t, wall, a.get("idle_seconds"), order)
    return out


def _per_worker(out: dict, wid: np.ndarray, t: np.ndarray, wall: np.ndarray, idle, order) -> None:
    """Each worker's cumulative compute and idle over run time, from one stable sort by worker."""
    if wid.size and int(wid.min()) >= -32768 and int(wid.max()) < 32768:
        wid = wid.astype(np.int16)  # a 16-bit key sorts by radix: several times faster
    by = np.argsort(wid, kind="stable")  # completion order kept within each worker
    ids, first, counts = np.unique(wid[by], return_index=True, return_counts=True)
    compute_all = np.where(np.isfinite(wall), wall, 0.0)[by]
    idle_all = None
    if idle is not None:
        idle_all = np.asarray(idle, dtype=np.float64)[order][by]
        if not np.isfinite(idle_all).any():
            idle_all = None
    out["idle_measured"] = idle_all is not None
    t_by = t[by]
    points = TIME_BUCKETS
    for w, i, k in zip(ids.tolist(), first.tolist(), counts.tolist()):
        if w < 0:
            continue  # blocks no spacrq worker ran (in-process): no worker to chart
        tw = np.concatenate(([0.0], t_by[i:i + k]))
        cum = np.concatenate(([0.0], np.cumsum(compute_all[i:i + k])))
        out["compute"][w] = _thin(tw, cum, points)
        total_idle = float("nan")
        if idle_all is not None:
            gaps = idle_all[i:i + k]
            icum = np.concatenate(([0.0], np.cumsum(np.where(np.isfinite(gaps), gaps, 0.0))))
            out["idle"][w] = _thin(tw, icum, points)
            total_idle = float(icum[-1])
        out["per_worker"][w] = {"blocks": int(k), "compute": float(cum[-1]), "idle": total_idle}
    out["slowest"] = slowest_worker(out["per_worker"]) if out["measured"] else ""
    out["slowest_id"] = slowest_id(out["per_worker"]) if out["measured"] else None
