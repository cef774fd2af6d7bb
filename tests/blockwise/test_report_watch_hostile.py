"""The Run Report's watch pointed at hostile stores: each gives one coded sentence, never an exception.

Every case here once escaped the watch's poll as an exception (a frozen pane:
the poll failed again at every look, and the actions it had taken from the
inbox never got an answer) or left the poll stuck in a blocking read.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr

from fake_run import FakeRun, look
from hostile import HOSTILE, as_lines
from spacrq.blockwise.pane import format_when
from spacrq.blockwise.watch import ReportWatcher
from spacrq.blockwise.watch_source import RunSource
from spacrq.watching import Code


def finished_store(runs: Path, name: str = "s", blocks: int = 3) -> tuple[FakeRun, str]:
    run = FakeRun(runs / name)
    run.complete(blocks)
    run.finish()
    return run, str((runs / name).resolve())


def outcome_of(snap, action):
    found = [o for o in snap.outcomes if o.action == action]
    assert len(found) == 1, snap.outcomes
    return found[0]


def poll_within(watcher, seconds: float = 10.0, **choices):
    """``look(watcher, ...)`` on a thread: a poll stuck in a blocking read fails the test."""
    result: dict = {}

    def go():
        try:
            result["snap"] = look(watcher, **choices)
        except BaseException as exc:  # handed to the test below
            result["error"] = exc

    thread = threading.Thread(target=go, daemon=True, name="hostile-poll")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return "stuck"
    if "error" in result:
        raise result["error"]
    return result["snap"]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_hostile_line_in_runs_jsonl_is_skipped_and_said(tmp_path, name):
    runs = tmp_path / "runs"
    _, key = finished_store(runs)
    runs_file = runs / "s" / "runs.jsonl"
    good = runs_file.read_bytes().strip()
    runs_file.write_bytes(as_lines(good, HOSTILE[name]))
    watcher = ReportWatcher(runs)
    snap = look(watcher, key=key)
    assert outcome_of(snap, "select").code is Code.DONE
    assert len(watcher.sources[key].runs) == 2  # both good lines, around the bad one
    if HOSTILE[name].strip():
        assert any(str(runs_file) in p for p in snap.detail.problems)
    assert watcher.close(1.0)


# -- a store whose arrays are not what the engine writes ------------------------------------

def _replace_array(group, name, **spec):
    del group[name]
    group.create_array(name, **spec)


def test_arrays_of_different_lengths_are_one_sentence_not_an_index_error(tmp_path):
    runs = tmp_path / "runs"
    run, key = finished_store(runs)
    g = zarr.open_group(str(runs / "s"), mode="a")
    _replace_array(g, "wall_seconds", shape=(2,), dtype=np.float64, fill_value=np.nan)
    _replace_array(g, "done", shape=(7, 3), dtype=bool, fill_value=True)
    watcher = ReportWatcher(runs)
    snap = look(watcher, key=key, run_index=0)
    assert outcome_of(snap, "select").code is Code.DONE
    assert any("'failures'" in p and "delete the store" in p for p in snap.detail.problems)
    assert snap.detail.charts is None and "wall_seconds" in snap.detail.charts_note
    snap = look(watcher, worker=0, token=10)
    assert outcome_of(snap, "worker").code is Code.FAILED
    assert "holds 2 blocks" in snap.drill.note
    snap = look(watcher, block=1, token=20)
    assert outcome_of(snap, "block").code is Code.FAILED
    assert watcher.close(1.0)


def test_an_array_of_text_is_refused_where_numbers_belong(tmp_path):
    runs = tmp_path / "runs"
    run, key = finished_store(runs)
    g = zarr.open_group(str(runs / "s"), mode="a")
    with pytest.warns(Warning):  # zarr warns that fixed-width text has no v3 specification
        _replace_array(g, "wall_seconds", shape=run.grid_shape, dtype="<U4", fill_value="")
    watcher = ReportWatcher(runs)
    look(watcher, key=key)
    snap = look(watcher, block=1, token=20)
    block = outcome_of(snap, "block")
    assert block.code is Code.FAILED
    assert "'wall_seconds'" in block.message and "numbers belong" in block.message
    assert watcher.close(1.0)


def test_garbage_chunk_bytes_are_said_per_array(tmp_path):
    runs = tmp_path / "runs"
    run, key = finished_store(runs)
    for name in ("done", "wall_seconds", "worker_id", "failures"):
        for chunk in (runs / "s" / name).rglob("*"):
            if chunk.is_file() and chunk.name != "zarr.json":
                chunk.write_bytes(b"\x00garbage" * 7)
    watcher = ReportWatcher(runs)
    snap = look(watcher, key=key)
    assert any("'done'" in p for p in snap.detail.problems)
    assert outcome_of(look(watcher, worker=0, token=10), "worker").code is Code.FAILED
    assert outcome_of(look(watcher, block=0, token=11), "block").code is Code.FAILED
    assert watcher.close(1.0)


def test_a_fifo_in_place_of_a_chunk_is_refused_without_opening_it(tmp_path):
    runs = tmp_path / "runs"
    run, key = finished_store(runs)
    chunk = next(p for p in (runs / "s" / "returned_at").rglob("*")
                 if p.is_file() and p.name != "zarr.json")
    chunk.unlink()
    os.mkfifo(chunk)
    watcher = ReportWatcher(runs)
    try:
        snap = poll_within(watcher, key=key)
        assert snap != "stuck", "the poll is stuck opening a FIFO in the tracking store"
        assert "not a regular file" in snap.detail.charts_note
        block = outcome_of(poll_within(watcher, block=0, token=5), "block")
        assert block.code is Code.FAILED and str(chunk) in block.message
    finally:
        watcher.close(0.0)
        _unblock(chunk)


def _unblock(fifo: Path) -> None:
    """Let a reader stuck opening ``fifo`` go (it sees an empty file), so no thread is left."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # nobody is reading it: nothing is stuck
        return
    os.close(fd)


# -- drill-downs with numbers that are not a block or a worker ------------------------------

@pytest.mark.parametrize("worker", [-1, -7])
def test_a_negative_worker_is_invalid_not_a_crash_on_unrecorded_blocks(tmp_path, worker):
    runs = tmp_path / "runs"
    _, key = finished_store(runs)
    watcher = ReportWatcher(runs)
    snap = look(watcher, key=key, worker=worker)
    found = outcome_of(snap, "worker")
    assert found.code is Code.INVALID and "numbered from 0" in found.message
    assert watcher.close(1.0)


@pytest.mark.parametrize("value", [2.5, -0.5, "abc", "7x", float("nan"), [1], True])
def test_a_block_that_is_not_a_whole_number_is_invalid(tmp_path, value):
    runs = tmp_path / "runs"
    _, key = finished_store(runs)
    watcher = ReportWatcher(runs)
    snap = look(watcher, key=key, block=value)
    assert outcome_of(snap, "block").code is Code.INVALID
    assert watcher.close(1.0)


@pytest.mark.parametrize("value", [-1, 20, 10**30])
def test_a_block_outside_the_grid_is_invalid_and_named(tmp_path, value):
    runs = tmp_path / "runs"
    _, key = finished_store(runs)
    watcher = ReportWatcher(runs)
    snap = look(watcher, key=key, block=value)
    found = outcome_of(snap, "block")
    assert found.code is Code.INVALID and f"block {value} is outside" in found.message
    assert watcher.close(1.0)


@pytest.mark.parametrize("value", ["abc", 1.5, -1, [0]])
def test_a_run_index_that_is_not_a_run_is_invalid_and_the_other_actions_still_answered(tmp_path,
                                                                                       value):
    runs = tmp_path / "runs"
    _, key = finished_store(runs)
    watcher = ReportWatcher(runs)
    watcher.submit(1, "select", key=key, run_index=value)
    watcher.submit(2, "open", path=str(tmp_path / "nowhere"))
    snap = watcher.poll({})
    assert [(o.token, o.code) for o in snap.outcomes] == [(1, Code.INVALID), (2, Code.MISSING)]
    assert watcher.close(1.0)


@pytest.mark.parametrize("when", [float("nan"), float("inf"), 1e300, -1e300, "noon"])
def test_a_time_that_is_not_a_clock_time_shows_as_unknown(when):
    assert format_when(when) == "—"


# -- the runs folder and opened paths ------------------------------------------------------------

def test_a_link_loop_in_the_runs_folder_is_passed_over(tmp_path):
    runs = tmp_path / "runs"
    _, key = finished_store(runs)
    (runs / "loop").symlink_to(runs / "loop")
    (runs / "alias").symlink_to(runs / "s")  # a store reached through a link is that store
    watcher = ReportWatcher(runs)
    snap = look(watcher, key=key)
    assert [r.key for r in snap.runs] == [key]
    assert watcher.close(1.0)


@pytest.mark.parametrize("path, code", [
    ("", Code.INVALID),
    ("x" * 5000, Code.INVALID),  # a name longer than the file system allows
    ("missing", Code.MISSING),
    ("afile.txt", Code.INVALID),
])
def test_opening_a_path_that_is_no_store_gives_one_sentence(tmp_path, path, code):
    (tmp_path / "afile.txt").write_text("hello")
    watcher = ReportWatcher(tmp_path / "runs")
    target = "" if not path else (path if len(path) > 255 else str(tmp_path / path))
    snap = look(watcher, opened=[target])
    found = outcome_of(snap, "open")
    assert found.code is code and found.message.startswith(("no path", str(target)[:100]))
    assert watcher.close(1.0)


def test_opening_a_path_with_dotdot_watches_the_store_it_names(tmp_path):
    runs = tmp_path / "runs"
    _, key = finished_store(runs)
    watcher = ReportWatcher(None)
    snap = look(watcher, opened=[runs / "s" / ".." / "s"])
    assert outcome_of(snap, "open").data["key"] == key
    assert watcher.close(1.0)


def test_one_store_breaking_its_reader_leaves_the_others_and_the_answers(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    _, good = finished_store(runs, "good")
    _, bad = finished_store(runs, "bad")
    real = RunSource.refresh

    def refresh(self, now=None):
        if self.key == bad:
            raise MemoryError("the store is larger than memory")
        return real(self, now)

    monkeypatch.setattr(RunSource, "refresh", refresh)
    watcher = ReportWatcher(runs)
    snap = look(watcher, key=good)
    assert outcome_of(snap, "select").code is Code.DONE
    assert {r.key for r in snap.runs} == {good, bad}
    assert snap.detail.key == good
    snap = look(watcher, key=bad, token=5)
    assert outcome_of(snap, "select").code is Code.DONE
    assert any("MemoryError" in p for p in snap.detail.problems)
    assert watcher.close(1.0)


def test_runs_jsonl_replaced_then_deleted_under_the_watch(tmp_path):
    runs = tmp_path / "runs"
    run, key = finished_store(runs)
    run.finish()
    watcher = ReportWatcher(runs)
    look(watcher, key=key)
    assert len(watcher.sources[key].runs) == 2
    runs_file = runs / "s" / "runs.jsonl"
    first = runs_file.read_bytes().splitlines(keepends=True)[0]
    (runs / "s" / "runs.tmp").write_bytes(first)
    os.replace(runs / "s" / "runs.tmp", runs_file)
    watcher.poll({})
    assert len(watcher.sources[key].runs) == 1
    runs_file.unlink()
    watcher.poll({})
    assert watcher.sources[key].runs == []
    assert watcher.close(1.0)


def test_a_ten_megabyte_line_and_a_line_torn_while_watched(tmp_path):
    runs = tmp_path / "runs"
    run, key = finished_store(runs)
    runs_file = runs / "s" / "runs.jsonl"
    line = runs_file.read_bytes()
    with open(runs_file, "ab") as f:
        f.write(b'{"task_id": "' + b"x" * 10_000_000 + b'"}\n')
    watcher = ReportWatcher(runs)
    snap = look(watcher, key=key)
    assert any("skipped" in p for p in snap.detail.problems)
    with open(runs_file, "ab") as f:
        f.write(line[:40])
    snap = watcher.poll({})
    assert any("incomplete" in p for p in snap.detail.problems)
    with open(runs_file, "ab") as f:
        f.write(line[40:])
    snap = watcher.poll({})
    assert len(watcher.sources[key].runs) == 2
    assert not any("incomplete" in p for p in snap.detail.problems)
    assert watcher.close(1.0)


def test_runs_jsonl_deleted_between_its_look_and_its_read(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    run, key = finished_store(runs)
    watcher = ReportWatcher(runs)
    look(watcher, key=key)
    run.finish()
    runs_file = runs / "s" / "runs.jsonl"
    real_stat = os.stat

    def stat_then_vanish(path, *args, **kwargs):
        found = real_stat(path, *args, **kwargs)
        if str(path) == str(runs_file):
            runs_file.unlink()  # another process deletes it right after the size was looked at
        return found

    monkeypatch.setattr(os, "stat", stat_then_vanish)
    snap = watcher.poll({})
    monkeypatch.setattr(os, "stat", real_stat)
    assert snap is None or not any("move it away" in p for p in snap.detail.problems)
    snap = watcher.poll({})
    assert watcher.sources[key].runs == []  # gone is gone, said without blaming the file
    assert not any("cannot be read" in p for p in (snap.detail.problems if snap else ()))
    assert watcher.close(1.0)


def test_a_fifo_in_place_of_runs_jsonl_is_never_opened(tmp_path):
    runs = tmp_path / "runs"
    _, key = finished_store(runs)
    (runs / "s" / "runs.jsonl").unlink()
    os.mkfifo(runs / "s" / "runs.jsonl")
    watcher = ReportWatcher(runs)
    try:
        snap = poll_within(watcher, key=key, opened=[runs / "s" / "runs.jsonl"])
        assert snap != "stuck"
        assert [o.code for o in snap.outcomes] == [Code.DONE, Code.DONE]
    finally:
        watcher.close(0.0)
        _unblock(runs / "s" / "runs.jsonl")
