"""Declaring an experiment from the window, and removing one.

The Declare… dialog takes what ``spacrq exp declare`` takes — the module (an
import path, or the package folder holding its ``__main__.py``), the
interpreter of its environment (spacrq's own unless another is chosen: any
venv's ``python``), its working folder, where its runs go, and a name — and
asks the module for its manifest as the operator types, in the background
through the pane's watch.  What the module says (its title and what it takes,
or why it cannot be asked) is shown inline; OK is enabled only once the
module answered with a manifest for exactly what is in the fields, and a
declaration the workspace refuses is said inline too, with nothing written.

The dialog reads no file and starts no process: it only asks (``ask``, the
pane's numbered request) and shows the outcomes the pane hands back.
"""
from __future__ import annotations

import html
from typing import Any, Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from spacrq.watching import Code, Outcome

__all__ = ["DeclareDialog", "confirm_remove"]

#: milliseconds of quiet typing before the module is asked again
PROBE_DELAY_MS = 400


def _summary(manifest: dict[str, Any]) -> str:
    """What the module said about itself, in one line."""
    fields = sum(len(v) for v in (manifest.get("schema") or {}).values() if isinstance(v, list))
    options = len(manifest.get("options") or [])
    env = manifest.get("environment") or []
    required = sum(1 for v in env if isinstance(v, dict) and v.get("required", True) is not False)
    parts = [f"{fields} setting{'s' if fields != 1 else ''}"]
    if options:
        parts.append(f"{options} option{'s' if options != 1 else ''}")
    if env:
        parts.append(f"{len(env)} environment variable{'s' if len(env) != 1 else ''}"
                     + (f" ({required} required)" if required else ""))
    if manifest.get("chooses_devices"):
        parts.append("chooses its devices")
    title = html.escape(str(manifest.get("title") or manifest.get("module") or ""))
    return f"<b>{title}</b> answered: " + ", ".join(parts) + "."


class DeclareDialog(QDialog):
    """Declare… — the module, its interpreter, its working folder, its run root, a name."""

    def __init__(self, ask: Callable[..., int], default_python: str,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Declare an experiment")
        self.setObjectName("declare-dialog")
        self._ask = ask
        self._probe_token: int | None = None
        self._probed_for: tuple | None = None  # the fields the good manifest answers for
        self._declare_token: int | None = None
        self._name_typed = False
        self.manifest: dict[str, Any] | None = None
        self.declared: dict[str, Any] | None = None

        self.module = QLineEdit()
        self.module.setObjectName("declare-module")
        self.module.setPlaceholderText("import path, like lab.scan — or a package folder")
        self.module.setToolTip("The module run as 'python -m MODULE': its import path, or the "
                               "package folder holding its __main__.py (it then runs from that "
                               "folder's parent).")
        self.module_button = QPushButton("Folder…")
        self.module_button.setToolTip("Choose the package folder holding the module's "
                                      "__main__.py.")
        self.python = QLineEdit()
        self.python.setObjectName("declare-python")
        self.python.setPlaceholderText(f"spacrq's own: {default_python}")
        self.python.setToolTip("The interpreter of the module's environment (a venv's "
                               "bin/python). Empty: the one spacrq runs in, "
                               f"{default_python}.")
        self.python_button = QPushButton("Browse…")
        self.python_button.setToolTip("Choose the python of the module's environment "
                                      "(a venv's bin/python, or the venv folder).")
        self.cwd = QLineEdit()
        self.cwd.setObjectName("declare-cwd")
        self.cwd.setPlaceholderText("the module's checkout (empty: its default)")
        self.cwd.setToolTip("Where the module runs, so its .env and relative paths mean what "
                            "they say. Empty: the package folder's parent, or the workspace's "
                            "folder for the experiment.")
        self.cwd_button = QPushButton("Browse…")
        self.cwd_button.setToolTip("Choose the module's working folder (its checkout).")
        self.run_root = QLineEdit()
        self.run_root.setObjectName("declare-run-root")
        self.run_root.setPlaceholderText("empty: experiments/NAME/runs in the workspace")
        self.run_root.setToolTip("Where the experiment's run folders go. Empty: "
                                 "experiments/NAME/runs in the workspace.")
        self.run_root_button = QPushButton("Browse…")
        self.run_root_button.setToolTip("Choose the folder the runs go to.")
        self.name = QLineEdit()
        self.name.setObjectName("declare-name")
        self.name.setPlaceholderText("what you call it: letters, digits, '.', '-', '_'")
        self.name.setToolTip("The experiment's name in the window and in 'spacrq exp'; it also "
                             "names its folder in the workspace.")

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        for label, edit, button in (("&Module", self.module, self.module_button),
                                    ("&Interpreter", self.python, self.python_button),
                                    ("&Working folder", self.cwd, self.cwd_button),
                                    ("&Run root", self.run_root, self.run_root_button)):
            row = QHBoxLayout()
            row.addWidget(edit, 1)
            row.addWidget(button)
            caption = QLabel(label)
            caption.setBuddy(edit)
            form.addRow(caption, row)
        caption = QLabel("&Name")
        caption.setBuddy(self.name)
        form.addRow(caption, self.name)

        self.answer = QLabel("Type the module to ask it what it takes.")
        self.answer.setObjectName("declare-answer")
        self.answer.setWordWrap(True)
        self.answer.setTextFormat(Qt.TextFormat.RichText)
        self.answer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.answer.setToolTip("What the module answered when asked for its manifest, or why "
                               "it could not be asked.")
        self.answer.setMinimumWidth(520)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText("Declare")
        self.ok.setToolTip("Add the experiment to the workspace's declarations (enabled once "
                           "the module answered with its manifest).")
        self.ok.setEnabled(False)
        self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setToolTip(
            "Close without declaring anything.")
        self.buttons.accepted.connect(self._declare)
        self.buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.answer)
        layout.addWidget(self.buttons)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(PROBE_DELAY_MS)
        self._timer.timeout.connect(self.probe_now)
        for edit in (self.module, self.python, self.cwd):
            edit.textChanged.connect(self._probe_soon)
        self.module.textChanged.connect(self._suggest_name)
        self.name.textEdited.connect(self._name_edited)
        self.name.textChanged.connect(self._update_ok)
        self.run_root.textChanged.connect(self._update_ok)
        self.module_button.clicked.connect(self._pick_module)
        self.python_button.clicked.connect(self._pick_python)
        self.cwd_button.clicked.connect(lambda: self._pick_folder(self.cwd, "Working folder"))
        self.run_root_button.clicked.connect(lambda: self._pick_folder(self.run_root, "Run root"))
        self.module.setFocus()

    # -- what the fields say -------------------------------------------------------------
    def _probe_key(self) -> tuple:
        return (self.module.text().strip(), self.python.text().strip(), self.cwd.text().strip())

    def _probe_soon(self) -> None:
        self.manifest = None
        self._probed_for = None
        self._update_ok()
        if self.module.text().strip():
            self._say("Asking the module what it takes …", "#7f8c8d")
            self._timer.start()
        else:
            self._timer.stop()
            self._say("Type the module to ask it what it takes.", "#7f8c8d")

    def probe_now(self) -> None:
        """Ask the module for its manifest (through the pane's watch) for what is typed now."""
        self._timer.stop()
        module, python, cwd = self._probe_key()
        if not module:
            return
        self._probe_token = self._ask("probe", module=module, python=python or None,
                                      cwd=cwd or None)
        self._asked_for = (module, python, cwd)

    def _suggest_name(self, text: str) -> None:
        if self._name_typed:
            return
        last = text.strip().rstrip("/\\").replace("\\", "/").split("/")[-1]
        self.name.setText(last.split(".")[-1] if last else "")

    def _name_edited(self, _text: str) -> None:
        self._name_typed = True

    def _update_ok(self) -> None:
        good = self.manifest is not None and self._probed_for == self._probe_key()
        self.ok.setEnabled(good and bool(self.name.text().strip())
                           and self._declare_token is None)

    def _say(self, text: str, colour: str, rich: bool = False) -> None:
        shown = text if rich else html.escape(text)
        self.answer.setText(f"<span style='color:{colour}'>{shown}</span>")

    # -- answers -------------------------------------------------------------------------
    def outcome_arrived(self, outcome: Outcome) -> bool:
        """Take an outcome the pane received; True when it was this dialog's."""
        if outcome.token == self._probe_token:
            self._probe_answered(outcome)
            return True
        if outcome.token == self._declare_token:
            self._declare_answered(outcome)
            return True
        return False

    def _probe_answered(self, outcome: Outcome) -> None:
        self._probe_token = None
        if getattr(self, "_asked_for", None) != self._probe_key():
            return  # the fields changed since: a newer question is on its way
        if outcome.code is Code.DONE and isinstance(outcome.data.get("manifest"), dict):
            self.manifest = dict(outcome.data["manifest"])
            self._probed_for = self._probe_key()
            self._say(_summary(self.manifest), "#1e8449", rich=True)
        else:
            self.manifest = None
            self._probed_for = None
            self._say(outcome.message or "the module could not be asked", "#c0392b")
        self._update_ok()

    def _declare(self) -> None:
        if not self.ok.isEnabled():
            return
        module, python, cwd = self._probe_key()
        self._declare_token = self._ask("declare", name=self.name.text().strip(), module=module,
                                        python=python or None, cwd=cwd or None,
                                        run_root=self.run_root.text().strip() or None)
        self._say("Declaring …", "#7f8c8d")
        self._update_ok()

    def _declare_answered(self, outcome: Outcome) -> None:
        self._declare_token = None
        if outcome.code is Code.DONE:
            self.declared = dict(outcome.data)
            self.accept()
            return
        self._say(outcome.message or "the declaration was refused", "#c0392b")
        self._update_ok()

    def done(self, result: int) -> None:  # noqa: D401 (Qt naming)
        self._timer.stop()
        super().done(result)

    # -- pickers -------------------------------------------------------------------------
    def _pick_module(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "The module's package folder",
                                                  self.module.text().strip())
        if folder:
            self.module.setText(folder)

    def _pick_python(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "The python of the module's environment",
                                              self.python.text().strip())
        if path:
            self.python.setText(path)

    def _pick_folder(self, edit: QLineEdit, title: str) -> None:
        folder = QFileDialog.getExistingDirectory(self, title, edit.text().strip())
        if folder:
            edit.setText(folder)


def confirm_remove(parent: QWidget, name: str, run_root: str) -> bool:
    """Ask before removing a declaration; Cancel is the default."""
    answer = QMessageBox.question(
        parent, "Remove the experiment?",
        f"Remove the declaration of {name}?\n\nIts runs stay on disk in {run_root}; "
        "declare it again to see them here.",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Yes
