"""``spacrq queue``: live progress in the foreground, ``status --follow``, ``--json`` with a schema."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from ptyrun import run_on_pty

from spacrq.cli import main
from spacrq.queue.model import Job, Queue
from spacrq.queue.store import load_queue, save_queue

ROOT = Path(__file__).resolve().parents[2]


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _queue(tmp_path: Path, seconds: float = 0.3, fail: bool = False) -> Path:
    q = Queue(name="watched")
    for i in range(3):
        q.add(Job(module="command", id=f"j{i}",
                  settings={"argv": _py(f"import time; print('working {i}', flush=True); "
                                        f"time.sleep({seconds})")}), validate=False)
    if fail:
        q.add(Job(module="command", id="bad", settings={"argv": _py("raise SystemExit(3)")}),
              validate=False)
    path = tmp_path / "watched.queue.json"
    save_queue(q, path)
    return path


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SPACRQ_NO_LIVE")}
    env.update(TERM="xterm", PYTHONPATH=str(ROOT))
    return env


def test_a_foreground_run_on_a_terminal_is_live_and_in_a_pipe_plain(tmp_path):
    path = _queue(tmp_path)
    code, text = run_on_pty([sys.executable, "-m", "spacrq", "queue", "run", str(path)],
                            env=_env())
    assert code == 0, text
    assert "jobs finished" in text and "running  " in text and "\x1b[" in text
    assert "Every job completed" in text            # the summary, after the live lines
    (tmp_path / "b").mkdir()
    again = _queue(tmp_path / "b")
    done = subprocess.run([sys.executable, "-m", "spacrq", "queue", "run", str(again)],
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert done.returncode == 0 and "\x1b" not in done.stdout
    assert "jobs finished" not in done.stdout and "Every job completed" in done.stdout


def test_status_follow_ends_when_the_runner_ends_with_its_code(tmp_path, capsys):
    path = _queue(tmp_path, seconds=0.2, fail=True)
    assert main(["queue", "run", str(path), "--detach"]) == 0
    capsys.readouterr()
    assert main(["queue", "status", str(path), "--follow"]) == 1   # one job failed
    out = capsys.readouterr().out
    assert "jobs finished" in out and "\x1b" not in out
    assert "bad" in out and "failed" in out
    assert all(j.status in ("success", "failed") for j in load_queue(path).jobs)


def test_follow_stopped_by_sigint_leaves_the_queue_running(tmp_path):
    path = _queue(tmp_path, seconds=1.5)
    assert main(["queue", "run", str(path), "--detach"]) == 0
    try:
        follower = subprocess.Popen([sys.executable, "-m", "spacrq", "queue", "status", str(path),
                                     "--follow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=_env())
        assert "watched:" in follower.stdout.readline()
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=60)
        assert follower.returncode == 130 and "the queue goes on" in err
        from spacrq.queue.runner import runner_state
        assert runner_state(path)["alive"]
    finally:
        subprocess.run([sys.executable, "-m", "spacrq", "queue", "status", str(path), "--follow"],
                       capture_output=True, env=_env(), timeout=120)


def test_every_json_output_parses_and_carries_its_schema(tmp_path, capsys):
    path = _queue(tmp_path)
    for command, kind in (("status", "queue-status"), ("plan", "queue-plan"),
                          ("validate", "queue-validate")):
        assert main(["queue", command, str(path), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert (doc["schema"], doc["kind"]) == (1, kind)
    assert [j["id"] for j in json.loads((main(["queue", "plan", str(path), "--json"]),
                                         capsys.readouterr().out)[1])["jobs"]] == ["j0", "j1", "j2"]
