"""The report objects: one task's run (:class:`TaskReport`), a whole run
(:class:`RunReport`) and one block's record (:class:`BlockRecord`), with the
text panel they render.

A report read back from ``runs.jsonl`` next morning is the object the run
returned.  These objects read no file: drill-down to single blocks is a
function of the store module (:func:`spacrq.blockwise.report_store.block`),
given the report's ``store``.  A run with nothing measured renders no panel
at all: a table of zeros is worse than no table.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from spacrq.blockwise.report_format import format_bytes, format_seconds, format_time, text_table
from spacrq.blockwise.report_stats import BlockSummary, Stat, WorkerRecord, WorkerSummary

__all__ = ["ReportError", "BlockStats", "BlockRecord", "TaskReport", "RunReport",
           "render_history", "queue_note", "BlockOutside"]


class ReportError(ValueError):
    """A report could not be read; the message is one sentence naming the fix."""


class BlockOutside(ReportError):
    """The block asked for is not in the task's grid (the operator's input, not the store, is wrong)."""


# -- one block from the tracking store ------------------------------------------

@dataclass(frozen=True)
class BlockStats:
    """What the worker measured for one block; ``None`` where it measured nothing."""

    wall_seconds: float | None = None
    cpu_seconds: float | None = None
    peak_rss_bytes: int | None = None
    io_read_bytes: int | None = None
    io_write_bytes: int | None = None

    def to_dict(self) -> dict:
        return {"wall_seconds": self.wall_seconds, "cpu_seconds": self.cpu_seconds,
                "peak_rss_bytes": self.peak_rss_bytes, "io_read_bytes": self.io_read_bytes,
                "io_write_bytes": self.io_write_bytes}


@dataclass(frozen=True)
class BlockRecord:
    """What the tracking store holds for one block.

    ``block_id`` is ``(task_id, spatial id)``, the spatial id being the
    block's C-order index in the grid; ``coord`` is its grid coordinate.
    ``stats`` is None without resource tracking or before the block ran;
    ``worker_id`` None when no spacrq worker did it.  Times are seconds
    since the epoch on the scheduler's clock.
    """

    block_id: tuple
    coord: tuple
    done: bool
    failures: int
    stats: BlockStats | None
    worker_id: int | None
    sent_at: float | None
    returned_at: float | None

    @property
    def spatial_id(self) -> int:
        return int(self.block_id[1])

    @property
    def wall_seconds(self) -> float | None:
        return None if self.stats is None else self.stats.wall_seconds

    @property
    def peak_rss_bytes(self) -> int | None:
        return None if self.stats is None else self.stats.peak_rss_bytes

    @property
    def round_trip(self) -> float | None:
        """Dispatch to return in seconds, from the scheduler's stamps."""
        if self.sent_at is None or self.returned_at is None:
            return None
        return self.returned_at - self.sent_at

    def describe(self) -> str:
        """The record as the operator reads it: state, worker, times and figures with units."""
        state = "done" if self.done else ("failed" if self.failures else "not done")
        tries = f", {self.failures} failed attempt{'s' if self.failures != 1 else ''}" if self.failures else ""
        s = self.stats or BlockStats()
        rows = [
            ("worker", "—" if self.worker_id is None else str(self.worker_id)),
            ("sent at", format_time(self.sent_at)),
            ("returned at", format_time(self.returned_at)),
            ("round trip", format_seconds(self.round_trip)),
            ("wall", format_seconds(s.wall_seconds)),
            ("cpu", format_seconds(s.cpu_seconds)),
            ("peak RSS", format_bytes(s.peak_rss_bytes)),
            ("io read", format_bytes(s.io_read_bytes)),
            ("io write", format_bytes(s.io_write_bytes)),
        ]
        head = f"block {self.spatial_id} of {self.block_id[0]} at {tuple(self.coord)}: {state}{tries}"
        return "\n".join([head, *(f"  {k:<12}{v}" for k, v in rows)])

    def to_dict(self) -> dict:
        return {"task_id": self.block_id[0], "spatial_id": self.spatial_id,
                "coord": list(self.coord), "done": self.done, "failures": self.failures,
                "stats": None if self.stats is None else self.stats.to_dict(),
                "worker_id": self.worker_id, "sent_at": self.sent_at,
                "returned_at": self.returned_at, "round_trip": self.round_trip}


# -- task and run reports ---------------------------------------------------------

class TaskReport:
    """One task's report for one run: ``blocks`` and ``workers`` summaries, drill-downs.

    ``store`` is the task's tracking store when the report knows it (a report
    built by a run with a store, read from a store's ``runs.jsonl``, or built
    by :func:`report_from_store`); the store module's ``block`` and
    ``block_records`` look blocks up in it, next morning, in any process.

    ``outcome`` is what the engine adds to the line beside the report's own fields
    (``{"state": "finished" | "failed" | "interrupted", "done", "failed",
    "orphaned", …}``); kept as read and written back, and a run that did not
    finish says so in the headline.
    """

    def __init__(self, task_id: str, blocks: BlockSummary | None = None,
                 workers: WorkerSummary | None = None, started_at: float = 0.0,
                 finished_at: float = 0.0, tracked: bool = False,
                 store: str | Path | None = None, outcome: dict | None = None) -> None:
        self.task_id = str(task_id)
        self.blocks = blocks if blocks is not None else BlockSummary()
        self.workers = workers if workers is not None else WorkerSummary()
        self.started_at = float(started_at)
        self.finished_at = float(finished_at)
        self.tracked = bool(tracked)
        self.store = Path(store) if store is not None else None
        self.outcome = dict(outcome) if isinstance(outcome, dict) else None

    @classmethod
    def from_dict(cls, d: dict, store: str | Path | None = None) -> "TaskReport":
        return cls(
            task_id=d["task_id"],
            blocks=BlockSummary.from_dict(d.get("blocks")),
            workers=WorkerSummary.from_dict(d.get("workers")),
            started_at=float(d.get("started_at") or 0.0),
            finished_at=float(d.get("finished_at") or 0.0),
            tracked=bool(d.get("tracked", False)),
            store=store,
            outcome=d.get("outcome"),
        )

    def to_dict(self) -> dict:
        out = {"task_id": self.task_id, "started_at": self.started_at,
               "finished_at": self.finished_at, "tracked": self.tracked,
               "blocks": self.blocks.to_dict(), "workers": self.workers.to_dict()}
        if self.outcome is not None:
            out["outcome"] = dict(self.outcome)
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskReport) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"TaskReport({self.task_id!r}, blocks={self.blocks.count}, workers={self.workers.count})"

    @property
    def elapsed(self) -> float:
        """Run wall time in seconds, start to finish (0 when unknown)."""
        return max(0.0, self.finished_at - self.started_at)

    @property
    def timed(self) -> bool:
        """Whether there is anything measured to show: workers, round trips or block stats."""
        return bool(self.workers.count or self.blocks.round_trip or self.blocks.has_stats)

    def worker(self, worker_id: int) -> WorkerRecord:
        """One worker's record; one-sentence KeyError naming the ids there are."""
        try:
            return self.workers.by_id[int(worker_id)]
        except KeyError:
            ids = ", ".join(str(i) for i in sorted(self.workers.by_id)) or "none"
            raise KeyError(f"task {self.task_id!r} has no worker {worker_id}; its workers are: {ids}") from None

    def require_store(self) -> Path:
        """The tracking store its blocks are looked up in, or a one-sentence ReportError."""
        if self.store is None:
            raise ReportError(f"task {self.task_id!r} has no tracking store to look blocks up in; "
                              "run it with a tracking store (tracking_path) to get per-block records")
        return self.store

    # -- the panel ----------------------------------------------------------

    def headline(self) -> str:
        """One line: task, blocks (skipped, failed attempts), workers, wall time."""
        b, w = self.blocks, self.workers
        head = f"{self.task_id}  {b.count:,} block{'s' if b.count != 1 else ''}"
        notes = []
        if b.skipped:
            notes.append(f"{b.skipped:,} skipped")
        if b.failures:
            notes.append(f"{b.failures:,} failed attempt{'s' if b.failures != 1 else ''}")
        if notes:
            head += f" ({', '.join(notes)})"
        if w.count:
            head += f", {w.count} worker{'s' if w.count != 1 else ''}"
        cluster = (self.outcome or {}).get("cluster")
        if isinstance(cluster, str) and cluster:  # which cluster ran it (dask runs say)
            head += f" on {cluster[:80]}"
        if self.elapsed > 0:
            head += f", {format_seconds(self.elapsed)} wall"
        return head + self._unfinished()

    def _unfinished(self) -> str:
        """`` — failed: …`` for a run that did not finish; partial never reads as success."""
        o = self.outcome or {}
        state = o.get("state")
        if not state or state == "finished":
            return ""
        counts = [f"{o[k]:,} {k}" for k in ("failed", "orphaned") if isinstance(o.get(k), int) and o[k]]
        if isinstance(o.get("done"), int) and isinstance(o.get("total"), int):
            counts.append(f"{o['done'] + int(o.get('skipped') or 0):,} of {o['total']:,} done")
        return f" — {state}" + (f": {', '.join(counts)}" if counts else "")

    def render(self, max_workers: int = 10) -> str:
        """This task's section of the Resource Utilization panel.

        The round trip and the worker lifecycle need no resource tracking and
        are shown whenever measured; wall, CPU, RSS, IO, overhead and trend
        only with resource tracking.  Rows nobody measured are left out.
        """
        b, w = self.blocks, self.workers
        lines = ["  " + self.headline()]
        rows: list[tuple[str, Stat, str]] = [("round trip", b.round_trip, "s")]
        if b.has_stats:
            rows += [("wall", b.wall, "s"), ("cpu", b.cpu, "s"), ("peak RSS", b.peak_rss, "B"),
                     ("io read", b.io_read, "B"), ("io write", b.io_write, "B"),
                     ("queued", b.queued, "s"), ("overhead", b.overhead, "s")]
        elif b.queued:
            rows.append(("queued", b.queued, "s"))
        rows = [r for r in rows if r[1]]  # a row of dashes says nothing the headline does not
        if rows:
            lines.append(text_table(("per block", "mean", "std", "min", "max", "total"),
                                [[name, *stat.cells(unit, additive=name != "peak RSS")]
                                 for name, stat, unit in rows]))
        if b.has_stats and b.wall.n >= 2:
            lines.append(f"    {'trend':<10}  {_format_trend(b.trend_slope_ms, b.wall.n)}")
        waited = queue_note(b)
        if waited:
            lines.append(f"    {'note':<10}  {waited}")
        if w.count or w.unmanaged_clients:
            wrows = [[name, *stat.cells()] for name, stat in (
                ("startup", w.startup), ("idle", w.idle), ("compute", w.compute),
                ("teardown", w.teardown)) if stat]
            if wrows:
                lines.append(text_table(("workers", "mean", "std", "min", "max", "total"), wrows))
            exits = ", ".join(f"{n} {kind}" for kind, n in w.exits.items() if n) or "—"
            running = w.count - sum(w.exits.values())
            if running > 0:
                exits += f" ({running} still running)"
            if w.unmanaged_clients:
                exits += f" (+ {w.unmanaged_clients} unmanaged client{'s' if w.unmanaged_clients != 1 else ''})"
            lines.append(f"    {'exits':<10}  {exits}")
            lines.extend(self._workertext_table(max_workers))
        return "\n".join(lines)

    def _workertext_table(self, max_workers: int) -> list[str]:
        rows = sorted(self.workers.by_id.values(), key=lambda r: r.worker_id)
        if not rows:
            return []
        shown = rows[: max(0, max_workers)]
        body = [[str(r.worker_id), format_seconds(r.startup), f"{r.blocks:,}",
                 format_seconds(r.idle.total) if r.idle else "—", r.idle.format(),
                 format_seconds(r.compute.total) if r.compute else "—", r.compute.format(),
                 format_seconds(r.teardown), r.exit or "running"] for r in shown]
        out = [text_table(("worker", "startup", "blocks", "idle", "idle / block", "compute",
                       "compute / block", "teardown", "exit"), body, min_width=(6,))]
        if len(rows) > len(shown):
            out.append(f"    … and {len(rows) - len(shown)} more workers "
                       "(spacrq report --json lists them all)")
        return out



def queue_note(b: BlockSummary) -> str:
    """A sentence when blocks waited in their workers for a noticeable part of the round trip.

    The round trip of a batched block includes the time it waited behind the
    batch ahead of it and its batch-mates; read as "scheduler overhead" it
    sends an operator tuning the wrong thing, so the report says what it is.
    """
    if not b.queued or not b.round_trip or b.round_trip.mean <= 0:
        return ""
    share = b.queued.mean / b.round_trip.mean
    if share < 0.2:
        return ""
    cost = f"; the scheduler's own cost is the overhead, {format_seconds(b.overhead.mean)}" if b.overhead else ""
    return (f"blocks waited {format_seconds(b.queued.mean)} on average ({share:.0%} of the round trip) "
            "in their worker behind the blocks sent ahead of them: batches go two deep so a worker "
            f"never waits for the scheduler{cost}")


def _format_trend(slope_ms: float, blocks: int) -> str:
    """The slope, and what it adds up to over the run — the figure that says whether it matters."""
    slope = f"{slope_ms:+.4f}" if abs(slope_ms) >= 0.01 or slope_ms == 0 else f"{slope_ms:+.2e}"
    drift = slope_ms * (blocks - 1) / 1e3
    way = "slower" if drift > 0 else "faster"
    if abs(drift) < 1e-9:
        return f"{slope} ms/block (flat)"
    return f"{slope} ms/block (last block {format_seconds(abs(drift))} {way} than the first, on the trend)"



def render_history(runs: Sequence[TaskReport]) -> str:
    """One row per run of a task, oldest first: did last night go like the night before?

    Wall time per timed block is the column to compare across runs; a run
    that did not finish says so in its state column.
    """
    if not runs:
        return ""
    rows = []
    for t in runs:
        b = t.blocks
        state = (t.outcome or {}).get("state") or "—"
        rows.append([format_time(t.started_at or None)[:19], format_seconds(t.elapsed or None),
                     f"{b.count:,}", f"{b.skipped:,}", f"{b.failures:,}",
                     b.wall.format(), b.round_trip.format(), str(t.workers.count or "—"), state])
    head = f"  {runs[-1].task_id}  {len(runs)} run{'s' if len(runs) != 1 else ''}"
    table = text_table(("started", "wall", "blocks", "skipped", "failed attempts", "wall / block",
                    "round trip / block", "workers", "state"), rows, min_width=(19,))
    return head + "\n" + table


class RunReport:
    """Reports for every task of one run (or every task found in a folder), keyed by task id."""

    def __init__(self, tasks: dict[str, TaskReport] | None = None) -> None:
        self.tasks = dict(tasks or {})

    @classmethod
    def from_dict(cls, d: Any) -> "RunReport":
        return cls({str(tid): TaskReport.from_dict(t) for tid, t in (d or {}).items()})

    @classmethod
    def from_json(cls, text: str) -> "RunReport":
        return cls.from_dict(json.loads(text))

    def to_dict(self) -> dict:
        return {tid: t.to_dict() for tid, t in self.tasks.items()}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __getitem__(self, task_id: str) -> TaskReport:
        return self.tasks[task_id]

    def __iter__(self):
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f"RunReport({sorted(self.tasks)})"

    @property
    def measured(self) -> dict[str, TaskReport]:
        """The tasks that measured their blocks inside the workers (resource tracking)."""
        return {tid: t for tid, t in self.tasks.items() if t.blocks.has_stats}

    @property
    def timed(self) -> dict[str, TaskReport]:
        """The tasks with anything to show: workers, per-block round trips or block stats."""
        return {tid: t for tid, t in self.tasks.items() if t.timed}

    def render(self, task_order: Sequence[str] | None = None, max_workers: int = 10) -> str:
        """The Resource Utilization panel, one section per timed task.

        Tasks in ``task_order`` come first, the rest by id.  Empty when no
        task measured anything (a serial run without resource tracking): a
        table of zeros is worse than no table.
        """
        timed = self.timed
        if not timed:
            return ""
        first = [t for t in (task_order or ()) if t in timed]
        order = first + sorted(t for t in timed if t not in first)
        parts = ["Resource Utilization", "--------------------"]
        for tid in order:
            parts.append("")
            parts.append(timed[tid].render(max_workers=max_workers))
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.render()
