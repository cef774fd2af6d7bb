"""The form's options, device chooser and environment list, and the command a run starts with."""
from __future__ import annotations

import sys

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSpinBox

from spacrq.experiments.declarations import ExperimentSpec
from spacrq.experiments.environment import environment_check
from spacrq.experiments.launch import prepare_run, run_argv
from spacrq.ui.experiments_form import ConfigForm

MANIFEST = {
    "module": "lab.pl", "title": "PL map", "chooses_devices": True,
    "schema": {"default": [{"name": "points", "dtype": "int", "default": 3}]},
    "options": [
        {"flag": "--prominence", "dtype": "float", "description": "Peak prominence.",
         "sets": "fit.prominence"},
        {"flag": "--repeats", "dtype": "int", "description": "Repeat each point."},
        {"flag": "--fast", "dtype": "bool", "description": "Skip settling."},
        {"flag": "--label", "dtype": "str", "description": "Label of the run."},
        {"flag": "--fit", "dtype": "str", "choices": ["gauss", "lorentz"],
         "description": "Peak shape."}],
    "environment": [
        {"name": "H6_STAGE", "description": "Address of the stage.", "required": True},
        {"name": "H6_GAIN", "description": "Detector gain.", "required": False},
        {"name": "H6_SHARE", "description": "Data share.", "required": True}]}


def _form(qtbot) -> ConfigForm:
    form = ConfigForm()
    qtbot.addWidget(form)
    form.build(MANIFEST)
    return form


def test_options_are_typed_widgets_with_the_manifests_help(qtbot):
    form = _form(qtbot)
    editors = form.option_editors
    assert list(editors) == ["--prominence", "--repeats", "--fast", "--label", "--fit"]
    assert isinstance(editors["--prominence"].editor, QDoubleSpinBox)
    assert isinstance(editors["--repeats"].editor, QSpinBox)
    assert editors["--fast"].editor is None and isinstance(editors["--fast"].given, QCheckBox)
    assert isinstance(editors["--label"].editor, QLineEdit)
    assert isinstance(editors["--fit"].editor, QComboBox)
    assert editors["--fit"].editor.count() == 2
    tip = editors["--prominence"].given.toolTip()
    assert "Peak prominence." in tip and "fit.prominence" in tip
    assert "Peak prominence." in editors["--prominence"].editor.toolTip()
    # nothing is passed until ticked: the module's defaults apply
    assert form.options() == {}
    assert not editors["--prominence"].editor.isEnabled()


def test_ticked_options_come_back_typed(qtbot):
    form = _form(qtbot)
    e = form.option_editors
    form.show()
    qtbot.waitExposed(form)
    e["--prominence"].given.setFocus()
    qtbot.keyClick(e["--prominence"].given, Qt.Key.Key_Space)  # keyboard-reachable
    assert e["--prominence"].editor.isEnabled()
    e["--prominence"].editor.setValue(-2.5)
    e["--fast"].given.setChecked(True)
    e["--fit"].given.setChecked(True)
    e["--fit"].editor.setCurrentText("lorentz")
    e["--repeats"].given.setChecked(True)
    e["--repeats"].editor.setValue(4)
    assert form.options() == {"--prominence": -2.5, "--fast": True, "--fit": "lorentz",
                              "--repeats": 4}
    form.set_options({"--label": "night 1"})
    assert form.options() == {"--label": "night 1"}


def test_the_device_chooser_lists_what_the_module_answered(qtbot):
    form = _form(qtbot)
    chooser = form.device_chooser
    assert chooser is not None and form.devices() is None  # not answered yet
    assert "once it has been asked" in chooser.note.text()
    form.set_devices(["hwp", "spec", "stage"])
    assert chooser.list.count() == 3 and form.devices() == ["hwp", "spec", "stage"]
    chooser.list.item(1).setCheckState(Qt.CheckState.Unchecked)
    assert form.devices() == ["hwp", "stage"]
    form.set_devices(["hwp", "spec", "stage"])  # a new answer keeps the operator's choice
    assert form.devices() == ["hwp", "stage"]
    form.set_devices(None)
    assert form.devices() is None and "every device" in chooser.note.text()
    form.set_devices(None, problem="lab.pl --devices exited with code 1")
    assert "exited with code 1" in chooser.note.text()
    assert chooser.toolTip() and chooser.list.toolTip()


def test_no_devices_or_options_boxes_for_a_module_without_them(qtbot):
    form = ConfigForm()
    qtbot.addWidget(form)
    form.build({"module": "m", "schema": {}})
    assert form.device_chooser is None and form.environment is None and form.option_editors == {}
    assert form.options() == {} and form.devices() is None and form.missing_environment() == []


def test_the_environment_list_marks_the_missing_required_ones(qtbot):
    form = _form(qtbot)
    form.show_environment(environment_check(MANIFEST, {"H6_STAGE": "tcp://stage"}))
    text = form.environment.text.text()
    assert "H6_STAGE</b> — required, set" in text
    assert "H6_GAIN</b> — optional, not set" in text
    assert "<span style='color:#c0392b'><b>H6_SHARE</b> — required, not set" in text
    assert "refused until H6_SHARE is set" in text and "declaration's env" in text
    assert form.missing_environment() == ["H6_SHARE"]
    form.show_environment(environment_check(MANIFEST, {"H6_STAGE": "a", "H6_SHARE": "b"}))
    assert form.missing_environment() == [] and "#c0392b" not in form.environment.text.text()


def test_what_the_form_chose_is_the_command_the_run_starts_with(qtbot, tmp_path):
    form = _form(qtbot)
    e = form.option_editors
    e["--prominence"].given.setChecked(True)
    e["--prominence"].editor.setValue(-1.5)
    e["--fast"].given.setChecked(True)
    form.set_devices(["hwp", "spec"])
    form.device_chooser.list.item(0).setCheckState(Qt.CheckState.Unchecked)
    spec = ExperimentSpec("pl", "lab.pl", sys.executable, str(tmp_path), {},
                          str(tmp_path / "runs"))
    run = prepare_run(spec, "r1", form.config(), options=form.options(), devices=form.devices(),
                      manifest=MANIFEST)
    argv = run_argv(spec, run, resume=False)
    assert argv[-2:] == ["--prominence=-1.5", "--fast"]
    assert run_argv(spec, run, resume=True)[-2:] == ["--prominence=-1.5", "--fast"]
    assert (run / "created.json").read_text().count('"spec"') == 1
