"""The Experiments pane says what its form holds, names a paused run in the status bar, and
draws its run table whole (pytest-qt, offscreen, no sleeps)."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtGui import QColor

from spacrq.experiments.declarations import ExperimentSpec, declare_experiment
from spacrq.experiments.errors import PROCESS_FILE
from spacrq.experiments.pane import BADGES, clock_text
from spacrq.procs import ProcessRef
from spacrq.runfiles import write_json
from spacrq.ui.experiments_pane import ExperimentsPane
from spacrq.ui.experiments_table import BAR_WIDTH

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sweep(workspace):
    run_root = workspace.experiments / "sweep" / "runs"
    declare_experiment(workspace.root, ExperimentSpec(
        "sweep", "spacrq.experiments.demo_sweep", sys.executable, str(ROOT), {}, str(run_root)))
    run_root.mkdir(parents=True)
    return run_root


def _run(run_root: Path, run_id: str, config: dict | None, *, paused: bool = False,
         started: float | None = None) -> Path:
    """A run that started (24 steps, 3 done) with ``config`` as its config.yaml."""
    run = run_root / run_id
    run.mkdir()
    t0 = started or time.time() - 60
    lines = [{"event": "run_started", "ts": t0, "total_steps": 24}]
    for i in range(3):
        lines += [{"event": "step_started", "ts": t0 + i, "step_id": f"s{i}"},
                  {"event": "step_completed", "ts": t0 + i + 0.5, "step_id": f"s{i}"}]
    lines.append({"event": "run_paused" if paused else "run_canceled", "ts": t0 + 4})
    (run / "journal.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    if paused:  # its process is alive: this one
        write_json(run / PROCESS_FILE, ProcessRef.of(os.getpid()).to_dict())
    if config is not None:
        (run / "config.yaml").write_text(json.dumps(config))
    return run


@pytest.fixture
def pane(qtbot, workspace, sweep):
    pane = ExperimentsPane(workspace, interval=0.1)
    qtbot.addWidget(pane)
    yield pane
    pane.shutdown()


def _value(pane, key):
    return pane.form.editors[key].value()


def test_the_form_shows_the_selected_runs_configuration_and_says_so(qtbot, pane, sweep):
    _run(sweep, "demo", {"points": 24, "dwell": 0.25, "detector": {"readings": 3, "noise": 0.03}})
    _run(sweep, "bare", None, started=time.time() - 600)
    qtbot.waitUntil(lambda: "points" in pane.form.editors and pane.runs.rowCount() == 2,
                    timeout=20000)
    qtbot.waitUntil(lambda: pane.selected_run_id == "demo", timeout=5000)  # the newest
    qtbot.waitUntil(lambda: _value(pane, "points") == 24, timeout=5000)
    assert (_value(pane, "dwell"), _value(pane, "detector.readings"),
            _value(pane, "detector.noise")) == (0.25, 3, 0.03)
    assert pane.form_heading.text().startswith("The configuration run demo ran with.")
    pane.form.editors["points"].editor.setValue(30)
    assert "(changed here since)" in pane.form_heading.text()
    pane.defaults_button.click()
    assert (_value(pane, "points"), _value(pane, "dwell")) == (50, 0.1)  # the module's own
    assert pane.form_heading.text() == ("A new run of sweep: the module's defaults (not run "
                                        "demo's configuration).")
    pane.table.selectRow(pane.runs.row_of("bare"))  # no configuration file of its own
    qtbot.waitUntil(lambda: "has no configuration file" in pane.form_heading.text(),
                    timeout=5000)
    assert _value(pane, "points") == 50
    pane.table.selectRow(pane.runs.row_of("demo"))
    qtbot.waitUntil(lambda: _value(pane, "points") == 24, timeout=5000)
    assert pane.form_heading.text().startswith("The configuration run demo ran with.")
    assert pane.form_error.text() == ""
    _run(sweep, "low", {"points": 1}, started=time.time() - 900)  # a value the form cannot show
    qtbot.waitUntil(lambda: pane.runs.row_of("low") >= 0, timeout=5000)
    pane.table.selectRow(pane.runs.row_of("low"))
    qtbot.waitUntil(lambda: "points = 1 is below its minimum 2" in pane.form_error.text(),
                    timeout=5000)
    assert _value(pane, "points") == 2 and "nearest it allows" in pane.form_error.text()


def test_a_paused_run_is_in_the_status_bar_line(qtbot, pane, sweep):
    _run(sweep, "r1", {"points": 24}, paused=True)
    qtbot.waitUntil(lambda: pane.run_of("r1") is not None and pane.run_of("r1").state == "paused",
                    timeout=20000)
    assert pane.running_now() == ("experiment sweep run r1 paused",)


def test_the_run_table_shows_dates_a_painted_bar_and_whole_words(qtbot, pane, sweep):
    _run(sweep, "r1", {"points": 24}, paused=True)
    pane.resize(1280, 800)
    pane.show()
    qtbot.waitUntil(lambda: pane.run_of("r1") is not None and pane.run_of("r1").state == "paused",
                    timeout=20000)
    row = pane.runs.row_of("r1")
    started = pane.runs.data(pane.runs.index(row, 3))
    assert started == clock_text(pane.run_of("r1").started)  # the day, not the time alone
    assert time.strftime("%b", time.localtime(pane.run_of("r1").started)) in started
    text = pane.runs.data(pane.runs.index(row, 2))
    assert text == "3 / 24 steps"  # no glyphs: the bar is painted
    table = pane.table
    metrics = table.fontMetrics()
    assert table.columnWidth(2) >= BAR_WIDTH + metrics.horizontalAdvance(text)
    assert table.columnWidth(3) >= metrics.horizontalAdvance(started)
    rect = table.visualRect(pane.runs.index(row, 2))
    image = table.viewport().grab().toImage()
    y = rect.center().y()
    colours = {image.pixelColor(x, y).name() for x in range(rect.left(), rect.left() + 20)}
    assert QColor(BADGES["paused"][1]).name() in colours  # the bar, in the paused colour
    name = pane.new_name
    assert name.width() >= name.fontMetrics().horizontalAdvance(name.placeholderText())
    header = table.horizontalHeader()  # every column in sight at the window's usual size
    assert header.sectionPosition(4) + metrics.horizontalAdvance("31 Dec 23:59") \
        <= table.viewport().width()
    pane.hide()
