"""The one log view of every pane: the tail of a log file, following new lines.

It only shows text the pane's watch already read.  It is bounded twice —
each poll hands it at most a few tens of kilobytes (the watch trims) and the
view keeps :data:`LOG_LINES` lines — so a job writing hundreds of megabytes
of log costs the window what one writing a page costs.

It follows the end while the operator is at the end; scrolling up to read
stops following (new text arrives without moving the view) and scrolling
back to the end resumes it.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFontDatabase, QTextCursor
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QVBoxLayout, QWidget

__all__ = ["LogView", "LOG_LINES"]

#: lines the view keeps; older ones scroll away
LOG_LINES = 5000


class LogView(QWidget):
    """A title saying whose log it is, over the log's text."""

    def __init__(self, placeholder: str = "(no log yet)", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel()
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.title.setWordWrap(True)
        self.text = QPlainTextEdit()
        self.text.setObjectName("log")
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setMaximumBlockCount(LOG_LINES)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setPlaceholderText(placeholder)
        self.text.setToolTip("The log's last lines. Scroll up to read: the view stops following "
                             "the end until you scroll back down.")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.text, 1)
        self.key: object = None
        self.path = ""
        self._follow = True
        self.text.verticalScrollBar().actionTriggered.connect(self._operator_scrolled)

    # -- what the operator does ----------------------------------------------
    def _operator_scrolled(self, _action: int) -> None:
        # decided now, from where the action puts the slider: a follow-the-end still queued by
        # the last append must not pull the view back down over the operator's scroll
        bar = self.text.verticalScrollBar()
        self._follow = bar.sliderPosition() >= bar.maximum() - 1
        QTimer.singleShot(0, self, self._note_position)

    def _note_position(self) -> None:
        bar = self.text.verticalScrollBar()
        self._follow = bar.value() >= bar.maximum() - 1

    def following(self) -> bool:
        return self._follow

    def _to_end(self) -> None:
        if self._follow:
            self.text.moveCursor(QTextCursor.MoveOperation.End)
            bar = self.text.verticalScrollBar()
            bar.setValue(bar.maximum())

    # -- what the pane does ----------------------------------------------------
    def set_title(self, title: str, tip: str = "") -> None:
        self.title.setText(title)
        self.title.setToolTip(tip)

    def restart(self, key: object, path: str, title: str | None = None) -> None:
        """Start showing another log afresh (another job or run, or a replaced file)."""
        self.key, self.path = key, path
        self._follow = True
        self.text.clear()
        if title is not None:
            self.set_title(title, path)

    def append(self, text: str) -> None:
        """Add new log text, following the end unless the operator scrolled up to read."""
        if not text:
            return
        cursor = QTextCursor(self.text.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)
        self._to_end()
        QTimer.singleShot(0, self, self._to_end)  # again once the view has laid the text out

    def clear(self) -> None:
        self.restart(None, "", "")

    def shown_text(self) -> str:
        return self.text.toPlainText()
