"""pytest-qt rules for every UI test.

* The GUI thread does no I/O: a slot or event handler that opens a file, scans
  a folder, starts a process or imports a spacrq module fails the test, naming
  the line (tests/gui_io.py).  ``@pytest.mark.gui_io_allowed(reason)`` lets one
  test through, saying why.
* Nothing is left behind: no poller thread, visible window, running QThread,
  active QTimer, Python thread started by spacrq or the test still alive, or
  Qt object only Python owns (the garbage collector would destroy it on
  whatever thread it runs).  Each leftover is named with where it was started.
"""
from __future__ import annotations

import threading

import gui_io
import pytest
from qtgarbage import StartedDuringTest, orphans_for_the_collector, threads_still_alive

#: how long a thread or QThread a test stopped may take to end on its own before it is a leftover
LEFTOVER_GRACE = 2.0


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gui_io_allowed(reason): this test's GUI thread may read files (say why)")


def _uses_qt(request) -> bool:
    return "qtbot" in request.fixturenames or "qapp" in request.fixturenames


@pytest.fixture(autouse=True)
def gui_thread_does_no_io(request):
    """Fail a test whose GUI thread did file I/O, a scan, a subprocess or an import in a slot."""
    if not _uses_qt(request):
        yield
        return
    app = request.getfixturevalue("qapp")
    guard = gui_io.install()
    assert type(app).__name__ == "GuardedApplication", (
        f"the QApplication is a {type(app).__name__}, made before pytest-qt's qapp fixture: the "
        "GUI-thread I/O guard cannot see its events; let pytest-qt make it (tests/conftest.py)")
    allowed = request.node.get_closest_marker("gui_io_allowed")
    guard.reset()
    guard.active = allowed is None
    try:
        yield guard
    finally:
        guard.active = False
    flags, _ = list(guard.flags), guard.reset()
    if flags:
        pytest.fail("the GUI thread did I/O while Qt delivered an event (move it to the pane's "
                    "watch or a worker):\n  " + "\n  ".join(map(str, flags)), pytrace=False)


@pytest.fixture(autouse=True)
def no_leftover_qt(request):
    if not _uses_qt(request):
        yield
        return
    before = {t.ident for t in threading.enumerate()}
    with StartedDuringTest() as started:
        yield
        left_running = _leftovers(started, before)
    assert not left_running, "test left behind:\n  " + "\n  ".join(left_running)


def _leftovers(started: StartedDuringTest, before: set[int]) -> list[str]:
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    from spacrq.ui.poller import LIVE_POLLERS

    app = QApplication.instance()
    found = []
    running = [p for p in list(LIVE_POLLERS) if p.is_running()]
    for p in running:
        stuck = "" if p.stop(LEFTOVER_GRACE) else " (and stuck in a poll)"
        found.append(f"poller {p.name} running{stuck}")
    visible = [type(w).__name__ for w in (app.topLevelWidgets() if app else []) if w.isVisible()]
    for w in (app.topLevelWidgets() if app else []):
        if w.isVisible():
            w.close()
    found += [f"window {name} open" for name in visible]
    if app is not None:
        # what pytest-qt closed and deleteLater()'d goes now, on the GUI thread; left to a
        # later test's event loop, it went while that test's threads were collecting garbage
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    found += started.still_going(LEFTOVER_GRACE)
    found += threads_still_alive(before, LEFTOVER_GRACE)
    orphans = orphans_for_the_collector()
    if orphans:
        found.append(f"Qt objects only Python owns, for the garbage collector to destroy on any "
                     f"thread: {orphans}; give each a Qt parent")
    return found


@pytest.fixture
def open_pane(qtbot, workspace):
    """Open a pane of any kind (on the test workspace unless told); each is shut down after."""
    panes = []

    def open_(pane_class, on=None):
        pane = pane_class(on or workspace)
        qtbot.addWidget(pane)
        panes.append(pane)
        return pane

    yield open_
    for pane in panes:
        pane.shutdown()


@pytest.fixture
def gui_io_flags():
    """The guard's record, for a test of the guard itself: read it, then clear it."""
    return gui_io.GUARD
