"""Live displays: drawn on a terminal only, plain and unchanged in a pipe; follow ends with the run."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import pytest
from ptyrun import run_on_pty

from spacrq import terminal
from spacrq.terminal import Frame, LiveLines, follow


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_live_is_for_terminals_only(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("SPACRQ_NO_LIVE", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert terminal.live_enabled(Tty()) is True
    assert terminal.live_enabled(io.StringIO()) is False      # a pipe or a file
    monkeypatch.setenv("CI", "true")
    assert terminal.live_enabled(Tty()) is False               # CI logs stay plain
    monkeypatch.delenv("CI")
    monkeypatch.setenv("TERM", "dumb")
    assert terminal.live_enabled(Tty()) is False


def test_a_disabled_display_writes_nothing():
    out = io.StringIO()
    with LiveLines(lambda: ["working"], stream=out, enabled=False):
        pass
    assert out.getvalue() == ""


def test_follow_in_a_pipe_prints_each_changed_frame_once_and_ends_with_the_run():
    frames = iter([Frame(("1 of 3",)), Frame(("1 of 3",)), Frame(("2 of 3",)),
                   Frame(("3 of 3", "done"), ended=True, exit_code=1)])
    out = io.StringIO()
    last, code = follow(lambda: next(frames), stream=out, interval=0.001, enabled=False)
    assert code == 1 and last.ended
    assert out.getvalue() == "1 of 3\n2 of 3\n3 of 3\ndone\n"
    assert "\x1b" not in out.getvalue()


def test_follow_in_a_pipe_prints_a_line_per_event_not_per_tick_of_its_clock():
    """`status --follow > file` wrote a line every second: the elapsed time changed."""
    frames = iter([Frame(("1 of 3  elapsed 1s",), key=("1 of 3",)),
                   Frame(("1 of 3  elapsed 2s",), key=("1 of 3",)),
                   Frame(("1 of 3  elapsed 3s",), key=("1 of 3",)),
                   Frame(("2 of 3  elapsed 4s",), key=("2 of 3",)),
                   Frame(("3 of 3  elapsed 5s",), ended=True, key=("3 of 3",))])
    out = io.StringIO()
    follow(lambda: next(frames), stream=out, interval=0.001, enabled=False)
    assert out.getvalue() == "1 of 3  elapsed 1s\n2 of 3  elapsed 4s\n3 of 3  elapsed 5s\n"


def test_a_running_queues_frame_changes_with_its_jobs_not_its_clock(tmp_path):
    from spacrq.queue import Job, Queue, save_queue
    from spacrq.queue.live import _view
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", settings={"argv": ["true"]}), validate=False)
    queue.jobs[0].status, queue.jobs[0].started = "running", "2026-12-01T10:00:00+00:00"
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    (lines1, key1), (lines2, key2) = _view(path, now=1_796_119_205), _view(path, now=1_796_119_214)
    assert lines1 != lines2 and key1 == key2  # only the clock moved
    queue.jobs[0].status = "success"
    save_queue(queue, path)
    assert _view(path, now=1_796_119_214)[1] != key2  # the job ended: a change


def test_follow_stopped_with_ctrl_c_leaves_the_run_and_says_so(capsys):
    def poll():
        raise KeyboardInterrupt
    last, code = follow(poll, stream=io.StringIO(), interval=0.001, enabled=False,
                        on_stop="the queue goes on")
    assert code == terminal.FOLLOW_STOPPED and last is None
    assert "the queue goes on" in capsys.readouterr().err


SCRIPT = textwrap.dedent("""
    import sys, time
    from spacrq.terminal import LiveLines
    n = [0]
    def poll():
        n[0] += 1
        return [f"blocks {min(n[0], 5)} of 5", "workers busy 2"]
    with LiveLines(poll, interval=0.01):
        deadline = time.monotonic() + 5
        while n[0] < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
    print("summary: 5 blocks done")
""")


def _run(script, *, tty):
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SPACRQ_NO_LIVE")}
    env["TERM"] = "xterm"
    if not tty:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, env=env,
                              timeout=60)
        return done.stdout
    return run_on_pty([sys.executable, "-c", script], env=env, timeout=30)[1].encode()


@pytest.mark.parametrize("tty", [True, False])
def test_the_display_is_drawn_on_a_pty_and_never_into_a_pipe(tty):
    out = _run(SCRIPT, tty=tty)
    assert b"summary: 5 blocks done" in out
    if tty:
        assert b"blocks 5 of 5" in out and b"\x1b[" in out   # redrawn in place
    else:
        assert out == b"summary: 5 blocks done\n"              # exactly the plain summary
