"""The block grid: how a task's volume is cut into blocks, and who waits for whom.

Blocks tile the *writable* region of ``total_roi`` — the part that has full
context around it — at the stride of ``write_roi``.  Block ``c`` (a grid
coordinate) writes ``write_roi`` shifted by ``total.offset + c * stride`` and
reads the same shift of ``read_roi``; ``context`` is what the read region
adds around the write region.  ``fit`` says what happens at the far edge when
the stride does not divide the writable region:

* ``valid``    — only whole blocks; a thin strip at the edge stays unwritten;
* ``overhang`` — boundary blocks reach past ``total_roi`` (the process
  function must cope with reading beyond the data);
* ``shrink``   — boundary blocks are clipped so they stay inside ``total_roi``.

A block is named by its C-order linear index in the grid (its spatial id),
the number the tracking store and the Run Report use.

Conflicts.  With ``read_write_conflict`` two blocks whose read and write
regions overlap must never run at once.  Blocks are coloured into *levels* by
their coordinate modulo ``m + 1`` per axis, where ``m`` is how many block
strides the context spans; two blocks of one level never overlap, and a block
waits for exactly its overlapping neighbours of lower levels (daisy's rule —
no barrier between levels, so the grid fills in as a wave).
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from spacrq.blockwise.roi import Roi, as_roi

# numpy (and typing) are imported inside the whole-grid methods only: a worker
# process needs just ``block()``, and importing numpy would add a quarter
# second to its start.  Annotations are strings (``from __future__``).

__all__ = ["Block", "BlockGrid", "FITS", "overlap_range"]

FITS = ("valid", "overhang", "shrink")


class Block:
    """One unit of work, as the process function sees it.

    A plain slotted class rather than a dataclass: a worker builds one per
    block, and for tiny blocks that construction is a measurable share of the
    per-block cost.
    """

    __slots__ = ("task_id", "spatial_id", "coord", "read_roi", "write_roi")

    def __init__(self, task_id: str, spatial_id: int, coord: tuple[int, ...], read_roi: Roi,
                 write_roi: Roi) -> None:
        self.task_id = task_id
        self.spatial_id = spatial_id
        self.coord = coord
        self.read_roi = read_roi
        self.write_roi = write_roi

    @property
    def block_id(self) -> tuple[str, int]:
        """daisy's spelling: ``(task_id, spatial_id)``."""
        return (self.task_id, self.spatial_id)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Block) and self.task_id == other.task_id
                and self.spatial_id == other.spatial_id and self.read_roi == other.read_roi
                and self.write_roi == other.write_roi)

    def __hash__(self) -> int:
        return hash((self.task_id, self.spatial_id))

    def __repr__(self) -> str:
        return (f"Block({self.task_id!r}, {self.spatial_id}, coord={self.coord}, "
                f"read={self.read_roi}, write={self.write_roi})")


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def overlap_range(lo: int, hi: int, first: int, size: int, stride: int, count: int) -> tuple[int, int]:
    """Grid indices ``i`` in ``[0, count)`` whose interval ``[first + i*stride,
    first + i*stride + size)`` overlaps ``[lo, hi)``; returned as ``(start, stop)``."""
    start = (lo - first - size) // stride + 1
    stop = _ceil_div(hi - first, stride)
    return max(0, start), min(count, stop)


class BlockGrid:
    """The blocks of one task (see the module docstring for the rules)."""

    def __init__(self, total_roi, read_roi, write_roi, fit: str = "valid",
                 read_write_conflict: bool = True) -> None:
        self.total_roi = as_roi(total_roi, "total_roi")
        self.read_roi = as_roi(read_roi, "read_roi")
        self.write_roi = as_roi(write_roi, "write_roi")
        if fit not in FITS:
            raise ValueError(f"fit must be one of {', '.join(FITS)}, not {fit!r}")
        self.fit = fit
        dims = self.total_roi.dims
        if self.read_roi.dims != dims or self.write_roi.dims != dims:
            raise ValueError("total_roi, read_roi and write_roi must have the same number of axes")
        if self.write_roi.empty():
            raise ValueError("write_roi must not be empty; give every axis a positive size")
        if not self.read_roi.contains(self.write_roi):
            raise ValueError(f"write_roi {self.write_roi} must lie inside read_roi {self.read_roi}; "
                             "the read region is the write region plus its context")
        self.stride = self.write_roi.shape
        self.context_before = tuple(w - r for w, r in zip(self.write_roi.offset, self.read_roi.offset))
        self.context_after = tuple(re - we for re, we in zip(self.read_roi.end, self.write_roi.end))
        # the first block's read region starts at total.offset + read_roi.offset
        self.origin = self.total_roi.offset
        self.writable = Roi(
            tuple(o + w for o, w in zip(self.origin, self.write_roi.offset)),
            tuple(max(0, t - ro - cb - ca) for t, ro, cb, ca in
                  zip(self.total_roi.shape, self.read_roi.offset, self.context_before,
                      self.context_after)),
        )
        shape = []
        for length, step in zip(self.writable.shape, self.stride):
            shape.append(length // step if fit == "valid" else _ceil_div(length, step))
        self.shape: tuple[int, ...] = tuple(shape)
        if any(n == 0 for n in self.shape):
            raise ValueError(
                f"total_roi {self.total_roi} is too small to hold one block that reads "
                f"{self.read_roi.shape}; make total_roi larger or the blocks smaller")
        self.size = math.prod(self.shape)
        self.read_write_conflict = bool(read_write_conflict)
        self.reach = tuple(
            max(_ceil_div(cb, s), _ceil_div(ca, s))
            for cb, ca, s in zip(self.context_before, self.context_after, self.stride))
        self.conflicts = self.read_write_conflict and any(self.reach)
        self._neighbours = self._neighbour_offsets() if self.conflicts else ()
        self._strides_c = tuple(math.prod(self.shape[i + 1:]) for i in range(dims))
        self._read_first = tuple(o + r for o, r in zip(self.origin, self.read_roi.offset))
        self._write_first = tuple(o + w for o, w in zip(self.origin, self.write_roi.offset))

    # -- identity ---------------------------------------------------------
    def geometry(self) -> dict:  # noqa: D401
        """What the tracking store records; equal geometries share a store."""
        return {"total_roi": self.total_roi.to_dict(), "read_roi": self.read_roi.to_dict(),
                "write_roi": self.write_roi.to_dict(), "grid_shape": list(self.shape),
                "fit": self.fit}

    def layout_hash(self) -> str:
        import hashlib
        import json
        text = json.dumps(self.geometry(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    # -- blocks -------------------------------------------------------------
    def coord_of(self, spatial_id: int) -> tuple[int, ...]:
        if len(self._strides_c) == 2:
            return divmod(int(spatial_id), self._strides_c[0])
        coord = []
        rest = int(spatial_id)
        for step in self._strides_c:
            q, rest = divmod(rest, step)
            coord.append(q)
        return tuple(coord)

    def id_of(self, coord) -> int:
        return int(sum(int(c) * s for c, s in zip(coord, self._strides_c)))

    def contains_coord(self, coord) -> bool:
        return len(coord) == len(self.shape) and all(0 <= c < n for c, n in zip(coord, self.shape))

    def rois(self, coord) -> tuple[Roi, Roi]:
        """``(read_roi, write_roi)`` of the block at ``coord``."""
        read_begin = tuple(b + c * s for b, c, s in zip(self._read_first, coord, self.stride))
        write_begin = tuple(b + c * s for b, c, s in zip(self._write_first, coord, self.stride))
        read = Roi._raw(read_begin, self.read_roi.shape)
        write = Roi._raw(write_begin, self.write_roi.shape)
        if self.fit == "shrink":
            write = write.intersect(self.writable)
            read = read.intersect(write.grow(self.context_before, self.context_after))
        return read, write

    def block(self, spatial_id: int, task_id: str = "") -> Block:
        coord = self.coord_of(spatial_id)
        read, write = self.rois(coord)
        return Block(task_id, spatial_id, coord, read, write)

    # -- conflicts within the task -------------------------------------------
    def level_of(self, coord) -> int:
        level = 0
        for c, r in zip(coord, self.reach):
            level = level * (r + 1) + c % (r + 1)
        return level

    def levels(self):
        """The level of every block, a numpy array in C order (all 0 when blocks never conflict)."""
        import numpy as np
        if not self.conflicts:
            return np.zeros(self.size, dtype=np.int32)
        idx = np.indices(self.shape).reshape(len(self.shape), -1)
        level = np.zeros(self.size, dtype=np.int32)
        for axis, r in enumerate(self.reach):
            level = level * (r + 1) + idx[axis] % (r + 1)
        return level

    def _neighbour_offsets(self) -> tuple[tuple[int, ...], ...]:
        ranges = [range(-r, r + 1) for r in self.reach]
        return tuple(d for d in itertools.product(*ranges) if any(d))

    def conflict_counts(self):
        """For each block (numpy array, C order), how many overlapping lower-level blocks it waits for."""
        import numpy as np
        counts = np.zeros(self.shape, dtype=np.int32)
        if not self.conflicts:
            return counts.reshape(-1)
        level = self.levels().reshape(self.shape)
        for d in self._neighbours:
            src = tuple(slice(max(0, -k), n - max(0, k)) for k, n in zip(d, self.shape))
            dst = tuple(slice(max(0, k), n - max(0, -k)) for k, n in zip(d, self.shape))
            # block at dst waits for its neighbour at src (= dst - d) when that one is lower
            counts[dst] += level[src] < level[dst]
        return counts.reshape(-1)

    def later_neighbours(self, spatial_id: int) -> Iterator[int]:
        """Overlapping blocks of higher levels: those that wait for this one."""
        coord = self.coord_of(spatial_id)
        mine = self.level_of(coord)
        for d in self._neighbours:
            other = tuple(c + k for c, k in zip(coord, d))
            if self.contains_coord(other) and self.level_of(other) > mine:
                yield self.id_of(other)

    # -- dependencies between tasks -----------------------------------------
    def _axis_ranges_reading(self, region: Roi) -> list[tuple[int, int]]:
        """Per axis, the grid index range of blocks whose read region overlaps ``region``."""
        out = []
        for axis in range(len(self.shape)):
            first = self.origin[axis] + self.read_roi.offset[axis]
            out.append(overlap_range(region.begin[axis], region.end[axis], first,
                                     self.read_roi.shape[axis], self.stride[axis], self.shape[axis]))
        return out

    def _axis_ranges_writing(self, region: Roi) -> list[tuple[int, int]]:
        out = []
        for axis in range(len(self.shape)):
            first = self.origin[axis] + self.write_roi.offset[axis]
            out.append(overlap_range(region.begin[axis], region.end[axis], first,
                                     self.write_roi.shape[axis], self.stride[axis], self.shape[axis]))
        return out

    def readers_of(self, region: Roi) -> Iterator[int]:
        """Spatial ids of this grid's blocks whose read region overlaps ``region``."""
        ranges = self._axis_ranges_reading(region)
        for coord in itertools.product(*(range(a, b) for a, b in ranges)):
            yield self.id_of(coord)

    def writers_of(self, region: Roi) -> Iterator[int]:
        ranges = self._axis_ranges_writing(region)
        for coord in itertools.product(*(range(a, b) for a, b in ranges)):
            yield self.id_of(coord)

    def upstream_counts(self, upstream: "BlockGrid"):
        """For each of this grid's blocks (numpy array, C order), how many ``upstream`` blocks write into its
        read region (per-axis counts multiply: the overlap is a box)."""
        import numpy as np
        total = np.ones(self.shape, dtype=np.int64)
        for axis in range(len(self.shape)):
            idx = np.arange(self.shape[axis])
            lo = self.origin[axis] + self.read_roi.offset[axis] + idx * self.stride[axis]
            hi = lo + self.read_roi.shape[axis]
            first = upstream.origin[axis] + upstream.write_roi.offset[axis]
            size, step, n = upstream.write_roi.shape[axis], upstream.stride[axis], upstream.shape[axis]
            start = np.maximum(0, (lo - first - size) // step + 1)
            stop = np.minimum(n, -((-(hi - first)) // step))
            per_axis = np.maximum(0, stop - start)
            view = [1] * len(self.shape)
            view[axis] = -1
            total = total * per_axis.reshape(view)
        return total.reshape(-1).astype(np.int32)
