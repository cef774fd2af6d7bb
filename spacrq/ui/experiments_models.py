"""The records table of the Experiments pane: a run's committed step records, column by column.

It is a view over a :class:`~spacrq.experiments.records.RecordColumns` — the
records as numpy columns, not a dict each — and only ever appends: a run of
ten thousand steps costs the view what its last few records cost, and a
cell is formatted only when it is painted.  (The run table is the pane's
:class:`~spacrq.ui.table_model.RowTable`.)
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from spacrq.experiments.records import RecordColumns, RecordsChunk, chunk_of

_Index = QModelIndex | QPersistentModelIndex
_DISPLAY = int(Qt.ItemDataRole.DisplayRole)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole)


class RecordsModel(QAbstractTableModel):
    """A run's committed step records: index, step, then the record's value fields
    (when each was committed is in its tooltip).

    Columns are discovered from the records themselves (a record's ``value``
    mapping contributes one column per key), in the order they first appear.
    """

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.table = RecordColumns()

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else self.table.count

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.table.columns)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = _DISPLAY) -> Any:
        if role == _DISPLAY and orientation == Qt.Orientation.Horizontal \
                and 0 <= section < len(self.table.columns):
            return self.table.columns[section]
        return None

    def data(self, index: _Index, role: int = _DISPLAY) -> Any:
        if not index.isValid():
            return None
        row = index.row()
        if role == _DISPLAY:
            return self.table.cell(row, self.table.columns[index.column()])
        if role == _TOOLTIP:
            return f"step {self.table.step(row) or None}, committed {self.table.saved_at(row)}"
        return None

    def clear(self) -> None:
        self.beginResetModel()
        self.table.clear()
        self.endResetModel()

    def add(self, chunk: RecordsChunk) -> None:
        """Add the records a poll read at the end; columns grow as new keys appear."""
        if chunk.reset:
            self.clear()
        if not chunk.count:
            return
        new_columns = [c for c in chunk.columns if c not in self.table.columns]
        if new_columns:
            first = len(self.table.columns)
            self.beginInsertColumns(QModelIndex(), first, first + len(new_columns) - 1)
            self.table.columns.extend(new_columns)
            self.endInsertColumns()
        first = self.table.count
        self.beginInsertRows(QModelIndex(), first, first + chunk.count - 1)
        self.table.add(chunk)
        self.endInsertRows()

    def append(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Add records as read (a test's, or a caller's that has them as dicts)."""
        self.add(chunk_of(list(records), self.table.count, known=tuple(self.table.swept)))

