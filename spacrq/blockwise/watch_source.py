"""Part of the Run Report watch's poller body: one watched store (or a bare runs.jsonl).

:class:`RunSource` reads only what is new at each look — the report lines
appended to ``runs.jsonl`` (only the new bytes), ``progress.json`` when its
file stamp moved, the store's block counts when a run ended — and says what
the pane shows of it: its line in the runs list (:meth:`RunSource.row`) and
the tables, text and charts of one of its runs (:meth:`RunSource.detail`),
all made by :mod:`spacrq.blockwise.pane` here, on the poller's thread.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spacrq.blockwise import pane
from spacrq.blockwise.report import RUNS_FILE, ReportError, RunsTail, TaskReport
from spacrq.blockwise.report_format import as_number
from spacrq.blockwise.report_store import durable_counts, store_attrs
from spacrq.blockwise.run_state import STALE_AFTER, scheduler_running
from spacrq.blockwise.watch_charts import store_charts
from spacrq.blockwise.watch_live import LiveRun
from spacrq.blockwise.watch_series import CHART_BUCKETS
from spacrq.runfiles import PROGRESS_FILE, RunFileError, file_stamp, read_json
from spacrq.watching import Row

__all__ = ["RunSource", "RunDetail", "SourceMissing", "resolve_source", "looks_like_store",
           "STORE_MARKER", "STALE_AFTER"]

STORE_MARKER = "zarr.json"


class SourceMissing(RunFileError):
    """The path the operator opened is not there."""


def looks_like_store(folder: Path) -> bool:
    """Whether a folder is (or is becoming) a task's store.

    It is when it holds a zarr.json, a runs.jsonl or a progress.json.  A
    folder that cannot be looked into (no permission, a link loop) is not.
    """
    try:
        return any((folder / name).exists() for name in (STORE_MARKER, RUNS_FILE, PROGRESS_FILE))
    except OSError:
        return False


def resolve_source(path: str | os.PathLike) -> tuple[Path | None, Path]:
    """``(store_dir or None, runs_file)`` for a path the operator opened.

    :raises SourceMissing: the path is not there.
    :raises RunFileError: it is not a store or a runs.jsonl; one sentence naming what to choose.
    """
    if not str(path).strip():
        raise RunFileError("no path was given; choose a runs.jsonl file or a task's tracking "
                           "store folder")
    p = Path(path).expanduser()
    try:
        there, folder = p.exists(), p.is_dir()
    except OSError as exc:  # a name too long, a link loop, a folder it may not look into
        raise RunFileError(f"{str(p)[:200]} cannot be looked at ({exc.strerror or exc}); "
                           "choose a runs.jsonl file or a task's tracking store folder") from None
    if not there:
        raise SourceMissing(f"{p} does not exist; choose a runs.jsonl file or a task's tracking store folder")
    if folder:
        if looks_like_store(p):
            return p.resolve(), (p / RUNS_FILE).resolve()
        raise RunFileError(f"{p} is not a tracking store (it holds no zarr.json, runs.jsonl or "
                           "progress.json); choose the task's store folder")
    if p.name == STORE_MARKER:
        return p.parent.resolve(), (p.parent / RUNS_FILE).resolve()
    if p.suffix == ".jsonl":
        parent = p.parent
        store = parent.resolve() if (parent / STORE_MARKER).exists() or (parent / PROGRESS_FILE).exists() else None
        return store, p.resolve()
    raise RunFileError(f"{p} is neither a runs.jsonl file nor a tracking store; "
                       "choose runs.jsonl or the store folder")


@dataclass(frozen=True)
class RunDetail:
    """Everything the right-hand side of the pane shows of one run, text already made."""

    key: str
    task_id: str
    state: str
    run_index: int | None
    live: bool
    heading: str
    blocks: pane.Table
    workers: pane.Table
    text: str
    has_store: bool
    problems: tuple[str, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    store: str = ""
    version: int = 0
    #: the chart series (see :meth:`LiveRun.snapshot`), or None with ``charts_note`` saying why
    charts: Mapping[str, Any] | None = None
    charts_note: str = ""


def _count(value: Any) -> int:
    """A block count from a progress snapshot; 0 for anything that is not a finite number."""
    n = as_number(value)
    return int(min(max(n, 0.0), 2.0 ** 53)) if n is not None and n == n else 0


class RunSource:
    """One tracking store (or a bare runs.jsonl) and everything read from it so far."""

    def __init__(self, store_dir: Path | None, runs_file: Path, *, opened: bool = False,
                 capacity: int = CHART_BUCKETS) -> None:
        self.store_dir = store_dir
        self.runs_file = runs_file
        self.progress_file = store_dir / PROGRESS_FILE if store_dir else None
        self.opened = opened
        self.key = str(store_dir or runs_file)
        self.name = (store_dir or runs_file.parent).name
        self.tail = RunsTail(runs_file)
        self.runs: list[TaskReport] = []
        self.live = LiveRun(capacity=capacity)
        self.progress: dict | None = None
        self.problems: list[str] = []
        self.version = 0
        self._progress_stamp: tuple | None = None
        self._counts: dict | None = None
        self._counts_key: tuple | None = None
        self._counts_problem = ""
        self._last_fingerprint: tuple | None = None
        self._capacity = capacity
        self._charts: dict | None = None
        self._charts_key: tuple | None = None
        self._charts_problem = ""

    def has_store(self) -> bool:
        try:
            return self.store_dir is not None and (self.store_dir / STORE_MARKER).exists()
        except OSError:
            return False

    def fault(self, sentence: str) -> None:
        """Say that this store could not be read this time (the other stores still are)."""
        if self.problems != [sentence]:
            self.problems = [sentence]
            self._last_fingerprint = None
            self.version += 1

    # reading ------------------------------------------------------------------
    def refresh(self, now: float | None = None) -> None:
        """Read what is new; cheap when nothing changed (a stat or two)."""
        now = time.time() if now is None else now
        problems = []
        new = self.tail.read()
        if self.tail.restarted:
            self.runs = []
        self.runs.extend(new)
        if self.tail.unreadable:
            problems.append(self.tail.unreadable)
        if self.tail.bad_lines:
            why = f" (the last: {self.tail.last_problem})" if self.tail.last_problem else ""
            problems.append(f"{self.tail.bad_lines} line(s) of {self.runs_file} are not valid report "
                            f"lines and were skipped{why}; the other runs are shown")
        if self.tail.torn:
            problems.append(f"the last line of {self.runs_file} is incomplete (a run was cut off while "
                            "writing its report); the runs before it are shown, and rerunning the task "
                            "appends a complete report")
        self._read_progress(problems)
        self._read_counts(problems, now)
        self.problems = problems
        fingerprint = (len(self.runs), self.live.version, self.state(now), tuple(problems),
                       tuple(sorted((self._counts or {}).items())))
        if fingerprint != self._last_fingerprint:
            self._last_fingerprint = fingerprint
            self.version += 1

    def _read_progress(self, problems: list[str]) -> None:
        if self.progress_file is None:
            return
        stamp = file_stamp(self.progress_file)
        if stamp is None:
            self.progress, self._progress_stamp = None, None
            return
        if stamp == self._progress_stamp:
            return
        self._progress_stamp = stamp
        try:
            doc = read_json(self.progress_file, default=None, expect=dict)
        except RunFileError as exc:
            problems.append(f"{exc}; the live view waits for the next snapshot")
            self._progress_stamp = None
            return
        if not isinstance(doc, dict):
            return
        self.progress = doc
        self.live.ingest(doc)

    def _read_counts(self, problems: list[str], now: float) -> None:
        """Blocks done/failed: from live progress while running, else from the store once."""
        if self.state(now) == "running":
            task = self.progress.get("task") if isinstance(self.progress.get("task"), dict) else {}
            self._counts = {k: _count(task.get(k)) for k in (
                "done", "failed", "total", "skipped", "orphaned", "in_flight")}
            return
        if not self.has_store():
            self._counts = None
            return
        # keyed on what was read, not on the state derived from the counts themselves:
        # a key that moved once the counts arrived read every store twice
        key = (len(self.runs), self.live.written_at, (self.progress or {}).get("state"))
        if key != self._counts_key:
            self._counts_key = key
            try:
                store_attrs(self.store_dir)
                counts = durable_counts(self.store_dir)  # the done marks on disk, as `spacrq report` counts
                self._counts = {k: counts[k] for k in ("done", "failed", "total")}
                self._counts_problem = ""
            except ReportError as exc:
                self._counts, self._counts_problem = None, str(exc)
        if self._counts_problem:
            problems.append(self._counts_problem)

    # what it says -----------------------------------------------------------
    def state(self, now: float | None = None) -> str:
        """running / finished / failed / partial / interrupted / no runs yet.

        "finished" only when nothing failed and nothing is left undone: a
        partial run never reads as success.
        """
        p = self.progress
        if p is not None:
            state = str(p.get("state") or "")
            if state == "running":  # the rule `spacrq report` follows too (run_state)
                return "running" if scheduler_running(p, now) else "interrupted"
            if state in ("failed", "interrupted"):
                return state
        counts = self._counts
        if counts:
            if counts.get("failed"):
                return "failed"
            if counts.get("done", 0) < counts.get("total", 0):
                return "partial" if counts.get("done") or self.runs else "no runs yet"
            return "finished"
        if self.runs:
            return "failed" if self.runs[-1].blocks.failures else "finished"
        return "no runs yet"

    def task_id(self) -> str:
        if self.runs:
            return self.runs[-1].task_id
        task = (self.progress or {}).get("task")
        if isinstance(task, dict) and task.get("task_id"):
            return str(task["task_id"])
        return self.name

    def started_at(self) -> float | None:
        if self.state() == "running":
            return as_number((self.progress or {}).get("started_at"))
        if self.runs:
            return self.runs[-1].started_at or None
        return as_number((self.progress or {}).get("started_at"))

    def row(self) -> Row:
        """This store's line in the runs list, with one child per past run."""
        return pane.store_line(self.key, self.task_id(), self.state(), self.started_at(),
                               self._counts, self.runs, opened=self.opened, problems=self.problems)

    def detail(self, run_index: int | None,
               interrupted: Callable[[], bool] = lambda: False) -> RunDetail | None:
        """The tables, the text and the charts for one run of this store.

        ``run_index`` None means "what matters now": the live run while one
        is running, else the last report.  None when ``interrupted`` said to
        stop while the charts were being built.
        """
        state = self.state()
        live = run_index is None and state == "running"
        report = None
        if not live and self.runs:
            idx = len(self.runs) - 1 if run_index is None else max(0, min(run_index, len(self.runs) - 1))
            report, run_index = self.runs[idx], idx
        if live:
            blocks = pane.Table(pane.BLOCK_COLUMNS, (), (
                "the run is in progress: its per-block summary is written when it ends "
                "(the charts show each block as it completes)"))
            workers = pane.live_worker_table(self.progress or {})
            text = pane.live_text(self.runs[-1] if self.runs else None)
        elif report is not None:
            blocks, workers = pane.block_table(report), pane.worker_table(report)
            text = pane.render_report(report)
        else:
            none = "this task has no finished run yet"
            blocks, workers = pane.Table(pane.BLOCK_COLUMNS, (), none), pane.Table(pane.WORKER_COLUMNS, (), none)
            text = "No run of this task has finished yet, so there is no report."
        ran_on = (self.progress or {}).get("ran_on") if live else None
        cluster = ((ran_on or {}).get("cluster") if isinstance(ran_on, dict) else None) if live else \
            ((report.outcome or {}).get("cluster") if report is not None else None)
        if live:
            charts, charts_note = self.live.snapshot(), ""
        else:
            found = self._store_charts(run_index, interrupted)
            if found is None:
                return None
            charts, charts_note = found
        counts = dict(self._counts or {})
        return RunDetail(
            key=self.key, task_id=self.task_id(), state=state, run_index=run_index, live=live,
            heading=pane.heading(self.task_id(), state, counts, run_index=run_index, live=live,
                                 cluster=cluster),
            blocks=blocks, workers=workers, text=text, has_store=self.has_store(),
            problems=tuple(self.problems), counts=counts, store=str(self.store_dir or ""),
            version=self.version, charts=charts, charts_note=charts_note)

    def _store_charts(self, run_index: int | None,
                      interrupted: Callable[[], bool]) -> tuple[dict | None, str] | None:
        """The charts of a finished run from the tracking store (kept until the store moves on)."""
        if not self.has_store():
            return None, ("No charts: this runs.jsonl has no tracking store beside it, so there are "
                          "no per-block records to chart (the tables show the run's figures).")
        start = end = None
        if run_index is not None and self.runs:
            start = self.runs[run_index].started_at or None
            if run_index + 1 < len(self.runs):
                end = self.runs[run_index + 1].started_at or None
            elif self.state() == "running":  # the last report's run, while a newer one goes
                live_start = as_number((self.progress or {}).get("started_at"))
                end = live_start if live_start and (start is None or live_start > start) else None
        elif isinstance(self.progress, dict):
            start = as_number(self.progress.get("started_at"))
        key = (start, end, len(self.runs), tuple(sorted((self._counts or {}).items())))
        if key != self._charts_key:
            try:
                charts = store_charts(self.store_dir, start, end, capacity=self._capacity,
                                      interrupted=interrupted)
            except RunFileError as exc:
                self._charts, self._charts_problem = None, f"No charts: {exc}"
            else:
                if charts is None:  # the watch is closing: nothing half-built is kept
                    return None
                self._charts, self._charts_problem = charts, ""
            self._charts_key = key
        if self._charts is not None and self._charts.get("empty"):
            return None, self._charts["empty"]
        return self._charts, self._charts_problem
