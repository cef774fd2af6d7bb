"""The one question spacrq asks: abort is the only request that loses work in progress."""
from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget


def confirm_abort(parent: QWidget, title: str, text: str) -> bool:
    """Ask before aborting; Cancel is the default so a stray Enter loses nothing."""
    answer = QMessageBox.question(
        parent, title, text,
        QMessageBox.StandardButton.Abort | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Abort
