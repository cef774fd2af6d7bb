"""Edit… a waiting job in place: its settings, overrides, after, timeout and label.

The dialog only reads its fields; the edit itself — loading the file under
its lock, checking the job as Add checks a new one, saving it atomically —
is :func:`spacrq.queue.edits.edit_job`, which the pane's watch calls on its
own thread when asked ``"edit"``.  The answer's :class:`~spacrq.watching.Code`
decides what the dialog does: DONE closes it; INVALID keeps it open with the
sentence to fix; REFUSED (the job started meanwhile) and MISSING (it is
gone) leave nothing to save; CONFLICT and FAILED may be tried again.

Settings are either a settings file's path or an object written as JSON
(``{"argv": ["sleep", "5"]}``); a settings file dropped on the dialog fills
the field.  Only the fields the operator changed are sent, so an edit never
writes back a value somebody else changed meanwhile.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFormLayout, QHBoxLayout, QLabel,
                               QLineEdit, QPlainTextEdit, QVBoxLayout, QWidget)

from spacrq.drops import classify
from spacrq.queue.edits import edit_refusal
from spacrq.queue.model import Job
from spacrq.queue.pane import parse_after, parse_overrides, parse_timeout
from spacrq.runfiles import RunFileError, loads
from spacrq.ui.drops import DropTarget
from spacrq.watching import Code, Outcome

__all__ = ["JobEditDialog", "JobEditing", "settings_text", "read_settings_text"]

_MESSAGE_STYLE = {
    "error": "background:#f8d0d0; color:#5c0000; border:1px solid #d9a0a0;",
    "info": "background:#dbe8fb; color:#0b2d66; border:1px solid #a9c1e8;",
}
#: outcomes after which there is nothing left to save
_FINAL = (Code.REFUSED, Code.MISSING)


def settings_text(settings: str | dict) -> str:
    """A job's settings as the dialog shows them: a path, or the object as JSON."""
    if isinstance(settings, dict):  # one setting a line, each value compact
        if not settings:
            return "{}"
        lines = [f"  {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}"
                 for k, v in settings.items()]
        return "{\n" + ",\n".join(lines) + "\n}"
    return str(settings or "")


def read_settings_text(text: str) -> tuple[str | dict | None, str | None]:
    """The settings field read back: ``(path or object, None)`` or ``(None, what to fix)``."""
    text = text.strip()
    if text.startswith("["):
        return None, "the settings must be a JSON object of setting: value, in { }"
    if not text.startswith("{"):
        if "\n" in text:
            return None, ("the settings are one file path or a JSON object; put the object in "
                          "{ }")
        return text, None
    try:
        value = loads(text.encode("utf-8"), where="the settings")
    except RunFileError as exc:
        return None, str(exc)
    if not isinstance(value, dict):
        return None, "the settings must be a JSON object of setting: value"
    return value, None


def _timeout_text(timeout: float | None) -> str:
    return f"{timeout:g}s" if timeout else ""


class JobEditDialog(QDialog):
    """Edit one waiting job; ``ask(changes) -> token`` hands the edit to the pane's watch."""

    #: the job was changed: its id, and the sentence to show in the pane
    edited = Signal(str, str)

    def __init__(self, job: Job, ask: Callable[[dict[str, Any]], int],
                 earlier: Sequence[str] = (), parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.job_id = job.id
        self._job = job
        self._ask = ask
        self.token: int | None = None
        self.setWindowTitle(f"Edit job {job.id}")
        self.setMinimumWidth(560)

        intro = QLabel(f"<b>{job.id}</b> — {job.module}, {job.status.replace('_', ' ')}. "
                       "Changes are checked as Add checks a new job before they are saved; "
                       "its place in the queue stays.")
        intro.setWordWrap(True)
        self.settings = QPlainTextEdit(settings_text(job.settings))
        self.settings.setTabChangesFocus(True)
        self.settings.setPlaceholderText("a settings file (CSV Key,Value or JSON), or an object "
                                         'such as {"argv": ["sleep", "5"]}; empty = defaults')
        self.settings.setToolTip("The job's settings: the path of a settings file, or the "
                                 "settings themselves as a JSON object. Drop a settings file "
                                 "here to use it.")
        self.settings.setMaximumHeight(96)
        self.overrides = QLineEdit(" ".join(job.override_args))
        self.overrides.setPlaceholderText("key=value key=value")
        self.overrides.setToolTip("Settings applied on top of the settings, each key=value "
                                  "(quote a value with spaces).")
        self.after = QLineEdit(", ".join(job.depends_on))
        self.after.setPlaceholderText("ids, e.g. mask-1")
        self.after.setToolTip("Jobs that must succeed first; if one does not, this job is "
                              "skipped. Only jobs above it can be named"
                              + (f": {', '.join(earlier)}." if earlier else " (there are none)."))
        self.timeout = QLineEdit(_timeout_text(job.timeout))
        self.timeout.setPlaceholderText("none")
        self.timeout.setToolTip("Stop the job after this long and count it as failed "
                                "(90s, 30m, 2h, 1h30m; empty = no limit).")
        self.label = QLineEdit(job.label)
        self.label.setPlaceholderText("what to call it (empty: made from the module and settings)")
        self.label.setToolTip("The job's name in the table and the morning report.")
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.setContentsMargins(6, 3, 6, 3)
        self.message.hide()

        form = QFormLayout()
        for text, field in (("&Settings", self.settings), ("&Overrides", self.overrides),
                            ("&After", self.after), ("&Timeout", self.timeout),
                            ("&Label", self.label)):
            caption = QLabel(text)
            caption.setBuddy(field)
            form.addRow(caption, field)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.save_button = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        self.save_button.setText("Save changes")
        self.save_button.setToolTip("Check the changed job and save it in the queue file "
                                    "(Enter).")
        self.save_button.setDefault(True)
        cancel = self.buttons.button(QDialogButtonBox.StandardButton.Cancel)
        cancel.setToolTip("Close without changing the job (Esc).")
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.message)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(self.buttons)
        layout.addLayout(bottom)

        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        self.drops = DropTarget(self, children=True)
        self.drops.dropped.connect(self._dropped)
        refusal = edit_refusal(job)
        if refusal:
            self._final(f"Cannot edit: {refusal}.")

    # -- the operator's side ------------------------------------------------------------
    def changes(self) -> tuple[dict[str, Any], str | None]:
        """The fields that differ from the job, or ``({}, what to fix)``."""
        job = self._job
        settings, problem = read_settings_text(self.settings.toPlainText())
        if problem:
            return {}, problem
        overrides, problem = parse_overrides(self.overrides.text())
        if problem:
            return {}, problem
        timeout, problem = parse_timeout(self.timeout.text())
        if problem:
            return {}, problem
        found = {"settings": settings, "overrides": overrides,
                 "after": parse_after(self.after.text()), "timeout": timeout,
                 "label": self.label.text().strip()}
        was = {"settings": job.settings or "", "overrides": job.override_args,
               "after": list(job.depends_on), "timeout": job.timeout, "label": job.label}
        return {k: v for k, v in found.items() if v != was[k]}, None

    def save(self) -> None:
        """Ask the watch to make the edit; its answer arrives in :meth:`outcome_arrived`."""
        if self.token is not None:
            return
        changes, problem = self.changes()
        if problem:
            self.say("error", f"Not saved: {problem}.")
            return
        if not changes:
            self.accept()
            return
        self.save_button.setEnabled(False)
        self.say("info", "Checking the changed job…")
        self.token = self._ask(changes)

    def _dropped(self, paths: list[str]) -> None:
        drop = classify(paths)
        if len(drop.settings) == 1 and drop.only("settings"):
            self.settings.setPlainText(drop.settings[0])
            self.say("info", f"Settings from {drop.settings[0]}; Save changes checks them.")
        else:
            self.say("error", "Drop one settings file here (CSV Key,Value or JSON) to use it "
                              "as this job's settings.")

    # -- the watch's answer -------------------------------------------------------------
    def outcome_arrived(self, outcome: Outcome) -> bool:
        """Show the answer to this dialog's edit; False when it is someone else's."""
        if self.token is None or outcome.token != self.token:
            return False
        self.token = None
        if outcome.code is Code.DONE:
            self.edited.emit(self.job_id, outcome.message or f"Changed {self.job_id}.")
            self.accept()
        elif outcome.code in _FINAL:
            self._final(outcome.message)
        else:
            self.save_button.setEnabled(True)
            self.say("error", outcome.message)
        return True

    def _final(self, text: str) -> None:
        """Nothing can be saved any more: the fields only show the job."""
        for field in (self.settings, self.overrides, self.after, self.timeout, self.label):
            field.setReadOnly(True)
        self.save_button.setEnabled(False)
        self.save_button.setToolTip("Nothing can be saved: " + text)
        self.say("error", text)

    def say(self, level: str, text: str) -> None:
        self.message.setStyleSheet(_MESSAGE_STYLE.get(level, _MESSAGE_STYLE["info"]))
        self.message.setText(text)
        self.message.setVisible(bool(text))
        if text:  # a wrapped sentence needs the height of its lines, not of one
            self.layout().activate()
            wanted = self.layout().totalHeightForWidth(self.width())
            if wanted > self.height():
                self.resize(self.width(), wanted)


class JobEditing(QObject):
    """The pane's side: opens the dialog for a job and routes the watch's answer to it.

    ``ask(action, **args) -> token`` is the pane's :meth:`~spacrq.ui.pane_base.
    PaneBase.ask`; the pane calls :meth:`outcome_arrived` with every outcome.
    """

    #: a job was changed: its id, and the sentence to show
    edited = Signal(str, str)

    def __init__(self, parent: QWidget, ask: Callable[..., int]) -> None:
        super().__init__(parent)
        self._parent = parent
        self._ask = ask
        self.dialog: JobEditDialog | None = None

    def open(self, job: Job, earlier: Sequence[str] = ()) -> JobEditDialog:
        """Show the dialog for ``job`` (one at a time: a second Edit… replaces the first)."""
        if self.dialog is not None:
            self.dialog.close()
        job_id = job.id
        dialog = JobEditDialog(job, lambda changes: self._ask("edit", job_id=job_id,
                                                             changes=changes),
                               earlier, self._parent)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.edited.connect(self.edited)
        dialog.finished.connect(lambda _result, d=dialog: self._closed(d))
        self.dialog = dialog
        dialog.open()
        return dialog

    def _closed(self, dialog: JobEditDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None

    def outcome_arrived(self, outcome: Outcome) -> bool:
        """True when ``outcome`` answered the open dialog's edit (the pane need not show it)."""
        if outcome.action != "edit" or self.dialog is None:
            return False
        return self.dialog.outcome_arrived(outcome)
