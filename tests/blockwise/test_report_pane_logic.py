"""The Run Report's pane logic (blockwise/pane.py) and its watch's protocol, without Qt."""
from __future__ import annotations

import threading
import time

import numpy as np
from fake_run import FakeRun, heavy_poll, look
from waiting import wait_until

from spacrq.blockwise import pane
from spacrq.blockwise.report import TaskReport
from spacrq.blockwise.watch import ReportWatcher
from spacrq.blockwise.watch_charts import store_charts
from spacrq.watching import Code


def _key(workspace, name):
    return str((workspace.runs / name).resolve())


# -- controls: where the Run Report decides what can be done -----------------------------

def test_nothing_to_drill_into_before_a_run_is_chosen():
    c = pane.controls(None)
    assert c.open_store.enabled
    assert not c.worker_blocks.enabled and not c.block_record.enabled
    assert "choose a run" in c.worker_blocks.tip


def test_a_run_without_a_store_says_why_its_blocks_cannot_be_listed():
    c = pane.controls(False, workers_listed=True)
    assert not c.worker_blocks.enabled and "no tracking store" in c.worker_blocks.tip
    assert c.worker_blocks.tip[0].isupper()


def test_a_stored_run_lists_its_workers_blocks_then_one_blocks_record():
    assert pane.controls(True, workers_listed=True).worker_blocks.enabled
    assert not pane.controls(True, workers_listed=False).worker_blocks.enabled  # a serial run
    listed = pane.controls(True, workers_listed=True, blocks_listed=True)
    assert listed.block_record.enabled and "record" in listed.block_record.tip
    assert not pane.controls(True, workers_listed=True).block_record.enabled


def test_the_snapshot_carries_the_controls_of_the_run_shown(workspace):
    FakeRun(workspace.runs / "d", grid_shape=(2, 2)).finish()
    plain = FakeRun(workspace.runs / "plain", store=False)
    plain.finish()
    watcher = ReportWatcher(workspace.runs)
    assert look(watcher, _key(workspace, "d")).controls.worker_blocks.enabled
    assert not look(watcher, _key(workspace, "plain")).controls.worker_blocks.enabled


# -- rows and captions ------------------------------------------------------------------------

def test_runs_are_listed_running_first_then_newest():
    lines = [pane.store_line("a", "a", "finished", 100.0, {"done": 1, "total": 1}, ()),
             pane.store_line("b", "b", "running", 50.0, {"done": 1, "total": 4}, ()),
             pane.store_line("c", "c", "finished", 200.0, None, ())]
    assert [r.key for r in pane.rows("runs", lines)] == ["b", "c", "a"]
    assert pane.rows("runs", lines)[0].cells[2] == "1 / 4 done"
    assert pane.rows("runs", lines)[1].cells[2] == "—"  # no counts is not zero blocks


def test_a_past_run_row_says_what_it_took_and_what_failed():
    report = TaskReport.from_dict({"task_id": "t", "started_at": 10.0, "finished_at": 85.0,
                                   "blocks": {"count": 9, "skipped": 2, "failures": 3},
                                   "workers": {"count": 0}})
    [run] = pane.store_line("k", "t", "failed", 10.0, None, [report]).value.runs
    assert run.key == ("k", 0)
    assert run.cells[:3] == ("run 1", "took 1m 15s", "9 blocks (2 skipped), 3 failed attempts")


def test_an_unmeasured_run_has_no_table_of_zeros():
    report = TaskReport.from_dict({"task_id": "t", "started_at": 1.0, "finished_at": 2.0,
                                   "blocks": {"count": 4}, "workers": {"count": 0}})
    table = pane.block_table(report)
    assert table.rows == () and "nothing was timed" in table.note
    assert pane.rows("blocks", report) == ()
    assert "serial" in pane.worker_table(report).note


def test_the_heading_escapes_what_came_from_files():
    text = pane.heading("<b>x</b>", "running", {"done": 3, "total": 10, "in_flight": 2},
                        live=True, cluster="tcp://a&b")
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "3 of 10 blocks done" in text
    assert "2 in flight" in text and "on tcp://a&amp;b" in text


def test_an_ending_is_announced_once_and_only_for_a_run_seen_running():
    ended = pane.store_line("k", "smooth", "failed", 1.0, {"done": 8, "total": 10, "failed": 2}, ()).value
    assert pane.ending_message("running", ended) == \
        "Blockwise task smooth failed (8 of 10 blocks done, 2 failed)"
    assert pane.ending_message(None, ended) == ""       # first seen already ended
    assert pane.ending_message("failed", ended) == ""   # said already


def test_a_workers_block_list_beyond_the_limit_says_how_many_are_left_out():
    cols = {"ids": np.array([5, 7]), "coords": np.array([[1, 1], [1, 3]]), "total": 9,
            "wall_seconds": np.array([0.01, 0.02]), "peak_rss_bytes": np.array([-1, 2048]),
            "failures": np.array([0, 1])}
    table = pane.worker_blocks_table(3, cols, 2)
    assert [r.key for r in table.rows] == [5, 7] and "last 2 of 9" in table.note
    assert table.rows[0].cells[4] == "—" and table.rows[1].cells[4] == "2.0 KiB"
    assert table.rows[0].cells[5] == "—"  # the store held no return times
    assert "does not record which worker" in pane.worker_blocks_table(3, None, 2).note


# -- the watch's protocol -------------------------------------------------------------------

def test_every_action_is_answered_with_a_code(workspace, tmp_path):
    FakeRun(workspace.runs / "d", grid_shape=(3, 4)).finish()
    plain = FakeRun(workspace.runs / "plain", store=False)
    plain.finish()
    (tmp_path / "empty").mkdir()
    watcher = ReportWatcher(workspace.runs)
    watcher.submit(1, "open", path=tmp_path / "nope")
    watcher.submit(2, "open", path=tmp_path / "empty")
    watcher.submit(3, "select", key=str(tmp_path / "gone"))
    watcher.submit(4, "rewind")
    snap = watcher.poll({})
    assert [(o.token, o.code) for o in snap.outcomes] == [
        (1, Code.MISSING), (2, Code.INVALID), (3, Code.MISSING), (4, Code.INVALID)]
    assert snap.detail is None
    watcher.submit(5, "select", key=_key(workspace, "plain"))
    watcher.submit(6, "worker", worker_id=0)
    snap = watcher.poll({})
    assert [(o.token, o.code) for o in snap.outcomes] == [(5, Code.DONE), (6, Code.MISSING)]
    assert "no tracking store" in snap.outcomes[1].message
    snap = look(watcher, _key(workspace, "d"), worker=1, block=11, token=7)
    assert [o.code for o in snap.outcomes] == [Code.DONE] * 3
    assert (snap.selected, snap.drill.worker, snap.drill.block) == (_key(workspace, "d"), 1, 11)
    watcher.submit(10, "block", block_id=12)  # one past the last of 12
    [outside] = watcher.poll({}).outcomes
    assert outside.code is Code.INVALID and "outside" in outside.message
    watcher.submit(11, "worker", worker_id="first")
    [wrong] = watcher.poll({}).outcomes
    assert (wrong.token, wrong.code) == (11, Code.INVALID)


def test_close_returns_within_its_timeout_in_the_middle_of_aheavy_poll(workspace, monkeypatch):
    started = heavy_poll(workspace, monkeypatch)
    watcher = ReportWatcher(workspace.runs)
    result = []
    poll = threading.Thread(target=lambda: result.append(watcher.poll({})))
    poll.start()
    try:
        wait_until(started.is_set, 10, "the poll to start")
        t0 = time.monotonic()
        assert watcher.close(1.0)
        assert time.monotonic() - t0 < 1.0
    finally:
        poll.join(10)
    assert result == [None]  # a poll cut short hands nothing half-read to the window
    assert watcher.poll({}) is None  # and a closed watch polls no more


def test_building_a_finished_runs_charts_stops_when_asked():
    n = 200_000
    arrays = {"returned_at": np.arange(n, dtype=float), "wall_seconds": np.ones(n),
              "worker_id": np.zeros(n, np.int32)}
    assert store_charts(None, None, None, arrays=arrays, interrupted=lambda: True) is None
    assert store_charts(None, None, None, arrays=arrays)["blocks"] == n
