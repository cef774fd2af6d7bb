"""The application: crash logs, remembered state, one window per workspace, a tray icon.

``main`` does only what the first paint needs before it paints — the crash
hooks, the settings, the workspace folder, the workspace's lock
(:mod:`spacrq.ui.instance`) and an empty window — and everything else after:
the socket second launches call, the rotating log, the icon and tray, and
(in the window) the demo and the panes.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Sequence

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from spacrq import __version__
from spacrq.ui.crash import CrashGuard
from spacrq.ui.instance import SingleInstance
from spacrq.ui.state import WindowState
from spacrq.workspace import WorkspaceError, open_workspace

log = logging.getLogger("spacrq")


def app_icon():
    from PySide6.QtGui import QIcon
    from spacrq.resources import RESOURCES  # the one place resources are found (wheel, checkout, bundle)
    path = RESOURCES / "spacrq.svg"
    return QIcon(str(path)) if path.is_file() else QIcon()


def _display_problem() -> str:
    """Qt aborts the process when it cannot open a display; say why in a sentence instead."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return ""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return ("there is no display to open the window on; run it from a desktop session (or "
                "over ssh -X), or drive it headless with 'spacrq queue|exp|blockwise …'")
    if not os.environ.get("WAYLAND_DISPLAY"):
        import ctypes.util  # only here: it runs ldconfig, which a Wayland or offscreen start skips
        missing = [package for lib, package in _XCB_LIBRARIES if not ctypes.util.find_library(lib)]
        if missing:
            return (f"Qt needs system libraries to open a window on X11 that this machine lacks; "
                    f"install them (Debian/Ubuntu: sudo apt-get install {' '.join(missing)}) "
                    "and start spacrq again")
    return ""


#: what Qt's xcb platform plugin links against beyond libxcb itself: (library, Debian package)
_XCB_LIBRARIES = (
    ("xcb-cursor", "libxcb-cursor0"), ("xcb-icccm", "libxcb-icccm4"),
    ("xcb-image", "libxcb-image0"), ("xcb-keysyms", "libxcb-keysyms1"),
    ("xcb-randr", "libxcb-randr0"), ("xcb-render-util", "libxcb-render-util0"),
    ("xcb-shape", "libxcb-shape0"), ("xcb-xkb", "libxcb-xkb1"),
    ("xkbcommon-x11", "libxkbcommon-x11-0"),
)


def _open_chosen(given: str | None, state: WindowState):
    """The workspace to open: the one asked for, else the last one (when it is still there
    and usable), else the default.  Only a folder the operator named can be an error."""
    if given:
        return open_workspace(given, seed=False)
    last = state.last_workspace()
    notes: list[str] = []
    if last:
        try:
            if not Path(last).is_dir():
                raise WorkspaceError("it is not there any more (an unmounted disk?)")
            return open_workspace(last, seed=False)
        except WorkspaceError as exc:
            state.forget_workspace(last)
            notes.append(f"The last workspace, {last}, could not be opened ({exc}); the default "
                         "workspace was opened instead.")
    workspace, more = open_workspace(None, seed=False)
    return workspace, notes + more


def _probe(window) -> None:
    """``SPACRQ_STARTUP_PROBE``: print when the window first paints (the start-up benchmark)."""
    mode = os.environ.get("SPACRQ_STARTUP_PROBE")
    if not mode:
        return

    def painted() -> None:
        print(f"spacrq-first-paint {window.painted_at:.6f}", flush=True)
        if mode == "exit":
            QTimer.singleShot(0, QApplication.instance().quit)

    window.first_painted.connect(painted)


def _tray(window, icon):
    """A tray icon that brings the window back and says when a queue or run ends."""
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QMenu, QSystemTrayIcon
    if not QSystemTrayIcon.isSystemTrayAvailable():
        return None
    tray = QSystemTrayIcon(icon, window)
    menu = QMenu(window)
    show = QAction("Show spacrq", menu)
    show.setToolTip("Bring the spacrq window to the front.")
    show.setStatusTip("Bring the spacrq window to the front.")
    show.triggered.connect(window.showNormal)
    menu.addAction(show)
    tray.setContextMenu(menu)
    tray.setToolTip("spacrq")
    tray.show()
    window.notify.connect(lambda message: tray.showMessage("spacrq", message))
    tray.messageClicked.connect(window.open_last_report)  # a queue's end: its morning report
    return tray


#: The application's name: its window class on X11 (what the menu entry's
#: ``StartupWMClass`` names, so a dock shows the running window under the entry's icon)
#: and, as the entry's file name, its app id on Wayland.
APP_NAME = "spacrq"


def name_application(app: QApplication) -> None:
    app.setApplicationName(APP_NAME)
    app.setDesktopFileName(APP_NAME)  # (the menu entry is spacrq.desktop)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spacrq-gui")
    parser.add_argument("--workspace", default=None)
    parser.add_argument("--demo", action="store_true", help="start the demo night once the window is up")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if QApplication.instance() is None:
        problem = _display_problem()
        if problem:
            print(f"spacrq: {problem}", file=sys.stderr)
            return 2
    app = QApplication.instance() or QApplication(sys.argv[:1])
    name_application(app)
    guard = CrashGuard(parent=app).install(log_file=False)  # the log file opens after the paint
    state = WindowState()
    try:
        workspace, notes = _open_chosen(args.workspace, state)
    except WorkspaceError as exc:
        print(f"spacrq: {exc}", file=sys.stderr)
        guard.uninstall()
        return 2
    try:
        instance = SingleInstance(str(workspace.root))
        mine = instance.acquire()
    except OSError as exc:
        print(f"spacrq: {exc}", file=sys.stderr)
        guard.uninstall()
        return 2
    if not mine:
        guard.uninstall()
        if instance.signal_running():
            print(f"spacrq is already open on {workspace.root}; brought it to the front.")
            return 0
        print(f"spacrq: spacrq is already open on {workspace.root} (process "
              f"{instance.holder() or '?'}) but does not answer; close that window, or end "
              "that process, and start spacrq again", file=sys.stderr)
        return 2
    holder = {"instance": instance}

    def claim(root: Path) -> bool:
        other = SingleInstance(str(root), instance.folder)
        if not other.acquire():
            # asked from a thread of its own: a window that does not answer would hold this
            # slot for the socket's connect timeout
            threading.Thread(target=other.signal_running, kwargs={"wait": 0.0},
                             name="spacrq-call-other-window", daemon=True).start()
            return False
        holder["instance"].release()
        holder["instance"] = other
        other.listen().newConnection.connect(show_window)
        return True

    from spacrq.ui.main_window import MainWindow
    window = MainWindow(workspace, notes, state=state, guard=guard, demo=args.demo,
                        claim_workspace=claim)
    state.remember_workspace(workspace.root)
    _probe(window)
    window.show()

    def show_window() -> None:
        server = holder["instance"].server
        if server is None:
            return
        conn = server.nextPendingConnection()
        if conn is not None:
            conn.deleteLater()
        window.showNormal()
        window.raise_()
        window.activateWindow()

    def after_first_paint() -> None:
        """What the operator does not need to see the window: the socket, the log, the icon, the tray."""
        if holder["instance"] is instance and instance.server is None:
            instance.listen().newConnection.connect(show_window)
        guard.start_log()
        log.info("spacrq %s opened %s (logs in %s)", __version__, workspace.root, guard.folder)
        icon = app_icon()
        app.setWindowIcon(icon)
        holder["tray"] = _tray(window, icon)

    window.first_painted.connect(lambda: QTimer.singleShot(0, after_first_paint))
    terminate = _close_on_terminate(window)
    code = app.exec()
    terminate()
    holder["instance"].release()
    log.info("spacrq closed (exit %s)", code)
    guard.uninstall()
    return code


def _close_on_terminate(window) -> Callable[[], None]:
    """SIGTERM (a logout, a shutdown, ``kill``) closes the window as its close button does:
    the window's state saved, the panes' pollers ended, "spacrq closed" in the log — rather
    than the process vanishing mid-poll.  The signal wakes the event loop through a socket
    Qt watches (a Python handler alone would wait for the loop to give Python a turn).
    :returns: what undoes it, once the loop has ended."""
    import signal
    import socket

    from PySide6.QtCore import QSocketNotifier
    try:
        read_end, write_end = socket.socketpair()
        read_end.setblocking(False)
        write_end.setblocking(False)
        previous_fd = signal.set_wakeup_fd(write_end.fileno())
        previous = signal.signal(signal.SIGTERM, lambda *_: None)  # (the wakeup fd tells Qt)
    except (OSError, ValueError):  # not the main thread, or no sockets: the default stays
        return lambda: None
    notifier = QSocketNotifier(read_end.fileno(), QSocketNotifier.Type.Read, window)

    def woke() -> None:
        try:
            data = read_end.recv(64)
        except OSError:
            return
        if signal.SIGTERM in data:
            log.info("spacrq was asked to end (SIGTERM): closing the window")
            window.close()
    notifier.activated.connect(woke)

    def undo() -> None:
        notifier.setEnabled(False)
        signal.signal(signal.SIGTERM, previous)
        signal.set_wakeup_fd(previous_fd)
        read_end.close()
        write_end.close()
    return undo


if __name__ == "__main__":
    sys.exit(main())
