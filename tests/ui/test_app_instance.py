"""One window per workspace: a second launch brings the first forward; the socket is private."""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from spacrq.ui import instance as app


@pytest.fixture
def private_env(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.setenv("SPACRQ_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SPACRQ_SETTINGS", str(tmp_path / "settings.ini"))
    return run


@pytest.fixture
def loose_umask():
    old = os.umask(0)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_socket_and_lock_are_private_whatever_the_umask(qapp, private_env, loose_umask, workspace):
    instance = app.SingleInstance(str(workspace.root))
    try:
        assert instance.acquire()
        instance.listen()
        folder = instance.folder
        assert folder == private_env / "spacrq"
        assert _mode(folder) == 0o700
        assert os.lstat(folder).st_uid == os.getuid()
        assert _mode(instance.name) & 0o077 == 0  # the socket itself
        assert _mode(instance.lock_path) & 0o077 == 0
        assert stat.S_ISSOCK(os.lstat(instance.name).st_mode)
    finally:
        instance.release()


def test_a_loose_existing_folder_is_tightened_and_a_foreign_link_refused(private_env, tmp_path):
    (private_env / "spacrq").mkdir(mode=0o777)
    os.chmod(private_env / "spacrq", 0o777)
    assert app.instance_dir() == private_env / "spacrq"
    assert _mode(private_env / "spacrq") == 0o700
    os.rmdir(private_env / "spacrq")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", private_env / "spacrq")
    assert app.instance_dir() != private_env / "spacrq"  # a link is not our folder


def test_a_second_launch_brings_the_first_window_forward_and_exits(qtbot, private_env, workspace):
    first = app.SingleInstance(str(workspace.root))
    assert first.acquire()
    first.listen()
    try:
        with qtbot.waitSignal(first.server.newConnection, timeout=30_000):
            out = subprocess.run([sys.executable, "-m", "spacrq.ui.app", "--workspace",
                                  str(workspace.root)], capture_output=True, text=True, timeout=60,
                                 env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
        assert out.returncode == 0, out.stderr
        assert "already open" in out.stdout and "Traceback" not in out.stderr
        # and the lock is still the first one's
        assert not app.SingleInstance(str(workspace.root)).acquire()
    finally:
        first.release()


def test_after_the_first_closes_the_workspace_can_be_opened_again(qapp, private_env, workspace):
    first = app.SingleInstance(str(workspace.root))
    assert first.acquire()
    assert not app.SingleInstance(str(workspace.root)).acquire()  # held: two launches at once
    first.release()
    again = app.SingleInstance(str(workspace.root))
    assert again.acquire()
    again.release()


def test_a_holder_that_never_answers_is_a_sentence_not_a_second_window(private_env, workspace,
                                                                        monkeypatch):
    first = app.SingleInstance(str(workspace.root))
    assert first.acquire()  # holds the lock, never listens (a hung window)
    try:
        monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
        out = subprocess.run([sys.executable, "-m", "spacrq", "gui", "--workspace",
                              str(workspace.root)], capture_output=True, text=True, timeout=60)
    finally:
        first.release()
    assert out.returncode == 2
    assert "does not answer" in out.stderr and str(os.getpid()) in out.stderr


@pytest.mark.parametrize("problem", ["file", "stranger", "read_only"])
def test_a_workspace_that_cannot_be_used_is_one_sentence_and_exit_2(tmp_path, private_env, problem):
    target = tmp_path / "ws"
    if problem == "file":
        target.write_text("not a folder")
    elif problem == "stranger":
        target.mkdir()
        (target / "thesis.tex").write_text("")
    else:
        target.mkdir()
        (target / "workspace.json").write_text('{"spacrq_workspace": 1}')
        os.chmod(target, 0o555)
    try:
        out = subprocess.run([sys.executable, "-m", "spacrq", "gui", "--workspace", str(target)],
                             capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    finally:
        os.chmod(target, 0o755)
    assert out.returncode == 2
    assert out.stderr.startswith("spacrq: ") and out.stderr.count("\n") == 1
    assert "Traceback" not in out.stderr and str(target) in out.stderr


def test_a_launch_from_another_environment_still_finds_the_open_window(qapp, private_env,
                                                                       tmp_path, workspace,
                                                                       monkeypatch):
    """The private folder follows XDG_RUNTIME_DIR, which su, cron and some ssh shells do not
    set: two windows opened on one workspace side by side.  The workspace's own lock is
    shared whatever the environment, and it says where the open window listens."""
    first = app.SingleInstance(str(workspace.root))
    assert first.acquire()
    first.listen()
    try:
        monkeypatch.delenv("XDG_RUNTIME_DIR")  # a shell without a desktop login
        second = app.SingleInstance(str(workspace.root))
        assert second.folder != first.folder
        assert not second.acquire()
        assert second.name == first.name and second.holder() == str(os.getpid())
        assert second.signal_running(wait=2.0)  # it reached the open window's socket
        # a socket name planted in the workspace's lock, outside a private folder: not called
        (tmp_path / "planted").mkdir(mode=0o755)
        assert not app._ours(str(tmp_path / "planted" / "sock"))
    finally:
        first.release()
    third = app.SingleInstance(str(workspace.root))
    assert third.acquire()  # released: free again
    third.release()


def test_sigterm_closes_the_window_as_its_close_button_does(private_env, workspace, tmp_path):
    """A logout's SIGTERM ended the window mid-poll with exit 143: nothing saved, nothing
    logged.  Now it closes the window (its state saved, its pollers ended) and says so."""
    import signal

    from spacrq.ui.crash import logs_dir
    from waiting import wait_until
    proc = subprocess.Popen([sys.executable, "-m", "spacrq", "gui", "--workspace",
                             str(workspace.root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    try:
        log = logs_dir() / "spacrq.log"
        wait_until(lambda: log.is_file() and "opened" in log.read_text(), timeout=60,
                   what="the window to open")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    text = log.read_text()
    assert "asked to end (SIGTERM): closing the window" in text and "spacrq closed" in text


def test_calling_a_window_that_does_not_listen_waits_on_an_event_and_can_be_cancelled(
        qapp, private_env, workspace):
    """A held workspace whose window does not listen (yet): signal_running tries again
    until its wait ends — on an event, not a sleep — and gives up at once when cancelled
    from another thread (no window's thread is ever held by it)."""
    first = app.SingleInstance(str(workspace.root))
    assert first.acquire()  # held, but never listening
    try:
        second = app.SingleInstance(str(workspace.root))
        assert not second.acquire()
        answered = []
        caller = threading.Thread(target=lambda: answered.append(second.signal_running(
            wait=600.0)))
        caller.start()
        second.cancel()
        caller.join(timeout=30)
        assert not caller.is_alive() and answered == [False]  # gave up, long before 600 s
        assert second.signal_running(wait=0.0) is False  # no wait at all: one try
    finally:
        first.release()


def test_the_ui_package_never_sleeps():
    """A GUI thread must never sleep: waits in spacrq.ui go through a poller or an event."""
    offenders = []
    for path in sorted(Path(app.__file__).parent.rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if "time.sleep(" in code or re.search(r"(?<![\w.])sleep\(", code):
                offenders.append(f"{path.name}:{n}: {line.strip()}")
    assert offenders == []
