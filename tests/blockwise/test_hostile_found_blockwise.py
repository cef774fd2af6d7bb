"""Edges a hostile tester found in blockwise runs, each as the case that broke.

* an output spelled differently from its input (``./in.zarr/../in.zarr``, a link
  to it) passed the "same array" check and the run smoothed the input in place;
* a tracking store left by another task (or for another output) was reused:
  every block "skipped", the new output all zeros, exit 0;
* ``spacrq report STORE --follow`` printed a traceback over a progress snapshot
  whose ``workers`` was not a list;
* names read from run files (a task id in ``progress.json`` or ``runs.jsonl``)
  reached the terminal with their escape sequences.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest
import zarr

from spacrq.blockwise import spec
from spacrq.blockwise.live import task_line
from spacrq.blockwise.tracking import TrackingError
from spacrq.cli import main as cli_main
from spacrq.runfiles import write_progress


def _volume(path, shape=(32, 32)):
    arr = zarr.create_array(str(path), shape=shape, chunks=(16, 16), dtype="float32")
    arr[...] = np.random.default_rng(0).random(shape).astype(np.float32)
    return arr[...]


def _write_spec(folder, *steps):
    path = folder / "spec.json"
    path.write_text(json.dumps({"tasks": list(steps)}))
    return path


def _step(**over):
    return {"input": "in.zarr", "output": "out.zarr", "block_shape": [16, 16],
            "num_workers": 1, "executor": "serial", **over}


@pytest.mark.parametrize("spelling", ["./in.zarr/../in.zarr", "sub/../in.zarr", "link.zarr"])
def test_an_output_that_is_the_input_spelled_otherwise_is_refused(tmp_path, spelling):
    before = _volume(tmp_path / "in.zarr")
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path / "in.zarr", tmp_path / "link.zarr")
    found = [p for p in spec.problems(_step(output=spelling), tmp_path) if p.is_error]
    assert [p.setting for p in found] == ["output"]
    assert "same array as input" in found[0].message
    assert np.array_equal(zarr.open_array(str(tmp_path / "in.zarr"))[...], before)


def test_two_steps_writing_one_output_or_one_store_are_refused(tmp_path, capsys):
    _volume(tmp_path / "in.zarr")
    same_out = _write_spec(tmp_path, _step(task_id="a", output="o.zarr"),
                           _step(task_id="b", output="./o.zarr"))
    assert cli_main(["blockwise", "run", str(same_out)]) == 2
    err = capsys.readouterr().err
    assert "o.zarr" in err and "Traceback" not in err and err.count("\n") == 1
    same_store = _write_spec(tmp_path, _step(task_id="a", output="o1.zarr", tracking="t"),
                             _step(task_id="b", output="o2.zarr", tracking="t"))
    assert cli_main(["blockwise", "run", str(same_store)]) == 2
    err = capsys.readouterr().err
    assert "tracking" in err and err.count("\n") == 1
    assert not (tmp_path / "t").exists() and not (tmp_path / "o1.zarr").exists()


def test_a_store_left_by_another_task_is_not_taken_for_this_ones_work(tmp_path, capsys):
    _volume(tmp_path / "in.zarr")
    first = _write_spec(tmp_path, _step(task_id="first", output="o1.zarr", tracking="t"))
    assert cli_main(["blockwise", "run", str(first)]) == 0
    capsys.readouterr()
    other = _write_spec(tmp_path, _step(task_id="second", output="o2.zarr", tracking="t"))
    assert cli_main(["blockwise", "run", str(other)]) == 2
    err = capsys.readouterr().err
    assert "first" in err and "second" in err and err.count("\n") == 1


def test_a_store_kept_for_another_output_does_not_skip_the_new_outputs_blocks(tmp_path, capsys):
    _volume(tmp_path / "in.zarr")
    first = _write_spec(tmp_path, _step(task_id="smooth", output="o1.zarr", tracking="t"))
    assert cli_main(["blockwise", "run", str(first)]) == 0
    capsys.readouterr()
    renamed = _write_spec(tmp_path, _step(task_id="smooth", output="o2.zarr", tracking="t"))
    assert cli_main(["blockwise", "run", str(renamed)]) == 2
    err = capsys.readouterr().err
    assert "o1.zarr" in err and "o2.zarr" in err and err.count("\n") == 1
    # the same output again is a resume: every block is already done
    again = _write_spec(tmp_path, _step(task_id="smooth", output="./o1.zarr", tracking="t"))
    assert cli_main(["blockwise", "run", str(again)]) == 0
    assert "0 done, 4 skipped" in capsys.readouterr().out


def test_a_layout_mismatch_with_the_same_grid_says_what_differs(tmp_path):
    _volume(tmp_path / "in.zarr")
    a = _write_spec(tmp_path, _step(task_id="a", tracking="t", operation="threshold"))
    assert cli_main(["blockwise", "run", str(a)]) == 0
    b = spec.build_tasks([_step(task_id="a", tracking="t", operation="gaussian",
                               output="o2.zarr")], tmp_path)
    from spacrq.blockwise.tracking import TrackingStore
    with pytest.raises(TrackingError) as info:
        TrackingStore.open(b[0].tracking_path, "a", b[0].grid, False)
    text = str(info.value)
    assert "[2, 2] vs [2, 2]" not in text and "read" in text


def _running_snapshot(store, **over):
    snap = {"state": "running", "scheduler": {"pid": 1, "started": 1.0, "host": "elsewhere"},
            "started_at": time.time() - 5, "written_at": time.time() - 9.0,
            "task": {"task_id": "t", "total": 4, "done": 1}, "workers": []}
    snap.update(over)
    store.mkdir(exist_ok=True)
    write_progress(store / "progress.json", snap)


@pytest.mark.parametrize("workers", [5, "busy", {"0": 1}, [None, 3, {"state": 7}]])
def test_a_snapshot_with_odd_workers_is_a_line_not_a_traceback(tmp_path, workers):
    _running_snapshot(tmp_path / "s", workers=workers)
    line = task_line(tmp_path / "s")
    assert "1 of 4 blocks done" in line


def test_follow_over_a_garbled_snapshot_ends_without_a_traceback(tmp_path, capsys):
    _volume(tmp_path / "in.zarr")
    run = _write_spec(tmp_path, _step(task_id="a", tracking="t"))
    assert cli_main(["blockwise", "run", str(run)]) == 0
    capsys.readouterr()
    _running_snapshot(tmp_path / "t", workers=5)
    code = cli_main(["report", str(tmp_path / "t"), "--follow"])
    out, err = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in err


ESC = "\x1b[2J\x1b]0;owned\x07"


def test_names_from_run_files_reach_the_terminal_without_control_characters(tmp_path, capsys):
    _volume(tmp_path / "in.zarr")
    run = _write_spec(tmp_path, _step(task_id="a", tracking="t"))
    assert cli_main(["blockwise", "run", str(run)]) == 0
    capsys.readouterr()
    _running_snapshot(tmp_path / "t", task={"task_id": "t" + ESC, "total": 4, "done": 4},
                      state="finished")
    assert cli_main(["report", str(tmp_path / "t"), "--follow"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "4 of 4 blocks done" in out
    runs = tmp_path / "t" / "runs.jsonl"
    last = json.loads(runs.read_text().splitlines()[-1])
    last["task_id"] = "a" + ESC
    with open(runs, "a") as handle:
        handle.write(json.dumps(last) + "\n")
    assert cli_main(["report", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "owned" in out


def test_a_chunk_folder_linked_while_the_run_goes_is_not_written_through(tmp_path):
    from spacrq.blockwise import zarrlite
    from spacrq.blockwise.grid import BlockGrid
    from spacrq.blockwise.roi import Roi
    from spacrq.blockwise.tracking import TrackingStore
    grid = BlockGrid(Roi([0, 0], [64, 64]), Roi([0, 0], [16, 16]), Roi([0, 0], [16, 16]))
    store = TrackingStore.open(tmp_path / "t", "a", grid, True)
    victim = tmp_path / "victim"
    victim.mkdir()
    os.symlink(victim, tmp_path / "t" / "done" / "c")  # planted after the store was opened
    with pytest.raises(Exception) as info:
        zarrlite.write_chunk(tmp_path / "t" / "done", (0, 0), np.ones((4, 4), np.uint8),
                             (4, 4), 0)
    assert "symbolic link" in str(info.value)
    store.record(np.arange(16), done=np.ones(16, dtype=np.uint8))
    problem = store.close()
    assert list(victim.iterdir()) == []
    assert "symbolic link" in (problem or "")


def test_a_second_run_of_a_running_task_is_refused_before_it_starts(tmp_path, capsys):
    import fcntl
    _volume(tmp_path / "in.zarr")
    run = _write_spec(tmp_path, _step(task_id="a", tracking="t"))
    assert cli_main(["blockwise", "run", str(run)]) == 0  # the store and its logs exist
    capsys.readouterr()
    lock = tmp_path / "t" / "logs" / ".run.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as the first run holds it while it goes
        os.write(fd, b"4242\n")
        marks = (tmp_path / "t" / "runs.jsonl").read_bytes()
        assert cli_main(["blockwise", "run", str(run)]) == 2
        err = capsys.readouterr().err
        assert "already being run" in err and "4242" in err and err.count("\n") == 1
        assert (tmp_path / "t" / "runs.jsonl").read_bytes() == marks
    finally:
        os.close(fd)
    assert cli_main(["blockwise", "run", str(run)]) == 0  # released: runs (every block skipped)


def test_a_run_lock_planted_as_a_link_is_not_written_through(tmp_path, capsys):
    _volume(tmp_path / "in.zarr")
    run = _write_spec(tmp_path, _step(task_id="a", tracking="t"))
    (tmp_path / "t" / "logs").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / "t" / "logs" / ".run.lock")
    assert cli_main(["blockwise", "run", str(run)]) == 2
    assert victim.read_text() == "keep"
    assert "link" in capsys.readouterr().err
