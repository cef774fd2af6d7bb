"""Through the pane: the manifest's options and environment in the form, and the run they start."""
from __future__ import annotations

import json
import sys
import textwrap

import pytest
from PySide6.QtCore import Qt

from spacrq.experiments.declarations import ExperimentSpec, declare_experiment
from spacrq.experiments.runs import runs_of
from spacrq.ui.experiments_pane import ExperimentsPane

MODULE = textwrap.dedent("""
    import json, os, sys
    if "--manifest" in sys.argv:
        print(json.dumps({"module": "optscan", "title": "Option scan", "schema": {"default": [
            {"name": "points", "dtype": "int", "default": 2}]},
            "options": [{"flag": "--gain", "dtype": "float", "description": "Detector gain."},
                        {"flag": "--fast", "dtype": "bool", "description": "Skip settling."}],
            "environment": [{"name": "H6_NEED", "description": "The stage address."},
                            {"name": "H6_MAYBE", "required": False}]}))
        sys.exit(0)
    with open(os.path.join(os.getcwd(), "argv.json"), "a") as out:
        out.write(json.dumps(sys.argv[1:]) + "\\n")
""")


@pytest.fixture
def checkout(tmp_path, workspace, monkeypatch):
    monkeypatch.delenv("H6_NEED", raising=False)
    monkeypatch.delenv("H6_MAYBE", raising=False)
    folder = tmp_path / "checkout"
    (folder / "optscan").mkdir(parents=True)
    (folder / "optscan" / "__init__.py").write_text("")
    (folder / "optscan" / "__main__.py").write_text(MODULE)
    declare_experiment(workspace.root, ExperimentSpec(
        "optscan", "optscan", sys.executable, str(folder), {}, str(tmp_path / "runs")))
    return folder


@pytest.fixture
def pane(qtbot, workspace, checkout):
    pane = ExperimentsPane(workspace, interval=0.2)
    qtbot.addWidget(pane)
    yield pane
    assert pane.shutdown(5.0)


def test_options_and_environment_in_the_form_and_in_the_command(qtbot, pane, checkout, tmp_path,
                                                                monkeypatch):
    qtbot.waitUntil(lambda: "--gain" in pane.form.option_editors, timeout=30000)
    env_text = pane.form.environment.text.text()
    assert "H6_NEED</b> — required, not set" in env_text and "#c0392b" in env_text
    assert "H6_MAYBE</b> — optional, not set" in env_text
    assert pane.form.missing_environment() == ["H6_NEED"]

    # refused at the door: nothing is made, the reason is said
    qtbot.mouseClick(pane.create_and_run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "H6_NEED" in pane.message.text(), timeout=30000)
    assert runs_of(tmp_path / "runs") == []

    monkeypatch.setenv("H6_NEED", "tcp://stage")
    qtbot.mouseClick(pane.reload_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pane.form.environment is not None
                    and pane.form.missing_environment() == []
                    and "H6_NEED</b> — required, set" in pane.form.environment.text.text(),
                    timeout=30000)
    gain = pane.form.option_editors["--gain"]
    gain.given.setChecked(True)
    gain.editor.setValue(-0.5)
    pane.form.option_editors["--fast"].given.setChecked(True)
    qtbot.mouseClick(pane.create_and_run_button, Qt.MouseButton.LeftButton)
    argv_file = checkout / "argv.json"
    qtbot.waitUntil(argv_file.exists, timeout=30000)
    qtbot.waitUntil(lambda: argv_file.read_text().endswith("\n"), timeout=10000)
    (argv,) = [json.loads(line) for line in argv_file.read_text().splitlines()]
    assert argv[-2:] == ["--gain=-0.5", "--fast"]
    assert "--config" in argv


DEVICE_MODULE = textwrap.dedent("""
    import json, sys
    if "--manifest" in sys.argv:
        print(json.dumps({"module": "devscan", "title": "Device scan", "chooses_devices": True,
                          "schema": {"default": [{"name": "stage", "dtype": "str",
                                                  "default": "both"}]}}))
        sys.exit(0)
    if "--devices" in sys.argv:
        config = json.load(open(sys.argv[sys.argv.index("--config") + 1]))
        print(json.dumps({"devices": ["hwp", "spec"] if config.get("stage") == "both" else ["hwp"]}))
        sys.exit(0)
""")


def test_the_devices_a_configuration_uses_are_asked_of_the_module_and_listed(qtbot, workspace,
                                                                             tmp_path):
    folder = tmp_path / "devcheckout"
    (folder / "devscan").mkdir(parents=True)
    (folder / "devscan" / "__init__.py").write_text("")
    (folder / "devscan" / "__main__.py").write_text(DEVICE_MODULE)
    declare_experiment(workspace.root, ExperimentSpec(
        "devscan", "devscan", sys.executable, str(folder), {}, str(tmp_path / "devruns")))
    pane = ExperimentsPane(workspace, interval=0.2)
    qtbot.addWidget(pane)
    try:
        qtbot.waitUntil(lambda: pane.form.device_chooser is not None
                        and pane.form.device_chooser.list.count() == 2, timeout=30000)
        chooser = pane.form.device_chooser
        assert [chooser.list.item(i).text() for i in range(2)] == ["hwp", "spec"]
        assert "this configuration uses" in chooser.note.text().lower()
    finally:
        assert pane.shutdown(5.0)
