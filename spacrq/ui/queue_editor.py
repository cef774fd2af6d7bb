"""The job editor: the row of fields an operator fills to line up one more job.

It only reads its fields and turns them into a :class:`~spacrq.queue.model.Job`
(or one sentence saying which field is wrong); adding the job to the queue,
and refusing to while a runner owns the file, is the pane's business.
Enter in any text field adds the job, so a dozen jobs are typed, not clicked.

It never looks a module up itself: listing the installed modules scans entry
points and describing one imports it, so the pane's watch does both and the
editor shows what comes back (:meth:`JobEditor.set_modules`,
:meth:`JobEditor.show_description`), "checking…" meanwhile.
"""
from __future__ import annotations

import json
import shlex

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QGridLayout, QGroupBox, QHBoxLayout,
                               QLabel, QLineEdit, QPushButton, QSpinBox, QToolButton, QWidget)

from spacrq.modules import BUILTIN_MODULES, ModuleInfo
from spacrq.queue.model import Job
from spacrq.queue.pane import parse_after, parse_overrides, parse_timeout


#: module -> (its main setting, field caption, hint): typed straight into the
#: editor, so a command job needs no settings file
MAIN_SETTING = {
    "command": ("argv", "Command", "program and arguments, e.g. sleep 5 (never run through a shell)"),
    "python": ("target", "Function", "package.module:function"),
}


class JobEditor(QGroupBox):
    """Module, settings, label, after, overrides, timeout, retries — and Add."""

    #: Enter pressed or Add clicked
    submitted = Signal()
    #: the module chosen has not been described yet (its name)
    describe_wanted = Signal(str)

    def __init__(self, settings_folder: str = "", parent: QWidget | None = None) -> None:
        super().__init__("Add a job", parent)
        self._settings_folder = settings_folder
        self._described: dict[str, tuple[str, str]] = {}
        self.module = QComboBox()
        self.module.addItems(sorted(BUILTIN_MODULES))  # the installed ones arrive from the watch
        self.module.setToolTip("What the job runs; modules come from spacrq and installed plugins.")
        self.about = QLabel()
        self.about.setWordWrap(True)
        self.about.setStyleSheet("color: palette(placeholder-text);")
        self.settings = QLineEdit()
        self.settings.setPlaceholderText("settings file (CSV Key,Value or JSON); empty = defaults")
        self.browse = QToolButton()
        self.browse.setText("…")
        self.browse.setToolTip("Choose the settings file")
        self.label = QLineEdit()
        self.label.setPlaceholderText("what to call it (optional)")
        self.after = QLineEdit()
        self.after.setPlaceholderText("ids, e.g. mask-1")
        self.after.setToolTip("Jobs that must succeed first; if one does not, this job is skipped.")
        self.overrides = QLineEdit()
        self.overrides.setPlaceholderText("key=value key=value")
        self.timeout = QLineEdit()
        self.timeout.setPlaceholderText("none")
        self.timeout.setToolTip("Stop the job after this long and count it as failed "
                                "(90s, 30m, 2h, 1h30m; empty = no limit).")
        self.timeout.setMaximumWidth(90)
        self.retries = QSpinBox()
        self.retries.setRange(0, 9)
        self.retries.setToolTip("Run a failed job again at most this many more times.")
        self.retry_delay = QLineEdit()
        self.retry_delay.setPlaceholderText("at once")
        self.retry_delay.setToolTip("How long to wait before each retry (30s, 5m; empty = at "
                                    "once): a share or an instrument is often back a little later.")
        self.retry_delay.setMaximumWidth(80)
        self.add_button = QPushButton("Add job")
        self.add_button.setToolTip("Check this job and add it to the end of the queue (Enter).")
        self.add_button.setDefault(True)

        self.main_label = QLabel("Command")
        self.main = QLineEdit()

        grid = QGridLayout(self)
        grid.setContentsMargins(8, 6, 8, 6)
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(4)
        settings_row = QHBoxLayout()
        settings_row.setSpacing(2)
        settings_row.addWidget(self.settings, 1)
        settings_row.addWidget(self.browse)
        grid.addWidget(QLabel("Module"), 0, 0)
        grid.addWidget(self.module, 0, 1)
        grid.addWidget(self.main_label, 0, 2)
        grid.addWidget(self.main, 0, 3)
        grid.addWidget(QLabel("Settings"), 0, 4)
        grid.addLayout(settings_row, 0, 5)
        grid.addWidget(QLabel("Label"), 1, 0)
        grid.addWidget(self.label, 1, 1)
        grid.addWidget(QLabel("Overrides"), 1, 2)
        grid.addWidget(self.overrides, 1, 3)
        grid.addWidget(QLabel("After"), 1, 4)
        grid.addWidget(self.after, 1, 5)
        extra = QHBoxLayout()
        extra.addWidget(QLabel("Timeout"))
        extra.addWidget(self.timeout)
        extra.addWidget(QLabel("Retries"))
        extra.addWidget(self.retries)
        extra.addWidget(QLabel("after"))
        extra.addWidget(self.retry_delay)
        extra.addWidget(self.about, 1)
        extra.addWidget(self.add_button)
        grid.addLayout(extra, 2, 0, 1, 6)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 3)
        grid.setColumnStretch(5, 2)

        for field in (self.main, self.settings, self.label, self.after, self.overrides,
                      self.timeout, self.retry_delay):
            field.returnPressed.connect(self.submitted)
        self.add_button.clicked.connect(self.submitted)
        self.browse.clicked.connect(self._choose_settings)
        self.module.currentTextChanged.connect(self._describe)
        if self.module.findText("command") >= 0:
            self.module.setCurrentText("command")
        self._describe(self.module.currentText())

    def set_modules(self, names) -> None:
        """Offer every installed module (found by the watch), keeping the one chosen."""
        names = sorted(set(names))
        current = self.module.currentText()
        if names == [self.module.itemText(i) for i in range(self.module.count())]:
            return
        self.module.blockSignals(True)
        self.module.clear()
        self.module.addItems(names)
        if current in names:
            self.module.setCurrentText(current)
        self.module.blockSignals(False)
        if self.module.currentText() != current:
            self._describe(self.module.currentText())

    def _describe(self, name: str) -> None:
        """Show what the module does and which settings it takes (asked of the watch once)."""
        main = MAIN_SETTING.get(name)
        self.main_label.setVisible(main is not None)
        self.main.setVisible(main is not None)
        if main is not None:
            self.main_label.setText(main[1])
            self.main.setPlaceholderText(main[2])
            self.main.setToolTip(main[2])
        if not name:
            self.about.setText("")
            return
        if name in self._described:
            self._show_described(name)
            return
        self.about.setText(f"{name}: checking…")
        self.describe_wanted.emit(name)

    def show_description(self, module: str, info: ModuleInfo | None, problem: str = "") -> None:
        """What the watch found about ``module``: its description, or why it cannot load."""
        if info is not None:
            tips = "\n".join(f"{k}: {v}" for k, v in info.settings_help)
            self._described[module] = (info.about, tips or "key=value pairs applied on top of "
                                                           "the settings file")
        else:
            self._described[module] = (problem, "")
        if self.module.currentText() == module:
            self._show_described(module)

    def _show_described(self, name: str) -> None:
        about, tips = self._described[name]
        self.about.setText(about)
        self.overrides.setToolTip(tips)

    def _choose_settings(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Settings for this job", self._settings_folder,
                                              "Settings (*.csv *.json);;All files (*)")
        if path:
            self.settings.setText(path)

    def job(self) -> tuple[Job | None, str | None]:
        """The job the fields describe, or ``(None, sentence naming the field to fix)``."""
        module = self.module.currentText().strip()
        if not module:
            return None, "choose a module for the job"
        overrides, problem = parse_overrides(self.overrides.text())
        if problem:
            return None, problem
        timeout, problem = parse_timeout(self.timeout.text())
        if problem:
            return None, problem
        delay, problem = parse_timeout(self.retry_delay.text(), what="retry delay")
        if problem:
            return None, problem
        settings: str | dict = self.settings.text().strip()
        main = MAIN_SETTING.get(module)
        text = self.main.text().strip()
        if main is not None and text:
            key = main[0]
            if key == "argv":
                try:
                    value: object = shlex.split(text)
                except ValueError as exc:
                    return None, f"the command could not be read ({exc}); close the quote"
            else:
                value = text
            if settings:
                overrides.append(f"{key}={json.dumps(value) if isinstance(value, list) else value}")
            else:
                settings = {key: value}
        return Job(module=module, settings=settings,
                   label=self.label.text().strip(), overrides=overrides,
                   depends_on=parse_after(self.after.text()), timeout=timeout,
                   retries=self.retries.value(), retry_delay=delay or 0.0), None

    def fill_from(self, job: Job) -> None:
        """Put a job's fields back in the editor: the start of "same again, but…"."""
        index = self.module.findText(job.module, Qt.MatchFlag.MatchFixedString)
        if index >= 0:
            self.module.setCurrentIndex(index)
        self.settings.setText(job.settings_path)
        main = MAIN_SETTING.get(job.module)
        inline = job.settings if isinstance(job.settings, dict) else {}
        value = inline.get(main[0], "") if main else ""
        self.main.setText(shlex.join(map(str, value)) if isinstance(value, list) else str(value))
        self.label.setText(job.label)
        self.after.setText(", ".join(job.depends_on))
        self.overrides.setText(" ".join(_quoted(a) for a in job.override_args))
        self.timeout.setText(f"{job.timeout:g}s" if job.timeout else "")
        self.retries.setValue(int(job.retries or 0))
        self.retry_delay.setText(f"{job.retry_delay:g}s" if job.retry_delay else "")

    def clear_for_next(self) -> None:
        """After an add, keep the fields but the label: the next job is usually a variation."""
        self.label.clear()


def _quoted(word: str) -> str:
    return shlex.quote(word) if any(c.isspace() for c in word) else word
