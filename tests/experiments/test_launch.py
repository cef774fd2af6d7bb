"""Launch helpers that need no running experiment: argv, abort of a foreign run, plan checks."""
from __future__ import annotations

import json

import pytest

from spacrq import experiments as ex
from spacrq.experiments.launch import check_plan_unchanged, run_argv
from spacrq.runfiles import read_jsonl

from .support import fake_module


def test_run_argv_passes_the_runs_own_configuration(tmp_path, demo_spec):
    run = tmp_path / "runs" / "r"
    ex.create_run(run, None)
    assert run_argv(demo_spec, run, resume=False)[-2:] == ["--run-id", "r"]
    (run / "config.yaml").write_text("{}")
    argv = run_argv(demo_spec, run, resume=True)
    assert argv[:3] == [demo_spec.python, "-m", demo_spec.module]
    assert argv[-4:] == ["--resume", "r", "--config", str(run / "config.yaml")]


def test_abort_of_a_run_spacrq_did_not_start_only_asks(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "journal.jsonl").write_text(json.dumps({"event": "run_started", "ts": "2026-01-01"})
                                       + "\n")
    status = ex.abort_run(run, "stop it", grace=0.1)
    # nobody on this machine runs it (so it reads interrupted), and nothing was signalled
    assert status["state"] == "interrupted" and status["escalated"] == ""
    assert ex.asked(run)["stop"] == "abort"
    assert [e["event"] for e in read_jsonl(run / "journal.jsonl")] == ["run_started"]


def test_plan_check_needs_a_plan_and_tolerates_a_module_without_a_digest(tmp_path):
    spec = fake_module(tmp_path, "print('planning...')\n")
    run = tmp_path / "runs" / "r"
    ex.create_run(run, ex.config_text_of({"points": 3}))
    with pytest.raises(ex.ExperimentError, match="no readable plan.json"):
        check_plan_unchanged(spec, run)
    (run / "plan.json").write_text(json.dumps({"config": {"points": 3, "dwell": 0.1},
                                               "steps": [], "hash": "abc"}))
    check_plan_unchanged(spec, run)  # defaults filled in by the module are not a change
    (run / "config.yaml").write_text(ex.config_text_of({"points": 4}))
    with pytest.raises(ex.ExperimentError, match="changed after its plan was made"):
        check_plan_unchanged(spec, run)


def test_launch_refuses_a_missing_interpreter_or_checkout(tmp_path, demo_spec):
    bad = ex.ExperimentSpec("x", "m", str(tmp_path / "nopython"), demo_spec.cwd, {},
                            str(tmp_path / "runs"))
    with pytest.raises(ex.ExperimentError, match="interpreter"):
        ex.start_run(bad, "r", {})
    bad = ex.ExperimentSpec("x", "m", demo_spec.python, str(tmp_path / "nowhere"), {},
                            str(tmp_path / "runs"))
    with pytest.raises(ex.ExperimentError, match="working folder"):
        ex.start_run(bad, "r2", {})
    assert ex.runs_of(tmp_path / "runs") == []  # nothing half-made
