"""Edges a hostile tester found in the morning report.

An experiment job whose settings name ``run_id: "../../elsewhere"`` made the
report read and tell a run outside the experiment's runs folder as the job's
own; the id must stay inside its folder, and the report says why it told no run.
"""
from __future__ import annotations

import pytest

from spacrq.night.collect import _run_of_job
from spacrq.queue.model import Job


@pytest.mark.parametrize("run_id", ["../secret", "../../secret", "a/../../secret", ".."])
def test_a_run_id_never_leaves_the_experiments_runs_folder(tmp_path, run_id):
    runs = tmp_path / "exp" / "runs"
    runs.mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (tmp_path / "exp" / "secret").mkdir()
    job = Job(module="experiment", id="sweep", settings={"run_id": run_id})
    with pytest.raises(Exception) as info:
        _run_of_job(job, runs, run_id)
    assert "run id" in str(info.value)


def test_the_report_says_why_it_told_no_run_for_such_an_id(tmp_path, monkeypatch):
    from spacrq.night import collect

    class Spec:
        run_root = str(tmp_path / "runs")

    (tmp_path / "runs").mkdir()
    (tmp_path / "secret").mkdir()
    monkeypatch.setattr("spacrq.modules.experiment.spec_of", lambda settings: Spec())
    monkeypatch.setattr(collect, "_resolved_settings",
                        lambda job, where: ({"run_id": "../secret"}, tmp_path))
    part = collect._experiment_part(Job(module="experiment", id="sweep"), tmp_path)
    assert part.problem and "../secret" in part.problem and "inside" in part.problem
    assert part.run_dir != str(tmp_path / "runs" / "../secret")
