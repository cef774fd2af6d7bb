"""The slow part of opening a window, done after it is on screen and off the GUI thread.

The window paints first (title, menus, a "loading…" line per pane); then this
worker seeds a new workspace's demo, lines up and starts the demo night when
asked (``spacrq demo``), and imports the Qt-free core behind each pane (zarr,
numpy, the pollers' modules: most of a pane's load time), current pane first.
Each step is a ``step`` signal the window answers on its own thread by
building that pane, so the window stays live while the rest load.  Nothing
here touches a widget or imports Qt.
"""
from __future__ import annotations

import importlib
import threading
from typing import Sequence

from PySide6.QtCore import QObject, Signal

from spacrq.workspace import Workspace, open_workspace, seed_demo

#: step names, in the order they arrive
NOTES, DEMO, IMPORTED, OPENED, DONE = "notes", "demo", "imported", "opened", "done"

#: the Qt-free modules behind each pane, imported here so the GUI thread does not wait for
#: them.  The pane modules themselves (and pyqtgraph) are imported by the GUI thread when it
#: builds the pane: a module that touches Qt as it loads belongs on the GUI thread.
WARM = {
    "Queue": ("spacrq.queue.watch", "spacrq.queue.pane_rules", "spacrq.queue.watch_rows"),
    "Run Report": ("numpy", "zarr", "spacrq.blockwise.watch"),
    "Experiments": ("spacrq.experiments.watch",),
}


def start_demo_night(ws: Workspace) -> str:
    """Line up the demo night afresh (unless it has work left) and start its runner."""
    from spacrq.queue.demo import demo_path, line_up_again
    from spacrq.queue.runner import runner_state, start_runner
    state = runner_state(demo_path(ws))
    if state and state.get("alive"):
        return f"The demo night is already running (process {state.get('pid')})."
    path = line_up_again(ws)
    ref = start_runner(path)
    return f"The demo night started (process {ref.pid}): watch the three panes fill."


class Startup(QObject):
    """One background run of the start-up steps; ``step(name, value)`` reports each."""

    step = Signal(str, object)

    def __init__(self, workspace: Workspace | None, panes: Sequence[tuple[str, str]], *,
                 seed: bool = True, demo: bool = False, open_path: str | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self.panes = list(panes)
        self.seed = seed
        self.demo = demo
        self.open_path = open_path
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="spacrq-startup", daemon=True)
        self._thread.start()

    def wait(self, timeout: float = 10.0) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def _emit(self, name: str, value: object) -> None:
        try:
            self.step.emit(name, value)
        except RuntimeError:  # the window went away while we worked
            pass

    def _run(self) -> None:
        ws = self.workspace
        if self.open_path is not None:  # the operator asked for another workspace
            try:
                ws, notes = open_workspace(self.open_path, seed=False)
            except Exception as exc:  # WorkspaceError, or anything the folder springs on us
                self._emit(OPENED, exc)
                self._emit(DONE, None)
                return
            self._emit(OPENED, ws)  # the window claims it, then starts a new Startup on it
            self._emit(DONE, None)
            return
        if ws is None:
            self._emit(DONE, None)
            return
        if self.seed:
            try:
                if ws.demo_pending():
                    self._emit(NOTES, seed_demo(ws))
            except Exception as exc:
                self._emit(NOTES, [f"the demo could not be set up: {exc}"])
        if self.demo:
            try:
                self._emit(DEMO, start_demo_night(ws))
            except Exception as exc:
                self._emit(NOTES, [f"the demo night could not be started: {exc}"])
        for title, _target in self.panes:
            try:
                for module in WARM.get(title, ()):
                    importlib.import_module(module)
                self._emit(IMPORTED, (title, None))
            except Exception as exc:
                self._emit(IMPORTED, (title, exc))
        self._emit(DONE, None)
