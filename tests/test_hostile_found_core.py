"""Edges a hostile tester found in the run-file protocol, the autostart and the terminal.

* Every file spacrq replaced atomically came out ``0600`` (the temp file's
  mode): the morning report handed to the next shift was unreadable to it, and
  a queue file shared with the group lost its group permissions.
* An append that the disk cut short (a short ``write`` on a nearly full disk)
  was reported written: a lost write, silently.
* Eight ``spacrq autostart add`` at once kept six marks, each saying it was marked.
* ``spacrq autostart install`` over a file where its folder belongs printed
  ``[Errno 17] File exists: …`` and no fix; ``--wait inf`` waited forever.
* Escape sequences from run files reached the terminal through ``follow``.
"""
from __future__ import annotations

import errno
import io
import os
import stat
import subprocess
import sys

import pytest

from spacrq import autostart as au
from spacrq import runfiles
from spacrq.cli import main as cli_main
from spacrq.terminal import Frame, follow, plain


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_file_gets_the_umask_mode_not_the_temp_files(tmp_path):
    old = os.umask(0o022)
    try:
        runfiles.write_text(tmp_path / "report.html", "<p>night</p>")
        runfiles.write_json(tmp_path / "q.json", {"a": 1})
    finally:
        os.umask(old)
    assert _mode(tmp_path / "report.html") == 0o644
    assert _mode(tmp_path / "q.json") == 0o644


def test_a_private_umask_is_honoured(tmp_path):
    old = os.umask(0o077)
    try:
        runfiles.write_text(tmp_path / "x.txt", "x")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "x.txt") == 0o600


def test_a_replaced_file_keeps_its_mode(tmp_path):
    target = tmp_path / "night.queue.json"
    target.write_text("{}")
    os.chmod(target, 0o664)
    runfiles.write_json(target, {"jobs": []})
    assert _mode(target) == 0o664


def test_an_append_cut_short_by_the_disk_is_finished_or_refused(tmp_path, monkeypatch):
    path = tmp_path / "journal.jsonl"
    real_write = os.write
    calls = []

    def short(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:5]))  # the disk took five bytes
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", short)
    runfiles.append_jsonl(path, {"event": "done", "n": 12345})
    monkeypatch.undo()
    assert runfiles.read_jsonl(path) == [{"event": "done", "n": 12345}]


def test_an_append_on_a_full_disk_says_so(tmp_path, monkeypatch):
    path = tmp_path / "journal.jsonl"

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError):
        runfiles.append_jsonl(path, {"event": "done"})


def _queue(folder, name):
    from spacrq.queue.model import Job, Queue
    from spacrq.queue.store import save_queue
    queue = Queue(name=name)
    queue.add(Job(module="command", id="a", settings={"argv": ["true"]}), validate=False)
    path = folder / f"{name}.queue.json"
    save_queue(queue, path)
    return path


def test_marks_made_at_the_same_time_are_all_kept(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_STATE_HOME": "",
           "XDG_CONFIG_HOME": ""}
    queues = [_queue(tmp_path, f"q{i}") for i in range(8)]
    # each process marks once the file exists: all eight read-modify-write at once
    code = ("import sys, time; from spacrq import autostart as au\n"
            "while not __import__('os').path.exists(sys.argv[2]): time.sleep(0.001)\n"
            "au.mark(sys.argv[1])")
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(q), str(go)], env=env)
             for q in queues]
    go.write_text("")
    assert [p.wait(timeout=60) for p in procs] == [0] * 8
    assert sorted(au.marked({"HOME": env["HOME"]})) == sorted(q.resolve() for q in queues)


def test_an_autostart_folder_that_is_a_file_is_one_sentence_with_the_fix(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setattr(au, "has_systemd", lambda: False)
    (tmp_path / ".config").mkdir()
    (tmp_path / ".config" / "autostart").write_text("not a folder")
    assert cli_main(["autostart", "install"]) == 2
    err = capsys.readouterr().err
    assert "[Errno" not in err and err.count("\n") == 1
    assert str(tmp_path / ".config" / "autostart") in err and ";" in err


@pytest.mark.parametrize("wait", ["inf", "nan", "1e308", "-1"])
def test_an_endless_boot_wait_is_refused(tmp_path, monkeypatch, capsys, wait):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cli_main(["autostart", "run", "--no-notify", f"--wait={wait}"]) == 2
    assert "--wait" in capsys.readouterr().err


def test_follow_never_prints_control_characters_and_ends_over_a_poll_that_fails():
    out = io.StringIO()
    frames = iter([Frame(("task\x1b[2J\x1b]0;owned\x07 1 of 4",)),
                   Frame(("done\x9b31m",), ended=True, exit_code=0)])
    last, code = follow(lambda: next(frames), stream=out, interval=0.0, enabled=False)
    assert code == 0 and "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
    assert "\x9b" not in out.getvalue() and "owned" in out.getvalue()

    def broken():
        raise TypeError("'int' object is not iterable")

    out = io.StringIO()
    last, code = follow(broken, stream=out, interval=0.0, enabled=False)
    assert code == 1 and "not iterable" in out.getvalue()
    assert plain("a\tb\nc\x00\x1b") == "a\tb\nc??"


@pytest.mark.parametrize("use_systemd", [True, False])
def test_a_line_break_in_the_program_path_never_reaches_the_autostart_file(tmp_path, monkeypatch,
                                                                           capsys, use_systemd):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setattr(au, "has_systemd", lambda: use_systemd)
    monkeypatch.setattr(au, "_systemctl", lambda *args: "")
    monkeypatch.setattr(au, "autostart_argv",
                        lambda: ["/opt/spacrq\nExecStartPre=/bin/sh -c evil", "-m", "spacrq"])
    assert cli_main(["autostart", "install"]) == 2
    err = capsys.readouterr().err
    assert "line break" in err and err.count("\n") == 1
    assert au.installed({"HOME": str(tmp_path)}) == []


def test_a_line_break_in_the_program_path_never_reaches_the_menu_entry():
    from spacrq.desktop import DesktopError, desktop_exec
    with pytest.raises(DesktopError):
        desktop_exec(["/opt/spacrq\nExec=evil", "gui"])
