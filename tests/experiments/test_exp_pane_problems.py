"""The Experiments pane explains a garbled control file and a run nobody can vouch for."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from spacrq.experiments import owner
from spacrq.experiments.declarations import ExperimentSpec, declare_experiment
from spacrq.experiments.pane import tooltip
from spacrq.procs import ProcessRef
from spacrq.runfiles import write_json

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_root(workspace):
    root = workspace.experiments / "sweep" / "runs"
    declare_experiment(workspace.root, ExperimentSpec(
        "sweep", "spacrq.experiments.demo_sweep", sys.executable, str(ROOT), {}, str(root)))
    root.mkdir(parents=True)
    owner.forget_scan()
    return root


def _journal(run: Path, **start) -> Path:
    run.mkdir()
    lines = [{"event": "run_started", "ts": time.time() - 50, "total_steps": 5, **start},
             {"event": "step_started", "ts": time.time() - 40, "step_id": "s0"}]
    (run / "journal.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run


def _pane(qtbot, workspace):
    from spacrq.ui.experiments_pane import ExperimentsPane
    pane = ExperimentsPane(workspace)
    qtbot.addWidget(pane)
    return pane


def test_a_garbled_control_file_is_explained_where_the_operator_looks(qtbot, workspace, run_root):
    run = _journal(run_root / "live")
    write_json(run / "spacrq-process.json", ProcessRef.of(os.getpid()).to_dict())
    (run / "control.json").write_bytes(b'{"stop": "abort\xff\xfe"}')
    pane = _pane(qtbot, workspace)
    try:
        qtbot.waitUntil(lambda: pane.selected_run is not None
                        and pane.selected_run.state == "running", timeout=20000)
        qtbot.waitUntil(lambda: "Control file" in pane.detail.report.toPlainText(), timeout=5000)
        assert str(run / "control.json") in pane.detail.report.toPlainText()
        assert "control file cannot be read" in pane.message.text()
        tip = tooltip(pane.selected_run)
        assert "control file:" in tip and "not valid JSON" in tip
    finally:
        pane.shutdown()


def test_a_run_nobody_can_vouch_for_reads_not_responding(qtbot, workspace, run_root):
    run = _journal(run_root / "elsewhere", provenance={"host": "bench-7"})
    os.utime(run / "journal.jsonl", (time.time() - 600, time.time() - 600))
    pane = _pane(qtbot, workspace)
    try:
        qtbot.waitUntil(lambda: pane.selected_run is not None
                        and pane.selected_run.state == "not_responding", timeout=20000)
        badge = pane.runs.data(pane.runs.index(pane.runs.row_of("elsewhere"), 1))
        assert badge.startswith("not responding (silent 10m")
        assert "bench-7" in pane.message.text()
        assert pane.buttons["abort"].isEnabled() and not pane.buttons["resume"].isEnabled()
    finally:
        pane.shutdown()
