"""Reading a task's tracking store: the latest run's report rebuilt from its arrays, and
single blocks for drill-down.

The store holds one entry per block in arrays shaped like the block grid; a
block's spatial id is its C-order index.
Whole arrays are read with the engine's own zarr v3 reader, side by side,
and everything after that is vectorised, so a report of a million-block
task takes well under a second.  Every failure is a :class:`ReportError`
whose one sentence names the fix.

Every read of a store's blocks is a function here, never a method of a
report object: the report objects stay plain data any process can hold.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from spacrq.blockwise import zarrlite
from spacrq.blockwise.report_model import (BlockOutside, BlockRecord, BlockStats, ReportError,
                                           TaskReport)
from spacrq.blockwise.report_runs import RunsTail, read_store_attributes, runs_file
from spacrq.blockwise.run_state import durable_outcome, run_state
from spacrq.blockwise.report_stats import (BlockSummary, Stat, WorkerRecord, WorkerSummary,
                                           summarize_blocks, summarize_workers)
from spacrq.runfiles import PROGRESS_FILE, RunFileError, read_json_checked

__all__ = ["report_from_store", "block", "block_columns", "block_records", "read_store_arrays",
           "grid_shape", "store_attrs", "durable_counts", "worker_block_columns"]

_FLOATS = ("wall_seconds", "cpu_seconds", "sent_at", "returned_at")
_AMOUNTS = ("peak_rss_bytes", "io_read_bytes", "io_write_bytes")


def _open_store(store_dir: str | Path) -> dict:
    """The store's attributes, or a one-sentence ReportError when it is not a store."""
    path = Path(store_dir)
    attrs, problem = read_store_attributes(path)
    if problem is not None:
        raise ReportError(f"the tracking store {path} cannot be opened: {problem}")
    if attrs is None:
        raise ReportError(f"{path} is not a spacrq tracking store (no zarr.json marked "
                          "spacrq_tracking); pass a store folder, a runs.jsonl or a folder of stores")
    return dict(attrs)


def _damaged(path: Path, name: str, exc: BaseException) -> ReportError:
    reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    return ReportError(f"the array {name!r} of tracking store {path} cannot be read ({reason}); "
                       "delete the store to start the task afresh")


def _read_one(path: Path, name: str) -> np.ndarray | None:
    """One whole array, raveled in C order (= spatial id order); None when the store lacks it.

    Read with the engine's own zarr v3 reader (no zarr import for the stores
    the engine writes; it hands any other codec to the zarr library).
    """
    if not (path / name / "zarr.json").is_file():
        return None
    _refuse_odd_files(path, name)
    try:
        values = np.asarray(zarrlite.read_array(path / name)).ravel()
    except Exception as exc:  # damaged chunks or metadata come in many kinds
        raise _damaged(path, name, exc) from None
    if values.dtype.kind not in _NUMERIC_KINDS:
        raise ReportError(f"the array {name!r} of tracking store {path} holds {values.dtype} "
                          "values where numbers belong; delete the store to start the task afresh")
    return values


#: the kinds of numpy dtype a tracking array may have: bool, signed, unsigned, float
_NUMERIC_KINDS = "biuf"


def _refuse_odd_files(path: Path, name: str) -> None:
    """A ReportError when the array's folder holds anything but files and folders.

    Reading a chunk that is a FIFO (or a device) blocks until someone writes
    to it, which would leave the reader stuck for good; the folder's listing
    says what each entry is without opening any of them.
    """
    pending = [path / name]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            raise _damaged(path, name, exc) from None
        for entry in entries:
            try:
                if entry.is_dir():
                    pending.append(Path(entry.path))
                    continue
                regular = entry.is_file()
            except OSError:
                regular = False
            if not regular:
                raise ReportError(f"the array {name!r} of tracking store {path} holds "
                                  f"{entry.path}, which is not a regular file (a pipe, device or "
                                  "broken link); remove it, or delete the store to start the "
                                  "task afresh")


def read_store_arrays(path: Path, names: Sequence[str],
                      size: int | None = None) -> dict[str, np.ndarray | None]:
    """Whole arrays by name, read side by side (decompression releases the GIL).

    With ``size``, each array present must cover that many blocks — the grid.
    """
    names = list(dict.fromkeys(names))
    with ThreadPoolExecutor(max_workers=max(1, min(len(names), os.cpu_count() or 2))) as pool:
        arrays = dict(zip(names, pool.map(lambda n: _read_one(path, n), names)))
    _check_sizes(path, arrays, size)
    return arrays


def _check_sizes(path: Path, arrays: dict[str, np.ndarray | None], size: int | None) -> None:
    """Every array present covers ``size`` blocks (the grid), else a one-sentence ReportError.

    Without ``size`` the arrays must at least agree with each other: every
    one is indexed by the same spatial ids, so one of another length would
    index past its end.
    """
    present = [(name, a) for name, a in arrays.items() if a is not None]
    if size is None and present:
        size = present[0][1].size
    for name, a in present:
        if a.size != size:
            raise ReportError(f"the array {name!r} of tracking store {path} holds {a.size} blocks "
                              f"where the grid has {size}; delete the store to start the task afresh")


def grid_shape(path: Path, attrs: dict) -> tuple[int, ...]:
    """The block grid's shape: from the store's geometry, else from the ``done`` array's shape."""
    geometry = attrs.get("geometry")
    shape = geometry.get("grid_shape") if isinstance(geometry, dict) else None
    if shape:
        if (isinstance(shape, list) and 0 < len(shape) <= 64
                and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape)):
            return tuple(shape)
        raise ReportError(f"the tracking store {path} gives the block grid {str(shape)[:60]}, "
                          "which is not one whole number per axis; delete the store to start "
                          "the task afresh")
    try:
        return tuple(zarrlite.array_meta(path / "done")["shape"])
    except zarrlite.ZarrFormatError as exc:
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


def report_from_store(store_dir: str | Path, notes: list[str] | None = None) -> TaskReport:
    """The report of the store's latest run, rebuilt from its arrays (vectorised, whole arrays).

    The blocks of the run are those returned since it started (from the last
    ``runs.jsonl`` line, or the live ``progress.json`` when a newer run is
    going); blocks done before it are counted as skipped.  Round trip is
    ``returned_at - sent_at``; completion order is ``argsort(returned_at)``.
    When the last report line is that run's, its block counts (the engine's
    own account, orphans included) and worker records are used; for a run
    still going, workers are built from the store (blocks and compute per
    worker; idle and lifecycle are not in the store).

    A run with no report line is ``running`` only while its scheduler lives
    (:func:`~spacrq.blockwise.run_state.run_state`, the pane's rule too);
    otherwise its counts are the done marks on disk, never the scheduler's
    last in-memory count.  ``notes`` collects what could not be read and was
    passed over (a garbled ``progress.json``), one sentence each.
    """
    path = Path(store_dir)
    attrs = _open_store(path)
    task_id = str(attrs.get("task_id") or path.name)
    tail = RunsTail(runs_file(path))
    runs = tail.read()
    last = runs[-1] if runs else None
    if tail.unreadable and notes is not None:
        notes.append(tail.unreadable)
    if tail.bad_lines and notes is not None:
        why = f" (the last: {tail.last_problem})" if tail.last_problem else ""
        notes.append(f"{tail.bad_lines} damaged line(s) in {runs_file(path)} were skipped{why}")
    if last is not None:
        last.store = path
    progress, problem = read_json_checked(path / PROGRESS_FILE, None, expect=dict)
    if problem is not None and notes is not None:
        notes.append(f"{problem}; the store's own records are shown instead")
    progress = progress or {}
    start, last_is_run = _run_start(last, progress)
    line = last if last is not None and last_is_run else None

    # every array in one batch, read side by side; worker ids only when no line has the workers
    names = ["done", "failures", "sent_at", "returned_at", *_FLOATS[:2], *_AMOUNTS, "queued_seconds"]
    a = read_store_arrays(path, names + ([] if line is not None else ["worker_id"]))
    if a["done"] is None:
        raise ReportError(f"the tracking store {path} has no 'done' array; "
                          "delete it to start the task afresh")
    done = a["done"].astype(bool, copy=False)
    _check_sizes(path, a, done.size)
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
        io_write=run_part("io_write_bytes"), queued=run_part("queued_seconds"),
    )
    if line is not None:
        return TaskReport(task_id, blocks, line.workers, line.started_at, line.finished_at,
                          tracked=True, store=path, outcome=line.outcome)
    outcome = None
    if start is not None and progress.get("started_at") == start:
        outcome = _live_outcome(progress, a["done"], a["failures"], returned, start)
    # workers of a run whose scheduler is gone did not leave cleanly, whatever the store says
    gone = "interrupted" if (outcome or {}).get("state") == "interrupted" else None
    workers = _workers_from_store(a["worker_id"], order, done, a["wall_seconds"], exit=gone)
    if start is None:
        start = float(np.nanmin(sent[order])) if sent is not None and order.size else 0.0
    finished = float(returned[order[-1]]) if order.size else start
    return TaskReport(task_id, blocks, workers, start, finished, tracked=True, store=path,
                      outcome=outcome)


def _live_outcome(progress: dict, done: np.ndarray, failures: np.ndarray | None,
                  returned: np.ndarray, start: float | None) -> dict | None:
    """The state and counts of a run with no report line yet.

    While its scheduler lives, the snapshot's own counts (the run is going:
    they are the freshest); once it is gone, the done marks the store holds
    on disk, and ``orphaned`` only from a snapshot the run itself finished.
    """
    state = run_state(progress)
    if state is None:
        return None
    run_id = progress.get("run_id") if isinstance(progress.get("run_id"), str) else None
    task = progress.get("task") if isinstance(progress.get("task"), dict) else {}
    if state == "running":
        counts = {k: task[k] for k in ("total", "done", "skipped", "failed", "orphaned")
                  if isinstance(task.get(k), int) and not isinstance(task.get(k), bool)}
        return {"state": state, "run_id": run_id, **counts}
    durable = durable_outcome(done, failures, returned, start)
    durable["done"] -= durable["skipped"]
    if progress.get("state") != "running":  # the run wrote its own last snapshot
        orphaned = task.get("orphaned")
        if isinstance(orphaned, int) and not isinstance(orphaned, bool):
            durable["orphaned"] = orphaned
    return {"state": state, "run_id": run_id, **durable}


def _workers_from_store(worker_ids: np.ndarray | None, order: np.ndarray, done: np.ndarray,
                        wall: np.ndarray | None, exit: str | None = None) -> WorkerSummary:
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
                                    compute=compute, exit=exit))
    return summarize_workers(records, unmanaged_clients=0)


# -- drill-down ---------------------------------------------------------------------

def _coord_of(which: Any, grid: tuple[int, ...], path: Path) -> tuple[int, ...]:
    """A grid coordinate or spatial id → grid coordinate, or a one-sentence ReportError."""
    total = int(np.prod(grid)) if grid else 0
    if isinstance(which, (int, np.integer)) and not isinstance(which, bool):
        sid = int(which)
        if not 0 <= sid < total:
            raise BlockOutside(f"block {sid} is outside the task's {total:,} blocks in {path}; "
                              f"spatial ids run from 0 to {total - 1}")
        return tuple(int(c) for c in np.unravel_index(sid, grid))
    try:
        coord = tuple(int(c) for c in which)
    except (TypeError, ValueError):
        raise BlockOutside(f"block {which!r} is neither a grid coordinate nor a spatial id; "
                          "give e.g. (1, 2) or 17") from None
    if len(coord) != len(grid) or any(not 0 <= c < s for c, s in zip(coord, grid)):
        raise BlockOutside(f"block {coord} is outside the block grid {grid} of {path}; "
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
    grid = grid_shape(path, attrs)
    coord = _coord_of(which, grid, path)
    import zarr  # one element of each array: zarr reads just the chunk holding it

    values = {}
    for name in _BLOCK_ARRAYS:
        if not (path / name / "zarr.json").is_file():
            values[name] = None
            continue
        _refuse_odd_files(path, name)
        try:
            values[name] = np.asarray(zarr.open_array(str(path / name), mode="r")[coord]).item()
        except Exception as exc:
            raise _damaged(path, name, exc) from None
        if not isinstance(values[name], (bool, int, float)):
            raise ReportError(f"the array {name!r} of tracking store {path} holds "
                              f"{type(values[name]).__name__} values where numbers belong; "
                              "delete the store to start the task afresh")
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
    grid = grid_shape(path, attrs)
    arrays = read_store_arrays(path, _BLOCK_ARRAYS, size=math.prod(grid))
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


def store_attrs(store_dir: str | Path) -> dict:
    """The store group's attributes as the engine's reader sees them, or a one-sentence ReportError."""
    try:
        return zarrlite.read_group_attrs(Path(store_dir))
    except zarrlite.ZarrFormatError as exc:
        raise ReportError(f"the tracking store {store_dir} could not be opened ({exc}); "
                          "delete it to start the task afresh") from None


def durable_counts(store_dir: str | Path, started_at: float | None = None) -> dict:
    """:func:`~spacrq.blockwise.run_state.durable_outcome` of the store at ``store_dir``, read from disk.

    :raises ReportError: the store's arrays cannot be read (one sentence naming the fix).
    """
    path = Path(store_dir)
    names = ("done", "failures") + (("returned_at",) if started_at is not None else ())
    a = read_store_arrays(path, names)
    if a["done"] is None:
        raise ReportError(f"the tracking store {path} has no 'done' array; "
                          "delete it to start the task afresh")
    return durable_outcome(a["done"], a["failures"], a.get("returned_at"), started_at)


#: the figures of a worker's block list, in the order its rows show them
WORKER_BLOCK_ARRAYS = ("wall_seconds", "cpu_seconds", "peak_rss_bytes", "returned_at", "failures")


def worker_block_columns(store_dir: str | Path, worker_id: int, limit: int) -> dict | None:
    """The blocks one worker ran, in completion order (its last ``limit``), as columns.

    ``{"ids", "coords" (n × axes), "total", <figure>: array …}`` with the
    store's fills kept; None when the store does not record which worker ran
    each block.  One batch of whole-array reads and numpy selection, so a
    worker with half a million blocks costs one read, not half a million
    records.
    """
    path = Path(store_dir)
    attrs = store_attrs(path)
    shape = grid_shape(path, attrs)
    a = read_store_arrays(path, ("worker_id", *WORKER_BLOCK_ARRAYS), size=math.prod(shape))
    wid = a["worker_id"]
    if wid is None:
        return None
    ids = np.flatnonzero(wid == int(worker_id))
    cols = {name: a[name][ids] for name in WORKER_BLOCK_ARRAYS if a[name] is not None}
    if "returned_at" in cols:
        order = np.argsort(cols["returned_at"], kind="stable")
        ids, cols = ids[order], {k: v[order] for k, v in cols.items()}
    total = int(ids.size)
    if total > limit:
        ids, cols = ids[-limit:], {k: v[-limit:] for k, v in cols.items()}
    coords = (np.stack(np.unravel_index(ids, shape), axis=1) if total
              else np.empty((0, len(shape)), np.int64))
    return {"ids": ids, "coords": coords, "total": total, **cols}


def record_unreported_run(store_dir: str | Path) -> str:
    """Write down, as ``interrupted``, the store's latest run when it died before writing its
    ``runs.jsonl`` line; a sentence saying so, or '' when there was none.

    Called by a run taking the store over, before it publishes its own
    progress: afterwards the dead run's start is gone from ``progress.json``,
    and its blocks would read as the new run's "done before", so the history
    would leave out the night that died.  Never fatal: a store it cannot read
    is the new run's to refuse, in its own words.
    """
    from spacrq.blockwise.report_runs import append_run
    path = Path(store_dir)
    progress, _ = read_json_checked(path / PROGRESS_FILE, None, expect=dict)
    if not isinstance(progress, dict) or progress.get("state") != "running" \
            or run_state(progress) != "interrupted":
        return ""  # it ended and said so, never ran, or its scheduler still runs
    began = progress.get("started_at")
    if not isinstance(began, (int, float)) or isinstance(began, bool) or not math.isfinite(began):
        return ""
    try:
        report = report_from_store(path)
    except (ReportError, RunFileError, OSError, ValueError):
        return ""
    if report.outcome is None or abs(report.started_at - began) > 1e-6:
        # a store with no per-block times: the dead run's own last snapshot is its account
        task = progress.get("task") if isinstance(progress.get("task"), dict) else {}
        counts = {k: task[k] for k in ("total", "done", "skipped", "failed", "orphaned")
                  if isinstance(task.get(k), int) and not isinstance(task.get(k), bool)}
        written = progress.get("written_at")
        report.started_at = float(began)
        report.finished_at = max(float(began), float(written)) if isinstance(
            written, (int, float)) and not isinstance(written, bool) else float(began)
        report.blocks = BlockSummary(count=int(counts.get("done", 0)),
                                     failures=int(counts.get("failed", 0)))
        report.workers = WorkerSummary()
        report.outcome = {"state": "interrupted", "run_id": progress.get("run_id")
                          if isinstance(progress.get("run_id"), str) else None, **counts}
    runs = RunsTail(runs_file(path)).read()
    if any(abs(r.started_at - report.started_at) <= 1e-6 for r in runs):
        return ""
    report.outcome = dict(report.outcome or {}, ended="killed before it wrote its report line; "
                                                      "written down by the next run")
    try:
        append_run(runs_file(path), report)
    except (RunFileError, OSError, ValueError) as exc:
        return f"the run killed before it wrote its report line could not be written down ({exc})"
    return ("the last run of this task was killed before it wrote its report line; it is in "
            "runs.jsonl now, as interrupted")
