"""One watched store (or a bare runs.jsonl) and everything read from it so far.

:class:`RunSource` reads only what is new at each look — the report lines
appended to ``runs.jsonl``, ``progress.json`` when it was replaced, the
store's block counts when a run ended — and says what the pane shows of
it: its line in the runs list (:meth:`RunSource.row`) and the tables, text
and charts of one of its runs (:meth:`RunSource.detail`).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from spacrq.blockwise.report import RUNS_FILE, RunsTail, TaskReport, format_seconds
from spacrq.blockwise.run_state import STALE_AFTER, scheduler_running
from spacrq.blockwise.watch_charts import store_charts
from spacrq.blockwise.watch_live import LiveRun, as_number
from spacrq.blockwise.watch_series import CHART_BUCKETS
from spacrq.blockwise.watch_store import store_counts
from spacrq.blockwise.watch_tables import (LIVE_WORKER_COLUMNS, WORKER_COLUMNS, block_table,
                                           format_when, live_worker_table, render_report,
                                           worker_table)
from spacrq.runfiles import PROGRESS_FILE, RunFileError, read_json

__all__ = ["RunSource", "resolve_source", "looks_like_store", "STORE_MARKER", "STALE_AFTER"]

STORE_MARKER = "zarr.json"


def looks_like_store(folder: Path) -> bool:
    """Whether a folder is (or is becoming) a task's store.

    It is when it holds a zarr.json, a runs.jsonl or a progress.json.
    """
    return any((folder / name).exists() for name in (STORE_MARKER, RUNS_FILE, PROGRESS_FILE))


def resolve_source(path: str | os.PathLike) -> tuple[Path | None, Path]:
    """``(store_dir or None, runs_file)`` for a path the operator opened.

    :raises RunFileError: with one sentence naming what to choose instead.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise RunFileError(f"{p} does not exist; choose a runs.jsonl file or a task's tracking store folder")
    if p.is_dir():
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
        try:
            st = os.stat(self.progress_file)
        except FileNotFoundError:
            self.progress, self._progress_stamp = None, None
            return
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
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
            self._counts = {k: int(task.get(k) or 0) for k in ("done", "failed", "total", "skipped",
                                                                "orphaned", "in_flight")}
            return
        if self.store_dir is None or not (self.store_dir / STORE_MARKER).exists():
            self._counts = None
            return
        # keyed on what was read, not on the state derived from the counts themselves:
        # a key that moved once the counts arrived read every store twice
        key = (len(self.runs), self.live.written_at, (self.progress or {}).get("state"))
        if key != self._counts_key:
            self._counts_key = key
            try:
                self._counts, self._counts_problem = store_counts(self.store_dir), ""
            except RunFileError as exc:
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

    def row(self) -> dict:
        """This store's line in the runs list, with one child per past run."""
        counts = self._counts or {}
        children = []
        for i, r in enumerate(self.runs):
            children.append({"index": i, "when": format_when(r.started_at, short=True),
                             "elapsed": format_seconds(r.elapsed) if r.elapsed else "—",
                             "count": r.blocks.count, "skipped": r.blocks.skipped,
                             "failures": r.blocks.failures})
        return {"key": self.key, "task_id": self.task_id(), "state": self.state(),
                "started_at": self.started_at(),
                "done": counts.get("done"), "failed": counts.get("failed"), "total": counts.get("total"),
                "when": format_when(self.started_at(), short=True), "runs": children, "opened": self.opened,
                "problems": list(self.problems)}

    def detail(self, run_index: int | None) -> dict:
        """The tables, the text and the live charts for one run of this store.

        ``run_index`` None means "what matters now": the live run while one
        is running, else the last report.
        """
        state = self.state()
        live = run_index is None and state == "running"
        report = None
        if not live and self.runs:
            idx = len(self.runs) - 1 if run_index is None else max(0, min(run_index, len(self.runs) - 1))
            report, run_index = self.runs[idx], idx
        out: dict[str, Any] = {"key": self.key, "task_id": self.task_id(), "state": state,
                               "run_index": run_index, "live": live, "problems": list(self.problems),
                               "counts": dict(self._counts or {}), "store": str(self.store_dir or ""),
                               "version": self.version}
        if live:
            out["block_rows"], out["block_note"] = [], (
                "the run is in progress: its per-block summary is written when it ends "
                "(the charts show each block as it completes)")
            out["worker_columns"] = LIVE_WORKER_COLUMNS
            out["worker_rows"] = live_worker_table(self.progress or {})
            out["worker_note"] = "" if out["worker_rows"] else "no worker has started yet"
            previous = render_report(self.runs[-1]) if self.runs else ""
            out["text"] = ("The run is in progress; its report is written to runs.jsonl when it ends."
                           + (f"\n\nThe previous run:\n{previous}" if previous else ""))
        elif report is not None:
            out["block_rows"], out["block_note"] = block_table(report)
            out["worker_columns"] = WORKER_COLUMNS
            out["worker_rows"], out["worker_note"] = worker_table(report)
            out["text"] = render_report(report)
        else:
            out["block_rows"], out["worker_rows"], out["worker_columns"] = [], [], WORKER_COLUMNS
            out["block_note"] = out["worker_note"] = "this task has no finished run yet"
            out["text"] = "No run of this task has finished yet, so there is no report."
        out["report"] = report.to_dict() if report is not None else None
        ran_on = (self.progress or {}).get("ran_on") if live else None
        out["ran_on"] = ran_on if isinstance(ran_on, dict) else None
        if live:
            out["charts"], out["charts_note"] = self.live.snapshot(), ""
        else:
            out["charts"], out["charts_note"] = self._store_charts(run_index)
        return out

    def _store_charts(self, run_index: int | None) -> tuple[dict | None, str]:
        """The charts of a finished run from the tracking store (kept until the store moves on)."""
        if self.store_dir is None or not (self.store_dir / STORE_MARKER).exists():
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
                self._charts, self._charts_problem = store_charts(self.store_dir, start, end,
                                                                  capacity=self._capacity), ""
            except RunFileError as exc:
                self._charts, self._charts_problem = None, f"No charts: {exc}"
            self._charts_key = key
        if self._charts is not None and self._charts.get("empty"):
            return None, self._charts["empty"]
        return self._charts, self._charts_problem
