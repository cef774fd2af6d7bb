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

from spacrq.night.collect import Night, gather
from spacrq.night.html import render, verdict
from spacrq.runfiles import write_text

__all__ = ["REPORT_FILE", "gather", "render", "verdict", "report_html", "write_report",
           "default_report_path", "Night"]

REPORT_FILE = "morning-report.html"


def default_report_path(queue_path: str | os.PathLike) -> Path:
    """Where the runner writes the report: beside the queue's logs."""
    from spacrq.queue.store import logs_dir
    return logs_dir(queue_path) / REPORT_FILE


def report_html(queue_path: str | os.PathLike, *, written_at: str | None = None) -> str:
    """The report of ``queue_path`` as HTML text."""
    when = written_at or datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    return render(gather(queue_path), written_at=when)


def write_report(queue_path: str | os.PathLike, out: str | os.PathLike | None = None, *,
                 written_at: str | None = None) -> Path:
    """Write the report (atomically) and return its path."""
    target = Path(out) if out else default_report_path(queue_path)
    return write_text(target, report_html(queue_path, written_at=written_at))
