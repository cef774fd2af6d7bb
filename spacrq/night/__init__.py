"""The morning report: one self-contained page that tells the whole night.

``spacrq night-report QUEUE`` writes it on demand; the queue runner writes it
when the queue ends (``<logs>/morning-report.html``) and names it in the
end-of-queue notification.  Qt-free: built from the same core readers the
panes use (:mod:`spacrq.night.collect`), rendered as HTML with inline SVG
(:mod:`spacrq.night.html`).
"""
from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from typing import Any

from spacrq.runfiles import write_text

__all__ = ["REPORT_FILE", "gather", "render", "verdict", "report_html", "write_report",
           "default_report_path", "Night"]

REPORT_FILE = "morning-report.html"

#: the names this package gives from its modules, imported on first use: the gathering
#: reads zarr stores with numpy, which ``spacrq night-report --help`` (and every other
#: ``spacrq`` command, which registers this one) must not wait for
_LAZY = {"Night": "spacrq.night.collect", "gather": "spacrq.night.collect",
         "render": "spacrq.night.html", "verdict": "spacrq.night.html"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_report_path(queue_path: str | os.PathLike) -> Path:
    """Where the runner writes the report: beside the queue's logs."""
    from spacrq.queue.store import logs_dir
    return logs_dir(queue_path) / REPORT_FILE


def report_html(queue_path: str | os.PathLike, *, written_at: str | None = None,
                night: Any = None) -> str:
    """The report of ``queue_path`` as HTML text (of ``night`` when it was gathered already)."""
    from spacrq.night.collect import gather
    from spacrq.night.html import render
    when = written_at or datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    return render(night if night is not None else gather(queue_path), written_at=when)


def write_report(queue_path: str | os.PathLike, out: str | os.PathLike | None = None, *,
                 written_at: str | None = None, night: Any = None) -> Path:
    """Write the report (atomically) and return its path."""
    target = Path(out) if out else default_report_path(queue_path)
    return write_text(target, report_html(queue_path, written_at=written_at, night=night))
