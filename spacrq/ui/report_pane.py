"""The Run Report pane: blockwise runs, their figures, and the live charts of the one running.

Left, the runs found in the workspace (and any store or ``runs.jsonl``
opened by path), one row per task with a child per past run.  Right, for
the selected task: live charts while it runs, the block and worker summary
tables, a drill-down from a worker to its blocks and from a block to its
tracking-store record, and the report's text panel.

The pane reads no file itself.  Its watch
(:class:`~spacrq.blockwise.watch.ReportWatcher`) runs on the poller's thread
at 2 Hz; the operator's choices go to it as actions (``open``, ``select``,
``worker``, ``block``) and come back in frozen snapshots whose rows, texts
and enabled actions (:mod:`spacrq.blockwise.pane`) are already made.
Closing the pane stops the watch within a second; the runs go on.

The runs list stays a tree (a ``QStandardItemModel``, not a
:class:`~spacrq.ui.table_model.RowTable`) because each task's past runs sit
under it: the operator opens a task to compare last night with the night
before.  Every other table is a ``RowTable``.
"""
from __future__ import annotations

import os

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QFont, QFontDatabase, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QHBoxLayout, QHeaderView, QLabel,
                               QMenu, QPlainTextEdit, QPushButton, QSplitter, QTableView,
                               QTabWidget, QTreeView, QVBoxLayout, QWidget)

from spacrq.blockwise import pane as logic
from spacrq.blockwise.watch import ReportSnapshot, ReportWatcher
from spacrq.ui.drops import ReportDrops
from spacrq.ui.status import first_few
from spacrq.ui.pane_base import PaneBase
from spacrq.ui.report_charts import LiveCharts
from spacrq.ui.table_model import KEY_ROLE, SORT_ROLE, Column, RowTable
from spacrq.watching import Code, Outcome, Row
from spacrq.workspace import Workspace

POLL_SECONDS = 0.5
#: which run of its store a runs-list item is (None: the store's row itself)
RUN_INDEX_ROLE = int(Qt.ItemDataRole.UserRole) + 11


def _columns(titles) -> list[Column]:
    """Figures right-aligned, the first column (a label) left."""
    return [Column(title, right=i > 0) for i, title in enumerate(titles)]


def _table(model: RowTable, parent: QWidget) -> QTableView:
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


class RunsTree(QStandardItemModel):
    """The runs list: one row per store, one child per run in its runs.jsonl.

    Fed the rows the watch made; updated in place (text set only when it
    differs, new stores and runs appended, vanished stores removed), so the
    operator's selection and open branches survive every poll.
    """

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setHorizontalHeaderLabels(list(logic.RUN_COLUMNS))

    def index_of(self, key: str, run_index: int | None = None) -> QModelIndex:
        """The model index of a store's row, or of one of its runs."""
        row = self._store_row(key)
        if row < 0:
            return QModelIndex()
        parent = self.item(row, 0)
        if run_index is None or not 0 <= run_index < parent.rowCount():
            return parent.index()
        return parent.child(run_index, 0).index()

    def _store_row(self, key: str) -> int:
        for i in range(self.rowCount()):
            if self.item(i, 0).data(KEY_ROLE) == key:
                return i
        return -1

    @staticmethod
    def _items(key: str, run_index: int | None, rank: float) -> list[QStandardItem]:
        items = [QStandardItem() for _ in logic.RUN_COLUMNS]
        for it in items:
            it.setEditable(False)
        items[0].setData(key, KEY_ROLE)
        items[0].setData(run_index, RUN_INDEX_ROLE)
        items[0].setData(rank, SORT_ROLE)
        return items

    @staticmethod
    def _fill(items, row: Row) -> None:
        for col, item in enumerate(items):
            text, tip = row.cells[col], row.tip(col)
            if item.text() != text:
                item.setText(text)
            if item.toolTip() != tip:
                item.setToolTip(tip)

    def update_runs(self, rows: tuple[Row, ...]) -> None:
        keys = {r.key for r in rows}
        for i in reversed(range(self.rowCount())):
            if self.item(i, 0).data(KEY_ROLE) not in keys:
                self.removeRow(i)
        for row in rows:
            i = self._store_row(row.key)
            if i < 0:
                self.appendRow(self._items(row.key, None, row.sort[0]))
                i = self.rowCount() - 1
            self._fill([self.item(i, c) for c in range(len(logic.RUN_COLUMNS))], row)
            parent = self.item(i, 0)
            if parent.data(SORT_ROLE) != row.sort[0]:
                parent.setData(row.sort[0], SORT_ROLE)
            self._update_children(parent, row.key, row.value.runs)

    def _update_children(self, parent: QStandardItem, key: str, runs: tuple[Row, ...]) -> None:
        if parent.rowCount() > len(runs):  # runs.jsonl was replaced by a shorter one
            parent.removeRows(len(runs), parent.rowCount() - len(runs))
        for n, run in enumerate(runs):
            if n >= parent.rowCount():
                parent.appendRow(self._items(key, n, run.sort[0]))  # newest run first
            self._fill([parent.child(n, c) for c in range(len(logic.RUN_COLUMNS))], run)


class RunReportPane(PaneBase):
    """Blockwise runs of the workspace: tables, live charts, drill-downs, the text report."""

    def __init__(self, workspace: Workspace, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self._choice: tuple[str | None, int | None] = (None, None)
        self._drill_choice: tuple[int | None, int | None] = (None, None)
        #: why the last drill-down asked for was refused (kept until the next choice)
        self._drill_refusal = ""
        self._states: dict[str, str] = {}
        self._last_detail_key: tuple | None = None
        self._open_problems: list[str] = []
        self.controls = logic.controls(None)
        self.snapshots = 0  # how many snapshots were drawn (tests wait on it)
        self._build()
        # a store folder or runs.jsonl dropped anywhere on the pane opens like Open… does
        self.drops = ReportDrops(self, self.open_store)
        self.drops.unknown.connect(self.show_open_problem)
        self.start_watch(ReportWatcher(workspace.runs), POLL_SECONDS)

    # -- layout --------------------------------------------------------------
    def _build(self) -> None:
        left = QWidget(self)
        bar = QHBoxLayout()
        title = QLabel("<b>Blockwise runs</b>", left)
        # a push button with a menu: its arrow gets room of its own (a tool button's arrow
        # was drawn over the end of "Open…")
        self.open_button = QPushButton("Open…", left)
        self.open_button.setToolTip(self.controls.open_store.tip)
        menu = QMenu(self.open_button)
        menu.addAction("runs.jsonl file…", self._choose_file)
        menu.addAction("Tracking store folder…", self._choose_folder)
        self.open_button.setMenu(menu)
        bar.addWidget(title)
        bar.addStretch(1)
        bar.addWidget(self.open_button)
        self.runs_model = RunsTree(self)
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
        self.block_model = RowTable(_columns(logic.BLOCK_COLUMNS), parent=page)
        self.block_view = _table(self.block_model, page)
        self.block_note = _note(page)
        self.worker_model = RowTable(_columns(logic.WORKER_COLUMNS), parent=page)
        self.worker_view = _table(self.worker_model, page)
        self.worker_view.setToolTip(self.controls.worker_blocks.tip)
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
        self.drill_heading = QLabel(logic.drill_heading(None, None, None), page)
        self.drill_heading.setWordWrap(True)
        self.worker_blocks_model = RowTable(_columns(logic.WORKER_BLOCK_COLUMNS), parent=page)
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
    def open_store(self, path: str | os.PathLike) -> int:
        """Watch a tracking store folder or a runs.jsonl from anywhere; the watch checks the path.

        Returns the action's token; a path that is not a store is said under the runs list.
        """
        return self.ask("open", path=str(path))

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a run report", str(self.workspace.root),
                                              "Run reports (runs.jsonl *.jsonl zarr.json);;All files (*)")
        if path:
            self.open_store(path)

    def _choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a tracking store", str(self.workspace.runs))
        if path:
            self.open_store(path)

    def select(self, key: str, run_index: int | None = None) -> None:
        """Show one task (and one of its past runs, or what matters now when None)."""
        if (key, run_index) == self._choice:
            return
        self._choice = (key, run_index)
        self._drill_choice = (None, None)
        self._drill_refusal = ""
        self.ask("select", key=key, run_index=run_index)
        index = self.runs_proxy.mapFromSource(self.runs_model.index_of(key, run_index))
        if index.isValid() and index != self.runs_view.currentIndex().siblingAtColumn(0):
            self.runs_view.setCurrentIndex(index)
        self.worker_blocks_model.set_rows(())
        self.block_detail.clear()
        self.drill_heading.setText(logic.drill_heading(None, None, None))
        _show_note(self.drill_note, "")

    def show_worker(self, worker_id: int) -> None:
        """Drill down: the blocks this worker ran, from the tracking store.

        The watch checks the number: anything but a worker's number is
        answered with a sentence in the drill-down, never an exception here.
        """
        number = logic.whole_number(worker_id)
        if number is not None:
            self._drill_choice = (number, None)
        self._drill_refusal = ""
        self.ask("worker", worker_id=worker_id)
        self.block_detail.clear()
        self.drill_heading.setText(f"Blocks run by worker {worker_id} (reading the tracking store…)")
        self.tabs.setCurrentIndex(2)

    def show_block(self, block_id: int) -> None:
        """Drill down: one block's tracking-store record (the watch checks the number)."""
        number = logic.whole_number(block_id)
        if number is not None:
            self._drill_choice = (self._drill_choice[0], number)
        self._drill_refusal = ""
        self.ask("block", block_id=block_id)

    def _on_run_chosen(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            return
        first = current.siblingAtColumn(0)
        key = first.data(KEY_ROLE)
        if key:
            self.select(key, first.data(RUN_INDEX_ROLE))

    def _on_worker_chosen(self, index: QModelIndex) -> None:
        if not self.controls.worker_blocks.enabled:
            self.tabs.setCurrentIndex(2)
            _show_note(self.drill_note, self.controls.worker_blocks.tip)
            return
        key = self.worker_model.key_at(index.row())
        if key is not None:
            self.show_worker(key)

    def _on_block_chosen(self, current: QModelIndex, _previous: QModelIndex) -> None:
        key = self.worker_blocks_model.key_at(current.row()) if current.isValid() else None
        if key is not None:
            self.show_block(key)

    # -- answers -------------------------------------------------------------------
    def poll_failed(self, message: str) -> None:
        _show_note(self.problems, f"The run report could not be read: {message}")

    def show_open_problem(self, message: str) -> None:
        """Say under the runs list why something could not be opened (the last three are kept)."""
        self._open_problems = [*self._open_problems[-2:], message]
        _show_note(self.open_problems, _sentences(self._open_problems))

    def outcome_arrived(self, outcome: Outcome) -> None:
        if outcome.action == "open":
            if outcome.code is not Code.DONE:
                self.show_open_problem(outcome.message)
        elif outcome.action in ("worker", "block") and outcome.code is not Code.DONE:
            if outcome.code is Code.INVALID:  # nothing was read: say why until the next choice
                self._drill_refusal = outcome.message
                if outcome.action == "worker":  # the heading stops saying the store is being read
                    self.drill_heading.setText(logic.drill_heading(None, None, None))
            _show_note(self.drill_note, outcome.message)

    def show_snapshot(self, snap: ReportSnapshot) -> None:
        self.runs_model.update_runs(snap.runs)
        self._announce_endings(snap.runs)
        if self._choice[0] is None and snap.runs:
            self.runs_view.setCurrentIndex(self.runs_proxy.index(0, 0))  # → _on_run_chosen → select()
        self.snapshots += 1
        if (snap.selected, snap.run_index) != self._choice:
            return  # read before the operator chose another run; the next snapshot is for it
        self._set_controls(snap.controls)
        if snap.detail is not None:
            self._show_detail(snap.detail)
        elif self._choice[0] is not None:
            self._show_gone()
        if (snap.drill.worker, snap.drill.block) == self._drill_choice:
            self._show_drill(snap.drill)

    def _set_controls(self, controls: logic.Controls) -> None:
        self.controls = controls
        if self.worker_view.toolTip() != controls.worker_blocks.tip:
            self.worker_view.setToolTip(controls.worker_blocks.tip)
        self.open_button.setEnabled(controls.open_store.enabled)

    def _announce_endings(self, rows: tuple[Row, ...]) -> None:
        """One line for the status bar and tray when a run watched while running ends."""
        for row in rows:
            line: logic.StoreLine = row.value
            message = logic.ending_message(self._states.get(line.key), line)
            self._states[line.key] = line.state
            if message:
                self.notify.emit(message)

    def _show_detail(self, d) -> None:
        if self.heading.text() != d.heading:
            self.heading.setText(d.heading)
        self.heading.setToolTip(d.store)
        _show_note(self.problems, _sentences(d.problems))
        self.block_model.set_rows(d.blocks.rows)
        self.block_view.setVisible(bool(d.blocks.rows))
        _fit_height(self.block_view, len(d.blocks.rows))
        _show_note(self.block_note, d.blocks.note)
        self.worker_model.set_columns(_columns(d.workers.columns))
        self.worker_model.set_rows(d.workers.rows)
        self.worker_view.setVisible(bool(d.workers.rows))
        _show_note(self.worker_note, d.workers.note)
        if self.text.toPlainText() != d.text:
            self.text.setPlainText(d.text)
        self.charts.show_charts(d.charts, d.charts_note)
        detail_key = (d.key, d.run_index, d.live)
        if detail_key != self._last_detail_key:  # a different run: open the tab that matters
            self._last_detail_key = detail_key
            if self.tabs.currentIndex() in (0, 1):  # the charts when there are any, else the figures
                self.tabs.setCurrentIndex(0 if d.live or d.charts else 1)

    def running_now(self) -> tuple[str, ...]:
        tasks = sorted(str(key).rstrip("/").rsplit("/", 1)[-1]  # keys are store paths: the folder is the task
                       for key, state in self._states.items() if state == "running")
        return (f"blockwise {first_few(tasks)}",) if tasks else ()

    def _show_gone(self) -> None:
        """The selected task's folder was removed (or an opened path closed): say so, show nothing stale."""
        self.heading.setText(logic.GONE_HEADING)
        for model in (self.block_model, self.worker_model, self.worker_blocks_model):
            model.set_rows(())
        self.text.clear()
        self.charts.show_charts(None, "No figures: the selected run's folder is gone.")
        self._last_detail_key = None

    def _show_drill(self, drill: logic.Drill) -> None:
        if drill.worker is not None:
            self.drill_heading.setText(drill.heading)
            self.worker_blocks_model.set_rows(drill.blocks.rows if drill.blocks else ())
        _show_note(self.drill_note, drill.note or self._drill_refusal)
        if drill.record and self.block_detail.toPlainText() != drill.record:
            self.block_detail.setPlainText(drill.record)

