"""Reports read back from disk: runs.jsonl (torn, garbage) and tracking stores (summary, drill-down)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import zarr
from fake_run import create_tracking_arrays

from spacrq.blockwise import report as rp
from spacrq.blockwise.run_state import scheduler_record
from spacrq.runfiles import write_progress

GRID = (3, 4)


def make_store(path, grid=GRID, *, task_id="smooth", tracking=True):
    """A tracking store laid out as docs/CONVENTIONS.md says, every array at its fill."""
    group = zarr.open_group(str(path), mode="w", attributes={
        "spacrq_tracking": 1, "task_id": task_id, "layout_hash": "x",
        "geometry": {"grid_shape": list(grid), "fit": "valid"}})
    create_tracking_arrays(group, grid, tracked=tracking)
    return group


def fill_blocks(group, coords, *, start, wall, worker=0, gap=0.001, done=True):
    """Record blocks as returned one after another from ``start``, with the given walls."""
    t = start
    for coord, w in zip(coords, wall):
        group["sent_at"][coord] = t
        group["returned_at"][coord] = t + w + gap
        group["wall_seconds"][coord] = w
        group["cpu_seconds"][coord] = w * 0.5
        group["peak_rss_bytes"][coord] = 1000
        group["io_read_bytes"][coord] = 10
        group["io_write_bytes"][coord] = 20
        group["worker_id"][coord] = worker
        group["done"][coord] = done
        t += w + gap


def run_line(task_id="smooth", started_at=100.0, finished_at=110.0, skipped=0, count=4, failures=0):
    w = rp.summarize_workers([rp.WorkerRecord(0, startup=0.2, blocks_ok=4, idle=rp.Stat.of([0.01] * 4),
                                              compute=rp.Stat.of([0.1] * 4), teardown=0.05,
                                              exit="clean")])
    b = rp.summarize_blocks(count=count, skipped=skipped, failures=failures, round_trip=[0.2] * 4)
    return rp.TaskReport(task_id, b, w, started_at, finished_at, tracked=True)


# -- runs.jsonl ----------------------------------------------------------------

def test_append_and_read_runs_in_order(tmp_path):
    path = rp.runs_file(tmp_path / "logs" / "smooth")
    assert path.name == "runs.jsonl"
    assert rp.read_runs(path) == [] and rp.read_last_run(path) is None
    rp.append_run(path, run_line(started_at=1.0))
    rp.append_run(path, run_line(started_at=2.0))
    runs = rp.read_runs(path)
    assert [r.started_at for r in runs] == [1.0, 2.0]
    assert rp.read_last_run(path) == run_line(started_at=2.0)
    assert path.read_text().count("\n") == 2


def test_torn_last_line_and_garbage_lines_are_tolerated(tmp_path):
    path = tmp_path / "runs.jsonl"
    rp.append_run(path, run_line(started_at=1.0))
    with open(path, "a") as f:
        f.write("not json at all\n[1, 2]\n{\"no_task_id\": 1}\n")
    rp.append_run(path, run_line(started_at=2.0))
    whole = json.dumps(run_line(started_at=3.0).to_dict())
    with open(path, "a") as f:
        f.write(whole[: len(whole) // 2])  # a crash mid-append
    tail = rp.RunsTail(path)
    runs = tail.read()
    assert [r.started_at for r in runs] == [1.0, 2.0]
    assert tail.bad_lines == 3
    assert rp.read_last_run(path).started_at == 2.0


def test_a_run_appended_after_a_torn_line_is_not_lost(tmp_path):
    path = tmp_path / "runs.jsonl"
    whole = json.dumps(run_line(started_at=1.0).to_dict())
    path.write_text(whole[:40])  # torn, no newline
    rp.append_run(path, run_line(started_at=2.0))  # lands on the same line
    tail = rp.RunsTail(path)
    assert [r.started_at for r in tail.read()] == [2.0]
    assert tail.bad_lines == 1


def test_runs_tail_reads_only_new_reports(tmp_path):
    path = tmp_path / "runs.jsonl"
    tail = rp.RunsTail(path)
    assert tail.read() == []
    rp.append_run(path, run_line(started_at=1.0))
    assert len(tail.read()) == 1
    assert tail.read() == []
    rp.append_run(path, run_line(started_at=2.0))
    assert [r.started_at for r in tail.read()] == [2.0]


def test_runs_tail_knows_when_the_file_ends_in_a_torn_line(tmp_path):
    path = tmp_path / "runs.jsonl"
    tail = rp.RunsTail(path)
    tail.read()
    assert not tail.torn  # no file yet
    rp.append_run(path, run_line(started_at=1.0))
    tail.read()
    assert not tail.torn
    whole = json.dumps(run_line(started_at=2.0).to_dict())
    with open(path, "a") as f:
        f.write(whole[:30])  # a crash mid-append
    assert tail.read() == [] and tail.torn
    with open(path, "a") as f:
        f.write(whole[30:] + "\n")  # the writer finished the line after all
    assert [r.started_at for r in tail.read()] == [2.0] and not tail.torn
    path.write_text(whole[:10])  # replaced by a file holding only a cut-off line
    assert tail.read() == [] and tail.torn


# -- report_from_store -----------------------------------------------------------

def test_report_from_store_rebuilds_the_block_summary(tmp_path):
    store = tmp_path / "runs" / "smooth"
    g = make_store(store)
    coords = [(0, 0), (0, 1), (2, 3), (1, 2)]
    walls = [0.1, 0.2, 0.3, 0.4]
    fill_blocks(g, coords, start=1000.0, wall=walls, gap=0.01)
    g["failures"][1, 2] = 2
    t = rp.report_from_store(store)
    b = t.blocks
    assert t.task_id == "smooth" and t.tracked and t.store == store
    assert (b.count, b.skipped, b.failures, b.has_stats) == (4, 0, 2, True)
    assert b.wall == rp.Stat.of(walls)
    assert b.cpu == rp.Stat.of(np.array(walls) * 0.5)
    assert b.round_trip.mean == pytest.approx(np.mean(walls) + 0.01)
    assert b.overhead.mean == pytest.approx(0.01) and b.overhead.min > 0
    assert b.peak_rss.mean == 1000 and b.io_write.total == 80
    # walls rise in completion order (not in spatial-id order): a positive trend
    assert b.trend_slope_ms == pytest.approx(100.0)
    # no report line yet: workers come from the store's worker ids
    assert t.workers.count == 1 and t.worker(0).blocks_ok == 4
    assert t.worker(0).compute == rp.Stat.of(walls)
    assert t.started_at == 1000.0 and t.elapsed == pytest.approx(sum(walls) + 0.04)


def test_report_from_store_counts_blocks_done_before_the_run_as_skipped(tmp_path):
    store = tmp_path / "smooth"
    g = make_store(store)
    fill_blocks(g, [(0, 0), (0, 1)], start=50.0, wall=[0.5, 0.5])      # an earlier run
    fill_blocks(g, [(1, 0), (1, 1), (1, 2)], start=105.0, wall=[0.1, 0.1, 0.1], worker=3)
    g["failures"][2, 2] = 1  # a block the run failed and then orphaned-out
    rp.append_run(rp.runs_file(store), run_line(started_at=100.0, finished_at=110.0, skipped=2,
                                                count=12, failures=1))
    t = rp.report_from_store(store)
    # the counts are the engine's own account of the run (all 12 blocks, 1 failed attempt) ...
    assert (t.blocks.count, t.blocks.skipped, t.blocks.failures) == (12, 2, 1)
    # ... the figures come from the store, over the blocks this run did
    os.remove(rp.runs_file(store))
    t2 = rp.report_from_store(store)  # without the line, everything from the store
    assert (t2.blocks.count, t2.blocks.skipped, t2.blocks.failures) == (6, 0, 1)
    rp.append_run(rp.runs_file(store), run_line(started_at=100.0, finished_at=110.0, skipped=2,
                                                count=12, failures=1))
    t = rp.report_from_store(store)
    assert t.blocks.wall.n == 3 and t.blocks.wall.mean == pytest.approx(0.1)
    # the last report line is this run's: its worker lifecycle is used
    assert t.workers.exits == {"clean": 1} and t.worker(0).startup == 0.2
    assert (t.started_at, t.finished_at) == (100.0, 110.0)


def test_report_from_store_of_a_newer_run_in_progress(tmp_path):
    store = tmp_path / "smooth"
    g = make_store(store)
    fill_blocks(g, [(0, 0)], start=101.0, wall=[0.3])
    rp.append_run(rp.runs_file(store), run_line(started_at=100.0, finished_at=110.0))
    write_progress(store / "progress.json", {"state": "running", "started_at": 200.0, "run_id": "r2",
                                             "scheduler": scheduler_record(),  # this process: alive
                                             "task": {"total": 12, "done": 3, "skipped": 1,
                                                      "failed": 0, "orphaned": 0}})
    fill_blocks(g, [(2, 0), (2, 1)], start=201.0, wall=[0.2, 0.2], worker=5)
    t = rp.report_from_store(store)
    assert (t.blocks.count, t.blocks.skipped) == (3, 1)
    assert t.blocks.wall.n == 2
    assert list(t.workers.by_id) == [5] and t.worker(5).exit is None
    assert t.started_at == 200.0
    assert t.outcome["state"] == "running" and t.headline().endswith(" — running: 4 of 12 done")


def test_report_from_store_without_resource_tracking(tmp_path):
    store = tmp_path / "plain"
    g = make_store(store, tracking=False)
    g["done"][0, :] = True
    g["failures"][2, 2] = 3
    t = rp.report_from_store(store)
    assert (t.blocks.count, t.blocks.failures, t.blocks.has_stats) == (5, 3, False)
    assert not t.timed and rp.RunReport({"plain": t}).render() == ""
    rp.append_run(rp.runs_file(store), run_line("plain"))
    t = rp.report_from_store(store)  # the report line is the better account
    assert t.blocks.round_trip.n == 4 and t.workers.count == 1 and t.store == store


def test_report_from_store_refuses_what_is_not_a_store(tmp_path):
    with pytest.raises(rp.ReportError, match="is not a spacrq tracking store"):
        rp.report_from_store(tmp_path)
    store = tmp_path / "broken"
    make_store(store)
    (store / "done" / "zarr.json").write_text("{garbage")
    with pytest.raises(rp.ReportError, match="delete it to start the task afresh|delete the store"):
        rp.report_from_store(store)


# -- drill-down ----------------------------------------------------------------------

def test_block_by_coordinate_and_by_spatial_id(tmp_path):
    store = tmp_path / "smooth"
    g = make_store(store)
    fill_blocks(g, [(1, 2)], start=500.0, wall=[0.25], worker=7, gap=0.05)
    rec = rp.block(store, (1, 2))
    assert rec == rp.block(store, 1 * GRID[1] + 2)
    assert rec.block_id == ("smooth", 6) and rec.coord == (1, 2) and rec.spatial_id == 6
    assert rec.done and rec.worker_id == 7 and rec.wall_seconds == 0.25
    assert rec.peak_rss_bytes == 1000 and rec.stats.io_write_bytes == 20
    assert rec.round_trip == pytest.approx(0.30)
    blank = rp.block(store, 0)
    assert (blank.done, blank.stats, blank.worker_id, blank.sent_at, blank.round_trip) == (
        False, None, None, None, None)
    assert json.loads(json.dumps(rec.to_dict()))["coord"] == [1, 2]


def test_block_outside_the_grid_is_one_sentence(tmp_path):
    store = tmp_path / "smooth"
    make_store(store)
    with pytest.raises(rp.ReportError, match="outside the task's 12 blocks"):
        rp.block(store, 12)
    with pytest.raises(rp.ReportError, match="outside the block grid"):
        rp.block(store, (0, 9))
    with pytest.raises(rp.ReportError, match="give 2 coordinates"):
        rp.block(store, (1,))
    with pytest.raises(rp.ReportError, match="neither a grid coordinate nor a spatial id"):
        rp.block(store, "abc")


def test_block_records_and_worker_drill_down(tmp_path):
    store = tmp_path / "smooth"
    g = make_store(store)
    fill_blocks(g, [(2, 3), (0, 1)], start=10.0, wall=[0.1, 0.1], worker=1)
    fill_blocks(g, [(1, 1)], start=20.0, wall=[0.1], worker=2)
    g["failures"][0, 0] = 1
    recs = rp.block_records(store)
    assert [r.spatial_id for r in recs] == [0, 1, 5, 11]
    assert recs[0].failures == 1 and not recs[0].done
    assert [r.coord for r in rp.block_records(store, worker=1)] == [(0, 1), (2, 3)]
    # drill-down through a report read back from the store's runs.jsonl
    rp.append_run(rp.runs_file(store), run_line())
    t = rp.read_last_run(rp.runs_file(store))
    assert t.store == store and rp.block(t.require_store(), (1, 1)).worker_id == 2
    assert [r.spatial_id for r in rp.block_records(t.require_store(), worker=2)] == [5]


def test_block_lookup_without_a_store_says_how_to_get_one():
    with pytest.raises(rp.ReportError, match="has no tracking store"):
        run_line().require_store()


def test_block_columns_match_the_records(tmp_path):
    store = tmp_path / "smooth"
    g = make_store(store)
    fill_blocks(g, [(2, 3), (0, 1)], start=10.0, wall=[0.1, 0.3], worker=1)
    g["failures"][0, 0] = 2
    cols = rp.block_columns(store)
    assert cols["spatial_id"].tolist() == [0, 1, 11]
    assert cols["coord"].tolist() == [[0, 0], [0, 1], [2, 3]]
    assert np.isnan(cols["wall_seconds"][0]) and cols["wall_seconds"][1:].tolist() == [0.3, 0.1]
    assert cols["failures"].tolist() == [2, 0, 0]
    mine = rp.block_columns(store, worker=1)
    assert mine["spatial_id"].tolist() == [1, 11]
    plain = tmp_path / "plain"
    make_store(plain, tracking=False)["done"][1, 1] = True
    cols = rp.block_columns(plain)
    assert cols["spatial_id"].tolist() == [5] and "wall_seconds" not in cols
    assert rp.block_records(plain)[0].stats is None
    assert rp.block_columns(plain, worker=0)["spatial_id"].size == 0


def test_progress_of_the_same_run_does_not_hide_its_report_line(tmp_path):
    store = tmp_path / "smooth"
    g = make_store(store)
    fill_blocks(g, [(0, 0)], start=100.2, wall=[0.3])
    # the engine stamps progress a little after the report's own start
    write_progress(store / "progress.json", {"state": "finished", "started_at": 100.05})
    rp.append_run(rp.runs_file(store), run_line(started_at=100.0, finished_at=110.0))
    t = rp.report_from_store(store)
    assert t.workers.exits == {"clean": 1} and t.started_at == 100.0


def test_an_array_not_covering_the_grid_is_refused(tmp_path):
    store = tmp_path / "smooth"
    g = make_store(store)
    del g["wall_seconds"]
    g.create_array("wall_seconds", shape=(2, 2), dtype=np.float64, fill_value=np.nan)
    with pytest.raises(rp.ReportError, match="holds 4 blocks where the grid has 12"):
        rp.report_from_store(store)


def _slowing_block(block):
    """A block function whose blocks take longer as the run goes on (a positive trend)."""
    import time
    _slowing_block.calls = getattr(_slowing_block, "calls", 0) + 1
    time.sleep(0.001 * _slowing_block.calls)


def test_the_store_rebuilt_report_agrees_with_the_runs_own(tmp_path):
    """The contract with the engine: its report line and the arrays it tracks tell one story."""
    from spacrq.blockwise import Roi, Task, run_blockwise

    _slowing_block.calls = 0
    store = tmp_path / "runs" / "smooth"
    task = Task("smooth", total_roi=Roi((0, 0), (40, 60)), read_roi=Roi((0, 0), (10, 10)),
                write_roi=Roi((0, 0), (10, 10)), process_function=_slowing_block,
                tracking_path=store, resource_tracking=True)
    own = run_blockwise([task], executor="serial", log_dir=tmp_path / "logs")["smooth"]
    rebuilt = rp.report_from_store(store)
    assert rebuilt.task_id == "smooth" and rebuilt.store == store
    for name in ("count", "skipped", "failures", "has_stats"):
        assert getattr(rebuilt.blocks, name) == getattr(own.blocks, name)
    assert rebuilt.blocks.wall.n == own.blocks.wall.n == 24
    assert rebuilt.blocks.wall.mean == pytest.approx(own.blocks.wall.mean, rel=1e-9)
    assert rebuilt.blocks.trend_slope_ms > 0.5  # ~1 ms slower each block
    assert rebuilt.workers.to_dict() == own.workers.to_dict()
    assert rp.read_last_run(rp.runs_file(store)).blocks.count == 24
