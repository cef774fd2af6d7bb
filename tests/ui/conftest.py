"""pytest-qt rules: fail any test that leaves a poller thread, a visible window, or a Qt
object only Python owns (the garbage collector would destroy it on whatever thread it runs)."""
from __future__ import annotations

import pytest
from qtgarbage import orphans_for_the_collector


@pytest.fixture(autouse=True)
def no_leftover_qt(request):
    yield
    if "qtbot" not in request.fixturenames and "qapp" not in request.fixturenames:
        return
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    from spacrq.ui.poller import LIVE_POLLERS

    app = QApplication.instance()
    running = [p for p in list(LIVE_POLLERS) if p.is_running()]
    for p in running:
        p.stop()
    visible = [type(w).__name__ for w in (app.topLevelWidgets() if app else []) if w.isVisible()]
    for w in (app.topLevelWidgets() if app else []):
        if w.isVisible():
            w.close()
    if app is not None:
        # what pytest-qt closed and deleteLater()'d goes now, on the GUI thread; left to a
        # later test's event loop, it went while that test's threads were collecting garbage
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    orphans = orphans_for_the_collector()
    assert not running, f"test left {len(running)} poller thread(s) running"
    assert not visible, f"test left windows open: {visible}"
    assert not orphans, (f"test left Qt objects only Python owns, for the garbage collector to "
                         f"destroy on any thread: {orphans}; give each a Qt parent")


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
