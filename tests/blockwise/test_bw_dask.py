"""The dask executor on a small LocalCluster, including a worker lost mid-run."""
from __future__ import annotations

import functools

import bw_funcs
import distributed  # noqa: F401  (in the test extra: the dask executor is tested, never skipped)
import pytest

from spacrq.blockwise import Roi, Task, run_blockwise



@pytest.fixture
def cluster():
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                      silence_logs=40) as c:
        yield c


def test_dask_runs_blocks_and_the_store_is_authoritative(tmp_path, cluster):
    task = Task("dasky", Roi((0,), (100,)), Roi((0,), (10,)), Roi((0,), (10,)),
                functools.partial(bw_funcs.raise_on, {4}), max_retries=1,
                tracking_path=tmp_path / "store", resource_tracking=True)
    report = run_blockwise([task], executor="dask", dask_cluster=cluster)
    assert report.outcome["dasky"]["done"] == 9 and report.outcome["dasky"]["failed"] == 1
    t = report["dasky"]
    assert t.blocks.has_stats and t.blocks.wall.n == 9 and t.blocks.failures == 2
    assert t.workers.unmanaged_clients >= 1
    again = run_blockwise([Task("dasky", Roi((0,), (100,)), Roi((0,), (10,)), Roi((0,), (10,)),
                                bw_funcs.noop, tracking_path=tmp_path / "store")],
                          executor="dask", dask_cluster=cluster)
    assert again.succeeded and again.outcome["dasky"]["skipped"] == 9


def test_a_lost_dask_worker_costs_only_its_blocks(tmp_path, cluster):
    task = Task("lost", Roi((0,), (120,)), Roi((0,), (10,)), Roi((0,), (10,)),
                functools.partial(bw_funcs.close_dask_worker_once, str(tmp_path), 5),
                tracking_path=tmp_path / "store")
    report = run_blockwise([task], executor="dask", dask_cluster=cluster)
    assert (tmp_path / "closed-5").exists()
    assert len(cluster.scheduler.workers) == 1  # one worker really was lost
    assert report.succeeded, report.problems()
    assert report.outcome["lost"]["done"] == 12
    assert len(list(tmp_path.glob("lost-*.json"))) == 12


def test_dask_needs_a_cluster(tmp_path):
    task = Task("none", Roi((0,), (10,)), Roi((0,), (10,)), Roi((0,), (10,)), bw_funcs.noop)
    with pytest.raises(ValueError, match="dask_cluster"):
        run_blockwise([task], executor="dask", log_dir=tmp_path)
