"""The run report: where a blockwise task's time and memory went, per block and per worker.

A blockwise run leaves one report line per run in ``runs.jsonl`` inside its
tracking store (else beside its worker logs).  The object a run returns and
the line left on disk are the same shape, so a report read back next morning
is the report the run produced::

    t = read_last_run(runs_file(store))   # TaskReport
    t.blocks.round_trip                   # Stat: n, mean, std, min, max, total
    t.workers.idle                        # Stat pooled over every worker's per-block gaps
    print(t.render())                     # this task's section of the panel
    t.worker(1)                           # WorkerRecord
    block(t.require_store(), (1, 2))      # BlockRecord, read from the tracking store

The engine measures and calls the builders here (:meth:`Stat.of`,
:func:`summarize_blocks`, :func:`summarize_workers`, :func:`append_run`);
the window and ``spacrq report`` read (:func:`read_runs`,
:func:`report_from_store`, :func:`block`, :func:`block_records`).

Honest figures are the point of the module: a figure nobody measured is
``—`` (an empty :class:`Stat`), never ``0``; skipped blocks are counted but
never timed; and a run with nothing measured renders no panel at all,
because a table of zeros is worse than no table.

This module is the one place callers import from; the work is done in
:mod:`~spacrq.blockwise.report_stats` (Stat and the block and worker
summaries), :mod:`~spacrq.blockwise.report_model` (the report objects and
their text panel), :mod:`~spacrq.blockwise.report_runs` (``runs.jsonl``),
:mod:`~spacrq.blockwise.report_store` (reading a tracking store) and
:mod:`~spacrq.blockwise.report_format` (figures as text).
"""
from __future__ import annotations

from spacrq.blockwise.report_format import format_bytes, format_seconds
from spacrq.blockwise.report_model import (BlockOutside, BlockRecord, BlockStats, ReportError,
                                           RunReport, TaskReport, render_history)
from spacrq.blockwise.report_runs import (RUNS_FILE, RunsTail, append_run, is_tracking_store,
                                          read_last_run, read_runs, runs_file)
from spacrq.blockwise.report_stats import (EXIT_KINDS, BlockSummary, Stat, WorkerRecord,
                                           WorkerSummary, summarize_blocks, summarize_workers,
                                           trend_slope_ms)
from spacrq.blockwise.report_store import block, block_columns, block_records, report_from_store

__all__ = [
    "RUNS_FILE",
    "EXIT_KINDS",
    "ReportError",
    "BlockOutside",
    "Stat",
    "BlockSummary",
    "WorkerRecord",
    "WorkerSummary",
    "BlockStats",
    "BlockRecord",
    "TaskReport",
    "RunReport",
    "format_seconds",
    "format_bytes",
    "render_history",
    "trend_slope_ms",
    "summarize_blocks",
    "summarize_workers",
    "runs_file",
    "append_run",
    "RunsTail",
    "read_runs",
    "read_last_run",
    "is_tracking_store",
    "report_from_store",
    "block",
    "block_columns",
    "block_records",
]
