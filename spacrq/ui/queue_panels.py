"""The panels beside the queue table: every problem with its fix, and the progress bar.

Both only display what the watch already read; neither touches a file.
"""
from __future__ import annotations

from typing import Iterable

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import (QLabel, QListView, QListWidget, QListWidgetItem, QSizePolicy,
                               QVBoxLayout, QWidget)

from spacrq.problems import Problem
from spacrq.queue.pane import Progress


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
            done = QListWidgetItem("Nothing to fix: every job's module, settings, inputs and "
                                   "dependencies were checked.")  # (an empty white box said nothing)
            done.setForeground(QBrush(QColor("#2e6b2e")))
            done.setFlags(Qt.ItemFlag.NoItemFlags)
            self.list.addItem(done)
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
        """The problems shown (not the line saying there are none)."""
        return len(self._problems)

    def problems(self) -> list[Problem]:
        return list(self._problems)

    def _clicked(self, item: QListWidgetItem) -> None:
        job_id = item.data(Qt.ItemDataRole.UserRole)
        if job_id:
            self.job_clicked.emit(str(job_id))


class DoneBar(QWidget):
    """How many jobs ended, and how, as a bar: one coloured part per way of ending.

    The words and colours are the core's (:class:`spacrq.queue.pane.Progress`):
    a night with a failure never shows a full green bar.  Not a QProgressBar:
    its ``setValue`` repaints synchronously, which on a queue finishing a
    hundred jobs a second costs the event loop tens of milliseconds per poll;
    this one only schedules a paint.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._progress = Progress()
        self.setMinimumHeight(22)
        self.setMinimumWidth(180)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_progress(self, progress: Progress) -> None:
        if progress != self._progress:
            self._progress = progress
            self.setToolTip(progress.caption)
            self.update()

    def value(self) -> int:
        return self._progress.done

    def maximum(self) -> int:
        return self._progress.total

    def text(self) -> str:
        return self._progress.bar_text

    def look(self) -> str:
        return self._progress.bar_look

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt naming)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        box = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        palette = self.palette()
        painter.setPen(QPen(palette.color(QPalette.ColorRole.Mid)))
        painter.setBrush(palette.color(QPalette.ColorRole.Base))
        painter.drawRoundedRect(box, 3, 3)
        total = self._progress.total
        if total:
            painter.save()
            clip = QPainterPath()
            clip.addRoundedRect(box, 3, 3)
            painter.setClipPath(clip)
            painter.setPen(Qt.PenStyle.NoPen)
            left = box.left()
            for _word, count, colour in self._progress.bar_segments:
                width = box.width() * count / total
                painter.setBrush(QColor(colour))
                painter.drawRect(QRectF(left, box.top(), width, box.height()))
                left += width
            painter.restore()
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        painter.drawText(box, Qt.AlignmentFlag.AlignCenter, self.text())
        painter.end()
