"""The main window: paints first, then builds its three panes; menus press the panes' buttons;
closes within its budget even in the middle of a heavy poll."""
from __future__ import annotations

import logging
import threading
import time

import pytest
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QAbstractButton, QLabel, QTabBar

from spacrq.ui import main_window
from spacrq.ui.main_window import PANES, SHUTDOWN_BUDGET, MainWindow
from spacrq.ui.pane_base import PaneBase
from spacrq.ui.poller import LIVE_POLLERS
from spacrq.ui.qt_lifetime import ADOPTED
from spacrq.watching import WatchBase

WAIT = 20_000


class HeavyWatch(WatchBase):
    """A poll that reads and reads (a 10-hour report, a share that answers slowly) until it is
    interrupted — or, ``stubborn``, until the test lets it go."""

    stubborn = False

    def __init__(self) -> None:
        super().__init__()
        self.in_poll = threading.Event()
        self.let_go = threading.Event()

    def _poll(self, view):
        self.in_poll.set()
        while not self.let_go.wait(0.005):
            if self.interrupted() and not self.stubborn:
                return None
        return None


class StubbornWatch(HeavyWatch):
    stubborn = True


class HeavyPane(PaneBase):
    """A pane whose watch is in the middle of a heavy poll."""

    watch_class = HeavyWatch

    def __init__(self, workspace, parent=None) -> None:
        super().__init__(parent)
        self.start_watch(self.watch_class(), 0.05)

    def show_snapshot(self, snapshot) -> None:
        pass


class StubbornPane(HeavyPane):
    watch_class = StubbornWatch


def open_window(qtbot, workspace, **kwargs) -> MainWindow:
    window = MainWindow(workspace, **kwargs)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.loaded, timeout=WAIT):
        window.show()
    return window


def test_the_window_paints_before_seeding_or_building_any_pane(qtbot, tmp_path):
    from spacrq.workspace import open_workspace
    ws, _ = open_workspace(tmp_path / "new", seed=False)  # what the app does on a new workspace
    window = MainWindow(ws)
    qtbot.addWidget(window)
    assert [getattr(p, "is_placeholder", False) for p in window.panes.values()] == [True] * 3
    assert all("Loading" in p.text() for p in window.panes.values())
    at_paint = {}

    def painted() -> None:  # what was there when the window first painted
        at_paint["queues"] = sorted(p.name for p in ws.queues.iterdir())
        at_paint["placeholders"] = all(getattr(p, "is_placeholder", False)
                                       for p in window.panes.values())

    window.first_painted.connect(painted)
    with qtbot.waitSignal(window.loaded, timeout=WAIT):
        window.show()
    assert at_paint == {"queues": [], "placeholders": True}
    assert window.painted_at is not None and window.is_loaded()
    assert (ws.queues / "demo.queue.json").is_file() and not ws.demo_pending()  # seeded after
    qtbot.waitUntil(lambda: window.panes["Queue"].path is not None
                    and window.panes["Queue"].path.name == "demo.queue.json", timeout=WAIT)
    window.close()


def test_window_shows_three_working_panes_and_closing_stops_the_pollers(qtbot, workspace):
    window = open_window(qtbot, workspace)
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    assert titles == [title for title, _ in PANES]
    broken = [t for t, pane in window.panes.items() if isinstance(pane, QLabel)]
    assert broken == [], f"panes that failed to open: {broken}"
    qtbot.waitUntil(lambda: any(p.is_running() for p in LIVE_POLLERS), timeout=5000)
    window.close()
    assert not any(p.is_running() for p in LIVE_POLLERS)


def test_pane_messages_reach_the_status_bar(qtbot, workspace):
    window = open_window(qtbot, workspace, notes=["the demo could not be set up: disk full"])
    with qtbot.waitSignal(window.notify, timeout=1000) as blocker:
        window.panes["Queue"].notify.emit("queue finished: 3 ok")
    assert blocker.args == ["queue finished: 3 ok"]
    assert window.statusBar().currentMessage() == "queue finished: 3 ok"
    window.close()


def test_a_pane_that_cannot_be_opened_says_why_and_the_others_work(qtbot, workspace, monkeypatch):
    from spacrq.ui import main_window
    monkeypatch.setattr(main_window, "PANES", PANES[:2] + (("Experiments", "no_such_pkg_xyz:Pane"),))
    window = open_window(qtbot, workspace)
    assert "could not be opened" in window.panes["Experiments"].text()
    assert not isinstance(window.panes["Queue"], QLabel)
    window.close()


def test_menus_hold_file_run_view_help_and_drive_the_queue_pane(qtbot, workspace):
    window = open_window(qtbot, workspace)
    menus = [a.text().replace("&", "") for a in window.menuBar().actions()]
    assert menus == ["File", "Run", "View", "Help"]
    acts = window.menus.actions
    for key in ("new", "open", "save", "workspace", "quit", "run", "stop", "abort", "resume",
                "retry", "about", "logs"):
        assert key in acts
    assert acts["run"].shortcut().toString() == "F5"
    assert acts["stop"].shortcut().toString() == "Shift+F5"
    assert acts["resume"].shortcut().toString() == "F6"
    queue = window.panes["Queue"]
    # each action is enabled exactly when its button is, and pressing it clicks the button
    assert acts["stop"].isEnabled() == queue.stop_button.isEnabled()
    queue.stop_button.setEnabled(True)
    assert acts["stop"].isEnabled()
    queue.stop_button.setEnabled(False)
    assert not acts["stop"].isEnabled()
    clicked = []
    queue.validate_button.clicked.connect(lambda: clicked.append("validate"))
    queue.save_button.setEnabled(True)
    queue.save_button.clicked.connect(lambda: clicked.append("save"))
    window.show_pane("Experiments")
    acts["save"].trigger()
    assert clicked == ["save"]
    assert window.tabs.tabText(window.tabs.currentIndex()) == "Queue"
    window.close()


def test_view_shortcuts_switch_panes(qtbot, workspace):
    window = open_window(qtbot, workspace)
    window.activateWindow()
    for n, (title, _target) in enumerate(PANES, start=1):
        window.menus.actions[f"pane:{title}"].trigger()
        assert window.tabs.currentIndex() == n - 1
        assert window.menus.actions[f"pane:{title}"].shortcut().toString() == f"Ctrl+{n}"
    window.close()


def _in_pyqtgraph_menu(obj) -> bool:
    """Inside a plot's own right-click menu (pyqtgraph's, handed to the window to own)."""
    while obj is not None:
        if obj.property(ADOPTED):
            return True
        obj = obj.parent()
    return False


def _qt_internal(button: QAbstractButton) -> bool:
    """Buttons Qt draws for its own widgets (tab scroll arrows, a table's corner), and pyqtgraph's."""
    return (isinstance(button.parent(), QTabBar) or button.objectName().startswith("qt_")
            or _in_pyqtgraph_menu(button))


def test_every_button_and_action_of_the_window_says_what_it_does(qtbot, workspace):
    window = open_window(qtbot, workspace)
    window.menus.fill_recent()
    silent = []
    for button in window.findChildren(QAbstractButton):
        if not _qt_internal(button) and not button.toolTip().strip():
            silent.append(f"button {button.text()!r} ({type(button).__name__})")
    for action in window.findChildren(QAction):
        if action.isSeparator() or not action.text() or action.menu() is not None:
            continue
        if _in_pyqtgraph_menu(action):
            continue
        if not action.statusTip().strip() and not action.toolTip().strip():
            silent.append(f"action {action.text()!r}")
        if action.parent() is window and not action.statusTip().strip():
            silent.append(f"window action {action.text()!r} has no status tip")
    window.close()
    assert silent == [], "\n".join(silent)


def test_the_status_bar_says_what_is_running(qtbot, workspace):
    window = open_window(qtbot, workspace)
    assert window.running_label.text() == "Nothing running"
    queue = window.panes["Queue"]
    queue.runner = {"alive": True, "current_job": "smooth"}
    window.refresh_running()
    assert "running smooth" in window.running_label.text()
    queue.runner = {}
    window.close()


def test_about_names_the_logs_folder_without_blocking(qtbot, workspace, tmp_path):
    from spacrq.ui.crash import CrashGuard
    guard = CrashGuard(tmp_path / "logs")
    window = open_window(qtbot, workspace, guard=guard)
    guard.setParent(window)  # a Qt object of the test's own goes with its window
    window.show_about()  # returns: the box is not modal
    assert str(tmp_path / "logs") in window._about.text()
    assert not window._about.isModal()
    window._about.close()
    window.close()


def test_the_demo_night_fills_the_report_and_experiments_panes_live(qtbot, tmp_path):
    from spacrq.workspace import open_workspace
    ws, _ = open_workspace(tmp_path / "new", seed=False)  # as the window opens a new workspace
    window = open_window(qtbot, ws, demo=True)
    seen = {"task": set(), "run": set(), "shown": set()}

    def watch() -> bool:
        report, experiments = window.panes["Run Report"], window.panes["Experiments"]
        seen["task"] |= {k.rsplit("/", 1)[-1] for k, v in report._states.items() if v == "running"}
        seen["shown"] |= {k.rsplit("/", 1)[-1] for k in report._states}
        seen["run"] |= {row.look for row in experiments.runs.rows}
        rows = window.panes["Queue"].model.rows
        done = len(rows) == 7 and all(r.value.status in ("success", "failed", "skipped") for r in rows)
        # the panes poll on their own: the sweep's end reaches the Experiments pane at its next
        # poll, and a task's store the Run Report pane's, either of which may come just after
        # the queue's own end
        return done and not window.panes["Queue"].runner_alive and "completed" in seen["run"] \
            and {"demo_smooth", "demo_threshold"} <= seen["shown"]

    qtbot.waitUntil(watch, timeout=90_000)
    # watched while running (a task shorter than a poll on a busy machine is seen only ended)
    assert seen["task"] & {"demo_smooth", "demo_threshold"}, seen
    assert "running" in seen["run"] and "completed" in seen["run"], seen
    statuses = {r.key: r.value.status for r in window.panes["Queue"].model.rows}
    assert statuses["measure"] == "success" and statuses["fails-on-purpose"] == "failed"
    assert statuses["after-failure"] == "skipped"
    window.close()


def test_opening_a_folder_that_is_not_a_workspace_says_why_and_stays(qtbot, workspace, tmp_path):
    stranger = tmp_path / "Documents"
    stranger.mkdir()
    (stranger / "thesis.tex").write_text("")
    window = open_window(qtbot, workspace)
    for bad in (stranger, tmp_path / "a-file"):
        if bad.name == "a-file":
            bad.write_text("")
        window.open_workspace_at(bad)
        qtbot.waitUntil(lambda: "Could not open" in window.statusBar().currentMessage(), timeout=5000)
        assert window.workspace == workspace
    window.close()


def test_opening_another_workspace_switches_the_window_to_it(qtbot, workspace, tmp_path):
    from spacrq.ui.state import WindowState
    state = WindowState(tmp_path / "s.ini")
    window = open_window(qtbot, workspace, state=state)
    other = tmp_path / "other"
    with qtbot.waitSignal(window.loaded, timeout=WAIT):
        window.open_workspace_at(other)
    assert window.workspace.root == other.resolve() and window.is_loaded()
    assert str(other.resolve()) in window.windowTitle()
    assert state.recent_workspaces()[0] == str(other.resolve())
    assert str(workspace.root) in state.recent_workspaces()
    window.close()
    assert not any(p.is_running() for p in LIVE_POLLERS)


def _window_with(qtbot, workspace, monkeypatch, pane: str) -> tuple[MainWindow, HeavyWatch]:
    monkeypatch.setattr(main_window, "PANES", PANES[:2] + (("Experiments", f"{__name__}:{pane}"),))
    window = open_window(qtbot, workspace)
    watch = window.panes["Experiments"].watch
    assert watch.in_poll.wait(5.0), "the heavy poll never started"
    return window, watch


def test_closing_mid_poll_takes_under_a_second_and_leaves_nothing_running(qtbot, workspace,
                                                                          monkeypatch):
    window, watch = _window_with(qtbot, workspace, monkeypatch, "HeavyPane")
    pollers = [p for p in LIVE_POLLERS if p.is_running()]
    started = time.monotonic()
    window.close()
    took = time.monotonic() - started
    assert took < SHUTDOWN_BUDGET, f"closing took {took:.2f}s"
    assert not watch.let_go.is_set()  # it stopped because it was interrupted, not let go
    assert pollers and not any(p.is_running() for p in pollers)


@pytest.mark.parametrize("title", [title for title, _ in PANES])
def test_closing_while_a_real_panes_poll_is_heavy_takes_under_a_second(qtbot, workspace,
                                                                        monkeypatch, title):
    window = open_window(qtbot, workspace)
    pane = window.panes[title]
    watch, inside, pause = pane.watch, threading.Event(), threading.Event()

    def heavy(view):  # a long read (a 10-hour store) that looks at interrupted() between files
        inside.set()
        while not watch.interrupted():
            pause.wait(0.005)

    monkeypatch.setattr(watch, "_poll", heavy)
    pane.poll_now()
    assert inside.wait(5.0), "the heavy poll never started"
    pollers = [p for p in LIVE_POLLERS if p.is_running()]
    started = time.monotonic()
    window.close()
    took = time.monotonic() - started
    assert took < SHUTDOWN_BUDGET, f"closing took {took:.2f}s"
    assert len(pollers) >= 3 and not any(p.is_running() for p in pollers)


def test_a_poll_that_will_not_stop_costs_the_budget_and_is_logged(qtbot, workspace, monkeypatch,
                                                                  caplog):
    window, watch = _window_with(qtbot, workspace, monkeypatch, "StubbornPane")
    poller = window.panes["Experiments"].poller
    caplog.set_level(logging.WARNING, logger="spacrq")
    started = time.monotonic()
    try:
        assert window.shutdown() is False
        took = time.monotonic() - started
        assert SHUTDOWN_BUDGET * 0.9 <= took < SHUTDOWN_BUDGET + 0.5, f"shutdown took {took:.2f}s"
        assert poller.is_running()  # left to end on its own, a daemon thread
        assert any("Experiments pane did not stop" in r.getMessage() for r in caplog.records)
        assert all(not p.is_running() for p in LIVE_POLLERS if p is not poller)
    finally:
        watch.let_go.set()
    qtbot.waitUntil(lambda: not poller.is_running(), timeout=5000)
    window.close()


def test_the_start_up_worker_is_told_to_stop_and_waited_for_within_the_budget(
        qtbot, workspace, monkeypatch):
    from spacrq.ui import startup
    asked = threading.Event()
    release = threading.Event()

    def slow_demo_night(ws) -> str:  # the start-up worker busy when the window closes
        asked.set()
        release.wait(10.0)
        return "demo"

    monkeypatch.setattr(startup, "start_demo_night", slow_demo_night)
    window = MainWindow(workspace, demo=True)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(asked.is_set, timeout=WAIT)
    worker = window._startup
    started = time.monotonic()
    try:
        assert window.shutdown() is False  # the worker is mid-step: it cannot end in time
        assert time.monotonic() - started < SHUTDOWN_BUDGET + 0.5
    finally:
        release.set()
    assert worker.stop(5.0)  # told to stop, it ends after that step without building a pane
    assert window.is_loaded() is False
    window.close()


def test_the_running_line_names_the_queues_job_the_blockwise_tasks_and_the_live_runs(qtbot, tmp_path):
    from pathlib import Path

    from spacrq.ui.experiments_pane import ExperimentsPane
    from spacrq.ui.queue_pane import QueuePane
    from spacrq.ui.report_pane import RunReportPane
    from spacrq.ui.status import running_summary
    from spacrq.watching import Row
    from spacrq.workspace import open_workspace

    ws, _ = open_workspace(tmp_path / "ws", demo=False)
    queue, report, experiments = QueuePane(ws), RunReportPane(ws), ExperimentsPane(ws)
    for pane in (queue, report, experiments):
        qtbot.addWidget(pane)
    panes = {"Queue": queue, "Run Report": report, "Experiments": experiments,
             "Loading": object()}  # a pane still loading says nothing
    assert running_summary(panes) == "Nothing running"
    for pane in (queue, report, experiments):  # what they hold stays; no poll overwrites it now
        assert pane.shutdown()
    queue.runner, queue.path = {"alive": True, "current_job": "smooth"}, Path("night.queue.json")
    report._states.update({"/ws/a/demo_smooth": "running", "/ws/b/done": "completed"})
    experiments.runs.set_rows((Row("r1", ("r1",), look="running"), Row("r2", ("r2",), look="completed")))
    assert running_summary(panes) == ("Running — night.queue.json: running smooth · "
                                      "blockwise demo_smooth · experiment run r1")
