"""Watching blockwise runs for the Run Report pane: the poller's body, no Qt.

The pane shows every tracking store in the workspace, the report of each run
(one line of ``runs.jsonl``), and while a task runs, live charts fed by its
``progress.json``.  Everything that touches a file happens here, on the
poller's thread; the window only turns the plain snapshot this returns into
tables and curves.

Two rules keep a 10-hour run as cheap to watch as a one-minute one:

* Files are read incrementally.  ``runs.jsonl`` through a
  :class:`~spacrq.blockwise.report.RunsTail` (a JsonlTail: only new bytes), ``progress.json``
  only when its ``written_at`` moved, and only the completions whose ``seq``
  is new (:mod:`~spacrq.blockwise.watch_live`).
* Series are bounded (:mod:`~spacrq.blockwise.watch_series`): a chart never
  holds more than a few thousand points however many blocks completed.

This module finds the stores and answers the poller (:class:`ReportWatcher`);
each store is kept by a :class:`~spacrq.blockwise.watch_source.RunSource`,
table rows and notes are made in :mod:`~spacrq.blockwise.watch_tables`, and
a store's arrays are read in :mod:`~spacrq.blockwise.watch_store`.  The
names the pane and its tests use are importable from here.
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from spacrq.blockwise.report import RUNS_FILE
from spacrq.blockwise.watch_live import TIME_BUCKETS, LiveRun
from spacrq.blockwise.watch_series import CHART_BUCKETS, PeakSeries, Trend
from spacrq.blockwise.watch_source import (STALE_AFTER, STORE_MARKER, RunSource, looks_like_store,
                                           resolve_source)
from spacrq.blockwise.watch_store import (MAX_WORKER_BLOCKS, block_detail, store_counts,
                                          worker_blocks)
from spacrq.blockwise.watch_tables import (BLOCK_COLUMNS, BLOCK_MEASURES, LIVE_WORKER_COLUMNS,
                                           NOT_MEASURED, WORKER_BLOCK_COLUMNS, WORKER_COLUMNS,
                                           block_table, format_when, live_worker_table,
                                           render_report, worker_table)
from spacrq.runfiles import RunFileError

__all__ = [
    "ReportWatcher", "RunSource", "resolve_source", "LiveRun", "PeakSeries", "Trend",
    "block_table", "worker_table", "live_worker_table", "render_report", "format_when",
    "store_counts", "block_detail", "worker_blocks",
    "BLOCK_MEASURES", "BLOCK_COLUMNS", "WORKER_COLUMNS", "LIVE_WORKER_COLUMNS",
    "WORKER_BLOCK_COLUMNS", "NOT_MEASURED", "MAX_WORKER_BLOCKS", "CHART_BUCKETS",
    "TIME_BUCKETS", "STALE_AFTER", "STORE_MARKER", "RUNS_FILE",
]


class ReportWatcher:
    """Everything the Run Report pane shows, read from disk on the poller's thread.

    ``poll(request)`` is the Poller's function.  The request says what the
    operator is looking at::

        {"opened": [paths opened with "Open…"], "selected": source key,
         "run_index": int | None, "worker": int | None, "block": int | None}

    It returns a plain snapshot (see :meth:`poll`), or None when nothing
    changed since the last one, so an idle night costs the GUI nothing.
    """

    def __init__(self, runs_dir: str | os.PathLike | None, *, discover_every: float = 10.0,
                 drill_every: float = 2.0, capacity: int = CHART_BUCKETS) -> None:
        self.runs_dir = Path(runs_dir) if runs_dir else None
        self.discover_every = discover_every
        self.drill_every = drill_every
        self.capacity = capacity
        self.sources: dict[str, RunSource] = {}
        self._discovered_at = -math.inf
        self._runs_dir_stamp: int | None = None
        self._unrecognised: list[Path] = []
        self._opened: tuple = ()
        self._open_problems: list[str] = []
        self._drill_key: tuple | None = None
        self._drill_at = -math.inf
        self._drill: dict = {}
        self._last_key: tuple | None = None

    def _runs_dir_changed(self) -> bool:
        """True when a folder was added to or removed from the runs folder since the last look."""
        try:
            stamp = os.stat(self.runs_dir).st_mtime_ns if self.runs_dir is not None else None
        except OSError:
            stamp = None
        changed = stamp != self._runs_dir_stamp
        self._runs_dir_stamp = stamp
        return changed

    def discover(self) -> None:
        """Find the tracking stores under the workspace's runs folder (one level deep).

        A folder the engine just made may not hold its files yet; such
        folders are remembered and looked at again on every poll until they
        become stores, so a short run is never missed.
        """
        found: set[str] = set()
        self._unrecognised = []
        if self.runs_dir is not None:
            try:
                entries = sorted(os.scandir(self.runs_dir), key=lambda e: e.name)
            except OSError:
                entries = []
            for entry in entries:
                if not entry.is_dir() or entry.name.startswith("."):
                    continue
                d = Path(entry.path)
                if not self._adopt(d, found):
                    self._unrecognised.append(d)
        for key, src in list(self.sources.items()):
            if not src.opened and key not in found:
                del self.sources[key]  # its folder was removed

    def _adopt(self, d: Path, found: set[str]) -> bool:
        """Watch ``d`` when it is a store; False when it is not (yet)."""
        if not looks_like_store(d):
            return False
        store = d.resolve()
        found.add(str(store))
        if str(store) not in self.sources:
            self.sources[str(store)] = RunSource(store, store / RUNS_FILE, capacity=self.capacity)
        return True

    def _recheck_unrecognised(self) -> None:
        still = []
        for d in self._unrecognised:
            if not self._adopt(d, set()):
                still.append(d)
        self._unrecognised = still[:100]

    def _open(self, paths: tuple) -> None:
        self._open_problems = []
        wanted = set()
        for path in paths:
            try:
                store, runs_file = resolve_source(path)
            except RunFileError as exc:
                self._open_problems.append(str(exc))
                continue
            src = RunSource(store, runs_file, opened=True, capacity=self.capacity)
            wanted.add(src.key)
            if src.key in self.sources:
                self.sources[src.key].opened = True
            else:
                self.sources[src.key] = src
        for key, src in list(self.sources.items()):
            if src.opened and key not in wanted:
                del self.sources[key]

    def poll(self, request: dict | None = None) -> dict | None:
        """One look at the disk.

        :returns: ``{"runs": [row per store, newest first], "problems": [...],
            "detail": the selected run's tables, text and charts or None,
            "drill": {"worker_blocks": ..., "block_record": ...}}``, or None
            when nothing changed.
        """
        request = request or {}
        now = time.monotonic()
        opened = tuple(str(p) for p in request.get("opened") or ())
        if opened != self._opened:
            self._opened = opened
            self._open(opened)
        if self._runs_dir_changed() or now - self._discovered_at >= self.discover_every:
            self._discovered_at = now
            self.discover()
        elif self._unrecognised:
            self._recheck_unrecognised()
        for src in self.sources.values():
            src.refresh()
        selected = self.sources.get(request.get("selected") or "")
        drill_changed = self._update_drill(selected, request, now)
        key = (tuple((k, s.version) for k, s in self.sources.items()), tuple(self._open_problems),
               request.get("selected"), request.get("run_index"), self._drill_key)
        if key == self._last_key and not drill_changed:
            return None
        self._last_key = key
        rows = sorted((s.row() for s in self.sources.values()),
                      key=lambda r: (r["state"] != "running", -(r["started_at"] or 0.0)))
        return {"runs": rows, "problems": list(self._open_problems),
                "selected": request.get("selected"), "run_index": request.get("run_index"),
                "detail": selected.detail(request.get("run_index")) if selected else None,
                "drill": dict(self._drill), "drill_for": (request.get("worker"), request.get("block"))}

    def _update_drill(self, src: RunSource | None, request: dict, now: float) -> bool:
        """Re-read the drill-down when asked for something else, or every few seconds while it runs."""
        worker, block = request.get("worker"), request.get("block")
        key = (src.key if src else None, worker, block)
        due = src is not None and src.state() == "running" and now - self._drill_at >= self.drill_every
        if key == self._drill_key and not due:
            return False
        self._drill_key, self._drill_at = key, now
        drill: dict[str, Any] = {}
        if src is not None and src.store_dir is not None and (src.store_dir / STORE_MARKER).exists():
            try:
                if worker is not None:
                    drill["worker_blocks"] = worker_blocks(src.store_dir, int(worker))
                if block is not None:
                    drill["block_record"] = block_detail(src.store_dir, int(block))
            except RunFileError as exc:
                drill["problem"] = str(exc)
        elif worker is not None or block is not None:
            drill["problem"] = "this run has no tracking store beside its runs.jsonl, so there are no per-block records to show"
        changed = drill != self._drill or due
        self._drill = drill
        return changed
