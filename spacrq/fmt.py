"""How spacrq writes a duration, everywhere the operator reads one.

One style for the panes, the command line and the morning report:
``"42.1s"``, ``"7m 12s"``, ``"7h 41m"`` — short enough for a table column,
exact enough to compare two jobs at a glance.
"""
from __future__ import annotations

import math

__all__ = ["duration"]


def duration(seconds: float | None, unknown: str = "—") -> str:
    """``seconds`` as ``"42.1s"``, ``"7m 12s"`` or ``"7h 41m"``; ``unknown`` for None/NaN."""
    if seconds is None:
        return unknown
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        return unknown
    if not math.isfinite(seconds):
        return unknown
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h {int((seconds % 3600) // 60):02d}m"
