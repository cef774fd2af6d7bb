"""Naming a dask cluster in a blockwise step's settings: every problem found at the door.

No cluster runs here except one ``local`` one started for a job; the batch
kinds (slurm, pbs, lsf) are checked through the job script they would submit.
"""
from __future__ import annotations

import numpy as np
import pytest
import zarr

from spacrq.blockwise import clusters, spec
from spacrq.blockwise.report import read_last_run, runs_file
from spacrq.cli import main as cli_main
from spacrq.queue import Job, Queue, load_queue, save_queue

SLURM = {"kind": "slurm", "cores": 8, "memory": "16GB", "walltime": "02:00:00", "queue": "short",
         "account": "mylab", "jobs": 3, "job_extra_directives": ["--gres=gpu:1"]}


@pytest.fixture
def volume(tmp_path):
    arr = zarr.create_array(str(tmp_path / "in.zarr"), shape=(32, 32), chunks=(16, 16),
                            dtype="float32")
    arr[...] = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    return tmp_path


def _problems(base, **extra):
    step = {"input": "in.zarr", "output": "out.zarr", "block_shape": [16, 16], **extra}
    return [(p.severity, p.setting, p.message, p.fix) for p in spec.problems(step, base)]


def test_a_dask_step_with_a_cluster_it_can_start_is_valid(volume):
    assert _problems(volume, executor="dask", cluster="local") == []
    assert _problems(volume, executor="dask", cluster={"kind": "local", "n_workers": 3}) == []
    assert _problems(volume, executor="dask", cluster=SLURM) == []
    assert _problems(volume, executor="dask", cluster={**SLURM, "kind": "pbs"}) == []


@pytest.mark.parametrize("extra, setting, words", [
    ({"executor": "dask"}, "executor", "needs a cluster"),
    ({"executor": "dask", "scheduler": "head"}, "scheduler", "not a dask scheduler address"),
    ({"executor": "dask", "scheduler": "tcp://h:1", "cluster": "local"}, "cluster", "both"),
    ({"executor": "dask", "cluster": "kubernetes"}, "cluster", "not one spacrq can start"),
    ({"executor": "dask", "cluster": 7}, "cluster", "neither a kind"),
    ({"executor": "dask", "cluster": {**SLURM, "wall_time": "1:00:00"}}, "cluster",
     "'wall_time' is not a setting of a slurm cluster"),
    ({"executor": "dask", "cluster": {**SLURM, "cores": "8"}}, "cluster", "cores '8' is not a whole"),
    ({"executor": "dask", "cluster": {**SLURM, "jobs": 0}}, "cluster", "jobs 0 is not a whole"),
    ({"executor": "dask", "cluster": {**SLURM, "memory": "lots"}}, "cluster", "not an amount"),
    ({"executor": "dask", "cluster": {**SLURM, "walltime": "2h"}}, "cluster", "not a time limit"),
    ({"executor": "dask", "cluster": {"kind": "slurm", "cores": 4}}, "cluster", "needs 'memory'"),
    ({"executor": "dask", "cluster": {"kind": "local", "n_workers": True}}, "cluster",
     "n_workers True"),
    ({"executor": "kubernetes"}, "executor", "not local, serial or dask"),
])
def test_each_bad_dask_setting_is_one_sentence_naming_it_and_the_fix(volume, extra, setting, words):
    found = [p for p in _problems(volume, **extra) if p[0] == "error"]
    assert len(found) == 1, found
    _, where, message, fix = found[0]
    assert where == setting and words in message and fix


@pytest.mark.parametrize("field, value", [
    ("job_extra_directives", ["--mem=1G\nrm -rf ~"]),
    ("queue", "short\necho owned"),
    ("account", "lab; rm -rf ~"),
    ("memory", "16GB\r\n"),
    ("walltime", "02:00:00\n#SBATCH --uid=0"),
])
def test_settings_that_would_add_lines_to_the_batch_script_are_refused(volume, field, value):
    found = _problems(volume, executor="dask", cluster={**SLURM, field: value})
    assert [p[1] for p in found if p[0] == "error"] == ["cluster"]


def test_a_scheduler_or_cluster_without_the_dask_executor_is_a_warning(volume):
    found = _problems(volume, scheduler="tcp://head:8786")
    assert [(p[0], p[1]) for p in found] == [("warning", "scheduler")]
    assert "executor" in found[0][3]


def test_missing_dask_or_dask_jobqueue_says_how_to_install_it(volume, monkeypatch):
    present = {"distributed": True, "dask_jobqueue": False}
    monkeypatch.setattr(clusters, "_installed", lambda module: present[module])
    (_, setting, message, fix), = _problems(volume, executor="dask", cluster=SLURM)
    assert setting == "cluster" and "dask-jobqueue" in message
    assert "pip install 'spacrq[dask]'" in fix
    present["distributed"] = False
    (_, setting, message, fix), = _problems(volume, executor="dask", scheduler="tcp://h:1")
    assert setting == "executor" and "pip install 'spacrq[dask]'" in fix


def test_something_listening_that_is_not_a_dask_scheduler_is_refused(volume):
    import socket
    with socket.socket() as server:  # accepts, says nothing: a firewall or another program
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        clusters._answers.clear()
        found = _problems(volume, executor="dask", scheduler=address)
    (_, setting, message, _), = found
    assert setting == "scheduler" and address in message and "no dask greeting" in message


def test_the_slurm_job_script_holds_the_settings_given():
    script = clusters.job_script({"cluster": SLURM})
    for line in ("#SBATCH -p short", "#SBATCH -A mylab", "#SBATCH --cpus-per-task=8",
                 "#SBATCH -t 02:00:00", "#SBATCH --gres=gpu:1", "#SBATCH --mem=15G"):
        assert line in script.splitlines(), script


def test_the_pbs_and_lsf_job_scripts_hold_the_settings_given():
    pbs = clusters.job_script({"cluster": {**SLURM, "kind": "pbs",
                                           "job_extra_directives": ["-l place=scatter"]}})
    for line in ("#PBS -q short", "#PBS -A mylab", "#PBS -l walltime=02:00:00",
                 "#PBS -l place=scatter"):
        assert line in pbs.splitlines(), pbs
    assert "ncpus=8" in pbs
    lsf = clusters.job_script({"cluster": {**SLURM, "kind": "lsf", "walltime": "02:00",
                                           "job_extra_directives": []}})
    for line in ("#BSUB -q short", '#BSUB -P "mylab"', "#BSUB -n 8", "#BSUB -W 02:00"):
        assert line in lsf.splitlines(), lsf


def test_the_cluster_is_named_for_the_report():
    assert clusters.describe({"scheduler": "head:8786"}) == "dask scheduler tcp://head:8786"
    assert clusters.describe({"cluster": "local", "num_workers": 3}) == \
        "dask LocalCluster, 3 worker(s)"
    assert clusters.describe({"cluster": SLURM}) == (
        "dask SLURMCluster: 3 job(s), 8 core(s), 16GB, walltime 02:00:00, queue short, "
        "account mylab")


def test_a_queue_job_on_a_local_cluster_runs_and_the_cluster_is_closed_after(volume, capsys,
                                                                           monkeypatch):
    monkeypatch.chdir(volume)
    settings = {"input": "in.zarr", "output": "out.zarr", "block_shape": [16, 16],
                "operation": "threshold", "level": 100.0, "tracking": "track",
                "executor": "dask", "cluster": {"kind": "local", "n_workers": 1}}
    path = volume / "night.queue.json"
    queue = Queue()
    queue.add(Job("blockwise", settings=settings, id="mask", cwd=str(volume)))
    save_queue(queue, path)
    assert cli_main(["queue", "run", str(path)]) == 0  # the job runs in a process of its own
    capsys.readouterr()
    out = zarr.open_array(str(volume / "out.zarr"), mode="r")[...]
    np.testing.assert_array_equal(out, (np.arange(1024).reshape(32, 32) > 100).astype(out.dtype))
    log = (volume / load_queue(path).jobs[0].log_path).read_text()
    assert "on the dask LocalCluster, 1 worker(s)" in log
    last = read_last_run(runs_file(volume / "track"))
    assert last.outcome["done"] == 4 and last.outcome["cluster"].startswith("dask LocalCluster")
    assert last.outcome["scheduler"].startswith("tcp://127.0.0.1:")
    # the autouse conftest fixture fails this test if the cluster's processes outlive the job
