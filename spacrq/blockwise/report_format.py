"""Figures as the operator reads them: durations, byte counts, times and plain-text tables.

Shared by the report panel, ``spacrq report`` and the Run Report pane, so a
figure reads the same everywhere.  A figure nobody measured (None, NaN) is
``—``, never ``0``; units are chosen after rounding, so 0.99999 ms reads
``1.0 ms`` and never ``1000.0 µs``.
"""
from __future__ import annotations

import datetime
import math
from typing import Any, Sequence

from spacrq.fmt import duration

__all__ = ["as_number", "format_seconds", "format_bytes", "format_time", "format_value", "unit_scale",
           "text_table"]

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def as_number(v: Any) -> float | None:
    """A figure read from JSON as a float; None when it is missing, not a number, NaN or a bool."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return None if math.isnan(f) else f


def _fits(magnitude: float, unit: str) -> bool:
    """Whether a byte figure still rounds below 1024 in ``unit`` (B has no decimals)."""
    return magnitude < (1023.5 if unit == "B" else 1023.95)


def format_seconds(x: float | None) -> str:
    """A duration in the unit that keeps it readable: µs, ms and s below a minute (a block's
    figures), the one duration style of spacrq (:func:`spacrq.fmt.duration`) above; ``—``
    when unmeasured."""
    if x is None or not math.isfinite(x):
        return "—"
    sign = "-" if x < 0 else ""
    a = abs(x)
    if a < 1e-9:  # below any clock's resolution: rounding noise, not a duration
        return "0 s"
    if a >= 60.0:
        return sign + duration(a)
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
    for unit in _BINARY_UNITS:
        if _fits(abs(v), unit):
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024.0
    return f"{v:.1f} PiB"


def format_time(t: float | None) -> str:
    """An epoch time as local date and time to the millisecond; ``—`` when never stamped."""
    if t is None or not math.isfinite(t):
        return "—"
    try:
        return datetime.datetime.fromtimestamp(t).isoformat(sep=" ", timespec="milliseconds")
    except (ValueError, OverflowError, OSError):  # (beyond any calendar: a garbled stamp)
        return "—"


def unit_scale(x: float, unit: str) -> tuple[float, str, int]:
    """(factor, unit name, decimals) that keep ``x`` readable; shared by a mean and its std,
    so both are written in the mean's unit and compare at a glance."""
    a = abs(x)
    if unit == "s":
        if a >= 0.995 or a < 1e-9:
            return 1.0, "s", 2
        if a >= 0.99995e-3:
            return 1e3, "ms", 1
        return 1e6, "µs", 1
    if unit == "B":
        factor = 1.0
        for name in _BINARY_UNITS:
            if _fits(a * factor, name):
                return factor, name, 0 if name == "B" else 1
            factor /= 1024.0
        return factor, "PiB", 1
    return 1.0, unit, 3


def format_value(x: float, unit: str) -> str:
    """One figure: ``"s"`` a duration, ``"B"`` a byte count, anything else a plain number."""
    if unit == "s":
        return format_seconds(x)
    if unit == "B":
        return format_bytes(x)
    return f"{x:.4g}{(' ' + unit) if unit else ''}"


def text_table(header: Sequence[str], rows: list[list[str]], indent: str = "    ",
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
