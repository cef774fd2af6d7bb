"""A poller: a plain thread that reads files and hands snapshots to the GUI thread as signals.

Each pane has one.  The thread calls ``poll()`` (core code, no Qt) every
``interval`` seconds — waiting on a :class:`threading.Event`, never sleeping,
so a stop or a "poll now" is answered at once — and emits what it returns
through ``snapshot``.  An exception in ``poll()`` becomes an ``error`` signal
with one sentence; the poller keeps running.

The GUI thread only ever calls :meth:`Poller.request` (set what to watch,
thread-safe) and :meth:`Poller.poll_now`; it never reads a file itself.
Panes do not use it directly: :class:`spacrq.ui.pane_base.PaneBase` owns it.

Why a plain thread and no Qt objects of its own: a Qt object that Python
alone owns is destroyed wherever Python's garbage collector happens to run,
and that can be any thread (a poller's, zarr's).  A ``QThread`` or worker
``QObject`` left to it once brought the whole window down, so the only Qt
object here is the :class:`Poller` itself, a child of its pane, which Qt
destroys with the pane on the GUI thread.
"""
from __future__ import annotations

import threading
import traceback
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

#: every Poller alive, so tests can fail one that was left running
LIVE_POLLERS: weakref.WeakSet[Poller] = weakref.WeakSet()


class _Loop:
    """The polling loop and what it is asked to watch; holds no Qt object."""

    def __init__(self, poll: Callable[[dict], Any], interval: float,
                 emit_snapshot: Callable[[Any], None], emit_error: Callable[[str], None]) -> None:
        self._poll = poll
        self.interval = interval
        self._emit_snapshot, self._emit_error = emit_snapshot, emit_error
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._request: dict = {}

    def set_request(self, **changes: Any) -> None:
        with self._lock:
            self._request.update(changes)
        self.wake.set()

    def run(self) -> None:
        last_error = ""
        while not self.stopping.is_set():
            with self._lock:
                request = dict(self._request)
            try:
                result = self._poll(request)
                last_error = ""
                if result is not None and not self.stopping.is_set():
                    self._emit_snapshot(result)
            except Exception as exc:  # turned into a signal, never a silent death
                message = f"{type(exc).__name__}: {exc}"
                if message != last_error:
                    traceback.print_exc()
                    self._emit_error(message)
                last_error = message
            self.wake.wait(self.interval)
            self.wake.clear()


class Poller(QObject):
    """Owns the polling thread; connect to ``snapshot`` and ``error``."""

    snapshot = Signal(object)
    error = Signal(str)

    def __init__(self, poll: Callable[[dict], Any], interval: float = 0.5,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = f"poller-{getattr(poll, '__qualname__', 'poll')}"
        self._worker = _Loop(poll, interval, self._send_snapshot, self._send_error)
        self._thread: threading.Thread | None = None
        LIVE_POLLERS.add(self)

    # emitted from the polling thread: Qt queues them to the receivers on the GUI thread
    def _send_snapshot(self, result: Any) -> None:
        try:
            self.snapshot.emit(result)
        except RuntimeError:  # the pane was destroyed while this poll ran
            self._worker.stopping.set()

    def _send_error(self, message: str) -> None:
        try:
            self.error.emit(message)
        except RuntimeError:
            self._worker.stopping.set()

    def start(self) -> None:
        if not self.is_running():
            self._worker.stopping.clear()
            self._thread = threading.Thread(target=self._worker.run, name=self.name, daemon=True)
            self._thread.start()

    def request(self, **changes: Any) -> None:
        """Change what the thread watches (thread-safe) and poll at once."""
        self._worker.set_request(**changes)

    def poll_now(self) -> None:
        self._worker.wake.set()

    def halt(self) -> None:
        """Ask the thread to stop after the poll in flight, without waiting."""
        self._worker.stopping.set()
        self._worker.wake.set()

    def stop(self, timeout: float = 1.0) -> bool:
        """Stop the thread and wait up to ``timeout`` seconds for it; True when it ended."""
        self.halt()
        if self._thread is not None:
            self._thread.join(max(0.0, timeout))
            return not self._thread.is_alive()
        return True

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
