"""The menu bar and its keys: every action is a pane's own button, pressed.

File, Run and View reach what the panes already do: *Run ▸ Stop* clicks the
Queue pane's Stop button, so the menu can never disagree with the pane about
what Stop means or when it is allowed (each action is enabled exactly when
its button is).  Only the window's own things — workspaces, panes, About —
are handled by the window; the logs folder is opened here, and its path
shown when nothing on the desktop opens folders.
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QEvent, QObject, Qt, QUrl
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtWidgets import QAbstractButton, QMainWindow, QMenu, QMessageBox

#: (key, menu text, shortcut, tip, the Queue pane's button attribute)
QUEUE_ACTIONS = (
    ("new", "&New queue", "Ctrl+N", "Start an empty queue in the Queue pane.", "new_button"),
    ("open", "&Open queue…", "Ctrl+O", "Open a queue file in the Queue pane.", "open_button"),
    ("save", "&Save queue", "Ctrl+S", "Write the Queue pane's queue to its file.", "save_button"),
)
RUN_ACTIONS = (
    ("run", "&Run", "F5", "Check the queue, save it and start it in its own process.", "run_button"),
    ("stop", "&Stop", "Shift+F5", "Let the running job finish, then start no other.", "stop_button"),
    ("abort", "&Abort…", "", "Stop the running job now (asks first).", "abort_button"),
    ("resume", "Res&ume", "F6", "Start the runner again: jobs not yet run, and one cut off, run now.",
     "resume_button"),
    ("retry", "Retry &failed", "", "Resume, also running failed jobs again and those skipped "
     "because of them.", "retry_button"),
)


def _action(window: QMainWindow, menu: QMenu, text: str, tip: str, shortcut: str = "",
            slot: Callable | None = None) -> QAction:
    """An action of the window; its shortcut is kept for :meth:`MenuBar.bind_keys`."""
    action = QAction(text, window)
    action.setToolTip(tip)
    action.setStatusTip(tip)
    if shortcut:
        action.setProperty("spacrq_keys", shortcut)
        action.setToolTip(f"{tip} ({shortcut})")
    if slot is not None:
        action.triggered.connect(slot)
    menu.addAction(action)
    return action


class _Mirror(QObject):
    """Keeps an action enabled exactly when its button is."""

    def __init__(self, button: QAbstractButton, action: QAction) -> None:
        super().__init__(button)
        self.button, self.action = button, action
        action.setEnabled(button.isEnabled())
        button.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt naming)
        if event.type() == QEvent.Type.EnabledChange:
            try:
                self.action.setEnabled(self.button.isEnabled())
            except RuntimeError:  # the window is being torn down around us
                pass
        return False


class MenuBar:
    """Builds the window's menus; :meth:`attach_queue_pane` wires them to the pane's buttons."""

    def __init__(self, window, panes: list[str]) -> None:
        self.window = window
        self.actions: dict[str, QAction] = {}
        bar = window.menuBar()
        file_menu = bar.addMenu("&File")
        file_menu.setToolTipsVisible(True)
        self._buttons: dict[str, QAbstractButton] = {}
        for key, text, keys, tip, _button in QUEUE_ACTIONS:
            self.actions[key] = _action(window, file_menu, text, tip, keys,
                                        lambda _checked=False, k=key: self.press(k))
        file_menu.addSeparator()
        self.actions["workspace"] = _action(
            window, file_menu, "Open &workspace…", "Switch this window to another workspace folder.",
            "Ctrl+Shift+O", window.choose_workspace)
        self.recent = file_menu.addMenu("&Recent workspaces")
        self.recent.setToolTipsVisible(True)
        self.recent.aboutToShow.connect(self.fill_recent)
        file_menu.addSeparator()
        self.actions["quit"] = _action(window, file_menu, "&Quit", "Close the window; queues, "
                                       "runs and experiments go on running.", "Ctrl+Q", window.close)

        run_menu = bar.addMenu("&Run")
        run_menu.setToolTipsVisible(True)
        for key, text, keys, tip, _button in RUN_ACTIONS:
            self.actions[key] = _action(window, run_menu, text, f"Queue pane: {tip}", keys,
                                        lambda _checked=False, k=key: self.press(k))

        run_menu.addSeparator()
        self.actions["report"] = _action(
            window, run_menu, "&Morning report", "Write the morning report of the open queue — "
            "the whole night on one page — and open it in the browser.", "Ctrl+R",
            lambda _checked=False: window.morning_report())

        view = bar.addMenu("&View")
        view.setToolTipsVisible(True)
        for n, title in enumerate(panes, start=1):
            self.actions[f"pane:{title}"] = _action(
                window, view, f"&{n} {title}", f"Show the {title} pane.", f"Ctrl+{n}",
                lambda _checked=False, t=title: window.show_pane(t))

        help_menu = bar.addMenu("&Help")
        help_menu.setToolTipsVisible(True)
        self.actions["about"] = _action(window, help_menu, "&About spacrq",
                                        "The version, the workspace and where the logs are.",
                                        "", window.show_about)
        self.actions["logs"] = _action(window, help_menu, "Open the &logs folder",
                                       "Open the folder holding spacrq's log and crash files.",
                                       "", self.open_logs_folder)
        self.logs_box = None
        for key, *_rest in QUEUE_ACTIONS + RUN_ACTIONS:
            self.actions[key].setEnabled(False)  # until the Queue pane is there

    def bind_keys(self) -> None:
        """Give every action its shortcut.  Done after the first paint: Qt's first
        ``setShortcut`` builds the shortcut map, some 40 ms the window need not wait for."""
        for action in self.actions.values():
            keys = action.property("spacrq_keys")
            if keys and action.shortcut().isEmpty():
                action.setShortcut(QKeySequence(keys))

    def attach_queue_pane(self, pane) -> None:
        """Wire File/Run to the Queue pane's buttons (a pane that lacks one leaves it off)."""
        self._buttons = {}
        for key, _text, _keys, _tip, attr in QUEUE_ACTIONS + RUN_ACTIONS:
            button = getattr(pane, attr, None)
            if isinstance(button, QAbstractButton):
                self._buttons[key] = button
                _Mirror(button, self.actions[key])
            else:
                self.actions[key].setEnabled(False)

    def detach_queue_pane(self) -> None:
        self._buttons = {}
        for key, *_rest in QUEUE_ACTIONS + RUN_ACTIONS:
            self.actions[key].setEnabled(False)

    def press(self, key: str) -> None:
        """Click the Queue pane's button, where the operator can see what it did."""
        button = self._buttons.get(key)
        if button is None:
            return
        self.window.show_pane("Queue")
        if button.isEnabled():
            button.click()

    def open_logs_folder(self) -> None:
        """Open the logs folder in the file manager, or show its path when nothing opens it.

        A workstation without a file manager (a bare window manager, a remote
        X session) answers ``openUrl`` with False and shows nothing, so the
        path is put where the operator can read and copy it.
        """
        guard = getattr(self.window, "guard", None)
        if guard is None:
            self.window.open_logs_folder()  # says there is no logs folder
            return
        folder = str(guard.folder)
        if QDesktopServices.openUrl(QUrl.fromLocalFile(folder)):
            return
        self.window.statusBar().showMessage(f"Logs folder: {folder}", 60000)
        text = (f"Nothing on this desktop opens folders, so here is the path of spacrq's "
                f"logs folder to copy:\n\n{folder}")
        if self.logs_box is None:
            box = QMessageBox(QMessageBox.Icon.Information, "spacrq: the logs folder", text,
                              QMessageBox.StandardButton.Close, self.window)
            box.setWindowModality(Qt.WindowModality.NonModal)
            box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            for button in box.buttons():
                button.setToolTip("Close this box.")
            self.logs_box = box
        self.logs_box.setText(text)
        self.logs_box.show()

    def fill_recent(self) -> None:
        self.recent.clear()
        paths = self.window.recent_workspaces()
        if not paths:
            empty = self.recent.addAction("(none yet)")
            empty.setEnabled(False)
            empty.setToolTip("Workspaces you open are listed here.")
            empty.setStatusTip("Workspaces you open are listed here.")
            return
        for path in paths:
            action = self.recent.addAction(path)
            action.setToolTip(f"Switch this window to the workspace {path}.")
            action.setStatusTip(f"Switch this window to the workspace {path}.")
            action.triggered.connect(lambda _checked=False, p=path: self.window.open_workspace_at(p))
