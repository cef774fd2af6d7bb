"""The report's object model: Stat math, pooling, JSON shape, builders and the rendered panel."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacrq.blockwise.report import (
    BlockSummary,
    RunReport,
    Stat,
    TaskReport,
    WorkerRecord,
    WorkerSummary,
    format_bytes,
    format_seconds,
    summarize_blocks,
    summarize_workers,
    trend_slope_ms,
)


def test_stat_of_matches_numpy_with_sample_std():
    rng = np.random.default_rng(1)
    x = rng.gamma(2.0, 0.01, size=5000)
    s = Stat.of(x)
    assert s.n == 5000
    assert s.mean == pytest.approx(x.mean(), rel=1e-12)
    assert s.std == pytest.approx(x.std(ddof=1), rel=1e-12)
    assert (s.min, s.max) == (x.min(), x.max())
    assert s.total == pytest.approx(x.sum(), rel=1e-12)


def test_stat_of_edge_cases():
    assert Stat.of([]) == Stat() and not Stat.of([])
    one = Stat.of([0.25])
    assert (one.n, one.mean, one.std, one.min, one.max, one.total) == (1, 0.25, 0.0, 0.25, 0.25, 0.25)
    # NaN marks "not measured": left out, never counted as zero
    assert Stat.of([1.0, np.nan, 3.0]) == Stat.of([1.0, 3.0])
    assert isinstance(Stat.of(np.array([1, 2], dtype=np.int64)).mean, float)


def test_pooled_stat_equals_the_stat_of_all_samples():
    rng = np.random.default_rng(7)
    parts = [rng.normal(loc, 0.5, size=n) for loc, n in ((1.0, 1), (5.0, 40), (2.5, 1000), (9.0, 2))]
    pooled = Stat.pooled([Stat.of(p) for p in parts] + [Stat()])
    whole = Stat.of(np.concatenate(parts))
    assert pooled.n == whole.n
    assert pooled.mean == pytest.approx(whole.mean, rel=1e-12)
    assert pooled.std == pytest.approx(whole.std, rel=1e-10)
    assert (pooled.min, pooled.max) == (whole.min, whole.max)
    assert pooled.total == pytest.approx(whole.total, rel=1e-12)
    assert Stat.pooled([]) == Stat()


def test_stat_json_uses_sum_and_reads_total():
    s = Stat.of([1.0, 2.0])
    d = s.to_dict()
    assert d["sum"] == 3.0 and "total" not in d
    assert Stat.from_dict(d) == s
    assert Stat.from_dict({"n": 1, "mean": 2.0, "total": 2.0}).total == 2.0
    assert Stat.from_dict(None) == Stat()


def test_stat_format_has_units_and_dash_when_empty():
    assert Stat().format() == "—"
    assert Stat().cells("B") == ["—"] * 5
    assert Stat.of([0.010, 0.012]).format() == "11.0 ± 1.4 ms"
    assert Stat.of([0.010, 0.010]).format() == "10.0 ± 0.0 ms"
    assert Stat.of([3 * 1024**2, 1024**2]).format("B") == "2.0 ± 1.4 MiB"
    assert Stat.of([2 * 1024**2]).format("B") == "2.0 MiB"
    assert format_seconds(None) == "—"
    assert format_seconds(5e-6) == "5.0 µs"
    assert format_seconds(36000 + 125) == "10h 02m"  # the one duration style (spacrq.fmt)
    assert format_seconds(75) == "1m 15s"
    assert format_bytes(512) == "512 B"
    assert format_seconds(0.00099999) == "1.0 ms" and format_seconds(0.9999) == "1.00 s"
    assert format_seconds(1e-12) == "0 s"


def test_trend_slope_sign_and_value():
    rising = 0.010 + 0.0001 * np.arange(200)  # +0.1 ms per block
    assert trend_slope_ms(rising) == pytest.approx(0.1)
    assert trend_slope_ms(rising[::-1]) == pytest.approx(-0.1)
    assert trend_slope_ms(np.full(50, 0.02)) == pytest.approx(0.0, abs=1e-12)
    assert trend_slope_ms([0.5]) == 0.0 and trend_slope_ms([]) == 0.0
    # an unmeasured block keeps its place in the order
    assert trend_slope_ms([0.0, np.nan, 2e-3]) == pytest.approx(1.0)


def test_summarize_blocks_overhead_and_unmeasured_entries():
    rt = np.array([0.012, 0.013, np.nan, 0.020])
    wall = np.array([0.010, 0.010, 0.010, np.nan])
    rss = np.array([100, 200, -1, 300])
    b = summarize_blocks(count=6, skipped=2, failures=1, round_trip=rt, wall=wall,
                         cpu=wall, peak_rss=rss, io_read=[10, 10, -1, -1], io_write=[-1, -1, -1, -1])
    assert (b.count, b.skipped, b.failures, b.has_stats) == (6, 2, 1, True)
    assert b.round_trip.n == 3 and b.wall.n == 3
    assert b.overhead.n == 2 and b.overhead.mean == pytest.approx(0.0025)
    assert b.overhead.min > 0
    assert b.peak_rss == Stat.of([100, 200, 300])
    assert b.io_read.total == 20 and not b.io_write


def test_summarize_blocks_without_tracking_has_round_trip_only():
    b = summarize_blocks(count=3, skipped=0, failures=0, round_trip=[0.1, 0.2, 0.3])
    assert not b.has_stats and b.round_trip.n == 3
    assert not b.wall and not b.overhead and b.trend_slope_ms == 0.0


def test_summarize_blocks_trend_reads_completion_order():
    wall = 0.01 + 0.0005 * np.arange(100)
    b = summarize_blocks(count=100, skipped=0, failures=0, round_trip=wall + 0.001, wall=wall)
    assert b.trend_slope_ms == pytest.approx(0.5)
    assert b.overhead.mean == pytest.approx(0.001)


def _worker(wid, idle, compute, exit="clean", startup=0.5, teardown=0.1):
    return WorkerRecord(wid, startup=startup, blocks_ok=len(compute), idle=Stat.of(idle),
                        compute=Stat.of(compute), teardown=teardown, exit=exit)


def test_summarize_workers_pools_exactly_and_counts_exits():
    rng = np.random.default_rng(3)
    idles = [rng.random(n) for n in (10, 200, 3)]
    computes = [rng.random(n) for n in (10, 200, 3)]
    records = [_worker(2, idles[0], computes[0]), _worker(0, idles[1], computes[1], exit="error"),
               _worker(1, idles[2], computes[2], exit=None, teardown=None, startup=None)]
    w = summarize_workers(records, unmanaged_clients=1)
    assert w.count == 3 and w.unmanaged_clients == 1
    assert w.idle.std == pytest.approx(np.concatenate(idles).std(ddof=1), rel=1e-10)
    assert w.compute.mean == pytest.approx(np.concatenate(computes).mean(), rel=1e-12)
    assert w.startup.n == 2 and w.teardown.n == 2
    assert w.exits == {"clean": 1, "error": 1}
    assert list(w.by_id) == [0, 1, 2]


def _task(task_id="smooth", workers=3, tracked=True):
    rng = np.random.default_rng(5)
    wall = rng.random(50) * 0.01
    blocks = summarize_blocks(count=60, skipped=10, failures=2, round_trip=wall + 0.002,
                              wall=wall, cpu=wall * 0.9, peak_rss=rng.integers(1e6, 2e8, 50),
                              io_read=np.full(50, 4096), io_write=np.full(50, 8192))
    recs = [_worker(i, rng.random(5), rng.random(5), exit="clean" if i else "timeout")
            for i in range(workers)]
    return TaskReport(task_id, blocks, summarize_workers(recs), started_at=1000.0,
                      finished_at=1012.5, tracked=tracked)


def test_task_report_json_round_trip_keeps_the_seed_shape():
    t = _task()
    d = json.loads(json.dumps(t.to_dict()))
    assert set(d) == {"task_id", "started_at", "finished_at", "tracked", "blocks", "workers"}
    seed = {"count", "skipped", "failures", "has_stats", "round_trip", "wall",
            "cpu", "peak_rss", "io_read", "io_write", "overhead", "trend_slope_ms"}
    assert set(d["blocks"]) == seed | {"queued"}  # added keys only: the seed's keep their meaning
    assert set(d["workers"]) == {"count", "unmanaged_clients", "startup", "idle", "compute",
                                 "teardown", "exits", "by_id"}
    assert isinstance(d["workers"]["by_id"], list) and d["blocks"]["wall"]["sum"] > 0
    back = TaskReport.from_dict(d)
    assert back == t and back.to_dict() == t.to_dict()
    assert back.elapsed == pytest.approx(12.5)
    assert back.worker(1) == t.worker(1)
    with pytest.raises(KeyError, match="no worker 9; its workers are: 0, 1, 2"):
        back.worker(9)


def test_run_report_json_round_trip_and_selections():
    plain = TaskReport("serial", BlockSummary(count=5))
    run = RunReport({"smooth": _task(), "serial": plain,
                     "rt_only": TaskReport("rt_only", summarize_blocks(
                         count=2, skipped=0, failures=0, round_trip=[0.1, 0.2]))})
    back = RunReport.from_json(run.to_json())
    assert back.to_dict() == run.to_dict() and len(back) == 3
    assert set(back.measured) == {"smooth"}
    assert set(back.timed) == {"smooth", "rt_only"}


def test_render_panel_units_skipped_exits_and_dashes():
    t = _task()
    text = RunReport({"smooth": t}).render()
    assert text.startswith("Resource Utilization\n--------------------")
    assert "smooth  60 blocks (10 skipped, 2 failed attempts), 3 workers, 12.50 s wall" in text
    for row in ("round trip", "wall", "cpu", "peak RSS", "io read", "io write", "overhead", "trend"):
        assert row in text
    assert " ms" in text and "MiB" in text and "ms/block" in text
    assert "exits       2 clean, 1 timeout" in text
    # a row nobody measured is a dash, never zero
    t2 = TaskReport("t2", t.blocks, summarize_workers([WorkerRecord(0, idle=Stat.of([0.1]))]))
    out = t2.render()
    lines = out.splitlines()
    assert not any(line.strip().startswith(("startup", "teardown", "compute")) for line in lines)
    idle_row = next(line for line in lines if line.strip().startswith("idle "))
    assert idle_row.split()[1:3] == ["100.0", "ms"]
    worker_row = next(line for line in lines if line.strip().startswith("0 "))
    assert worker_row.split()[1] == "—" and worker_row.split()[-1] == "running"
    assert "(1 still running)" in out


def test_peak_rss_has_no_total_because_peaks_do_not_add_up():
    text = _task().render()
    rss_row = next(line for line in text.splitlines() if line.strip().startswith("peak RSS"))
    assert rss_row.split()[-1] == "—"
    wall_row = next(line for line in text.splitlines() if line.strip().startswith("wall"))
    assert wall_row.split()[-1] != "—"  # times do add up


def test_render_is_empty_when_nothing_was_measured():
    run = RunReport({"serial": TaskReport("serial", BlockSummary(count=100, skipped=3))})
    assert run.render() == "" and str(run) == ""
    # rows that have no samples are left out rather than shown as a table of zeros
    only_rt = TaskReport("rt", summarize_blocks(count=2, skipped=0, failures=0, round_trip=[0.1, 0.3]))
    text = only_rt.render()
    assert "round trip" in text and "wall" not in text and "0 s" not in text


def test_worker_table_is_truncated_with_a_pointer_to_the_rest():
    t = _task(workers=14)
    text = t.render(max_workers=4)
    table = [line for line in text.splitlines() if line.strip()[:1].isdigit()]
    assert len(table) == 4
    assert "… and 10 more workers" in text
    assert "more workers" not in _task(workers=3).render(max_workers=4)


def test_task_order_puts_named_tasks_first():
    run = RunReport({"a": _task("a"), "b": _task("b"), "c": _task("c")})
    text = run.render(task_order=["c"])
    assert text.index("  c  ") < text.index("  a  ") < text.index("  b  ")


def test_worker_summary_from_garbage_is_empty_not_a_crash():
    assert WorkerSummary.from_dict("nonsense") == WorkerSummary()
    assert BlockSummary.from_dict(None) == BlockSummary()


def test_the_engines_outcome_is_kept_and_an_unfinished_run_says_so():
    d = _task().to_dict()
    d["outcome"] = {"state": "failed", "run_id": "r1", "total": 60, "done": 40, "skipped": 10,
                    "failed": 2, "orphaned": 8}
    t = TaskReport.from_dict(json.loads(json.dumps(d)))
    assert t.to_dict() == d and t.outcome["run_id"] == "r1"
    assert t.headline().endswith(" — failed: 2 failed, 8 orphaned, 50 of 60 done")
    d["outcome"]["state"] = "finished"
    assert "—" not in TaskReport.from_dict(d).headline()
    assert "outcome" not in _task().to_dict()


def test_a_run_that_skipped_every_block_shows_its_counts_not_a_table_of_dashes():
    b = summarize_blocks(count=400, skipped=400, failures=0, round_trip=[], wall=[], cpu=[])
    text = TaskReport("smooth", b, started_at=1.0, finished_at=1.0027).render()
    assert text == "  smooth  400 blocks (400 skipped), 2.7 ms wall"


_samples = st.lists(st.floats(min_value=0.0, max_value=1e4, allow_nan=False), min_size=0, max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(_samples, min_size=1, max_size=6))
def test_pooling_any_split_of_a_sample_gives_its_stat(parts):
    pooled = Stat.pooled(Stat.of(p) for p in parts)
    whole = Stat.of([x for p in parts for x in p])
    assert pooled.n == whole.n
    if whole.n:
        assert pooled.mean == pytest.approx(whole.mean, rel=1e-9, abs=1e-9)
        assert pooled.std == pytest.approx(whole.std, rel=1e-6, abs=1e-6)
        assert (pooled.min, pooled.max) == (whole.min, whole.max)
        assert pooled.total == pytest.approx(whole.total, rel=1e-9, abs=1e-9)
