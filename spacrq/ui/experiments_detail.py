"""What the Experiments pane shows of the one run selected: its records, log, notes and report.

Four tabs fed from the watch's snapshots, each incrementally: records and
plot points are appended (the records as columns), log text is appended to
the one log view (it keeps the last lines, the file keeps everything), notes
and the report are redrawn only when they changed.  Adding a note is asked for through :attr:`RunDetail.note_asked`;
the pane carries it out off the GUI thread like every other request.
"""
from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from spacrq.experiments.pane import LIVE_STATES, RunRow
from spacrq.experiments.watch import Detail
from spacrq.fmt import duration
from spacrq.ui.experiments_models import RecordsModel
from spacrq.ui.experiments_plot import RecordsPlot
from spacrq.ui.log_view import LogView


def _when(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) if epoch else ""


def _local(iso: str) -> str:
    """A note's ISO time as the bench's local time."""
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return iso


def report_html(run: RunRow, report: Mapping[str, Any] | None) -> str:
    """The run in brief, a link to its own report, and what its journal reported."""
    facts = [("State", run.badge),
             ("Steps", f"{run.done} of {run.total}" if run.total else str(run.done)),
             ("Started", _when(run.started)), ("Ended", _when(run.ended))]
    if run.started and run.ended:
        facts.append(("Took", duration(run.ended - run.started)))
    if run.failed_attempts:
        facts.append(("Failed attempts", str(run.failed_attempts)))
    if run.error:
        facts.append(("Last error", run.error))
    if run.problem:
        facts.append(("Problem", run.problem))
    if run.control_problem:
        facts.append(("Control file", run.control_problem
                      + " — read as nothing asked; Pause or Stop replaces it"))
    if run.journal_problem:
        facts.append(("Journal", run.journal_problem))
    if run.progress_problem:
        facts.append(("Progress file", run.progress_problem))
    parts = [f"<h3>{html.escape(run.run_id)}</h3><table cellpadding='2'>"]
    parts += [f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>"
              for k, v in facts if v]
    parts.append("</table>")
    if report:
        url = QUrl.fromLocalFile(report["path"]).toString()
        parts.append(f"<p><a href='{html.escape(url)}'>Open {html.escape(report['name'])}</a> "
                     f"({report.get('bytes', 0):,} bytes, written {_when(report.get('written'))})</p>")
    elif run.state in (*LIVE_STATES, "created", "reading"):
        parts.append("<p>No report yet: a run writes its report when it ends.</p>")
    else:
        parts.append("<p>This run wrote no report of its own.</p>")
    if run.reports:
        parts.append("<p><b>Reported during the run</b></p><ul>"
                     + "".join(f"<li>{html.escape(r)}</li>" for r in run.reports) + "</ul>")
    return "".join(parts)


def notes_html(notes: Sequence[Mapping[str, str]]) -> str:
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

        self.log = LogView("(no log yet: the run has not been started)")

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
        self.addTab(self.log, "Log")
        self.addTab(notes_page, "Notes")
        self.addTab(self.report, "Report")
        self._report: Mapping[str, Any] | None = None
        self._report_html = ""

    def clear(self) -> None:
        """Forget the run shown (another was selected)."""
        self.records.clear()
        self.plot.clear()
        self.log.clear()
        self.notes.clear()
        self.report.clear()
        self._report, self._report_html = None, ""

    def show_detail(self, detail: Detail, run: RunRow | None) -> None:
        """Apply one snapshot's news about the run (``run`` is its run-table row)."""
        records = detail.records
        if records.reset:
            self.plot.clear()
        if records.reset or records.count:
            self.records.add(records)
        if records.count:
            self.plot.append(records.plot)
        if detail.log_reset:
            self.log.restart(detail.run_id, detail.log_path,
                             detail.log_path or "No log yet: the run has not been started.")
        self.log.append(detail.log)
        if detail.notes_changed:
            self.notes.setHtml(notes_html(detail.notes))
            bar = self.notes.verticalScrollBar()
            bar.setValue(bar.maximum())
        if detail.report_changed:
            self._report = detail.report
        if run is not None:
            text = report_html(run, self._report)
            if text != self._report_html:  # unchanged: leave the view (and its scroll) alone
                self._report_html = text
                self.report.setHtml(text)

    def _add_note(self) -> None:
        text = self.note_text.toPlainText().strip()
        if text:
            self.note_asked.emit(text)
            self.note_text.clear()
