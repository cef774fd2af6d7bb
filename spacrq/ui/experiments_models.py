"""Table models of the Experiments pane: the runs of an experiment, and a run's records.

Both are adapters over the poller's snapshots.  Neither refills itself on a
poll: the run table compares each row with what it shows and emits
``dataChanged`` for the rows that differ (inserting and removing rows where
runs appeared or went), and the records table only ever appends — a run of
ten thousand steps costs the view what its last few records cost.
"""
from __future__ import annotations

import json
import time
from typing import Any, Mapping, Sequence

from functools import lru_cache

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QIcon, QPainter, QPixmap

from spacrq.experiments.watch import RecordsBatch, format_duration

_Index = QModelIndex | QPersistentModelIndex


def _clock(epoch: float | None) -> str:
    """A start/end time as the operator reads it: time today, date otherwise."""
    if not epoch:
        return ""
    local = time.localtime(epoch)
    if time.strftime("%Y%m%d", local) == time.strftime("%Y%m%d"):
        return time.strftime("%H:%M:%S", local)
    return time.strftime("%Y-%m-%d %H:%M", local)


@lru_cache(maxsize=64)
def badge_icon(colour: str) -> QIcon:
    """A dot in the state's colour: drawn beside the text even on a selected row,
    where a selection highlight would hide a coloured background."""
    pixmap = QPixmap(12, 12)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(colour))
    painter.drawEllipse(QRectF(1, 1, 10, 10))
    painter.end()
    return QIcon(pixmap)


def progress_bar(fraction: float, width: int = 10) -> str:
    """A bar drawn in text, ``"███░░░░░░░"``: legible on a selected row, where a
    painted bar would sit under the selection colour."""
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


def progress_text(row: dict[str, Any]) -> str:
    """``"███░░░░░░░ 12 / 40 steps · ETA 3 min 10 s"`` (the ETA only while it runs)."""
    total = row.get("total")
    if total:
        text = f"{progress_bar(row['done'] / total)} {row['done']} / {total} steps"
    else:
        text = f"{row['done']} steps" if row["done"] else ""
    eta = format_duration(row.get("eta"))
    if eta and row.get("state") in ("running", "stopping"):
        text += f" · ETA {eta}"
    step = row.get("step_progress")
    if row.get("state") in ("running", "stopping") and isinstance(step, dict) and step.get("total"):
        detail = f" {step.get('detail')}" if step.get("detail") else ""
        text += f" · step {step.get('done', 0)}/{step['total']}{detail}"
    return text


class RunTableModel(QAbstractTableModel):
    """One row per run, newest first: id, state badge, progress with ETA, started, ended."""

    HEADERS = ("Run", "State", "Progress", "Started", "Ended")
    RowRole = Qt.ItemDataRole.UserRole + 1

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[dict[str, Any]] = []

    # Qt API -----------------------------------------------------------------
    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.HEADERS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        row, column = self._rows[index.row()], index.column()
        if role == self.RowRole:
            return row
        if role == Qt.ItemDataRole.DisplayRole:
            return (row["run_id"], row["badge"], progress_text(row),
                    _clock(row.get("started")), _clock(row.get("ended")))[column]
        if role == Qt.ItemDataRole.DecorationRole and column == 1:
            return badge_icon(row["colour"])
        if role == Qt.ItemDataRole.BackgroundRole and column == 1:
            return QBrush(QColor(row["colour"]).lighter(185))
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(row)
        return None

    @staticmethod
    def _tooltip(row: dict[str, Any]) -> str:
        lines = [f"{row['run_id']}: {row['badge']}"]
        if row.get("step"):
            lines.append(f"step in flight: {row['step']}")
        if row.get("failed_attempts"):
            lines.append(f"failed attempts: {row['failed_attempts']}")
        if row.get("error"):
            lines.append(f"last error: {row['error']}")
        if row.get("problem"):
            lines.append(row["problem"])
        for key in ("control_problem", "journal_problem", "progress_problem"):
            if row.get(key):
                lines.append(f"{key.split('_')[0]} file: {row[key]}")
        lines.extend(f"report: {text}" for text in row.get("reports", [])[-3:])
        return "\n".join(lines)

    # updates ----------------------------------------------------------------
    def row_of(self, run_id: str) -> int:
        for i, row in enumerate(self._rows):
            if row["run_id"] == run_id:
                return i
        return -1

    def rows(self) -> list[dict[str, Any]]:
        return list(self._rows)

    def run_at(self, row: int) -> dict[str, Any] | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def update(self, rows: Sequence[dict[str, Any]]) -> None:
        """Show ``rows``, touching only the rows that changed.

        Runs that disappeared are removed, new runs inserted where they sort
        (the order is the snapshot's: newest first), and a changed row emits
        ``dataChanged`` for itself alone.
        """
        if not self._rows and rows:  # a first fill is one insertion, not one per run
            self.beginInsertRows(QModelIndex(), 0, len(rows) - 1)
            self._rows = [dict(r) for r in rows]
            self.endInsertRows()
            return
        keep = {r["run_id"] for r in rows}
        for i in range(len(self._rows) - 1, -1, -1):
            if self._rows[i]["run_id"] not in keep:
                self.beginRemoveRows(QModelIndex(), i, i)
                del self._rows[i]
                self.endRemoveRows()
        for i, row in enumerate(rows):
            current = self._rows[i]["run_id"] if i < len(self._rows) else None
            if current == row["run_id"]:
                if self._rows[i] != row:
                    self._rows[i] = dict(row)
                    self.dataChanged.emit(self.index(i, 0), self.index(i, len(self.HEADERS) - 1))
                continue
            at = self.row_of(row["run_id"])
            if at > i:  # it moved up: take it out and put it back where it sorts now
                self.beginRemoveRows(QModelIndex(), at, at)
                del self._rows[at]
                self.endRemoveRows()
            self.beginInsertRows(QModelIndex(), i, i)
            self._rows.insert(i, dict(row))
            self.endInsertRows()


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)[:200]
    return "" if value is None else str(value)


class RecordsModel(QAbstractTableModel):
    """A run's committed step records: index, step, then the record's value fields
    (when each was committed is in its tooltip).

    Columns are discovered from the records themselves (a record's ``value``
    mapping contributes one column per key), in the order they first appear.
    Each record is kept as its row's flat cells
    (:func:`~spacrq.experiments.watch.record_cells`), not as read.
    """

    FIXED = ("index", "step")

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[dict[str, Any]] = []
        self._committed: list[str] = []  # each row's saved_at, for its tooltip
        self._columns: list[str] = list(self.FIXED)

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._columns)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return self._columns[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        cells = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return _cell(cells.get(self._columns[index.column()]))
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"step {cells.get('step')}, committed {self._committed[index.row()]}"
        return None

    def clear(self) -> None:
        self.beginResetModel()
        self._rows, self._committed = [], []
        self._columns = list(self.FIXED)
        self.endResetModel()

    def append(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Add newly committed records, as read, at the end."""
        batch = RecordsBatch()
        batch.add(list(records))
        self.append_rows(batch.cells, batch.committed, batch.columns)

    def append_rows(self, cells: Sequence[dict[str, Any]], committed: Sequence[str],
                    columns: Sequence[str]) -> None:
        """Add rows the poller already made flat (a snapshot's ``records``, ``committed``
        and ``columns``) at the end; columns grow as new keys appear."""
        if not cells:
            return
        new_columns = [c for c in columns if c not in self._columns]
        if new_columns:
            first = len(self._columns)
            self.beginInsertColumns(QModelIndex(), first, first + len(new_columns) - 1)
            self._columns.extend(new_columns)
            self.endInsertColumns()
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(cells) - 1)
        self._rows.extend(cells)
        self._committed.extend(committed)
        self.endInsertRows()
