"""The window's Morning report action, and the end-of-queue notification that opens it."""
from __future__ import annotations

import sys
from pathlib import Path

from spacrq.queue.engine import run_queue
from spacrq.queue.model import Job, Queue
from spacrq.queue.store import save_queue
from spacrq.ui.main_window import MainWindow

WAIT = 30_000


def _finished_queue(ws) -> str:
    queue = Queue(name="overnight")
    queue.add(Job(module="command", id="ok", settings={"argv": [sys.executable, "-c", "print(1)"]}),
              validate=False)
    queue.add(Job(module="command", id="boom",
                  settings={"argv": [sys.executable, "-c", "raise SystemExit('no share')"]}),
              validate=False)
    path = ws.queues / "overnight.queue.json"
    save_queue(queue, path)
    run_queue(queue, path)
    return str(path)


def _window(qtbot, ws) -> MainWindow:
    window = MainWindow(ws)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.loaded, timeout=WAIT):
        window.show()
    qtbot.waitUntil(lambda: getattr(window.panes["Queue"], "path", None) is not None, timeout=WAIT)
    return window


def test_the_menu_writes_the_open_queues_report_off_the_gui_thread(qtbot, workspace, monkeypatch):
    monkeypatch.setenv("SPACRQ_NO_BROWSER", "1")
    path = _finished_queue(workspace)
    window = _window(qtbot, workspace)
    try:
        action = window.menus.actions["report"]
        assert action.toolTip() and action.isEnabled()
        with qtbot.waitSignal(window.report_written, timeout=WAIT) as blocker:
            action.trigger()
        written, problem = blocker.args
        assert problem == "" and written.endswith("morning-report.html")
        page = Path(written).read_text(encoding="utf-8")
        assert "Morning report: overnight" in page and "1 failed" in page
        assert window.last_report == written
        assert path in page
    finally:
        window.close()


def test_a_queue_that_ends_makes_the_notification_open_its_report(qtbot, workspace, monkeypatch):
    monkeypatch.setenv("SPACRQ_NO_BROWSER", "1")
    path = _finished_queue(workspace)
    window = _window(qtbot, workspace)
    try:
        window.panes["Queue"].queue_ended.emit(path)   # as the pane says when the runner ends
        assert window.last_ended_queue == path
        with qtbot.waitSignal(window.report_written, timeout=WAIT) as blocker:
            window.open_last_report()                    # what a click on the tray message does
        assert blocker.args[0].endswith("morning-report.html") and blocker.args[1] == ""
    finally:
        window.close()


def test_a_report_that_cannot_be_written_is_a_sentence(qtbot, workspace, monkeypatch):
    import spacrq.night as night
    monkeypatch.setenv("SPACRQ_NO_BROWSER", "1")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(night, "write_report", full)
    _finished_queue(workspace)
    window = _window(qtbot, workspace)
    try:
        with qtbot.waitSignal(window.report_written, timeout=WAIT) as blocker:
            window.morning_report()
        assert blocker.args[0] == "" and "could not be written" in blocker.args[1]
        assert "could not be written" in window.statusBar().currentMessage()
    finally:
        window.close()
