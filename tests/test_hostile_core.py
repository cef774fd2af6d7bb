"""Every reader of a blockwise run's files, and the run-file protocol's own, fed the same hostile bytes.

For each reader and each of :data:`hostile.HOSTILE` (plus an object whose
fields have the wrong types): no exception escapes other than the reader's
own one-sentence error, that sentence names the file, and the file is left
exactly as it was.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hostile import HOSTILE, as_lines

from spacrq import runfiles
from spacrq.blockwise import report as rp
from spacrq.blockwise import spec
from spacrq.blockwise.grid import BlockGrid
from spacrq.blockwise.report_model import ReportError
from spacrq.blockwise.tracking import TrackingError, TrackingStore
from spacrq.blockwise.watch_source import RunSource

CASES = {**HOSTILE,
         "wrong_types": b'{"state": "running", "pid": "x", "task": 5, "workers": "x", '
                        b'"recent": [[1, "a"]], "started_at": "x", "tasks": {"a": 1}, '
                        b'"node_type": 7, "shape": "big", "attributes": []}'}
EMPTY = {"empty", "whitespace"}
GOOD_LINE = (b'{"task_id": "smooth", "started_at": 1.0, "finished_at": 2.0, "tracked": true, '
             b'"blocks": {"count": 4}, "workers": {"count": 0}}')


def _plant(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _store(path: Path) -> Path:
    """A real tracking store of 2 x 3 blocks, two of them done."""
    grid = BlockGrid(((0, 0), (20, 30)), ((0, 0), (10, 10)), ((0, 0), (10, 10)))
    store = TrackingStore.open(path, "smooth", grid, resource_tracking=True)
    store.record(np.array([0, 1]), done=np.array([True, True]),
                 returned_at=np.array([5.0, 6.0]), sent_at=np.array([4.0, 5.0]))
    store.close()
    return path


@pytest.fixture(params=sorted(CASES))
def case(request):
    return request.param, CASES[request.param]


# -- blockwise readers ------------------------------------------------------------------

def test_spec_file(tmp_path, case):
    name, data = case
    path = _plant(tmp_path / "spec.json", data)
    with pytest.raises(spec.SpecError) as caught:
        spec.load_spec(path)
    assert str(path) in str(caught.value)
    assert path.read_bytes() == data


def test_zarr_json_of_the_input(tmp_path, case):
    name, data = case
    meta = _plant(tmp_path / "in.zarr" / "zarr.json", data)
    found = [p for p in spec.problems({"input": "in.zarr", "output": "out.zarr",
                                       "block_shape": [8, 8]}, tmp_path) if p.is_error]
    assert [p.setting for p in found] == ["input"]
    assert str(meta) in found[0].message
    assert meta.read_bytes() == data
    with pytest.raises(spec.SpecError):
        spec.build_task({"input": "in.zarr", "output": "out.zarr", "block_shape": [8, 8]}, tmp_path)
    assert not (tmp_path / "out.zarr").exists()


def test_runs_jsonl_lines(tmp_path, case):
    name, bad = case
    runs = _plant(tmp_path / "runs.jsonl", as_lines(GOOD_LINE, bad))
    before = runs.read_bytes()
    tail = rp.RunsTail(runs)
    reports = tail.read()
    assert [r.blocks.count for r in reports] == [4, 4]
    if name in EMPTY:
        assert tail.bad_lines == 0
    else:
        assert tail.bad_lines >= 1 and str(runs) in tail.last_problem
    assert rp.read_last_run(runs).task_id == "smooth"
    assert runs.read_bytes() == before


def test_progress_json(tmp_path, case):
    name, data = case
    store = _store(tmp_path / "store")
    progress = _plant(store / "progress.json", data)
    notes: list[str] = []
    report = rp.report_from_store(store, notes)
    assert report.task_id == "smooth" and report.blocks.count == 2
    source = RunSource(store, store / "runs.jsonl")
    source.refresh()
    row = source.row().value
    assert row.state in ("partial", "interrupted") and row.done == 2
    if name not in EMPTY | {"wrong_types"}:
        assert any(str(progress) in n for n in notes)
        assert any(str(progress) in p for p in row.problems)
    assert progress.read_bytes() == data


def test_tracking_store_metadata(tmp_path, case):
    name, data = case
    store = _store(tmp_path / "store")
    meta = _plant(store / "zarr.json", data)
    with pytest.raises(ReportError) as caught:
        rp.report_from_store(store)
    assert str(store) in str(caught.value)
    grid = BlockGrid(((0, 0), (20, 30)), ((0, 0), (10, 10)), ((0, 0), (10, 10)))
    with pytest.raises(TrackingError) as caught:
        TrackingStore.open(store, "smooth", grid, resource_tracking=True)
    assert str(store) in str(caught.value)
    assert meta.read_bytes() == data


def test_tracking_array_metadata(tmp_path, case):
    name, data = case
    store = _store(tmp_path / "store")
    meta = _plant(store / "done" / "zarr.json", data)
    with pytest.raises(ReportError) as caught:
        rp.report_from_store(store)
    assert str(store) in str(caught.value) and "'done'" in str(caught.value)
    assert meta.read_bytes() == data


# -- the run-file protocol's readers ------------------------------------------------------

def test_read_json(tmp_path, case):
    name, data = case
    path = _plant(tmp_path / "doc.json", data)
    try:
        doc = runfiles.read_json(path, "DEFAULT", expect=dict)
    except runfiles.RunFileError as exc:
        assert str(path) in str(exc) and exc.path == path
    else:
        assert doc == "DEFAULT" and name in EMPTY or isinstance(doc, dict)
    assert path.read_bytes() == data


def test_read_json_checked(tmp_path, case):
    name, data = case
    path = _plant(tmp_path / "doc.json", data)
    doc, problem = runfiles.read_json_checked(path, "DEFAULT", expect=dict)
    if problem is None:
        assert name in EMPTY and doc == "DEFAULT" or isinstance(doc, dict)
    else:
        assert doc == "DEFAULT" and str(path) in problem
    assert path.read_bytes() == data


def test_asked_and_control_problem(tmp_path, case):
    name, data = case
    path = _plant(tmp_path / runfiles.CONTROL_FILE, data)
    answer = runfiles.asked(tmp_path)
    problem = runfiles.control_problem(tmp_path)
    if name in EMPTY or name == "wrong_types":
        assert problem is None
    else:
        assert answer == {} and str(path) in problem
    assert path.read_bytes() == data


def test_read_progress(tmp_path, case):
    name, data = case
    path = _plant(tmp_path / runfiles.PROGRESS_FILE, data)
    doc = runfiles.read_progress(path)
    assert doc is None or isinstance(doc, dict)
    assert path.read_bytes() == data


def test_jsonl_tail(tmp_path, case):
    name, bad = case
    path = _plant(tmp_path / "journal.jsonl", as_lines(b'{"n": 1}', bad))
    before = path.read_bytes()
    tail = runfiles.JsonlTail(path)
    records = tail.read()
    good = [r for r in records if r == {"n": 1}]
    assert len(good) == 2
    if name not in EMPTY and name != "wrong_types":
        assert tail.bad_lines >= 1 and str(path) in tail.last_problem
    assert path.read_bytes() == before


def test_loads(tmp_path, case):
    name, data = case
    where = tmp_path / "what.json"
    try:
        runfiles.loads(data, where=where)
    except runfiles.RunFileError as exc:
        assert str(where) in str(exc)
