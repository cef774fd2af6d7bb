"""The main window: three panes over one workspace.

Each pane is a self-contained widget ``Pane(workspace, parent)`` with a
``shutdown()`` that stops its poller, and a ``notify`` signal carrying
one-line messages for the status bar and the tray.  The window itself holds
no logic: closing it stops the pollers and nothing else — runs go on.
"""
from __future__ import annotations

import importlib

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QMainWindow, QTabWidget, QWidget

from spacrq import __version__
from spacrq.workspace import Workspace

#: (tab title, "module:Class")
PANES = (
    ("Queue", "spacrq.ui.queue_pane:QueuePane"),
    ("Run Report", "spacrq.ui.report_pane:RunReportPane"),
    ("Experiments", "spacrq.ui.experiments_pane:ExperimentsPane"),
)


def _load(target: str):
    mod, _, cls = target.partition(":")
    return getattr(importlib.import_module(mod), cls)


class MainWindow(QMainWindow):
    notify = Signal(str)

    def __init__(self, workspace: Workspace, notes: list[str] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self.setWindowTitle(f"spacrq — {workspace.root}")
        self.resize(1280, 820)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.setCentralWidget(self.tabs)
        self.panes: dict[str, QWidget] = {}
        for title, target in PANES:
            try:
                pane = _load(target)(workspace, self)
            except Exception as exc:
                pane = QLabel(f"The {title} pane could not be opened: {exc}")
                pane.setAlignment(Qt.AlignmentFlag.AlignCenter)
                pane.setWordWrap(True)
            self.panes[title] = pane
            self.tabs.addTab(pane, title)
            if hasattr(pane, "notify"):
                pane.notify.connect(self._on_notify)
        self.statusBar().showMessage(f"spacrq {__version__} · workspace {workspace.root}")
        for note in notes or []:
            self._on_notify(note)

    def _on_notify(self, message: str) -> None:
        self.statusBar().showMessage(message, 15000)
        self.notify.emit(message)

    def shutdown(self) -> None:
        """Stop every pane's poller; the runs themselves go on."""
        for pane in self.panes.values():
            stop = getattr(pane, "shutdown", None)
            if stop is not None:
                stop()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        self.shutdown()
        super().closeEvent(event)
