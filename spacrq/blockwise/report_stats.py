"""The measured figures of a run: :class:`Stat` and the block and worker summaries built from it.

The engine calls the builders here as a run goes (:meth:`Stat.of`,
:func:`summarize_blocks`, :func:`summarize_workers`); the report, the CLI and
the window only read the results.  Everything is vectorised over whole
arrays, so a million blocks cost milliseconds, and a figure nobody measured
is an empty Stat (``—``), never ``0``.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Sequence

import numpy as np

from spacrq.blockwise.report_format import format_value, unit_scale

__all__ = ["EXIT_KINDS", "Stat", "trend_slope_ms", "BlockSummary", "block_overhead", "summarize_blocks",
           "WorkerRecord", "WorkerSummary", "summarize_workers"]

#: the order exits are listed in; kinds the engine invents later follow these
EXIT_KINDS = ("clean", "error", "timeout", "interrupted", "crashed")


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
    on disk); ``"total"`` is accepted on reading.  Frozen, so one empty Stat
    safely serves as every record's default.
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
            return format_value(self.mean, unit)
        factor, name, digits = unit_scale(self.mean, unit)
        return f"{self.mean * factor:.{digits}f} ± {self.std * factor:.{digits}f} {name}".rstrip()

    def cells(self, unit: str = "s", *, additive: bool = True) -> list[str]:
        """mean, std, min, max, total as text for a table row; ``—`` in each when empty.

        ``additive=False`` for a figure whose sum means nothing (the peak RSS of
        a million blocks does not add up to terabytes of memory): its total is ``—``.
        """
        if not self:
            return ["—"] * 5
        factor, name, digits = unit_scale(self.mean, unit)
        std = f"{self.std * factor:.{digits}f} {name}".rstrip()  # in the mean's unit
        total = format_value(self.total, unit) if additive else "—"
        return [format_value(self.mean, unit), std,
                *(format_value(v, unit) for v in (self.min, self.max)), total]

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


# -- records made of Stats ---------------------------------------------------------
# BlockSummary, WorkerRecord and WorkerSummary hold Stats beside plain figures;
# they all travel as JSON the same way, field by field in declaration order.

def _stats_from_dict(cls: type, d: dict) -> dict[str, Stat]:
    """The Stat fields of record class ``cls`` read back from its JSON shape ``d``."""
    return {f.name: Stat.from_dict(d.get(f.name))
            for f in fields(cls) if f.type in ("Stat", Stat)}


def _as_dict(record: Any) -> dict:
    """A record's fields in declaration order, each Stat in its JSON shape."""
    out = {}
    for f in fields(record):
        value = getattr(record, f.name)
        out[f.name] = value.to_dict() if isinstance(value, Stat) else value
    return out


# -- blocks -------------------------------------------------------------------

@dataclass(frozen=True)
class BlockSummary:
    """Per-block figures of one task over one run.

    ``round_trip`` (dispatch → return, stamped by the scheduler) is there for
    every distributed block, tracked or not.  ``wall``, ``cpu``, ``peak_rss``,
    ``io_read`` and ``io_write`` are measured inside the worker and stay empty
    without resource tracking (``has_stats`` False).  ``queued`` is the time
    a block spent waiting rather than running: in its worker behind the
    batch sent ahead of it (batches go two deep so a worker never waits for
    the scheduler), behind its batch-mates, its result held until its batch
    was reported, and the batch-mates' share of the one message that
    carried them.  ``overhead`` is what is left, the block's share of the
    scheduler's and the pipe's time: round trip minus queued minus wall
    (minus wall alone where queued was not measured, e.g. on dask).
    ``count`` includes the ``skipped`` blocks (done in an earlier run), which
    contribute no timing samples; ``failures`` counts failed attempts.
    """

    count: int = 0
    skipped: int = 0
    failures: int = 0
    has_stats: bool = False
    round_trip: Stat = Stat()
    wall: Stat = Stat()
    cpu: Stat = Stat()
    peak_rss: Stat = Stat()
    io_read: Stat = Stat()
    io_write: Stat = Stat()
    queued: Stat = Stat()
    overhead: Stat = Stat()
    trend_slope_ms: float = 0.0

    @classmethod
    def from_dict(cls, d: Any) -> "BlockSummary":
        d = d if isinstance(d, dict) else {}
        return cls(
            count=int(d.get("count", 0)),
            skipped=int(d.get("skipped", 0)),
            failures=int(d.get("failures", 0)),
            has_stats=bool(d.get("has_stats", False)),
            trend_slope_ms=float(d.get("trend_slope_ms", 0.0)),
            **_stats_from_dict(cls, d),
        )

    def to_dict(self) -> dict:
        return _as_dict(self)


def _measured_amounts(values: Any) -> np.ndarray:
    """Byte counts with the store's ``-1`` (never measured) left out, as float64."""
    a = np.asarray(values, dtype=np.float64).ravel()
    return np.where(a >= 0, a, np.nan)


def block_overhead(round_trip: Any, wall: Any, queued: Any = None) -> np.ndarray:
    """Per block, the scheduler's and the pipe's cost: round trip − queued − wall.

    Where a block's ``queued`` was not measured (NaN, or no array at all) it
    counts as 0, so the figure falls back to round trip − wall; NaN where
    the round trip or the wall is missing.
    """
    out = np.asarray(round_trip, dtype=np.float64).ravel() - np.asarray(wall, dtype=np.float64).ravel()
    if queued is not None:
        q = np.asarray(queued, dtype=np.float64).ravel()
        if q.size == out.size:
            out -= np.where(np.isfinite(q), q, 0.0)
    return out


def summarize_blocks(*, count: int, skipped: int, failures: int, round_trip: Any,
                     wall: Any = None, cpu: Any = None, peak_rss: Any = None,
                     io_read: Any = None, io_write: Any = None, queued: Any = None) -> BlockSummary:
    """The per-block summary of one run from per-block arrays.

    The arrays hold one entry per block that ran this run, aligned with each
    other and **in completion order** (the trend is read from ``wall`` in that
    order).  NaN marks a figure not measured for a block, as does a negative
    byte count (the tracking store's ``-1`` fill).  Passing ``wall`` means the
    run had resource tracking (``has_stats``); ``overhead`` is
    :func:`block_overhead` over the blocks that have a round trip and a wall;
    ``queued`` (seconds each block waited in its worker) is optional.
    """
    rt = np.asarray(round_trip, dtype=np.float64).ravel()
    q = Stat.of(queued) if queued is not None else Stat()
    if wall is None:
        return BlockSummary(count=int(count), skipped=int(skipped), failures=int(failures),
                            round_trip=Stat.of(rt), queued=q)
    w = np.asarray(wall, dtype=np.float64).ravel()
    overhead = Stat()
    if rt.size == w.size:
        overhead = Stat.of(block_overhead(rt, w, queued))  # NaN wherever either is missing
    elif rt.size:
        raise ValueError(f"round_trip has {rt.size} blocks but wall has {w.size}; "
                         "pass the arrays aligned per block")
    return BlockSummary(
        count=int(count), skipped=int(skipped), failures=int(failures), has_stats=True,
        round_trip=Stat.of(rt), wall=Stat.of(w), queued=q,
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
    idle: Stat = Stat()
    compute: Stat = Stat()
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
            final_wait=_opt_float(d.get("final_wait")),
            teardown=_opt_float(d.get("teardown")),
            exit=d.get("exit"),
            **_stats_from_dict(cls, d),
        )

    def to_dict(self) -> dict:
        return _as_dict(self)


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
    startup: Stat = Stat()
    idle: Stat = Stat()
    compute: Stat = Stat()
    teardown: Stat = Stat()
    exits: dict = field(default_factory=dict)
    by_id: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Any) -> "WorkerSummary":
        d = d if isinstance(d, dict) else {}
        rows = [WorkerRecord.from_dict(r) for r in d.get("by_id") or [] if isinstance(r, dict)]
        return cls(
            count=int(d.get("count", 0)),
            unmanaged_clients=int(d.get("unmanaged_clients", 0)),
            exits={str(k): int(v) for k, v in (d.get("exits") or {}).items()},
            by_id={r.worker_id: r for r in rows},
            **_stats_from_dict(cls, d),
        )

    def to_dict(self) -> dict:
        return {**_as_dict(self), "exits": dict(self.exits),
                "by_id": [r.to_dict() for r in self.by_id.values()]}


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
