"""``spacrq exp``: live progress on a terminal, ``status --follow`` and ``--json`` with a schema."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ptyrun import run_on_pty

from spacrq import experiments as ex
from spacrq.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def declared(workspace, demo_spec):
    ex.declare_experiment(workspace.root, demo_spec)
    return workspace, demo_spec


def _env(ws) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SPACRQ_NO_LIVE")}
    env.update(TERM="xterm", PYTHONPATH=str(ROOT), SPACRQ_WORKSPACE=str(ws.root))
    return env


def _on_pty(argv, env) -> tuple[int, str]:
    return run_on_pty(argv, env=env)


def test_run_wait_on_a_terminal_shows_steps_and_into_a_pipe_only_the_status(declared):
    ws, _ = declared
    argv = [sys.executable, "-m", "spacrq", "exp", "run", "sweep", "t1", "--set", "points=6",
            "--set", "dwell=0.15", "--wait"]
    code, text = _on_pty(argv, _env(ws))
    assert code == 0, text
    assert "of 6 steps" in text and "\x1b[" in text
    assert "t1: completed  6/6 steps" in text
    argv[6] = "t2"
    piped = subprocess.run(argv, capture_output=True, text=True, env=_env(ws), timeout=120)
    assert piped.returncode == 0 and "\x1b" not in piped.stdout
    assert "of 6 steps" not in piped.stdout and "t2: completed  6/6 steps" in piped.stdout


def test_status_follow_ends_with_the_run_and_its_code(declared, capsys):
    ws, spec = declared
    w = ["--workspace", str(ws.root)]
    assert main(["exp", "run", "sweep", "f1", "--set", "points=5", "--set", "dwell=0.1", *w]) == 0
    capsys.readouterr()
    assert main(["exp", "status", "sweep", "f1", "--follow", *w]) == 0
    out = capsys.readouterr().out
    assert "of 5 steps" in out and "f1: completed  5/5 steps" in out
    assert "\x1b" not in out


def test_follow_stopped_by_sigint_leaves_the_run_running(declared):
    ws, spec = declared
    env = _env(ws)
    assert main(["exp", "run", "sweep", "s1", "--set", "points=200", "--set", "dwell=0.05",
                 "--workspace", str(ws.root)]) == 0
    run_dir = ex.find_run(spec.run_root, "s1")
    try:
        follower = subprocess.Popen([sys.executable, "-m", "spacrq", "exp", "status", "sweep",
                                     "s1", "--follow"], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env)
        first = follower.stdout.readline()  # following has begun
        assert "s1:" in first
        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=60)
        assert follower.returncode == 130 and "goes on" in err
        assert ex.status_of(run_dir)["state"] == "running"
    finally:
        ex.stop_run(run_dir)
        ex.wait_for(run_dir, ex.ENDED_STATES, timeout=60, poll=0.1)


def test_every_json_output_parses_and_carries_its_schema(declared, capsys):
    ws, _ = declared
    w = ["--workspace", str(ws.root)]
    assert main(["exp", "run", "sweep", "j1", "--set", "points=2", "--set", "dwell=0",
                 "--wait", *w]) == 0
    capsys.readouterr()
    kinds = {}
    for argv in (["exp", "status", "sweep", "j1", "--json"], ["exp", "list", "--json"],
                 ["exp", "list", "sweep", "--json"], ["exp", "manifest", "sweep", "--json"]):
        assert main(argv + w) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["schema"] == 1
        kinds[argv[1]] = kinds.get(argv[1], []) + [doc["kind"]]
    assert kinds == {"status": ["exp-status"], "list": ["exp-list", "exp-runs"],
                     "manifest": ["exp-manifest"]}


def test_status_and_list_never_print_control_characters_from_run_files(declared, capsys):
    ws, _ = declared
    w = ["--workspace", str(ws.root)]
    assert main(["exp", "run", "sweep", "c1", "--set", "points=2", "--set", "dwell=0",
                 "--wait", *w]) == 0
    assert main(["exp", "note", "sweep", "c1", "hi\x1b]0;owned\x07\x1b[2J", "--by", "x\x1b[31m",
                 *w]) == 0
    capsys.readouterr()
    for argv in (["exp", "status", "sweep", "c1"], ["exp", "list", "sweep"], ["exp", "list"]):
        assert main(argv + w) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out, argv
    assert main(["exp", "status", "sweep", "c1", *w]) == 0
    assert "hi?]0;owned??[2J" in capsys.readouterr().out   # the text stays, each control byte a "?"
