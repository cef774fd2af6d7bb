"""Regions of interest: the boxes every block, task and volume is described by.

A ``Roi`` is an axis-aligned box in voxel (or world) units: an ``offset`` (its
first corner) and a ``shape``.  It is immutable and hashable, so the
scheduler can use ROIs as keys, and its arithmetic is integer-exact: block
grids are computed from these numbers, and a rounding error there would put
two blocks on the same voxels.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence  # not typing: cheaper for a worker's start-up


__all__ = ["Roi", "as_roi"]


def _ints(values: Iterable[object], what: str) -> tuple[int, ...]:
    """Whole numbers, or one ValueError sentence: never ``OverflowError`` for ``inf``
    or "invalid literal for int()" for a string a script passed by mistake."""
    try:
        values = list(values)
    except TypeError:
        raise ValueError(f"{what} must be a sequence of whole numbers, got {values!r}") from None
    out = []
    for v in values:
        try:
            whole = not isinstance(v, (bool, str, bytes)) and int(v) == v
        except (TypeError, ValueError, OverflowError):
            whole = False
        if not whole:
            raise ValueError(f"{what} must hold whole numbers, got {values!r}")
        out.append(int(v))
    return tuple(out)


class Roi:
    """An axis-aligned box: ``offset`` (first corner) and ``shape`` (extent per axis).

    Immutable and hashable; a plain slotted class (not a dataclass) because a
    worker process imports it at start-up, where every millisecond counts.
    """

    __slots__ = ("offset", "shape")

    def __init__(self, offset: Sequence[int], shape: Sequence[int]) -> None:
        offset = _ints(offset, "a ROI offset")
        shape = _ints(shape, "a ROI shape")
        if len(offset) != len(shape):
            raise ValueError(f"a ROI needs one offset per axis and one size per axis; "
                             f"got offset {offset} and shape {shape}")
        if any(s < 0 for s in shape):
            raise ValueError(f"a ROI shape cannot be negative, got {shape}")
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "shape", shape)

    @classmethod
    def _raw(cls, offset: tuple[int, ...], shape: tuple[int, ...]) -> "Roi":
        """Build from tuples already known to be valid (the per-block hot path)."""
        roi = object.__new__(cls)
        object.__setattr__(roi, "offset", offset)
        object.__setattr__(roi, "shape", shape)
        return roi

    def __setattr__(self, name, value):
        raise AttributeError("a Roi cannot be changed; make a new one")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Roi) and self.offset == other.offset and self.shape == other.shape

    def __hash__(self) -> int:
        return hash((self.offset, self.shape))

    def __reduce__(self):
        return (Roi, (self.offset, self.shape))

    # -- views -----------------------------------------------------------
    @property
    def dims(self) -> int:
        return len(self.shape)

    @property
    def begin(self) -> tuple[int, ...]:
        return self.offset

    @property
    def end(self) -> tuple[int, ...]:
        return tuple(o + s for o, s in zip(self.offset, self.shape))

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def empty(self) -> bool:
        return any(s == 0 for s in self.shape)

    def to_slices(self) -> tuple[slice, ...]:
        """Numpy slices selecting this ROI from an array whose origin is 0."""
        return tuple(slice(o, o + s) for o, s in zip(self.offset, self.shape))

    # -- arithmetic ------------------------------------------------------
    def _check(self, other: "Roi") -> None:
        if other.dims != self.dims:
            raise ValueError(f"cannot combine a {self.dims}-axis ROI with a {other.dims}-axis ROI")

    def shift(self, by: Sequence[int]) -> "Roi":
        return Roi._raw(tuple(o + int(b) for o, b in zip(self.offset, by)), self.shape)

    def intersect(self, other: "Roi") -> "Roi":
        """The overlap of two ROIs (empty, with shape 0, when they do not meet)."""
        self._check(other)
        begin = tuple(max(a, b) for a, b in zip(self.begin, other.begin))
        end = tuple(min(a, b) for a, b in zip(self.end, other.end))
        return Roi(begin, tuple(max(0, e - b) for b, e in zip(begin, end)))

    def intersects(self, other: "Roi") -> bool:
        self._check(other)
        return all(a0 < b1 and b0 < a1 for a0, a1, b0, b1
                   in zip(self.begin, self.end, other.begin, other.end))

    def contains(self, other: "Roi | Sequence[int]") -> bool:
        """True for a ROI lying wholly inside this one, or a point inside it."""
        if isinstance(other, Roi):
            self._check(other)
            if other.empty():
                return True
            return all(b0 <= c0 and c1 <= b1 for b0, b1, c0, c1
                       in zip(self.begin, self.end, other.begin, other.end))
        point = tuple(other)
        return all(b <= p < e for b, e, p in zip(self.begin, self.end, point))

    def grow(self, before: Sequence[int] | int, after: Sequence[int] | int | None = None) -> "Roi":
        """Extend by ``before`` below and ``after`` above each axis (negative shrinks)."""
        if isinstance(before, int):
            before = (before,) * self.dims
        if after is None:
            after = before
        elif isinstance(after, int):
            after = (after,) * self.dims
        offset = tuple(o - b for o, b in zip(self.offset, before))
        shape = tuple(max(0, s + b + a) for s, b, a in zip(self.shape, before, after))
        return Roi(offset, shape)

    def snap_to_grid(self, step: Sequence[int] | int, mode: str = "grow") -> "Roi":
        """Align both corners to multiples of ``step``.

        ``grow`` widens to the enclosing grid cells, ``shrink`` narrows to the
        cells fully inside, ``closest`` moves each corner to the nearer line.
        """
        if isinstance(step, int):
            step = (step,) * self.dims
        if any(s <= 0 for s in step):
            raise ValueError(f"a grid step must be positive, got {tuple(step)}")
        if mode not in ("grow", "shrink", "closest"):
            raise ValueError(f"snap mode must be 'grow', 'shrink' or 'closest', not {mode!r}")

        def down(x: int, s: int) -> int:
            return (x // s) * s

        def up(x: int, s: int) -> int:
            return -((-x) // s) * s

        def near(x: int, s: int) -> int:
            lo = down(x, s)
            return lo if x - lo < lo + s - x else lo + s

        lo_f, hi_f = {"grow": (down, up), "shrink": (up, down), "closest": (near, near)}[mode]
        begin = tuple(lo_f(b, s) for b, s in zip(self.begin, step))
        end = tuple(hi_f(e, s) for e, s in zip(self.end, step))
        return Roi(begin, tuple(max(0, e - b) for b, e in zip(begin, end)))

    # -- files -------------------------------------------------------------
    def to_dict(self) -> dict[str, list[int]]:
        return {"offset": list(self.offset), "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, doc: dict) -> "Roi":
        return cls(doc["offset"], doc["shape"])

    def __repr__(self) -> str:
        return f"Roi(offset={self.offset}, shape={self.shape})"


def as_roi(value: object, what: str = "ROI") -> Roi:
    """Accept a Roi, ``{"offset", "shape"}``, ``(offset, shape)``, or anything with
    ``offset``/``shape`` attributes (e.g. a funlib or daisy Roi)."""
    if isinstance(value, Roi):
        return value
    if isinstance(value, dict):
        try:
            return Roi(value["offset"], value["shape"])
        except KeyError:
            raise ValueError(f"{what} needs both 'offset' and 'shape', got {value!r}") from None
    if hasattr(value, "offset") and hasattr(value, "shape"):
        return Roi(tuple(value.offset), tuple(value.shape))
    try:
        offset, shape = value
        return Roi(offset, shape)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a Roi or (offset, shape), got {value!r}") from None
