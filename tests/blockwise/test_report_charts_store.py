"""Charts of finished runs from the tracking store, and a round trip that adds up (no Qt)."""
from __future__ import annotations

import functools
import time

import bw_funcs
import numpy as np
import pytest
from fake_run import FakeRun, look

from spacrq.blockwise import Roi, Task, run_blockwise
from spacrq.blockwise.report import read_last_run, report_from_store
from spacrq.blockwise.report_model import queue_note
from spacrq.blockwise.report_stats import block_overhead, summarize_blocks
from spacrq.blockwise.report_store import read_store_arrays
from spacrq.blockwise.watch import ReportWatcher
from spacrq.blockwise.watch_charts import store_charts
from spacrq.blockwise.watch_live import LiveRun, slowest_worker
from spacrq.blockwise.watch_series import CHART_BUCKETS

#: two clocks (epoch and perf counter) meet in a round trip: they agree to well under this
CLOCK = 1e-4


def _finished(workspace, name="smooth", blocks=12, workers=3, **kw):
    run = FakeRun(workspace.runs / name, grid_shape=(blocks,), workers=workers, **kw)
    run.complete(blocks)
    report = run.finish()
    return run, report


def test_a_finished_store_charts_every_series_with_a_point_per_block(workspace):
    run, report = _finished(workspace, blocks=12, workers=3)
    charts = store_charts(run.dir, report.started_at, None)
    assert charts["empty"] == "" and charts["blocks"] == 12
    assert len(charts["wall"][0]) == 12 and len(charts["rss"][0]) == 12
    assert len(charts["trend"][0]) == 2 and charts["measured"] and charts["rss_measured"]
    assert set(charts["compute"]) == set(charts["idle"]) == {0, 1, 2}
    for w in range(3):  # the run's start, then one point per block the worker returned
        assert len(charts["compute"][w][0]) == len(charts["idle"][w][0]) == 4 + 1
    x, rate = charts["rate"]
    assert len(x) >= 1 and (rate > 0).any()
    width = (x[1] - x[0]) if len(x) > 1 else 2 * x[0]
    assert float(rate.sum() * width) == pytest.approx(12)  # the area under the rate: every block


def test_per_worker_series_end_on_the_summarys_figures(workspace):
    run, report = _finished(workspace, blocks=30, workers=3, noise=0.004)
    watcher = ReportWatcher(workspace.runs)
    charts = look(watcher, str(run.dir.resolve())).detail.charts
    assert charts is not None and charts["source"] == "store"
    for w, record in report.workers.by_id.items():
        compute_x, compute_y = charts["compute"][w]
        idle_x, idle_y = charts["idle"][w]
        assert compute_y[-1] == pytest.approx(record.compute.total, rel=1e-9)
        assert idle_y[-1] == pytest.approx(record.idle.total, rel=1e-9)
        assert charts["per_worker"][w]["blocks"] == record.blocks_ok
        assert (np.diff(compute_y) >= 0).all() and (np.diff(compute_x) >= 0).all()
    total = sum(v["compute"] for v in charts["per_worker"].values())
    assert total == pytest.approx(report.blocks.wall.total, rel=1e-9)


def test_charts_of_a_past_run_are_that_runs_blocks(workspace):
    run = FakeRun(workspace.runs / "two", grid_shape=(20,), workers=2)
    run.complete(8)
    run.finish()
    run.started_at = time.time()  # the second run of the task: its blocks return after this
    run.complete(12)
    run.finish()
    watcher = ReportWatcher(workspace.runs)
    key = str(run.dir.resolve())
    old = look(watcher, key, 0).detail.charts
    new = look(watcher, key, 1).detail.charts
    assert old["blocks"] == 8 and new["blocks"] == 12


def test_an_untracked_run_says_in_words_why_it_has_no_charts(workspace):
    run = FakeRun(workspace.runs / "plain", tracked=False)
    run.complete(5)
    run.finish()
    detail = look(ReportWatcher(workspace.runs), str(run.dir.resolve())).detail
    assert detail.charts is None
    assert "resource_tracking=True" in detail.charts_note


def test_a_million_block_store_charts_in_bounded_series_that_keep_the_peaks():
    n = 1_000_000
    rng = np.random.default_rng(3)
    wall = rng.gamma(4.0, 0.005, n)
    wall[777_777] = 5.0  # one straggler must survive decimation
    returned = 1000.0 + np.cumsum(wall) / 8
    arrays = {"returned_at": returned, "sent_at": returned - wall - 1e-3, "wall_seconds": wall,
              "peak_rss_bytes": rng.integers(1 << 20, 1 << 28, n), "worker_id": rng.integers(0, 8, n),
              "idle_seconds": np.full(n, 1e-4)}
    charts = store_charts(None, 1000.0, None, arrays=arrays)
    assert charts["blocks"] == n
    assert len(charts["wall"][0]) <= 2 * CHART_BUCKETS + 2 and charts["wall"][1].max() == 5.0
    assert len(charts["rss"][0]) <= 2 * CHART_BUCKETS + 2
    assert all(len(x) <= 400 for x, _ in charts["compute"].values())
    assert sum(v["compute"] for v in charts["per_worker"].values()) == pytest.approx(wall.sum())


def test_the_slowest_worker_is_named_only_when_it_stands_out():
    even = {w: {"blocks": 10, "compute": 1.0} for w in range(4)}
    assert slowest_worker(even) == ""
    slow = {**even, 2: {"blocks": 10, "compute": 2.5}}
    sentence = slowest_worker(slow)
    assert sentence.startswith("Slowest worker: 2") and "2.5×" in sentence


def test_a_slow_worker_in_a_store_is_called_out(workspace):
    run = FakeRun(workspace.runs / "slow", grid_shape=(24,), workers=3)
    run.complete(24)
    wall = run.group["wall_seconds"][...]
    wid = run.group["worker_id"][...]
    run.group["wall_seconds"][...] = np.where(wid == 1, wall * 3, wall)
    report = run.finish()
    assert store_charts(run.dir, report.started_at, None)["slowest"].startswith("Slowest worker: 1")


def test_live_snapshot_names_the_slowest_worker_too():
    live = LiveRun()
    live.ingest({"run_id": "r", "started_at": 1.0, "written_at": 2.0, "seq": 1,
                 "recent": [[1, 0.01, 1000, 0]],
                 "workers": [{"worker_id": 0, "blocks": 10, "compute_seconds": 1.0},
                             {"worker_id": 1, "blocks": 10, "compute_seconds": 1.0},
                             {"worker_id": 2, "blocks": 10, "compute_seconds": 4.0}]})
    snap = live.snapshot()
    assert snap["slowest"].startswith("Slowest worker: 2") and snap["per_worker"][2]["blocks"] == 10


# -- queued and overhead ------------------------------------------------------------------

def test_overhead_is_the_round_trip_less_queued_and_wall():
    b = summarize_blocks(count=3, skipped=0, failures=0, round_trip=[0.030, 0.050, 0.010],
                         wall=[0.010, 0.010, 0.008], queued=[0.019, 0.039, float("nan")])
    assert b.queued.n == 2 and b.queued.mean == pytest.approx(0.029)
    assert b.overhead.n == 3 and b.overhead.mean == pytest.approx((0.001 + 0.001 + 0.002) / 3)
    assert list(block_overhead([0.03], [0.01], [0.019])) == pytest.approx([0.001])
    assert "waited" in queue_note(b) and "two deep" in queue_note(b)


def test_a_real_runs_round_trip_is_queued_plus_wall_plus_overhead_per_block(tmp_path):
    """Blocks of 10 ms, two deep: each waits in its worker behind the one ahead of it."""
    task = Task("q", Roi((0,), (400,)), Roi((0,), (10,)), Roi((0,), (10,)),
                functools.partial(bw_funcs.stamp, str(tmp_path), sleep=0.01), num_workers=2,
                tracking_path=tmp_path / "q", resource_tracking=True)
    report = run_blockwise([task])
    assert report.succeeded
    a = read_store_arrays(tmp_path / "q", ("sent_at", "returned_at", "wall_seconds", "queued_seconds",
                                           "idle_seconds"))
    rt = a["returned_at"] - a["sent_at"]
    queued, wall = a["queued_seconds"], a["wall_seconds"]
    assert np.isfinite(queued).all() and np.isfinite(a["idle_seconds"]).all()
    overhead = block_overhead(rt, wall, queued)
    assert np.allclose(queued + overhead + wall, rt, rtol=0, atol=1e-9)
    # every part is a real stretch of the block's round trip: none is negative
    assert (queued >= -CLOCK).all() and (overhead >= -CLOCK).all()
    b = report["q"].blocks
    assert b.queued.n == 40 and b.queued.mean > 0.5 * b.wall.mean  # the wait behind the batch ahead
    assert b.overhead.mean == pytest.approx(float(overhead.mean()), abs=CLOCK)
    line = read_last_run(tmp_path / "q" / "runs.jsonl")
    assert line.blocks.queued.n == 40 and "queued" in line.to_dict()["blocks"]
    again = report_from_store(tmp_path / "q")  # the store rebuilds the same split
    assert again.blocks.queued.mean == pytest.approx(b.queued.mean, abs=CLOCK)
    assert "queued" in report["q"].render() and "two deep" in report["q"].render()


def test_the_last_report_charts_only_its_own_blocks_while_a_newer_run_goes(workspace):
    run = FakeRun(workspace.runs / "again", grid_shape=(20,), workers=2)
    run.complete(8)
    run.finish()
    run.started_at, run.run_id = time.time(), "run-2"
    run.complete(5)  # the new run is going: its progress says so
    watcher = ReportWatcher(workspace.runs)
    detail = look(watcher, str(run.dir.resolve()), 0).detail
    assert not detail.live and detail.charts["blocks"] == 8


def test_a_jobs_run_is_charted_from_the_runs_own_start(workspace):
    """The morning report knows when a job ran; :func:`run_window` gives it the run's own start
    (the Run Report's zero), the next run's start as its end, and for a run that never wrote its
    report line (killed) the start its progress snapshot names."""
    from spacrq.blockwise.watch_charts import run_window
    run, first = _finished(workspace, blocks=12, workers=2)
    job_start = first.started_at - 0.7  # the job's interpreter and imports came first
    assert run_window(run.dir, job_start - 1.0, first.finished_at + 1.0) == \
        (first.started_at, first.finished_at + 1.0)
    run.started_at = first.finished_at + 5.0  # a second run (another job), killed before its line
    run.publish()
    assert run_window(run.dir, job_start - 1.0, first.finished_at + 1.0) == \
        (first.started_at, run.started_at)  # the first job's run ends where the next began
    assert run_window(run.dir, run.started_at - 1.5, None) == (run.started_at, None)
    assert run_window(run.dir, first.finished_at + 100, None) == (first.finished_at + 100, None)
