"""Dropping files on a widget in a test, as the file manager does: a drag enters, then drops.

Qt delivers a drop only to a widget that accepted the drag's entry, so both
events are sent; the answer says whether the widget took the drop.
"""
from __future__ import annotations

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QWidget


def file_drag(paths) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def drop_files(widget: QWidget, paths, mime: QMimeData | None = None) -> bool:
    """Drag ``paths`` (or ``mime``) onto ``widget`` and drop; True when the drop was accepted."""
    if isinstance(widget, QAbstractScrollArea):
        widget = widget.viewport()
    mime = mime if mime is not None else file_drag(paths)
    where = widget.rect().center()
    enter = QDragEnterEvent(QPoint(where), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, enter)
    if not enter.isAccepted():
        return False
    drop = QDropEvent(QPointF(where), Qt.DropAction.CopyAction, mime,
                      Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, drop)
    return drop.isAccepted()
