"""The application: one instance per workspace, a tray icon, the main window.

A second ``spacrq`` on the same workspace does not open a second window that
would race the first over the same files: it asks the running one (over a
local socket, no network) to come to the front, and exits.
"""
from __future__ import annotations

import argparse
import ctypes.util
import hashlib
import os
import sys
from typing import Sequence

from PySide6.QtCore import QLockFile, QStandardPaths
from PySide6.QtGui import QAction, QIcon
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QApplication, QMenu, QSystemTrayIcon

from spacrq.workspace import open_workspace


def _server_name(root: str) -> str:
    return "spacrq-" + hashlib.sha1(root.encode()).hexdigest()[:12]


def app_icon() -> QIcon:
    from importlib.resources import files
    path = files("spacrq") / "resources" / "spacrq.svg"
    return QIcon(str(path)) if path.is_file() else QIcon()


def _display_problem() -> str:
    """Qt aborts the process when it cannot open a display; say why in a sentence instead."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return ""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return ("there is no display to open the window on; run it from a desktop session (or "
                "over ssh -X), or drive it headless with 'spacrq queue|exp|blockwise …'")
    if not os.environ.get("WAYLAND_DISPLAY"):
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


class SingleInstance:
    """Holds the workspace's lock file and answers "show yourself" requests."""

    def __init__(self, root: str) -> None:
        self.name = _server_name(root)
        lock_dir = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.TempLocation)
        self.lock = QLockFile(os.path.join(lock_dir, self.name + ".lock"))
        self.lock.setStaleLockTime(0)
        self.server: QLocalServer | None = None

    def acquire(self) -> bool:
        if self.lock.tryLock(100):
            QLocalServer.removeServer(self.name)
            self.server = QLocalServer()
            self.server.listen(self.name)
            return True
        return False

    def signal_running(self) -> bool:
        sock = QLocalSocket()
        sock.connectToServer(self.name)
        if not sock.waitForConnected(1000):
            return False
        sock.write(b"show\n")
        sock.waitForBytesWritten(1000)
        sock.disconnectFromServer()
        return True

    def release(self) -> None:
        if self.server is not None:
            self.server.close()
        self.lock.unlock()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spacrq-gui")
    parser.add_argument("--workspace", default=None)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if QApplication.instance() is None:
        problem = _display_problem()
        if problem:
            print(f"spacrq: {problem}", file=sys.stderr)
            return 2
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("spacrq")
    app.setWindowIcon(app_icon())
    workspace, notes = open_workspace(args.workspace)
    instance = SingleInstance(str(workspace.root))
    if not instance.acquire():
        if instance.signal_running():
            print(f"spacrq is already open on {workspace.root}; brought it to the front.")
            return 0
    from spacrq.ui.main_window import MainWindow
    window = MainWindow(workspace, notes)
    window.show()

    def show_window() -> None:
        if instance.server is None:
            return
        conn = instance.server.nextPendingConnection()
        if conn is not None:
            conn.deleteLater()
        window.showNormal()
        window.raise_()
        window.activateWindow()

    if instance.server is not None:
        instance.server.newConnection.connect(show_window)

    tray = None
    if QSystemTrayIcon.isSystemTrayAvailable():
        tray = QSystemTrayIcon(app_icon(), app)
        menu = QMenu()
        show = QAction("Show spacrq", menu)
        show.triggered.connect(window.showNormal)
        menu.addAction(show)
        tray.setContextMenu(menu)
        tray.setToolTip("spacrq")
        tray.show()
        window.notify.connect(lambda message: tray.showMessage("spacrq", message))
    code = app.exec()
    instance.release()
    return code


if __name__ == "__main__":
    sys.exit(main())
