"""Qt models over the Run Report watcher's snapshots.

A snapshot arrives twice a second while a run goes; refilling a table from
scratch each time would reset the operator's selection and scroll position
and cost time proportional to the table.  These models compare the new rows
with the ones shown and emit ``dataChanged`` for the rows that changed,
insert or remove at the end, and reset only when the columns or the order
of the rows changed.
"""
from __future__ import annotations

from typing import Any, Sequence

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel

KEY_ROLE = Qt.ItemDataRole.UserRole + 1
RUN_INDEX_ROLE = Qt.ItemDataRole.UserRole + 2
#: what the runs list sorts on (descending): running tasks first, then the newest
SORT_ROLE = Qt.ItemDataRole.UserRole + 3

_Index = QModelIndex | QPersistentModelIndex


class RowsModel(QAbstractTableModel):
    """A read-only table of ``{"key", "cells"}`` rows under a header of column names."""

    def __init__(self, columns: Sequence[str] = (), parent=None) -> None:
        super().__init__(parent)
        self._columns: tuple[str, ...] = tuple(columns)
        self._rows: list[dict] = []

    # Qt's side -----------------------------------------------------------
    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._columns)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            cells = row["cells"]
            return cells[index.column()] if index.column() < len(cells) else ""
        if role == Qt.ItemDataRole.TextAlignmentRole:
            if index.column() == 0:
                return int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == KEY_ROLE:
            return row["key"]
        return None

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self._columns[section] if section < len(self._columns) else None
        return None

    # ours ------------------------------------------------------------------
    def key_at(self, row: int) -> Any:
        return self._rows[row]["key"] if 0 <= row < len(self._rows) else None

    def row_of(self, key: Any) -> int:
        for i, r in enumerate(self._rows):
            if r["key"] == key:
                return i
        return -1

    def cells(self, row: int) -> list[str]:
        return list(self._rows[row]["cells"])

    def set_rows(self, columns: Sequence[str], rows: list[dict]) -> None:
        """Show ``rows``, touching only what changed."""
        columns = tuple(columns)
        old = self._rows
        same_order = [r["key"] for r in old] == [r["key"] for r in rows[:len(old)]]
        if columns != self._columns or not same_order:
            self.beginResetModel()
            self._columns, self._rows = columns, list(rows)
            self.endResetModel()
            return
        common = min(len(old), len(rows))
        changed = [i for i in range(common) if old[i]["cells"] != rows[i]["cells"]]
        if len(rows) < len(old):
            self.beginRemoveRows(QModelIndex(), len(rows), len(old) - 1)
            self._rows = self._rows[:len(rows)]
            self.endRemoveRows()
        for i in changed:
            self._rows[i] = rows[i]
        if changed:
            last = len(self._columns) - 1
            self.dataChanged.emit(self.index(changed[0], 0), self.index(changed[-1], last))
        if len(rows) > len(old):
            self.beginInsertRows(QModelIndex(), len(old), len(rows) - 1)
            self._rows.extend(rows[len(old):])
            self.endInsertRows()


RUN_COLUMNS = ("task", "state", "blocks", "when")


def _blocks_text(row: dict) -> str:
    done, total, failed = row.get("done"), row.get("total"), row.get("failed")
    if done is None:
        return "—"
    text = f"{done:,} / {total:,} done" if total else f"{done:,} done"
    if failed:
        text += f", {failed:,} failed"
    return text


class RunsModel(QStandardItemModel):
    """The runs list: one row per tracking store, one child per run in its runs.jsonl.

    Updated in place: existing items get new text only when it differs, new
    stores and new runs are appended, vanished stores removed.
    """

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setHorizontalHeaderLabels(list(RUN_COLUMNS))

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
    def _set(item: QStandardItem, text: str, tip: str = "") -> None:
        if item.text() != text:
            item.setText(text)
        if item.toolTip() != tip:
            item.setToolTip(tip)

    def update_runs(self, rows: list[dict]) -> None:
        keys = {r["key"] for r in rows}
        for i in reversed(range(self.rowCount())):
            if self.item(i, 0).data(KEY_ROLE) not in keys:
                self.removeRow(i)
        for row in rows:
            i = self._store_row(row["key"])
            if i < 0:
                items = [QStandardItem() for _ in RUN_COLUMNS]
                for it in items:
                    it.setEditable(False)
                items[0].setData(row["key"], KEY_ROLE)
                self.appendRow(items)
                i = self.rowCount() - 1
            tip = row["key"] + ("\n" + "\n".join(row["problems"]) if row.get("problems") else "")
            label = row["task_id"] + (" ⚠" if row.get("problems") else "")
            texts = (label, row["state"], _blocks_text(row), row["when"])
            for col, text in enumerate(texts):
                self._set(self.item(i, col), text, tip)
            rank = (1e12 if row["state"] == "running" else 0.0) + float(row.get("started_at") or 0.0)
            if self.item(i, 0).data(SORT_ROLE) != rank:
                self.item(i, 0).setData(rank, SORT_ROLE)
            self._update_children(self.item(i, 0), row)

    def _update_children(self, parent: QStandardItem, row: dict) -> None:
        runs = row.get("runs") or []
        if parent.rowCount() > len(runs):  # runs.jsonl was replaced by a shorter one
            parent.removeRows(len(runs), parent.rowCount() - len(runs))
        for n, run in enumerate(runs):
            if n >= parent.rowCount():
                items = [QStandardItem() for _ in RUN_COLUMNS]
                for it in items:
                    it.setEditable(False)
                items[0].setData(row["key"], KEY_ROLE)
                items[0].setData(run["index"], RUN_INDEX_ROLE)
                items[0].setData(float(run["index"]), SORT_ROLE)  # newest run first
                parent.appendRow(items)
            blocks = f"{run['count']:,} blocks"
            if run["skipped"]:
                blocks += f" ({run['skipped']:,} skipped)"
            if run["failures"]:
                blocks += f", {run['failures']:,} failed attempts"
            took = f"took {run['elapsed']}" if run["elapsed"] != "—" else "—"
            texts = (f"run {run['index'] + 1}", took, blocks, run["when"])
            for col, text in enumerate(texts):
                self._set(parent.child(n, col), text)
