"""``runs.jsonl``: one report line per run, appended by the engine and read back by anyone.

The line is :meth:`TaskReport.to_dict` (the seed's shape), fsync'd in one
write, so a crash leaves at most a torn last line; the readers skip such a
line and still find every whole report, also one glued after it by a later
run.  :class:`RunsTail` reads only what was appended since its last look,
which keeps a window watching a long night's file cheap.
"""
from __future__ import annotations

import json
from pathlib import Path

from spacrq.blockwise.report_model import TaskReport
from spacrq.runfiles import JsonlTail, append_jsonl

__all__ = ["RUNS_FILE", "runs_file", "append_run", "RunsTail", "read_runs", "read_last_run",
           "is_tracking_store", "store_attributes"]

RUNS_FILE = "runs.jsonl"


def store_attributes(path: str | Path) -> dict | None:
    """A tracking store's attributes from its zarr.json, or None when ``path`` is not one.

    A store is a zarr group marked ``spacrq_tracking``; a folder holding only
    a runs.jsonl (a serial run's log folder) is not.
    """
    try:
        doc = json.loads((Path(path) / "zarr.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    attrs = doc.get("attributes") if isinstance(doc, dict) else None
    if not isinstance(attrs, dict) or "spacrq_tracking" not in attrs:
        return None
    return attrs


def is_tracking_store(path: str | Path) -> bool:
    """Whether ``path`` is a spacrq tracking store (a zarr group marked ``spacrq_tracking``)."""
    return store_attributes(path) is not None


def runs_file(store_dir: str | Path) -> Path:
    """Where a task's run reports are appended: ``runs.jsonl`` in its store (or log) folder."""
    return Path(store_dir) / RUNS_FILE


def append_run(path: str | Path, task_report: TaskReport) -> None:
    """Append one run's report as one fsync'd line (a crash leaves at most a torn last line)."""
    append_jsonl(path, task_report.to_dict())


_LINE_START = b'{"task_id"'


def _parse_run_line(raw: bytes, store: Path | None) -> tuple[TaskReport | None, bool]:
    """A report line → (TaskReport or None, whether the line was whole).

    A line glued from a torn write and the next whole one (a crash mid-append,
    then a later run) still yields that later report: it is parsed from the
    last place a report starts, and the line counts as damaged.
    """
    starts = [0]
    cut = raw.rfind(_LINE_START)
    if cut > 0:
        starts.append(cut)
    for start in starts:
        try:
            doc = json.loads(raw[start:])
            if isinstance(doc, dict):
                return TaskReport.from_dict(doc, store=store), start == 0
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            continue
    return None, False


class RunsTail:
    """Incremental reader of a ``runs.jsonl``: each :meth:`read` returns the reports added since.

    Built on :class:`spacrq.runfiles.JsonlTail`: a torn last line is left for
    later, a garbage line is counted in :attr:`bad_lines` and skipped, and a
    replaced file starts over (:attr:`restarted`).  Reports read from a file
    inside a tracking store know their store, for block drill-down.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._tail = JsonlTail(self.path)
        self.bad_lines = 0
        self.restarted = False
        parent = self.path.parent
        self.store = parent if is_tracking_store(parent) else None
        self._whole_bytes = 0  # bytes read so far that ended in a newline

    @property
    def torn(self) -> bool:
        """Whether the file, as last read, ends in an unfinished line (a run cut off mid-write).

        Known from what the tail read, so a watcher need not open the file again to ask.
        """
        return self._tail.offset > self._whole_bytes

    def read(self) -> list[TaskReport]:
        chunk = self._tail.read_bytes()
        self.restarted = self._tail.restarted
        if self.restarted:
            self.bad_lines = 0
            self._whole_bytes = 0
        self._whole_bytes += len(chunk)
        out: list[TaskReport] = []
        for raw in chunk.splitlines():
            if not raw.strip():
                continue
            report, whole = _parse_run_line(raw, self.store)
            self.bad_lines += not whole
            if report is not None:
                out.append(report)
        return out


def read_runs(path: str | Path) -> list[TaskReport]:
    """Every run report in a ``runs.jsonl``, oldest first; [] when it is missing or empty."""
    return RunsTail(path).read()


def read_last_run(path: str | Path) -> TaskReport | None:
    """The last run report in a ``runs.jsonl``, or None when there is none."""
    runs = read_runs(path)
    return runs[-1] if runs else None
