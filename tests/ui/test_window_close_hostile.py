"""Closing the main window (or the Run Report pane alone) while its polls misbehave: every close
returns within its second and leaves no thread."""
from __future__ import annotations

import threading
import time

from spacrq.ui.main_window import SHUTDOWN_BUDGET, MainWindow
from spacrq.ui.poller import LIVE_POLLERS

WAIT = 20_000
#: how long a poll goes on after it was told to stop: the one file it was reading when told
LAST_FILE = 0.4


def open_window(qtbot, workspace) -> MainWindow:
    window = MainWindow(workspace)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.loaded, timeout=WAIT):
        window.show()
    return window


def test_every_panes_poll_hears_the_close_at_once_not_one_after_another(qtbot, workspace,
                                                                        monkeypatch):
    """Three polls each finishing a 0.4 s read after being told: told one after another they
    took 1.2 s; told together, the window closes in one read's time."""
    window = open_window(qtbot, workspace)
    inside = []
    for pane in window.panes.values():
        watch, entered, pause = pane.watch, threading.Event(), threading.Event()

        def heavy(view, watch=watch, entered=entered, pause=pause):
            entered.set()
            while not watch.interrupted():
                pause.wait(0.005)
            pause.wait(LAST_FILE)  # the file in hand is read to its end

        monkeypatch.setattr(watch, "_poll", heavy)
        pane.poll_now()
        inside.append(entered)
    assert all(e.wait(5.0) for e in inside), "not every heavy poll started"
    pollers = [p for p in LIVE_POLLERS if p.is_running()]
    started = time.monotonic()
    window.close()
    took = time.monotonic() - started
    assert took < SHUTDOWN_BUDGET, f"closing took {took:.2f}s"
    assert len(pollers) >= 3 and not any(p.is_running() for p in pollers)


def test_closing_while_every_poll_raises_is_quick_and_leaves_nothing(qtbot, workspace,
                                                                     monkeypatch):
    window = open_window(qtbot, workspace)
    raised = []
    for pane in window.panes.values():
        failed = threading.Event()

        def broken(view, failed=failed):
            failed.set()
            raise OSError("the share went away")

        monkeypatch.setattr(pane.watch, "_poll", broken)
        pane.poll_now()
        raised.append(failed)
    assert all(e.wait(5.0) for e in raised)
    pollers = [p for p in LIVE_POLLERS if p.is_running()]
    started = time.monotonic()
    window.close()
    assert time.monotonic() - started < SHUTDOWN_BUDGET
    assert not any(p.is_running() for p in pollers)
