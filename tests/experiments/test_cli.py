"""``spacrq exp``: the commands, and bad input as one sentence with exit 2."""
from __future__ import annotations

import json

import pytest

from spacrq import experiments as ex
from spacrq.cli import main


@pytest.fixture
def declared(workspace, demo_spec):
    ex.declare_experiment(workspace.root, demo_spec)
    return workspace, demo_spec


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_wait_status_note_and_list(declared, capsys):
    ws, spec = declared
    w = ["--workspace", str(ws.root)]
    code, out, err = run_cli(capsys, "exp", "run", "sweep", "c1", "--set", "points=3",
                             "--set", "dwell=0", "--set", "detector.mode=pmt", "--wait", *w)
    assert code == 0, err
    assert "c1: completed  3/3 steps" in out
    assert ex.run_config_of(ex.find_run(spec.run_root, "c1"))["detector"] == {"mode": "pmt"}
    assert run_cli(capsys, "exp", "note", "sweep", "c1", "realigned", "--by", "ada", *w)[0] == 0
    code, out, _ = run_cli(capsys, "exp", "status", "sweep", "--json", *w)
    doc = json.loads(out)
    assert (doc["schema"], doc["kind"]) == (1, "exp-status")
    doc = doc["status"]
    assert doc["state"] == "completed" and doc["notes"][0]["by"] == "ada"
    code, out, _ = run_cli(capsys, "exp", "list", "sweep", *w)
    assert "c1  completed  3/3" in out
    code, out, _ = run_cli(capsys, "exp", "list", *w)
    assert "sweep: python -m spacrq.experiments.demo_sweep  (1 run)" in out
    code, out, _ = run_cli(capsys, "exp", "manifest", "sweep", *w)
    assert "dwell (float) = 0.1 s" in out


def test_create_then_run_uses_the_created_configuration(declared, capsys, tmp_path):
    ws, spec = declared
    w = ["--workspace", str(ws.root)]
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"points": 2, "dwell": 0}))
    assert run_cli(capsys, "exp", "create", "sweep", "later", "--config", str(cfg), *w)[0] == 0
    assert ex.status_of(ex.find_run(spec.run_root, "later"))["state"] == "created"
    code, out, err = run_cli(capsys, "exp", "run", "sweep", "later", "--wait", *w)
    assert code == 0, err
    assert ex.status_of(ex.find_run(spec.run_root, "later"))["completed"] == 2


@pytest.mark.parametrize("argv,needle", [
    (["exp", "run", "sweep", "", "--set", "points=2"], "cannot be empty"),
    (["exp", "run", "sweep", "a/b"], "not a path"),
    (["exp", "create", "sweep", ".."], "not a path"),
    (["exp", "run", "sweep", "x", "--set", "bogus=1"], "'bogus' is not a setting"),
    (["exp", "run", "sweep", "x", "--set", "points"], "must be KEY=VALUE"),
    (["exp", "run", "nosuch"], "no experiment called 'nosuch'"),
    (["exp", "run", "sweep", "x", "--config", "/no/such.yaml"], "does not exist"),
    (["exp", "pause", "sweep", "never"], "has no run 'never'"),
    (["exp", "status", "sweep"], "has no runs yet"),
    (["exp", "resume", "sweep"], "no run to resume"),
    (["exp", "note", "sweep", "../x", "hi"], "not a path"),
])
def test_bad_input_is_one_sentence_and_exit_2(declared, capsys, argv, needle):
    ws, _ = declared
    code, out, err = run_cli(capsys, *argv, "--workspace", str(ws.root))
    assert code == 2
    assert needle in err and "Traceback" not in err and err.count("\n") == 1


def test_driving_a_finished_run_is_refused(declared, capsys):
    ws, spec = declared
    w = ["--workspace", str(ws.root)]
    assert run_cli(capsys, "exp", "run", "sweep", "done", "--set", "points=2", "--set", "dwell=0",
                   "--wait", *w)[0] == 0
    for verb in ("pause", "continue", "stop", "abort"):
        code, _, err = run_cli(capsys, "exp", verb, "sweep", "done", *w)
        assert code == 2 and "is completed, not running" in err
    code, _, err = run_cli(capsys, "exp", "resume", "sweep", "done", *w)
    assert code == 2 and "nothing to resume" in err
