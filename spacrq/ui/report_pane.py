"""The Run Report pane: blockwise runs, their figures, and the live charts of the one running.

Left, the runs found in the workspace (and any store or ``runs.jsonl``
opened by path), one row per task with a child per past run.  Right, for
the selected task: live charts while it runs, the block and worker summary
tables, a drill-down from a worker to its blocks and from a block to its
tracking-store record, and the report's text panel.

The pane reads no file itself.  One :class:`~spacrq.ui.poller.Poller` runs
:class:`~spacrq.blockwise.watch.ReportWatcher` at 2 Hz on its own thread;
the pane tells it what the operator looks at (``request``) and draws the
snapshots it sends back.  Closing the pane (``shutdown``) stops the poller;
the runs go on.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QHBoxLayout, QHeaderView, QLabel,
                               QMenu, QPlainTextEdit, QSplitter, QTableView, QTabWidget,
                               QToolButton, QTreeView, QVBoxLayout, QWidget)

from spacrq.blockwise.watch import BLOCK_COLUMNS, WORKER_BLOCK_COLUMNS, ReportWatcher
from spacrq.ui.poller import Poller
from spacrq.ui.report_charts import LiveCharts
from spacrq.ui.report_models import KEY_ROLE, RUN_INDEX_ROLE, SORT_ROLE, RowsModel, RunsModel
from spacrq.workspace import Workspace

POLL_SECONDS = 0.5
ENDED = {"finished": "finished", "failed": "failed", "interrupted": "was interrupted"}


def _table(model: RowsModel, parent: QWidget) -> QTableView:
    view = QTableView(parent)
    view.setModel(model)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.setAlternatingRowColors(True)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(22)
    view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    view.horizontalHeader().setStretchLastSection(False)
    view.horizontalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    # rows appended to an empty table do not make the header measure them: ask it to,
    # or a drill-down listed into a fresh table shows every figure cut to "1…"
    model.rowsInserted.connect(view.horizontalHeader().resizeSections)
    return view


def _fit_height(view: QTableView, rows: int) -> None:
    """A short table as tall as its rows, so the figures sit together instead of in a void."""
    header = view.horizontalHeader().height() or 24
    view.setFixedHeight(header + rows * view.verticalHeader().defaultSectionSize() + 2 * view.frameWidth() + 2)


def _note(parent: QWidget) -> QLabel:
    label = QLabel(parent)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setStyleSheet("color: #555; font-style: italic;")
    label.hide()
    return label


def _sentences(lines) -> str:
    """Problems as sentences, one a line, each starting with a capital."""
    return "\n".join(line[:1].upper() + line[1:] for line in lines or [] if line)


def _show_note(label: QLabel, text: str) -> None:
    if label.text() != text:
        label.setText(text)
    label.setVisible(bool(text))


def _monospace_editor(parent: QWidget) -> QPlainTextEdit:
    """Read-only, selectable and copyable: the operator pastes it into a lab notebook."""
    edit = QPlainTextEdit(parent)
    edit.setReadOnly(True)
    edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
    edit.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                 | Qt.TextInteractionFlag.TextSelectableByKeyboard)
    edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    return edit


class RunReportPane(QWidget):
    """Blockwise runs of the workspace: tables, live charts, drill-downs, the text report."""

    notify = Signal(str)

    def __init__(self, workspace: Workspace, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self._request: dict = {"opened": [], "selected": None, "run_index": None,
                               "worker": None, "block": None}
        self._states: dict[str, str] = {}
        self._last_detail_key: tuple | None = None
        self.snapshots = 0  # how many snapshots were drawn (tests wait on it)
        self._build()
        self.watcher = ReportWatcher(workspace.runs)
        self.poller = Poller(self.watcher.poll, POLL_SECONDS, self)
        self.poller.snapshot.connect(self._on_snapshot)
        self.poller.error.connect(self._on_error)
        self.poller.request(**self._request)
        self.poller.start()

    # -- layout --------------------------------------------------------------
    def _build(self) -> None:
        left = QWidget(self)
        bar = QHBoxLayout()
        title = QLabel("<b>Blockwise runs</b>", left)
        self.open_button = QToolButton(left)
        self.open_button.setText("Open…")
        self.open_button.setToolTip("Open a runs.jsonl or a task's tracking store from anywhere")
        self.open_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.open_button)
        menu.addAction("runs.jsonl file…", self._choose_file)
        menu.addAction("Tracking store folder…", self._choose_folder)
        self.open_button.setMenu(menu)
        bar.addWidget(title)
        bar.addStretch(1)
        bar.addWidget(self.open_button)
        self.runs_model = RunsModel(self)
        self.runs_proxy = QSortFilterProxyModel(self)
        self.runs_proxy.setSourceModel(self.runs_model)
        self.runs_proxy.setSortRole(SORT_ROLE)
        self.runs_proxy.setDynamicSortFilter(True)
        self.runs_proxy.sort(0, Qt.SortOrder.DescendingOrder)
        self.runs_view = QTreeView(left)
        self.runs_view.setModel(self.runs_proxy)
        self.runs_view.setUniformRowHeights(True)
        self.runs_view.setAlternatingRowColors(True)
        self.runs_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.runs_view.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.runs_view.selectionModel().currentChanged.connect(self._on_run_chosen)
        self.open_problems = _note(left)
        self.open_problems.setStyleSheet("color: #a40000;")
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addLayout(bar)
        lv.addWidget(self.runs_view, 1)
        lv.addWidget(self.open_problems)

        right = QWidget(self)
        self.heading = QLabel("Choose a run on the left.", right)
        self.heading.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        font = QFont(self.heading.font())
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.heading.setFont(font)
        self.problems = _note(right)
        self.problems.setStyleSheet("color: #a40000;")
        self.tabs = QTabWidget(right)
        self.charts = LiveCharts(self.tabs)
        self.tabs.addTab(self.charts, "Charts")
        self.tabs.addTab(self._build_summary(), "Summary")
        self.tabs.addTab(self._build_drill(), "Worker / block")
        self.text = _monospace_editor(self.tabs)
        self.tabs.addTab(self.text, "Text")
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        rv.addWidget(self.heading)
        rv.addWidget(self.problems)
        rv.addWidget(self.tabs, 1)

        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 5)
        split.setSizes([380, 900])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(split)

    def _build_summary(self) -> QWidget:
        page = QWidget(self)
        self.block_model = RowsModel(BLOCK_COLUMNS, page)
        self.block_view = _table(self.block_model, page)
        self.block_note = _note(page)
        self.worker_model = RowsModel((), page)
        self.worker_view = _table(self.worker_model, page)
        self.worker_view.setToolTip("Double-click a worker to list the blocks it ran")
        self.worker_view.doubleClicked.connect(self._on_worker_chosen)
        self.worker_note = _note(page)
        v = QVBoxLayout(page)
        v.addWidget(QLabel("<b>Blocks</b>", page))
        v.addWidget(self.block_note)
        v.addWidget(self.block_view)
        v.addSpacing(8)
        v.addWidget(QLabel("<b>Workers</b> (double-click one for its blocks)", page))
        v.addWidget(self.worker_note)
        v.addWidget(self.worker_view, 1)
        return page

    def _build_drill(self) -> QWidget:
        page = QWidget(self)
        self.drill_heading = QLabel("Double-click a worker in the Summary to list its blocks.", page)
        self.drill_heading.setWordWrap(True)
        self.worker_blocks_model = RowsModel(WORKER_BLOCK_COLUMNS, page)
        self.worker_blocks_view = _table(self.worker_blocks_model, page)
        self.worker_blocks_view.selectionModel().currentRowChanged.connect(self._on_block_chosen)
        self.drill_note = _note(page)
        self.block_detail = _monospace_editor(page)
        self.block_detail.setPlaceholderText("Select a block to see its tracking-store record.")
        split = QSplitter(Qt.Orientation.Horizontal, page)
        split.addWidget(self.worker_blocks_view)
        split.addWidget(self.block_detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        v = QVBoxLayout(page)
        v.addWidget(self.drill_heading)
        v.addWidget(self.drill_note)
        v.addWidget(split, 1)
        return page

    # -- the operator's choices -------------------------------------------------
    def _ask(self, **changes) -> None:
        self._request.update(changes)
        self.poller.request(**changes)

    def open_path(self, path: str | Path) -> None:
        """Watch a runs.jsonl or tracking store outside the workspace (the watcher checks it)."""
        path = str(path)
        if path not in self._request["opened"]:
            self._ask(opened=[*self._request["opened"], path])

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a run report", str(self.workspace.root),
                                              "Run reports (runs.jsonl *.jsonl zarr.json);;All files (*)")
        if path:
            self.open_path(path)

    def _choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a tracking store", str(self.workspace.runs))
        if path:
            self.open_path(path)

    def select(self, key: str, run_index: int | None = None) -> None:
        """Show one task (and one of its past runs, or what matters now when None)."""
        if (key, run_index) == (self._request["selected"], self._request["run_index"]):
            return
        self._ask(selected=key, run_index=run_index, worker=None, block=None)
        index = self.runs_proxy.mapFromSource(self.runs_model.index_of(key, run_index))
        if index.isValid() and index != self.runs_view.currentIndex().siblingAtColumn(0):
            self.runs_view.setCurrentIndex(index)
        self.worker_blocks_model.set_rows(WORKER_BLOCK_COLUMNS, [])
        self.block_detail.clear()
        self.drill_heading.setText("Double-click a worker in the Summary to list its blocks.")
        _show_note(self.drill_note, "")

    def show_worker(self, worker_id: int) -> None:
        """Drill down: the blocks this worker ran, from the tracking store."""
        self._ask(worker=int(worker_id), block=None)
        self.block_detail.clear()
        self.drill_heading.setText(f"Blocks run by worker {worker_id} (reading the tracking store…)")
        self.tabs.setCurrentIndex(2)

    def show_block(self, block_id: int) -> None:
        """Drill down: one block's tracking-store record."""
        self._ask(block=int(block_id))

    def _on_run_chosen(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            return
        first = current.siblingAtColumn(0)
        key = first.data(KEY_ROLE)
        run_index = first.data(RUN_INDEX_ROLE)
        if key:
            self.select(key, run_index)

    def _on_worker_chosen(self, index: QModelIndex) -> None:
        key = self.worker_model.key_at(index.row())
        if key is not None:
            self.show_worker(key)

    def _on_block_chosen(self, current: QModelIndex, _previous: QModelIndex) -> None:
        key = self.worker_blocks_model.key_at(current.row()) if current.isValid() else None
        if key is not None:
            self.show_block(key)

    # -- snapshots ---------------------------------------------------------------
    def _on_error(self, message: str) -> None:
        _show_note(self.problems, f"The run report could not be read: {message}")

    def _on_snapshot(self, snap: dict) -> None:
        self.runs_model.update_runs(snap["runs"])
        _show_note(self.open_problems, _sentences(snap.get("problems")))
        self._announce_endings(snap["runs"])
        if self._request["selected"] is None and snap["runs"]:
            self._select_row(0)
        self.snapshots += 1
        asked = (self._request["selected"], self._request["run_index"])
        if (snap.get("selected"), snap.get("run_index")) != asked:
            return  # read before the operator chose another run; the next snapshot is for it
        detail = snap.get("detail")
        if detail is not None:
            self._show_detail(detail)
        elif self._request["selected"] is not None:
            self._show_gone()
        if tuple(snap.get("drill_for") or ()) == (self._request["worker"], self._request["block"]):
            self._show_drill(snap.get("drill") or {})

    def _select_row(self, row: int) -> None:
        index = self.runs_proxy.index(row, 0)
        self.runs_view.setCurrentIndex(index)  # → _on_run_chosen → select()

    def _announce_endings(self, rows: list[dict]) -> None:
        """One line for the status bar and tray when a run watched while running ends."""
        for row in rows:
            before = self._states.get(row["key"])
            self._states[row["key"]] = row["state"]
            if before == "running" and row["state"] in ENDED:
                done, total, failed = row.get("done"), row.get("total"), row.get("failed")
                figures = [f"{done:,} of {total:,} blocks done"] if done is not None and total else []
                figures += [f"{failed:,} failed"] if failed else []
                suffix = f" ({', '.join(figures)})" if figures else ""
                self.notify.emit(f"Blockwise task {row['task_id']} {ENDED[row['state']]}{suffix}")

    def _show_detail(self, d: dict) -> None:
        counts = d.get("counts") or {}
        parts = [f"<b>{d['task_id']}</b> — {d['state']}"]
        if counts.get("total"):
            parts.append(f"{counts.get('done', 0):,} of {counts['total']:,} blocks done")
        if counts.get("failed"):
            parts.append(f"{counts['failed']:,} failed")
        if counts.get("orphaned"):
            parts.append(f"{counts['orphaned']:,} orphaned")
        if counts.get("in_flight"):
            parts.append(f"{counts['in_flight']:,} in flight")
        if d.get("run_index") is not None and not d.get("live"):
            parts.append(f"run {d['run_index'] + 1}")
        cluster = (((d.get("report") or {}).get("outcome") or {}).get("cluster")
                   if not d.get("live") else (d.get("ran_on") or {}).get("cluster"))
        if isinstance(cluster, str) and cluster:  # a dask run says which cluster ran it
            parts.append("on " + cluster[:80].replace("&", "&amp;").replace("<", "&lt;"))
        heading = " · ".join(parts)
        if self.heading.text() != heading:
            self.heading.setText(heading)
        self.heading.setToolTip(d.get("store") or "")
        _show_note(self.problems, _sentences(d.get("problems")))
        self.block_model.set_rows(BLOCK_COLUMNS, d["block_rows"])
        self.block_view.setVisible(bool(d["block_rows"]))
        _fit_height(self.block_view, len(d["block_rows"]))
        _show_note(self.block_note, d["block_note"])
        self.worker_model.set_rows(d["worker_columns"], d["worker_rows"])
        self.worker_view.setVisible(bool(d["worker_rows"]))
        _show_note(self.worker_note, d["worker_note"])
        if self.text.toPlainText() != d["text"]:
            self.text.setPlainText(d["text"])
        self.charts.show_charts(d.get("charts"), d.get("charts_note") or "")
        detail_key = (d["key"], d.get("run_index"), d.get("live"))
        if detail_key != self._last_detail_key:  # a different run: open the tab that matters
            self._last_detail_key = detail_key
            if self.tabs.currentIndex() in (0, 1):  # the charts when there are any, else the figures
                self.tabs.setCurrentIndex(0 if d.get("live") or d.get("charts") else 1)

    def _show_gone(self) -> None:
        """The selected task's folder was removed (or an opened path closed): say so, show nothing stale."""
        self.heading.setText("The selected run is no longer there: its folder was removed or moved.")
        for model, columns in ((self.block_model, BLOCK_COLUMNS), (self.worker_model, ()),
                               (self.worker_blocks_model, WORKER_BLOCK_COLUMNS)):
            model.set_rows(columns, [])
        self.text.clear()
        self.charts.show_charts(None, "No figures: the selected run's folder is gone.")
        self._last_detail_key = None

    def _show_drill(self, drill: dict) -> None:
        listing = drill.get("worker_blocks")
        if listing is not None:
            self.drill_heading.setText(f"Blocks run by worker {listing['worker_id']}: "
                                       f"{listing['total']:,} (select one for its record)")
            self.worker_blocks_model.set_rows(WORKER_BLOCK_COLUMNS, listing["rows"])
        note = drill.get("problem") or (listing or {}).get("note") or ""
        _show_note(self.drill_note, note)
        record = drill.get("block_record")
        if record is not None:
            width = max(len(label) for label, _ in record["fields"])
            lines = [f"{label:<{width}}  {value}" for label, value in record["fields"]]
            if record.get("note"):
                lines += ["", record["note"]]
            text = "\n".join(lines)
            if self.block_detail.toPlainText() != text:
                self.block_detail.setPlainText(text)

    # -- lifetime -----------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop watching; the runs themselves go on."""
        self.poller.stop()
