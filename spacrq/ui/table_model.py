"""The one table model of every pane: :class:`spacrq.watching.Row` values, updated by diff.

A watch hands the pane new rows on every poll that changed something; a
model that reset itself would lose the operator's selection and scroll
position and repaint a 2000-row table to show one status.  :meth:`RowTable.
set_rows` asks :func:`spacrq.watching.diff_rows` for the smallest change and
emits exactly that.  Cells come precomputed as text (painting is a tuple
lookup); a column can *tick* — its text computed from the row and the clock,
the elapsed time of a running job — and :meth:`RowTable.tick` repaints only
that column of the rows that tick.

Each column says its title, its header tooltip, its alignment and whether it
takes the row's *look* (a status word mapped to text and background colours,
and optionally a coloured dot).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QIcon, QPainter, QPalette, QPen, QPixmap
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from spacrq.watching import Row, RowDiff, diff_rows

__all__ = ["Column", "RowTable", "LookDelegate", "KEY_ROLE", "ROW_ROLE", "SORT_ROLE", "dot_icon"]

KEY_ROLE = int(Qt.ItemDataRole.UserRole) + 1
ROW_ROLE = int(Qt.ItemDataRole.UserRole) + 2
SORT_ROLE = int(Qt.ItemDataRole.UserRole) + 3

_Index = QModelIndex | QPersistentModelIndex
_DISPLAY = int(Qt.ItemDataRole.DisplayRole)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole)
_FOREGROUND = int(Qt.ItemDataRole.ForegroundRole)
_BACKGROUND = int(Qt.ItemDataRole.BackgroundRole)
_DECORATION = int(Qt.ItemDataRole.DecorationRole)
_FONT = int(Qt.ItemDataRole.FontRole)
_ALIGNMENT = int(Qt.ItemDataRole.TextAlignmentRole)
_LEFT = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


@dataclass(frozen=True)
class Column:
    """One column: ``title``; ``tip`` for its header; ``right`` to right-align
    (numbers, times); ``looks`` to colour it by the row's look; ``dot`` to draw
    the look's colour as a dot beside the text (legible on a selected row);
    ``tick`` to compute its text from ``(row, now)`` instead of the row's cell."""

    title: str
    tip: str = ""
    right: bool = False
    looks: bool = False
    dot: bool = False
    tick: Callable[[Row, float], str] | None = None


@lru_cache(maxsize=64)
def dot_icon(colour: str) -> QIcon:
    """A 12-px dot in ``colour``, drawn beside a cell's text."""
    pixmap = QPixmap(12, 12)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(colour))
    painter.drawEllipse(QRectF(1, 1, 10, 10))
    painter.end()
    return QIcon(pixmap)


class RowTable(QAbstractTableModel):
    """A read-only table of :class:`Row` values; changed by diff, never reset on a poll.

    ``looks`` maps a row's look to ``(text colour, background or None)``;
    ``bold_looks`` are the looks drawn in bold (the running job).
    """

    def __init__(self, columns: Sequence[Column], *, looks: Mapping[str, tuple[str, str | None]] = (),
                 bold_looks: Sequence[str] = (), parent=None) -> None:
        super().__init__(parent)
        self._columns: tuple[Column, ...] = tuple(columns)
        self._rows: tuple[Row, ...] = ()
        self._index: dict[Any, int] | None = {}
        self._now = time.time()
        self._bold = QFont()
        self._bold.setBold(True)
        self._bold_looks = frozenset(bold_looks)
        self._looks: dict[str, tuple[QBrush, QBrush | None, str]] = {}
        self.set_looks(dict(looks))

    def set_looks(self, looks: Mapping[str, tuple[str, str | None]]) -> None:
        self._looks = {word: (QBrush(QColor(fg)), QBrush(QColor(bg)) if bg else None, fg)
                       for word, (fg, bg) in looks.items()}

    # -- reading ----------------------------------------------------------------
    @property
    def columns(self) -> tuple[Column, ...]:
        return self._columns

    @property
    def rows(self) -> tuple[Row, ...]:
        return self._rows

    def row_at(self, index: int) -> Row | None:
        return self._rows[index] if 0 <= index < len(self._rows) else None

    def key_at(self, index: int) -> Any:
        row = self.row_at(index)
        return None if row is None else row.key

    def row_of(self, key: Any) -> int:
        """The position of the row with ``key``, -1 when there is none."""
        if self._index is None:
            self._index = {row.key: i for i, row in enumerate(self._rows)}
        return self._index.get(key, -1)

    def text(self, row: int, column: int) -> str:
        value = self.data(self.index(row, column))
        return "" if value is None else str(value)

    # -- Qt's side --------------------------------------------------------------
    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self._columns)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = _DISPLAY) -> Any:
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(self._columns):
            return None
        if role == _DISPLAY:
            return self._columns[section].title
        if role == _TOOLTIP:
            return self._columns[section].tip or None
        return None

    def data(self, index: _Index, role: int = _DISPLAY) -> Any:
        """Cell contents; the hot path of painting, so roles are plain ints."""
        r, c = index.row(), index.column()
        if not 0 <= r < len(self._rows) or not 0 <= c < len(self._columns):
            return None
        row, column = self._rows[r], self._columns[c]
        if role == _DISPLAY:
            if column.tick is not None:
                return column.tick(row, self._now)
            return row.cells[c] if c < len(row.cells) else ""
        if role in (_FOREGROUND, _BACKGROUND, _DECORATION):
            if not column.looks:
                return None
            look = self._looks.get(row.look)
            if look is None:
                return None
            if role == _DECORATION:
                return dot_icon(look[2]) if column.dot else None
            return look[0] if role == _FOREGROUND else look[1]
        if role == _ALIGNMENT:
            return _RIGHT if column.right else _LEFT
        if role == _FONT:
            return self._bold if column.looks and row.look in self._bold_looks else None
        if role == _TOOLTIP:
            return row.tip(c) or None
        if role == KEY_ROLE:
            return row.key
        if role == ROW_ROLE:
            return row
        if role == SORT_ROLE:
            return row.sort_key(c)
        return None

    # -- changing ---------------------------------------------------------------
    def set_columns(self, columns: Sequence[Column]) -> None:
        """Show other columns (the Run Report's task tables differ per task)."""
        columns = tuple(columns)
        if [c.title for c in columns] == [c.title for c in self._columns]:
            self._columns = columns
            return
        self.beginResetModel()
        self._columns = columns
        self.endResetModel()

    def set_rows(self, rows: Sequence[Row]) -> RowDiff:
        """Show ``rows``, emitting only the change from what is shown now."""
        new = tuple(rows)
        change = diff_rows(self._rows, new)
        if change.kind == "same":
            return change
        self._index = None
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
        self._emit_changed(change.changed, 0, len(self._columns) - 1)
        return change

    def _emit_changed(self, rows: Sequence[int], first_col: int, last_col: int) -> None:
        """One ``dataChanged`` per run of consecutive rows."""
        if last_col < first_col:
            return
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

    def tick(self, now: float | None = None, ticking: Callable[[Row], bool] | None = None) -> list[int]:
        """Advance the clock and repaint the ticking columns of the rows ``ticking`` picks
        (every row when it is ``None``); returns those rows."""
        self._now = time.time() if now is None else now
        columns = [i for i, c in enumerate(self._columns) if c.tick is not None]
        if not columns:
            return []
        rows = [i for i, row in enumerate(self._rows) if ticking is None or ticking(row)]
        for c in columns:
            self._emit_changed(rows, c, c)
        return rows


class LookDelegate(QStyledItemDelegate):
    """Keeps a coloured cell's colour when its row is selected.

    A selected row is painted in the selection colour, which would hide a
    "failed" red exactly when the operator clicks the row to read why; the
    cell is painted unselected with a selection-coloured frame instead.
    """

    def paint(self, painter, option, index) -> None:  # noqa: D102 (Qt override)
        if not option.state & QStyle.StateFlag.State_Selected:
            super().paint(painter, option, index)
            return
        plain = QStyleOptionViewItem(option)
        plain.state &= ~QStyle.StateFlag.State_Selected
        super().paint(painter, plain, index)
        painter.save()
        painter.setPen(QPen(option.palette.color(QPalette.ColorRole.Highlight), 2))
        painter.drawRect(option.rect.adjusted(1, 1, -1, -1))
        painter.restore()
