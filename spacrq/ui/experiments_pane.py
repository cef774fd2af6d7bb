"""The Experiments pane: configure, start, watch, steer and annotate experiment runs.

Left, the experiment chosen from the workspace's declarations and the
configuration form its module's manifest describes.  Right, the experiment's
runs with their state, progress and ETA, the buttons that steer the selected
run, and below them its records (table and live plot), log, notes and report.

All file and process work happens off the GUI thread, in the pane's
:class:`~spacrq.experiments.watch.ExperimentsWatch`: reading the runs,
carrying out the operator's actions, asking a module for its manifest.  The
pane only turns snapshots into widgets and clicks into :meth:`ask`; which
buttons a run allows is :func:`spacrq.experiments.pane.controls`' answer.
Errors are said inline under the buttons; the questions asked in a
dialog are whether to abort (it cannot be undone) and whether to remove a
declaration (its runs stay on disk).  Declare… opens a dialog of its own
(:mod:`spacrq.ui.experiments_declare`) that asks through the same watch.
"""
from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, QTimer
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from spacrq.experiments.errors import MANIFEST_TIMEOUT
from spacrq.experiments.manifest import config_problems_of
from spacrq.experiments.pane import (BADGES, COLUMNS, RunRow, announcement, clock_text,
                                     controls, form_heading, running_line)
from spacrq.experiments.watch import ExperimentsWatch, Snapshot
from spacrq.procs import interpreter
from spacrq.ui.dialogs import confirm_abort
from spacrq.ui.experiments_declare import DeclareDialog, confirm_remove
from spacrq.ui.experiments_detail import RunDetail
from spacrq.ui.experiments_form import ConfigForm, FormError
from spacrq.ui.experiments_table import ProgressDelegate, RunColumns
from spacrq.ui.pane_base import PaneBase
from spacrq.ui.table_model import Column, LookDelegate, RowTable
from spacrq.watching import Code, Outcome
from spacrq.workspace import Workspace

#: the run buttons: (name, label, tooltip)
RUN_BUTTONS = (
    ("run", "Run", "Start the selected run (created, not yet started)"),
    ("pause", "Pause", "Hold before the next step, keeping the instruments; click again to go on"),
    ("stop", "Stop", "Finish the step in flight, then stop (resumable)"),
    ("abort", "Abort", "Interrupt the step in flight now (resumable from the last committed step)"),
    ("resume", "Resume", "Continue a stopped run from its last committed step"),
    ("duplicate", "Duplicate",
     "A new run with this run's configuration (named by the field to the right, or dated)"),
    ("rename", "Rename", "Give a run that has not started the name in the field to the right"),
    ("reconfigure", "Reconfigure", "Give a run that has not started the form's configuration"),
)
#: buttons that steer a live run: off from a click until the next snapshot says what is possible
STEERING = ("pause", "stop", "abort", "run", "resume")


def _label(text: str = "", *, wrap: bool = True, name: str = "") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if name:
        label.setObjectName(name)
    return label


def run_table() -> RowTable:
    """The run table: its state column coloured and dotted by the run's state."""
    columns = [Column(title, tip, looks=(title == "State"), dot=(title == "State"))
               for title, tip in COLUMNS]
    looks = {state: (colour, QColor(colour).lighter(185).name())
             for state, (_text, colour) in BADGES.items()}
    return RowTable(columns, looks=looks)


#: milliseconds between two reads of the runs' histories while the pane catches up (one
#: frame): the window paints what arrived while no read holds the interpreter — read back
#: to back, the first second of 20 live runs stalled the window 50-70 ms, one frame apart
#: 30-37 ms, and every history is still read in about 1.3 s (bench/bench_gui_experiments.py)
CATCH_UP_FRAME_MS = 16
#: the widest start or end the Started and Ended columns are fitted for
CLOCK_SAMPLE = time.mktime((2026, 12, 31, 23, 59, 0, 0, 0, -1))


class ExperimentsPane(PaneBase):
    """The pane the main window shows under *Experiments*.

    ``interval`` is the run table's refresh (2 Hz); ``manifest_timeout`` how
    long a module may take to say what it takes (tests shorten both).
    """

    def __init__(self, workspace: Workspace, parent: QWidget | None = None, *,
                 interval: float = 0.5, manifest_timeout: float | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self._experiment: str | None = None
        self._run_id: str | None = None
        self._run: RunRow | None = None
        self._specs: tuple[Mapping[str, Any], ...] = ()
        self._specs_seen = False
        self._manifest_token = 0
        self._manifest_for: str | None = None
        self._want_select: str | None = None
        self._want_experiment: str | None = None  # just declared: chosen once it is listed
        self._select_newest = True  # the pane opens on the experiment's newest run
        self._config_for: str | None = None  # the run the form was last filled from
        self._run_config: Mapping[str, Any] | None = None
        self._run_config_known = False  # the selected run's configuration has been read
        self._form_shows_run = False  # the form holds that run's configuration (not defaults)
        self._form_edited = False  # the operator changed a field since the form was filled
        self._filling = False
        self._heading_text: str | None = None
        self._manifest: Mapping[str, Any] | None = None
        self._shown_controls = None  # what the buttons show now (set only when it changes)
        self._declaration_text: str | None = None
        self._declarations_shown: tuple | None = None
        self._problem_said = ""
        self.last_snapshot: Snapshot | None = None
        self._build()
        self.start_watch(ExperimentsWatch(workspace.root,
                                          manifest_timeout=manifest_timeout or MANIFEST_TIMEOUT),
                         interval, experiment=None, run=None)

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
        self.form = ConfigForm()
        self.form.changed.connect(self._form_changed)
        #: what the form holds: the selected run's configuration, or a new run's defaults
        self.form_heading = _label(name="form-heading")
        self.form_heading.setStyleSheet("font-weight: bold;")
        self.defaults_button = QPushButton("Defaults")
        self.defaults_button.setObjectName("button:defaults")
        self.defaults_button.setToolTip("Fill the form with the module's defaults, for a new run "
                                        "(the selected run keeps its own configuration)")
        self.defaults_button.setEnabled(False)
        self.defaults_button.clicked.connect(self._defaults_clicked)
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

        #: the row above the form: the experiment chooser and what acts on the experiment
        self.experiment_bar = QHBoxLayout()
        self.experiment_bar.addWidget(QLabel("Experiment"))
        self.experiment_bar.addWidget(self.experiment_box, 1)
        self.experiment_bar.addWidget(self.reload_button)
        self.declare_button = QPushButton("Declare…")
        self.declare_button.setObjectName("button:declare")
        self.declare_button.setToolTip("Declare an experiment in this workspace: its module, "
                                       "interpreter, working folder and run root")
        self.declare_button.clicked.connect(self._declare_clicked)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setObjectName("button:remove")
        self.remove_button.setToolTip("Remove the chosen experiment's declaration (its runs "
                                      "stay on disk)")
        self.remove_button.setEnabled(False)
        self.remove_button.clicked.connect(self._remove_clicked)
        self.declare_dialog: DeclareDialog | None = None
        self.experiment_bar.addWidget(self.declare_button)
        self.experiment_bar.addWidget(self.remove_button)
        # room for a name beside the four buttons, whatever the first name listed was
        self.experiment_box.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.experiment_box.setMinimumContentsLength(14)
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
        left_layout.addLayout(self.experiment_bar)
        left_layout.addWidget(self.declaration)
        heading_row = QHBoxLayout()
        heading_row.addWidget(self.form_heading, 1)
        heading_row.addWidget(self.defaults_button, 0, Qt.AlignmentFlag.AlignTop)
        left_layout.addLayout(heading_row)
        left_layout.addWidget(scroll, 1)
        left_layout.addWidget(self.form_error)
        left_layout.addLayout(create_row)

        self.runs = run_table()
        self.runs.setParent(self)
        self.table = QTableView()
        self.table.setObjectName("runs")
        self.table.setModel(self.runs)
        self.table.setItemDelegateForColumn(1, LookDelegate(self.table))
        self.table.setItemDelegateForColumn(2, ProgressDelegate(self.table))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        self.columns = RunColumns(self.table, clock_text(CLOCK_SAMPLE))
        self.table.selectionModel().currentRowChanged.connect(self._run_chosen)

        self.buttons: dict[str, QPushButton] = {}
        self._tips: dict[str, str] = {}
        # two rows: what steers the run, then what names and copies it (one row of eight
        # buttons and a name field was wider than the pane and squeezed the field's words)
        bar = QHBoxLayout()
        naming = QHBoxLayout()
        for key, text, tip in RUN_BUTTONS:
            button = QPushButton(text)
            button.setObjectName(f"button:{key}")
            button.setToolTip(tip)
            button.setEnabled(False)
            button.clicked.connect(lambda _=False, k=key: self._clicked(k))
            self.buttons[key] = button
            self._tips[key] = tip
            (bar if key in STEERING else naming).addWidget(button)
        self.new_name = QLineEdit()
        self.new_name.setObjectName("new-name")
        self.new_name.setPlaceholderText("new name")
        self.new_name.setToolTip("The name Rename gives the selected run, or Duplicate gives "
                                 "its copy (blank: dated)")
        self.new_name.setMaximumWidth(220)
        # never narrower than what it says it is for
        self.new_name.setMinimumWidth(self.new_name.fontMetrics().horizontalAdvance("new name_")
                                      + 16)
        naming.addWidget(self.new_name, 1)
        naming.addStretch(1)
        bar.addStretch(1)
        self.message = _label(name="message")

        self.detail = RunDetail()
        self.detail.note_asked.connect(self._add_note)

        upper = QWidget()
        upper_layout = QVBoxLayout(upper)
        upper_layout.setContentsMargins(0, 0, 0, 0)
        upper_layout.addWidget(self.table, 1)
        upper_layout.addLayout(bar)
        upper_layout.addLayout(naming)
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

    # reading the table ------------------------------------------------------------
    def run_of(self, run_id: str | None) -> RunRow | None:
        """The run shown in the table under ``run_id`` (``None`` when it is not shown)."""
        row = self.runs.row_at(self.runs.row_of(run_id))
        return row.value if row is not None else None

    def running_now(self) -> tuple[str, ...]:
        """The chosen experiment's runs that run or are paused (their process is alive)."""
        return running_line(self._experiment, [(str(row.key), row.look) for row in self.runs.rows])

    def shown_runs(self) -> list[RunRow]:
        return [row.value for row in self.runs.rows]

    @property
    def selected_run(self) -> RunRow | None:
        """The run the operator looks at (as of the last snapshot)."""
        return self._run

    @property
    def selected_run_id(self) -> str | None:
        return self._run_id

    # messages -----------------------------------------------------------------
    def _say(self, text: str, ok: bool = True) -> None:
        colour = "#1e8449" if ok else "#c0392b"
        self.message.setStyleSheet(f"color: {colour};")
        self.message.setText(text)
        if text:
            self.notify.emit(text)

    def poll_failed(self, message: str) -> None:
        self._say(f"Could not read the experiments: {message}", ok=False)

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
        self._run = None
        self._config_for = None
        self._select_newest = True
        self.detail.plot.set_experiment(name)  # its remembered x/y apply to its runs
        self.runs.set_rows(())
        self._clear_detail()
        self._show_declaration()
        self.set_view(experiment=name, run=None)
        self._ask_manifest()
        self._update_buttons()

    def _show_declaration(self) -> None:
        spec = next((s for s in self._specs if s["name"] == self._experiment), None)
        if spec is None:
            self._set_declaration("")
            return
        env = ", ".join(f"{k}={v}" for k, v in (spec.get("env") or {}).items()) or "none"
        self._set_declaration(
            f"module <b>{html.escape(spec['module'])}</b> · interpreter {html.escape(spec['python'])}"
            f"<br>working folder {html.escape(spec['cwd'])}<br>environment {html.escape(env)}"
            f"<br>runs in {html.escape(spec['run_root'])}")

    def _set_declaration(self, text: str) -> None:
        if text != self._declaration_text:
            self._declaration_text = text
            self.declaration.setText(text)

    def _ask_manifest(self) -> None:
        if not self._experiment:
            return
        self._manifest_for = None
        self._form_shows_run = self._form_edited = False
        self.form.clear(f"Asking {self._experiment} what it takes …")
        self.form_error.setText("")
        self._set_form_enabled(False)
        self._show_heading()
        self._manifest_token = self.ask("manifest", experiment=self._experiment)

    def _manifest_arrived(self, outcome: Outcome) -> None:
        if outcome.token != self._manifest_token \
                or outcome.data.get("experiment") != self._experiment:
            return  # an answer about an experiment no longer chosen
        if not outcome.ok:
            self.form.clear("")
            self.form_error.setText(outcome.message)
            return
        manifest = outcome.data["manifest"]
        self._manifest = manifest
        try:
            self.form.build(manifest)
        except FormError as exc:
            self.form.clear("")
            self.form_error.setText(str(exc))
            return
        self._manifest_for = self._experiment
        self._set_form_enabled(True)
        # what the module reads from its environment, and what a run would lack
        self.form.show_environment(list(outcome.data.get("environment") or []))
        title = manifest.get("title")
        if title:
            self.create_and_run_button.setToolTip(f"Start a new run of {title} with this configuration")
        self._config_for = None
        self._fill_form_from_run()
        if manifest.get("chooses_devices"):
            self._ask_devices()

    def _ask_devices(self) -> None:
        """Ask the module which devices the form's configuration uses (answered later)."""
        try:
            config = self.form.config()
        except FormError as exc:
            self.form.set_devices([], f"The devices are asked for a valid configuration: {exc}")
            return
        self.ask("devices", experiment=self._experiment, config=config)

    def _fill_form_from_run(self) -> None:
        """Show the selected run's own configuration in the form, once per selection, so the
        form matches the run the operator looks at: Reconfigure starts from what a created
        run has, and Create makes a new run from what a started one ran with.  A run with no
        configuration file of its own shows the module's defaults, and says so."""
        if (self._run is not None and self._run_config_known
                and self._manifest_for == self._experiment and self._config_for != self._run_id):
            self._fill(self._run_config)
            self._config_for = self._run_id
        self._show_heading()

    def _fill(self, config: Mapping[str, Any] | None) -> None:
        """The defaults, then ``config`` over them (``None``: the defaults alone)."""
        self._filling = True
        try:
            self.form.set_defaults()
            if config is not None:
                self.form.set_config(dict(config))
        finally:
            self._filling = False
        self._form_shows_run = config is not None
        self._form_edited = False
        refused = config_problems_of(self._manifest or {}, config)[0] if config else []
        self.form_error.setText(
            f"Its configuration is one the module refuses ({'; '.join(refused)}); the form "
            "shows the nearest it allows." if refused else "")

    def _form_changed(self) -> None:
        if not self._filling and not self._form_edited:
            self._form_edited = True
            self._show_heading()

    def _defaults_clicked(self) -> None:
        self._fill(None)
        self._show_heading()

    def _show_heading(self) -> None:
        built = self._manifest_for is not None and self._manifest_for == self._experiment
        if not built:
            text = ""
        elif self._run is not None and not self._run_config_known \
                and self._config_for != self._run_id:
            text = f"Reading run {self._run.run_id}'s configuration …"
        else:
            text = form_heading(self._experiment, self._run, shows_run=self._form_shows_run,
                                has_config=self._run_config is not None, edited=self._form_edited)
        self.defaults_button.setEnabled(built)
        if text != self._heading_text:
            self._heading_text = text
            self.form_heading.setText(text)

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

    def _create(self, *, start: bool, **launch: Any) -> None:
        """Create (and start) a run with the form's configuration, options and devices
        (``launch`` overrides them)."""
        config = self._form_config()
        if config is None or not self._experiment:
            return
        name = self.run_name.text().strip()
        launch = {"options": self.form.options() or None, "devices": self.form.devices(), **launch}
        self.ask("create", experiment=self._experiment, run_id=name or None,
                 config=config, start=start, **launch)
        self._say(("Starting" if start else "Creating") + f" a run of {self._experiment} …")

    # the run table --------------------------------------------------------------
    def _run_chosen(self, current: QModelIndex, _previous: QModelIndex) -> None:
        row = self.runs.row_at(current.row()) if current.isValid() else None
        run = row.value if row is not None else None
        run_id = run.run_id if run is not None else None
        if run_id == self._run_id:
            return
        self._run_id, self._run = run_id, run
        self._config_for = None
        self._clear_detail()
        if run is None and self._form_shows_run and not self._form_edited:
            self._fill(None)  # no run is looked at: the form is a new run's again
        self._show_heading()
        self._update_buttons()
        self.set_view(run=run_id)

    def _follow(self, run_id: str) -> None:
        """The table's current row is ``run_id``'s again after the rows moved (a run's state
        re-sorted them): else the current row named another run, and a click on that row
        changed nothing, for the current row had not changed."""
        current = self.table.currentIndex()
        if not current.isValid() or current.row() != self.runs.row_of(run_id):
            self._select(run_id)

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
        self._run_config_known = False

    def _update_buttons(self, force: bool = False) -> None:
        run = self._run
        decided = run.controls() if run is not None else controls(None)
        if decided == self._shown_controls and not force:
            return  # a poll that changed nothing about the run changes no widget
        self._shown_controls = decided
        for key, button in self.buttons.items():
            choice = getattr(decided, key)
            button.setEnabled(choice.enabled)
            button.setToolTip(self._tips[key] + (f"\n({choice.tip})" if choice.tip else ""))
        self.buttons["pause"].setText(decided.pause_label)
        self.detail.add_note_button.setEnabled(decided.note.enabled)

    def _clicked(self, key: str) -> None:
        run_id, experiment = self._run_id, self._experiment
        if not run_id or not experiment:
            return
        args: dict[str, Any] = {"experiment": experiment, "run_id": run_id}
        action = "start" if key == "run" else key
        if key == "pause":
            pausing = self._run is not None and self._run.controls().pause_label == "Continue"
            action = "continue" if pausing else "pause"
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
        self.ask(action, **args)
        self._say(f"{action.capitalize()} {run_id} …")
        if key in STEERING:
            for name in STEERING:
                self.buttons[name].setEnabled(False)
            self._shown_controls = None  # the next snapshot says what is possible again

    def confirm_abort(self, run_id: str) -> bool:
        """Abort interrupts the step in flight and cannot be undone: ask first."""
        return confirm_abort(
            self, "Abort the run?",
            f"Abort {run_id} now?\n\nThe step in flight is interrupted and its result lost; "
            "the run can be resumed from its last committed step.")

    # declaring and removing experiments ---------------------------------------------
    def _declare_clicked(self) -> None:
        """Open Declare…: the module is asked in the background as the operator types."""
        dialog = DeclareDialog(self.ask, interpreter(), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.finished.connect(lambda _result, d=dialog: self._declare_closed(d))
        self.declare_dialog = dialog
        dialog.open()

    def _declare_closed(self, dialog: DeclareDialog) -> None:
        """The dialog closed: choose what it declared once the declarations list it."""
        name = (dialog.declared or {}).get("experiment")
        if name:
            self._want_experiment = name
        if self.declare_dialog is dialog:
            self.declare_dialog = None

    def _remove_clicked(self) -> None:
        spec = next((s for s in self._specs if s["name"] == self._experiment), None)
        if spec is None or not self.confirm_remove(spec["name"], spec["run_root"]):
            return
        self.ask("undeclare", name=spec["name"])
        self._say(f"Removing {spec['name']} …")

    def confirm_remove(self, name: str, run_root: str) -> bool:
        """Removing a declaration keeps the runs, but ask first: it is a click away."""
        return confirm_remove(self, name, run_root)

    def _add_note(self, text: str) -> None:
        if self._run_id and self._experiment:
            self.ask("note", experiment=self._experiment, run_id=self._run_id, text=text)

    # answers ------------------------------------------------------------------------
    def outcome_arrived(self, outcome: Outcome) -> None:
        if self.declare_dialog is not None:
            self.declare_dialog.outcome_arrived(outcome)
        if outcome.action in ("manifest", "probe"):
            if outcome.action == "manifest":
                self._manifest_arrived(outcome)
            return
        if outcome.action == "devices":
            if outcome.data.get("experiment") == self._experiment:
                self.form.set_devices(outcome.data.get("devices"), "" if outcome.ok else outcome.message)
            return
        self._say(outcome.message, ok=outcome.ok)
        if outcome.code is not Code.DONE:
            return
        if outcome.data.get("select"):
            self._want_select = outcome.data["select"]
        if outcome.action == "create" and self.run_name.text().strip() == outcome.data.get("run_id"):
            self.run_name.clear()  # kept when refused, to be corrected

    def show_snapshot(self, snap: Snapshot) -> None:
        self.last_snapshot = snap
        self._show_experiments(snap)
        if snap.experiment != self._experiment:
            return  # a snapshot taken before the operator chose another experiment
        if snap.more:
            # runs still to read: go on without waiting the interval, one frame after this
            # snapshot, so the window paints it without a read contending for the interpreter
            QTimer.singleShot(CATCH_UP_FRAME_MS, self, self.poll_now)
        previous = {row.key: row.value.state for row in self.runs.rows}
        change = self.runs.set_rows(snap.rows)
        self._announce(previous, snap.runs)
        if change.kind != "same":  # measured: the rows that are new or changed
            fresh = set(change.changed) | set(range(change.first, change.first + change.count)) \
                if change.kind in ("insert", "update") else range(self.runs.rowCount())
            self.columns.fit([self.runs.rows[i] for i in fresh if i < self.runs.rowCount()])
        if self._want_select and self.runs.row_of(self._want_select) >= 0:
            self._select(self._want_select)
            self._want_select = None
        elif self._select_newest and self._run_id is None and self.runs.rowCount():
            newest = self.runs.key_at(0)  # rows come newest first (by folder, read or not)
            if newest is not None:
                self._select(newest)
                self._select_newest = False
        if self._run_id is not None:
            self._run = self.run_of(self._run_id)
            if self._run is None:
                self._run_id = None
                self._clear_detail()
            else:
                self._follow(self._run_id)
            self._update_buttons()
        run = self._run
        problem = ""
        if run is not None and run.problem:
            problem = run.problem
        elif run is not None and run.control_problem:
            problem = ("The run's control file cannot be read, so the run is asked nothing and "
                       f"carries on: {run.control_problem}. Pause or Stop replaces it.")
        if problem and problem != self._problem_said:
            self._say(problem, ok=False)  # once, not at every poll
        self._problem_said = problem
        detail = snap.detail
        if detail is not None and detail.run_id == self._run_id:
            self.detail.show_detail(detail, run)
            if detail.config_changed:
                self._run_config = detail.config
                self._run_config_known = True
                self._fill_form_from_run()
        self._show_heading()  # a run that started since says it ran with it

    def _announce(self, previous: Mapping[str, str], runs: Sequence[RunRow]) -> None:
        """Say when a run the pane was already showing reached an outcome or a hold."""
        for run in runs:
            said = announcement(self._experiment or "", previous.get(run.run_id), run)
            if said is not None:
                self._say(*said)

    def _no_experiment_text(self) -> str:
        return ("No experiment is declared in this workspace yet: add one to "
                f"{self.workspace.experiments / 'experiments.json'}.")

    def _show_experiments(self, snap: Snapshot) -> None:
        said = (snap.experiments, snap.declaration_error)
        if said == self._declarations_shown:
            return  # the declarations as before
        self._declarations_shown = said
        if snap.declaration_error:
            self._set_declaration(f"<span style='color:#c0392b'>"
                                  f"{html.escape(snap.declaration_error)}</span>")
        elif not snap.experiments:
            self._set_declaration("")
        names = [s["name"] for s in snap.experiments]
        self._specs = snap.experiments
        current = [self.experiment_box.itemText(i) for i in range(self.experiment_box.count())]
        if not names and not self._specs_seen:
            self.form.clear(self._no_experiment_text())
        self._specs_seen = True
        if names != current:
            self.experiment_box.blockSignals(True)
            self.experiment_box.clear()
            self.experiment_box.addItems(names)
            if self._experiment in names:
                self.experiment_box.setCurrentText(self._experiment)
            self.experiment_box.blockSignals(False)
            if not names:
                self._experiment = None
                self.form.clear(self._no_experiment_text())
            elif self._experiment not in names:
                self._experiment = None
                self._experiment_chosen(names[0])
        want = self._want_experiment
        if want in names and want != self._experiment:
            self._want_experiment = None
            self.experiment_box.setCurrentText(want)
        self.remove_button.setEnabled(bool(self._experiment))
        if not snap.declaration_error and self._experiment:
            self._show_declaration()
