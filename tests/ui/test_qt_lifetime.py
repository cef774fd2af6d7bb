"""Closed windows leave no Qt object that only Python owns: the garbage collector runs on any
thread (a poller's, zarr's), and a Qt object it destroyed there crashed the process."""
from __future__ import annotations

import threading

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication
from qtgarbage import orphans_for_the_collector

from spacrq.ui.main_window import MainWindow
from spacrq.ui.poller import Poller

WAIT = 20_000


def test_a_closed_window_leaves_nothing_for_another_threads_garbage_collector(qtbot, workspace):
    window = MainWindow(workspace)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.loaded, timeout=WAIT):
        window.show()
    report = window.panes["Run Report"]
    qtbot.waitUntil(lambda: report.snapshots >= 1, timeout=WAIT)  # its first look has been drawn
    window.close()
    window.deleteLater()
    del window
    report = None  # the last reference to its wrapper goes
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    # pyqtgraph's menus, the pollers' threads: every one went with the window, on this thread
    assert orphans_for_the_collector() == []


def test_a_poller_has_no_qt_object_of_its_own_to_leave_behind(qtbot):
    owner = QObject()
    seen = []
    poller = Poller(lambda request: threading.current_thread().name, 0.05, owner)
    poller.snapshot.connect(seen.append)
    poller.start()
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)
    assert seen[0].startswith("poller-") and seen[0] != threading.current_thread().name
    assert poller.stop() and not poller.is_running()
    assert owner.children() == [poller]  # no QThread, no worker QObject: nothing Python-owned
    owner.deleteLater()
    del owner, poller
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    assert orphans_for_the_collector() == []
