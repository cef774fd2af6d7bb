"""What the pane reads from a tracking store itself: block counts and drill-down rows.

These run on the poller's thread.  Whole arrays are read through
:func:`~spacrq.blockwise.report_store.read_store_arrays` — the engine's own
zarr v3 reader, several arrays side by side — the same reader ``spacrq
report`` uses, so the pane and the CLI never disagree about a store.  A store
that cannot be read is a :class:`~spacrq.runfiles.RunFileError` whose one
sentence names the fix.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from spacrq.blockwise import zarrlite
from spacrq.blockwise.report import ReportError, format_bytes, format_seconds
from spacrq.blockwise.report import block as report_block
from spacrq.blockwise.report_store import grid_shape, read_store_arrays
from spacrq.blockwise.run_state import durable_counts
from spacrq.blockwise.watch_tables import NOT_MEASURED, format_when
from spacrq.runfiles import RunFileError

__all__ = ["MAX_WORKER_BLOCKS", "store_counts", "block_detail", "worker_blocks"]

#: at most this many blocks are listed when drilling into one worker
MAX_WORKER_BLOCKS = 5000

#: the columns of a worker's block list, in the order its rows show them
_WORKER_BLOCK_ARRAYS = ("wall_seconds", "cpu_seconds", "peak_rss_bytes", "returned_at", "failures")


def _store_attrs(store_dir: Path) -> dict:
    """The store group's attributes, or a RunFileError with one sentence."""
    try:
        return zarrlite.read_group_attrs(store_dir)
    except zarrlite.ZarrFormatError as exc:
        raise RunFileError(f"the tracking store {store_dir} could not be opened ({exc}); "
                           "delete it to start the task afresh") from None


def _arrays(store_dir: Path, names) -> dict[str, np.ndarray | None]:
    """Whole arrays by name (None where the store lacks one), or a RunFileError."""
    try:
        return read_store_arrays(store_dir, names)
    except ReportError as exc:
        raise RunFileError(str(exc)) from None


def store_counts(store_dir: Path) -> dict:
    """Blocks done, failed (not done, with failures) and in total, from the store's arrays."""
    _store_attrs(store_dir)
    try:  # the durable marks on disk, counted as `spacrq report` counts them
        counts = durable_counts(store_dir)
    except ReportError as exc:
        raise RunFileError(str(exc)) from None
    return {k: counts[k] for k in ("done", "failed", "total")}


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
    attrs = _store_attrs(store_dir)
    a = _arrays(store_dir, ("worker_id", *_WORKER_BLOCK_ARRAYS))  # one batch, side by side
    wid = a["worker_id"]
    if wid is None:
        return {"worker_id": worker_id, "rows": [], "total": 0,
                "note": "this store does not record which worker ran each block: " + NOT_MEASURED}
    try:
        shape = grid_shape(store_dir, attrs)
    except ReportError as exc:
        raise RunFileError(str(exc)) from None
    ids = np.flatnonzero(wid == int(worker_id))
    cols = {name: a[name][ids] for name in _WORKER_BLOCK_ARRAYS if a[name] is not None}
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
    lists = {k: v.tolist() for k, v in cols.items()}
    rows = []
    for i, (bid, coord) in enumerate(zip(ids.tolist(), coords.tolist())):
        cells = [str(bid), "(" + ", ".join(str(c) for c in coord) + ")"]
        cells += [fmt[n](lists[n][i]) if n in lists else "—" for n in _WORKER_BLOCK_ARRAYS]
        rows.append({"key": bid, "cells": cells})
    note = f"showing the last {limit:,} of {total:,} blocks" if total > limit else ""
    if not total:
        note = f"worker {worker_id} has no block recorded in the tracking store"
    return {"worker_id": worker_id, "rows": rows, "total": total, "note": note}
