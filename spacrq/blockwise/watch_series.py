"""Part of the Run Report watch's poller body: chart series of unbounded length in bounded
memory, for a run watched all night.

:class:`PeakSeries` keeps at most ``capacity`` min/max buckets and halves its
resolution when full, so a chart never holds more than a few thousand points
however many blocks completed, and a slow block is never averaged away.
:class:`Trend` fits its line over *every* point with running co-moments, not
over the decimated ones.  :func:`memory_unit` is the one unit every memory
chart (the Run Report's, the morning report's) is drawn in.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["CHART_BUCKETS", "PeakSeries", "Trend", "memory_unit"]

#: min/max buckets per chart series: two points per pixel of a wide chart is all a screen shows
CHART_BUCKETS = 1024


#: the binary units of memory figures, as the tables write them (``format_bytes``)
MEMORY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def memory_unit(largest_bytes: float | None) -> tuple[str, float]:
    """``(unit, bytes per unit)`` a memory chart is drawn in: the binary unit the tables
    beside it write its largest figure in (``format_bytes``), so the table's "max 49.0 MiB"
    is 49.0 on the axis, never a decimal 51.3 MB; MiB when nothing was measured.

    The axis numbers stay below 1024, so the tick text stays short whatever the figures.
    """
    if largest_bytes is None or not np.isfinite(largest_bytes):
        return "MiB", float(2**20)
    value, power = abs(float(largest_bytes)), 0
    while power < len(MEMORY_UNITS) - 1 and value >= (1023.5 if power == 0 else 1023.95):
        value, power = value / 1024.0, power + 1  # format_bytes' rule: it still rounds below 1024
    return MEMORY_UNITS[power], float(1024 ** power)


class PeakSeries:
    """An (x, y) series of unbounded length held in bounded memory.

    Points are grouped into buckets of ``stride`` consecutive points; each
    bucket keeps its lowest and its highest point, so peaks survive
    decimation (a slow block or a memory spike is still on the chart after
    ten hours).  When ``capacity`` buckets are full, neighbouring buckets are
    merged pairwise and the stride doubles.  Appending is amortised O(1) per
    point and :meth:`arrays` returns at most ``2 * capacity + 2`` points.
    """

    def __init__(self, capacity: int = CHART_BUCKETS) -> None:
        if capacity < 2:
            raise ValueError("a series needs a capacity of at least 2 buckets")
        self.capacity = int(capacity)
        self.stride = 1
        self.count = 0  # raw points appended, ever
        self._n = 0     # full buckets
        self._b = np.empty((4, self.capacity), dtype=np.float64)  # xmin, ymin, xmax, ymax
        self._part: list[float] | None = None  # the bucket being filled
        self._part_count = 0

    def __len__(self) -> int:
        return self.count

    def append(self, x: float, y: float) -> None:
        self.extend(np.array([x], dtype=np.float64), np.array([y], dtype=np.float64))

    def extend(self, x: Any, y: Any) -> None:
        """Append points in x order; points whose y is NaN are not data and are dropped."""
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.asarray(y, dtype=np.float64).ravel()
        keep = ~np.isnan(y)
        if not keep.all():
            x, y = x[keep], y[keep]
        i = 0
        while i < len(x):
            if self._n >= self.capacity:
                self._compact()
                continue
            if self._part_count:
                take = min(self.stride - self._part_count, len(x) - i)
                self._fold_into_part(x[i:i + take], y[i:i + take])
                i += take
                if self._part_count == self.stride:
                    self._push(np.array([self._part]).T)
                    self._part, self._part_count = None, 0
                continue
            whole = min((len(x) - i) // self.stride, self.capacity - self._n)
            if whole:
                span = whole * self.stride
                xs = x[i:i + span].reshape(whole, self.stride)
                ys = y[i:i + span].reshape(whole, self.stride)
                lo, hi = ys.argmin(axis=1), ys.argmax(axis=1)
                rows = np.arange(whole)
                self._push(np.vstack([xs[rows, lo], ys[rows, lo], xs[rows, hi], ys[rows, hi]]))
                i += span
            else:  # fewer points than one bucket: they start the partial bucket
                self._fold_into_part(x[i:], y[i:])
                i = len(x)
        self.count += len(x)

    def _fold_into_part(self, x: np.ndarray, y: np.ndarray, count: int | None = None) -> None:
        """Fold points (or another bucket's two extremes, with its ``count``) into the partial bucket."""
        lo, hi = int(y.argmin()), int(y.argmax())
        if self._part is None:
            self._part = [float(x[lo]), float(y[lo]), float(x[hi]), float(y[hi])]
        else:
            p = self._part
            if y[lo] < p[1]:
                p[0], p[1] = float(x[lo]), float(y[lo])
            if y[hi] > p[3]:
                p[2], p[3] = float(x[hi]), float(y[hi])
        self._part_count += len(x) if count is None else count

    def _push(self, buckets: np.ndarray) -> None:
        k = buckets.shape[1]
        self._b[:, self._n:self._n + k] = buckets
        self._n += k

    def _compact(self) -> None:
        """Merge neighbouring buckets pairwise and double the stride.

        An odd last bucket and the partial bucket become the new partial
        bucket; together they hold fewer points than the new stride.
        """
        pairs = self._n // 2
        b = self._b
        a, c = b[:, 0:2 * pairs:2], b[:, 1:2 * pairs:2]
        lo_first = a[1] <= c[1]
        hi_first = a[3] >= c[3]
        merged = np.vstack([
            np.where(lo_first, a[0], c[0]), np.where(lo_first, a[1], c[1]),
            np.where(hi_first, a[2], c[2]), np.where(hi_first, a[3], c[3]),
        ])
        odd = b[:, 2 * pairs].copy() if self._n % 2 else None
        part, part_count = self._part, self._part_count
        old_stride = self.stride
        b[:, :pairs] = merged
        self._n = pairs
        self.stride *= 2
        self._part, self._part_count = None, 0
        for bucket, count in ((odd, old_stride), (part, part_count)):
            if bucket is not None:
                self._fold_into_part(np.array([bucket[0], bucket[2]]),
                                     np.array([bucket[1], bucket[3]]), count)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The points to draw, in x order (copies: safe to hand to another thread)."""
        b = self._b[:, :self._n]
        if self._part is not None:
            b = np.hstack([b, np.array([self._part]).T])
        if self.stride == 1 and self._part_count <= 1:
            return b[0].copy(), b[1].copy()
        first = b[0] <= b[2]
        x = np.empty(2 * b.shape[1])
        y = np.empty(2 * b.shape[1])
        x[0::2] = np.where(first, b[0], b[2])
        y[0::2] = np.where(first, b[1], b[3])
        x[1::2] = np.where(first, b[2], b[0])
        y[1::2] = np.where(first, b[3], b[1])
        return x, y


class Trend:
    """Least-squares line through every point ever added, in O(1) memory.

    Keeps count, means and centred co-moments and merges each batch in
    (Chan's parallel update), which stays exact for millions of points where
    raw sums of x² would lose their digits.
    """

    def __init__(self) -> None:
        self.n = 0
        self.mean_x = self.mean_y = 0.0
        self.cxx = self.cxy = 0.0
        self.min_x = math.inf
        self.max_x = -math.inf

    def extend(self, x: Any, y: Any) -> None:
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.asarray(y, dtype=np.float64).ravel()
        ok = ~(np.isnan(x) | np.isnan(y))
        x, y = x[ok], y[ok]
        nb = len(x)
        if not nb:
            return
        mxb, myb = float(x.mean()), float(y.mean())
        dx = x - mxb
        cxx_b = float(dx @ dx)
        cxy_b = float(dx @ (y - myb))
        n = self.n + nb
        ddx, ddy = mxb - self.mean_x, myb - self.mean_y
        self.cxx += cxx_b + ddx * ddx * self.n * nb / n
        self.cxy += cxy_b + ddx * ddy * self.n * nb / n
        self.mean_x += ddx * nb / n
        self.mean_y += ddy * nb / n
        self.n = n
        self.min_x = min(self.min_x, float(x.min()))
        self.max_x = max(self.max_x, float(x.max()))

    @property
    def slope(self) -> float:
        """Change of y per unit of x; 0 until two distinct x were seen."""
        return self.cxy / self.cxx if self.cxx > 0 else 0.0

    def line(self) -> tuple[np.ndarray, np.ndarray]:
        """The fitted line's two end points over the x range seen (empty before 2 points)."""
        if self.n < 2 or self.cxx <= 0:
            return np.empty(0), np.empty(0)
        xs = np.array([self.min_x, self.max_x])
        return xs, self.mean_y + self.slope * (xs - self.mean_x)

