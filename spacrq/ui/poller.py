"""A poller: a worker object on its own QThread that reads files and emits snapshots.

Each pane has one.  The worker calls ``poll()`` (core code, no Qt) every
``interval`` seconds — waiting on a :class:`threading.Event`, never sleeping,
so a stop or a "poll now" is answered at once — and emits what it returns
through ``snapshot``.  An exception in ``poll()`` becomes an ``error`` signal
with one sentence; the poller keeps running.

The GUI thread only ever calls :meth:`Poller.request` (set what to watch,
thread-safe) and :meth:`Poller.poll_now`; it never reads a file itself.
"""
from __future__ import annotations

import threading
import traceback
import weakref
from typing import Any, Callable

from PySide6.QtCore import QObject, QThread, Signal, Slot


#: every Poller alive, so tests can fail one that was left running
LIVE_POLLERS: "weakref.WeakSet[Poller]" = weakref.WeakSet()


class _Worker(QObject):
    snapshot = Signal(object)
    error = Signal(str)
    finished = Signal()

    def __init__(self, poll: Callable[[dict], Any], interval: float) -> None:
        super().__init__()
        self._poll = poll
        self.interval = interval
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._request: dict = {}

    def set_request(self, **changes: Any) -> None:
        with self._lock:
            self._request.update(changes)
        self._wake.set()

    @Slot()
    def run(self) -> None:
        last_error = ""
        while not self._stop.is_set():
            with self._lock:
                request = dict(self._request)
            try:
                result = self._poll(request)
                last_error = ""
                if result is not None and not self._stop.is_set():
                    self.snapshot.emit(result)
            except Exception as exc:  # turned into a signal, never a silent death
                message = f"{type(exc).__name__}: {exc}"
                if message != last_error:
                    traceback.print_exc()
                    self.error.emit(message)
                last_error = message
            self._wake.wait(self.interval)
            self._wake.clear()
        self.finished.emit()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()


class Poller(QObject):
    """Owns the thread and the worker; connect to ``snapshot`` and ``error``."""

    snapshot = Signal(object)
    error = Signal(str)

    def __init__(self, poll: Callable[[dict], Any], interval: float = 0.5,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread = QThread()
        self._thread.setObjectName(f"poller-{getattr(poll, '__qualname__', 'poll')}")
        self._worker = _Worker(poll, interval)
        self._worker.moveToThread(self._thread)
        self._worker.snapshot.connect(self.snapshot)
        self._worker.error.connect(self.error)
        self._thread.started.connect(self._worker.run)
        self._worker.finished.connect(self._thread.quit)
        LIVE_POLLERS.add(self)

    def start(self) -> None:
        if not self._thread.isRunning():
            self._thread.start()

    def request(self, **changes: Any) -> None:
        """Change what the worker watches (thread-safe) and poll at once."""
        self._worker.set_request(**changes)

    def poll_now(self) -> None:
        self._worker._wake.set()

    def set_interval(self, seconds: float) -> None:
        self._worker.interval = seconds

    def stop(self, timeout_ms: int = 5000) -> bool:
        """Stop the worker and wait for its thread; True when it ended."""
        self._worker.stop()
        if self._thread.isRunning():
            self._thread.quit()
            return self._thread.wait(timeout_ms)
        return True

    def is_running(self) -> bool:
        return self._thread.isRunning()

