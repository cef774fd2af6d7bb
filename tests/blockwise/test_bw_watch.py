"""The Run Report pane's poller body, without Qt: incremental reads, bounded series, trends."""
from __future__ import annotations

import json
import re
import time

import numpy as np
import pytest

from fake_run import FakeRun, look
from spacrq.blockwise.pane import NOT_MEASURED, StoreLine, worker_blocks_table
from spacrq.blockwise.report_store import worker_block_columns
from spacrq.blockwise.watch import ReportWatcher
from spacrq.blockwise.watch_live import LiveRun
from spacrq.blockwise.watch_series import PeakSeries, Trend
from spacrq.blockwise.watch_source import RunSource, resolve_source
from spacrq.runfiles import RunFileError
from spacrq.watching import Code


def cells(table):
    return [list(r.cells) for r in table.rows]




# -- bounded series -------------------------------------------------------------

def test_series_below_capacity_keeps_every_point():
    s = PeakSeries(capacity=64)
    s.extend(np.arange(10), np.arange(10) * 2.0)
    x, y = s.arrays()
    assert list(x) == list(range(10))
    assert list(y) == [2.0 * i for i in range(10)]


def test_series_of_a_million_points_stays_bounded_and_keeps_its_peaks():
    s = PeakSeries(capacity=256)
    x = np.arange(1_000_000, dtype=float)
    y = np.sin(x / 5000.0)
    y[654_321] = 50.0   # one slow block in a ten-hour night
    y[123_456] = -50.0
    for i in range(0, len(x), 1777):  # bursts, as polls deliver them
        s.extend(x[i:i + 1777], y[i:i + 1777])
    ax, ay = s.arrays()
    assert len(s) == 1_000_000
    assert len(ax) <= 2 * 256 + 2
    assert np.all(np.diff(ax) >= 0)
    assert ay.max() == 50.0 and ax[ay.argmax()] == 654_321
    assert ay.min() == -50.0 and ax[ay.argmin()] == 123_456
    assert ax[0] == 0 and ax[-1] == 999_999


def test_series_fed_one_point_at_a_time_matches_bursts():
    one, burst = PeakSeries(capacity=16), PeakSeries(capacity=16)
    x = np.arange(1000, dtype=float)
    y = (x * 7919) % 101
    for xi, yi in zip(x, y):
        one.append(xi, yi)
    burst.extend(x, y)
    assert one.stride == burst.stride
    assert len(one.arrays()[0]) <= 2 * 16 + 2
    assert one.arrays()[1].max() == burst.arrays()[1].max() == y.max()


def test_series_drops_unmeasured_points():
    s = PeakSeries(capacity=8)
    s.extend([1, 2, 3], [1.0, np.nan, 3.0])
    assert list(s.arrays()[0]) == [1.0, 3.0]


def test_trend_sign_follows_the_workload_and_matches_a_fit():
    x = np.arange(1, 100_001, dtype=float)
    slowing, speeding = Trend(), Trend()
    for i in range(0, len(x), 999):
        slowing.extend(x[i:i + 999], 0.010 + 1e-7 * x[i:i + 999])
        speeding.extend(x[i:i + 999], 0.050 - 1e-7 * x[i:i + 999])
    assert slowing.slope > 0 > speeding.slope
    assert slowing.slope == pytest.approx(np.polyfit(x, 0.010 + 1e-7 * x, 1)[0], rel=1e-6)
    lx, ly = slowing.line()
    assert list(lx) == [1.0, 100_000.0] and ly[1] > ly[0]


# -- live progress ------------------------------------------------------------

def test_live_run_reads_each_completion_once_and_counts_what_it_missed(tmp_path):
    run = FakeRun(tmp_path / "s", store=False)
    live = LiveRun(capacity=64)
    run.complete(10)
    assert live.ingest(json.loads((tmp_path / "s" / "progress.json").read_text()))
    run.complete(5)
    doc = json.loads((tmp_path / "s" / "progress.json").read_text())
    assert live.ingest(doc)
    assert not live.ingest(doc)  # the same snapshot again holds nothing new
    assert len(live.wall) == 15 and live.missed == 0
    doc["recent"] = doc["recent"][-3:]  # the engine only keeps the last blocks
    doc["seq"] = 25
    doc["recent"] = [[23, 0.01, 1, 0], [24, 0.01, 1, 1], [25, 0.01, 1, 0]]
    doc["written_at"] += 1
    live.ingest(doc)
    assert live.last_seq == 25 and live.missed == 7 and len(live.wall) == 18
    snap = live.snapshot()
    assert set(snap["idle"]) == {0, 1} and len(snap["wall"][0]) == 18


def test_each_worker_keeps_one_series_look_after_look(tmp_path):
    run = FakeRun(tmp_path / "s", store=False)
    live = LiveRun(capacity=64)
    run.complete(10)
    live.ingest(json.loads((tmp_path / "s" / "progress.json").read_text()))
    series = dict(live.idle)
    run.complete(10)
    live.ingest(json.loads((tmp_path / "s" / "progress.json").read_text()))
    assert series and all(live.idle[wid] is s for wid, s in series.items())
    assert all(len(s) == 2 for s in live.idle.values())  # one point per look, both kept


def test_a_new_run_starts_the_charts_afresh(tmp_path):
    live = LiveRun(capacity=64)
    run = FakeRun(tmp_path / "s", store=False)
    run.complete(10)
    live.ingest(json.loads((tmp_path / "s" / "progress.json").read_text()))
    rerun = FakeRun(tmp_path / "s", store=False, run_id="run-2")
    rerun.complete(3)
    live.ingest(json.loads((tmp_path / "s" / "progress.json").read_text()))
    assert live.run_id == "run-2" and len(live.wall) == 3


def test_a_slowing_live_run_shows_a_positive_trend(tmp_path):
    run = FakeRun(tmp_path / "s", store=False, slowing_ms=0.5)
    live = LiveRun()
    for _ in range(5):
        run.complete(40)
        live.ingest(json.loads((tmp_path / "s" / "progress.json").read_text()))
    assert live.snapshot()["trend_slope_ms"] == pytest.approx(0.5, rel=1e-6)


# -- stores, runs.jsonl and the watcher ---------------------------------------

def test_watcher_lists_stores_and_shows_a_finished_runs_tables(workspace):
    run = FakeRun(workspace.runs / "smooth")
    run.complete(18, fail=2)
    run.finish("failed")
    watcher = ReportWatcher(workspace.runs)
    key = str((workspace.runs / "smooth").resolve())
    snap = look(watcher, key)
    [row] = snap.runs
    line: StoreLine = row.value
    assert (line.task_id, line.state, line.done, line.failed, line.total) == \
        ("smooth", "failed", 16, 2, 20)
    assert row.cells[:3] == ("smooth", "failed", "16 / 20 done, 2 failed")
    assert len(line.runs) == 1 and "6 failed attempts" in line.runs[0].cells[2]
    detail = snap.detail
    labels = [r.cells[0] for r in detail.blocks.rows]
    assert labels[:3] == ["round trip", "wall", "CPU"] and "peak RSS" in labels
    assert detail.blocks.note == ""
    assert [r.key for r in detail.workers.rows] == [0, 1]
    assert detail.text.lstrip().startswith("smooth")
    assert watcher.poll({}) is None  # nothing changed: nothing to redraw


def test_runs_jsonl_is_read_incrementally(workspace):
    run = FakeRun(workspace.runs / "t")
    run.complete(5)
    run.finish()
    src = RunSource((workspace.runs / "t").resolve(), (workspace.runs / "t" / "runs.jsonl").resolve())
    src.refresh()
    first_offset = src.tail._tail.offset
    assert len(src.runs) == 1 and first_offset > 0
    src.refresh()
    assert len(src.runs) == 1 and src.tail._tail.offset == first_offset
    run.finish()
    src.refresh()
    assert len(src.runs) == 2 and src.tail._tail.offset > first_offset


def test_a_finished_stores_arrays_are_read_once_until_something_changes(workspace, monkeypatch):
    from spacrq.blockwise import watch_source

    reads = []
    real = watch_source.durable_counts
    monkeypatch.setattr(watch_source, "durable_counts", lambda d: reads.append(d) or real(d))
    run = FakeRun(workspace.runs / "t")
    run.complete(5)
    run.finish()
    src = RunSource((workspace.runs / "t").resolve(), (workspace.runs / "t" / "runs.jsonl").resolve())
    for _ in range(3):
        src.refresh()
    assert len(reads) == 1 and src.row().value.done == 5
    run.finish()  # another run's report line: the counts are read again, once
    for _ in range(3):
        src.refresh()
    assert len(reads) == 2


def test_unmeasured_run_shows_no_table_of_zeros(workspace):
    run = FakeRun(workspace.runs / "plain", tracked=False)
    run.complete(6)
    run.finish()
    watcher = ReportWatcher(workspace.runs)
    detail = look(watcher, str((workspace.runs / "plain").resolve())).detail
    # the scheduler's round trip and the worker's queue wait need no resource tracking
    assert [r.cells[0] for r in detail.blocks.rows] == ["round trip", "queued"]
    assert detail.blocks.note == NOT_MEASURED
    assert detail.blocks.rows[0].cells[2] == "12.0 ms"  # the measured round trip, not a zero


def test_torn_last_line_is_a_sentence_and_earlier_runs_still_show(workspace):
    run = FakeRun(workspace.runs / "torn")
    run.complete(4)
    run.finish()
    with open(workspace.runs / "torn" / "runs.jsonl", "a") as f:
        f.write('{"task_id": "torn", "blocks": {"cou')
    watcher = ReportWatcher(workspace.runs)
    snap = look(watcher, str((workspace.runs / "torn").resolve()))
    [row] = snap.runs
    assert len(row.value.runs) == 1
    assert any("incomplete" in p and "runs.jsonl" in p for p in snap.detail.problems)
    assert snap.detail.workers.rows


def test_garbage_store_is_a_sentence_not_a_traceback(workspace):
    d = workspace.runs / "broken"
    d.mkdir()
    (d / "zarr.json").write_text("{ not json")
    snap = look(ReportWatcher(workspace.runs), str(d.resolve()))
    [row] = snap.runs
    assert row.value.problems and "delete it" in row.value.problems[0]
    assert "Traceback" not in row.value.problems[0]


def test_running_store_whose_writer_died_reads_as_interrupted(workspace):
    run = FakeRun(workspace.runs / "dead", store=False)
    run.complete(3)
    doc = json.loads((workspace.runs / "dead" / "progress.json").read_text())
    doc["pid"], doc["written_at"] = 999_999_999, time.time() - 60
    (workspace.runs / "dead" / "progress.json").write_text(json.dumps(doc))
    [row] = ReportWatcher(workspace.runs).poll({}).runs
    assert row.value.state == "interrupted"


def test_live_run_detail_has_charts_and_live_worker_rows(workspace):
    run = FakeRun(workspace.runs / "live")
    run.complete(7)
    watcher = ReportWatcher(workspace.runs)
    key = str((workspace.runs / "live").resolve())
    detail = look(watcher, key).detail
    assert detail.live and detail.state == "running"
    assert len(detail.charts["wall"][0]) == 7
    assert [r.cells[2] for r in detail.workers.rows] == ["busy", "busy"]
    run.complete(5)
    detail = watcher.poll({}).detail
    assert len(detail.charts["wall"][0]) == 12 and detail.counts["done"] == 12


def test_drill_down_from_worker_to_blocks_and_block_to_record(workspace):
    run = FakeRun(workspace.runs / "d", grid_shape=(3, 4))
    run.complete(12)
    run.finish()
    store = (workspace.runs / "d").resolve()
    listing = worker_blocks_table(1, worker_block_columns(store, 1, 5000), 5000)
    assert [r.key for r in listing.rows] == [1, 3, 5, 7, 9, 11]
    assert listing.rows[0].cells[1] == "(0, 1)"
    limited = worker_blocks_table(0, worker_block_columns(store, 0, 2), 2)
    assert [r.key for r in limited.rows] == [8, 10] and "last 2 of 6" in limited.note
    watcher = ReportWatcher(workspace.runs)
    snap = look(watcher, str(store), worker=1, block=5)
    assert all(o.code is Code.DONE for o in snap.outcomes)
    assert [r.key for r in snap.drill.blocks.rows] == [1, 3, 5, 7, 9, 11]
    fields = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in snap.drill.record.splitlines()[:13])
    assert fields["grid position"] == "(1, 1)" and fields["worker"] == "1" and fields["done"] == "yes"
    assert fields["wall"].endswith("ms")
    watcher.submit(9, "block", block_id=99)
    bad = watcher.poll({})
    [answer] = bad.outcomes
    assert answer.token == 9 and answer.code is Code.INVALID and "outside" in bad.drill.note


def test_opening_paths(workspace, tmp_path):
    run = FakeRun(tmp_path / "elsewhere")
    run.complete(2)
    run.finish()
    assert resolve_source(tmp_path / "elsewhere")[0] == (tmp_path / "elsewhere").resolve()
    assert resolve_source(tmp_path / "elsewhere" / "runs.jsonl")[0] == (tmp_path / "elsewhere").resolve()
    with pytest.raises(RunFileError, match="does not exist"):
        resolve_source(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunFileError, match="not a tracking store"):
        resolve_source(tmp_path / "empty")
    watcher = ReportWatcher(workspace.runs)
    snap = look(watcher, opened=[tmp_path / "elsewhere" / "runs.jsonl", tmp_path / "nope", tmp_path / "empty"])
    assert [r.value.task_id for r in snap.runs] == ["smooth"]
    assert [o.code for o in snap.outcomes] == [Code.DONE, Code.MISSING, Code.INVALID]
    assert "does not exist" in snap.outcomes[1].message


def test_a_store_appearing_is_found_at_the_next_look(workspace):
    watcher = ReportWatcher(workspace.runs, discover_every=3600)
    assert watcher.poll({}).runs == ()
    (workspace.runs / "fresh").mkdir()  # the engine makes the folder first ...
    assert watcher.poll({}) is None
    FakeRun(workspace.runs / "fresh").complete(1)  # ... then its files
    [row] = watcher.poll({}).runs
    assert row.value.state == "running"
