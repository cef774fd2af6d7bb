"""Declare… and Remove: the module asked in the background, its errors inline, nothing written on refusal."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog

from spacrq.experiments.declarations import declarations_path, load_experiments
from spacrq.experiments.runs import create_run
from spacrq.experiments.watch import ExperimentsWatch
from spacrq.ui.experiments_declare import DeclareDialog
from spacrq.ui.pane_base import PaneBase
from spacrq.watching import Code


class Harness(PaneBase):
    """The smallest pane over the real Experiments watch: hands outcomes to the dialog."""

    def __init__(self, root) -> None:
        super().__init__()
        self.outcomes = []
        self.dialog: DeclareDialog | None = None
        self.start_watch(ExperimentsWatch(root), 0.2)

    def outcome_arrived(self, outcome) -> None:
        self.outcomes.append(outcome)
        if self.dialog is not None:
            self.dialog.outcome_arrived(outcome)

    def show_snapshot(self, snapshot) -> None:
        self.snapshot = snapshot


@pytest.fixture
def harness(qtbot, workspace):
    pane = Harness(workspace.root)
    qtbot.addWidget(pane)
    yield pane
    assert pane.shutdown(5.0)


@pytest.fixture
def dialog(qtbot, harness):
    dialog = DeclareDialog(harness.ask, sys.executable)
    harness.dialog = dialog
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    yield dialog
    dialog.close()


def _package(tmp_path, name, main):
    folder = tmp_path / "checkout" / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "__main__.py").write_text(textwrap.dedent(main))
    return folder


def _answered(qtbot, dialog, words, timeout=30000):
    qtbot.waitUntil(lambda: words in dialog.answer.text(), timeout=timeout)


def test_declare_a_good_module(qtbot, workspace, dialog, harness):
    assert not dialog.ok.isEnabled()
    qtbot.keyClicks(dialog.module, "spacrq.experiments.demo_sweep")
    _answered(qtbot, dialog, "Simulated instrument sweep</b> answered: 9 settings")
    assert dialog.name.text() == "demo_sweep"  # suggested from the module
    qtbot.waitUntil(dialog.ok.isEnabled)
    dialog.name.selectAll()
    qtbot.keyClicks(dialog.name, "sweep")
    assert dialog.ok.isEnabled()
    qtbot.keyClick(dialog, Qt.Key.Key_Return)  # OK is the default button
    qtbot.waitUntil(lambda: dialog.result() == QDialog.DialogCode.Accepted, timeout=10000)
    (spec,) = load_experiments(workspace.root)
    assert spec.name == "sweep" and spec.module == "spacrq.experiments.demo_sweep"
    assert spec.python == sys.executable
    assert dialog.declared["experiment"] == "sweep"


def test_a_broken_module_is_said_inline_and_nothing_is_written(qtbot, workspace, tmp_path,
                                                               dialog):
    path = declarations_path(workspace.root)
    before = path.read_bytes() if path.exists() else None
    broken = _package(tmp_path, "brokenscan", """
        import sys
        sys.stderr.write("ImportError: no driver for the stage\\n")
        sys.exit(1)
    """)
    dialog.module.setText(str(broken))
    _answered(qtbot, dialog, "no driver for the stage")
    assert "#c0392b" in dialog.answer.text()
    assert not dialog.ok.isEnabled()
    qtbot.keyClick(dialog, Qt.Key.Key_Return)  # Enter does nothing with OK disabled
    assert dialog.isVisible()
    assert (path.read_bytes() if path.exists() else None) == before
    # a module that is not there at all, said the same way
    dialog.module.setText("no_such_module_h6")
    _answered(qtbot, dialog, "no_such_module_h6")
    assert not dialog.ok.isEnabled()


def test_a_refused_declaration_is_said_inline(qtbot, workspace, tmp_path, dialog, harness):
    good = _package(tmp_path, "goodscan", """
        import json, sys
        print(json.dumps({"module": "goodscan", "title": "Good scan", "schema": {},
                          "environment": [{"name": "H6_STAGE"}],
                          "options": [{"flag": "--fast", "dtype": "bool"}]}))
    """)
    dialog.module.setText(str(good))
    _answered(qtbot, dialog, "Good scan</b> answered: 0 settings, 1 option, 1 environment "
                             "variable (1 required)")
    dialog.run_root.setText(str(tmp_path / "runs-here"))
    qtbot.waitUntil(dialog.ok.isEnabled)
    qtbot.mouseClick(dialog.ok, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.result() == QDialog.DialogCode.Accepted, timeout=10000)
    (spec,) = load_experiments(workspace.root)
    assert (spec.module, spec.cwd) == ("goodscan", str(good.parent))
    assert spec.run_root == str(tmp_path / "runs-here")
    before = declarations_path(workspace.root).read_bytes()

    again = DeclareDialog(harness.ask, sys.executable)
    harness.dialog = again
    qtbot.addWidget(again)
    again.show()
    again.module.setText(str(good))
    _answered(qtbot, again, "Good scan")
    qtbot.waitUntil(again.ok.isEnabled)
    qtbot.mouseClick(again.ok, Qt.MouseButton.LeftButton)
    _answered(qtbot, again, "declared already")
    assert again.isVisible() and again.result() != QDialog.DialogCode.Accepted
    assert declarations_path(workspace.root).read_bytes() == before
    again.close()


def test_a_changed_field_asks_again_and_an_old_answer_is_ignored(qtbot, dialog, harness):
    dialog.module.setText("spacrq.experiments.demo_sweep")
    _answered(qtbot, dialog, "Simulated instrument sweep")
    dialog.module.setText("no_such_module_h6")
    assert not dialog.ok.isEnabled()  # the good answer was for another module
    _answered(qtbot, dialog, "no_such_module_h6")
    probes = [o for o in harness.outcomes if o.action == "probe"]
    assert [o.code for o in probes][0] is Code.DONE and probes[-1].code is not Code.DONE


def test_every_control_has_a_tooltip_and_a_keyboard_path(qtbot, dialog):
    controls = [dialog.module, dialog.module_button, dialog.python, dialog.python_button,
                dialog.cwd, dialog.cwd_button, dialog.run_root, dialog.run_root_button,
                dialog.name, dialog.ok, dialog.answer]
    for control in controls:
        assert control.toolTip(), control.objectName()
    for edit in (dialog.module, dialog.python, dialog.cwd, dialog.run_root, dialog.name):
        assert edit.focusPolicy() & Qt.FocusPolicy.TabFocus
    assert sys.executable in dialog.python.placeholderText()  # the default interpreter shown


# -- through the pane ----------------------------------------------------------------

@pytest.fixture
def pane(qtbot, workspace):
    from spacrq.ui.experiments_pane import ExperimentsPane
    pane = ExperimentsPane(workspace, interval=0.2)
    qtbot.addWidget(pane)
    yield pane
    assert pane.shutdown(5.0)


def test_the_pane_declares_then_removes_keeping_the_runs(qtbot, workspace, pane, monkeypatch):
    assert pane.declare_button.toolTip() and pane.remove_button.toolTip()
    assert not pane.remove_button.isEnabled()  # nothing to remove yet
    qtbot.mouseClick(pane.declare_button, Qt.MouseButton.LeftButton)
    dialog = pane.declare_dialog
    qtbot.waitUntil(dialog.isVisible)
    qtbot.keyClicks(dialog.module, "spacrq.experiments.demo_sweep")
    qtbot.waitUntil(dialog.ok.isEnabled, timeout=30000)
    qtbot.mouseClick(dialog.ok, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pane.experiment_box.currentText() == "demo_sweep", timeout=10000)
    qtbot.waitUntil(lambda: "points" in pane.form.editors, timeout=30000)
    assert pane.remove_button.isEnabled()
    (spec,) = load_experiments(workspace.root)
    kept = Path(spec.run_root) / "r1"
    create_run(kept, "{}")

    asked = []
    monkeypatch.setattr(pane, "confirm_remove",
                        lambda name, run_root: asked.append((name, run_root)) or False)
    qtbot.mouseClick(pane.remove_button, Qt.MouseButton.LeftButton)
    assert asked == [("demo_sweep", spec.run_root)]
    assert [s.name for s in load_experiments(workspace.root)] == ["demo_sweep"]  # declined
    monkeypatch.setattr(pane, "confirm_remove", lambda name, run_root: True)
    qtbot.mouseClick(pane.remove_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pane.experiment_box.count() == 0, timeout=10000)
    assert load_experiments(workspace.root) == []
    assert (kept / "created.json").is_file()  # the runs stay on disk
    qtbot.waitUntil(lambda: "stay in" in pane.message.text())
