"""The main window hosts the three panes and stops their pollers when closed."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel

from spacrq.ui.main_window import PANES, MainWindow
from spacrq.ui.poller import LIVE_POLLERS


def test_window_shows_three_working_panes_and_closing_stops_the_pollers(qtbot, workspace):
    window = MainWindow(workspace)
    qtbot.addWidget(window)
    window.show()
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    assert titles == [title for title, _ in PANES]
    broken = [t for t, pane in window.panes.items() if isinstance(pane, QLabel)]
    assert broken == [], f"panes that failed to open: {broken}"
    qtbot.waitUntil(lambda: any(p.is_running() for p in LIVE_POLLERS), timeout=5000)
    window.close()
    assert not any(p.is_running() for p in LIVE_POLLERS)


def test_pane_messages_reach_the_status_bar(qtbot, workspace):
    window = MainWindow(workspace, notes=["the demo could not be set up: disk full"])
    qtbot.addWidget(window)
    assert "disk full" in window.statusBar().currentMessage()
    with qtbot.waitSignal(window.notify, timeout=1000) as blocker:
        window.panes["Queue"].notify.emit("queue finished: 3 ok")
    assert blocker.args == ["queue finished: 3 ok"]
    assert window.statusBar().currentMessage() == "queue finished: 3 ok"
    window.shutdown()
