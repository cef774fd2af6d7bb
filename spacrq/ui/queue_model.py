"""The queue table: a QAbstractTableModel over immutable job rows.

The runner rewrites the queue file at every transition; a model that reset
itself on each poll would lose the operator's selection and scroll position
and repaint 2000 rows to show one status change.  :meth:`QueueTableModel.
set_rows` asks :func:`spacrq.queue.watch_rows.diff_rows` for the smallest change
and emits exactly that: ``beginInsertRows`` for new jobs, ``beginRemoveRows``
for removed ones, ``dataChanged`` for the rows whose content differs.  The
time column of a running job ticks through :meth:`tick`, which touches only
running rows.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPalette, QPen
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from spacrq.queue.watch_rows import JobRow, RowDiff, diff_rows, time_text

COLUMNS = ("#", "Job", "Module", "Label", "After", "Status", "Time", "Log")
COL_NUMBER, COL_JOB, COL_MODULE, COL_LABEL, COL_AFTER, COL_STATUS, COL_TIME, COL_LOG = range(8)

HEADER_TIPS = {
    COL_NUMBER: "Run order: jobs run one at a time, top to bottom.",
    COL_JOB: "The job's id; 'After' refers to jobs by it.",
    COL_AFTER: "Jobs that must succeed first; if one does not, this job is skipped.",
    COL_STATUS: "Hover a failed or skipped job to read why.",
    COL_TIME: "How long the job took, counting up while it runs.",
    COL_LOG: "The job's own log file; select the job to follow it below.",
}

#: status word -> (text colour, background); dark text on pale fills stays
#: readable on light and dark desktop themes alike.
STATUS_LOOK = {
    "pending": ("#3c3c3c", None),
    "running": ("#0b3d91", "#cfe2ff"),
    "succeeded": ("#1b5e20", "#d4edda"),
    "partial": ("#7a4f00", "#ffe8a3"),
    "failed": ("#8b0000", "#f8d0d0"),
    "skipped": ("#5b2a86", "#e8dcf4"),
    "not run": ("#3c3c3c", "#e2e2e2"),
}


_DISPLAY = int(Qt.ItemDataRole.DisplayRole)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole)
_FOREGROUND = int(Qt.ItemDataRole.ForegroundRole)
_BACKGROUND = int(Qt.ItemDataRole.BackgroundRole)
_FONT = int(Qt.ItemDataRole.FontRole)
_ALIGNMENT = int(Qt.ItemDataRole.TextAlignmentRole)
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


def _status_tip(row: JobRow) -> str:
    parts = []
    if row.error:
        parts.append(row.error)
    if row.partial:
        parts.append("It exited 0, but its own ledger records failed items: check its log.")
    if row.exit_code is not None and row.status in ("failed", "success"):
        parts.append(f"exit code {row.exit_code}")
    if row.attempts > 1:
        parts.append(f"{row.attempts} attempts")
    if row.timeout:
        parts.append(f"timeout {row.timeout:g} s")
    return "\n".join(parts)


class QueueTableModel(QAbstractTableModel):
    """Rows of a queue; updated by diff, never reset on a poll."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: tuple[JobRow, ...] = ()
        self._now = time.time()
        self._bold = QFont()
        self._bold.setBold(True)
        self._looks = {word: (QBrush(QColor(fg)), QBrush(QColor(bg)) if bg else None)
                       for word, (fg, bg) in STATUS_LOOK.items()}

    # -- reading --------------------------------------------------------------

    @property
    def rows(self) -> tuple[JobRow, ...]:
        return self._rows

    def row_at(self, index: int) -> JobRow | None:
        return self._rows[index] if 0 <= index < len(self._rows) else None

    def row_of(self, job_id: str) -> int:
        for i, row in enumerate(self._rows):
            if row.job_id == job_id:
                return i
        return -1

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: N802,B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: N802,B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            return HEADER_TIPS.get(section)
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = _DISPLAY) -> Any:
        """Cell contents; the hot path of painting, so roles are plain ints and
        texts come precomputed (:attr:`JobRow.cells`)."""
        if role == _DISPLAY:
            row = self._rows[index.row()]
            col = index.column()
            return time_text(row, self._now) if col == COL_TIME else row.cells[col]
        if role == _FOREGROUND or role == _BACKGROUND:
            if index.column() != COL_STATUS:
                return None
            fg, bg = self._looks.get(self._rows[index.row()].cells[COL_STATUS], (None, None))
            return fg if role == _FOREGROUND else bg
        if role == _ALIGNMENT:
            return _RIGHT if index.column() in (COL_NUMBER, COL_TIME) else None
        if role == _FONT:
            if index.column() == COL_STATUS and self._rows[index.row()].status == "running":
                return self._bold
            return None
        if role == _TOOLTIP:
            row = self._rows[index.row()]
            col = index.column()
            if col == COL_STATUS:
                return _status_tip(row) or None
            if col == COL_LOG:
                return row.log_path or None
            if col == COL_LABEL:
                return row.label or None
        return None

    # -- changing -------------------------------------------------------------

    def set_rows(self, rows: Sequence[JobRow]) -> RowDiff:
        """Show ``rows``, emitting only the change from what is shown now."""
        new = tuple(rows)
        change = diff_rows(self._rows, new)
        if change.kind == "same":
            return change
        if change.kind == "reset":
            self.beginResetModel()
            self._rows = new
            self.endResetModel()
            return change
        if change.kind == "insert":
            self.beginInsertRows(QModelIndex(), change.first, change.first + change.count - 1)
            self._rows = new
            self.endInsertRows()
        elif change.kind == "remove":
            self.beginRemoveRows(QModelIndex(), change.first, change.first + change.count - 1)
            self._rows = new
            self.endRemoveRows()
        else:
            self._rows = new
        self._emit_changed(change.changed, 0, len(COLUMNS) - 1)
        return change

    def _emit_changed(self, rows: Sequence[int], first_col: int, last_col: int) -> None:
        """One dataChanged per run of consecutive rows."""
        start = prev = None
        for i in sorted(rows):
            if start is None:
                start = prev = i
            elif i == prev + 1:
                prev = i
            else:
                self.dataChanged.emit(self.index(start, first_col), self.index(prev, last_col))
                start = prev = i
        if start is not None:
            self.dataChanged.emit(self.index(start, first_col), self.index(prev, last_col))

    def tick(self, now: float | None = None) -> list[int]:
        """Advance the clock: repaint the time of running jobs only."""
        self._now = time.time() if now is None else now
        running = [i for i, row in enumerate(self._rows) if row.status == "running"]
        self._emit_changed(running, COL_TIME, COL_TIME)
        return running


class StatusDelegate(QStyledItemDelegate):
    """Keeps a status's colour when its row is selected.

    A selected row is painted in the selection colour, which would hide
    "failed" red exactly when the operator clicks the job to read why; the
    status cell is painted unselected (the rest of the row shows the
    selection) with a selection-coloured frame.
    """

    def paint(self, painter, option, index) -> None:  # noqa: D102 (Qt override)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        if not selected:
            super().paint(painter, option, index)
            return
        plain = QStyleOptionViewItem(option)
        plain.state &= ~QStyle.StateFlag.State_Selected
        super().paint(painter, plain, index)
        painter.save()
        painter.setPen(QPen(option.palette.color(QPalette.ColorRole.Highlight), 2))
        painter.drawRect(option.rect.adjusted(1, 1, -1, -1))
        painter.restore()
