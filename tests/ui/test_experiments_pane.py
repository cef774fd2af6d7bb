"""The Experiments pane, driven as an operator drives it (pytest-qt, offscreen, no sleeps)."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QPlainTextEdit, QSpinBox

from spacrq.experiments.declarations import ExperimentSpec, declare_experiment
from spacrq.experiments.errors import PROCESS_FILE
from spacrq.experiments.runs import create_run
from spacrq.procs import ProcessRef
from spacrq.runfiles import write_json
from spacrq.ui.experiments_form import ConfigForm, FormError
from spacrq.experiments.pane import RunRow, rows
from spacrq.experiments.watch import ExperimentsWatch
from spacrq.ui.experiments_models import RecordsModel
from spacrq.ui.experiments_pane import ExperimentsPane, run_table

ROOT = Path(__file__).resolve().parents[2]

MANIFEST = {"module": "mylab.scan", "title": "Scan", "schema": {
    "default": [{"name": "points", "dtype": "int", "default": 10, "min_value": 2,
                 "max_value": 100, "description": "How many points."}],
    "hwp": [
        {"name": "start_deg", "dtype": "float", "default": 0.0, "unit": "deg", "min_value": 0.0,
         "max_value": 360.0, "description": "First half-wave-plate angle."},
        {"name": "mode", "dtype": "str", "default": "fast", "options": ["fast", "slow"]},
        {"name": "serial", "dtype": "str", "default": "HWP-1", "read_only": True},
        {"name": "targets", "dtype": "yaml", "default": [1, 2]},
        {"name": "enabled", "dtype": "bool", "default": True},
        {"name": "limit", "dtype": "float | None", "default": None},
    ]}}


@pytest.fixture
def sweep(workspace):
    run_root = workspace.experiments / "sweep" / "runs"
    declare_experiment(workspace.root, ExperimentSpec(
        "sweep", "spacrq.experiments.demo_sweep", sys.executable, str(ROOT), {}, str(run_root)))
    run_root.mkdir(parents=True)
    return run_root


@pytest.fixture
def pane(qtbot, workspace, sweep):
    pane = ExperimentsPane(workspace)
    qtbot.addWidget(pane)
    yield pane
    pane.shutdown()


def _ready(qtbot, pane):
    qtbot.waitUntil(lambda: "points" in pane.form.editors, timeout=20000)


def _row(pane, run_id):
    return pane.run_of(run_id)


def _state(pane, run_id):
    run = pane.run_of(run_id)
    return run.state if run else None


def _done(pane, run_id):
    run = pane.run_of(run_id)
    return run.done if run else 0


def _started(run_root: Path, run_id: str, steps: int, done: int, *, alive: bool, extra=()) -> Path:
    run_dir = run_root / run_id
    run_dir.mkdir()
    lines = [{"event": "run_started", "ts": time.time() - 50, "total_steps": steps}]
    for i in range(done):
        lines += [{"event": "step_started", "ts": time.time() - 40 + i, "step_id": f"s{i}"},
                  {"event": "step_completed", "ts": time.time() - 39.5 + i, "step_id": f"s{i}"}]
    lines += [{"event": e, "ts": time.time()} for e in extra]
    (run_dir / "journal.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ref = ProcessRef.of(os.getpid()) if alive else ProcessRef(2 ** 22 + 17, 1.0)
    write_json(run_dir / PROCESS_FILE, ref.to_dict())
    return run_dir


# -- the form ----------------------------------------------------------------------

def test_form_is_built_from_the_manifest_with_types_units_and_bounds(qtbot):
    form = ConfigForm()
    qtbot.addWidget(form)
    form.build(MANIFEST)
    editors = {key: e.editor for key, e in form.editors.items()}
    assert list(editors) == ["points", "hwp.start_deg", "hwp.mode", "hwp.serial", "hwp.targets",
                             "hwp.enabled", "hwp.limit"]
    assert isinstance(editors["points"], QSpinBox)
    assert (editors["points"].minimum(), editors["points"].maximum()) == (2, 100)
    angle = editors["hwp.start_deg"]
    assert isinstance(angle, QDoubleSpinBox) and angle.suffix() == " deg"
    assert (angle.minimum(), angle.maximum()) == (0.0, 360.0)
    assert "First half-wave-plate angle." in angle.toolTip()
    assert isinstance(editors["hwp.mode"], QComboBox) and editors["hwp.mode"].count() == 2
    assert isinstance(editors["hwp.serial"], QLineEdit) and not editors["hwp.serial"].isEnabled()
    assert isinstance(editors["hwp.targets"], QPlainTextEdit)
    assert isinstance(editors["hwp.enabled"], QCheckBox) and editors["hwp.enabled"].isChecked()
    assert form.config() == {"points": 10, "hwp": {"start_deg": 0.0, "mode": "fast",
                                                   "serial": "HWP-1", "targets": [1, 2],
                                                   "enabled": True, "limit": 0.0}}


def test_values_out_of_bounds_are_refused_at_entry(qtbot):
    form = ConfigForm()
    qtbot.addWidget(form)
    form.build(MANIFEST)
    points = form.editors["points"].editor
    points.selectAll()
    qtbot.keyClicks(points, "999")
    qtbot.keyClick(points, Qt.Key.Key_Return)
    assert 2 <= points.value() <= 100
    angle = form.editors["hwp.start_deg"].editor
    angle.selectAll()
    qtbot.keyClicks(angle, "500")
    qtbot.keyClick(angle, Qt.Key.Key_Return)
    assert 0.0 <= angle.value() <= 360.0
    angle.setValue(-20.0)  # even set from code, the bound holds
    assert angle.value() == 0.0
    form.editors["hwp.targets"].editor.setPlainText("[1, 2")
    with pytest.raises(FormError, match="hwp.targets"):
        form.config()


def test_a_malformed_schema_is_one_sentence_not_a_traceback(qtbot):
    form = ConfigForm()
    qtbot.addWidget(form)
    with pytest.raises(FormError, match="fix the module's manifest"):
        form.build({"schema": {"g": [{"dtype": "int"}]}})


# -- the run table ------------------------------------------------------------------

def _run(run_id, state="running", done=1, colour="#2471a3", badge="running"):
    return RunRow(run_id, state, badge, colour, done=done, total=10, eta=30.0,
                  started=1_796_000_000.0)


def test_run_table_changes_only_the_rows_that_changed(qtbot):
    model = run_table()
    model.set_rows(rows([_run("b"), _run("a", "completed", 10, "#1e8449", "completed")]))
    changed, inserted = [], []
    model.dataChanged.connect(lambda top, bottom: changed.append((top.row(), bottom.row())))
    model.rowsInserted.connect(lambda _p, first, last: inserted.append((first, last)))
    model.set_rows(rows([_run("c"), _run("b", done=2),
                         _run("a", "completed", 10, "#1e8449", "completed")]))
    assert inserted == [(0, 0)] and changed == [(1, 1)]
    assert model.data(model.index(1, 2)) == "2 / 10 steps · ETA 30.0s"
    assert model.data(model.index(2, 1)) == "completed"
    dot = model.data(model.index(2, 1), Qt.ItemDataRole.DecorationRole)
    assert dot.pixmap(12, 12).toImage().pixelColor(6, 6).name() == "#1e8449"
    tint = model.data(model.index(2, 1), Qt.ItemDataRole.BackgroundRole).color()
    assert tint.name() == QColor("#1e8449").lighter(185).name()
    model.set_rows(rows([_run("c")]))
    assert model.rowCount() == 1


def test_buttons_follow_the_selected_runs_state(qtbot, pane, sweep):
    create_run(sweep / "a_created", "{}\n", experiment="sweep")
    _started(sweep, "b_completed", 2, 2, alive=False, extra=["run_completed"])
    _started(sweep, "c_interrupted", 5, 2, alive=False)
    _started(sweep, "d_running", 5, 2, alive=True)
    qtbot.waitUntil(lambda: pane.runs.rowCount() == 4 and all(
        r.state != "reading" for r in pane.shown_runs()), timeout=10000)
    expected = {
        "a_created": {"run", "duplicate", "rename", "reconfigure"},
        "b_completed": {"duplicate"},
        "c_interrupted": {"resume", "duplicate"},
        "d_running": {"pause", "stop", "abort", "duplicate"},
    }
    for run_id, enabled in expected.items():
        pane.table.selectRow(pane.runs.row_of(run_id))
        qtbot.waitUntil(lambda run_id=run_id: pane.selected_run_id == run_id
                        and pane.selected_run is not None)
        assert {k for k, b in pane.buttons.items() if b.isEnabled()} == enabled, run_id
        assert pane.detail.add_note_button.isEnabled()
    assert pane.buttons["pause"].text() == "Pause"
    badge = pane.runs.data(pane.runs.index(pane.runs.row_of("c_interrupted"), 1))
    assert badge == "interrupted"


def test_notes_are_added_and_listed_with_author_and_time(qtbot, pane, sweep):
    create_run(sweep / "tonight", "{}\n", experiment="sweep")
    qtbot.waitUntil(lambda: pane.runs.rowCount() == 1, timeout=10000)
    pane.table.selectRow(0)
    qtbot.waitUntil(lambda: "No notes yet" in pane.detail.notes.toPlainText(), timeout=5000)
    pane.detail.note_text.setPlainText("realigned the beam\nbefore the run")
    qtbot.mouseClick(pane.detail.add_note_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "realigned the beam" in pane.detail.notes.toPlainText(), timeout=5000)
    text = pane.detail.notes.toPlainText()
    assert "before the run" in text
    import getpass
    assert getpass.getuser() in text and time.strftime("%Y-") in text
    assert (sweep / "tonight" / "notes.txt").read_text().count("realigned the beam") == 1


def test_records_plot_grows_on_one_curve(qtbot, pane, sweep):
    run_dir = _started(sweep, "r", 10, 3, alive=True)

    def add(indices):
        with open(run_dir / "records.jsonl", "a") as f:
            for i in indices:
                f.write(json.dumps({"index": i, "provenance": {"params": {"x": i}},
                                    "value": {"x": i, "signal": i * i}}) + "\n")

    add(range(3))
    qtbot.waitUntil(lambda: pane.runs.rowCount() == 1, timeout=10000)
    pane.table.selectRow(0)
    qtbot.waitUntil(lambda: pane.detail.plot.point_count() == 3, timeout=5000)
    curve = pane.detail.plot.curve
    assert pane.detail.plot.field == "value.signal"  # the measurement, not the echoed input
    add(range(3, 5))
    qtbot.waitUntil(lambda: pane.detail.plot.point_count() == 5, timeout=5000)
    assert pane.detail.plot.curve is curve and len(pane.detail.plot.plot.listDataItems()) == 1
    xs, ys = curve.getData()
    assert list(xs) == [0, 1, 2, 3, 4] and list(ys) == [0, 1, 4, 9, 16]
    assert pane.detail.records.rowCount() == 5
    model = pane.detail.records
    headers = [model.headerData(i, Qt.Orientation.Horizontal) for i in range(model.columnCount())]
    assert headers == ["index", "step", "x", "signal"]
    assert model.data(model.index(4, 3)) == "16"
    pane.detail.plot.choose("value.x")
    assert list(pane.detail.plot.curve.getData()[1]) == [0, 1, 2, 3, 4]


def test_a_module_that_gives_no_manifest_is_said_inline(qtbot, workspace, tmp_path):
    declare_experiment(workspace.root, ExperimentSpec(
        "broken", "no_such_module_here", sys.executable, str(tmp_path), {}, str(tmp_path / "runs")))
    pane = ExperimentsPane(workspace)
    qtbot.addWidget(pane)
    try:
        qtbot.waitUntil(lambda: "exited with code" in pane.form_error.text(), timeout=20000)
        assert not pane.create_and_run_button.isEnabled()
    finally:
        pane.shutdown()


def test_shutdown_stops_the_poller_and_closes_the_watch(qtbot, workspace):
    pane = ExperimentsPane(workspace)
    qtbot.addWidget(pane)
    assert pane.poller.is_running()
    assert pane.shutdown()
    assert not pane.poller.is_running() and pane.watch.poll({}) is None


def test_closing_during_a_heavy_poll_ends_within_the_budget(qtbot, workspace, sweep, monkeypatch):
    for i in range(2):  # histories of seconds of reading each
        _started(sweep, f"r{i:02d}", 40000, 40000, alive=False)
    # one poll would read every history at once: the heaviest poll there is
    monkeypatch.setattr(ExperimentsWatch, "FIRST_READ_BUDGET", 600.0)
    monkeypatch.setattr(ExperimentsWatch, "CHUNK", 4096)
    reading = []
    feed = ExperimentsWatch._catch_up
    monkeypatch.setattr(ExperimentsWatch, "_catch_up",
                        lambda self, watch, deadline: reading.append(1) or feed(self, watch, deadline))
    pane = ExperimentsPane(workspace)
    qtbot.addWidget(pane)
    qtbot.waitUntil(lambda: bool(reading), timeout=10000)
    assert pane.shutdown(1.0)  # the poll in flight returned, the poller ended, within a second
    assert not pane.poller.is_running()


def test_closing_while_a_module_is_being_asked_kills_it(qtbot, workspace, tmp_path):
    (tmp_path / "hangs.py").write_text("import time\ntime.sleep(120)\n")
    declare_experiment(workspace.root, ExperimentSpec(
        "hangs", "hangs", sys.executable, str(tmp_path), {}, str(tmp_path / "runs")))
    pane = ExperimentsPane(workspace, manifest_timeout=120)
    qtbot.addWidget(pane)
    qtbot.waitUntil(lambda: pane.waiting_for("manifest") and pane.watch.busy(), timeout=10000)
    assert pane.shutdown(1.0)
    qtbot.waitUntil(lambda: not pane.watch.busy(), timeout=10000)  # its child was killed


# -- a real run of the demo module --------------------------------------------------

def test_a_demo_run_is_paused_continued_stopped_and_resumed_from_the_pane(qtbot, pane, sweep):
    said = []
    pane.notify.connect(said.append)
    _ready(qtbot, pane)
    pane.form.editors["points"].editor.setValue(24)
    pane.form.editors["dwell"].editor.setValue(0.25)
    pane.run_name.setText("night1")
    qtbot.mouseClick(pane.create_and_run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _done(pane, "night1") >= 2, timeout=20000)
    assert pane.selected_run_id == "night1" and pane.run_name.text() == ""  # selected, name used
    assert _state(pane, "night1") == "running" and "ETA" in pane.runs.data(pane.runs.index(0, 2))
    buttons = pane.buttons
    qtbot.mouseClick(buttons["pause"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _state(pane, "night1") == "paused", timeout=10000)
    assert buttons["pause"].text() == "Continue" and not buttons["resume"].isEnabled()
    held = _done(pane, "night1")
    assert 0 < pane.detail.plot.point_count() <= held
    qtbot.mouseClick(buttons["pause"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _state(pane, "night1") == "running"
                    and _done(pane, "night1") > held, timeout=10000)
    qtbot.waitUntil(lambda: buttons["stop"].isEnabled(), timeout=5000)
    qtbot.mouseClick(buttons["stop"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _state(pane, "night1") == "canceled", timeout=10000)
    stopped_at = _done(pane, "night1")
    assert stopped_at < 24
    qtbot.waitUntil(lambda: buttons["resume"].isEnabled(), timeout=5000)
    qtbot.mouseClick(buttons["resume"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _state(pane, "night1") == "completed", timeout=30000)
    assert _done(pane, "night1") == 24
    qtbot.waitUntil(lambda: pane.detail.records.rowCount() == 24, timeout=5000)
    assert pane.detail.plot.point_count() == 24
    indices = [pane.detail.records.data(pane.detail.records.index(i, 0)) for i in range(24)]
    assert sorted(int(i) for i in indices) == list(range(24))  # every step recorded exactly once
    assert pane.detail.log.shown_text().strip()
    assert not buttons["resume"].isEnabled() and buttons["duplicate"].isEnabled()
    for outcome in ("paused", "canceled", "completed after 24 of 24 steps"):
        assert any(f"run night1 {outcome}" in line for line in said), (outcome, said)
    qtbot.waitUntil(lambda: pane.watch.started_running() == 0, timeout=10000)


def test_abort_asks_first_and_then_interrupts_the_step(qtbot, pane, sweep, monkeypatch):
    _ready(qtbot, pane)
    pane.form.editors["points"].editor.setValue(5)
    pane.form.editors["dwell"].editor.setValue(30.0)
    pane.run_name.setText("long")
    qtbot.mouseClick(pane.create_and_run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: getattr(_row(pane, "long"), "step", None) is not None, timeout=20000)
    qtbot.waitUntil(lambda: pane.buttons["abort"].isEnabled(), timeout=5000)
    asked = []
    monkeypatch.setattr(pane, "confirm_abort", lambda run_id: asked.append(run_id) or False)
    qtbot.mouseClick(pane.buttons["abort"], Qt.MouseButton.LeftButton)
    assert asked == ["long"] and not (sweep / "long" / "control.json").exists()
    monkeypatch.setattr(pane, "confirm_abort", lambda run_id: True)
    qtbot.mouseClick(pane.buttons["abort"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _state(pane, "long") == "aborted", timeout=20000)
    qtbot.waitUntil(lambda: pane.buttons["resume"].isEnabled(), timeout=5000)
    qtbot.waitUntil(lambda: not pane.watch.busy() and pane.watch.started_running() == 0,
                    timeout=10000)


def test_a_run_not_yet_started_is_renamed_reconfigured_and_duplicated(qtbot, pane, sweep):
    create_run(sweep / "tonight", '{"points": 80, "dwell": 0.5}\n', experiment="sweep")
    _ready(qtbot, pane)
    qtbot.waitUntil(lambda: pane.runs.rowCount() == 1, timeout=10000)
    pane.table.selectRow(0)
    points = pane.form.editors["points"].editor
    qtbot.waitUntil(lambda: points.value() == 80, timeout=5000)  # the form shows the run's own
    points.setValue(120)
    qtbot.mouseClick(pane.buttons["reconfigure"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "new configuration" in pane.message.text(), timeout=5000)
    assert json.loads((sweep / "tonight" / "config.yaml").read_text())["points"] == 120
    qtbot.mouseClick(pane.buttons["rename"], Qt.MouseButton.LeftButton)
    assert "Type the new name" in pane.message.text()  # refused inline, nothing asked
    pane.run_name.setText("no/slashes")
    qtbot.mouseClick(pane.create_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "not a path" in pane.message.text(), timeout=5000)
    assert pane.run_name.text() == "no/slashes"  # kept, to be corrected
    pane.new_name.setText("../elsewhere")
    qtbot.mouseClick(pane.buttons["rename"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "not a path" in pane.message.text(), timeout=5000)
    pane.new_name.setText("friday")
    qtbot.mouseClick(pane.buttons["rename"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pane.selected_run_id == "friday", timeout=5000)
    assert not (sweep / "tonight").exists()
    pane.new_name.setText("friday_copy")
    qtbot.mouseClick(pane.buttons["duplicate"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pane.selected_run_id == "friday_copy", timeout=5000)
    assert json.loads((sweep / "friday_copy" / "config.yaml").read_text())["points"] == 120
    assert _state(pane, "friday_copy") == "created"


def test_run_starts_a_created_run_with_its_own_configuration(qtbot, pane, sweep):
    create_run(sweep / "quick", '{"points": 3, "dwell": 0.05}\n', experiment="sweep")
    qtbot.waitUntil(lambda: pane.runs.rowCount() == 1, timeout=10000)
    pane.table.selectRow(0)
    qtbot.waitUntil(lambda: pane.buttons["run"].isEnabled(), timeout=5000)
    qtbot.mouseClick(pane.buttons["run"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _state(pane, "quick") == "completed", timeout=20000)
    assert _done(pane, "quick") == 3 and _row(pane, "quick").total == 3
    assert not pane.buttons["rename"].isEnabled() and not pane.buttons["reconfigure"].isEnabled()
    qtbot.waitUntil(lambda: pane.watch.started_running() == 0, timeout=10000)


def test_a_module_that_hangs_on_manifest_times_out_inline(qtbot, workspace, tmp_path):
    (tmp_path / "hangs.py").write_text("import time\ntime.sleep(120)\n")
    declare_experiment(workspace.root, ExperimentSpec(
        "hangs", "hangs", sys.executable, str(tmp_path), {}, str(tmp_path / "runs")))
    pane = ExperimentsPane(workspace, manifest_timeout=1.5)
    qtbot.addWidget(pane)
    try:
        qtbot.waitUntil(lambda: "did not answer" in pane.form_error.text(), timeout=15000)
        assert pane.poller.is_running()  # the run table went on meanwhile
    finally:
        pane.shutdown()


def test_an_empty_workspace_says_where_to_declare_an_experiment(qtbot, workspace):
    pane = ExperimentsPane(workspace)
    qtbot.addWidget(pane)
    try:
        qtbot.waitUntil(lambda: "experiments.json" in pane.form._placeholder.text(), timeout=5000)
        assert not pane.create_and_run_button.isEnabled() and pane.experiment_box.count() == 0
    finally:
        pane.shutdown()


def test_the_plot_survives_a_night_of_repaints_without_losing_none(qtbot):
    """PySide6 6.12.0 on CPython 3.11 dropped a reference to None per void call, so a
    plot redrawn twice a second aborted the interpreter within hours (none_dealloc);
    pyproject excludes it. This guards against a toolkit that does it again."""
    import numpy as np

    from spacrq.ui.experiments_plot import RecordsPlot
    plot = RecordsPlot()
    qtbot.addWidget(plot)
    plot.resize(400, 300)
    plot.show()
    qtbot.waitExposed(plot)
    curve = plot.plot.plot(np.arange(50), np.arange(50.0))
    before = sys.getrefcount(None)
    for i in range(300):
        curve.setData(np.arange(50), np.random.default_rng(i).random(50))
        plot.repaint()
    lost = before - sys.getrefcount(None)
    assert lost < 100, f"{lost} references to None lost over 300 repaints"
    plot.close()


def test_the_environment_a_module_reads_is_checked_against_the_declaration(qtbot, workspace, tmp_path):
    module = tmp_path / "needs_env.py"
    module.write_text(
        "import json, sys\n"
        "print(json.dumps({'module': 'needs_env', 'title': 'Needs env', 'schema': {},\n"
        "  'environment': [{'name': 'HWP_ADDRESS', 'description': 'stage address'},\n"
        "                  {'name': 'LAB_ROOM', 'description': 'where'}]}))\n")
    declare_experiment(workspace.root, ExperimentSpec(
        "needs", "needs_env", sys.executable, str(tmp_path), {"LAB_ROOM": "B12"},
        str(tmp_path / "runs")))
    pane = ExperimentsPane(workspace)
    qtbot.addWidget(pane)
    try:
        qtbot.waitUntil(lambda: pane.form.environment is not None
                        and pane.form.missing_environment() == ["HWP_ADDRESS"], timeout=20000)
        text = pane.form.environment.text.text()
        assert "HWP_ADDRESS</b> — required, not set" in text and "LAB_ROOM</b> — required, set" in text
    finally:
        pane.shutdown()


def _record(i: int, value) -> dict:
    return {"index": i, "saved_at": f"2026-01-01T00:00:{i % 60:02d}", "type": "value",
            "provenance": {"step_id": f"p{i}", "params": {"x": i}}, "value": value}


def test_the_records_table_shows_every_shape_of_record_from_its_own_cells(qtbot):
    model = RecordsModel()
    model.append([_record(0, {"x": 0, "signal": 1.5, "index": 99}), _record(1, 2.25),
                  {"index": 2, "saved_at": "t", "type": "blob", "blob": "a.npy"}])
    headers = [model.headerData(i, Qt.Orientation.Horizontal) for i in range(model.columnCount())]
    assert headers == ["index", "step", "x", "signal", "value", "type"]
    cells = [[model.data(model.index(r, c)) for c in range(model.columnCount())] for r in range(3)]
    assert cells == [["0", "p0", "0", "1.5", "", ""],  # the record's index, not a value field's
                     ["1", "p1", "", "", "2.25", "value"],
                     ["2", "", "", "", "", "blob"]]
    tip = model.data(model.index(1, 0), Qt.ItemDataRole.ToolTipRole)
    assert tip == "step p1, committed 2026-01-01T00:00:01"
    model.clear()
    assert model.rowCount() == 0 and model.columnCount() == 2


def test_a_long_records_table_adds_nothing_to_the_collectors_scans(qtbot):
    """Rows of numbers are kept flat, so a full collection does not walk 100 000 of them."""
    import gc

    model = RecordsModel()
    gc.collect()
    before = len(gc.get_objects())
    model.append([_record(i, {"x": i, "signal": i * 0.5, "label": f"s{i}"}) for i in range(3000)])
    gc.collect()
    assert model.rowCount() == 3000
    assert len(gc.get_objects()) - before < 100  # as read, 6000 nested dicts would be tracked
