"""An uncaught error in a slot is logged with its traceback, said in a message, and the window lives on."""
from __future__ import annotations

import logging
import subprocess
import sys
import threading

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from spacrq.ui import crash
from spacrq.ui.crash import CrashGuard
from spacrq.ui.main_window import MainWindow

WAIT = 20_000


@pytest.fixture
def guard(tmp_path):
    g = CrashGuard(tmp_path / "logs").install(native=False)
    yield g
    g.uninstall()
    g.deleteLater()  # destroyed on the GUI thread, not by the garbage collector on another


def _broken_slot():
    raise RuntimeError("the slot met a file nobody foresaw")


@pytest.mark.qt_no_exception_capture  # the guard under test is the hook, not pytest-qt's
def test_a_slot_that_raises_is_logged_shown_and_the_window_lives_on(qtbot, workspace, guard):
    window = MainWindow(workspace, guard=guard)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.loaded, timeout=WAIT):
        window.show()
    button = QPushButton("break", window.panes["Queue"])
    button.clicked.connect(_broken_slot)
    with qtbot.waitSignal(guard.crashed, timeout=5000):  # written off the GUI thread
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)

    text = guard.crash_log.read_text()
    assert "Traceback (most recent call last)" in text and "_broken_slot" in text
    assert "RuntimeError: the slot met a file nobody foresaw" in text
    qtbot.waitUntil(lambda: window._crash_box is not None and window._crash_box.isVisible(),
                    timeout=5000)
    box = window._crash_box
    assert str(guard.crash_log) in box.text() and "nobody foresaw" in box.text()
    assert not box.isModal()
    # the window carries on: it is shown, its panes poll, and a second error updates the same box
    assert window.isVisible()
    with qtbot.waitSignal(guard.crashed, timeout=5000):
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "2 unexpected errors" in box.text(), timeout=5000)
    assert window._crash_box is box
    assert guard.crash_log.read_text().count("Traceback") == 2
    qtbot.waitUntil(lambda: guard.app_log.is_file()  # written by the log's own thread
                    and "uncaught in the window" in guard.app_log.read_text(), timeout=5000)
    box.close()
    window.close()


@pytest.mark.qt_no_exception_capture
def test_a_thread_that_dies_is_logged_and_reaches_the_window(qtbot, workspace, guard):
    window = MainWindow(workspace, guard=guard)
    qtbot.addWidget(window)
    with qtbot.waitSignal(guard.crashed, timeout=5000) as blocker:
        worker = threading.Thread(target=_broken_slot, name="reader")
        worker.start()
        worker.join()
    assert "thread reader" in blocker.args[0] and blocker.args[1] == str(guard.crash_log)
    assert "_broken_slot" in guard.crash_log.read_text()
    qtbot.waitUntil(lambda: window._crash_box is not None, timeout=5000)
    window._crash_box.close()
    window.close()


def test_without_a_writable_log_folder_the_traceback_still_goes_somewhere(tmp_path, capsys):
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    g = CrashGuard(blocked)  # every log path under it fails to open
    try:
        raise ValueError("nowhere to write")
    except ValueError as exc:
        g.record(type(exc), exc, exc.__traceback__)
    assert "nowhere to write" in capsys.readouterr().err
    assert g.count == 1


def test_native_crashes_are_written_by_faulthandler(tmp_path):
    code = ("import sys, faulthandler; from pathlib import Path; from spacrq.ui.crash import CrashGuard; "
            "CrashGuard(Path(sys.argv[1])).install(); faulthandler._sigsegv()")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, timeout=60)
    assert out.returncode != 0
    text = (tmp_path / crash.NATIVE_LOG).read_text()
    assert "Fatal Python error: Segmentation fault" in text


def test_the_application_log_rotates(tmp_path, monkeypatch):
    monkeypatch.setattr(crash, "LOG_BYTES", 2000)
    g = CrashGuard(tmp_path).install(native=False)
    try:
        for n in range(200):
            logging.getLogger("spacrq").info("line %d of a long night", n)
    finally:
        g.uninstall()
    assert (tmp_path / "spacrq.log").is_file() and (tmp_path / "spacrq.log.1").is_file()
    assert len(list(tmp_path.glob("spacrq.log.*"))) <= crash.LOG_BACKUPS


def test_logs_live_in_the_per_user_state_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACRQ_STATE_DIR", str(tmp_path / "state"))
    assert crash.logs_dir() == tmp_path / "state" / "logs"
    assert (tmp_path / "state" / "logs").stat().st_mode & 0o077 == 0
    monkeypatch.delenv("SPACRQ_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert crash.state_dir() == tmp_path / "xdg" / "spacrq"
