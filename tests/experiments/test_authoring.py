"""spacrq's authoring base: the files it writes, retries, control, resume and its checks."""
from __future__ import annotations

import hashlib
import json

import pytest

from spacrq import experiments as ex
from spacrq.experiments.authoring import Field, Step, StepExperiment
from spacrq.experiments.demo_sweep import InstrumentSweep
from spacrq.runfiles import read_jsonl


class Flaky(StepExperiment):
    """Fails step s1 ``failures`` times, and asks its own cancel after step ``cancel_after``."""

    module = "tests.flaky"
    fields = (Field("points", "int", 4, min_value=1), Field("failures", "int", 0),
              Field("cancel_after", "int", -1))
    retry_pause = 0.0

    def __init__(self):
        super().__init__()
        self.calls: dict[str, int] = {}

    def plan(self, config):
        return [Step(f"s{i}", {"i": i}) for i in range(config["points"])]

    def run_step(self, step, config):
        self.calls[step.id] = self.calls.get(step.id, 0) + 1
        if step.id == "s1" and self.calls[step.id] <= config["failures"]:
            raise RuntimeError("stage did not settle")
        if step.params["i"] == config["cancel_after"]:
            ex.cancel(self.run_dir, "enough")
        return {"i": step.params["i"], "square": step.params["i"] ** 2}


def events(run):
    return [e["event"] for e in read_jsonl(run / "journal.jsonl")]


def test_a_run_writes_plesty_compatible_files(tmp_path):
    out = InstrumentSweep().run(tmp_path, run_id="r1", config={"points": 4, "dwell": 0})
    assert out.state == "completed" and out.exit_code == 0
    run = tmp_path / "r1"
    plan = json.loads((run / "plan.json").read_text())
    canonical = json.dumps({"config": plan["config"], "steps": plan["steps"]}, sort_keys=True,
                           default=str)
    assert plan["hash"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert plan["config"]["detector"]["mode"] == "photodiode"
    assert events(run)[0] == "run_started" and events(run)[-1] == "run_completed"
    records = read_jsonl(run / "records.jsonl")
    assert [r["index"] for r in records] == [0, 1, 2, 3]
    assert records[0]["provenance"]["step_id"] == "point[00000]"
    assert set(records[0]["value"]) >= {"setpoint_mV", "signal", "stderr"}
    status = ex.status_of(run)
    assert status["state"] == "completed" and status["completed"] == 4 and status["total"] == 4
    assert status["provenance"]["module"] == "spacrq.experiments.demo_sweep"


def test_a_failing_step_is_retried_a_bounded_number_of_times(tmp_path):
    exp = Flaky()
    out = exp.run(tmp_path, run_id="r", config={"failures": 2})
    assert out.state == "completed" and exp.calls["s1"] == 3
    assert events(tmp_path / "r").count("step_failed") == 2
    status = ex.status_of(tmp_path / "r")
    assert status["failed"] == 2 and status["completed"] == 4


def test_a_step_failing_every_attempt_fails_the_run_and_resume_finishes_it(tmp_path):
    exp = Flaky()
    out = exp.run(tmp_path, run_id="r", config={"failures": 99})
    assert out.state == "failed" and out.exit_code == 1 and exp.calls["s1"] == exp.max_retries
    status = ex.status_of(tmp_path / "r")
    assert status["state"] == "failed" and "stage did not settle" in status["error"]
    assert status["resumable"]
    again = Flaky()
    again.calls["s1"] = 99  # the cause was fixed: s1 now succeeds
    assert again.run(tmp_path, resume="r", config={"failures": 99}).state == "completed"
    assert "s0" not in again.calls  # committed steps are not redone
    assert [r["index"] for r in read_jsonl(tmp_path / "r" / "records.jsonl")] == [0, 1, 2, 3]


def test_cancel_is_honoured_at_the_next_boundary_and_resume_continues(tmp_path):
    out = Flaky().run(tmp_path, run_id="r", config={"cancel_after": 1})
    assert out.state == "canceled"
    status = ex.status_of(tmp_path / "r")
    assert status["state"] == "canceled" and status["completed"] == 2
    assert status["reason"] == "enough"
    ex.clear(tmp_path / "r")
    resumed = Flaky()
    assert resumed.run(tmp_path, resume="r", config={"cancel_after": 1}).state == "completed"
    assert sorted(resumed.calls) == ["s2", "s3"]


def test_changed_plan_is_refused_on_resume(tmp_path):
    Flaky().run(tmp_path, run_id="r", config={"cancel_after": 0})
    before = (tmp_path / "r" / "journal.jsonl").read_bytes()
    out = Flaky().run(tmp_path, resume="r", config={"points": 7, "cancel_after": 0})
    assert out.exit_code == 2 and "differs" in out.message
    assert (tmp_path / "r" / "journal.jsonl").read_bytes() == before


def test_a_started_run_id_cannot_be_started_again(tmp_path):
    Flaky().run(tmp_path, run_id="r", config={})
    out = Flaky().run(tmp_path, run_id="r", config={})
    assert out.exit_code == 2 and "already started" in out.message


def test_bad_configuration_lists_every_problem(tmp_path):
    out = InstrumentSweep().run(tmp_path, run_id="r", config={
        "points": 1, "dwell": "slow", "bogus": 1, "detector": {"mode": "ccd", "gain": 2}})
    assert out.exit_code == 2
    for part in ("points = 1 is below its minimum 2", "dwell must be a number",
                 "bogus is not a setting", "detector.mode must be one of photodiode, pmt",
                 "detector.gain is not a setting"):
        assert part in out.message
    assert not (tmp_path / "r").exists()


def test_torn_lines_left_by_a_kill_are_cut_before_resuming(tmp_path):
    Flaky().run(tmp_path, run_id="r", config={"cancel_after": 1})
    run = tmp_path / "r"
    with open(run / "records.jsonl", "a") as handle:
        handle.write('{"index": 2, "provenance": {"step_')
    with open(run / "journal.jsonl", "a") as handle:
        handle.write('{"event": "step_sta')
    ex.clear(run)
    assert Flaky().run(tmp_path, resume="r", config={"cancel_after": 1}).state == "completed"
    records = read_jsonl(run / "records.jsonl")
    assert [r["index"] for r in records] == [0, 1, 2, 3]
    assert ex.status_of(run)["bad_lines"] == 0


def test_manifest_and_dry_run(capsys):
    assert InstrumentSweep().main(["--manifest"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["module"] == "spacrq.experiments.demo_sweep"
    assert {f["name"] for f in manifest["schema"]["detector"]} >= {"mode", "noise", "readings"}
    assert InstrumentSweep().main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Plan: 50 step(s), content hash ")


def test_field_checks():
    f = Field("n", "int", 1, min_value=0, max_value=10, unit="V")
    assert f.coerce("3") == 3 and f.coerce(4.0) == 4
    for bad in ("x", 2.5, 11, -1, True):
        with pytest.raises(ValueError):
            f.coerce(bad)
    assert Field("b", "bool", False).coerce("yes") is True
    with pytest.raises(ValueError):
        Field("x", "float").coerce(float("nan"))
    with pytest.raises(ValueError):
        Field("bad", "complex")


def test_a_garbled_control_file_does_not_stop_a_run_and_reports_are_journaled(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "control.json").write_text('{"paused": tru')
    assert Flaky().run(tmp_path, run_id="r", config={}).state == "completed"

    class Reporting(Flaky):
        def run_step(self, step, config):
            if step.id == "s1":
                ex.report(self.run_dir, "helium top-up")
            return super().run_step(step, config)

    assert Reporting().run(tmp_path, run_id="r2", config={}).state == "completed"
    assert ex.status_of(tmp_path / "r2")["reports"] == ["helium top-up"]
