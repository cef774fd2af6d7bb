"""Worker processes: crashes, timeouts, restart bounds, measurements, logs, progress."""
from __future__ import annotations

import functools
import json
import time

import bw_funcs

from spacrq.blockwise import Roi, Task, run_blockwise
from spacrq.blockwise.report import block, read_last_run
from spacrq.runfiles import read_json


def _task(task_id, fn, tmp_path, n=8, **kw):
    kw.setdefault("num_workers", 2)
    return Task(task_id, Roi((0,), (10 * n,)), Roi((0,), (10,)), Roi((0,), (10,)), fn,
                tracking_path=tmp_path / task_id, **kw)


def test_sigkilled_worker_costs_only_its_block_and_is_replaced(tmp_path):
    # One worker: the blocks left after its death can only be done by its replacement (with
    # two, the survivor may drain them all before the death is even seen, on a busy machine).
    task = _task("kill", functools.partial(bw_funcs.sigkill_once, str(tmp_path), 3), tmp_path,
                 n=12, max_retries=1, num_workers=1)
    report = run_blockwise([task])
    assert report.succeeded, report.problems()
    tr = report["kill"]
    assert tr.blocks.failures == 1                      # only the block it was running
    # the killed worker is replaced (a worker released as idle meanwhile may be restarted too)
    assert tr.workers.exits.get("error") == 1 and tr.workers.count >= 2
    assert set(tr.workers.exits) == {"clean", "error"}
    stamps = sorted(p.name for p in tmp_path.glob("kill-*.json"))
    assert len(stamps) == 12
    assert "died with signal SIGKILL" in (tmp_path / "kill" / "logs" / "scheduler.log").read_text()


def test_workers_that_keep_dying_end_the_task_not_the_run(tmp_path):
    doomed = _task("doomed", bw_funcs.always_sigkill, tmp_path, n=4, num_workers=1,
                   max_retries=10, max_worker_restarts=2)
    fine = _task("fine", bw_funcs.noop, tmp_path, n=4, num_workers=1)
    report = run_blockwise([doomed, fine])
    assert not report.succeeded
    assert report.outcome["doomed"]["failed"] == 4 and report.outcome["doomed"]["done"] == 0
    assert report["doomed"].workers.count == 3  # 1 + 2 restarts, then it gave up
    assert report.outcome["fine"]["done"] == 4


def test_hung_block_is_reclaimed_after_its_timeout(tmp_path):
    task = _task("hang", functools.partial(bw_funcs.hang_on, 2), tmp_path, n=6, timeout=0.5,
                 max_retries=1)
    started = time.monotonic()
    report = run_blockwise([task])
    assert time.monotonic() - started < 20
    assert report.outcome["hang"]["failed"] == 1 and report.outcome["hang"]["done"] == 5
    assert report["hang"].workers.exits.get("timeout") == 2
    assert "timeout of 0.5 s" in report.errors["hang"][2]


def test_cpu_and_wall_are_plausible_for_busy_and_sleeping_blocks(tmp_path):
    task = _task("cpu", functools.partial(bw_funcs.busy_or_sleep, 0.08), tmp_path, n=6,
                 resource_tracking=True)
    report = run_blockwise([task])
    assert report.succeeded
    rec = {sid: task_block(tmp_path / "cpu", sid) for sid in range(6)}
    for sid, (wall, cpu) in rec.items():
        assert wall >= 0.079 and cpu <= wall + 0.01
        if sid % 2 == 0:
            assert cpu >= 0.079, f"busy block {sid}: cpu {cpu} of wall {wall}"
        else:
            assert cpu < 0.02, f"sleeping block {sid}: cpu {cpu} of wall {wall}"


def task_block(store, sid):
    import zarr
    g = zarr.open_group(str(store), mode="r")
    return float(g["wall_seconds"][sid]), float(g["cpu_seconds"][sid])


def test_a_slowing_workload_shows_a_positive_trend(tmp_path):
    task = _task("slowing", functools.partial(bw_funcs.slowing, 0.002), tmp_path, n=20,
                 num_workers=1, resource_tracking=True)
    report = run_blockwise([task])
    assert report["slowing"].blocks.trend_slope_ms > 1.0  # ~2 ms more per block


def test_peak_memory_is_per_block_not_a_lifetime_high_water_mark(tmp_path):
    task = _task("memory", functools.partial(bw_funcs.memory_on, 1, 200), tmp_path, n=4,
                 num_workers=1, resource_tracking=True)
    assert run_blockwise([task]).succeeded
    import zarr
    peak = zarr.open_group(str(tmp_path / "memory"), mode="r")["peak_rss_bytes"][...]
    assert peak[1] > 200 * 2**20
    assert peak[2] < peak[1] - 150 * 2**20 and peak[3] < peak[1] - 150 * 2**20


def test_report_progress_logs_and_runs_file(tmp_path):
    task = _task("files", bw_funcs.noop, tmp_path, n=10, resource_tracking=True)
    report = run_blockwise([task])
    store = tmp_path / "files"
    progress = read_json(store / "progress.json")
    assert progress["state"] == "finished" and progress["task"]["done"] == 10
    assert progress["seq"] == 10 and len(progress["recent"]) == 10
    assert {w["state"] for w in progress["workers"]} == {"exited"}
    assert {"worker_id", "pid", "idle_seconds", "compute_seconds", "blocks", "exit"} <= set(progress["workers"][0])
    assert sorted(p.name for p in (store / "logs").glob("worker-*.log")) == ["worker-0.log", "worker-1.log"]
    line = json.loads((store / "runs.jsonl").read_text().splitlines()[-1])
    assert line["outcome"]["state"] == "finished"
    last = read_last_run(store / "runs.jsonl")
    assert last.to_dict() == report["files"].to_dict()
    assert task.report().to_dict() == report["files"].to_dict()
    w = report["files"].workers
    assert w.count == 2 and w.exits == {"clean": 2}
    assert all(r.startup and r.startup > 0 and r.teardown is not None for r in w.by_id.values())
    assert report["files"].blocks.round_trip.n == 10
    assert block(report["files"].require_store(), 3).done


def test_progress_is_published_while_running(tmp_path):
    task = _task("live", functools.partial(bw_funcs.busy_or_sleep, 0.1), tmp_path, n=12)
    seen = []

    def watch():
        doc = read_json(tmp_path / "live" / "progress.json", default=None)
        if doc and doc.get("state") == "running":
            seen.append(doc["written_at"])
        return False

    assert run_blockwise([task], stop_requested=watch).succeeded
    assert len(set(seen)) >= 2


def test_stop_request_ends_the_run_interrupted_with_nothing_false_marked(tmp_path):
    task = _task("stopped", functools.partial(bw_funcs.busy_or_sleep, 0.05), tmp_path, n=40)

    def three_done() -> bool:
        doc = read_json(tmp_path / "stopped" / "progress.json", default=None) or {}
        return doc.get("task", {}).get("done", 0) >= 3

    report = run_blockwise([task], stop_requested=three_done)
    o = report.outcome["stopped"]
    assert report.interrupted and not report.succeeded
    assert 0 < o["done"] < 40
    import zarr
    assert int(zarr.open_group(str(tmp_path / "stopped"), mode="r")["done"][...].sum()) == o["done"]
    assert read_json(tmp_path / "stopped" / "progress.json")["state"] == "interrupted"
    assert "not run" in report.problems()[0]


def test_sigterm_to_the_run_writes_an_interrupted_report(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "night.py"
    script.write_text(f"""
import functools, sys
sys.path.insert(0, {str(Path(bw_funcs.__file__).parent)!r})
import bw_funcs
from spacrq.blockwise import Roi, Task, run_blockwise
task = Task("night", Roi((0,), (400,)), Roi((0,), (10,)), Roi((0,), (10,)),
            functools.partial(bw_funcs.busy_or_sleep, 0.1), num_workers=2,
            tracking_path={str(tmp_path / 'store')!r})
try:
    run_blockwise([task])
except KeyboardInterrupt:
    sys.exit(130)
""")
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        doc = read_json(tmp_path / "store" / "progress.json", default=None)
        if doc and doc["task"]["done"] >= 4:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)  # what stopping a queue job does to its group
    assert proc.wait(timeout=30) == 130
    last = read_last_run(tmp_path / "store" / "runs.jsonl")
    assert last.outcome["state"] == "interrupted"
    import zarr
    done = zarr.open_group(str(tmp_path / "store"), mode="r")["done"][...]
    assert int(done.sum()) == last.outcome["done"] and 0 < last.outcome["done"] < 40
    assert read_json(tmp_path / "store" / "progress.json")["state"] == "interrupted"
    assert set(last.workers.exits) <= {"interrupted", "clean"}


def test_a_worker_stuck_loading_the_function_is_given_up(tmp_path, monkeypatch):
    from spacrq.blockwise import local
    (tmp_path / "slow_import_mod.py").write_text("import time\ntime.sleep(60)\ndef fn(block):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(local, "STARTUP_TIMEOUT", 1.0)
    task = _task("stuck", "slow_import_mod:fn", tmp_path, n=3, num_workers=1, max_worker_restarts=1)
    started = time.monotonic()
    report = run_blockwise([task])
    assert time.monotonic() - started < 30
    assert report.outcome["stuck"]["failed"] == 3 and not report.succeeded
    assert report["stuck"].workers.exits == {"timeout": 2}
    assert "did not start within 1 s" in (tmp_path / "stuck" / "logs" / "scheduler.log").read_text()
