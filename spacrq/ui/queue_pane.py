"""The Queue pane: line up the night's jobs, start them, watch them, stop them.

The pane edits a queue document in memory and saves it to a file in the
workspace; the runner is a separate, detached process (``spacrq queue run``)
that owns the file while it runs.  Everything the pane shows about a run
comes from files, read by its watch (:class:`spacrq.queue.watch.QueueWatch`)
on the poller thread, so closing the window never stops the night and
reopening it shows the run live again.  Editing lives in
:mod:`spacrq.ui.queue_editing`, the run controls in
:mod:`spacrq.ui.queue_running`; which control is live is decided by
:func:`spacrq.queue.pane.controls`; this module lays the pane out and routes
what the watch found.

Rules the pane keeps:

* the GUI thread reads no file: choosing the queue to show, loading, journal
  and log tailing, checking a job before it is added, validation, saving
  and starting the runner all go through the watch;
* while a runner is alive the editor refuses every change with a sentence —
  a save would overwrite the file the runner is writing — except Add job,
  which adds to the file under its lock (the runner takes the job in);
* Save never overwrites what others changed: the pane's changes since it
  read the file are merged onto the file as it is (:mod:`spacrq.queue.merge`);
* a runner started from elsewhere never takes the unsaved edits with it:
  the pane's new jobs are added to the running queue, the rest kept as a
  copy beside the file, and the message line says which and where
  (:mod:`spacrq.queue.aside`);
* errors are shown in the message line above the table, never in a modal
  dialog; the one question the pane asks is "abort the running job now?".
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel,
                               QPushButton, QSpinBox, QSplitter, QTableView, QVBoxLayout,
                               QWidget)

from spacrq.queue.model import Queue
from spacrq.queue.pane import (COL_AFTER, COL_JOB, COL_LABEL, COL_LOG, COL_MODULE, COL_NUMBER,
                               COL_STATUS, COL_TIME, COLUMNS, STATUS_LOOK, PaneState,
                               changed_on_disk, controls, progress, time_text)
from spacrq.queue.watch import QueueSnapshot, QueueWatch
from spacrq.ui.log_view import LogView
from spacrq.ui.pane_base import SHUTDOWN_BUDGET, PaneBase
from spacrq.ui.queue_editing import QueueEditing
from spacrq.ui.drops import QueueDrops
from spacrq.ui.queue_editor import JobEditor
from spacrq.ui.queue_job_edit import JobEditing
from spacrq.ui.queue_panels import DoneBar, ProblemsPanel
from spacrq.ui.queue_running import QueueRunning
from spacrq.ui.queue_sorting import QueueSorting
from spacrq.ui.table_model import Column, LookDelegate, RowTable
from spacrq.watching import Outcome

POLL_SECONDS = 0.5
_UNSET = object()

_MESSAGE_STYLE = {
    "error": "background:#f8d0d0; color:#5c0000; border:1px solid #d9a0a0;",
    "warning": "background:#ffe8a3; color:#4d3300; border:1px solid #e0c070;",
    "info": "background:#dbe8fb; color:#0b2d66; border:1px solid #a9c1e8;",
}


def _time_cell(row, now: float) -> str:
    return time_text(row.value, now)


def table_columns() -> tuple[Column, ...]:
    """The queue table's columns: "#" and "Time" right-aligned, "Status" coloured, "Time" ticks."""
    made = []
    for i, (title, tip) in enumerate(COLUMNS):
        made.append(Column(title, tip, right=i in (COL_NUMBER, COL_TIME),
                           looks=i == COL_STATUS, tick=_time_cell if i == COL_TIME else None))
    return tuple(made)


def _ticking(row) -> bool:
    return row.look == "running"


def _button_row(*buttons: tuple[str, str]) -> tuple[QHBoxLayout, list[QPushButton]]:
    """A row of ``(text, tooltip)`` buttons, left to right; every button says what it does."""
    row = QHBoxLayout()
    made = []
    for text, tip in buttons:
        button = QPushButton(text)
        button.setToolTip(tip)
        row.addWidget(button)
        made.append(button)
    return row, made


class QueuePane(QueueEditing, QueueRunning, PaneBase):
    """One queue file at a time: its editor, its table, its run controls and its log."""

    #: the queue file whose runner just ended (its morning report is written)
    queue_ended = Signal(str)
    #: every outcome of an action asked of the watch (for widgets that asked one)
    answered = Signal(object)

    def __init__(self, workspace, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self.queue = Queue(name="queue")
        self.path: Path | None = None
        self.dirty = False
        self.runner: dict = {}
        self._validate_token = 0
        self._checking = 0  # the token of the job being checked before it is added
        self._generation = 0  # counts edits, so a save knows whether it saved the latest
        self._saving: tuple[int, int] | None = None
        self._discard_armed = False
        self._shown: dict = {}
        self._on_disk = False  # the queue file exists (known from the watch, never a stat here)
        self._own_write = False
        self._load_message = False  # the message line shows the file's load error
        self._progress = progress(())  # counts the rows shown
        self._base = None  # the file as last read or written: what Save merges against
        self._conflicts: tuple = ()  # named by the last refused save: Save again keeps ours
        self._keeping = 0  # the token of the unsaved edits being kept as a runner started
        self._kept_failed = False  # they could not be kept: stay unsaved, never asked again

        self._build()
        self.clock = QTimer(self)
        self.clock.setInterval(1000)
        self.clock.timeout.connect(self._tick)
        self.start_watch(QueueWatch(), POLL_SECONDS)
        self.ask("choose_queue", folder=str(workspace.queues))
        self.ask("describe", module=self.editor.module.currentText())
        self._update_controls()

    # -- layout -------------------------------------------------------------------

    def _build(self) -> None:
        self.file_label = QLabel()
        self.file_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        files, (self.new_button, self.open_button, self.save_button,
                self.save_as_button) = _button_row(
            ("New", "Start an empty queue (saved when you press Save)."),
            ("Open…", "Open a queue file; a running queue shows live."),
            ("Save", "Write the queue file (refused while it runs)."),
            ("Save as…", "Write the queue under another name."))
        files.insertWidget(0, self.file_label, 1)

        self.editor = JobEditor(str(self.workspace.root))

        edits, (self.duplicate_button, self.edit_button, self.remove_button, self.up_button,
                self.down_button, self.validate_button) = _button_row(
            ("Duplicate", "Add a never-run copy of the selected job(s)."),
            ("Edit…", "Change a waiting job's settings, overrides, after, timeout or label "
                      "(F2)."),
            ("Remove", "Remove the selected job(s); jobs after them stop depending on them."),
            ("Move up", "Run the selected job(s) earlier."),
            ("Move down", "Run the selected job(s) later."),
            ("Validate", "Check every job now, without running anything; problems are "
                         "listed below."))
        self.on_error = QComboBox()
        self.on_error.addItem("continue with the others", "continue")
        self.on_error.addItem("stop the queue", "stop")
        self.on_error.setToolTip("What happens when a job fails. Jobs that depend on a failed "
                                 "job are always skipped.")
        self.max_failures = QSpinBox()
        self.max_failures.setRange(0, 999)
        self.max_failures.setSpecialValueText("never")
        self.max_failures.setToolTip("Halt the queue after this many failures in a row: the "
                                     "same mistake twelve times is one systematic problem.")
        edits.addStretch(1)
        edits.addWidget(QLabel("On failure:"))
        edits.addWidget(self.on_error)
        edits.addWidget(QLabel("Stop after"))
        edits.addWidget(self.max_failures)
        edits.addWidget(QLabel("failures in a row"))

        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.setContentsMargins(6, 3, 6, 3)
        self.message.hide()

        self.model = RowTable(table_columns(), looks=STATUS_LOOK, bold_looks=("running",),
                              parent=self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.setItemDelegateForColumn(COL_STATUS, LookDelegate(self.table))
        self.sorting = QueueSorting(self.table, self.model, COL_NUMBER, self)
        header = self.table.horizontalHeader()
        header.setHighlightSections(False)
        for col, width in ((COL_NUMBER, 40), (COL_JOB, 130), (COL_MODULE, 90), (COL_AFTER, 120),
                           (COL_STATUS, 90), (COL_TIME, 75), (COL_LOG, 150)):
            header.resizeSection(col, width)
        header.setSectionResizeMode(COL_LABEL, QHeaderView.ResizeMode.Stretch)

        runs, (self.run_button, self.stop_button, self.abort_button, self.resume_button,
               self.retry_button) = _button_row(
            ("Run", "Check the queue, save it and start it in its own process; closing the "
                    "window does not stop it."),
            ("Stop", "Let the running job finish, then start no other."),
            ("Abort", "Stop the running job now (it can be run again)."),
            ("Resume", "Start the runner again on this file: jobs not yet run, and a job cut "
                       "off mid-run, run now."),
            ("Retry failed", "Resume, also running failed jobs again and the jobs skipped "
                             "because of them."))
        self.progress = DoneBar()
        self.runner_label = QLabel()
        self.counts_label = QLabel()
        runs.addWidget(self.progress, 1)
        status = QHBoxLayout()
        status.addWidget(self.runner_label, 1)
        status.addWidget(self.counts_label)

        self.problems = ProblemsPanel()
        self.log = LogView()
        self.log.set_title("Log: select a job, or run the queue to follow the running one.")
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(self.problems)
        bottom.addWidget(self.log)
        bottom.setSizes([500, 700])

        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.addLayout(edits)
        top_layout.addWidget(self.message)
        top_layout.addWidget(self.sorting.banner)
        top_layout.addWidget(self.table, 1)
        top_layout.addLayout(runs)
        top_layout.addLayout(status)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(files)
        layout.addWidget(self.editor)
        layout.addWidget(split, 1)

        self.editor.submitted.connect(self.add_job_from_editor)
        self.editor.describe_wanted.connect(lambda name: self.ask("describe", module=name))
        self.new_button.clicked.connect(self._new_clicked)
        self.open_button.clicked.connect(self._open_clicked)
        self.save_button.clicked.connect(self.save)
        self.save_as_button.clicked.connect(self._save_as_clicked)
        self.duplicate_button.clicked.connect(self.duplicate_selected)
        self.edit_button.clicked.connect(self.edit_selected)
        # F2 edits the selected job, as it renames a file elsewhere (when Edit… may)
        edit_key = QShortcut(QKeySequence(Qt.Key.Key_F2), self.table)
        edit_key.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        edit_key.activated.connect(lambda: self.edit_button.isEnabled() and self.edit_selected())
        self.job_edits = JobEditing(self, self.ask)
        self.job_edits.edited.connect(lambda _job_id, text: self.show_message("info", text))
        self.sorting.sorted_changed.connect(lambda _sorted: self._update_controls())
        self.drops = QueueDrops(self, self.editor)
        self.remove_button.clicked.connect(self.remove_selected)
        self.up_button.clicked.connect(lambda: self.move_selected(-1))
        self.down_button.clicked.connect(lambda: self.move_selected(+1))
        self.validate_button.clicked.connect(self.validate)
        self.run_button.clicked.connect(lambda: self.start("run"))
        self.resume_button.clicked.connect(lambda: self.start("resume"))
        self.retry_button.clicked.connect(lambda: self.start("retry"))
        self.stop_button.clicked.connect(self.stop)
        self.abort_button.clicked.connect(self.abort)
        self.on_error.currentIndexChanged.connect(self._options_changed)
        self.max_failures.valueChanged.connect(self._options_changed)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)
        self.table.doubleClicked.connect(self._row_double_clicked)
        self.problems.job_clicked.connect(self.select_job)

    # -- state shown --------------------------------------------------------------

    @property
    def runner_alive(self) -> bool:
        return bool(self.runner.get("alive"))

    def selected_rows(self) -> list[int]:
        """The selected rows, in run order, whatever column the view is sorted by."""
        return self.sorting.selected_rows()

    def selected_ids(self) -> list[str]:
        return [str(self.model.key_at(i)) for i in self.selected_rows()
                if self.model.key_at(i) is not None]

    def show_message(self, level: str, text: str) -> None:
        """One line above the table; errors never open a dialog."""
        self._load_message = False
        self.message.setStyleSheet(_MESSAGE_STYLE.get(level, _MESSAGE_STYLE["info"]))
        self.message.setText(text)
        self.message.setVisible(bool(text))

    def clear_message(self) -> None:
        self._load_message = False
        self.message.clear()
        self.message.hide()

    def _update_controls(self) -> None:
        selected = tuple(self.selected_rows())
        picked = tuple(self.model.rows[i].value for i in selected if i < len(self.model.rows))
        state = PaneState(runner_alive=self.runner_alive, runner_pid=self.runner.get("pid"),
                          stop_asked=bool(self.runner.get("stop")), on_disk=self._on_disk,
                          dirty=self.dirty, progress=self._progress, selected=selected,
                          picked=picked, checking=bool(self._checking),
                          sorted=not self.sorting.in_run_order())
        c = controls(state)
        for widget, button in ((self.editor, c.editor), (self.editor.add_button, c.add),
                               (self.duplicate_button, c.duplicate), (self.edit_button, c.edit),
                               (self.remove_button, c.remove), (self.up_button, c.move_up),
                               (self.down_button, c.move_down),
                               (self.validate_button, c.validate), (self.open_button, c.open),
                               (self.save_button, c.save), (self.save_as_button, c.save_as),
                               (self.new_button, c.new), (self.run_button, c.run),
                               (self.stop_button, c.stop), (self.abort_button, c.abort),
                               (self.resume_button, c.resume), (self.retry_button, c.retry_failed),
                               (self.on_error, c.edit_options),
                               (self.max_failures, c.edit_options)):
            self._show(widget, "setEnabled", button.enabled)
            if widget is not self.editor:
                self._show(widget, "setToolTip", button.tip)
        found = self._progress
        self.progress.set_progress(found)
        self._show(self.counts_label, "setText", found.caption)
        name = self.path.name if self.path else "(looking for the queue to show…)"
        self._show(self.file_label, "setText",
                   f"<b>{name}</b>{' — unsaved changes' if self.dirty else ''}"
                   f"<br><small>{self.path or ''}</small>")
        self._show_runner()
        if found.running and not self.clock.isActive():
            self.clock.start()
        elif not found.running and self.clock.isActive():
            self.clock.stop()

    def _show(self, widget, setter: str, value) -> None:
        """Call ``widget.setter(value)`` only when the value differs from the last one.

        Snapshots arrive twice a second all night; most change nothing the
        operator sees, so most of these calls are skipped.
        """
        key = (id(widget), setter)
        if self._shown.get(key, _UNSET) != value:
            self._shown[key] = value
            getattr(widget, setter)(value)

    def _tick(self) -> None:
        self.model.tick(ticking=_ticking)

    # -- what the watch answered ------------------------------------------------------

    def outcome_arrived(self, outcome: Outcome) -> None:
        """One action ended: route it to what asked for it."""
        action = outcome.action
        self.job_edits.outcome_arrived(outcome)
        if action in ("save", "run", "stop"):
            self._saved_or_ran(outcome)
        elif action == "validate":
            if outcome.token == self._validate_token:
                self._checked(list(outcome.data.get("problems", ())))
        elif action == "check_job":
            self._job_checked(outcome)
        elif action == "add_job":
            self._job_added_to_file(outcome)
        elif action == "keep_unsaved":
            self._unsaved_kept(outcome)
        elif action == "describe":
            self.editor.show_description(outcome.data.get("module", ""),
                                         outcome.data.get("info"), outcome.message)
        elif action == "choose_queue":
            if outcome.data.get("exists"):
                self._watch_file(Path(outcome.data["path"]))
            else:
                self._named(outcome)
        elif action == "new_name":
            self._named(outcome)
        elif action == "open":
            self._opened(outcome)
        elif action == "edit" and outcome.ok:
            self._own_write = True  # the file change read next is this edit
            self.set_view(reload=outcome.token)
        self.answered.emit(outcome)
        self._update_controls()

    def poll_failed(self, message: str) -> None:
        self.show_message("error", f"Reading the queue failed: {message}")

    def show_snapshot(self, snap: QueueSnapshot) -> None:
        if snap.modules is not None:
            self.editor.set_modules(snap.modules)
        if self.path is None or snap.path != str(self.path):
            return  # an answer about a file no longer shown
        ended = snap.runner is not None and self._runner_changed(dict(snap.runner))
        if snap.on_disk is not None:
            self._on_disk = snap.on_disk
        if snap.rows is not None:
            self._on_disk = True
        if snap.load_error is not None:
            if snap.load_error and not (self.dirty and not self._on_disk):
                self.show_message("error", snap.load_error)
                self._load_message = True
            elif not snap.load_error and self._load_message:
                self.clear_message()
        if snap.load_notice:  # what reading the file had to do (a power cut's damage undone)
            self.show_message("warning", snap.load_notice)
        if snap.queue is not None and self._after_save(snap):
            pass  # read before this save wrote the file: the next poll reads what it wrote
        elif snap.queue is not None:
            own_write, self._own_write = self._own_write, False
            if self.dirty and self.queue.jobs:
                if not self.runner_alive and not own_write and snap.news is not None:
                    self.show_message("warning", changed_on_disk(self.path.name, snap.news))
            else:
                self._adopt(snap.queue, snap.base)
                self.show_rows(snap.rows or (), snap.progress)
        elif snap.rows is not None and (self.runner_alive or not self.dirty):
            if self.dirty and self.runner_alive:
                self._keep_unsaved()  # added to the running queue, or kept as a copy
            keep = self.selected_ids()
            self.show_rows(snap.rows, snap.progress)
            if keep and self.selected_ids() != keep:
                self._select_ids(keep)
        if ended:
            self._announce_end()
        if snap.log_restarted:
            self.log.restart(snap.log_job, snap.log_path, self._log_title(snap))
        if snap.log_text:
            self.log.append(snap.log_text)
        self._update_controls()

    @staticmethod
    def _after_save(snap: QueueSnapshot) -> bool:
        """True when ``snap`` also answers a save: the file it read predates the save (which
        wrote it, or refused with a sentence the "changed on disk" line must not cover)."""
        return any(o.action in ("save", "run") and (o.data.get("saved") or
                                                    o.data.get("conflicts"))
                   for o in snap.outcomes)

    def show_rows(self, shown, counted=None) -> None:
        """Put ``shown`` rows in the table (``counted``: their progress, when already known)."""
        self.model.set_rows(shown)
        self._progress = counted if counted is not None else progress(self.model.rows)

    @staticmethod
    def _log_title(snap: QueueSnapshot) -> str:
        if not snap.log_job and snap.log_path:
            return ("The runner's log — the last run's summary is at its end "
                    "(select a job to read its own log)")
        if not snap.log_job:
            return "Log: select a job, or run the queue to follow the running one."
        if not snap.log_path:
            return f"Log of {snap.log_job}: none yet (it has not run)."
        return f"Log of {snap.log_job} — {Path(snap.log_path).name}"

    # -- selection ----------------------------------------------------------------

    def _selection_changed(self, *_args) -> None:
        ids = self.selected_ids()
        self.set_view(log_job=ids[0] if len(ids) == 1 else "")
        self._update_controls()

    def _select_ids(self, ids: list[str]) -> None:
        self.sorting.select_rows([row for row in (self.model.row_of(i) for i in ids) if row >= 0])

    def select_job(self, job_id: str) -> None:
        self._select_ids([job_id])

    # -- lifetime -----------------------------------------------------------------

    def running_now(self) -> tuple[str, ...]:
        runner = self.runner
        if not (isinstance(runner, dict) and runner.get("alive")):
            return ()
        name = getattr(self.path, "name", "") or "the queue"
        job = runner.get("current_job")
        return (f"{name}: running {job}" if job else f"{name}: running",)

    def shutdown(self, budget: float = SHUTDOWN_BUDGET) -> bool:
        """Stop watching within ``budget`` seconds; the runner, if any, goes on."""
        self.clock.stop()
        return super().shutdown(budget)
