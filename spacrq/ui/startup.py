"""The slow part of opening a window, done after it is on screen and off the GUI thread.

The window paints first (title, menus, a "loading…" line per pane); then this
worker seeds a new workspace's demo, lines up and starts the demo night when
asked (``spacrq demo``), and imports each pane's module, current pane first —
with it the Qt-free core behind the pane (zarr, numpy, the watches), most of a
pane's load time.  Importing a module only defines its classes; the GUI thread
makes the pane's widgets when it builds the pane, so the window stays live
while the rest load and never waits on an import.

Each step is a ``step`` signal the window answers on its own thread.  The
worker is a plain daemon thread (no Qt object of its own to leave to the
garbage collector); :meth:`Startup.cancel` makes it stop between steps and
:meth:`Startup.stop` waits for it within the window's shutdown budget.
Nothing here touches a widget.
"""
from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from spacrq.workspace import Workspace, open_workspace, seed_demo

#: step names, in the order they arrive
NOTES, DEMO, IMPORTED, OPENED, DONE = "notes", "demo", "imported", "opened", "done"

log = logging.getLogger("spacrq")


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
    """One background run of the start-up steps; ``step(name, value)`` reports each.

    ``panes`` are ``(title, "module:Class")`` pairs: each module is imported in
    turn and reported as ``IMPORTED (title, problem or None)``.
    """

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
        self._cancelled = threading.Event()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="spacrq-startup", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Stop after the step in flight, without waiting (what is left is not done)."""
        self._cancelled.set()

    def stop(self, timeout: float) -> bool:
        """Cancel and wait up to ``timeout`` seconds; True when the worker has ended."""
        self.cancel()
        if self._thread is not None:
            self._thread.join(max(0.0, timeout))
            return not self._thread.is_alive()
        return True

    def _emit(self, name: str, value: object) -> None:
        if self._cancelled.is_set() and name != DONE:
            return
        try:
            self.step.emit(name, value)
        except RuntimeError:  # the window went away while we worked
            pass

    def _run(self) -> None:
        ws = self.workspace
        if self.open_path is not None:  # the operator asked for another workspace
            try:
                ws, _notes = open_workspace(self.open_path, seed=False)
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
        if self.seed and not self._cancelled.is_set():
            try:
                if ws.demo_pending():
                    self._emit(NOTES, seed_demo(ws))
            except Exception as exc:
                self._emit(NOTES, [f"the demo could not be set up: {exc}"])
        if self.demo and not self._cancelled.is_set():
            try:
                self._emit(DEMO, start_demo_night(ws))
            except Exception as exc:
                self._emit(NOTES, [f"the demo night could not be started: {exc}"])
        for title, target in self.panes:
            if self._cancelled.is_set():
                break
            try:
                importlib.import_module(target.partition(":")[0])
                self._emit(IMPORTED, (title, None))
            except Exception as exc:
                # the traceback is written here: formatting it reads source files, which the
                # GUI thread does not do
                log.exception("the %s pane could not be opened", title)
                self._emit(IMPORTED, (title, exc.with_traceback(None)))
        self._emit(DONE, None)
