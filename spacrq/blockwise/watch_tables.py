"""What one run's report looks like in the pane: table rows, notes and the text panel.

Only measured figures get a row; where something was not measured a note
says so and how to measure it, because a table of zeros would read as
"free", which is a lie.
"""
from __future__ import annotations

import time

from spacrq.blockwise.report import TaskReport, format_seconds
from spacrq.blockwise.report_model import queue_note
from spacrq.blockwise.watch_live import as_number

__all__ = ["NOT_MEASURED", "BLOCK_MEASURES", "BLOCK_COLUMNS", "WORKER_COLUMNS",
           "LIVE_WORKER_COLUMNS", "WORKER_BLOCK_COLUMNS", "format_when", "block_table",
           "worker_table", "live_worker_table", "render_report"]

NOT_MEASURED = "not measured: run with resource_tracking=True to measure wall, CPU, memory and IO per block"

#: (row label, BlockSummary attribute, unit)
BLOCK_MEASURES = (
    ("round trip", "round_trip", "s"),
    ("wall", "wall", "s"),
    ("CPU", "cpu", "s"),
    ("peak RSS", "peak_rss", "B"),
    ("IO read", "io_read", "B"),
    ("IO write", "io_write", "B"),
    ("queued", "queued", "s"),
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
        if not stat or (attr not in ("round_trip", "queued") and not b.has_stats):
            continue
        rows.append({"key": attr, "cells": [label, f"{stat.n:,}",
                                            *stat.cells(unit, additive=attr != "peak_rss")]})
    waited = queue_note(b)
    if b.has_stats:
        if b.overhead and not b.queued and report.workers.count:  # serial runs queue nothing
            waited = ("queued was not measured for this run (an older spacrq, or dask): the "
                      "overhead includes the time blocks waited in their worker")
        return rows, waited[:1].upper() + waited[1:]
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
            f"{int(w.get('blocks') or 0):,}", format_seconds(as_number(w.get("idle_seconds"))),
            format_seconds(as_number(w.get("compute_seconds"))), str(w.get("exit") or "—")]})
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

