"""The Run Report pane's watch: the poller body and the operator's actions, no Qt.

The pane shows every tracking store in the workspace (and any opened by
path), the report of each run (one line of ``runs.jsonl``), and while a
task runs, live charts fed by its ``progress.json``.  Everything that
touches a file happens here, on the poller's thread; the window only draws
the frozen :class:`ReportSnapshot` this returns.

The operator's actions come in through :meth:`ReportWatcher.submit` and
each is answered with an :class:`~spacrq.watching.Outcome`:

``open`` (``path``)
    watch a store or ``runs.jsonl`` outside the workspace; ``MISSING`` when
    the path is not there, ``INVALID`` when it is neither.
``select`` (``key``, ``run_index``)
    show one task (and one of its past runs, or what matters now when None);
    ``MISSING`` when no such store is watched.
``worker`` (``worker_id``) / ``block`` (``block_id``)
    drill down to the blocks one worker ran and to one block's record in
    the tracking store; ``MISSING`` when the run has no store, ``INVALID``
    for a block outside the grid, ``FAILED`` when the store cannot be read.

Two rules keep a 10-hour run as cheap to watch as a one-minute one: files
are read incrementally (only the new bytes of ``runs.jsonl``, ``progress.json``
only when its stamp moved, only completions whose ``seq`` is new), and
chart series are bounded.  A poll checks :meth:`interrupted` between stores
and between the steps of a chart, so closing the window never waits for a
million-block store to be read.

The other parts of the poller body: :mod:`~spacrq.blockwise.watch_source`
(one store), :mod:`~spacrq.blockwise.watch_live` and
:mod:`~spacrq.blockwise.watch_series` (live charts), and
:mod:`~spacrq.blockwise.watch_charts` (a finished run's charts).
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spacrq.blockwise import pane
from spacrq.blockwise.report import RUNS_FILE, BlockOutside, ReportError
from spacrq.blockwise.report_store import block, worker_block_columns
from spacrq.blockwise.watch_series import CHART_BUCKETS
from spacrq.blockwise.watch_source import (RunDetail, RunSource, SourceMissing, looks_like_store,
                                           resolve_source)
from spacrq.runfiles import RunFileError, file_stamp
from spacrq.watching import Code, Outcome, Row, WatchBase

__all__ = ["ReportWatcher", "ReportSnapshot", "MAX_WORKER_BLOCKS"]

#: at most this many blocks are listed when drilling into one worker
MAX_WORKER_BLOCKS = 5000


@dataclass(frozen=True)
class ReportSnapshot:
    """One look at the disk, for the GUI thread.

    ``runs`` are the rows of the runs list (running first, then newest;
    each row's value a :class:`~spacrq.blockwise.pane.StoreLine`);
    ``selected``/``run_index`` the run ``detail`` is of (None: none, or it
    is gone); ``drill`` the drill-down tab; ``controls`` what can be done.
    """

    runs: tuple[Row, ...]
    selected: str | None
    run_index: int | None
    detail: RunDetail | None
    drill: pane.Drill
    controls: pane.Controls
    outcomes: tuple[Outcome, ...] = ()


class ReportWatcher(WatchBase):
    """Everything the Run Report pane shows, read from disk on the poller's thread.

    ``poll(view)`` needs nothing in ``view``: what the operator looks at is
    chosen through actions (see the module docstring).  It returns a
    :class:`ReportSnapshot`, or None when nothing changed since the last
    one, so an idle night costs the GUI nothing.
    """

    def __init__(self, runs_dir: str | os.PathLike | None, *, discover_every: float = 10.0,
                 drill_every: float = 2.0, capacity: int = CHART_BUCKETS) -> None:
        super().__init__()
        self.runs_dir = Path(runs_dir) if runs_dir else None
        self.discover_every = discover_every
        self.drill_every = drill_every
        self.capacity = capacity
        self.sources: dict[str, RunSource] = {}
        self._discovered_at = -math.inf
        self._runs_dir_stamp: tuple | None = None
        self._unrecognised: list[Path] = []
        self.selected: str | None = None
        self.run_index: int | None = None
        self.worker: int | None = None
        self.block: int | None = None
        self._drill_key: tuple | None = None
        self._drill_at = -math.inf
        self._drill = pane.Drill()
        self._drill_problem: tuple[Code, str] | None = None
        self._last_key: tuple | None = None

    # -- finding stores -------------------------------------------------------------
    def _runs_dir_changed(self) -> bool:
        """True when a folder was added to or removed from the runs folder since the last look."""
        stamp = file_stamp(self.runs_dir) if self.runs_dir is not None else None
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
                if self.interrupted():
                    return
                try:
                    folder = entry.is_dir()
                except OSError:  # a link that loops or leads nowhere readable: not a store
                    folder = False
                if not folder or entry.name.startswith("."):
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
        try:
            store = d.resolve()
        except OSError:  # a link loop under the folder
            return False
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

    # -- actions ------------------------------------------------------------------------
    def _open(self, token: int, path: Any) -> Outcome:
        try:
            store, runs_file = resolve_source(str(path))
        except SourceMissing as exc:
            return Outcome(token, "open", Code.MISSING, str(exc))
        except RunFileError as exc:
            return Outcome(token, "open", Code.INVALID, str(exc))
        src = RunSource(store, runs_file, opened=True, capacity=self.capacity)
        if src.key in self.sources:
            self.sources[src.key].opened = True
        else:
            self.sources[src.key] = src
        return Outcome(token, "open", Code.DONE, f"watching {src.key}", {"key": src.key})

    def _select(self, token: int, key: Any, run_index: Any) -> Outcome:
        index = None if run_index is None else _whole(run_index)
        if run_index is not None and (index is None or index < 0):
            return Outcome(token, "select", Code.INVALID,
                           f"a past run is chosen by its number from 0, not {run_index!r}")
        self.selected = None if key is None else str(key)
        self.run_index = index
        self.worker = self.block = None
        if self.selected is not None and self.selected not in self.sources:
            return Outcome(token, "select", Code.MISSING,
                           f"{self.selected} is no longer there: its folder was removed or moved")
        return Outcome(token, "select", Code.DONE)

    def _carry_out(self) -> list[Outcome]:
        """The actions submitted since the last poll; drill-downs are answered once read."""
        outcomes: list[Outcome] = []
        for token, action, args in self.take_submissions():
            if action == "open":
                outcomes.append(self._open(token, args.get("path")))
            elif action == "select":
                outcomes.append(self._select(token, args.get("key"), args.get("run_index")))
            elif action in ("worker", "block"):
                which = _whole(args.get(f"{action}_id"))
                if which is None:
                    outcomes.append(Outcome(token, action, Code.INVALID,
                                            f"a {action} is chosen by its number, not {args.get(f'{action}_id')!r}"))
                    continue
                if action == "worker" and which < 0:  # -1 is the store's "no worker ran it"
                    outcomes.append(Outcome(token, action, Code.INVALID,
                                            f"workers are numbered from 0, so there is no worker {which}"))
                    continue
                if action == "worker":
                    self.worker, self.block = which, None
                else:
                    self.block = which
                self._drill_key = None
                outcomes.append(Outcome(token, action, Code.DONE))
            else:
                outcomes.append(Outcome(token, action, Code.INVALID,
                                        f"the Run Report has no action {action!r}"))
        return outcomes

    # -- the poll -------------------------------------------------------------------------
    def _poll(self, view: Mapping[str, Any]) -> ReportSnapshot | None:
        now = time.monotonic()
        if self._runs_dir_changed() or now - self._discovered_at >= self.discover_every:
            self._discovered_at = now
            self.discover()
        elif self._unrecognised:
            self._recheck_unrecognised()
        outcomes = self._carry_out()
        for src in list(self.sources.values()):
            if self.interrupted():
                return None
            try:
                src.refresh()
            except Exception as exc:  # one unreadable store must not blank every other one
                src.fault(_unreadable(src.key, exc))
        selected = self.sources.get(self.selected or "")
        drill_changed = self._update_drill(selected, now)
        outcomes = [self._drill_outcome(o) for o in outcomes]
        key = (tuple((k, s.version) for k, s in self.sources.items()), self.selected,
               self.run_index, self._drill_key)
        if key == self._last_key and not drill_changed and not outcomes:
            return None
        try:
            detail = selected.detail(self.run_index, self.interrupted) if selected else None
        except Exception as exc:  # the runs list and the actions' answers still go out
            selected.fault(_unreadable(selected.key, exc))
            detail = None
        if self.interrupted():
            return None
        self._last_key = key
        runs = pane.runs_table([s.row() for s in self.sources.values()]).rows
        return ReportSnapshot(
            runs=runs, selected=self.selected, run_index=self.run_index, detail=detail,
            drill=self._drill, outcomes=tuple(outcomes),
            controls=pane.controls(None if detail is None else detail.has_store,
                                   bool(detail and detail.workers.rows),
                                   bool(self._drill.blocks and self._drill.blocks.rows)))

    def _drill_outcome(self, outcome: Outcome) -> Outcome:
        """A drill-down's answer says whether the store gave what was asked."""
        if outcome.action not in ("worker", "block") or self._drill_problem is None:
            return outcome
        code, message = self._drill_problem
        return Outcome(outcome.token, outcome.action, code, message)

    def _update_drill(self, src: RunSource | None, now: float) -> bool:
        """Re-read the drill-down when asked for something else, or every few seconds while it runs."""
        key = (src.key if src else None, self.worker, self.block)
        due = src is not None and src.state() == "running" and now - self._drill_at >= self.drill_every
        if key == self._drill_key and not due:
            return False
        self._drill_key, self._drill_at = key, now
        self._drill_problem = None
        worker, which = self.worker, self.block
        listing = None
        total = None
        record = note = ""
        if worker is None and which is None:
            pass
        elif src is None or not src.has_store():
            self._drill_problem = (Code.MISSING, pane.NO_STORE)
            note = pane.NO_STORE
        else:
            try:
                if worker is not None:
                    columns = worker_block_columns(src.store_dir, worker, MAX_WORKER_BLOCKS)
                    listing = pane.worker_blocks_table(worker, columns, MAX_WORKER_BLOCKS)
                    total = None if columns is None else int(columns["total"])
                    note = listing.note
                if which is not None:
                    record = pane.block_text(block(src.store_dir, which))
            except BlockOutside as exc:
                self._drill_problem, note = (Code.INVALID, str(exc)), str(exc)
            except ReportError as exc:
                self._drill_problem, note = (Code.FAILED, str(exc)), str(exc)
            except Exception as exc:  # a store damaged in a way no check foresaw
                listing, record, note = None, "", _unreadable(src.key, exc)
                self._drill_problem = (Code.FAILED, note)
        drill = pane.Drill(worker=worker, block=which, heading=pane.drill_heading(worker, listing, total),
                           blocks=listing, record=record, note=note)
        changed = drill != self._drill or due
        self._drill = drill
        return changed


_whole = pane.whole_number


def _unreadable(key: str, exc: Exception) -> str:
    """One sentence for a store that broke a reader in an unforeseen way."""
    reason = (str(exc).splitlines() or [""])[0][:200] or type(exc).__name__
    return (f"{key} could not be read ({type(exc).__name__}: {reason}); the other runs are "
            "shown, and it is read again at the next look")
