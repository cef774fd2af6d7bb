"""Blockwise jobs on a real dask cluster: a scheduler and two workers as processes on loopback.

The durable state is spacrq's tracking store: a queue job on the cluster
finishes with its store right, a worker SIGKILLed mid-run costs only its
blocks in flight (no block is marked done without its output), a stopped
run resumed on a new cluster (the first one gone) skips every done block,
and an unreachable scheduler is refused at validate.
"""
from __future__ import annotations

import functools
import json
import os
import signal
import threading

import bw_funcs
import numpy as np
import pytest
import zarr
from dask_procs import DaskProcs, free_port

from spacrq.blockwise import Roi, Task, ops, run_blockwise
from spacrq.blockwise.report import block_columns, read_last_run, runs_file
from spacrq.cli import main as cli_main
from spacrq.queue import Job, Queue, load_queue, save_queue
from waiting import wait_until  # tests/waiting.py (tests/ is on the path)


@pytest.fixture
def dask_cluster(tmp_path):
    procs = DaskProcs(tmp_path / "dask-logs", workers=2)
    try:
        yield procs
    finally:
        procs.close()


def _volume(path, shape=(64, 48)):
    data = np.random.default_rng(1).random(shape).astype(np.float32)
    arr = zarr.create_array(str(path), shape=shape, chunks=(16, 16), dtype="float32")
    arr[...] = data
    return data


def test_a_queue_job_on_a_dask_scheduler_completes_and_its_store_is_right(
        tmp_path, dask_cluster, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = _volume(tmp_path / "in.zarr")
    settings = {"input": "in.zarr", "output": "out.zarr", "block_shape": [16, 16],
                "operation": "gaussian", "sigma": 1.0, "tracking": "track",
                "executor": "dask", "scheduler": dask_cluster.address}
    path = tmp_path / "night.queue.json"
    queue = Queue()
    queue.add(Job("blockwise", settings=settings, id="smooth", cwd=str(tmp_path)))
    save_queue(queue, path)
    assert cli_main(["queue", "validate", str(path)]) == 0
    assert cli_main(["queue", "run", str(path)]) == 0
    capsys.readouterr()
    job = load_queue(path).jobs[0]
    assert job.status == "success", job.error
    out = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")
    np.testing.assert_allclose(out[...], ops.gaussian(data, 1.0), rtol=1e-5, atol=1e-6)
    cols = block_columns(tmp_path / "track")
    assert cols["done"].all() and len(cols["done"]) == 12
    # the store got the dask workers' ids and timings: small integers, measured walls
    assert set(cols["worker_id"].tolist()) <= {0, 1}
    assert (cols["wall_seconds"] > 0).all()
    last = read_last_run(runs_file(tmp_path / "track"))
    assert last.outcome["executor"] == "dask"
    assert last.outcome["cluster"] == f"dask scheduler {dask_cluster.address}"
    addresses = last.outcome["dask_workers"]
    assert 1 <= len(addresses) <= 2 and set(addresses) <= dask_cluster.worker_addresses()
    assert last.workers.unmanaged_clients == len(addresses)
    # dask workers say how long each block waited, so the overhead is spacrq's and dask's cost
    assert last.blocks.queued.n == 12 and last.blocks.overhead.n == 12
    assert last.blocks.overhead.mean < last.blocks.round_trip.mean
    # and the live snapshot names the cluster too, so the pane says it while the run goes
    from spacrq.runfiles import read_progress
    snapshot = read_progress(tmp_path / "track" / "progress.json")
    assert snapshot["ran_on"]["cluster"] == f"dask scheduler {dask_cluster.address}"


def test_a_sigkilled_dask_worker_costs_only_its_blocks_in_flight(tmp_path, dask_cluster):
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    store = tmp_path / "store"
    victim = dask_cluster.workers[0]

    def kill_when_started():
        wait_until(lambda: len(list(stamps.glob("lost-*.json"))) >= 4, what="first blocks")
        os.killpg(victim.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_started)
    killer.start()
    try:
        task = Task("lost", Roi((0,), (300,)), Roi((0,), (10,)), Roi((0,), (10,)),
                    functools.partial(bw_funcs.stamp, str(stamps), sleep=0.05),
                    tracking_path=store, resource_tracking=True)
        report = run_blockwise([task], executor="dask", dask_cluster=dask_cluster.address)
    finally:
        killer.join()
    assert victim.wait(timeout=10) == -signal.SIGKILL  # one worker really was lost mid-run
    assert report.succeeded, report.problems()
    assert report.outcome["lost"]["done"] == 30
    cols = block_columns(store)
    done = cols["spatial_id"][cols["done"].astype(bool)]
    assert len(done) == 30
    for sid in done:  # no block is marked done without its output
        assert (stamps / f"lost-{sid}.json").exists()
    alive = dask_cluster.worker_addresses()
    assert len(alive) == 1
    for worker_id, address in enumerate(report["lost"].outcome["dask_workers"]):
        # the report tells the lost worker from the one that carried on
        assert report["lost"].worker(worker_id).exit == ("clean" if address in alive else "error")


def test_a_stopped_run_resumes_on_a_new_cluster_and_skips_every_done_block(tmp_path):
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    store = tmp_path / "store"

    def task():
        return Task("resume", Roi((0,), (400,)), Roi((0,), (10,)), Roi((0,), (10,)),
                    functools.partial(bw_funcs.stamp, str(stamps), sleep=0.02),
                    tracking_path=store)

    first = DaskProcs(tmp_path / "first", workers=2)
    try:
        def stop():
            return len(list(stamps.glob("resume-*.json"))) >= 6

        report = run_blockwise([task()], executor="dask", dask_cluster=first.address,
                               stop_requested=stop)
    finally:
        first.close()  # the cluster is gone; the store is the record
    o = report.outcome["resume"]
    assert report.interrupted and 6 <= o["done"] < 40
    ran_first = {p.name for p in stamps.iterdir()}
    assert len(ran_first) == o["done"]  # blocks in flight finished, nothing more was handed out
    for p in stamps.iterdir():
        p.unlink()
    second = DaskProcs(tmp_path / "second", workers=2)
    try:
        again = run_blockwise([task()], executor="dask", dask_cluster=second.address)
    finally:
        second.close()
    assert again.succeeded
    assert again.outcome["resume"]["skipped"] == o["done"]
    assert again.outcome["resume"]["done"] == 40 - o["done"]
    assert not ran_first & {p.name for p in stamps.iterdir()}  # no done block ran again


def test_an_unreachable_scheduler_is_refused_at_validate_and_nothing_runs(tmp_path, capsys,
                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    _volume(tmp_path / "in.zarr")
    address = f"tcp://127.0.0.1:{free_port()}"
    settings = {"input": "in.zarr", "output": "out.zarr", "block_shape": [16, 16],
                "executor": "dask", "scheduler": address}
    path = tmp_path / "night.queue.json"
    queue = Queue()
    queue.add(Job("blockwise", settings=settings, id="smooth", cwd=str(tmp_path)), validate=False)
    save_queue(queue, path)
    assert cli_main(["queue", "validate", str(path)]) == 1
    said = capsys.readouterr().out
    assert f"the dask scheduler at {address} cannot be reached" in said
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"tasks": [settings]}))
    assert cli_main(["blockwise", "run", str(spec)]) == 2
    err = capsys.readouterr().err
    assert address in err and "Traceback" not in err
    assert not (tmp_path / "out.zarr").exists()


def test_a_cluster_lost_mid_run_ends_the_run_with_a_sentence_and_keeps_done_blocks(
        tmp_path, monkeypatch):
    from spacrq.blockwise import dask_executor
    from spacrq.blockwise.clusters import ClusterLost
    monkeypatch.setattr(dask_executor, "CONNECT_SECONDS", 2)  # dask's wait for it to come back
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    store = tmp_path / "store"

    def task():
        return Task("gone", Roi((0,), (400,)), Roi((0,), (10,)), Roi((0,), (10,)),
                    functools.partial(bw_funcs.stamp, str(stamps), sleep=0.05),
                    tracking_path=store)

    first = DaskProcs(tmp_path / "first", workers=2)
    try:
        def kill_the_scheduler():
            wait_until(lambda: len(list(stamps.iterdir())) >= 4, what="first blocks")
            os.killpg(first.scheduler.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_the_scheduler)
        killer.start()
        try:
            with pytest.raises(ClusterLost, match="was lost mid-run.*rerun"):
                run_blockwise([task()], executor="dask", dask_cluster=first.address)
        finally:
            killer.join()
    finally:
        first.close()
    cols = block_columns(store)
    done = set(cols["spatial_id"][cols["done"].astype(bool)].tolist())
    assert len(done) < 40
    assert all((stamps / f"gone-{sid}.json").exists() for sid in done)
    before = {p.name: p.stat().st_mtime_ns for p in stamps.iterdir()}
    second = DaskProcs(tmp_path / "second", workers=2)
    try:
        again = run_blockwise([task()], executor="dask", dask_cluster=second.address)
    finally:
        second.close()
    assert again.succeeded and again.outcome["gone"]["skipped"] == len(done)
    for sid in done:  # a block done before the loss was not run again
        assert (stamps / f"gone-{sid}.json").stat().st_mtime_ns == before[f"gone-{sid}.json"]
