"""A blockwise queue job submitted to Slurm through dask-jobqueue's SLURMCluster.

A one-node Slurm (munged, slurmctld, slurmd) runs in the test's own folder;
the job's settings name ``"cluster": {"kind": "slurm", ...}``, spacrq starts
the SLURMCluster, Slurm runs its dask workers as batch jobs, and the store
records every block.  Needs Debian's ``slurmctld slurmd slurm-client munge``
and root (the settings-to-job-script path is tested without them in
test_bw_dask_settings.py).
"""
from __future__ import annotations

import numpy as np
import pytest
import zarr
from slurm_procs import SlurmProcs, available

from spacrq.blockwise import ops
from spacrq.blockwise.report import block_columns, read_last_run, runs_file
from spacrq.cli import main as cli_main
from spacrq.queue import Job, Queue, load_queue, save_queue

pytestmark = pytest.mark.skipif(
    not available(), reason="needs root and Debian's slurmctld slurmd slurm-client munge "
                            "(apt-get install slurmctld slurmd slurm-client munge)")


@pytest.fixture
def slurm(monkeypatch):
    procs = SlurmProcs()
    try:
        monkeypatch.setenv("SLURM_CONF", procs.env["SLURM_CONF"])
        yield procs
    finally:
        procs.close()


def test_a_queue_job_runs_on_slurm_through_dask_jobqueue(tmp_path, slurm, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = np.random.default_rng(2).random((48, 32)).astype(np.float32)
    zarr.create_array(str(tmp_path / "in.zarr"), shape=data.shape, chunks=(16, 16),
                      dtype="float32")[...] = data
    cluster = {"kind": "slurm", "cores": 1, "memory": "1GB", "walltime": "00:10:00",
               "queue": "debug", "jobs": 2, "job_extra_directives": [f"--chdir={tmp_path}"]}
    settings = {"input": "in.zarr", "output": "out.zarr", "block_shape": [16, 16],
                "operation": "gaussian", "sigma": 1.0, "tracking": "track",
                "executor": "dask", "cluster": cluster}
    path = tmp_path / "night.queue.json"
    queue = Queue()
    queue.add(Job("blockwise", settings=settings, id="smooth", cwd=str(tmp_path)))
    save_queue(queue, path)
    assert cli_main(["queue", "validate", str(path)]) == 0
    code = cli_main(["queue", "run", str(path)])
    capsys.readouterr()
    job = load_queue(path).jobs[0]
    log = (tmp_path / job.log_path).read_text() if job.log_path else ""
    assert code == 0 and job.status == "success", log[-3000:] + slurm.logs()
    assert "on the dask SLURMCluster: 2 job(s), 1 core(s), 1GB" in log
    out = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")
    np.testing.assert_allclose(out[...], ops.gaussian(data, 1.0), rtol=1e-5, atol=1e-6)
    cols = block_columns(tmp_path / "track")
    assert cols["done"].all() and len(cols["done"]) == 6
    last = read_last_run(runs_file(tmp_path / "track"))
    assert last.outcome["cluster"].startswith("dask SLURMCluster")
    assert last.outcome["dask_workers"]  # the Slurm jobs' dask workers ran the blocks
    assert not slurm.jobs()  # the job closed its cluster: its Slurm jobs were cancelled
