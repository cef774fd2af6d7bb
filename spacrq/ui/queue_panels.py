"""The panels around the queue table: every problem with its fix, a live log, progress.

Both only display what the poller already read; neither touches a file.
The log view is bounded twice — each poll hands it at most a few tens of
kilobytes (see :func:`spacrq.queue.watch_log.trim_log`) and the view keeps a fixed
number of lines — so a job writing hundreds of megabytes of log costs the
window the same as one writing a page.
"""
from __future__ import annotations

import os
from typing import Iterable

from PySide6.QtCore import QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (QBrush, QColor, QFontDatabase, QPainter, QPalette, QPen,
                           QTextCursor)
from PySide6.QtWidgets import (QLabel, QListView, QListWidget, QListWidgetItem, QPlainTextEdit,
                               QSizePolicy, QVBoxLayout, QWidget)

from spacrq.problems import Problem

#: lines the log view keeps; older ones scroll away
LOG_LINES = 3000


class ProblemsPanel(QWidget):
    """Every problem a check found, errors first, each with its fix, wrapped to be read."""

    #: a problem naming a job was clicked (the job id)
    job_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("Checks: press Validate to check every job before the night starts.")
        self.title.setWordWrap(True)
        self.list = QListWidget()
        self.list.setWordWrap(True)
        self.list.setResizeMode(QListView.ResizeMode.Adjust)
        self.list.setUniformItemSizes(False)
        self.list.setAlternatingRowColors(True)
        self.list.setSpacing(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.list, 1)
        self.list.itemClicked.connect(self._clicked)
        self._problems: list[Problem] = []
        self._brush = {True: QBrush(QColor("#8b0000")), False: QBrush(QColor("#6b4500"))}

    def show_problems(self, problems: Iterable[Problem], what: str = "the queue") -> None:
        problems = sorted(problems, key=lambda p: not p.is_error)
        self._problems = problems
        errors = sum(p.is_error for p in problems)
        warnings = len(problems) - errors
        self.list.clear()
        if not problems:
            self.title.setText(f"Checks: no problems found in {what}.")
            return
        self.title.setText(f"Checks of {what}: {errors} error(s) — the queue will not start "
                           f"until they are fixed — and {warnings} warning(s)."
                           if errors else f"Checks of {what}: {warnings} warning(s), no errors.")
        for p in problems:
            where = p.job_id or "the queue"
            key = f" [{p.setting}]" if p.setting else ""
            word = "ERROR" if p.is_error else "warning"
            item = QListWidgetItem(f"{word} · {where}{key}: {p.message}\n    fix: {p.fix}")
            item.setForeground(self._brush[p.is_error])
            item.setData(Qt.ItemDataRole.UserRole, p.job_id)
            item.setToolTip("Click to select the job in the table." if p.job_id else "")
            self.list.addItem(item)

    def count(self) -> int:
        return self.list.count()

    def problems(self) -> list[Problem]:
        return list(self._problems)

    def _clicked(self, item: QListWidgetItem) -> None:
        job_id = item.data(Qt.ItemDataRole.UserRole)
        if job_id:
            self.job_clicked.emit(str(job_id))


class LogView(QWidget):
    """The tail of one job's log, following new lines while it runs."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("Log: select a job, or run the queue to follow the running one.")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setMaximumBlockCount(LOG_LINES)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setPlaceholderText("(no log yet)")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.text, 1)
        self.job_id = ""
        self.path = ""
        self._follow = True
        self.text.verticalScrollBar().actionTriggered.connect(self._operator_scrolled)

    def _operator_scrolled(self, _action: int) -> None:
        """Scrolling up stops following the end; scrolling back down resumes it."""
        QTimer.singleShot(0, self, self._note_position)

    def _note_position(self) -> None:
        bar = self.text.verticalScrollBar()
        self._follow = bar.value() >= bar.maximum() - 1

    def _to_end(self) -> None:
        if self._follow:
            self.text.moveCursor(QTextCursor.MoveOperation.End)
            bar = self.text.verticalScrollBar()
            bar.setValue(bar.maximum())

    def restart(self, job_id: str, path: str) -> None:
        """Start showing ``job_id``'s log afresh (another job, or a replaced file)."""
        self.job_id, self.path = job_id, path
        self._follow = True
        self.text.clear()
        if not job_id and path:
            self.title.setText("The runner's log — the last run's summary is at its end "
                               "(select a job to read its own log)")
            self.title.setToolTip(path)
        elif not job_id:
            self.title.setText("Log: select a job, or run the queue to follow the running one.")
        elif not path:
            self.title.setText(f"Log of {job_id}: none yet (it has not run).")
        else:
            self.title.setText(f"Log of {job_id} — {os.path.basename(path)}")
            self.title.setToolTip(path)

    def append(self, text: str) -> None:
        """Add new log text, following the end unless the operator scrolled up to read."""
        if not text:
            return
        cursor = QTextCursor(self.text.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)
        self._to_end()
        QTimer.singleShot(0, self, self._to_end)  # again once the view has laid the text out

    def shown_text(self) -> str:
        return self.text.toPlainText()


class DoneBar(QWidget):
    """"done / total jobs" as a bar.

    Not a QProgressBar: its ``setValue`` repaints synchronously, which on a
    queue finishing a hundred jobs a second costs the event loop tens of
    milliseconds per poll; this one only schedules a paint.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._done = 0
        self._total = 0
        self.setMinimumHeight(22)
        self.setMinimumWidth(180)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_done(self, done: int, total: int) -> None:
        if (done, total) != (self._done, self._total):
            self._done, self._total = done, total
            self.update()

    def value(self) -> int:
        return self._done

    def maximum(self) -> int:
        return self._total

    def text(self) -> str:
        return f"{self._done} / {self._total} jobs done"

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt naming)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        box = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        palette = self.palette()
        painter.setPen(QPen(palette.color(QPalette.ColorRole.Mid)))
        painter.setBrush(palette.color(QPalette.ColorRole.Base))
        painter.drawRoundedRect(box, 3, 3)
        if self._total:
            filled = QRectF(box)
            filled.setWidth(box.width() * self._done / self._total)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor("#8cc59a"))
            painter.drawRoundedRect(filled, 3, 3)
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        painter.drawText(box, Qt.AlignmentFlag.AlignCenter, self.text())
        painter.end()
