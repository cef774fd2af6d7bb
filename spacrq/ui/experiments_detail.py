"""What the Experiments pane shows of the one run selected: its records, log, notes and report.

Four tabs fed from the poller's snapshots, each incrementally: records and
plot points are appended, log text is appended (the view keeps the last
lines, the file keeps everything), notes and the report are redrawn only when
they changed.  Adding a note is asked for through :attr:`RunDetail.note_asked`;
the pane carries it out off the GUI thread like every other request.
"""
from __future__ import annotations

import html
import time
from datetime import datetime
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from spacrq.experiments.watch import LIVE_STATES, format_duration
from spacrq.ui.experiments_models import RecordsModel
from spacrq.ui.experiments_plot import RecordsPlot

#: lines of a run's log kept in view (the file itself keeps everything)
LOG_LINES = 5000


def _when(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) if epoch else ""


def _local(iso: str) -> str:
    """A note's ISO time as the bench's local time."""
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return iso


def report_html(row: dict[str, Any], report: dict[str, Any] | None) -> str:
    """The run in brief, a link to its own report, and what its journal reported."""
    facts = [("State", row.get("badge", "")),
             ("Steps", f"{row['done']} of {row['total']}" if row.get("total") else str(row["done"])),
             ("Started", _when(row.get("started"))), ("Ended", _when(row.get("ended")))]
    if row.get("started") and row.get("ended"):
        facts.append(("Took", format_duration(row["ended"] - row["started"])))
    if row.get("failed_attempts"):
        facts.append(("Failed attempts", str(row["failed_attempts"])))
    if row.get("error"):
        facts.append(("Last error", row["error"]))
    if row.get("problem"):
        facts.append(("Problem", row["problem"]))
    if row.get("control_problem"):
        facts.append(("Control file", row["control_problem"]
                      + " — read as nothing asked; Pause or Stop replaces it"))
    if row.get("journal_problem"):
        facts.append(("Journal", row["journal_problem"]))
    if row.get("progress_problem"):
        facts.append(("Progress file", row["progress_problem"]))
    parts = [f"<h3>{html.escape(row['run_id'])}</h3><table cellpadding='2'>"]
    parts += [f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>"
              for k, v in facts if v]
    parts.append("</table>")
    if report:
        url = QUrl.fromLocalFile(report["path"]).toString()
        parts.append(f"<p><a href='{html.escape(url)}'>Open {html.escape(report['name'])}</a> "
                     f"({report.get('bytes', 0):,} bytes, written {_when(report.get('written'))})</p>")
    elif row.get("state") in (*LIVE_STATES, "created", "reading"):
        parts.append("<p>No report yet: a run writes its report when it ends.</p>")
    else:
        parts.append("<p>This run wrote no report of its own.</p>")
    reports = row.get("reports") or []
    if reports:
        parts.append("<p><b>Reported during the run</b></p><ul>"
                     + "".join(f"<li>{html.escape(r)}</li>" for r in reports) + "</ul>")
    return "".join(parts)


def notes_html(notes: list[dict[str, str]]) -> str:
    if not notes:
        return "<i>No notes yet.</i>"
    return "".join(
        f"<p><b>{html.escape(_local(n.get('at', '')))}</b> · {html.escape(n.get('by', ''))}<br>"
        f"{html.escape(n.get('text', '')).replace(chr(10), '<br>')}</p>" for n in notes)


class RunDetail(QTabWidget):
    """Records (plot and table), Log, Notes and Report of the selected run."""

    note_asked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.records = RecordsModel(self)
        self.records_view = QTableView()
        self.records_view.setModel(self.records)
        self.records_view.verticalHeader().setVisible(False)
        self.records_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.plot = RecordsPlot()
        records_page = QSplitter(Qt.Orientation.Horizontal)
        records_page.addWidget(self.plot)
        records_page.addWidget(self.records_view)
        records_page.setSizes([520, 380])

        self.log = QPlainTextEdit()
        self.log.setObjectName("log")
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(LOG_LINES)
        self.log.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.log_path = QLabel()
        self.log_path.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        log_page = QWidget()
        log_layout = QVBoxLayout(log_page)
        log_layout.addWidget(self.log_path)
        log_layout.addWidget(self.log, 1)

        self.notes = QTextBrowser()
        self.notes.setObjectName("notes")
        self.note_text = QPlainTextEdit()
        self.note_text.setObjectName("note-text")
        self.note_text.setPlaceholderText("What happened (a helium top-up, a realigned beam …)")
        self.note_text.setFixedHeight(70)
        self.add_note_button = QPushButton("Add note")
        self.add_note_button.setToolTip("Append this note to the selected run's notes (kept with the run).")
        self.add_note_button.setEnabled(False)
        self.add_note_button.clicked.connect(self._add_note)
        notes_page = QWidget()
        notes_layout = QVBoxLayout(notes_page)
        notes_layout.addWidget(self.notes, 1)
        note_row = QHBoxLayout()
        note_row.addWidget(self.note_text, 1)
        note_row.addWidget(self.add_note_button, 0, Qt.AlignmentFlag.AlignBottom)
        notes_layout.addLayout(note_row)

        self.report = QTextBrowser()
        self.report.setObjectName("report")
        self.report.setOpenLinks(False)
        self.report.anchorClicked.connect(QDesktopServices.openUrl)

        self.addTab(records_page, "Records")
        self.addTab(log_page, "Log")
        self.addTab(notes_page, "Notes")
        self.addTab(self.report, "Report")
        self._report: dict[str, Any] | None = None
        self._report_html = ""

    def clear(self) -> None:
        """Forget the run shown (another was selected)."""
        self.records.clear()
        self.plot.clear()
        self.log.clear()
        self.log_path.setText("")
        self.notes.clear()
        self.report.clear()
        self._report, self._report_html = None, ""

    def show_detail(self, detail: dict[str, Any], row: dict[str, Any] | None) -> None:
        """Apply one snapshot's news about the run (``row`` is its run-table row)."""
        if detail.get("records_reset"):
            self.records.clear()
            self.plot.clear()
        if detail["records"]:
            self.records.append_rows(detail["records"], detail["committed"], detail["columns"])
            self.plot.append(detail["plot"])
        if detail.get("log_reset"):
            self.log.clear()
        if detail.get("log"):
            self.log.moveCursor(self.log.textCursor().MoveOperation.End)
            self.log.insertPlainText(detail["log"])
            self.log.moveCursor(self.log.textCursor().MoveOperation.End)
        self.log_path.setText(detail.get("log_path") or "No log yet: the run has not been started.")
        if "notes" in detail:
            self.notes.setHtml(notes_html(detail["notes"]))
            bar = self.notes.verticalScrollBar()
            bar.setValue(bar.maximum())
        if "report" in detail:
            self._report = detail["report"]
        if row:
            text = report_html(row, self._report)
            if text != self._report_html:  # unchanged: leave the view (and its scroll) alone
                self._report_html = text
                self.report.setHtml(text)

    def _add_note(self) -> None:
        text = self.note_text.toPlainText().strip()
        if text:
            self.note_asked.emit(text)
            self.note_text.clear()
