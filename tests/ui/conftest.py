"""pytest-qt rules: fail any test that leaves a poller thread or a visible window."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_leftover_qt(request):
    yield
    if "qtbot" not in request.fixturenames and "qapp" not in request.fixturenames:
        return
    from PySide6.QtWidgets import QApplication

    from spacrq.ui.poller import LIVE_POLLERS

    app = QApplication.instance()
    running = [p for p in list(LIVE_POLLERS) if p.is_running()]
    for p in running:
        p.stop()
    visible = [w for w in (app.topLevelWidgets() if app else []) if w.isVisible()]
    for w in visible:
        w.close()
    assert not running, f"test left {len(running)} poller thread(s) running"
    assert not visible, f"test left windows open: {[type(w).__name__ for w in visible]}"


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
