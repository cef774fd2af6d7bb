"""The tracking store: resume, refusal of a foreign layout, corruption, batched writes."""
from __future__ import annotations

import functools

import bw_funcs
import numpy as np
import pytest
import zarr

from spacrq.blockwise import LayoutMismatch, Roi, Task, TrackingError, run_blockwise
from spacrq.blockwise.grid import BlockGrid
from spacrq.blockwise.report_store import block
from spacrq.blockwise.tracking import TrackingStore, chunk_shape


def _task(store, fn=bw_funcs.noop, size=80, block=10, **kw):
    return Task("t", Roi((0,), (size,)), Roi((0,), (block,)), Roi((0,), (block,)), fn,
                tracking_path=store, **kw)


def test_rerun_skips_done_blocks_and_retries_failed_ones(tmp_path):
    store = tmp_path / "store"
    first = run_blockwise([_task(store, functools.partial(bw_funcs.raise_on, {2, 5}), max_retries=0)],
                          executor="serial")
    assert first.outcome["t"]["done"] == 6 and not first.succeeded
    assert zarr.open_group(str(store), mode="r")["failures"][...].tolist() == [0, 0, 1, 0, 0, 1, 0, 0]
    second = run_blockwise([_task(store, num_workers=2)])
    assert second.succeeded
    assert second.outcome["t"]["skipped"] == 6 and second.outcome["t"]["done"] == 2
    assert second["t"].blocks.skipped == 6 and second["t"].blocks.count == 8
    assert second["t"].blocks.round_trip.n == 2  # skipped blocks are counted, never timed
    third = run_blockwise([_task(store)])
    assert third.succeeded and third.outcome["t"]["skipped"] == 8
    assert third["t"].workers.count == 0  # nothing to do: no worker was started
    assert len((store / "runs.jsonl").read_text().splitlines()) == 3


def test_a_store_for_another_layout_is_refused_in_one_sentence(tmp_path):
    store = tmp_path / "store"
    run_blockwise([_task(store)], executor="serial")
    with pytest.raises(LayoutMismatch) as err:
        run_blockwise([_task(store, block=20)])
    message = str(err.value)
    assert str(store) in message and "delete the folder" in message and "\n" not in message


def test_a_corrupt_store_is_one_sentence_and_starts_no_worker(tmp_path):
    store = tmp_path / "store"
    run_blockwise([_task(store)], executor="serial")
    (store / "zarr.json").write_text("{not json")
    with pytest.raises(TrackingError) as err:
        run_blockwise([_task(store)])
    assert "cannot be read" in str(err.value) and str(store) in str(err.value)
    # an array whose chunks were truncated
    store2 = tmp_path / "store2"
    run_blockwise([_task(store2)], executor="serial")
    for chunk in (store2 / "done").rglob("c/*"):
        if chunk.is_file():
            chunk.write_bytes(b"garbage")
    with pytest.raises(TrackingError, match="cannot be read"):
        run_blockwise([_task(store2)])


def test_a_zarr_group_that_is_not_a_store_is_refused(tmp_path):
    zarr.create_group(str(tmp_path / "other"))
    with pytest.raises(TrackingError, match="not a spacrq tracking store"):
        run_blockwise([_task(tmp_path / "other")])


def test_flushes_write_dirty_chunks_only(tmp_path):
    grid = BlockGrid(((0, 0), (400 * 4, 400 * 4)), ((0, 0), (4, 4)), ((0, 0), (4, 4)))
    assert grid.size == 160_000
    chunks = chunk_shape(grid.shape)
    assert np.prod(chunks) <= 1 << 16
    store = TrackingStore.open(tmp_path / "s", "big", grid, resource_tracking=True)
    store.record(np.arange(0, 100), done=True, wall_seconds=np.ones(100))
    assert store.flush() == 1
    store.record(np.arange(grid.size), done=True, wall_seconds=np.ones(grid.size))
    assert store.flush() == int(np.prod([-(-n // c) for n, c in zip(grid.shape, chunks)])) <= 4
    assert store.flush() == 0
    assert store.close() is None
    again = TrackingStore.open(tmp_path / "s", "big", grid, resource_tracking=True)
    assert again.done_mask().all()
    assert again.block_record(5)["stats"]["wall_seconds"] == 1.0


def test_stats_arrays_follow_the_conventions(tmp_path):
    store = tmp_path / "store"
    report = run_blockwise([_task(store, resource_tracking=True, num_workers=2)])
    g = zarr.open_group(str(store), mode="r")
    assert g.attrs["spacrq_tracking"] == 1 and g.attrs["geometry"]["grid_shape"] == [8]
    assert g["worker_id"].dtype == np.int32 and set(g["worker_id"][...].tolist()) <= {0, 1}
    assert (g["returned_at"][...] >= g["sent_at"][...]).all()
    assert (g["peak_rss_bytes"][...] > 0).all() and (g["io_read_bytes"][...] >= 0).all()
    rec = block(report["t"].require_store(), 0)
    assert rec.done and rec.worker_id in (0, 1) and rec.round_trip >= 0
