"""The Experiments pane opens on the newest run and plots what was measured against what was swept."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from spacrq.experiments.declarations import ExperimentSpec, declare_experiment
from spacrq.experiments.errors import PROCESS_FILE
from spacrq.procs import ProcessRef
from spacrq.runfiles import write_json
from spacrq.ui.experiments_pane import ExperimentsPane
from spacrq.ui.experiments_plot import STEP_INDEX, RecordsPlot

ROOT = Path(__file__).resolve().parents[2]
WAIT = 10_000


@pytest.fixture
def sweep(workspace):
    run_root = workspace.experiments / "sweep" / "runs"
    declare_experiment(workspace.root, ExperimentSpec(
        "sweep", "spacrq.experiments.demo_sweep", sys.executable, str(ROOT), {}, str(run_root)))
    run_root.mkdir(parents=True)
    return run_root


def _finished_run(run_root: Path, run_id: str, points: int, gain: float = 1.0) -> Path:
    """A completed sweep on disk: journal, and one record per set-point (as the demo writes them)."""
    run_dir = run_root / run_id
    run_dir.mkdir()
    t = time.time() - 100
    events = [{"event": "run_started", "ts": t, "total_steps": points}]
    records = []
    for i in range(points):
        setpoint = 100.0 * i
        events += [{"event": "step_started", "ts": t + i, "step_id": f"point[{i:05d}]"},
                   {"event": "step_completed", "ts": t + i + 0.5, "step_id": f"point[{i:05d}]"}]
        records.append({"index": i, "provenance": {"step_id": f"point[{i:05d}]",
                                                   "params": {"setpoint_mV": setpoint}},
                        "value": {"step": i, "setpoint_mV": setpoint, "signal": gain * (i + 1) ** 2}})
    events.append({"event": "run_completed", "ts": t + points})
    (run_dir / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (run_dir / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    write_json(run_dir / PROCESS_FILE, ProcessRef(2 ** 22 + 17, 1.0).to_dict())
    return run_dir


@pytest.fixture
def pane(qtbot, workspace):
    made = []

    def open_():
        p = ExperimentsPane(workspace)
        qtbot.addWidget(p)
        made.append(p)
        return p

    yield open_
    for p in made:
        p.shutdown()


def test_the_pane_opens_on_the_newest_run_with_its_records(qtbot, pane, sweep):
    _finished_run(sweep, "2026-11-30_night", 4)
    _finished_run(sweep, "2026-12-01_night", 6)
    p = pane()
    qtbot.waitUntil(lambda: p.selected_run_id == "2026-12-01_night", timeout=WAIT)  # nobody clicked
    qtbot.waitUntil(lambda: p.detail.records.rowCount() == 6 and p.detail.plot.point_count() == 6,
                    timeout=WAIT)
    assert p.table.selectionModel().currentIndex().row() == 0


def test_the_plot_puts_the_swept_setpoint_along_x_and_the_signal_up(qtbot, pane, sweep):
    _finished_run(sweep, "2026-12-01_a", 5)
    p = pane()
    plot = p.detail.plot
    qtbot.waitUntil(lambda: plot.point_count() == 5, timeout=WAIT)
    assert (plot.x_field, plot.field) == ("value.setpoint_mV", "value.signal")
    xs, ys = plot.curve.getData()
    assert list(xs) == [0.0, 100.0, 200.0, 300.0, 400.0] and list(ys) == [1, 4, 9, 16, 25]
    assert plot.plot.getAxis("bottom").labelText == "setpoint_mV"
    plot.choose_x(STEP_INDEX)
    assert list(plot.curve.getData()[0]) == [0, 1, 2, 3, 4]


def test_the_chosen_axes_are_remembered_for_the_experiments_other_runs(qtbot, pane, sweep):
    _finished_run(sweep, "2026-12-01_a", 5)
    _finished_run(sweep, "2026-12-01_b", 7, gain=2.0)
    p = pane()
    plot = p.detail.plot
    qtbot.waitUntil(lambda: p.selected_run_id == "2026-12-01_b" and plot.point_count() == 7, timeout=WAIT)
    plot.choose_x("value.signal")
    plot.choose("value.setpoint_mV")
    p.table.selectRow(1)  # the older run
    qtbot.waitUntil(lambda: p.selected_run_id == "2026-12-01_a" and plot.point_count() == 5, timeout=WAIT)
    assert (plot.x_field, plot.field) == ("value.signal", "value.setpoint_mV")
    assert list(plot.curve.getData()[0]) == [1, 4, 9, 16, 25]


def test_records_lacking_a_field_add_no_point_and_scatter_is_not_joined(qtbot):
    plot = RecordsPlot()
    qtbot.addWidget(plot)
    plot.append({"fields": ["value.signal", "value.t"], "swept": ["value.t"],
                 "series": {"value.signal": ([0, 1, 2, 3], [5.0, 6.0, 7.0, 8.0]),
                            "value.t": ([0, 2, 3], [3.0, 1.0, 2.0])}})
    assert plot.x_field == "value.t" and plot.point_count() == 3
    xs, ys = plot.curve_data()
    assert list(xs) == [3.0, 1.0, 2.0] and list(ys) == [5.0, 7.0, 8.0]
    # x goes back and forth: points, no line through them
    assert plot.curve.opts["pen"].style() == Qt.PenStyle.NoPen and plot.curve.opts["symbol"] == "o"
    plot.append({"fields": ["value.signal", "value.t"], "swept": [],
                 "series": {"value.signal": ([4], [9.0]), "value.t": ([4], [4.0])}})
    assert plot.point_count() == 4 and list(plot.curve_data()[1]) == [5.0, 7.0, 8.0, 9.0]
