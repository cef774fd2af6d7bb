"""The main window: three panes over one workspace, on screen before anything slow.

Each pane is a :class:`~spacrq.ui.pane_base.PaneBase` built as ``Pane(workspace)``,
with a ``shutdown(budget)`` that stops its watch within a budget, and a
``notify`` signal carrying one-line messages for the status bar and the tray.
The window itself holds no logic: its menus press the panes' own buttons, and
closing it stops the watches and nothing else — runs go on.  Closing takes at
most :data:`SHUTDOWN_BUDGET` seconds in all, even in the middle of a heavy
poll: a pane that does not stop in time is logged and left to end on its own.

It opens with a "loading…" line in each tab and paints; only then does
:class:`~spacrq.ui.startup.Startup` seed a new workspace, start the demo
night when asked, and import each pane's module on a thread, and the window
builds each pane as its module arrives (the one shown first).  It remembers
its layout (:mod:`spacrq.ui.state`) and shows an uncaught error as a message
naming the crash log (:mod:`spacrq.ui.crash`), and carries on.
"""
from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

# Only what the first paint needs is imported here: PySide6 builds a class (and the whole
# ``Qt`` namespace, ~40 ms) on first use, so dialogs and enums are imported where used.
from PySide6.QtCore import QEvent, QTimer, Signal
from PySide6.QtWidgets import QLabel, QMainWindow, QTabWidget, QWidget

from spacrq import __version__
from spacrq.ui import startup
from spacrq.ui.menus import MenuBar
from spacrq.ui.pane_base import PaneBase
from spacrq.ui.status import running_summary
from spacrq.workspace import Workspace

#: (tab title, "module:Class")
PANES = (
    ("Queue", "spacrq.ui.queue_pane:QueuePane"),
    ("Run Report", "spacrq.ui.report_pane:RunReportPane"),
    ("Experiments", "spacrq.ui.experiments_pane:ExperimentsPane"),
)
log = logging.getLogger("spacrq")

#: seconds closing the window may take in all: the start-up worker and every pane's watch
SHUTDOWN_BUDGET = 1.0


def _load(target: str):
    mod, _, cls = target.partition(":")
    return getattr(importlib.import_module(mod), cls)


class Placeholder(QLabel):
    """What a tab shows until its pane is built (or why it could not be)."""

    is_placeholder = True

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        # centred by a style property: the alignment enum would build Qt's whole enum
        # namespace, and rich text its layout engine, before the first paint
        self.setStyleSheet("qproperty-alignment: AlignCenter;")
        self.setWordWrap(True)


class MainWindow(QMainWindow):
    notify = Signal(str)
    #: a morning report written off the GUI thread: (its path, or "", the problem or "")
    report_written = Signal(str, str)
    first_painted = Signal()
    #: every pane is built (or known broken): tests and the screenshot script wait on it
    loaded = Signal()

    def __init__(self, workspace: Workspace, notes: list[str] | None = None,
                 parent: QWidget | None = None, *, state=None, guard=None,
                 demo: bool = False, seed: bool = True,
                 claim_workspace: Callable[[Path], bool] | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self.state = state
        self.guard = guard
        self._demo, self._seed = demo, seed
        self.claim_workspace = claim_workspace or (lambda root: True)
        self.painted_at: float | None = None
        self._closing = False
        self._startup: startup.Startup | None = None
        self._opening: startup.Startup | None = None
        self._crash_box = None  # QMessageBox, made on the first error
        self._about = None
        self.resize(1280, 820)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.setCentralWidget(self.tabs)
        self.panes: dict[str, QWidget] = {}
        self._place_holders()
        self.report_written.connect(self._report_written)
        self.last_ended_queue: str | None = None
        self.last_report: str | None = None
        self.menus = MenuBar(self, [title for title, _ in PANES])
        self.running_label = QLabel("Nothing running")
        self.running_label.setToolTip("What is running now, in every pane.")
        self.statusBar().addPermanentWidget(self.running_label)
        self.statusBar().showMessage(f"spacrq {__version__} · workspace {workspace.root}")
        self._running_timer = QTimer(self)
        self._running_timer.setInterval(1000)
        self._running_timer.timeout.connect(self.refresh_running)
        if state is not None:
            state.restore_window(self)
            self.show_pane(state.last_pane() or "")
            if state.note:
                notes = [state.note, *(notes or [])]
        if guard is not None:
            guard.crashed.connect(self.show_crash)
        self._retitle()
        for note in notes or []:
            self._on_notify(note)
        self.installEventFilter(self)

    # -- first paint, then the rest ------------------------------------------------
    def _place_holders(self) -> None:
        current = self.tabs.currentIndex()
        self.tabs.blockSignals(True)
        self.tabs.clear()
        for title, _target in PANES:
            pane = Placeholder(f"Loading the {title} pane…")
            self.panes[title] = pane
            self.tabs.addTab(pane, title)
        self.tabs.setCurrentIndex(max(current, 0))
        self.tabs.blockSignals(False)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt naming)
        if watched is self and event.type() == QEvent.Type.Paint and self.painted_at is None:
            self.painted_at = time.time()
            self.removeEventFilter(self)  # one paint is all it waits for
            self.first_painted.emit()
            QTimer.singleShot(0, self.start_loading)
        return False

    def start_loading(self) -> None:
        """Seed, start the demo, import and build the panes (after the first paint)."""
        if self._startup is not None:
            return
        self.menus.bind_keys()
        current = self.tabs.tabText(self.tabs.currentIndex())
        order = sorted(PANES, key=lambda p: p[0] != current)
        self._startup = startup.Startup(self.workspace, order, seed=self._seed, demo=self._demo,
                                        parent=self)
        self._startup.step.connect(self._on_startup_step)
        self._startup.start()
        self._running_timer.start()

    def is_loaded(self) -> bool:
        return not any(getattr(p, "is_placeholder", False) for p in self.panes.values())

    def _on_startup_step(self, name: str, value) -> None:
        if self.sender() is not self._startup or self._closing:
            return  # from a workspace this window has left, or after it closed
        if name == startup.NOTES:
            for note in value:
                self._on_notify(note)
        elif name == startup.DEMO:
            self._on_notify(value)
        elif name == startup.IMPORTED:
            title, problem = value
            self._build_pane(title, problem)
        elif name == startup.DONE:
            self.loaded.emit()

    def _build_pane(self, title: str, problem: Exception | None) -> None:
        target = dict(PANES)[title]
        if problem is not None:  # its module did not import (the start-up worker logged why)
            pane = Placeholder(f"The {title} pane could not be opened: {problem}")
            pane.is_placeholder = False
        else:
            try:
                # built without a parent: one that raises half-way is dropped whole, never left
                # as a half-made child of the window; the tab takes it over below
                pane = _load(target)(self.workspace)
            except Exception as exc:
                log.exception("the %s pane could not be opened", title)
                pane = Placeholder(f"The {title} pane could not be opened: {exc}")
                pane.is_placeholder = False
        index = [t for t, _ in PANES].index(title)
        was_current = self.tabs.currentIndex() == index
        self.tabs.blockSignals(True)
        old = self.panes[title]
        self.tabs.removeTab(index)
        self.tabs.insertTab(index, pane, title)
        if was_current:
            self.tabs.setCurrentIndex(index)
        self.tabs.blockSignals(False)
        old.deleteLater()
        self.panes[title] = pane
        if hasattr(pane, "notify"):
            pane.notify.connect(self._on_notify)
        if hasattr(pane, "queue_ended"):
            pane.queue_ended.connect(self._queue_ended)
        if self.state is not None:
            self.state.restore_pane(title, pane)
        if title == "Queue" and hasattr(pane, "run_button"):
            self.menus.attach_queue_pane(pane)

    # -- what the window shows -----------------------------------------------------
    def _retitle(self) -> None:
        self.setWindowTitle(f"spacrq — {self.workspace.root}")

    def _on_notify(self, message: str) -> None:
        log.info("%s", message)
        self.statusBar().showMessage(message, 15000)
        self.notify.emit(message)

    def refresh_running(self) -> None:
        text = running_summary(self.panes)
        if self.running_label.text() != text:
            self.running_label.setText(text)

    def show_pane(self, title: str) -> None:
        titles = [t for t, _ in PANES]
        if title in titles:
            self.tabs.setCurrentIndex(titles.index(title))

    def show_crash(self, summary: str, log_path: str) -> None:
        """An uncaught error, said without stopping anything: one box, updated, never modal."""
        text = (f"spacrq met an unexpected error and carried on: {summary}.\n\n"
                f"The details are in {log_path}.")
        self.statusBar().showMessage(f"Unexpected error: {summary} (details in {log_path})", 30000)
        if self._crash_box is None:
            from PySide6.QtCore import Qt
            from PySide6.QtWidgets import QMessageBox
            box = QMessageBox(QMessageBox.Icon.Warning, "spacrq: unexpected error", text,
                              QMessageBox.StandardButton.Close, self)
            box.setWindowModality(Qt.WindowModality.NonModal)
            box.setToolTip("Closing this message changes nothing; the details stay in the log.")
            for button in box.buttons():
                button.setToolTip("Close this message.")
            box.finished.connect(self._crash_box_closed)
            self._crash_box = box
        else:
            count = self.guard.count if self.guard is not None else 0
            text += f"\n\n({count} unexpected errors since the window opened.)" if count > 1 else ""
        self._crash_box.setText(text)
        self._crash_box.show()

    def _crash_box_closed(self, *_args) -> None:
        if self._crash_box is not None:
            self._crash_box.deleteLater()
            self._crash_box = None

    def show_about(self) -> None:
        logs = str(self.guard.folder) if self.guard is not None else "(not recorded: no log folder)"
        settings = str(self.state.path) if self.state is not None else "(not kept)"
        text = (f"<b>spacrq {__version__}</b><br>The overnight lab workstation.<br><br>"
                f"Workspace: {self.workspace.root}<br>Logs and crash reports: {logs}<br>"
                f"Settings: {settings}")
        if self._about is None:
            from PySide6.QtCore import Qt
            from PySide6.QtWidgets import QMessageBox
            self._about = QMessageBox(QMessageBox.Icon.Information, "About spacrq", text,
                                      QMessageBox.StandardButton.Close, self)
            self._about.setWindowModality(Qt.WindowModality.NonModal)
            for button in self._about.buttons():
                button.setToolTip("Close this box.")
        self._about.setText(text)
        self._about.show()

    # -- the morning report ----------------------------------------------------------
    def _queue_ended(self, path: str) -> None:
        """Remember the queue that just ended: a click on its notification opens its report."""
        self.last_ended_queue = path

    def morning_report(self, path: str | None = None) -> None:
        """Write the morning report of ``path`` (default: the Queue pane's queue) and open it.

        The report reads stores, runs and logs, so it is written on a thread of
        its own; the browser is asked to open it when :attr:`report_written` says so.
        """
        if path is None:
            pane = self.panes.get("Queue")
            path = str(pane.path) if getattr(pane, "path", None) else None
        if not path:
            self._on_notify("No queue is open: open or save a queue first, then ask for its "
                            "morning report.")
            return
        self._on_notify(f"Writing the morning report of {Path(path).name}…")
        threading.Thread(target=self._write_report, args=(path,), name="spacrq-morning-report",
                         daemon=True).start()

    def open_last_report(self) -> None:
        """The tray's click: the morning report of the queue that ended last."""
        if getattr(self, "last_ended_queue", None):
            self.morning_report(self.last_ended_queue)
        else:
            self.showNormal()
            self.raise_()

    def _write_report(self, path: str) -> None:
        try:
            from spacrq.night import write_report
            written, problem = str(write_report(path)), ""
        except Exception as exc:  # a report that cannot be written is a sentence, not a crash
            written, problem = "", f"The morning report of {Path(path).name} could not be written: {exc}"
        try:
            self.report_written.emit(written, problem)
        except RuntimeError:
            pass  # the window closed meanwhile

    def _report_written(self, path: str, problem: str) -> None:
        if problem:
            self._on_notify(problem)
            return
        from PySide6.QtCore import QUrl
        from PySide6.QtGui import QDesktopServices
        self.last_report = path
        self.statusBar().showMessage(f"Morning report: {path}", 15000)
        if not os.environ.get("SPACRQ_NO_BROWSER"):
            QDesktopServices.openUrl(QUrl.fromLocalFile(path))

    def open_logs_folder(self) -> None:
        if self.guard is None:
            self._on_notify("No logs folder: the window was started without crash logging.")
            return
        from PySide6.QtCore import QUrl
        from PySide6.QtGui import QDesktopServices
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.guard.folder)))

    # -- workspaces ----------------------------------------------------------------
    def recent_workspaces(self) -> list[str]:
        if self.state is None:
            return []
        return [p for p in self.state.recent_workspaces() if p != str(self.workspace.root)]

    def choose_workspace(self) -> None:
        from PySide6.QtWidgets import QFileDialog
        folder = QFileDialog.getExistingDirectory(self, "Open a workspace",
                                                  str(self.workspace.root.parent))
        if folder:
            self.open_workspace_at(folder)

    def open_workspace_at(self, path: str | os.PathLike) -> None:
        """Check the folder on a thread; switch to it when it is a usable workspace."""
        self._on_notify(f"Opening the workspace {path}…")
        self._opening = startup.Startup(None, [], open_path=str(path), parent=self)
        self._opening.step.connect(self._on_opened)
        self._opening.start()

    def _on_opened(self, name: str, value) -> None:
        if name != startup.OPENED or self.sender() is not self._opening:
            return
        if isinstance(value, Exception):
            self._on_notify(f"Could not open that workspace: {value}")
            return
        if value.root == self.workspace.root:
            return
        if not self.claim_workspace(value.root):
            self._on_notify(f"{value.root} is open in another spacrq window; brought it to the front.")
            return
        self.switch_to(value)

    def switch_to(self, workspace: Workspace) -> None:
        """Leave this workspace (its runs go on) and open ``workspace`` in the same window."""
        self._save_state()
        self.menus.detach_queue_pane()
        if self._startup is not None:
            self._startup.stop(0.0)  # what it still sends is for the old workspace: ignored
        self._stop_panes(time.monotonic() + SHUTDOWN_BUDGET)
        for pane in self.panes.values():
            pane.deleteLater()
        self.workspace = workspace
        self._startup = None
        self._place_holders()
        self._retitle()
        if self.state is not None:
            self.state.remember_workspace(workspace.root)
        self._on_notify(f"Workspace {workspace.root}")
        self._demo = False
        self.start_loading()

    # -- lifetime ------------------------------------------------------------------
    def _save_state(self) -> None:
        if self.state is not None:
            self.state.save_window(self, self.tabs, self.panes)
            self.state.remember_workspace(self.workspace.root)
            self.state.sync()

    def _stop_panes(self, deadline: float) -> bool:
        """Stop every pane's watch by ``deadline`` (``time.monotonic()``); True when all did.

        Every pane is told to stop first, poller and watch, so the polls in
        flight wind down side by side: a pane slow to close neither keeps the
        others polling nor spends their share of the budget before they heard."""
        panes = [(title, pane) for title, pane in self.panes.items() if isinstance(pane, PaneBase)]
        for _title, pane in panes:  # (a placeholder has nothing to stop)
            pane.begin_shutdown()
        ok = True
        for title, pane in panes:
            if not pane.shutdown(max(0.0, deadline - time.monotonic())):
                log.warning("the %s pane did not stop within the shutdown budget; its poll "
                            "ends on its own (runs are not affected)", title)
                ok = False
        return ok

    def shutdown(self, budget: float = SHUTDOWN_BUDGET) -> bool:
        """Stop the start-up worker and every pane's watch within ``budget`` seconds; the runs
        themselves go on.  True when everything stopped in time."""
        deadline = time.monotonic() + max(0.0, budget)
        self._closing = True
        self._running_timer.stop()
        workers = [w for w in (self._startup, self._opening) if w is not None]
        for worker in workers:
            worker.cancel()
        ok = self._stop_panes(deadline)
        for worker in workers:
            if not worker.stop(max(0.0, deadline - time.monotonic())):
                log.warning("the window's start-up work did not stop within the shutdown budget; "
                            "it ends on its own")
                ok = False
        return ok

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        if not self._closing:
            self._save_state()
            self.shutdown()
        super().closeEvent(event)
