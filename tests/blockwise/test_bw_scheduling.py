"""Scheduling as daisy does it: conflicts, dependencies, retries, failure and orphans."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import bw_funcs
import pytest

from spacrq.blockwise import Roi, Task, run_blockwise


def _times(folder: Path, task_id: str) -> dict[int, tuple[float, float]]:
    out = {}
    for path in folder.glob(f"{task_id}-*.json"):
        doc = json.loads(path.read_text())
        out[int(path.stem.rsplit("-", 1)[1])] = (doc["start"], doc["end"])
    return out


def test_conflicting_blocks_never_run_at_once(tmp_path):
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    task = Task("conflicts", Roi((0, 0), (60, 60)), Roi((0, 0), (20, 20)), Roi((5, 5), (10, 10)),
                functools.partial(bw_funcs.stamp, str(stamps), sleep=0.03), num_workers=2,
                tracking_path=tmp_path / "store")
    report = run_blockwise([task])
    assert report.succeeded
    times = _times(stamps, "conflicts")
    grid = task.grid
    assert len(times) == grid.size == 25
    overlapping_pairs = 0
    for a in range(grid.size):
        ra, wa = grid.rois(grid.coord_of(a))
        for b in range(a + 1, grid.size):
            rb, wb = grid.rois(grid.coord_of(b))
            if ra.intersects(wb) or rb.intersects(wa):
                (s1, e1), (s2, e2) = times[a], times[b]
                assert e1 <= s2 or e2 <= s1, f"blocks {a} and {b} overlap and ran at once"
            else:
                overlapping_pairs += (times[a][0] < times[b][1] and times[b][0] < times[a][1])
    assert overlapping_pairs > 0, "two workers never ran independent blocks side by side"


def test_levels_run_in_order_serially(tmp_path):
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    task = Task("levels", Roi((0,), (100,)), Roi((0,), (30,)), Roi((10,), (10,)),
                functools.partial(bw_funcs.stamp, str(stamps)), num_workers=1)
    assert run_blockwise([task], executor="serial", log_dir=tmp_path / "logs").succeeded
    times = _times(stamps, "levels")
    levels = task.grid.levels()
    for sid in range(task.grid.size):
        for other in task.grid.later_neighbours(sid):
            assert levels[other] > levels[sid]
            assert times[sid][1] <= times[other][0]


def test_downstream_waits_only_for_the_blocks_it_reads(tmp_path):
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    # upstream block 7 (the last) is slow; downstream block 0 reads only upstream blocks 0-1
    up = Task("up", Roi((0,), (80,)), Roi((0,), (10,)), Roi((0,), (10,)),
              functools.partial(bw_funcs.slow_block, str(stamps), 7, 2.5), num_workers=2,
              tracking_path=tmp_path / "up")
    down = Task("down", Roi((0,), (80,)), Roi((0,), (20,)), Roi((5,), (10,)),
                functools.partial(bw_funcs.stamp, str(stamps)), num_workers=1,
                read_write_conflict=False, upstream_tasks=[up], tracking_path=tmp_path / "down")
    report = run_blockwise([down])
    assert report.succeeded
    up_t, down_t = _times(stamps, "up"), _times(stamps, "down")
    assert down_t[0][0] < up_t[7][1], "downstream block 0 waited for the whole upstream task"
    for sid in range(down.grid.size):
        read, _ = down.grid.rois(down.grid.coord_of(sid))
        for u in up.grid.writers_of(read):
            assert up_t[u][1] <= down_t[sid][0], f"down {sid} started before upstream {u} ended"


def test_retries_then_failure_and_orphans(tmp_path):
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    up = Task("up", Roi((0,), (40,)), Roi((0,), (10,)), Roi((0,), (10,)),
              functools.partial(bw_funcs.count_attempts, str(attempts), {1}), num_workers=2,
              max_retries=2, tracking_path=tmp_path / "up")
    down = Task("down", Roi((0,), (40,)), Roi((0,), (10,)), Roi((0,), (10,)), bw_funcs.noop,
                upstream_tasks=[up], tracking_path=tmp_path / "down")
    # chained behind down's block 1: reads down's blocks 0..1 → orphaned transitively
    third = Task("third", Roi((0,), (40,)), Roi((0,), (20,)), Roi((0,), (20,)), bw_funcs.noop,
                 upstream_tasks=[down], tracking_path=tmp_path / "third")
    independent = Task("independent", Roi((0,), (40,)), Roi((0,), (10,)), Roi((0,), (10,)),
                       bw_funcs.noop, tracking_path=tmp_path / "independent")
    report = run_blockwise([third, independent])
    assert not report.succeeded and not bool(report)
    assert (attempts / "attempts-1").read_text() == "xxx"  # max_retries + 1 attempts
    assert report.outcome["up"] == {**report.outcome["up"], "done": 3, "failed": 1, "orphaned": 0}
    assert report.outcome["down"]["orphaned"] == 1 and report.outcome["down"]["done"] == 3
    assert report.outcome["third"]["orphaned"] == 1 and report.outcome["third"]["done"] == 1
    assert report.outcome["independent"]["done"] == 4
    assert report["up"].blocks.failures == 3
    assert "ValueError: always fails" in report.errors["up"][1]
    problems = " ".join(report.problems())
    assert "1 block(s) failed" in problems and "orphaned" in problems
    # the store never marks the failed or orphaned blocks done
    assert task_done(tmp_path / "up").tolist() == [True, False, True, True]
    assert task_done(tmp_path / "down").tolist() == [True, False, True, True]


def task_done(store):
    import zarr
    return zarr.open_group(str(store), mode="r")["done"][...]


def test_a_block_that_raises_is_logged_with_its_traceback(tmp_path):
    task = Task("raises", Roi((0,), (30,)), Roi((0,), (10,)), Roi((0,), (10,)),
                functools.partial(bw_funcs.raise_on, {2}), max_retries=0, num_workers=1,
                tracking_path=tmp_path / "store")
    report = run_blockwise([task])
    assert report.outcome["raises"]["failed"] == 1 and report.outcome["raises"]["done"] == 2
    log = (tmp_path / "store" / "logs" / "worker-0.log").read_text()
    assert "RuntimeError: bad block 2" in log and "Traceback" in log
    assert report["raises"].workers.by_id[0].exit == "clean"


def test_check_function_skips_blocks(tmp_path):
    task = Task("checked", Roi((0,), (40,)), Roi((0,), (10,)), Roi((0,), (10,)), bw_funcs.noop,
                check_function=lambda block: block.spatial_id < 2)
    report = run_blockwise([task], executor="serial", log_dir=tmp_path)
    assert report.succeeded
    assert report.outcome["checked"]["skipped"] == 2 and report.outcome["checked"]["done"] == 2


def test_task_ids_must_be_folder_safe():
    with pytest.raises(ValueError, match="folder name"):
        Task("../escape", Roi((0,), (10,)), Roi((0,), (10,)), Roi((0,), (10,)), bw_funcs.noop)


def test_unpicklable_function_is_one_sentence(tmp_path):
    task = Task("lambda", Roi((0,), (10,)), Roi((0,), (10,)), Roi((0,), (10,)), lambda b: None)
    with pytest.raises(ValueError, match="package.module:function"):
        run_blockwise([task], log_dir=tmp_path)
