"""Blockwise runs under hostile input: specs, zarr metadata, runs.jsonl lines, dead schedulers, links.

Each test is one edge a new user met: a spec number JSON cannot hold, a data
type numpy does not know, a context wider than the volume, a garbage object
in runs.jsonl shown as the last run, a SIGKILLed scheduler still "running",
a link planted in the store written through.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from fake_run import create_tracking_arrays

import bw_funcs
from spacrq.blockwise import Roi, Task, run_blockwise, spec
from spacrq.blockwise import report as rp
from spacrq.blockwise.run_state import run_state, scheduler_record
from spacrq.blockwise.tracking import TrackingError
from spacrq.blockwise.watch_source import RunSource
from spacrq.cli import main as cli_main
from spacrq.procs import ProcessRef
from spacrq.runfiles import write_progress

ROOT = Path(__file__).resolve().parents[2]
RAW_PYTHON = ("invalid literal", "could not convert", "Traceback", "OverflowError", "TypeError",
              "AttributeError", "object has no attribute", "not understood")


def _volume(path, shape=(48, 40)):
    arr = zarr.create_array(str(path), shape=shape, chunks=(16, 16), dtype="float32")
    arr[...] = np.random.default_rng(0).random(shape).astype(np.float32)


@pytest.fixture
def vol(tmp_path):
    _volume(tmp_path / "in.zarr")
    return tmp_path


def _step(**over):
    return {"input": "in.zarr", "output": "out.zarr", "block_shape": [16, 16], **over}


def _problems(base, **over):
    return spec.problems(_step(**over), base)


def _by_setting(problems):
    return {p.setting: p for p in problems if p.is_error}


# -- specs -------------------------------------------------------------------------

def test_a_number_json_cannot_hold_in_a_spec_file_is_refused_naming_the_setting(vol, capsys):
    path = vol / "spec.json"
    path.write_text('{"tasks": [{"input": "in.zarr",\n "output": "out.zarr", '
                    '"block_shape": [1e400, 64]}]}')
    assert cli_main(["blockwise", "run", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "'block_shape'" in err and "line 2" in err
    assert not any(raw in err for raw in RAW_PYTHON), err
    assert not (vol / "out.zarr").exists()


@pytest.mark.parametrize("value", [[float("inf"), 16], [float("nan"), 16], [16.5, 16],
                                   [True, 16], ["16", 16], [0, 16], 16, "x", [16, 16, 16]])
def test_block_shape_is_one_whole_size_per_axis(vol, value):
    found = _by_setting(_problems(vol, block_shape=value))
    assert set(found) == {"block_shape"}
    assert not any(raw in found["block_shape"].message for raw in RAW_PYTHON)


def test_a_data_type_numpy_does_not_know_is_refused_before_anything_runs(vol, capsys):
    found = _by_setting(_problems(vol, dtype="notatype"))
    assert "notatype" in found["dtype"].message and "float32" in found["dtype"].fix
    assert "dtype" in _by_setting(_problems(vol, dtype="U10"))
    assert _by_setting(_problems(vol, dtype="uint16")) == {}
    path = vol / "spec.json"
    path.write_text(json.dumps({"tasks": [_step(dtype="notatype", executor="serial")]}))
    assert cli_main(["blockwise", "run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "dtype 'notatype'" in err and not any(raw in err for raw in RAW_PYTHON)
    assert not (vol / "out.zarr").exists()


@pytest.mark.parametrize("setting, value", [
    ("max_retries", "x"), ("max_retries", -1), ("max_retries", 1e9), ("timeout", "y"),
    ("timeout", 0), ("level", "z"), ("sigma", "x"), ("sigma", -2), ("num_workers", "x"),
    ("num_workers", 2.5), ("num_workers", 10 ** 6), ("resource_tracking", "yes"),
    ("upstream", "smooth"), ("input", 5), ("executor", ["local"]),
])
def test_every_bad_setting_is_named_in_plain_words(vol, setting, value):
    over = {setting: value}
    if setting == "sigma":
        over["operation"] = "threshold"  # checked even where the operation does not use it
    found = _by_setting(_problems(vol, **over))
    assert setting in found, found
    message = found[setting].message
    assert message.startswith(setting) and found[setting].fix
    assert not any(raw in message for raw in RAW_PYTHON), message


def test_the_same_settings_never_leak_raw_python_text_from_build(vol, capsys):
    path = vol / "spec.json"
    path.write_text(json.dumps({"tasks": [_step(max_retries="x", operation="threshold",
                                                 sigma="x", timeout="soon")]}))
    assert cli_main(["blockwise", "run", str(path)]) == 2
    err = capsys.readouterr().err
    for setting in ("max_retries", "sigma", "timeout"):
        assert setting in err
    assert not any(raw in err for raw in RAW_PYTHON), err


def test_a_context_wider_than_the_volume_is_refused_at_validation(vol):
    found = _by_setting(_problems(vol, context=1e9, operation="threshold"))
    assert "context" in found and "48 voxels" in found["context"].message
    assert "context" in _by_setting(_problems(vol, context=[0, 41]))
    assert "context" in _by_setting(_problems(vol, context=[1, 2, 3]))
    assert _by_setting(_problems(vol, context=[8, 40])) == {}
    huge_sigma = _by_setting(_problems(vol, sigma=1e9))
    assert "sigma" in huge_sigma and "more than the whole input" in huge_sigma["sigma"].message
    with pytest.raises(spec.SpecError, match="context"):
        spec.build_task(_step(context=1e9), vol)  # the builder refuses it too, nothing is made
    assert not (vol / "out.zarr").exists()


def test_too_many_blocks_for_a_tracking_store_are_refused(tmp_path):
    meta = tmp_path / "big.zarr" / "zarr.json"
    meta.parent.mkdir()
    meta.write_text(json.dumps({"zarr_format": 3, "node_type": "array",
                                "shape": [100_000, 100_000], "data_type": "uint8"}))
    found = _by_setting(spec.problems({"input": "big.zarr", "output": "o.zarr",
                                       "block_shape": [1, 1]}, tmp_path))
    assert "tracking store keeps" in found["block_shape"].message


@pytest.mark.parametrize("content, words", [
    (b"[1, 2]", "holds an array where an object belongs"),
    (b"\xff\xfe{", "not valid JSON"),
    (b'{"zarr_format": 3, "node_type": "array", "shape": "big"}', "shape"),
    (b'{"zarr_format": 3, "node_type": "array", "shape": [0, 4]}', "no voxels"),
    (b'{"zarr_format": 3, "node_type": "array", "shape": [1e400]}', "not valid JSON"),
    (b'{"zarr_format": 3}', "does not describe a zarr array"),
    (b"", "empty"),
])
def test_input_metadata_of_the_wrong_shape_is_a_sentence_naming_the_file(tmp_path, content, words):
    meta = tmp_path / "in.zarr" / "zarr.json"
    meta.parent.mkdir()
    meta.write_bytes(content)
    found = _by_setting(spec.problems(_step(), tmp_path))
    assert set(found) == {"input"}
    assert words in found["input"].message
    if words != "no voxels":
        assert str(meta) in found["input"].message
    assert meta.read_bytes() == content


def test_an_output_folder_that_is_not_an_array_is_refused(vol):
    (vol / "out.zarr").mkdir()
    (vol / "out.zarr" / "zarr.json").write_text("{garbage")
    found = _by_setting(_problems(vol))
    assert "output" in found and "not valid JSON" in found["output"].message
    with pytest.raises(spec.SpecError, match="cannot be reused"):
        spec.build_task(_step(), vol)


def test_a_misspelt_setting_is_a_warning_not_a_silent_default(vol):
    found = [p for p in _problems(vol, block_shap=[8, 8]) if p.setting == "block_shap"]
    assert found and not found[0].is_error and "spelling" in found[0].fix
    assert spec.build_task(_step(block_shap=[8, 8], executor="serial"), vol) is not None


@pytest.mark.parametrize("content", [b"[1]", b'{"tasks": 5}', b'{"tasks": []}', b"null"])
def test_a_spec_of_the_wrong_shape_points_to_a_doc_that_exists(tmp_path, content):
    path = tmp_path / "spec.json"
    path.write_bytes(content)
    with pytest.raises(spec.SpecError) as caught:
        spec.load_spec(path)
    message = str(caught.value)
    assert str(path) in message
    for named in ("docs/blockwise.md",):
        if named in message:
            assert (ROOT / named).is_file()
    assert "docs/blockwise.md" in message or "--describe" in message


def test_the_spec_doc_describes_every_setting():
    text = (ROOT / "docs" / "blockwise.md").read_text(encoding="utf-8")
    for setting in spec.DEFAULTS:
        assert f"`{setting}`" in text, setting
    assert '"tasks"' in text and str(spec.MAX_WORKERS) in text


def test_a_roi_of_numbers_that_are_not_whole_is_one_sentence():
    for bad in [(float("inf"), 4), ("x", 4), (None, 4)]:
        with pytest.raises(ValueError, match="whole numbers"):
            Roi((0, 0), bad)


# -- runs.jsonl --------------------------------------------------------------------

def _line(task_id="smooth", started_at=100.0):
    blocks = rp.summarize_blocks(count=4, skipped=0, failures=0, round_trip=[0.2] * 4)
    return rp.TaskReport(task_id, blocks, rp.summarize_workers([]), started_at, started_at + 5)


@pytest.mark.parametrize("garbage", [
    {"task_id": "x"}, {"hello": 1}, {"task_id": "smooth", "blocks": 5},
    {"task_id": "smooth", "started_at": "monday", "finished_at": 1.0, "blocks": {"count": 1},
     "workers": {}},
    {"task_id": "smooth", "started_at": 1.0, "finished_at": 2.0, "blocks": {"count": "many"},
     "workers": {}},
    {"task_id": "smooth", "started_at": 1.0, "finished_at": 2.0, "blocks": {"count": 3},
     "workers": {"count": "two"}},
    {"task_id": "", "started_at": 1.0, "finished_at": 2.0, "blocks": {"count": 3}, "workers": {}},
])
def test_a_json_object_garbage_line_is_skipped_and_said_never_the_last_run(tmp_path, garbage, capsys):
    runs = tmp_path / "runs.jsonl"
    rp.append_run(runs, _line())
    with open(runs, "a") as handle:
        handle.write(json.dumps(garbage) + "\n")
    tail = rp.RunsTail(runs)
    reports = tail.read()
    assert [r.task_id for r in reports] == ["smooth"] and reports[0].blocks.count == 4
    assert tail.bad_lines == 1 and str(runs) in tail.last_problem
    assert rp.read_last_run(runs).blocks.count == 4
    assert cli_main(["report", str(runs)]) == 0
    out, err = capsys.readouterr()
    assert "smooth  4 blocks" in out and "0 blocks" not in out
    assert "1 damaged line" in err and "not a run report" in err


# -- one notion of a run's state ----------------------------------------------------

def _dead_scheduler() -> dict:
    """The record of a scheduler process that has exited (its pid and start time)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    ref = ProcessRef.of(proc.pid)
    proc.wait(timeout=30)
    return {"pid": ref.pid, "started": ref.started or 1.0, "host": scheduler_record()["host"]}


def _killed_store(path, scheduler):
    """A store whose run went to 30 of 48 blocks in memory but flushed only 5 done marks."""
    group = zarr.open_group(str(path), mode="w", attributes={
        "spacrq_tracking": 1, "task_id": "smooth", "layout_hash": "x",
        "geometry": {"grid_shape": [6, 8], "fit": "valid"}})
    create_tracking_arrays(group, (6, 8))
    for i in range(5):
        coord = np.unravel_index(i, (6, 8))
        group["done"][coord] = True
        group["sent_at"][coord] = 200.0 + i
        group["returned_at"][coord] = 200.5 + i
        group["wall_seconds"][coord] = 0.4
        group["worker_id"][coord] = 0
    import time
    write_progress(path / "progress.json", {
        "run_id": "r1", "state": "running", "pid": scheduler["pid"], "scheduler": scheduler,
        "started_at": 199.0, "written_at": time.time(),  # fresh: it died a moment ago
        "task": {"task_id": "smooth", "total": 48, "done": 30, "skipped": 0, "failed": 0,
                 "orphaned": 0, "in_flight": 2}, "workers": [], "seq": 30, "recent": []})


def test_a_store_whose_scheduler_died_reads_interrupted_with_durable_counts(tmp_path, capsys):
    store = tmp_path / "smooth"
    _killed_store(store, _dead_scheduler())
    t = rp.report_from_store(store)
    assert t.outcome["state"] == "interrupted"
    assert (t.outcome["done"], t.outcome["total"]) == (5, 48)  # not the 30 held in memory
    assert t.headline().endswith("— interrupted: 5 of 48 done")
    assert cli_main(["report", str(store)]) == 0
    out = capsys.readouterr().out
    assert "interrupted: 5 of 48 done" in out and "running" not in out
    source = RunSource(store, store / "runs.jsonl")  # the pane says the same, at once
    source.refresh()
    row = source.row().value
    assert (row.state, row.done, row.total) == ("interrupted", 5, 48)


def test_a_reused_pid_is_not_the_scheduler(tmp_path):
    me = scheduler_record()
    store = tmp_path / "smooth"
    _killed_store(store, {**me, "started": me["started"] - 3600})  # this pid, another process
    assert rp.report_from_store(store).outcome["state"] == "interrupted"
    _killed_store(store, me)  # the very process: still running
    t = rp.report_from_store(store)
    assert t.outcome["state"] == "running" and t.outcome["done"] == 30
    source = RunSource(store, store / "runs.jsonl")
    source.refresh()
    assert source.row().value.state == "running"


@pytest.mark.parametrize("progress", [
    {"state": "running", "pid": "x"}, {"state": "running", "pid": True},
    {"state": "running"}, {"state": "running", "scheduler": [1, 2]}, {"state": 5}, None, [],
])
def test_a_snapshot_naming_no_live_process_is_never_running(progress):
    assert run_state(progress) in ("interrupted", None)


# -- links planted in the store -------------------------------------------------------

def _plant(link: Path, victim: Path, content: bytes = b"precious\n") -> None:
    victim.write_bytes(content)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)


def test_links_planted_in_a_store_never_get_their_targets_written(tmp_path):
    store = tmp_path / "store"
    logs = store / "logs"
    victims = {}
    for name in (".worker-0.slot", ".worker-1.slot", "worker-0.log", "scheduler.log"):
        victims[name] = tmp_path / f"victim-{name.strip('.')}"
        _plant(logs / name, victims[name])
    victims["runs.jsonl"] = tmp_path / "victim-runs"
    _plant(store / "runs.jsonl", victims["runs.jsonl"])
    victims["progress.json"] = tmp_path / "victim-progress"
    _plant(store / "progress.json", victims["progress.json"])
    os.mkfifo(logs / "worker-1.log")  # a FIFO would hang an open for writing
    task = Task("t", Roi((0,), (80,)), Roi((0,), (10,)), Roi((0,), (10,)), bw_funcs.noop,
                num_workers=2, tracking_path=store)
    report = run_blockwise([task])
    assert report.succeeded, report.problems()
    for name, victim in victims.items():
        assert victim.read_bytes() == b"precious\n", name
    for name in ("worker-0.log", "worker-1.log", "scheduler.log", "progress.json"):
        path = logs / name if name != "progress.json" else store / name
        assert path.is_file() and not path.is_symlink(), name
    progress = json.loads((store / "progress.json").read_text())
    assert progress["state"] == "finished" and progress["scheduler"]["pid"] == os.getpid()
    assert progress["scheduler"]["started"] == ProcessRef.of(os.getpid()).started
    said = (logs / "scheduler.log").read_text()
    assert "never writes through links" in said and "was not appended" in said
    assert "worker 0 of task 't' starting" in (logs / "worker-0.log").read_text()


def test_a_linked_logs_folder_stops_the_run_before_it_starts(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = tmp_path / "store"
    store.mkdir()
    (store / "logs").symlink_to(elsewhere)
    task = Task("t", Roi((0,), (40,)), Roi((0,), (10,)), Roi((0,), (10,)), bw_funcs.noop,
                tracking_path=store)
    with pytest.raises(TrackingError, match="symbolic link"):
        run_blockwise([task])
    assert list(elsewhere.iterdir()) == []


def test_a_garbled_store_is_one_sentence_alone_and_a_note_among_others(tmp_path, capsys):
    runs = tmp_path / "runs"
    store = runs / "broken"
    _killed_store(store, scheduler_record())
    (store / "zarr.json").write_bytes(b'["not", "a", "group"]')
    rp.append_run(rp.runs_file(runs / "fine"), _line("fine"))
    assert cli_main(["report", str(store)]) == 2
    err = capsys.readouterr().err
    assert str(store / "zarr.json") in err and err.count("\n") == 1 and "Traceback" not in err
    assert cli_main(["report", str(runs)]) == 0
    out, err = capsys.readouterr()
    assert "fine  4 blocks" in out and str(store / "zarr.json") in err and "left out" in err


def test_a_garbled_progress_file_is_said_and_the_store_still_reported(tmp_path, capsys):
    store = tmp_path / "smooth"
    _killed_store(store, scheduler_record())
    (store / "progress.json").write_bytes(b'{"state": "running", "done": NaN}')
    assert cli_main(["report", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "smooth  5 blocks" in out and str(store / "progress.json") in err


def test_a_folder_where_runs_jsonl_belongs_is_said_by_the_report_and_the_pane(tmp_path, capsys):
    store = tmp_path / "smooth"
    _killed_store(store, scheduler_record())
    (store / "runs.jsonl").mkdir()
    assert cli_main(["report", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "smooth  5 blocks" in out and f"{store / 'runs.jsonl'} cannot be read" in err
    source = RunSource(store, store / "runs.jsonl")
    source.refresh()
    assert any("cannot be read" in p for p in source.row().value.problems)


@pytest.mark.parametrize("where", ["done", "done/c", "failures/c/0"])
def test_a_store_folder_linked_elsewhere_is_refused_before_anything_is_written(tmp_path, where):
    task = Task("t", Roi((0, 0), (40, 40)), Roi((0, 0), (10, 10)), Roi((0, 0), (10, 10)),
                bw_funcs.noop, tracking_path=tmp_path / "store", num_workers=1)
    assert run_blockwise([task]).succeeded
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("precious")
    link = tmp_path / "store" / where
    shutil.rmtree(link)
    link.symlink_to(elsewhere)
    with pytest.raises(TrackingError, match="symbolic link to a folder"):
        run_blockwise([task])
    assert [p.name for p in elsewhere.iterdir()] == ["keep"]


def test_a_run_killed_before_its_report_line_is_written_down_by_the_next_run(tmp_path, capsys):
    """The history kept a killed run only until the next run took its store over: then its
    start was gone from progress.json and its blocks read as "done before".  The next run
    now writes the dead run's line (interrupted) before it publishes its own."""
    import time
    store = tmp_path / "store"

    def task():
        return Task("t", Roi((0,), (40,)), Roi((0,), (10,)), Roi((0,), (10,)), bw_funcs.noop,
                    tracking_path=store)
    run_blockwise([task()], executor="serial")
    first = rp.read_runs(rp.runs_file(store))
    assert [r.outcome["state"] for r in first] == ["finished"]
    dead = dict(scheduler_record(), started=1.0)  # (this pid, not the process that started then)
    began = time.time()
    progress = json.loads((store / "progress.json").read_text())
    progress.update(state="running", run_id="r-dead", started_at=began, scheduler=dead,
                    pid=dead["pid"], written_at=began)
    write_progress(store / "progress.json", progress)
    run_blockwise([task()], executor="serial")
    runs = rp.read_runs(rp.runs_file(store))
    assert [r.outcome["state"] for r in runs] == ["finished", "interrupted", "finished"]
    assert abs(runs[1].started_at - began) < 1e-3 and "killed" in runs[1].outcome["ended"]
    assert "killed before it wrote its report line" in capsys.readouterr().err
    run_blockwise([task()], executor="serial")  # written down once, not at every run
    assert [r.outcome["state"] for r in rp.read_runs(rp.runs_file(store))] == \
        ["finished", "interrupted", "finished", "finished"]
    assert cli_main(["report", str(store), "--history"]) == 0
    assert "4 runs" in capsys.readouterr().out
