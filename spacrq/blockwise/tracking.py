"""The tracking store: which blocks of a task are done, and what each cost.

One zarr v3 group per task, written by :mod:`spacrq.blockwise.zarrlite` (``<workspace>/runs/<task_id>/`` or
``Task.tracking_path``), one array per figure shaped like the block grid, a
block's entry at its C-order spatial id.  It is the durable truth of a run: a rerun skips what it
marks done, the Run Report drills into it, and executors are disposable
because nothing they hold matters once a result is recorded here.

Three rules:

* **Same layout or refuse.**  The group's attrs carry a hash of the grid
  geometry; a store written for other blocks would mark the wrong voxels done,
  so opening it for a different geometry fails with one sentence naming the
  folder and how to clear it.
* **Batched writes.**  The arrays live in memory during a run; completions
  mark their chunks dirty and :meth:`TrackingStore.flush` rewrites only dirty
  chunks, every couple of seconds and at the end.  Chunks hold ~64 k blocks,
  so 100 000 blocks cost a handful of chunk writes per flush, not 100 000.
* **Done is written last.**  A flush writes the figures and failure counts
  before the ``done`` array, and only blocks whose result arrived are ever
  set: a crash between writes can lose a done mark (the block is redone),
  never invent one.
"""
from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import numpy as np

from spacrq.blockwise import zarrlite
from spacrq.blockwise.grid import BlockGrid

__all__ = ["TrackingStore", "TrackingError", "LayoutMismatch", "STAT_ARRAYS", "CHUNK_BLOCKS"]

#: name -> (dtype, fill) of the arrays kept with resource tracking
STAT_ARRAYS: dict[str, tuple[str, Any]] = {
    "wall_seconds": ("float64", float("nan")),
    "cpu_seconds": ("float64", float("nan")),
    "peak_rss_bytes": ("int64", -1),
    "io_read_bytes": ("int64", -1),
    "io_write_bytes": ("int64", -1),
    "worker_id": ("int32", -1),
    "sent_at": ("float64", float("nan")),
    "returned_at": ("float64", float("nan")),
    # seconds the block waited in its worker (behind the batch ahead, its batch-mates, its
    # batch's report) and the worker's wait for it: they split the round trip honestly
    "queued_seconds": ("float64", float("nan")),
    "idle_seconds": ("float64", float("nan")),
}
BASE_ARRAYS: dict[str, tuple[str, Any]] = {"done": ("bool", False), "failures": ("int32", 0)}
ALL_ARRAYS = {**BASE_ARRAYS, **STAT_ARRAYS}
CHUNK_BLOCKS = 1 << 16


class TrackingError(RuntimeError):
    """The tracking store cannot be used; the message names the folder and the fix."""


def _layout_change(attrs: dict, grid: BlockGrid) -> str:
    """What differs between the store's block layout and ``grid``, in the operator's words."""
    then = attrs.get("geometry") if isinstance(attrs.get("geometry"), dict) else {}
    now = grid.geometry()
    if then.get("grid_shape") != now["grid_shape"]:
        return f"a grid of {then.get('grid_shape')} blocks then, {now['grid_shape']} now"
    for key, words in (("read_roi", "each block read"), ("write_roi", "each block wrote"),
                       ("total_roi", "the volume read was")):
        old, new = then.get(key), now[key]
        if old != new:
            shape = (old or {}).get("shape") if isinstance(old, dict) else old
            return (f"{words} {shape} voxels then and {new.get('shape')} now: the block "
                    "shape, context or operation changed")
    return "its layout record differs"


class LayoutMismatch(TrackingError):
    """The store was written for a different block layout."""


def chunk_shape(grid_shape: tuple[int, ...], limit: int = CHUNK_BLOCKS) -> tuple[int, ...]:
    """Chunks of at most ``limit`` blocks, halving the longest axis until they fit."""
    chunk = list(grid_shape)
    while math.prod(chunk) > limit:
        axis = max(range(len(chunk)), key=lambda i: chunk[i])
        chunk[axis] = -(-chunk[axis] // 2)
    return tuple(max(1, c) for c in chunk)


class TrackingStore:
    """A task's tracking store, held in memory while a run goes."""

    def __init__(self, path: Path, grid: BlockGrid, arrays: dict[str, np.ndarray]) -> None:
        self.path = path
        self.grid = grid
        self.arrays = arrays  # flat, C order, one entry per block
        self._dirty: list[np.ndarray] = []
        self._chunks = chunk_shape(grid.shape)
        self._writer: threading.Thread | None = None
        self._write_error: str | None = None

    # -- opening --------------------------------------------------------------
    @classmethod
    def open(cls, path, task_id: str, grid: BlockGrid, resource_tracking: bool,
             writes: str | None = None) -> "TrackingStore":
        """Open (or create) the store for ``grid``; TrackingError says why not and how to clear it.

        A store belongs to one task and, when ``writes`` names it, one output:
        its done marks say which blocks of *that* output exist, so another
        task's store, or this task's store kept for another output, is refused
        rather than every block skipped over an empty array.
        """
        path = Path(path)
        clear = (f"delete the folder {path} to start the task over, or give the task "
                 "another tracking_path")
        want = grid.layout_hash()
        try:
            if (path / "zarr.json").is_file():
                attrs = zarrlite.read_group_attrs(path)
                if attrs.get("spacrq_tracking") != 1:
                    raise TrackingError(f"{path} is a zarr group but not a spacrq tracking store; "
                                        f"{clear}")
                owner = attrs.get("task_id")
                if isinstance(owner, str) and owner != task_id:
                    raise TrackingError(f"tracking store {path} holds the blocks of task {owner!r}, "
                                        f"not of {task_id!r}; {clear}")
                if attrs.get("layout_hash") != want:
                    raise LayoutMismatch(f"tracking store {path} was written for a different "
                                         f"block layout ({_layout_change(attrs, grid)}); {clear}")
                wrote = attrs.get("writes")
                if isinstance(wrote, str) and writes and wrote != str(writes):
                    raise TrackingError(f"tracking store {path} holds the blocks done for the "
                                        f"output {wrote}, not for {writes}; {clear}")
            else:
                path.mkdir(parents=True, exist_ok=True)
                zarrlite.create_group(path, {"spacrq_tracking": 1, "task_id": task_id,
                                             "layout_hash": want, "geometry": grid.geometry(),
                                             **({"writes": str(writes)} if writes else {})})
            wanted = dict(BASE_ARRAYS)
            existing = {name for name in list(BASE_ARRAYS) + list(STAT_ARRAYS)
                        if (path / name / "zarr.json").is_file()}
            if resource_tracking or existing & set(STAT_ARRAYS):
                wanted.update(STAT_ARRAYS)
            arrays = {}
            chunks = chunk_shape(grid.shape)
            for name, (dtype, fill) in wanted.items():
                if name in existing:
                    data = zarrlite.read_array(path / name)
                    if tuple(data.shape) != grid.shape:
                        raise TrackingError(f"array {name!r} in {path} has shape {tuple(data.shape)}, "
                                            f"not the grid's {grid.shape}; {clear}")
                    arrays[name] = np.ascontiguousarray(data, dtype=dtype).reshape(-1).copy()
                else:
                    zarrlite.create_array(path / name, grid.shape, chunks, dtype, fill)
                    arrays[name] = np.full(grid.size, fill, dtype=dtype)
        except TrackingError:
            raise
        except Exception as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TrackingError(f"tracking store {path} cannot be read ({reason[:200]}); {clear}") from None
        return cls(path, grid, arrays)

    # -- recording -------------------------------------------------------------
    @property
    def has_stats(self) -> bool:
        return "wall_seconds" in self.arrays

    def done_mask(self) -> np.ndarray:
        return self.arrays["done"]

    def record(self, ids: np.ndarray, **columns: np.ndarray) -> None:
        """Set ``columns`` (array name -> values) for blocks ``ids``; marks chunks dirty."""
        for name, values in columns.items():
            target = self.arrays.get(name)
            if target is not None:
                target[ids] = values
        self._dirty.append(np.asarray(ids, dtype=np.int64))

    def add_failure(self, spatial_id: int) -> None:
        self.arrays["failures"][spatial_id] += 1
        self._dirty.append(np.asarray([spatial_id], dtype=np.int64))

    def flush(self, background: bool = False) -> int:
        """Write the dirty chunks (figures first, ``done`` last); returns how many.

        ``background=True`` copies the dirty chunks and writes them on a helper
        thread, so the scheduler keeps handing out blocks meanwhile; one write
        is in flight at a time and :meth:`close` waits for it.
        """
        if not self._dirty:
            return 0
        ids = np.unique(np.concatenate(self._dirty))
        self._dirty = []
        coords = np.stack(np.unravel_index(ids, self.grid.shape), axis=1)
        chunk_ids = np.unique(coords // np.asarray(self._chunks), axis=0)
        order = [n for n in self.arrays if n != "done"] + ["done"]
        shaped = {n: a.reshape(self.grid.shape) for n, a in self.arrays.items()}
        writes = []
        for chunk in chunk_ids:
            sel = tuple(slice(int(c) * k, min(n, (int(c) + 1) * k))
                        for c, k, n in zip(chunk, self._chunks, self.grid.shape))
            writes.append((sel, {name: shaped[name][sel].copy() for name in order}))
        self._wait_writer()
        if background:
            self._writer = threading.Thread(target=self._write, args=(order, writes),
                                            name="spacrq-tracking-flush", daemon=True)
            self._writer.start()
        else:
            self._write(order, writes)
        return len(chunk_ids)

    def _write(self, order: list[str], writes: list) -> None:
        try:
            for name in order:
                fill = ALL_ARRAYS[name][1]
                for sel, data in writes:
                    index = tuple(sl.start // k for sl, k in zip(sel, self._chunks))
                    zarrlite.write_chunk(self.path / name, index, data[name], self._chunks, fill)
        except Exception as exc:  # reported by close(); the next flush rewrites the chunks
            self._write_error = f"could not write tracking store {self.path}: {exc}"
            for sel, _ in writes:
                self._dirty.append(self._ids_of(sel))

    def _ids_of(self, sel) -> np.ndarray:
        return np.arange(self.grid.size).reshape(self.grid.shape)[sel].reshape(-1)

    def _wait_writer(self) -> None:
        writer = self._writer
        if writer is not None:
            writer.join()
            self._writer = None

    def close(self) -> str | None:
        """Write what is left and wait; the write error, if any, as one sentence."""
        self._wait_writer()
        self.flush()
        self._wait_writer()
        return self._write_error

    # -- reading back ------------------------------------------------------------
    def block_record(self, spatial_id: int) -> dict:
        """One block as the Run Report's BlockRecord wants it."""
        a = self.arrays
        i = int(spatial_id)
        stats = None
        if self.has_stats and not math.isnan(a["wall_seconds"][i]):
            stats = {"wall_seconds": float(a["wall_seconds"][i]), "cpu_seconds": float(a["cpu_seconds"][i]),
                     "peak_rss_bytes": int(a["peak_rss_bytes"][i]),
                     "io_read_bytes": int(a["io_read_bytes"][i]),
                     "io_write_bytes": int(a["io_write_bytes"][i])}

        def opt(name, cast):
            if name not in a:
                return None
            v = a[name][i]
            if cast is float:
                return None if math.isnan(v) else float(v)
            return None if v < 0 else int(v)

        return {"spatial_id": i, "coord": self.grid.coord_of(i), "done": bool(a["done"][i]),
                "failures": int(a["failures"][i]), "stats": stats,
                "worker_id": opt("worker_id", int), "sent_at": opt("sent_at", float),
                "returned_at": opt("returned_at", float)}
