"""``runs.jsonl``: one report line per run, appended by the engine and read back by anyone.

The line is :meth:`TaskReport.to_dict`, fsync'd in one
write, so a crash leaves at most a torn last line; the readers skip such a
line and still find every whole report, also one glued after it by a later
run.  :class:`RunsTail` reads only what was appended since its last look,
which keeps a window watching a long night's file cheap.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from spacrq.blockwise.report_model import TaskReport
from spacrq.runfiles import JsonlTail, RunFileError, append_jsonl, loads, read_json_checked

__all__ = ["RUNS_FILE", "runs_file", "append_run", "RunsTail", "read_runs", "read_last_run",
           "is_tracking_store", "store_attributes", "read_store_attributes", "line_problem"]

RUNS_FILE = "runs.jsonl"


#: a store's zarr.json is a few hundred bytes
MAX_META_BYTES = 1 << 20


def read_store_attributes(path: str | Path) -> tuple[dict | None, str | None]:
    """``(attributes, None)`` of a tracking store, or ``(None, why not)``.

    ``why`` is None when the folder simply is not a store (no zarr.json, or a
    zarr node not marked ``spacrq_tracking``), and a sentence naming the file
    when its zarr.json is there but cannot be read — garbage, a list, a folder.
    """
    meta = Path(path) / "zarr.json"
    doc, problem = read_json_checked(meta, None, expect=dict, max_bytes=MAX_META_BYTES)
    if problem is not None:
        return None, problem
    attrs = doc.get("attributes") if isinstance(doc, dict) else None
    if not isinstance(attrs, dict) or "spacrq_tracking" not in attrs:
        return None, None
    return attrs, None


def store_attributes(path: str | Path) -> dict | None:
    """A tracking store's attributes from its zarr.json, or None when ``path`` is not one.

    A store is a zarr group marked ``spacrq_tracking``; a folder holding only
    a runs.jsonl (a serial run's log folder) is not.
    """
    return read_store_attributes(path)[0]


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


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def line_problem(doc: Any) -> str | None:
    """Why a parsed line is not a run report (the shape :meth:`TaskReport.to_dict` writes), or None when it is one.

    Valid JSON is not enough: ``{"task_id": "x"}`` or an object from some other
    file would otherwise read as a run of 0 blocks, and be shown as last night's.
    """
    if not isinstance(doc, dict):
        return "it is not an object"
    if not isinstance(doc.get("task_id"), str) or not doc["task_id"]:
        return "it names no task_id"
    for key in ("started_at", "finished_at"):
        if not _number(doc.get(key)):
            return f"its {key!r} is not a time"
    blocks = doc.get("blocks")
    if not isinstance(blocks, dict) or not (isinstance(blocks.get("count"), int)
                                            and not isinstance(blocks.get("count"), bool)
                                            and blocks["count"] >= 0):
        return "its 'blocks' has no block count"
    if not isinstance(doc.get("workers"), dict):
        return "its 'workers' is not an object"
    if "outcome" in doc and not isinstance(doc["outcome"], (dict, type(None))):
        return "its 'outcome' is not an object"
    return None


def _parse_run_line(raw: bytes, store: Path | None,
                    where: Path | str = "") -> tuple[TaskReport | None, bool, str | None]:
    """A report line → (TaskReport or None, whether the line was whole, why it was not).

    A line glued from a torn write and the next whole one (a crash mid-append,
    then a later run) still yields that later report: it is parsed from the
    last place a report starts, and the line counts as damaged.  Lines are
    parsed with the run-file protocol's strict reader and must have the
    report's shape (:func:`line_problem`).
    """
    starts = [0]
    cut = raw.rfind(_LINE_START)
    if cut > 0:
        starts.append(cut)
    problem = None
    for start in starts:
        try:
            doc = loads(raw[start:], where=where)
        except RunFileError:
            problem = problem or (f"a line of {where or 'runs.jsonl'} is not valid JSON (not UTF-8, "
                                  "cut off, or not JSON at all)")
            continue
        why = line_problem(doc)
        if why is None:
            try:
                return TaskReport.from_dict(doc, store=store), start == 0, problem
            except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
                why = f"a figure in it cannot be read ({type(exc).__name__})"
        problem = problem or f"a line of {where or 'runs.jsonl'} is not a run report: {why}"
    return None, False, problem


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
        #: why the last skipped line was skipped (a sentence naming the file), or None
        self.last_problem: str | None = None
        #: why the file itself cannot be read at all (a sentence), or None
        self.unreadable: str | None = None
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
        try:
            chunk = self._tail.read_bytes()
        except FileNotFoundError:  # deleted between its look and its read: the next look sees it gone
            self.unreadable = None
            return []
        except OSError as exc:  # a folder (or an unreadable file) where runs.jsonl belongs
            self.unreadable = (f"{self.path} cannot be read ({exc.strerror or exc}); move it "
                               "away so the next run can write its report there")
            return []
        self.unreadable = None
        self.restarted = self._tail.restarted
        if self.restarted:
            self.bad_lines = 0
            self.last_problem = None
            self._whole_bytes = 0
        self._whole_bytes += len(chunk)
        out: list[TaskReport] = []
        for raw in chunk.splitlines():
            if not raw.strip():
                continue
            report, whole, problem = _parse_run_line(raw, self.store, self.path)
            if not whole:
                self.bad_lines += 1
                self.last_problem = problem or self.last_problem
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
