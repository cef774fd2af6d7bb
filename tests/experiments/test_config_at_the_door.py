"""A run's configuration is refused where it is typed, with the module's own sentence; a run
whose module refused it anyway fails its job with the module's reason, and says it never started.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from spacrq import experiments as ex
from spacrq.cli import main
from spacrq.experiments.checking import forget_manifests, start_refusal
from spacrq.experiments.declarations import ExperimentSpec
from spacrq.experiments.errors import PROCESS_FILE
from spacrq.experiments.manifest import config_problems_of
from spacrq.modules import resolve_module
from spacrq.modules.experiment import ConfigurationError, ExperimentRunFailed
from spacrq.procs import ProcessRef
from spacrq.queue.summary import classify_failure
from spacrq.runfiles import write_json

from .support import fake_module

DEMO_SENTENCE = "points = 1 is below its minimum 2"


@pytest.fixture(autouse=True)
def _fresh_answers():
    forget_manifests()  # each test asks its modules itself
    yield
    forget_manifests()


class Ctx:
    workdir = "."

    def __init__(self):
        self.lines: list[str] = []

    def log(self, message):
        self.lines.append(message)

    def stop_requested(self):
        return False


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def job(spec, **extra):
    module = resolve_module("experiment")
    return module, {**module.defaults, "module": spec.module, "python": spec.python,
                    "cwd": spec.cwd, "run_root": spec.run_root, "env": dict(spec.env), **extra}


# -- one check, one sentence ---------------------------------------------------------

def test_the_manifest_check_says_what_the_module_itself_says(demo_spec):
    manifest = ex.read_manifest(demo_spec)
    refused, doubtful = config_problems_of(manifest, {"points": 1, "pionts": 3,
                                                      "detector": {"mode": "laser"}})
    assert DEMO_SENTENCE in refused and "pionts is not a setting of this experiment" in refused
    assert any("detector.mode must be one of photodiode, pmt" in p for p in refused)
    assert doubtful == []  # spacrq's own authoring base refuses an undeclared setting itself
    assert config_problems_of(manifest, {"points": 3, "detector": {"readings": 2}}) == ([], [])


def test_a_plesty_style_manifest_only_doubts_a_section_it_does_not_declare():
    manifest = {"module": "m", "schema": {"default": [
        {"name": "points", "dtype": "int", "min_value": 1},
        {"name": "targets", "dtype": "yaml"}]}}
    refused, doubtful = config_problems_of(manifest, {"points": 0, "targets": {"any": 1},
                                                      "devices": {"stage": "x"}})
    assert refused == ["points = 0 is below its minimum 1"]  # the type only it checks passes
    assert doubtful == ["devices is not a setting of this experiment"]


def test_the_queue_job_refuses_at_add_time_the_config_exp_run_refuses(demo_spec, workspace,
                                                                      capsys):
    ex.declare_experiment(workspace.root, demo_spec)
    module = resolve_module("experiment")
    settings = {**module.defaults, "experiment": "sweep", "workspace": str(workspace.root),
                "config": {"points": 1}}
    errors = [p for p in module.check(settings) if p.is_error]
    assert [(p.message, p.setting) for p in errors] == [(DEMO_SENTENCE, "config")]
    code, _, err = cli(capsys, "exp", "run", "sweep", "--set", "points=1",
                       "--workspace", str(workspace.root))
    assert code == 2 and DEMO_SENTENCE in err  # the same sentence from both doors
    queue = workspace.root / "e.queue.json"
    code, _, err = cli(capsys, "queue", "add", str(queue), "experiment", "--set",
                       "experiment=sweep", "--set", f"workspace={workspace.root}", "--set",
                       'config={"points":1}')
    assert code == 2 and DEMO_SENTENCE in err and not queue.exists()
    assert ex.runs_of(demo_spec.run_root) == []  # nothing was made for it


def test_a_config_file_is_checked_too_and_by_exp_run(demo_spec, workspace, tmp_path, capsys):
    ex.declare_experiment(workspace.root, demo_spec)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"points": 1}))
    module, settings = job(demo_spec, config_file=str(bad))
    assert [p.message for p in module.check(settings) if p.is_error] == [DEMO_SENTENCE]
    code, _, err = cli(capsys, "exp", "run", "sweep", "--config", str(bad),
                       "--workspace", str(workspace.root))
    assert code == 2 and f"{DEMO_SENTENCE}; fix {bad}" in err
    assert ex.runs_of(demo_spec.run_root) == []


COUNTED = """
import json, os, sys
with open(os.environ["ASKED"], "a") as f:
    f.write("asked\\n")
if "--manifest" in sys.argv:
    {answer}
sys.exit(0)
"""


def test_a_module_that_cannot_be_asked_is_a_warning_asked_once_for_many_jobs(tmp_path):
    asked = tmp_path / "asked.txt"
    spec = fake_module(tmp_path, COUNTED.format(answer="sys.stderr.write('no stage\\\\n'); "
                                                       "sys.exit(1)"), name="mute")
    module, settings = job(spec, env={"ASKED": str(asked)}, config={"points": 1})
    for _ in range(3):
        problems = module.check(settings)
        assert [p.severity for p in problems] == ["warning"]
        assert "could not be checked" in problems[0].message and "no stage" in problems[0].message
    assert asked.read_text().count("asked") == 1  # one question for the three checks
    assert module.check({**settings, "config": None}) == []  # nothing given: nothing asked


# -- at night: the module's own reason ------------------------------------------------

REFUSES = """
import json, sys
if "--manifest" in sys.argv:
    print(json.dumps({"module": "refuser", "schema": {"default": [
        {"name": "points", "dtype": "int", "default": 3}]}}))
    sys.exit(0)
print("connecting to the stage", flush=True)
sys.stderr.write("error: the stage is not homed; home it first\\n")
sys.exit(int(sys.argv[sys.argv.index("--run-id") + 1][-1]))
"""


def test_a_run_its_module_refuses_fails_the_job_with_the_modules_reason(tmp_path):
    spec = fake_module(tmp_path, REFUSES, name="refuser")
    module, settings = job(spec, run_id="bad2", config={"points": 4}, poll=0.05)
    assert module.check(settings) == []
    with pytest.raises(ConfigurationError) as refused:
        module.run(settings, Ctx())
    text = str(refused.value)
    assert text.startswith("run bad2 never started: the stage is not homed; home it first;")
    assert "rerun" not in text and text.count("job-logs") == 1  # its log, once
    # the module exited for another reason than its input: fix it, then rerun
    module, settings = job(spec, run_id="bad1", poll=0.05)
    with pytest.raises(ExperimentRunFailed) as failed:
        module.run(settings, Ctx())
    assert not isinstance(failed.value, ConfigurationError)
    assert "never started: the stage is not homed" in str(failed.value)
    assert str(failed.value).count("job-logs") == 1


def test_the_queue_files_a_refused_configuration_as_a_configuration_error(tmp_path, capsys):
    from spacrq.run import main as run_job
    spec = fake_module(tmp_path, REFUSES, name="refuser")
    _, settings = job(spec, run_id="bad2", poll=0.05)
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    assert run_job(["experiment", "--settings", str(path)]) == 1
    log = tmp_path / "job.log"
    log.write_text(capsys.readouterr().err)
    kind, message = classify_failure(1, log)
    assert kind == "ConfigurationError" and message.startswith("run bad2 never started: the "
                                                               "stage is not homed")


def test_a_config_the_check_could_not_see_is_refused_before_a_run_folder_is_made(demo_spec,
                                                                               monkeypatch):
    module, settings = job(demo_spec, run_id="late", config={"points": 1})
    with pytest.raises(ConfigurationError, match=DEMO_SENTENCE):
        module.run(settings, Ctx())  # the job's process checks for itself before starting
    assert not (Path(demo_spec.run_root) / "late").exists()


def test_a_run_that_never_started_says_so_and_why(tmp_path, workspace, capsys):
    spec = fake_module(tmp_path, REFUSES, name="refuser")
    ex.declare_experiment(workspace.root, ExperimentSpec(
        "refuser", spec.module, spec.python, spec.cwd, {}, spec.run_root))
    module, settings = job(spec, run_id="x2", poll=0.05)
    with pytest.raises(ConfigurationError):
        module.run(settings, Ctx())
    status = ex.status_of(Path(spec.run_root) / "x2")
    assert status["state"] == "created" and status["start_failed"] == \
        "the stage is not homed; home it first"
    assert status["problem"].startswith("it never started: the module exited before its run "
                                        "started, saying: the stage is not homed")
    code, out, _ = cli(capsys, "exp", "list", "refuser", "--workspace", str(workspace.root))
    assert code == 0 and "x2  never started (the stage is not homed; home it first)" in out
    code, out, _ = cli(capsys, "exp", "list", "refuser", "--json",
                       "--workspace", str(workspace.root))
    (run,) = json.loads(out)["runs"]
    assert run["never_started"] is True and run["state"] == "created"


def test_start_refusal_finds_the_error_line_or_else_the_last_one(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("starting\nError: points = 1 is below its minimum 2\nbye\n")
    assert start_refusal(log) == DEMO_SENTENCE
    log.write_text("Traceback (most recent call last):\n  File x\nValueError: no stage\n")
    assert start_refusal(log) == "ValueError: no stage"
    assert start_refusal(tmp_path / "none.log") == "" and start_refusal(None) == ""


# -- exp list, exp status -------------------------------------------------------------

def _journaled(run_root: Path, run_id: str, started: float, *, paused: bool = False) -> None:
    run = run_root / run_id
    run.mkdir(parents=True)
    lines = [{"event": "run_started", "ts": started, "total_steps": 30}]
    for i in range(3):
        lines += [{"event": "step_started", "ts": started + i, "step_id": f"s{i}"},
                  {"event": "step_completed", "ts": started + i + 0.5, "step_id": f"s{i}"}]
    if paused:
        lines.append({"event": "run_paused", "ts": started + 4})
        write_json(run / PROCESS_FILE, ProcessRef.of(os.getpid()).to_dict())  # alive: us
    else:
        lines.append({"event": "run_completed", "ts": started + 4})
    (run / "journal.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_exp_list_orders_runs_by_start_time_newest_last(workspace, demo_spec, capsys):
    ex.declare_experiment(workspace.root, demo_spec)
    root = Path(demo_spec.run_root)
    now = time.time()
    _journaled(root, "zeta", now - 3000)
    _journaled(root, "alpha", now - 1000)
    _journaled(root, "mid_20990101-000000", now - 2000)
    ex.create_run(root / "beta", None, experiment="sweep")  # not started: by its creation
    code, out, _ = cli(capsys, "exp", "list", "sweep", "--workspace", str(workspace.root))
    names = [line.split()[-3] for line in out.splitlines()]
    assert code == 0 and names == ["zeta", "mid_20990101-000000", "alpha", "beta"]
    code, out, _ = cli(capsys, "exp", "list", "sweep", "--json", "--workspace",
                       str(workspace.root))
    assert [r["run_id"] for r in json.loads(out)["runs"]] == names


def test_a_paused_run_has_no_time_left_said(workspace, demo_spec, capsys):
    from spacrq.experiments.live import RunLines
    ex.declare_experiment(workspace.root, demo_spec)
    _journaled(Path(demo_spec.run_root), "r1", time.time() - 60, paused=True)
    code, out, _ = cli(capsys, "exp", "status", "sweep", "r1", "--workspace", str(workspace.root))
    assert code == 0 and "r1: paused" in out
    assert " left (" not in out and "paused (about" in out and "once it continues" in out
    head = RunLines(Path(demo_spec.run_root) / "r1")()[0]
    assert "ETA" not in head and "once it continues" in head


# -- exp declare ----------------------------------------------------------------------

def test_exp_declare_asks_the_module_as_the_window_does(workspace, capsys):
    w = ["--workspace", str(workspace.root)]
    code, out, err = cli(capsys, "exp", "declare", "good", "nosuch.module.zz", *w)
    assert code == 2 and err.count("\n") == 1 and "No module named 'nosuch'" in err
    assert "--no-check" in err and ex.load_experiments(workspace.root) == []
    assert not (workspace.root / "experiments" / "good").exists()  # nothing written
    code, out, _ = cli(capsys, "exp", "declare", "good", "nosuch.module.zz", "--no-check", *w)
    assert code == 0 and out.startswith("declared good")
    code, _, err = cli(capsys, "exp", "declare", "good", "spacrq.experiments.demo_sweep", *w)
    assert code == 2 and "declared already (python -m nosuch.module.zz)" in err
    assert "--replace" in err and ex.find_experiment(workspace.root, "good").module == \
        "nosuch.module.zz"
    code, out, _ = cli(capsys, "exp", "declare", "good", "spacrq.experiments.demo_sweep",
                       "--replace", *w)
    assert code == 0 and out.startswith("replaced good (was python -m nosuch.module.zz)")
    assert [s.module for s in ex.load_experiments(workspace.root)] == \
        ["spacrq.experiments.demo_sweep"]
