"""The morning report's charts: the Run Report's series of a blockwise run, and an experiment's records."""
from __future__ import annotations

from typing import Any

import numpy as np

from spacrq.blockwise.report_format import format_bytes
from spacrq.blockwise.watch_series import memory_unit
from spacrq.night.svg import Chart, Line

#: at most this many workers get a line each; the rest are summed into "other workers"
MAX_WORKER_LINES = 8
#: the x axis of the charts over time: counted from the run's start, as the Run Report counts
#: it (:mod:`spacrq.blockwise.watch_charts`), not from the job's start
RUN_TIME = "run time (s, from the run's start)"


def block_charts(series: dict[str, Any]) -> list[Chart]:
    """The Run Report's four charts as SVG charts, from :func:`store_charts`' series.

    Compute and idle per worker over run time, blocks per second, wall time
    per block in completion order with its trend, and peak memory per block:
    the same series the pane draws, so the page and the window never disagree.
    """
    titles = ("Compute and idle per worker (cumulative)", "Blocks per second",
              "Wall time per block, in completion order", "Peak memory per block")
    if series.get("empty"):
        return [Chart(t, "", "", empty=series["empty"]) for t in titles]
    return [_worker_chart(series), _rate_chart(series), _wall_chart(series), _rss_chart(series)]


def _pair(value: Any) -> tuple[np.ndarray, np.ndarray]:
    x, y = value if value is not None else (np.empty(0), np.empty(0))
    return np.asarray(x, dtype=float), np.asarray(y, dtype=float)


def _worker_chart(series: dict[str, Any]) -> Chart:
    compute, idle = series.get("compute") or {}, series.get("idle") or {}
    ids = sorted(compute)
    lines: list[Line] = []
    for colour, w in enumerate(ids[:MAX_WORKER_LINES]):
        lines.append(Line(f"worker {w} compute", *_pair(compute[w]), colour=colour))
        if w in idle:  # on its own scale, as the Run Report draws it: a few per cent of compute
            lines.append(Line(f"worker {w} idle", *_pair(idle[w]), colour=colour, dashed=True,
                              right=True))
    notes = []
    if series.get("slowest"):
        notes.append(series["slowest"])
    if len(ids) > MAX_WORKER_LINES:
        notes.append(f"{len(ids) - MAX_WORKER_LINES} more workers are not drawn; the Resource "
                     "Utilization table lists every worker.")
    if ids and not series.get("idle_measured"):
        notes.append("Idle time was not recorded per block by this run.")
    empty = "" if ids else "no block was run by a spacrq worker (an in-process run)"
    return Chart("Compute and idle per worker (cumulative)", RUN_TIME, "compute (s), solid",
                 tuple(lines), note=" ".join(notes), empty=empty,
                 y2_label="idle (s), dashed" if idle else "")


def _rate_chart(series: dict[str, Any]) -> Chart:
    x, y = _pair(series.get("rate"))
    return Chart("Blocks per second", RUN_TIME, "blocks/s", (Line("blocks/s", x, y),),
                 empty="" if x.size else "no block returned")


def _wall_chart(series: dict[str, Any]) -> Chart:
    if not series.get("measured"):
        return Chart("Wall time per block", "", "", empty="wall time was not measured per block")
    x, y = _pair(series.get("wall"))
    tx, ty = _pair(series.get("trend"))
    lines = [Line("wall per block", x, y * 1000.0, points_only=True)]
    if tx.size:
        lines.append(Line("trend", tx, ty * 1000.0, colour=1))
    slope = float(series.get("trend_slope_ms") or 0.0)
    return Chart("Wall time per block, in completion order", "completion order", "ms",
                 tuple(lines), note=f"Trend: {slope:+.4f} ms per block.")


def _rss_chart(series: dict[str, Any]) -> Chart:
    if not series.get("rss_measured"):
        return Chart("Peak memory per block", "", "",
                     empty="peak memory was not recorded for this run")
    x, y = _pair(series.get("rss"))
    highest = float(np.nanmax(y)) if y.size and np.isfinite(y).any() else None
    unit, size = memory_unit(highest)  # the Run Report's unit, the tables' binary one
    return Chart("Peak memory per block, in completion order", "completion order",
                 f"peak RSS ({unit})", (Line("peak RSS", x, y / size, points_only=True),),
                 note=f"Highest: {format_bytes(highest)}." if highest is not None else "")


def records_chart(rows: list[dict[str, Any]], x: str) -> Chart:
    """An experiment's records: each numeric column against the swept setpoint (or index)."""
    if not rows:
        return Chart("Records", "", "", empty="the run committed no records")
    numeric = [k for k in rows[0] if k not in (x, "index", "step_id")
               and all(isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)
                       for r in rows[:50] if k in r)]
    if not numeric:
        return Chart("Records", x, "", empty="the records hold no numeric column to plot")
    xs = np.asarray([_num(r.get(x)) for r in rows], float)
    lines = tuple(Line(k, xs, np.asarray([_num(r.get(k)) for r in rows], float), colour=i,
                       points_only=False) for i, k in enumerate(numeric[:4]))
    return Chart(f"Records: {', '.join(numeric[:4])} against {x}", x, "value", lines)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else float("nan")
