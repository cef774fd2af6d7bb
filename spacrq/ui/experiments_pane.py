"""The Experiments pane: configure, start, watch, steer and annotate experiment runs.

Left, the experiment chosen from the workspace's declarations and the
configuration form its module's manifest describes.  Right, the experiment's
runs with their state, progress and ETA, the buttons that steer the selected
run, and below them its records (table and live plot), log, notes and report.

All file and process work happens off the GUI thread: one poller at 2 Hz runs
:class:`~spacrq.experiments.watch.ExperimentsWatch` (reading the runs and
carrying out the operator's requests), and a second, idle until asked, asks a
module for its manifest.  The pane only turns snapshots into widgets and
clicks into requests.  Errors are said inline under the buttons; the one
question asked in a dialog is whether to abort, because it cannot be undone.
"""
from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from spacrq.experiments.watch import ExperimentsWatch, ManifestAsker, buttons_for
from spacrq.ui.experiments_form import ConfigForm, FormError
from spacrq.ui.experiments_detail import RunDetail
from spacrq.ui.dialogs import confirm_abort
from spacrq.ui.experiments_models import RunTableModel
from spacrq.ui.poller import Poller
from spacrq.workspace import Workspace

#: seconds a module gets to say what it takes, in the window: shorter than the
#: command line's 60 s, because the operator is looking at an empty form meanwhile
MANIFEST_TIMEOUT = 20.0


def _label(text: str = "", *, wrap: bool = True, name: str = "") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if name:
        label.setObjectName(name)
    return label


class ExperimentsPane(QWidget):
    """The pane the main window shows under *Experiments*.

    ``interval`` is the run table's refresh (2 Hz); ``manifest_timeout`` how
    long a module may take to say what it takes (tests shorten both).
    """

    notify = Signal(str)

    def __init__(self, workspace: Workspace, parent: QWidget | None = None, *,
                 interval: float = 0.5, manifest_timeout: float | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self.watch = ExperimentsWatch(workspace.root)
        self._experiment: str | None = None
        self._run_id: str | None = None
        self._row: dict[str, Any] | None = None
        self._specs: list[dict[str, Any]] = []
        self._specs_seen = False
        self._ask = 0
        self._manifest_for: str | None = None
        self._want_select: str | None = None
        self._select_newest = True  # the pane opens on the experiment's newest run
        self._config_for: str | None = None
        self._run_config: dict[str, Any] | None = None
        self.last_snapshot: dict[str, Any] | None = None
        self._build()
        self.poller = Poller(self.watch.poll, interval, self)
        self.poller.snapshot.connect(self._on_snapshot)
        self.poller.error.connect(self._on_poll_error)
        self.manifest_timeout = manifest_timeout or MANIFEST_TIMEOUT
        self.manifests = Poller(ManifestAsker(workspace.root, self.manifest_timeout).poll, 3600.0, self)
        self.manifests.snapshot.connect(self._on_manifest)
        self.manifests.error.connect(self._on_poll_error)
        self.poller.start()
        self.manifests.start()

    # layout -------------------------------------------------------------------
    def _build(self) -> None:
        self.experiment_box = QComboBox()
        self.experiment_box.setObjectName("experiment")
        self.experiment_box.currentTextChanged.connect(self._experiment_chosen)
        self.reload_button = QPushButton("Ask again")
        self.reload_button.setToolTip("Ask the module for its manifest again (after updating it)")
        self.reload_button.clicked.connect(self._ask_manifest)
        self.declaration = _label(name="declaration")
        self.declaration.setStyleSheet("color: #566573;")
        self.environment = _label(name="environment")
        self.environment.setVisible(False)
        self.form = ConfigForm()
        self.form_error = _label(name="form-error")
        self.form_error.setStyleSheet("color: #c0392b;")
        self.run_name = QLineEdit()
        self.run_name.setObjectName("run-name")
        self.run_name.setPlaceholderText("run id (blank: <experiment>_<date-time>)")
        self.create_button = QPushButton("Create")
        self.create_button.setToolTip("Name a run with this configuration, to start later")
        self.create_and_run_button = QPushButton("Create and run")
        self.create_and_run_button.setToolTip("Start a new run with this configuration")
        self.create_and_run_button.setDefault(True)
        self._set_form_enabled(False)  # until a manifest has built the form
        self.create_button.clicked.connect(lambda: self._create(start=False))
        self.create_and_run_button.clicked.connect(lambda: self._create(start=True))

        top = QHBoxLayout()
        top.addWidget(QLabel("Experiment"))
        top.addWidget(self.experiment_box, 1)
        top.addWidget(self.reload_button)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.form)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        create_row = QHBoxLayout()
        create_row.addWidget(self.run_name, 1)
        create_row.addWidget(self.create_button)
        create_row.addWidget(self.create_and_run_button)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.addLayout(top)
        left_layout.addWidget(self.declaration)
        left_layout.addWidget(self.environment)
        left_layout.addWidget(scroll, 1)
        left_layout.addWidget(self.form_error)
        left_layout.addLayout(create_row)

        self.runs = RunTableModel(self)
        self.table = QTableView()
        self.table.setObjectName("runs")
        self.table.setModel(self.runs)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        # Fixed widths, fitted when runs appear: ResizeToContents would re-measure
        # every row on every dataChanged, which is what per-row updates avoid.
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.selectionModel().currentRowChanged.connect(self._run_chosen)

        self.buttons: dict[str, QPushButton] = {}
        bar = QHBoxLayout()
        for key, text, tip in (
            ("run", "Run", "Start the selected run (created, not yet started)"),
            ("pause", "Pause", "Hold before the next step, keeping the instruments; click again to go on"),
            ("stop", "Stop", "Finish the step in flight, then stop (resumable)"),
            ("abort", "Abort", "Interrupt the step in flight now (resumable from the last committed step)"),
            ("resume", "Resume", "Continue a stopped run from its last committed step"),
            ("duplicate", "Duplicate", "A new run with this run's configuration (named by the field to the right, or dated)"),
            ("rename", "Rename", "Give a run that has not started the name in the field to the right"),
            ("reconfigure", "Reconfigure", "Give a run that has not started the form's configuration"),
        ):
            button = QPushButton(text)
            button.setObjectName(f"button:{key}")
            button.setToolTip(tip)
            button.setEnabled(False)
            button.clicked.connect(lambda _=False, k=key: self._clicked(k))
            self.buttons[key] = button
            bar.addWidget(button)
        self.new_name = QLineEdit()
        self.new_name.setObjectName("new-name")
        self.new_name.setPlaceholderText("new name")
        self.new_name.setMaximumWidth(220)
        bar.addWidget(self.new_name)
        bar.addStretch(1)
        self.message = _label(name="message")

        self.detail = RunDetail()
        self.detail.note_asked.connect(self._add_note)

        upper = QWidget()
        upper_layout = QVBoxLayout(upper)
        upper_layout.setContentsMargins(0, 0, 0, 0)
        upper_layout.addWidget(self.table, 1)
        upper_layout.addLayout(bar)
        upper_layout.addWidget(self.message)
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(upper)
        right.addWidget(self.detail)
        right.setSizes([330, 470])

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(1, 1)
        split.setSizes([380, 900])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(split)

    # lifecycle ----------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the pollers and wait for requests in flight; the runs themselves go on.

        A module still being asked for its manifest is waited for up to its
        timeout (the question cannot be interrupted, and a thread left running
        would outlive the window); an abort in flight finishes its escalation.
        """
        self.poller.stop()
        self.manifests.stop(int((self.manifest_timeout + 2) * 1000))
        self.watch.close()

    # messages -----------------------------------------------------------------
    def _say(self, text: str, ok: bool = True) -> None:
        colour = "#1e8449" if ok else "#c0392b"
        self.message.setStyleSheet(f"color: {colour};")
        self.message.setText(text)
        if text:
            self.notify.emit(text)

    def _on_poll_error(self, text: str) -> None:
        self._say(f"Could not read the experiments: {text}", ok=False)

    # experiments and their forms ------------------------------------------------
    def plot_choices(self) -> dict[str, tuple[str, str]]:
        """The x and y chosen for each experiment's records (kept by the window's state)."""
        return dict(self.detail.plot.remembered)

    def restore_plot_choices(self, choices: dict[str, tuple[str, str]]) -> None:
        for name, pair in choices.items():
            self.detail.plot.remembered.setdefault(name, pair)

    def _experiment_chosen(self, name: str) -> None:
        if not name or name == self._experiment:
            return
        self._experiment = name
        self._run_id = None
        self._row = None
        self._config_for = None
        self._select_newest = True
        self.detail.plot.set_experiment(name)  # its remembered x/y apply to its runs
        self.runs.update([])
        self._clear_detail()
        self._show_declaration()
        self.poller.request(experiment=name, run=None)
        self._ask_manifest()
        self._update_buttons()

    def _show_declaration(self) -> None:
        spec = next((s for s in self._specs if s["name"] == self._experiment), None)
        if spec is None:
            self.declaration.setText("")
            return
        env = ", ".join(f"{k}={v}" for k, v in (spec.get("env") or {}).items()) or "none"
        self.declaration.setText(
            f"module <b>{html.escape(spec['module'])}</b> · interpreter {html.escape(spec['python'])}"
            f"<br>working folder {html.escape(spec['cwd'])}<br>environment {html.escape(env)}"
            f"<br>runs in {html.escape(spec['run_root'])}")

    def _ask_manifest(self) -> None:
        if not self._experiment:
            return
        self._ask += 1
        self._manifest_for = None
        self.form.clear(f"Asking {self._experiment} what it takes …")
        self.form_error.setText("")
        self.environment.setText("")
        self.environment.setVisible(False)
        self._set_form_enabled(False)
        self.manifests.request(experiment=self._experiment, ask=self._ask)

    def _on_manifest(self, answer: dict[str, Any]) -> None:
        if answer.get("ask") != self._ask or answer.get("experiment") != self._experiment:
            return  # an answer about an experiment no longer chosen
        if answer.get("error"):
            self.form.clear("")
            self.form_error.setText(answer["error"])
            return
        try:
            self.form.build(answer["manifest"])
        except FormError as exc:
            self.form.clear("")
            self.form_error.setText(str(exc))
            return
        self._manifest_for = self._experiment
        self._set_form_enabled(True)
        self._show_environment(answer.get("environment") or [])
        title = answer["manifest"].get("title")
        if title:
            self.create_and_run_button.setToolTip(f"Start a new run of {title} with this configuration")
        self._config_for = None
        self._fill_form_from_run()

    def _show_environment(self, variables: list[dict[str, Any]]) -> None:
        """What the module reads from its environment, and what a run would lack."""
        missing = [v["name"] for v in variables if v["required"] and not v["set"]]
        lines = [f"{html.escape(v['name'])}{'' if v['set'] else ' (not set)'}"
                 + (f" — {html.escape(v['description'])}" if v["description"] else "")
                 for v in variables]
        text = ("<br>reads " + "; ".join(lines)) if lines else ""
        if missing:
            text += ("<br><span style='color:#c0392b'>" + html.escape(", ".join(missing))
                     + " must be set for a run: add it to the declaration's env or the "
                       "module's .env</span>")
        self.environment.setText(text[4:] if text else "")
        self.environment.setVisible(bool(text))

    def _fill_form_from_run(self) -> None:
        """Show a not-yet-started run's own configuration in the form, once per selection,
        so Reconfigure starts from what the run has rather than from the defaults."""
        if (self._row and self._row["state"] == "created" and self._run_config is not None
                and self._manifest_for == self._experiment and self._config_for != self._run_id):
            self.form.set_config(self._run_config)
            self._config_for = self._run_id

    def _set_form_enabled(self, enabled: bool) -> None:
        self.create_button.setEnabled(enabled)
        self.create_and_run_button.setEnabled(enabled)

    def _form_config(self) -> dict[str, Any] | None:
        try:
            config = self.form.config()
        except FormError as exc:
            self.form_error.setText(str(exc))
            return None
        self.form_error.setText("")
        return config

    def _create(self, *, start: bool) -> None:
        config = self._form_config()
        if config is None or not self._experiment:
            return
        name = self.run_name.text().strip()
        self.watch.submit("create", experiment=self._experiment, run_id=name or None,
                          config=config, start=start)
        self._say(("Starting" if start else "Creating") + f" a run of {self._experiment} …")
        self.poller.poll_now()

    # the run table --------------------------------------------------------------
    def _run_chosen(self, current: QModelIndex, _previous: QModelIndex) -> None:
        row = self.runs.run_at(current.row()) if current.isValid() else None
        run_id = row["run_id"] if row else None
        if run_id == self._run_id:
            return
        self._run_id, self._row = run_id, row
        self._config_for = None
        self._clear_detail()
        self._update_buttons()
        self.poller.request(run=run_id)

    def _fit_columns(self, *_args) -> None:
        for column in (0, 1, 3, 4):
            self.table.resizeColumnToContents(column)
        metrics = self.table.fontMetrics()
        widest = {1: "stopping after this step", 3: "2026-12-31 23:59", 4: "2026-12-31 23:59"}
        for column, text in widest.items():  # wide enough for what the column will come to hold
            self.table.setColumnWidth(column, max(self.table.columnWidth(column),
                                                  metrics.horizontalAdvance(text) + 24))

    def _select(self, run_id: str) -> None:
        row = self.runs.row_of(run_id)
        if row < 0:
            return
        self.table.selectionModel().setCurrentIndex(
            self.runs.index(row, 0),
            QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)

    def _clear_detail(self) -> None:
        self.detail.clear()
        self._run_config = None

    def _update_buttons(self) -> None:
        row = self._row
        state = row["state"] if row else None
        decided = buttons_for(state, pause_asked=bool(row and row.get("pause_asked")),
                              stop_asked=row.get("stop_asked") if row else None)
        for key, button in self.buttons.items():
            button.setEnabled(bool(decided[key]))
        self.buttons["pause"].setText(decided["pause_label"])
        self.detail.add_note_button.setEnabled(bool(decided["note"]))

    def _clicked(self, key: str) -> None:
        run_id, experiment = self._run_id, self._experiment
        if not run_id or not experiment:
            return
        args: dict[str, Any] = {"experiment": experiment, "run_id": run_id}
        action = "start" if key == "run" else key
        if key == "pause":
            action = "continue" if self.buttons["pause"].text() == "Continue" else "pause"
        elif key in ("rename", "duplicate"):
            new = self.new_name.text().strip()
            if key == "rename" and not new:
                self._say("Type the new name in the field beside Rename first.", ok=False)
                self.new_name.setFocus()
                return
            args["new_id"] = new or None
            self.new_name.clear()
        elif key == "reconfigure":
            config = self._form_config()
            if config is None:
                return
            args["config"] = config
        elif key == "abort" and not self.confirm_abort(run_id):
            return
        self.watch.submit(action, **args)
        self._say(f"{action.capitalize()} {run_id} …")
        if key in ("pause", "stop", "abort", "run", "resume"):
            for name in ("pause", "stop", "abort", "run", "resume"):
                self.buttons[name].setEnabled(False)  # until the next snapshot says what is possible
        self.poller.poll_now()

    def confirm_abort(self, run_id: str) -> bool:
        """Abort interrupts the step in flight and cannot be undone: ask first."""
        return confirm_abort(
            self, "Abort the run?",
            f"Abort {run_id} now?\n\nThe step in flight is interrupted and its result lost; "
            "the run can be resumed from its last committed step.")

    def _add_note(self, text: str) -> None:
        if self._run_id and self._experiment:
            self.watch.submit("note", experiment=self._experiment, run_id=self._run_id, text=text)
            self.poller.poll_now()

    # snapshots ------------------------------------------------------------------
    def _on_snapshot(self, snap: dict[str, Any]) -> None:
        self.last_snapshot = snap
        self._show_experiments(snap)
        for message in snap["messages"]:
            self._say(message.get("text", ""), ok=bool(message.get("ok")))
            if message.get("ok") and message.get("select"):
                self._want_select = message["select"]
            if message.get("ok") and message.get("action") == "create" \
                    and self.run_name.text().strip() == message.get("run_id"):
                self.run_name.clear()  # kept when refused, to be corrected
        if snap["experiment"] != self._experiment:
            return  # a snapshot taken before the operator chose another experiment
        if snap.get("more"):
            self.poller.poll_now()  # runs still to read: go on without waiting the interval
        before = self.runs.rowCount()
        previous = {r["run_id"]: r["state"] for r in self.runs.rows()}
        self.runs.update(snap["rows"])
        self._announce(previous, snap["rows"])
        if self.runs.rowCount() > before:
            self._fit_columns()
        if self._want_select and self.runs.row_of(self._want_select) >= 0:
            self._select(self._want_select)
            self._want_select = None
        elif self._select_newest and self._run_id is None and self.runs.rowCount():
            newest = self.runs.run_at(0)  # rows come newest first (by folder, read or not)
            if newest:
                self._select(newest["run_id"])
                self._select_newest = False
        if self._run_id is not None:
            at = self.runs.row_of(self._run_id)
            self._row = self.runs.run_at(at)
            if at < 0:
                self._run_id = None
                self._clear_detail()
            self._update_buttons()
        if self._row is not None and self._row.get("problem"):
            self._say(self._row["problem"], ok=False)
        elif self._row is not None and self._row.get("control_problem"):
            self._say("The run's control file cannot be read, so the run is asked nothing and "
                      f"carries on: {self._row['control_problem']}. Pause or Stop replaces it.",
                      ok=False)
        detail = snap.get("detail")
        if detail and detail["run_id"] == self._run_id:
            self._show_detail(detail)

    #: states worth a word in the status bar (and the tray) when a run reaches them
    ANNOUNCED = ("paused", "canceled", "aborted", "interrupted", "completed", "failed")

    def _announce(self, previous: dict[str, str], rows: list[dict[str, Any]]) -> None:
        """Say when a run the pane was already showing reached an outcome or a hold."""
        for row in rows:
            before = previous.get(row["run_id"])
            if before in (None, "reading") or before == row["state"]:
                continue
            if row["state"] in self.ANNOUNCED:
                detail = f" after {row['done']} of {row['total']} steps" if row.get("total") else ""
                good = row["state"] in ("paused", "completed", "canceled")
                self._say(f"{self._experiment} run {row['run_id']} {row['badge']}{detail}", ok=good)

    def _show_experiments(self, snap: dict[str, Any]) -> None:
        if snap["declaration_error"]:
            self.declaration.setText(f"<span style='color:#c0392b'>"
                                     f"{html.escape(snap['declaration_error'])}</span>")
        names = [s["name"] for s in snap["experiments"]]
        self._specs = snap["experiments"]
        current = [self.experiment_box.itemText(i) for i in range(self.experiment_box.count())]
        if not names and not self._specs_seen:
            self.form.clear("No experiment is declared in this workspace yet: add one to "
                            f"{self.workspace.experiments / 'experiments.json'}.")
        self._specs_seen = True
        if names != current:
            self.experiment_box.blockSignals(True)
            self.experiment_box.clear()
            self.experiment_box.addItems(names)
            if self._experiment in names:
                self.experiment_box.setCurrentText(self._experiment)
            self.experiment_box.blockSignals(False)
            if not names:
                self.form.clear("No experiment is declared in this workspace yet: add one to "
                                f"{self.workspace.experiments / 'experiments.json'}.")
            elif self._experiment not in names:
                self._experiment = None
                self._experiment_chosen(names[0])
        if not snap["declaration_error"] and self._experiment:
            self._show_declaration()

    def _show_detail(self, detail: dict[str, Any]) -> None:
        self.detail.show_detail(detail, self._row)
        if "config" in detail:
            self._run_config = detail["config"]
            self._fill_form_from_run()
