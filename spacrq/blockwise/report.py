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
    t.block((1, 2)) ; t.block(17)         # BlockRecord, read from the tracking store

The engine measures and calls the builders here (:meth:`Stat.of`,
:func:`summarize_blocks`, :func:`summarize_workers`, :func:`append_run`);
the window and ``spacrq report`` read (:func:`read_runs`,
:func:`report_from_store`, :func:`block`, :func:`block_records`).

Honest figures are the point of the module: a figure nobody measured is
``—`` (an empty :class:`Stat`), never ``0``; skipped blocks are counted but
never timed; and a run with nothing measured renders no panel at all,
because a table of zeros is worse than no table.
"""
from __future__ import annotations

import json
import math
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from spacrq.runfiles import PROGRESS_FILE, JsonlTail, append_jsonl, read_progress

__all__ = [
    "RUNS_FILE",
    "ReportError",
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

RUNS_FILE = "runs.jsonl"

#: the order exits are listed in; kinds the engine invents later follow these
EXIT_KINDS = ("clean", "error", "timeout", "interrupted", "crashed")


class ReportError(ValueError):
    """A report could not be read; the message is one sentence naming the fix."""


# -- formatting ---------------------------------------------------------------

def format_seconds(x: float | None) -> str:
    """A duration in the unit that keeps it readable: µs … h; ``—`` when unmeasured."""
    if x is None or not math.isfinite(x):
        return "—"
    sign = "-" if x < 0 else ""
    a = abs(x)
    if a < 1e-9:  # below any clock's resolution: rounding noise, not a duration
        return "0 s"
    if a >= 3600.0:
        hours, rest = divmod(a, 3600.0)
        return f"{sign}{int(hours)} h {int(rest // 60):02d} min"
    if a >= 60.0:
        minutes, rest = divmod(a, 60.0)
        return f"{sign}{int(minutes)} min {rest:04.1f} s"
    # the unit is chosen after rounding, so 0.99999 ms reads "1.0 ms", not "1000.0 µs"
    if a >= 0.995:
        return f"{sign}{a:.2f} s"
    if a >= 0.99995e-3:
        return f"{sign}{a * 1e3:.1f} ms"
    return f"{sign}{a * 1e6:.1f} µs"


def format_bytes(n: float | None) -> str:
    """A byte count in binary units (KiB = 1024 B); ``—`` when unmeasured."""
    if n is None or not math.isfinite(n):
        return "—"
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < (1023.5 if unit == "B" else 1023.95):  # unit chosen after rounding
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024.0
    return f"{v:.1f} PiB"


def _format_time(t: float | None) -> str:
    """An epoch time as local date and time to the millisecond; ``—`` when never stamped."""
    if t is None or not math.isfinite(t):
        return "—"
    import datetime as _dt
    return _dt.datetime.fromtimestamp(t).isoformat(sep=" ", timespec="milliseconds")


def _scale(x: float, unit: str) -> tuple[float, str, int]:
    """(factor, unit name, decimals) that keep ``x`` readable; shared by a mean and its std."""
    a = abs(x)
    if unit == "s":
        if a >= 0.995 or a < 1e-9:
            return 1.0, "s", 2
        if a >= 0.99995e-3:
            return 1e3, "ms", 1
        return 1e6, "µs", 1
    if unit == "B":
        factor = 1.0
        for name in ("B", "KiB", "MiB", "GiB", "TiB"):
            if a * factor < (1023.5 if name == "B" else 1023.95):
                return factor, name, 0 if name == "B" else 1
            factor /= 1024.0
        return factor, "PiB", 1
    return 1.0, unit, 3


def _format_value(x: float, unit: str) -> str:
    if unit == "s":
        return format_seconds(x)
    if unit == "B":
        return format_bytes(x)
    return f"{x:.4g}{(' ' + unit) if unit else ''}"


# -- Stat ---------------------------------------------------------------------

def _finite(values: Any) -> np.ndarray:
    """The values as float64 with unmeasured entries (NaN, ±inf) left out (no copy when none are)."""
    a = np.asarray(values, dtype=np.float64).ravel()
    keep = np.isfinite(a)
    return a if keep.all() else a[keep]


@dataclass(frozen=True)
class Stat:
    """A measured distribution: count, mean, sample standard deviation, min, max, total.

    Empty (``n == 0``) when nothing was measured; it is then falsy and formats
    as ``—``.  ``total`` is written as ``"sum"`` in JSON (the report's shape
    on disk); ``"total"`` is accepted on reading.
    """

    n: int = 0
    mean: float = 0.0
    std: float = 0.0
    min: float = 0.0
    max: float = 0.0
    total: float = 0.0

    @classmethod
    def of(cls, values: Any) -> "Stat":
        """The Stat of a sample (numpy array or sequence); NaN entries are unmeasured.

        The standard deviation is the sample one (``ddof=1``), 0 for a single
        value; vectorised, so a million blocks cost milliseconds.
        """
        a = _finite(values)
        n = int(a.size)
        if n == 0:
            return cls()
        total = float(a.sum())
        mean = total / n
        std = 0.0
        if n > 1:
            dev = a - mean  # two-pass: exact where sum-of-squares tricks lose digits
            std = math.sqrt(float(np.dot(dev, dev)) / (n - 1))
        return cls(n=n, mean=mean, std=std, min=float(a.min()), max=float(a.max()), total=total)

    @classmethod
    def pooled(cls, stats: Iterable["Stat"]) -> "Stat":
        """The Stat of the union of the samples behind ``stats``, combined exactly.

        Each part contributes its sum of squared deviations ``(n-1)·std²``
        plus ``n·(mean - pooled mean)²`` for the shift of its mean, so the
        pooled std equals the std of the concatenated samples — no sample is
        needed, only the per-part Stats the workers reported.
        """
        parts = [s for s in stats if s.n > 0]
        if not parts:
            return cls()
        n = sum(s.n for s in parts)
        total = math.fsum(s.total for s in parts)
        mean = total / n
        squares = math.fsum((s.n - 1) * s.std * s.std + s.n * (s.mean - mean) ** 2 for s in parts)
        std = math.sqrt(max(squares, 0.0) / (n - 1)) if n > 1 else 0.0
        return cls(n=n, mean=mean, std=std, min=min(s.min for s in parts),
                   max=max(s.max for s in parts), total=total)

    @classmethod
    def from_dict(cls, d: Any) -> "Stat":
        if not isinstance(d, dict) or not d:
            return cls()
        return cls(
            n=int(d.get("n", 0)),
            mean=float(d.get("mean", 0.0)),
            std=float(d.get("std", 0.0)),
            min=float(d.get("min", 0.0)),
            max=float(d.get("max", 0.0)),
            total=float(d.get("sum", d.get("total", 0.0))),
        )

    def to_dict(self) -> dict:
        return {"n": self.n, "mean": self.mean, "std": self.std, "min": self.min,
                "max": self.max, "sum": self.total}

    def __bool__(self) -> bool:
        return self.n > 0

    def format(self, unit: str = "s") -> str:
        """``mean ± std unit`` (``"s"`` durations, ``"B"`` bytes, else plain), both in the
        mean's unit so they compare at a glance; ``—`` if empty."""
        if not self:
            return "—"
        if self.n == 1:
            return _format_value(self.mean, unit)
        factor, name, digits = _scale(self.mean, unit)
        return f"{self.mean * factor:.{digits}f} ± {self.std * factor:.{digits}f} {name}".rstrip()

    def cells(self, unit: str = "s") -> list[str]:
        """mean, std, min, max, total as text for a table row; ``—`` in each when empty."""
        if not self:
            return ["—"] * 5
        factor, name, digits = _scale(self.mean, unit)
        std = f"{self.std * factor:.{digits}f} {name}".rstrip()  # in the mean's unit
        return [_format_value(self.mean, unit), std,
                *(_format_value(v, unit) for v in (self.min, self.max, self.total))]

    def __str__(self) -> str:
        return self.format()


def trend_slope_ms(walls_in_completion_order: Any) -> float:
    """Least-squares slope of per-block wall time against completion order, in ms per block.

    Positive means blocks got slower as the run went on (memory creeping up,
    a filling disk); unmeasured (NaN) blocks keep their place in the order
    but do not pull the line.  0.0 with fewer than two measured blocks.
    """
    y = np.asarray(walls_in_completion_order, dtype=np.float64).ravel()
    x = np.arange(y.size, dtype=np.float64)
    keep = np.isfinite(y)
    if int(keep.sum()) < 2:
        return 0.0
    if not keep.all():
        x, y = x[keep], y[keep]
    dx = x - x.mean()
    denom = float(np.dot(dx, dx))
    if denom == 0.0:
        return 0.0
    # Σ dx·(y - ȳ) = Σ dx·y, because Σ dx = 0: one pass over y fewer
    return float(np.dot(dx, y)) / denom * 1e3


# -- blocks -------------------------------------------------------------------

@dataclass(frozen=True)
class BlockSummary:
    """Per-block figures of one task over one run.

    ``round_trip`` (dispatch → return, stamped by the scheduler) is there for
    every distributed block, tracked or not.  ``wall``, ``cpu``, ``peak_rss``,
    ``io_read`` and ``io_write`` are measured inside the worker and stay empty
    without resource tracking (``has_stats`` False).  ``overhead`` is what
    the scheduler and transport added to a block: round trip minus wall.
    ``count`` includes the ``skipped`` blocks (done in an earlier run), which
    contribute no timing samples; ``failures`` counts failed attempts.
    """

    count: int = 0
    skipped: int = 0
    failures: int = 0
    has_stats: bool = False
    round_trip: Stat = field(default_factory=Stat)
    wall: Stat = field(default_factory=Stat)
    cpu: Stat = field(default_factory=Stat)
    peak_rss: Stat = field(default_factory=Stat)
    io_read: Stat = field(default_factory=Stat)
    io_write: Stat = field(default_factory=Stat)
    overhead: Stat = field(default_factory=Stat)
    trend_slope_ms: float = 0.0

    _STATS = ("round_trip", "wall", "cpu", "peak_rss", "io_read", "io_write", "overhead")

    @classmethod
    def from_dict(cls, d: Any) -> "BlockSummary":
        d = d if isinstance(d, dict) else {}
        return cls(
            count=int(d.get("count", 0)),
            skipped=int(d.get("skipped", 0)),
            failures=int(d.get("failures", 0)),
            has_stats=bool(d.get("has_stats", False)),
            trend_slope_ms=float(d.get("trend_slope_ms", 0.0)),
            **{name: Stat.from_dict(d.get(name)) for name in cls._STATS},
        )

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"count": self.count, "skipped": self.skipped,
                               "failures": self.failures, "has_stats": self.has_stats}
        for name in self._STATS:
            out[name] = getattr(self, name).to_dict()
        out["trend_slope_ms"] = self.trend_slope_ms
        return out


def _measured_amounts(values: Any) -> np.ndarray:
    """Byte counts with the store's ``-1`` (never measured) left out, as float64."""
    a = np.asarray(values, dtype=np.float64).ravel()
    return np.where(a >= 0, a, np.nan)


def summarize_blocks(*, count: int, skipped: int, failures: int, round_trip: Any,
                     wall: Any = None, cpu: Any = None, peak_rss: Any = None,
                     io_read: Any = None, io_write: Any = None) -> BlockSummary:
    """The per-block summary of one run from per-block arrays.

    The arrays hold one entry per block that ran this run, aligned with each
    other and **in completion order** (the trend is read from ``wall`` in that
    order).  NaN marks a figure not measured for a block, as does a negative
    byte count (the tracking store's ``-1`` fill).  Passing ``wall`` means the
    run had resource tracking (``has_stats``); ``overhead`` is
    ``round_trip - wall`` over the blocks that have both.
    """
    rt = np.asarray(round_trip, dtype=np.float64).ravel()
    if wall is None:
        return BlockSummary(count=int(count), skipped=int(skipped), failures=int(failures),
                            round_trip=Stat.of(rt))
    w = np.asarray(wall, dtype=np.float64).ravel()
    overhead = Stat()
    if rt.size == w.size:
        overhead = Stat.of(rt - w)  # NaN wherever either is missing
    elif rt.size:
        raise ValueError(f"round_trip has {rt.size} blocks but wall has {w.size}; "
                         "pass the arrays aligned per block")
    return BlockSummary(
        count=int(count), skipped=int(skipped), failures=int(failures), has_stats=True,
        round_trip=Stat.of(rt), wall=Stat.of(w),
        cpu=Stat.of(cpu) if cpu is not None else Stat(),
        peak_rss=Stat.of(_measured_amounts(peak_rss)) if peak_rss is not None else Stat(),
        io_read=Stat.of(_measured_amounts(io_read)) if io_read is not None else Stat(),
        io_write=Stat.of(_measured_amounts(io_write)) if io_write is not None else Stat(),
        overhead=overhead,
        trend_slope_ms=trend_slope_ms(w),
    )


# -- workers ------------------------------------------------------------------

def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


@dataclass(frozen=True)
class WorkerRecord:
    """One worker's life, in seconds; ``None`` for a phase that never happened.

    No ``startup`` for a worker that never connected, no ``teardown`` for
    one that crashed or was cut off.  ``idle`` (waiting for its next block)
    and ``compute`` (working on one) are Stats over its blocks.  ``exit`` is
    ``"clean"``, ``"error"``, ``"timeout"``, ``"interrupted"`` … or ``None``
    while the worker is still running.
    """

    worker_id: int
    startup: float | None = None
    blocks_ok: int = 0
    blocks_failed: int = 0
    idle: Stat = field(default_factory=Stat)
    compute: Stat = field(default_factory=Stat)
    final_wait: float | None = None
    teardown: float | None = None
    exit: str | None = None

    @property
    def blocks(self) -> int:
        return self.blocks_ok + self.blocks_failed

    @classmethod
    def from_dict(cls, d: dict) -> "WorkerRecord":
        return cls(
            worker_id=int(d["worker_id"]),
            startup=_opt_float(d.get("startup")),
            blocks_ok=int(d.get("blocks_ok", 0)),
            blocks_failed=int(d.get("blocks_failed", 0)),
            idle=Stat.from_dict(d.get("idle")),
            compute=Stat.from_dict(d.get("compute")),
            final_wait=_opt_float(d.get("final_wait")),
            teardown=_opt_float(d.get("teardown")),
            exit=d.get("exit"),
        )

    def to_dict(self) -> dict:
        return {"worker_id": self.worker_id, "startup": self.startup, "blocks_ok": self.blocks_ok,
                "blocks_failed": self.blocks_failed, "idle": self.idle.to_dict(),
                "compute": self.compute.to_dict(), "final_wait": self.final_wait,
                "teardown": self.teardown, "exit": self.exit}


@dataclass(frozen=True)
class WorkerSummary:
    """The workers spacrq started for one task.

    ``startup`` and ``teardown`` have one sample per worker; ``idle`` and
    ``compute`` pool every worker's per-block samples.  ``exits`` counts how
    workers ended by kind; ``by_id`` holds each :class:`WorkerRecord`.
    ``unmanaged_clients`` counts workers spacrq did not start (e.g. attached
    to a dask cluster), which have no lifecycle figures.
    """

    count: int = 0
    unmanaged_clients: int = 0
    startup: Stat = field(default_factory=Stat)
    idle: Stat = field(default_factory=Stat)
    compute: Stat = field(default_factory=Stat)
    teardown: Stat = field(default_factory=Stat)
    exits: dict = field(default_factory=dict)
    by_id: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Any) -> "WorkerSummary":
        d = d if isinstance(d, dict) else {}
        rows = [WorkerRecord.from_dict(r) for r in d.get("by_id") or [] if isinstance(r, dict)]
        return cls(
            count=int(d.get("count", 0)),
            unmanaged_clients=int(d.get("unmanaged_clients", 0)),
            startup=Stat.from_dict(d.get("startup")),
            idle=Stat.from_dict(d.get("idle")),
            compute=Stat.from_dict(d.get("compute")),
            teardown=Stat.from_dict(d.get("teardown")),
            exits={str(k): int(v) for k, v in (d.get("exits") or {}).items()},
            by_id={r.worker_id: r for r in rows},
        )

    def to_dict(self) -> dict:
        return {"count": self.count, "unmanaged_clients": self.unmanaged_clients,
                "startup": self.startup.to_dict(), "idle": self.idle.to_dict(),
                "compute": self.compute.to_dict(), "teardown": self.teardown.to_dict(),
                "exits": dict(self.exits), "by_id": [r.to_dict() for r in self.by_id.values()]}


def summarize_workers(records: Sequence[WorkerRecord], unmanaged_clients: int = 0) -> WorkerSummary:
    """The worker summary of one task from each worker's record.

    Idle and compute are pooled exactly from the per-worker Stats
    (:meth:`Stat.pooled`), so the engine never has to keep every sample.
    Exits are counted by kind in a fixed order; running workers have none.
    """
    rows = sorted(records, key=lambda r: r.worker_id)
    kinds = Counter(r.exit for r in rows if r.exit)
    exits = {k: kinds.pop(k) for k in EXIT_KINDS if k in kinds}
    exits.update(sorted(kinds.items()))
    return WorkerSummary(
        count=len(rows),
        unmanaged_clients=int(unmanaged_clients),
        startup=Stat.of([r.startup for r in rows if r.startup is not None]),
        idle=Stat.pooled(r.idle for r in rows),
        compute=Stat.pooled(r.compute for r in rows),
        teardown=Stat.of([r.teardown for r in rows if r.teardown is not None]),
        exits=exits,
        by_id={r.worker_id: r for r in rows},
    )


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
            ("sent at", _format_time(self.sent_at)),
            ("returned at", _format_time(self.returned_at)),
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
    by :func:`report_from_store`); :meth:`block` and :meth:`block_records`
    read it directly, so they work next morning in any process.

    ``outcome`` is what the engine adds to the line beside the seed's fields
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

    def _require_store(self) -> Path:
        if self.store is None:
            raise ReportError(f"task {self.task_id!r} has no tracking store to look blocks up in; "
                              "run it with a tracking store (tracking_path) to get per-block records")
        return self.store

    def block(self, which: int | Sequence[int]) -> BlockRecord:
        """One block's record from the tracking store, by grid coordinate or spatial id."""
        return block(self._require_store(), which)

    def block_records(self, worker: int | None = None) -> list[BlockRecord]:
        """Every block the store has recorded (done or failed), by spatial id; optionally one worker's."""
        return block_records(self._require_store(), worker=worker)

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
                     ("overhead", b.overhead, "s")]
        rows = [r for r in rows if r[1]]  # a row of dashes says nothing the headline does not
        if rows:
            lines.append(_table(("per block", "mean", "std", "min", "max", "total"),
                                [[name, *stat.cells(unit)] for name, stat, unit in rows]))
        if b.has_stats and b.wall.n >= 2:
            lines.append(f"    {'trend':<10}  {_format_trend(b.trend_slope_ms, b.wall.n)}")
        if w.count or w.unmanaged_clients:
            wrows = [[name, *stat.cells()] for name, stat in (
                ("startup", w.startup), ("idle", w.idle), ("compute", w.compute),
                ("teardown", w.teardown)) if stat]
            if wrows:
                lines.append(_table(("workers", "mean", "std", "min", "max", "total"), wrows))
            exits = ", ".join(f"{n} {kind}" for kind, n in w.exits.items() if n) or "—"
            running = w.count - sum(w.exits.values())
            if running > 0:
                exits += f" ({running} still running)"
            if w.unmanaged_clients:
                exits += f" (+ {w.unmanaged_clients} unmanaged client{'s' if w.unmanaged_clients != 1 else ''})"
            lines.append(f"    {'exits':<10}  {exits}")
            lines.extend(self._worker_table(max_workers))
        return "\n".join(lines)

    def _worker_table(self, max_workers: int) -> list[str]:
        rows = sorted(self.workers.by_id.values(), key=lambda r: r.worker_id)
        if not rows:
            return []
        shown = rows[: max(0, max_workers)]
        body = [[str(r.worker_id), format_seconds(r.startup), f"{r.blocks:,}",
                 format_seconds(r.idle.total) if r.idle else "—", r.idle.format(),
                 format_seconds(r.compute.total) if r.compute else "—", r.compute.format(),
                 format_seconds(r.teardown), r.exit or "running"] for r in shown]
        out = [_table(("worker", "startup", "blocks", "idle", "idle / block", "compute",
                       "compute / block", "teardown", "exit"), body, min_width=(6,))]
        if len(rows) > len(shown):
            out.append(f"    … and {len(rows) - len(shown)} more workers "
                       "(spacrq report --json lists them all)")
        return out


def _format_trend(slope_ms: float, blocks: int) -> str:
    """The slope, and what it adds up to over the run — the figure that says whether it matters."""
    slope = f"{slope_ms:+.4f}" if abs(slope_ms) >= 0.01 or slope_ms == 0 else f"{slope_ms:+.2e}"
    drift = slope_ms * (blocks - 1) / 1e3
    way = "slower" if drift > 0 else "faster"
    if abs(drift) < 1e-9:
        return f"{slope} ms/block (flat)"
    return f"{slope} ms/block (last block {format_seconds(abs(drift))} {way} than the first, on the trend)"


def _table(header: Sequence[str], rows: list[list[str]], indent: str = "    ",
           min_width: Sequence[int] = (10, 10, 10, 10, 10, 10)) -> str:
    """A plain-text table: first column left-aligned, the figures right-aligned.

    ``min_width`` keeps the block and worker tables of a section in the same columns.
    """
    widths = [max(len(str(r[i])) for r in [list(header), *rows]) for i in range(len(header))]
    widths = [max(w, m) for w, m in zip(widths, list(min_width) + [0] * len(widths))]

    def line(cells: Sequence[str]) -> str:
        first = f"{cells[0]:<{widths[0]}}"
        rest = "  ".join(f"{c:>{w}}" for c, w in zip(cells[1:], widths[1:]))
        return (indent + first + "  " + rest).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


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
        rows.append([_format_time(t.started_at or None)[:19], format_seconds(t.elapsed or None),
                     f"{b.count:,}", f"{b.skipped:,}", f"{b.failures:,}",
                     b.wall.format(), b.round_trip.format(), str(t.workers.count or "—"), state])
    head = f"  {runs[-1].task_id}  {len(runs)} run{'s' if len(runs) != 1 else ''}"
    table = _table(("started", "wall", "blocks", "skipped", "failed attempts", "wall / block",
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


# -- runs.jsonl -------------------------------------------------------------------

def runs_file(store_dir: str | Path) -> Path:
    """Where a task's run reports are appended: ``runs.jsonl`` in its store (or log) folder."""
    return Path(store_dir) / RUNS_FILE


def append_run(path: str | Path, task_report: TaskReport) -> None:
    """Append one run's report as one fsync'd line (a crash leaves at most a torn last line)."""
    append_jsonl(path, task_report.to_dict())


_LINE_START = b'{"task_id"'


def _parse_run_line(raw: bytes, store: Path | None) -> tuple[TaskReport | None, bool]:
    """A report line → (TaskReport or None, whether the line was whole).

    A line glued from a torn write and the next whole one (a crash mid-append,
    then a later run) still yields that later report: it is parsed from the
    last place a report starts, and the line counts as damaged.
    """
    starts = [0]
    cut = raw.rfind(_LINE_START)
    if cut > 0:
        starts.append(cut)
    for start in starts:
        try:
            doc = json.loads(raw[start:])
            if isinstance(doc, dict):
                return TaskReport.from_dict(doc, store=store), start == 0
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            continue
    return None, False


class RunsTail:
    """Incremental reader of a ``runs.jsonl``: each :meth:`read` returns the reports added since.

    Built on :class:`spacrq.runfiles.JsonlTail`: a torn last line is left for
    later, a garbage line is counted in :attr:`bad_lines` and skipped, and a
    replaced file starts over (:attr:`restarted`).  Reports read from a file
    inside a tracking store know their store, for block drill-down.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._tail = JsonlTail(self.path)
        self.bad_lines = 0
        self.restarted = False
        parent = self.path.parent
        self.store = parent if is_tracking_store(parent) else None

    def read(self) -> list[TaskReport]:
        chunk = self._tail.read_bytes()
        self.restarted = self._tail.restarted
        if self.restarted:
            self.bad_lines = 0
        out: list[TaskReport] = []
        for raw in chunk.splitlines():
            if not raw.strip():
                continue
            report, whole = _parse_run_line(raw, self.store)
            self.bad_lines += not whole
            if report is not None:
                out.append(report)
        return out


def read_runs(path: str | Path) -> list[TaskReport]:
    """Every run report in a ``runs.jsonl``, oldest first; [] when it is missing or empty."""
    return RunsTail(path).read()


def read_last_run(path: str | Path) -> TaskReport | None:
    """The last run report in a ``runs.jsonl``, or None when there is none."""
    runs = read_runs(path)
    return runs[-1] if runs else None


# -- the tracking store -----------------------------------------------------------

_FLOATS = ("wall_seconds", "cpu_seconds", "sent_at", "returned_at")
_AMOUNTS = ("peak_rss_bytes", "io_read_bytes", "io_write_bytes")


def is_tracking_store(path: str | Path) -> bool:
    """Whether ``path`` is a spacrq tracking store (a zarr group marked ``spacrq_tracking``)."""
    meta = Path(path) / "zarr.json"
    try:
        doc = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and "spacrq_tracking" in (doc.get("attributes") or {})


def _open_store(store_dir: str | Path) -> dict:
    """The store's attributes, or a one-sentence ReportError when it is not a store."""
    path = Path(store_dir)
    if not is_tracking_store(path):
        raise ReportError(f"{path} is not a spacrq tracking store (no zarr.json marked "
                          "spacrq_tracking); pass a store folder, a runs.jsonl or a folder of stores")
    doc = json.loads((path / "zarr.json").read_text(encoding="utf-8"))
    return dict(doc.get("attributes") or {})


def _damaged(path: Path, name: str, exc: BaseException) -> ReportError:
    reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    return ReportError(f"the array {name!r} of tracking store {path} cannot be read ({reason}); "
                       "delete the store to start the task afresh")


def _read_one(path: Path, name: str) -> np.ndarray | None:
    """One whole array, raveled in C order (= spatial id order); None when the store lacks it.

    Read with the engine's own zarr v3 reader (no zarr import for the stores
    the engine writes; it hands any other codec to the zarr library).
    """
    from spacrq.blockwise import zarrlite

    if not (path / name / "zarr.json").is_file():
        return None
    try:
        return np.asarray(zarrlite.read_array(path / name)).ravel()
    except Exception as exc:  # damaged chunks or metadata come in many kinds
        raise _damaged(path, name, exc) from None


def _read_arrays(path: Path, names: Sequence[str], size: int | None = None) -> dict[str, np.ndarray | None]:
    """Whole arrays by name, read side by side (decompression releases the GIL).

    With ``size``, each array present must cover that many blocks — the grid.
    """
    names = list(dict.fromkeys(names))
    with ThreadPoolExecutor(max_workers=max(1, min(len(names), os.cpu_count() or 2))) as pool:
        arrays = dict(zip(names, pool.map(lambda n: _read_one(path, n), names)))
    for name, a in arrays.items():
        if size is not None and a is not None and a.size != size:
            raise ReportError(f"the array {name!r} of tracking store {path} holds {a.size} blocks "
                              f"where the grid has {size}; delete the store to start the task afresh")
    return arrays


def _grid_shape(path: Path, attrs: dict) -> tuple[int, ...]:
    shape = (attrs.get("geometry") or {}).get("grid_shape")
    if shape:
        return tuple(int(s) for s in shape)
    try:
        doc = json.loads((path / "done" / "zarr.json").read_text(encoding="utf-8"))
        return tuple(int(s) for s in doc["shape"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _damaged(path, "done", exc) from None


def _run_start(last: TaskReport | None, progress: dict) -> tuple[float | None, bool]:
    """When the run the store describes started, and whether ``last`` is that run.

    A run still going (or one that died before writing its report line) has
    a progress snapshot that started after the last report line's run ended;
    its blocks are the ones returned since that snapshot's start.
    """
    live = progress.get("started_at")
    live = float(live) if isinstance(live, (int, float)) and not isinstance(live, bool) else None
    if last is not None and last.started_at > 0:
        ended = max(last.finished_at, last.started_at + 1e-3)
        if live is not None and live >= ended:
            return live, False
        return last.started_at, True
    return live, False


def report_from_store(store_dir: str | Path) -> TaskReport:
    """The report of the store's latest run, rebuilt from its arrays (vectorised, whole arrays).

    The blocks of the run are those returned since it started (from the last
    ``runs.jsonl`` line, or the live ``progress.json`` when a newer run is
    going); blocks done before it are counted as skipped.  Round trip is
    ``returned_at - sent_at``; completion order is ``argsort(returned_at)``.
    When the last report line is that run's, its block counts (the engine's
    own account, orphans included) and worker records are used; for a run
    still going, workers are built from the store (blocks and compute per
    worker; idle and lifecycle are not in the store).
    """
    path = Path(store_dir)
    attrs = _open_store(path)
    task_id = str(attrs.get("task_id") or path.name)
    last = read_last_run(runs_file(path))
    if last is not None:
        last.store = path
    progress = read_progress(path / PROGRESS_FILE) or {}
    start, last_is_run = _run_start(last, progress)
    line = last if last is not None and last_is_run else None

    # every array in one batch, read side by side; worker ids only when no line has the workers
    names = ["done", "failures", "sent_at", "returned_at", *_FLOATS[:2], *_AMOUNTS]
    a = _read_arrays(path, names + ([] if line is not None else ["worker_id"]))
    if a["done"] is None:
        raise ReportError(f"the tracking store {path} has no 'done' array; "
                          "delete it to start the task afresh")
    done = a["done"].astype(bool, copy=False)
    for name, values in a.items():
        if values is not None and values.size != done.size:
            raise ReportError(f"the array {name!r} of tracking store {path} holds {values.size} "
                              f"blocks where the grid has {done.size}; delete the store to start "
                              "the task afresh")
    failures = np.zeros(done.shape, np.int64) if a["failures"] is None else a["failures"].astype(np.int64)
    returned = a["returned_at"]
    if returned is None:
        # no per-block timing in the store: the report line is the best account there is
        if line is not None:
            line.tracked = True
            return line
        recorded = done | (failures > 0)
        return TaskReport(task_id, BlockSummary(count=int(recorded.sum()),
                                                failures=int(failures.sum())),
                          tracked=True, store=path)

    returned = returned.astype(np.float64, copy=False)
    in_run = np.isfinite(returned)
    if start is not None:
        in_run &= returned >= start
        skipped_mask = done & ~in_run
    else:
        skipped_mask = np.zeros_like(done)
    idx = np.flatnonzero(in_run)
    order = idx[np.argsort(returned[idx])]  # ties (same clock tick) have no order to keep
    sent = a["sent_at"]

    def run_part(name: str) -> np.ndarray | None:
        return None if a[name] is None else a[name][order]

    blocks = summarize_blocks(
        count=line.blocks.count if line else int((done | in_run | (failures > 0)).sum()),
        skipped=line.blocks.skipped if line else int(skipped_mask.sum()),
        failures=line.blocks.failures if line else int(failures[~skipped_mask].sum()),
        round_trip=returned[order] - sent[order] if sent is not None else np.empty(0),
        wall=run_part("wall_seconds"), cpu=run_part("cpu_seconds"),
        peak_rss=run_part("peak_rss_bytes"), io_read=run_part("io_read_bytes"),
        io_write=run_part("io_write_bytes"),
    )
    if line is not None:
        return TaskReport(task_id, blocks, line.workers, line.started_at, line.finished_at,
                          tracked=True, store=path, outcome=line.outcome)
    workers = _workers_from_store(a["worker_id"], order, done, a["wall_seconds"])
    if start is None:
        start = float(np.nanmin(sent[order])) if sent is not None and order.size else 0.0
    finished = float(returned[order[-1]]) if order.size else start
    return TaskReport(task_id, blocks, workers, start, finished, tracked=True, store=path,
                      outcome=_live_outcome(progress) if progress.get("started_at") == start else None)


def _live_outcome(progress: dict) -> dict | None:
    """The state and counts of a run with no report line yet, from its progress snapshot."""
    state = progress.get("state")
    if not isinstance(state, str):
        return None
    task = progress.get("task") if isinstance(progress.get("task"), dict) else {}
    counts = {k: task[k] for k in ("total", "done", "skipped", "failed", "orphaned")
              if isinstance(task.get(k), int) and not isinstance(task.get(k), bool)}
    return {"state": state, "run_id": progress.get("run_id"), **counts}


def _workers_from_store(worker_ids: np.ndarray | None, order: np.ndarray, done: np.ndarray,
                        wall: np.ndarray | None) -> WorkerSummary:
    """Per-worker blocks and compute of a run with no report line yet, from the store."""
    if worker_ids is None or order.size == 0:
        return WorkerSummary()
    ids = worker_ids[order].astype(np.int64)
    ok = done[order]
    walls = wall[order] if wall is not None else None
    records = []
    for wid in np.unique(ids[ids >= 0]):  # a handful of workers: one vectorised pass each
        mine = ids == wid
        n_ok = int((mine & ok).sum())
        compute = Stat.of(walls[mine]) if walls is not None else Stat()
        records.append(WorkerRecord(int(wid), blocks_ok=n_ok, blocks_failed=int(mine.sum()) - n_ok,
                                    compute=compute))
    return summarize_workers(records, unmanaged_clients=0)


# -- drill-down ---------------------------------------------------------------------

def _coord_of(which: Any, grid: tuple[int, ...], path: Path) -> tuple[int, ...]:
    """A grid coordinate or spatial id → grid coordinate, or a one-sentence ReportError."""
    total = int(np.prod(grid)) if grid else 0
    if isinstance(which, (int, np.integer)) and not isinstance(which, bool):
        sid = int(which)
        if not 0 <= sid < total:
            raise ReportError(f"block {sid} is outside the task's {total:,} blocks in {path}; "
                              f"spatial ids run from 0 to {total - 1}")
        return tuple(int(c) for c in np.unravel_index(sid, grid))
    try:
        coord = tuple(int(c) for c in which)
    except (TypeError, ValueError):
        raise ReportError(f"block {which!r} is neither a grid coordinate nor a spatial id; "
                          "give e.g. (1, 2) or 17") from None
    if len(coord) != len(grid) or any(not 0 <= c < s for c, s in zip(coord, grid)):
        raise ReportError(f"block {coord} is outside the block grid {grid} of {path}; "
                          f"give {len(grid)} coordinates each below the grid size")
    return coord


def _opt(value: Any, missing: Any) -> Any:
    """A store entry as a Python value, None where it holds its 'never recorded' fill."""
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if missing is not None and value == missing:
        return None
    return value


def _block_stats(values: dict) -> BlockStats | None:
    """The worker's figures for one block, or None when it measured none of them."""
    figures = (_opt(values.get("wall_seconds"), None), _opt(values.get("cpu_seconds"), None),
               _opt(values.get("peak_rss_bytes"), -1), _opt(values.get("io_read_bytes"), -1),
               _opt(values.get("io_write_bytes"), -1))
    if figures == (None, None, None, None, None):
        return None
    return BlockStats(*figures)


_BLOCK_ARRAYS = ("done", "failures", "worker_id", *_FLOATS, *_AMOUNTS)


def block(store_dir: str | Path, which: int | Sequence[int]) -> BlockRecord:
    """One block's record, by grid coordinate (tuple) or spatial id (int), read from the store.

    Reads one element of each array (one chunk each), so it is quick on any grid size.
    """
    path = Path(store_dir)
    attrs = _open_store(path)
    grid = _grid_shape(path, attrs)
    coord = _coord_of(which, grid, path)
    import zarr  # one element of each array: zarr reads just the chunk holding it

    values = {}
    for name in _BLOCK_ARRAYS:
        if not (path / name / "zarr.json").is_file():
            values[name] = None
            continue
        try:
            values[name] = np.asarray(zarr.open_array(str(path / name), mode="r")[coord]).item()
        except Exception as exc:
            raise _damaged(path, name, exc) from None
    sid = int(np.ravel_multi_index(coord, grid))
    return _record(str(attrs.get("task_id") or path.name), sid, coord, values)


def _record(task_id: str, sid: int, coord: Sequence[int], values: dict) -> BlockRecord:
    """A BlockRecord from one block's store entries (plain Python values)."""
    wid = _opt(values.get("worker_id"), -1)
    return BlockRecord(
        block_id=(task_id, sid), coord=tuple(coord),
        done=bool(values.get("done")),
        failures=int(values.get("failures") or 0),
        stats=_block_stats(values), worker_id=None if wid is None else int(wid),
        sent_at=_opt(values.get("sent_at"), None), returned_at=_opt(values.get("returned_at"), None),
    )


def block_columns(store_dir: str | Path, worker: int | None = None) -> dict[str, np.ndarray]:
    """The recorded blocks (done, or with failures) as columns, sorted by spatial id.

    ``{"spatial_id", "coord" (n × axes), "done", "failures", "worker_id",
    "wall_seconds", …}`` — numpy arrays with the store's fills kept (NaN,
    -1) — for a table or chart of many blocks without one object each.
    ``worker`` keeps only that worker's blocks.  Arrays the store does not
    hold (no resource tracking) are absent.
    """
    path = Path(store_dir)
    attrs = _open_store(path)
    grid = _grid_shape(path, attrs)
    arrays = _read_arrays(path, _BLOCK_ARRAYS, size=math.prod(grid))
    if arrays["done"] is None:
        raise ReportError(f"the tracking store {path} has no 'done' array; "
                          "delete it to start the task afresh")
    keep = arrays["done"].astype(bool)
    if arrays["failures"] is not None:
        keep = keep | (arrays["failures"] > 0)
    if worker is not None:
        ids = arrays["worker_id"]
        keep = keep & (ids == int(worker)) if ids is not None else np.zeros_like(keep)
    sids = np.flatnonzero(keep)
    out = {"spatial_id": sids,
           "coord": np.stack(np.unravel_index(sids, grid), axis=1).astype(np.int64)}
    out.update({k: v[sids] for k, v in arrays.items() if v is not None})
    out["task_id"] = np.asarray(str(attrs.get("task_id") or path.name))
    return out


def block_records(store_dir: str | Path, worker: int | None = None) -> list[BlockRecord]:
    """Every block the store has recorded (done, or with failures), sorted by spatial id.

    ``worker`` keeps only that worker's blocks — the drill-down from a worker
    row to its blocks.  One object per block: for hundreds of thousands of
    blocks, :func:`block_columns` gives the same as arrays.
    """
    cols = block_columns(store_dir, worker=worker)
    task_id = str(cols.pop("task_id"))
    sids = cols.pop("spatial_id").tolist()
    coords = [tuple(c) for c in cols.pop("coord").tolist()]
    names = list(cols)
    rows = zip(*(cols[k].tolist() for k in names)) if names else iter(())
    return [_record(task_id, sid, coord, dict(zip(names, row)))
            for sid, coord, row in zip(sids, coords, rows)]
