"""End to end: a real plesty-lib module and spacrq's demo module, run detached by spacrq
through pause, continue, stop, resume, abort, SIGKILL and resume to completion."""
from __future__ import annotations

import os
import signal
import time

import pytest

from spacrq import experiments as ex
from spacrq.runfiles import read_jsonl

from .support import until


def state_of(run):
    return ex.status_of(run)["state"]


def wait_state(run, *states, timeout=30.0):
    return until(lambda: (s := ex.status_of(run))["state"] in states and s, timeout=timeout)


def finish(launched):
    if launched is not None and launched.popen is not None:
        assert launched.wait(30) is not None


def drive_through_everything(spec, config, *, continue_by_resume=False):
    launched = ex.start_run(spec, "r1", config)
    run = launched.run_dir
    until(lambda: ex.status_of(run)["completed"] >= 2)

    ex.pause_run(run)
    paused = wait_state(run, "paused")
    assert paused["in_flight"] is None  # held at a step boundary
    assert ex.RunWatch(run).status()["completed"] == paused["completed"]

    if continue_by_resume:  # Resume on a live paused run lets it go on, starts nothing
        assert ex.resume_run(spec, "r1") is None
    else:
        ex.continue_run(run)
    assert ex.asked(run)["paused"] is False
    until(lambda: ex.status_of(run)["completed"] > paused["completed"])

    ex.stop_run(run, "end of shift")
    canceled = wait_state(run, "canceled")
    assert canceled["reason"] == "end of shift" and canceled["resumable"]
    finish(launched)
    assert 0 < canceled["completed"] < config["points"]

    launched = ex.resume_run(spec, "r1")  # the stale "cancel" must not stop it at once
    until(lambda: ex.status_of(run)["completed"] > canceled["completed"])
    aborted = ex.abort_run(run, "wrong sample")
    assert aborted["state"] == "aborted" and aborted["resumable"]
    finish(launched)

    launched = ex.resume_run(spec, "r1")
    until(lambda: (s := ex.status_of(run))["completed"] > aborted["completed"] and s["in_flight"])
    os.kill(launched.ref.pid, signal.SIGKILL)  # mid-step, no journal entry possible
    finish(launched)
    killed = ex.status_of(run)
    assert killed["state"] == "interrupted" and killed["resumable"]
    assert ex.resumable(spec.run_root) == "r1"

    launched = ex.resume_run(spec, "r1")
    done = wait_state(run, "completed", "failed", "aborted", "canceled")
    finish(launched)
    assert done["state"] == "completed"
    assert done["completed"] == config["points"] and done["starts"] == 4
    records = read_jsonl(run / "records.jsonl")
    assert sorted(r["index"] for r in records) == list(range(config["points"]))  # exactly once
    assert ex.kept_log(run) is not None
    return run


def test_demo_module_end_to_end(demo_spec):
    drive_through_everything(demo_spec, {"points": 24, "dwell": 0.08,
                                         "detector": {"readings": 2}}, continue_by_resume=True)


#: the first session on a clean machine builds the plesty-lib venv inside the fixture
FIRST_SETUP = pytest.mark.timeout(900)


@FIRST_SETUP
def test_plesty_module_end_to_end(plesty_spec):
    run = drive_through_everything(plesty_spec, {"points": 24, "dwell": 0.08})
    first = read_jsonl(run / "journal.jsonl")[0]
    assert first["provenance"]["versions"]["plesty-lib"].startswith("0.")


@FIRST_SETUP
def test_abort_interrupts_a_synchronous_plesty_step(plesty_spec):
    """plesty-lib cannot interrupt a blocking step: spacrq waits the grace, stops the
    process group, and journals the abort on the module's behalf."""
    launched = ex.start_run(plesty_spec, "slow", {"points": 3, "dwell": 60})
    run = launched.run_dir
    until(lambda: ex.status_of(run)["in_flight"])
    began = time.monotonic()
    status = ex.abort_run(run, "stage crashed", grace=0.5)
    assert time.monotonic() - began < 10
    finish(launched)
    assert status["state"] == "aborted" and status["escalated"] in ("terminated", "killed")
    assert status["stopped_by"] == "spacrq" and status["reason"] == "stage crashed"
    assert [e["event"] for e in read_jsonl(run / "journal.jsonl")][-2:] == ["step_aborted",
                                                                           "run_aborted"]
    assert status["resumable"]


def test_abort_interrupts_a_long_demo_step_without_escalation(demo_spec):
    launched = ex.start_run(demo_spec, "slow", {"points": 3, "dwell": 60})
    run = launched.run_dir
    until(lambda: ex.status_of(run)["in_flight"])
    began = time.monotonic()
    status = ex.abort_run(run, "wrong sample", grace=5)
    assert time.monotonic() - began < 4
    finish(launched)
    assert status["state"] == "aborted" and status["escalated"] == ""
    assert status["stopped_by"] == "operator"
    assert "step_aborted" in [e["event"] for e in read_jsonl(run / "journal.jsonl")]


def test_resume_refuses_a_changed_configuration_or_plan(demo_spec):
    launched = ex.start_run(demo_spec, "r", {"points": 30, "dwell": 0.05})
    run = launched.run_dir
    until(lambda: ex.status_of(run)["completed"] >= 1)
    ex.stop_run(run)
    wait_state(run, "canceled")
    finish(launched)
    with pytest.raises(ex.ExperimentError, match="duplicate the run instead"):
        ex.reconfigure_run(run, ex.config_text_of({"points": 10}), "")
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(ex.config_text_of({"points": 10, "dwell": 0.05}))
    with pytest.raises(ex.ExperimentError, match="changed after its plan was made"):
        ex.resume_run(demo_spec, "r")
    (run / "config.yaml").write_text(text)
    plan = (run / "plan.json").read_text()
    (run / "plan.json").write_text(plan.replace('"hash": "', '"hash": "0000'))
    with pytest.raises(ex.ExperimentError, match="plan .* differs"):
        ex.resume_run(demo_spec, "r")
    assert state_of(run) == "canceled"


def test_start_refuses_a_started_run_and_resume_a_completed_one(demo_spec):
    launched = ex.start_run(demo_spec, "r", {"points": 2, "dwell": 0})
    wait_state(launched.run_dir, "completed")
    finish(launched)
    with pytest.raises(ex.ExperimentError, match="already started"):
        ex.start_run(demo_spec, "r", {"points": 2})
    with pytest.raises(ex.ExperimentError, match="nothing to resume"):
        ex.resume_run(demo_spec, "r")
    with pytest.raises(ex.ExperimentError):
        ex.start_run(demo_spec, "../r", {"points": 2})


def test_a_module_that_dies_before_starting_says_so(demo_spec):
    broken = ex.ExperimentSpec(demo_spec.name, "no_such_module_here", demo_spec.python,
                               demo_spec.cwd, demo_spec.env, demo_spec.run_root)
    launched = ex.start_run(broken, "r", {"points": 2})
    finish(launched)
    status = ex.status_of(launched.run_dir)
    assert status["state"] == "created" and "exited before its run started" in status["problem"]


def test_sigterm_to_a_paused_demo_run_is_journaled_as_an_abort(demo_spec):
    launched = ex.start_run(demo_spec, "t", {"points": 50, "dwell": 0.05})
    run = launched.run_dir
    until(lambda: ex.status_of(run)["completed"] >= 1)
    ex.pause_run(run)
    wait_state(run, "paused")
    os.kill(launched.ref.pid, signal.SIGTERM)
    finish(launched)
    status = ex.status_of(run)
    assert status["state"] == "aborted" and status["stopped_by"] == "signal"
    assert status["resumable"]


@FIRST_SETUP
def test_abort_of_a_queue_jobs_run_stops_the_run_not_the_job(plesty_spec):
    """A run started for a queue job shares the job's process group; escalation must
    stop only the run's process, never the group (which holds the job)."""
    launched = ex.start_run(plesty_spec, "job", {"points": 3, "dwell": 60}, detached=False)
    run = launched.run_dir
    until(lambda: ex.status_of(run)["in_flight"])
    assert os.getpgid(launched.ref.pid) == os.getpgid(0)
    status = ex.abort_run(run, "", grace=0.5)
    finish(launched)
    assert status["state"] == "aborted" and status["escalated"] == "terminated"
    assert status["stopped_by"] == "spacrq"
