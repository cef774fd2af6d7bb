"""Sorting the queue table by a column without ever changing the order the queue runs in.

An operator sorts by status to find the failed jobs, or by time to find the
slow one; the queue still runs top to bottom in its ``#`` order, and a
sorted view that looked like a reordered queue would mislead.  So:

* sorting is a :class:`QSortFilterProxyModel` over the pane's
  :class:`~spacrq.ui.table_model.RowTable`, keyed on
  :data:`~spacrq.ui.table_model.SORT_ROLE` (numbers and times sort as
  numbers); the rows, and the file, keep their order;
* while the view is sorted by anything but ``#`` ascending, a line above the
  table says "Sorted by Status — the queue still runs in # order" with a
  **Run order** button that puts the ``#`` sort back;
* selections are read and made in run order (:meth:`QueueSorting.
  selected_rows`, :meth:`select_rows`), so Move up/down, Remove and the log
  act on the jobs the operator picked; the pane turns Move off while sorted
  by another column (moving a job "up" in a view sorted by status means
  nothing), with :data:`MOVE_TIP` saying why.
"""
from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import (QItemSelection, QItemSelectionModel, QModelIndex, QObject,
                            QSortFilterProxyModel, Qt, Signal)
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QTableView, QWidget

from spacrq.ui.table_model import SORT_ROLE, RowTable

__all__ = ["QueueSorting", "RunOrderProxy", "MOVE_TIP", "sorted_caption"]

#: why Move up / Move down are off while the view is sorted by another column
MOVE_TIP = ("Move changes the run order, which the sorted view does not show: press "
            "Run order first.")


def sorted_caption(column: str) -> str:
    """The line above a sorted table."""
    return f"Sorted by {column} — the queue still runs in # order."


class RunOrderProxy(QSortFilterProxyModel):
    """The queue's rows, sorted for the eye only (by their sort keys)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self.setDynamicSortFilter(True)

    def lessThan(self, left: QModelIndex, right: QModelIndex) -> bool:  # noqa: N802 (Qt)
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        if a in (None, "") or b in (None, ""):  # no value (never ran): after every value
            return a not in (None, "") and b in (None, "")
        try:
            if a != b:
                return a < b
        except TypeError:  # a number beside a text: compare as text
            if str(a) != str(b):
                return str(a) < str(b)
        return left.row() < right.row()  # ties keep the run order


class QueueSorting(QObject):
    """Puts ``table`` over a sorting proxy of ``source``; owns the "sorted" line.

    ``banner`` is the widget to place above the table (hidden in run order).
    """

    #: True when the view is sorted by something other than the run order
    sorted_changed = Signal(bool)

    def __init__(self, table: QTableView, source: RowTable, number_column: int = 0,
                 parent: QObject | None = None) -> None:
        super().__init__(parent or table)
        self.table, self.source, self.number_column = table, source, number_column
        self.proxy = RunOrderProxy(self)
        self.proxy.setSourceModel(source)
        table.setModel(self.proxy)
        header = table.horizontalHeader()
        header.setSectionsClickable(True)
        table.setSortingEnabled(True)
        table.sortByColumn(number_column, Qt.SortOrder.AscendingOrder)
        self.proxy.sort(-1)  # run order is the rows' own order: no sorting to keep up with
        header.setSortIndicatorShown(False)  # shown only while sorted by another column

        self.banner = QWidget()
        self.banner.setObjectName("sortedBanner")
        self.banner.setStyleSheet("#sortedBanner { background:#fff4cc; border:1px solid #e0c070; }"
                                  " QLabel { color:#4d3300; }")
        self.caption = QLabel()
        self.run_order_button = QPushButton("Run order")
        self.run_order_button.setToolTip("Sort the table by # again: the order the jobs run in "
                                         "(Ctrl+0 in the table).")
        row = QHBoxLayout(self.banner)
        row.setContentsMargins(6, 2, 6, 2)
        row.addWidget(self.caption, 1)
        row.addWidget(self.run_order_button)
        self.banner.hide()
        header.setToolTip("Click a column's title to sort by it (in the table: Alt+1 for the "
                          "first column, Alt+2 for the second…, again to reverse; Ctrl+0 for run "
                          "order); the queue still runs in # order.")
        within = Qt.ShortcutContext.WidgetWithChildrenShortcut
        for column in range(min(9, source.columnCount())):
            key = QShortcut(QKeySequence(f"Alt+{column + 1}"), table, context=within)
            key.activated.connect(lambda c=column: self.sort_by(c))
        QShortcut(QKeySequence("Ctrl+0"), table, context=within).activated.connect(self.run_order)

        self._was_sorted = False
        self.run_order_button.clicked.connect(self.run_order)
        header.sortIndicatorChanged.connect(self._sort_changed)

    # -- what the view shows --------------------------------------------------------
    def sorted_by(self) -> str:
        """The title of the column the view is sorted by, or ``""`` in run order."""
        column, order = self.proxy.sortColumn(), self.proxy.sortOrder()
        if column < 0 or (column == self.number_column and order == Qt.SortOrder.AscendingOrder):
            return ""
        title = self.source.headerData(column, Qt.Orientation.Horizontal)
        if column == self.number_column:
            return f"{title}, last first"
        return str(title)

    def in_run_order(self) -> bool:
        return not self.sorted_by()

    def sort_by(self, column: int) -> None:
        """Sort by ``column``; again by the same one reverses the order."""
        order = Qt.SortOrder.AscendingOrder
        if self.proxy.sortColumn() == column and self.proxy.sortOrder() == order:
            order = Qt.SortOrder.DescendingOrder
        self.table.sortByColumn(column, order)

    def run_order(self) -> None:
        """Sort by ``#`` again (the order the queue runs in)."""
        self.table.sortByColumn(self.number_column, Qt.SortOrder.AscendingOrder)

    def _sort_changed(self, *_args) -> None:
        by = self.sorted_by()
        self.caption.setText(sorted_caption(by) if by else "")
        self.banner.setVisible(bool(by))
        self.table.horizontalHeader().setSortIndicatorShown(bool(by))  # run order: no arrow
        if not by and self.proxy.sortColumn() >= 0:
            self.proxy.sort(-1)  # a 2000-row queue is not re-sorted in Python on every poll
        if bool(by) != self._was_sorted:
            self._was_sorted = bool(by)
            self.sorted_changed.emit(bool(by))

    # -- rows in run order ------------------------------------------------------------
    def source_row(self, index: QModelIndex) -> int:
        """The run-order row of an index of the view."""
        if index.model() is self.proxy:
            index = self.proxy.mapToSource(index)
        return index.row()

    def view_index(self, source_row: int, column: int = 0) -> QModelIndex:
        return self.proxy.mapFromSource(self.source.index(source_row, column))

    def selected_rows(self) -> list[int]:
        """The selected rows, as run-order rows of the source table, ascending."""
        selection = self.table.selectionModel()
        if selection is None:
            return []
        return sorted({self.proxy.mapToSource(i).row() for i in selection.selectedRows()})

    def select_rows(self, rows: Iterable[int], scroll: bool = True) -> None:
        """Select run-order ``rows`` (whatever the view's sort), scrolling to the first."""
        selection = QItemSelection()
        first = None
        last_column = max(0, self.source.columnCount() - 1)
        for row in rows:
            top = self.view_index(row, 0)
            if not top.isValid():
                continue
            if first is None:
                first = top
            selection.select(top, self.proxy.index(top.row(), last_column))
        flags = (QItemSelectionModel.SelectionFlag.ClearAndSelect
                 | QItemSelectionModel.SelectionFlag.Rows)
        self.table.selectionModel().select(selection, flags)
        if first is not None:
            self.table.selectionModel().setCurrentIndex(
                first, QItemSelectionModel.SelectionFlag.NoUpdate)
            if scroll:
                self.table.scrollTo(first)
