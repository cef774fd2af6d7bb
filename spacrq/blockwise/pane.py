"""The Run Report pane's logic, without Qt: every row, caption and enabled action it shows.

The Queue, the Experiments and the Run Report each keep this in a file of
the same name (``<area>/pane.py``), so "where does the Run Report decide
that a worker's blocks can be listed" has the answer it has for the other
panes: :func:`controls` here.  It is ``blockwise/pane.py`` rather than a
``report/`` package because everything it shows is a blockwise run's files
(the report objects, the tracking store, ``progress.json``), and a package
of its own would import ``blockwise`` for every line it has.

Everything is built on the poller's thread, as plain frozen values with the
text already made: :class:`Table` (column titles, :class:`~spacrq.watching.Row`
values, and the note shown instead of or under it), the heading, the text
panel, a block's record.  Only measured figures get a row; where something
was not measured a note says so and how to measure it, because a table of
zeros would read as "free", which is a lie.
"""
from __future__ import annotations

import html
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spacrq.blockwise.report_format import as_number, format_bytes, format_seconds
from spacrq.blockwise.report_model import BlockRecord, TaskReport, queue_note
from spacrq.watching import Button, Row

__all__ = ["NOT_MEASURED", "BLOCK_MEASURES", "BLOCK_COLUMNS", "WORKER_COLUMNS",
           "LIVE_WORKER_COLUMNS", "WORKER_BLOCK_COLUMNS", "RUN_COLUMNS", "ENDED",
           "NO_STORE", "GONE_HEADING", "TABLES", "Table", "StoreLine", "Button", "Controls",
           "Drill", "format_when", "whole_number", "rows", "store_line", "runs_table", "block_table",
           "worker_table", "live_worker_table", "worker_blocks_table", "render_report",
           "live_text", "block_text", "heading", "drill_heading", "ending_message", "controls"]

NOT_MEASURED = "not measured: run with resource_tracking=True to measure wall, CPU, memory and IO per block"
NO_STORE = ("this run has no tracking store beside its runs.jsonl, so there are no per-block "
            "records to show")
GONE_HEADING = "The selected run is no longer there: its folder was removed or moved."

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
RUN_COLUMNS = ("task", "state", "blocks", "when")
BLOCK_COLUMNS = ("per block", "n", "mean", "std", "min", "max", "total")
WORKER_COLUMNS = ("worker", "startup", "blocks", "failed", "idle", "idle / block",
                  "compute", "compute / block", "teardown", "exit")
LIVE_WORKER_COLUMNS = ("worker", "pid", "state", "blocks", "idle", "compute", "exit")
WORKER_BLOCK_COLUMNS = ("block", "grid position", "wall", "CPU", "peak RSS", "returned", "failures")
#: how a run that ended is announced, by its state
ENDED = {"finished": "finished", "failed": "failed", "interrupted": "was interrupted"}


@dataclass(frozen=True)
class Table:
    """One table as the pane shows it: column titles, rows, and a note above it ("" for none)."""

    columns: tuple[str, ...]
    rows: tuple[Row, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class StoreLine:
    """What the runs list knows of one store, beside its row's text (the value of its Row)."""

    key: str
    task_id: str
    state: str
    started_at: float | None = None
    done: int | None = None
    failed: int | None = None
    total: int | None = None
    opened: bool = False
    problems: tuple[str, ...] = ()
    #: one row per past run (keys ``(store key, run index)``), oldest first
    runs: tuple[Row, ...] = ()


@dataclass(frozen=True)
class Controls:
    """Which of the Run Report's actions can be taken now, each with its tooltip."""

    open_store: Button
    worker_blocks: Button
    block_record: Button


def whole_number(value: Any) -> int | None:
    """A worker, block or run number as the operator gave it; None when it is not one.

    ``3``, ``3.0`` and ``"3"`` are 3; ``2.5`` is not a block, so a number with
    a fraction is refused rather than cut; ``True`` is not a number here.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def format_when(epoch: float | None, *, short: bool = False) -> str:
    """Local wall-clock time; ``short`` drops the year and seconds for the runs list."""
    if not epoch or not isinstance(epoch, (int, float)) or not math.isfinite(epoch):
        return "—"  # not recorded (a store's NaN fill), or not a time at all
    try:
        return time.strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S", time.localtime(epoch))
    except (OverflowError, OSError, ValueError):  # a time past what the clock can show
        return "—"


# -- the runs list -------------------------------------------------------------------

def _blocks_text(done: int | None, total: int | None, failed: int | None) -> str:
    if done is None:
        return "—"
    text = f"{done:,} / {total:,} done" if total else f"{done:,} done"
    if failed:
        text += f", {failed:,} failed"
    return text


def _past_run_row(key: str, index: int, report: TaskReport) -> Row:
    b = report.blocks
    blocks = f"{b.count:,} blocks"
    if b.skipped:
        blocks += f" ({b.skipped:,} skipped)"
    if b.failures:
        blocks += f", {b.failures:,} failed attempts"
    took = f"took {format_seconds(report.elapsed)}" if report.elapsed else "—"
    return Row(key=(key, index), cells=(f"run {index + 1}", took, blocks,
                                        format_when(report.started_at, short=True)),
               sort=(float(index),), value=index)


def store_line(key: str, task_id: str, state: str, started_at: float | None,
               counts: Mapping[str, int] | None, runs: Sequence[TaskReport], *,
               opened: bool = False, problems: Sequence[str] = ()) -> Row:
    """One store's row of the runs list; its value is a :class:`StoreLine` with a row per past run."""
    counts = counts or {}
    line = StoreLine(key=key, task_id=task_id, state=state, started_at=started_at,
                     done=counts.get("done"), failed=counts.get("failed"),
                     total=counts.get("total"), opened=opened, problems=tuple(problems),
                     runs=tuple(_past_run_row(key, i, r) for i, r in enumerate(runs)))
    tip = key + ("\n" + "\n".join(problems) if problems else "")
    label = task_id + (" ⚠" if problems else "")
    rank = (1e12 if state == "running" else 0.0) + float(started_at or 0.0)
    return Row(key=key, cells=(label, state, _blocks_text(line.done, line.total, line.failed),
                               format_when(started_at, short=True)),
               tips=(tip,) * len(RUN_COLUMNS), look=state, sort=(rank,), value=line)


def runs_table(lines: Sequence[Row]) -> Table:
    """The runs list: running tasks first, then the newest."""
    return Table(RUN_COLUMNS, tuple(sorted(lines, key=lambda r: -r.sort[0])))


# -- one run's tables -----------------------------------------------------------------

def block_table(report: TaskReport) -> Table:
    """The per-block summary, and a note saying what was not measured.

    The scheduler's round trip is there for any distributed run, the
    in-worker figures only with resource tracking.
    """
    b = report.blocks
    out = []
    for label, attr, unit in BLOCK_MEASURES:
        stat = getattr(b, attr)
        if not stat or (attr not in ("round_trip", "queued") and not b.has_stats):
            continue
        out.append(Row(key=attr, cells=(label, f"{stat.n:,}",
                                        *stat.cells(unit, additive=attr != "peak_rss")),
                       sort=(None, stat.n, stat.mean, stat.std, stat.min, stat.max, stat.total)))
    if b.has_stats:
        waited = queue_note(b)
        if b.overhead and not b.queued and report.workers.count:  # serial runs queue nothing
            waited = ("queued was not measured for this run (an older spacrq, or dask): the "
                      "overhead includes the time blocks waited in their worker")
        note = waited[:1].upper() + waited[1:]
    elif out:
        note = NOT_MEASURED
    else:
        note = ("nothing was timed in this run (it ran serially without resource tracking); "
                "run with resource_tracking=True to measure each block")
    return Table(BLOCK_COLUMNS, tuple(out), note)


def worker_table(report: TaskReport) -> Table:
    """One row per worker of a finished run; a note instead of an empty table."""
    out = []
    for w in sorted(report.workers.by_id.values(), key=lambda r: r.worker_id):
        out.append(Row(key=w.worker_id, cells=(
            str(w.worker_id), format_seconds(w.startup), f"{w.blocks:,}", f"{w.blocks_failed:,}",
            format_seconds(w.idle.total) if w.idle else "—", format_seconds(w.idle.mean) if w.idle else "—",
            format_seconds(w.compute.total) if w.compute else "—",
            format_seconds(w.compute.mean) if w.compute else "—",
            format_seconds(w.teardown), w.exit or "running"),
            sort=(w.worker_id, w.startup, w.blocks, w.blocks_failed)))
    note = "" if out else "no worker processes: this run was serial (in-process), so there is no worker timeline"
    return Table(WORKER_COLUMNS, tuple(out), note)


def live_worker_table(progress: Mapping[str, Any]) -> Table:
    """One row per worker of a running task, from its progress snapshot."""
    out = []
    listed = progress.get("workers")
    for w in listed if isinstance(listed, list) else ():
        if not isinstance(w, dict) or w.get("worker_id") is None:
            continue
        blocks = int(as_number(w.get("blocks")) or 0)
        out.append(Row(key=w["worker_id"], cells=(
            str(w["worker_id"]), str(w.get("pid") or "—"), str(w.get("state") or "—"),
            f"{blocks:,}", format_seconds(as_number(w.get("idle_seconds"))),
            format_seconds(as_number(w.get("compute_seconds"))), str(w.get("exit") or "—")),
            look=str(w.get("state") or "")))
    return Table(LIVE_WORKER_COLUMNS, tuple(out), "" if out else "no worker has started yet")


def worker_blocks_table(worker_id: int, columns: Mapping[str, Any] | None, limit: int) -> Table:
    """The blocks one worker ran (the store's columns, see
    :func:`~spacrq.blockwise.report_store.worker_block_columns`), newest last."""
    if columns is None:
        return Table(WORKER_BLOCK_COLUMNS, (), "this store does not record which worker ran "
                                               "each block: " + NOT_MEASURED)
    total = int(columns["total"])
    fmt = {"wall_seconds": format_seconds, "cpu_seconds": format_seconds,
           "peak_rss_bytes": lambda v: format_bytes(v if v >= 0 else None),
           "returned_at": format_when, "failures": lambda v: str(int(v))}
    names = ("wall_seconds", "cpu_seconds", "peak_rss_bytes", "returned_at", "failures")
    lists = {n: columns[n].tolist() for n in names if n in columns}
    out = []
    for i, (bid, coord) in enumerate(zip(columns["ids"].tolist(), columns["coords"].tolist())):
        cells = [str(bid), "(" + ", ".join(str(c) for c in coord) + ")"]
        cells += [fmt[n](lists[n][i]) if n in lists else "—" for n in names]
        out.append(Row(key=bid, cells=tuple(cells), sort=(bid,)))
    note = f"showing the last {limit:,} of {total:,} blocks" if total > limit else ""
    if not total:
        note = f"worker {worker_id} has no block recorded in the tracking store"
    return Table(WORKER_BLOCK_COLUMNS, tuple(out), note)


#: every table's builder, by the name the pane knows it by
TABLES = {"runs": runs_table, "blocks": block_table, "workers": worker_table,
          "live_workers": live_worker_table, "worker_blocks": worker_blocks_table}


def rows(table: str, *data: Any) -> tuple[Row, ...]:
    """The rows of one of the pane's tables (``"runs"``, ``"blocks"``, ``"workers"``,
    ``"live_workers"``, ``"worker_blocks"``), from what that table is built of."""
    return TABLES[table](*data).rows


# -- text --------------------------------------------------------------------------------

def render_report(report: TaskReport) -> str:
    """The text panel for one run, or why there is none."""
    try:
        text = report.render()
    except Exception as exc:  # a line from another version of the format
        return (f"This report could not be rendered ({type(exc).__name__}: {exc}); "
                "the tables show what it holds.")
    if not report.timed:
        return (text + "\n\nNothing was timed in this run: it ran serially without resource "
                "tracking. Run with resource_tracking=True to measure each block.")
    return text


def live_text(previous: TaskReport | None) -> str:
    """The text panel while a run goes: its report is written when it ends."""
    before = render_report(previous) if previous is not None else ""
    return ("The run is in progress; its report is written to runs.jsonl when it ends."
            + (f"\n\nThe previous run:\n{before}" if before else ""))


def block_text(record: BlockRecord) -> str:
    """One block's tracking-store record, label by label, for the drill-down panel."""
    stats = record.stats
    fields = [
        ("block (spatial id)", str(record.spatial_id)),
        ("grid position", "(" + ", ".join(str(c) for c in record.coord) + ")"),
        ("done", "yes" if record.done else "no"),
        ("failed attempts", str(record.failures)),
        ("worker", "—" if record.worker_id is None else str(record.worker_id)),
        ("sent", format_when(record.sent_at)),
        ("returned", format_when(record.returned_at)),
        ("round trip", format_seconds(record.round_trip)),
        ("wall", format_seconds(stats.wall_seconds if stats else None)),
        ("CPU", format_seconds(stats.cpu_seconds if stats else None)),
        ("peak RSS", format_bytes(stats.peak_rss_bytes if stats else None)),
        ("IO read", format_bytes(stats.io_read_bytes if stats else None)),
        ("IO write", format_bytes(stats.io_write_bytes if stats else None)),
    ]
    width = max(len(label) for label, _ in fields)
    lines = [f"{label:<{width}}  {value}" for label, value in fields]
    if stats is None:
        lines += ["", NOT_MEASURED]
    return "\n".join(lines)


def heading(task_id: str, state: str, counts: Mapping[str, int], *, run_index: int | None = None,
            live: bool = False, cluster: Any = None) -> str:
    """The rich-text line above a run's tabs: task, state, blocks, which run, which cluster."""
    parts = [f"<b>{html.escape(task_id)}</b> — {html.escape(state)}"]
    if counts.get("total"):
        parts.append(f"{counts.get('done', 0):,} of {counts['total']:,} blocks done")
    for key, word in (("failed", "failed"), ("orphaned", "orphaned"), ("in_flight", "in flight")):
        if counts.get(key):
            parts.append(f"{counts[key]:,} {word}")
    if run_index is not None and not live:
        parts.append(f"run {run_index + 1}")
    if isinstance(cluster, str) and cluster:  # a dask run says which cluster ran it
        parts.append("on " + html.escape(cluster[:80]))
    return " · ".join(parts)



def ending_message(before: str | None, line: StoreLine) -> str:
    """The status-bar line when a run watched while running has ended ("" when it has not)."""
    if before != "running" or line.state not in ENDED:
        return ""
    figures = ([f"{line.done:,} of {line.total:,} blocks done"]
               if line.done is not None and line.total else [])
    figures += [f"{line.failed:,} failed"] if line.failed else []
    suffix = f" ({', '.join(figures)})" if figures else ""
    return f"Blockwise task {line.task_id} {ENDED[line.state]}{suffix}"


# -- what can be done --------------------------------------------------------------------

def controls(has_store: bool | None, workers_listed: bool = False,
             blocks_listed: bool = False) -> Controls:
    """The Run Report's actions, enabled or not, for the run shown.

    ``has_store`` is whether the run shown has a tracking store (None: no run
    is shown); ``workers_listed`` whether its worker table has rows;
    ``blocks_listed`` whether a worker's blocks are listed.
    """
    open_store = Button(True, "Open a runs.jsonl or a task's tracking store from anywhere")
    if has_store is None:
        why = "choose a run on the left first"
        return Controls(open_store, Button(False, why), Button(False, why))
    if not has_store:
        return Controls(open_store, Button(False, NO_STORE[:1].upper() + NO_STORE[1:]),
                        Button(False, NO_STORE[:1].upper() + NO_STORE[1:]))
    workers = (Button(True, "Double-click a worker to list the blocks it ran") if workers_listed
               else Button(False, "No worker processes ran this run, so there are no worker blocks"))
    blocks = (Button(True, "Select a block to see its tracking-store record") if blocks_listed
              else Button(False, "Double-click a worker in the Summary to list its blocks first"))
    return Controls(open_store, workers, blocks)


@dataclass(frozen=True)
class Drill:
    """The drill-down tab: one worker's blocks and one block's record, as the pane shows them."""

    worker: int | None = None
    block: int | None = None
    heading: str = "Double-click a worker in the Summary to list its blocks."
    blocks: Table | None = None
    record: str = ""
    note: str = ""


def drill_heading(worker: int | None, blocks: Table | None, total: int | None) -> str:
    if worker is None:
        return "Double-click a worker in the Summary to list its blocks."
    if blocks is None or total is None:
        return f"Blocks run by worker {worker}"
    return f"Blocks run by worker {worker}: {total:,} (select one for its record)"
