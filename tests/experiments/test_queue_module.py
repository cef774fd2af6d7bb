"""The queue's ``experiment`` module: success only when the journal says completed."""
from __future__ import annotations

import pytest

from spacrq import experiments as ex
from spacrq.modules import resolve_module
from spacrq.modules.experiment import ExperimentRunFailed


class Ctx:
    def __init__(self, on_line=None):
        self.lines: list[str] = []
        self.on_line = on_line
        self.workdir = "."

    def log(self, message):
        self.lines.append(message)
        if self.on_line:
            self.on_line(message)

    def stop_requested(self):
        return False


def settings_for(spec, **extra):
    return {"module": spec.module, "python": spec.python, "cwd": spec.cwd,
            "run_root": spec.run_root, "env": dict(spec.env), **extra}


def test_a_completed_run_is_a_successful_job_and_a_rerun_does_nothing(demo_spec):
    module = resolve_module("experiment")
    settings = {**module.defaults, **settings_for(demo_spec, run_id="q1",
                                                  config={"points": 3, "dwell": 0})}
    assert module.check(settings) == []
    ctx = Ctx()
    result = module.run(settings, ctx)
    assert result == {"run_id": "q1", "state": "completed", "steps": 3}
    assert any("ended completed" in line for line in ctx.lines)
    assert module.run(settings, Ctx())["state"] == "completed"  # not measured twice
    assert ex.status_of(ex.find_run(demo_spec.run_root, "q1"))["starts"] == 1


def test_a_canceled_run_fails_the_job_and_the_rerun_resumes_it(demo_spec):
    module = resolve_module("experiment")
    run = ex.find_run
    settings = {**module.defaults, **settings_for(demo_spec, run_id="q2", poll=0.05,
                                                  config={"points": 40, "dwell": 0.05})}

    def stop_when_running(line):
        if line.startswith("running: ") and not line.startswith("running: 0/"):
            ex.stop_run(run(demo_spec.run_root, "q2"))

    with pytest.raises(ExperimentRunFailed, match="ended canceled"):
        module.run(settings, Ctx(stop_when_running))
    assert module.run(settings, Ctx())["state"] == "completed"
    status = ex.status_of(run(demo_spec.run_root, "q2"))
    assert status["completed"] == 40 and status["starts"] == 2


def test_validation_names_each_problem(tmp_path, workspace):
    module = resolve_module("experiment")
    assert module.check({}) and "names no experiment" in module.check({})[0].message
    problems = module.check({"experiment": "missing", "workspace": str(workspace.root)})
    assert "no experiment called 'missing'" in problems[0].message
    problems = module.check({"module": "x.y", "python": str(tmp_path / "nopy"),
                             "cwd": str(tmp_path / "nodir"), "run_id": "../r", "config": [1],
                             "config_file": str(tmp_path / "none.yaml")})
    settings = {p.setting for p in problems}
    assert settings == {"python", "cwd", "run_id", "config", "config_file"}


def test_declared_experiment_by_name(workspace, demo_spec):
    ex.declare_experiment(workspace.root, demo_spec)
    module = resolve_module("experiment")
    settings = {**module.defaults, "experiment": "sweep", "workspace": str(workspace.root),
                "run_id": "q3", "config": {"points": 2, "dwell": 0}}
    assert module.check(settings) == []
    assert module.output_folders(settings) == [demo_spec.run_root]
    assert module.run(settings, Ctx())["state"] == "completed"
