"""The Run Report pane, driven through files the way a blockwise run writes them."""
from __future__ import annotations

from pathlib import Path

import pytest

from fake_run import FakeRun
from spacrq.blockwise.pane import NOT_MEASURED
from spacrq.ui.report_pane import RunReportPane


WAIT = 10_000


@pytest.fixture
def make_pane(open_pane):
    return lambda: open_pane(RunReportPane)


def _key(workspace, name):
    return str((workspace.runs / name).resolve())


def _tree_texts(pane):
    m = pane.runs_proxy
    return [[m.index(r, c).data() for c in range(m.columnCount())] for r in range(m.rowCount())]


def test_pane_lists_the_workspaces_runs_running_first(workspace, make_pane, qtbot):
    done = FakeRun(workspace.runs / "threshold", task_id="threshold")
    done.complete(20)
    done.finish()
    live = FakeRun(workspace.runs / "smooth", task_id="smooth")
    live.complete(3)
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.runs_proxy.rowCount() == 2, timeout=WAIT)
    rows = _tree_texts(pane)
    assert rows[0][:3] == ["smooth", "running", "3 / 20 done"]
    assert rows[1][:3] == ["threshold", "finished", "20 / 20 done"]
    first = pane.runs_proxy.index(1, 0)
    assert pane.runs_proxy.rowCount(first) == 1  # one past run under the finished task


def test_finished_run_shows_block_and_worker_tables_and_copyable_text(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "threshold", task_id="threshold", workers=3, noise=0.002)
    run.complete(18, fail=2)
    run.finish("failed")
    pane = make_pane()
    pane.select(_key(workspace, "threshold"))
    qtbot.waitUntil(lambda: pane.worker_model.rowCount() == 3, timeout=WAIT)
    labels = [pane.block_model.rows[r].cells[0] for r in range(pane.block_model.rowCount())]
    assert labels == ["round trip", "wall", "CPU", "peak RSS", "IO read", "IO write", "queued",
                      "overhead"]
    assert not pane.block_note.isVisibleTo(pane)
    assert [pane.worker_model.rows[r].cells[0] for r in range(3)] == ["0", "1", "2"]
    assert "failed" in pane.heading.text() and "2 failed" in pane.heading.text()
    text = pane.text.toPlainText()
    assert text.lstrip().startswith("threshold") and "per block" in text
    assert pane.text.isReadOnly()
    pane.text.selectAll()
    assert pane.text.textCursor().selectedText().replace("\u2029", "\n") == text


def test_live_charts_grow_while_a_run_progresses(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "smooth", grid_shape=(20, 20), workers=3, slowing_ms=0.1)
    run.complete(10)
    pane = make_pane()
    pane.select(_key(workspace, "smooth"))
    qtbot.waitUntil(lambda: pane.charts.point_counts()["wall"] == 10, timeout=WAIT)
    counts = pane.charts.point_counts()
    assert set(counts["compute"]) == {0, 1, 2} and counts["trend"] == 2
    curves_before = (pane.charts.wall_curve, dict(pane.charts.compute_curves))
    assert pane.tabs.currentIndex() == 0  # a running task opens on its live charts
    run.complete(25)
    qtbot.waitUntil(lambda: pane.charts.point_counts()["wall"] == 35, timeout=WAIT)
    run.complete(40)
    qtbot.waitUntil(lambda: pane.charts.point_counts()["wall"] == 75, timeout=WAIT)
    assert pane.charts.point_counts()["compute"][0] >= 2
    assert (pane.charts.wall_curve, pane.charts.compute_curves) == curves_before  # created once
    assert "+0.1000 ms/block" in pane.charts.wall_plot.titleLabel.text
    assert "75 of 400 blocks done" in pane.heading.text()
    assert [pane.worker_model.rows[r].cells[2] for r in range(3)] == ["busy"] * 3


def test_drill_down_from_worker_to_blocks_to_store_record(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "d", grid_shape=(3, 4))
    run.complete(12)
    run.finish()
    pane = make_pane()
    pane.select(_key(workspace, "d"))
    qtbot.waitUntil(lambda: pane.worker_model.rowCount() == 2, timeout=WAIT)
    pane.worker_view.doubleClicked.emit(pane.worker_model.index(1, 0))
    assert pane.tabs.currentIndex() == 2
    qtbot.waitUntil(lambda: pane.worker_blocks_model.rowCount() == 6, timeout=WAIT)
    assert [pane.worker_blocks_model.key_at(r) for r in range(6)] == [1, 3, 5, 7, 9, 11]
    pane.worker_blocks_view.selectRow(2)
    qtbot.waitUntil(lambda: "grid position" in pane.block_detail.toPlainText(), timeout=WAIT)
    detail = pane.block_detail.toPlainText()
    assert "(1, 1)" in detail and "worker" in detail and "peak RSS" in detail
    assert pane.block_detail.isReadOnly()


def test_torn_runs_jsonl_shows_a_sentence_not_a_traceback(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "torn")
    run.complete(4)
    run.finish()
    with open(workspace.runs / "torn" / "runs.jsonl", "a") as f:
        f.write('{"task_id": "torn", "blocks": {"cou')
    pane = make_pane()
    pane.select(_key(workspace, "torn"))
    qtbot.waitUntil(lambda: pane.problems.isVisibleTo(pane), timeout=WAIT)
    message = pane.problems.text()
    assert "incomplete" in message and "Traceback" not in message
    assert pane.worker_model.rowCount() == 2  # the run before the torn line is still shown


def test_unmeasured_run_says_so_instead_of_a_table_of_zeros(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "plain", tracked=False)
    run.complete(6)
    run.finish()
    pane = make_pane()
    pane.select(_key(workspace, "plain"))
    qtbot.waitUntil(lambda: pane.block_note.text() == NOT_MEASURED, timeout=WAIT)
    assert pane.block_note.isVisibleTo(pane)
    labels = [pane.block_model.rows[r].cells[0] for r in range(pane.block_model.rowCount())]
    assert labels == ["round trip", "queued"]  # both measured without resource tracking


def test_serial_unmeasured_run_shows_no_tables_at_all(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "serial", tracked=False, workers=0)
    run.workers = 0
    run.finish()
    pane = make_pane()
    pane.select(_key(workspace, "serial"))
    qtbot.waitUntil(lambda: "nothing was timed" in pane.block_note.text(), timeout=WAIT)
    assert not pane.block_view.isVisibleTo(pane)
    assert not pane.worker_view.isVisibleTo(pane)
    assert "serial" in pane.worker_note.text()


def test_a_run_that_ends_is_announced(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "smooth")
    run.complete(5)
    pane = make_pane()
    qtbot.waitUntil(lambda: bool(_tree_texts(pane)) and _tree_texts(pane)[0][1] == "running", timeout=WAIT)
    with qtbot.waitSignal(pane.notify, timeout=WAIT) as signal:
        run.complete(15)
        run.finish()
    assert signal.args[0] == "Blockwise task smooth finished (20 of 20 blocks done)"


def test_open_by_path_and_a_wrong_path_is_one_sentence(workspace, make_pane, qtbot, tmp_path):
    run = FakeRun(tmp_path / "elsewhere", task_id="outside")
    run.complete(2)
    run.finish()
    pane = make_pane()
    pane.open_store(tmp_path / "elsewhere" / "runs.jsonl")
    pane.open_store(tmp_path / "missing")
    qtbot.waitUntil(lambda: pane.runs_proxy.rowCount() == 1 and pane.open_problems.isVisibleTo(pane),
                    timeout=WAIT)
    assert _tree_texts(pane)[0][0] == "outside"
    assert "does not exist" in pane.open_problems.text()


def test_choosing_a_past_run_in_the_tree_shows_that_run(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "t", workers=2)
    run.complete(4)
    run.finish()
    rerun = FakeRun(workspace.runs / "t", workers=3, run_id="run-2")
    rerun.complete(4)
    rerun.finish()
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.runs_proxy.rowCount() == 1, timeout=WAIT)
    parent = pane.runs_proxy.index(0, 0)
    qtbot.waitUntil(lambda: pane.runs_proxy.rowCount(parent) == 2, timeout=WAIT)
    oldest = pane.runs_proxy.index(1, 0, parent)  # newest run is listed first
    assert oldest.data() == "run 1"
    pane.runs_view.setCurrentIndex(oldest)
    qtbot.waitUntil(lambda: "run 1" in pane.heading.text() and pane.worker_model.rowCount() == 2,
                    timeout=WAIT)


def test_shutdown_stops_the_poller(workspace, make_pane, qtbot):
    pane = make_pane()
    qtbot.waitUntil(pane.poller.is_running, timeout=WAIT)
    assert pane.shutdown()
    assert not pane.poller.is_running()


def test_pane_follows_a_real_blockwise_run(workspace, make_pane, qtbot, monkeypatch):
    """The engine's own files (store, progress.json, runs.jsonl), watched while it runs."""
    import functools
    import threading

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "blockwise"))
    import bw_funcs  # workers import it by name: they get this test's sys.path
    from spacrq.blockwise import Roi, Task, run_blockwise

    task = Task("real", Roi((0,), (300,)), Roi((0,), (10,)), Roi((0,), (10,)),
                functools.partial(bw_funcs.slowing, 0.008), num_workers=2,
                tracking_path=workspace.runs / "real", resource_tracking=True)
    pane = make_pane()
    pane.select(_key(workspace, "real"))
    states = set()
    pane.poller.snapshot.connect(lambda snap: states.update(r.value.state for r in snap.runs))
    result = {}
    runner = threading.Thread(target=lambda: result.setdefault("run", run_blockwise([task])))
    runner.start()
    try:
        qtbot.waitUntil(lambda: not runner.is_alive(), timeout=60_000)
    finally:
        runner.join(60)
    assert result["run"].succeeded
    qtbot.waitUntil(lambda: pane.worker_model.rowCount() == 2 and "finished" in pane.heading.text(),
                    timeout=WAIT)
    assert "running" in states  # the pane saw it while it ran
    labels = [pane.block_model.rows[r].cells[0] for r in range(pane.block_model.rowCount())]
    assert {"round trip", "wall", "CPU", "peak RSS"} <= set(labels)
    assert "30 of 30 blocks done" in pane.heading.text()
    qtbot.waitUntil(lambda: pane.charts.point_counts()["wall"] == 30, timeout=WAIT)
    pane.show_worker(0)
    qtbot.waitUntil(lambda: pane.worker_blocks_model.rowCount() > 0, timeout=WAIT)
    assert pane.text.toPlainText().lstrip().startswith("real")


def test_a_removed_store_is_said_to_be_gone(workspace, make_pane, qtbot):
    import shutil
    run = FakeRun(workspace.runs / "t")
    run.complete(3)
    run.finish()
    pane = make_pane()
    pane.select(_key(workspace, "t"))
    qtbot.waitUntil(lambda: pane.worker_model.rowCount() == 2, timeout=WAIT)
    shutil.rmtree(workspace.runs / "t")
    qtbot.waitUntil(lambda: "no longer there" in pane.heading.text(), timeout=WAIT)
    assert pane.worker_model.rowCount() == 0 and pane.runs_proxy.rowCount() == 0
    assert pane.text.toPlainText() == ""


def test_a_live_dask_run_names_its_cluster_in_the_heading(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "far", grid_shape=(4, 4), workers=2)
    run.ran_on = {"executor": "dask", "cluster": "dask scheduler tcp://head:8786"}
    run.complete(5)
    pane = make_pane()
    pane.select(_key(workspace, "far"))
    qtbot.waitUntil(lambda: "on dask scheduler tcp://head:8786" in pane.heading.text(),
                    timeout=WAIT)
    assert "5 of 16 blocks done" in pane.heading.text()
