"""The run table's Progress cell and column widths: a painted bar beside the steps done,
legible on any row, and every column shown whole at the window's usual size.

A bar drawn in text (block glyphs) was cut off with "…" in a narrow column
and drew black on unselected rows; painted, it takes a fixed few pixels and
the text beside it says the steps.  The bar is filled in the run's state
colour over a light track on every row, selected or not, so it stays visible
under the selection colour too.  Painting reads only the row the model
already holds (no file, no decision: the fraction is the row's own).

Widths are fitted to the rows' own text, not measured cell by cell by the
view (that calls back into Python once a cell, every change).  Each column
only grows, so nothing jumps back and forth as a run moves; the Run column
gives way when the table is narrow (ids are cut in the middle, where a dated
id's least telling part is), so Started and Ended never scroll out of sight.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QEvent, QObject, QRect, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (QApplication, QHeaderView, QStyle, QStyledItemDelegate,
                               QStyleOptionViewItem, QTableView)

from spacrq.experiments.pane import badge
from spacrq.ui.table_model import ROW_ROLE

__all__ = ["ProgressDelegate", "BAR_WIDTH", "progress_width", "RunColumns"]

#: pixels of the painted bar, and of the room around it
BAR_WIDTH = 48
_PAD = 6
_TRACK = QColor("#e5e8e8")
_EDGE = QColor("#aab7b8")


def progress_width(metrics, texts) -> int:
    """The column width that shows the bar and the widest of ``texts`` whole."""
    widest = max((metrics.horizontalAdvance(t) for t in texts), default=0)
    return BAR_WIDTH + 3 * _PAD + widest + 8


class ProgressDelegate(QStyledItemDelegate):
    """Paints a run's Progress cell: the bar (when the plan's length is known), then the text."""

    def paint(self, painter, option, index) -> None:  # noqa: D102 (Qt override)
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        text, opt.text = opt.text, ""
        widget = option.widget
        style = widget.style() if widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        row = index.data(ROW_ROLE)
        run = getattr(row, "value", None)
        rect = option.rect.adjusted(_PAD, 0, -_PAD, 0)
        painter.save()
        if run is not None and getattr(run, "total", None):
            fraction = max(0.0, min(1.0, run.done / run.total))
            bar = QRect(rect.left(), rect.center().y() - 4, BAR_WIDTH, 9)
            painter.setPen(_EDGE)
            painter.setBrush(_TRACK)
            painter.drawRect(bar)
            filled = round((BAR_WIDTH - 1) * fraction)
            if filled:
                painter.fillRect(QRect(bar.left() + 1, bar.top() + 1, filled, bar.height() - 1),
                                 QColor(badge(run.state)[1]))
            rect = rect.adjusted(BAR_WIDTH + _PAD, 0, 0, 0)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        painter.setPen(option.palette.color(role))
        shown = option.fontMetrics.elidedText(text, Qt.TextElideMode.ElideRight, rect.width())
        painter.drawText(rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft),
                         shown)
        painter.restore()


#: the widest Progress the column grows for: the steps and the ETA stay whole, a step's
#: own detail after them may be cut short (it changes every poll; its tooltip has it)
PROGRESS_MOST = "10000 / 10000 steps · ETA 59m 59s"
#: the least the Run column gives way to
RUN_LEAST = 120


class RunColumns(QObject):
    """The run table's column widths, kept fitted as rows change and the table is resized."""

    def __init__(self, table: QTableView, clock_sample: str) -> None:
        super().__init__(table)
        self.table = table
        self.clock_sample = clock_sample
        self.wanted: dict[int, int] = {}
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        table.setWordWrap(False)  # one line a run: an id broken at its '-' reads as two
        table.installEventFilter(self)
        self.fit(())

    def fit(self, rows: Sequence[Any]) -> None:
        """Grow the columns for ``rows`` (new or changed ones), then lay them out."""
        metrics = self.table.fontMetrics()

        def widest(column: int, least: str) -> int:
            texts = [row.cells[column] for row in rows] + [least]
            return max(metrics.horizontalAdvance(t) for t in texts)
        most = progress_width(metrics, [PROGRESS_MOST])
        found = {0: widest(0, "Run") + 24, 1: widest(1, "completed") + 44,
                 2: min(progress_width(metrics, [r.cells[2] for r in rows] + ["24 / 24 steps"]),
                        most),
                 3: max(widest(3, self.clock_sample), widest(4, self.clock_sample)) + 24}
        found[4] = found[3]
        changed = False
        for column, width in found.items():
            if width > self.wanted.get(column, 0):
                self.wanted[column] = width
                changed = True
        if changed:
            self.apply()

    def apply(self) -> None:
        room = self.table.viewport().width()
        others = sum(self.wanted.get(c, 0) for c in (1, 2, 3, 4))
        run = max(RUN_LEAST, min(self.wanted.get(0, RUN_LEAST), room - others))
        for column, width in ((0, run), (1, self.wanted[1]), (2, self.wanted[2]),
                              (3, self.wanted[3])):
            if self.table.columnWidth(column) != width:
                self.table.setColumnWidth(column, width)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt naming)
        if watched is self.table and event.type() == QEvent.Type.Resize:
            self.apply()
        return False
