"""What a UI test can leave behind, found and named: Qt objects only Python owns, QThreads and
QTimers still going, threads of spacrq's or the test's still alive.  The UI conftest fails a test
on any of them; tests/ui/test_ui_checks.py checks the checks."""
from __future__ import annotations

import gc
import sys
import threading
import time
import weakref
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = (str(ROOT / "spacrq") + "/", str(ROOT / "tests") + "/")


def orphans_for_the_collector() -> list[str]:
    """Collect garbage here, on the GUI thread, naming each live Qt object only Python owned.

    Such an object is destroyed by whichever thread next runs the collector (a poller's,
    zarr's); destroyed there while the GUI thread works, it crashes the process.  Collected
    with DEBUG_SAVEALL to see them, then for real, so they die here, on the GUI thread.
    """
    from PySide6.QtCore import QObject
    from shiboken6 import Shiboken

    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
    finally:
        gc.set_debug(0)
    found = sorted(type(o).__name__ for o in gc.garbage
                   if isinstance(o, QObject) and Shiboken.isValid(o) and Shiboken.ownedByPython(o))
    gc.garbage.clear()
    gc.collect()
    return found


def _line(frame) -> str:
    return f"{frame.f_code.co_filename[len(str(ROOT)) + 1:]}:{frame.f_lineno}"


def _ours(frame) -> bool:
    name = frame.f_code.co_filename
    return name.startswith(OURS) and not name.endswith(("conftest.py", "qtgarbage.py"))


def _started_at() -> str:
    """The innermost spacrq or test line on the stack: where a QThread or QTimer was started."""
    frame = sys._getframe(2)
    while frame is not None and not _ours(frame):
        frame = frame.f_back
    return "?" if frame is None else _line(frame)


class StartedDuringTest:
    """QThreads and QTimers started from Python while this is entered, with where: ``start``
    is wrapped meanwhile, and what is still going afterwards is a leftover."""

    def __init__(self) -> None:
        from PySide6.QtCore import QThread, QTimer
        self.classes = {QThread: QThread.start, QTimer: QTimer.start}
        self.started: dict[type, weakref.WeakKeyDictionary] = {
            cls: weakref.WeakKeyDictionary() for cls in self.classes}

    def __enter__(self) -> StartedDuringTest:
        for cls, original in self.classes.items():
            seen = self.started[cls]

            def start(obj, *args, _original=original, _seen=seen):
                _seen[obj] = _started_at()
                return _original(obj, *args)

            cls.start = start
        return self

    def __exit__(self, *_exc) -> None:
        for cls, original in self.classes.items():
            cls.start = original

    def still_going(self, grace: float = 0.0) -> list[str]:
        """A QThread still running after ``grace`` seconds, a QTimer still active, each named."""
        from PySide6.QtCore import QThread, QTimer
        from shiboken6 import Shiboken
        found = []
        deadline = time.monotonic() + grace
        for thread, where in list(self.started[QThread].items()):
            if Shiboken.isValid(thread) and thread.isRunning():
                thread.wait(max(0, int((deadline - time.monotonic()) * 1000)))
            if Shiboken.isValid(thread) and thread.isRunning():
                found.append(f"QThread {type(thread).__name__} started at {where}")
        for timer, where in list(self.started[QTimer].items()):
            if Shiboken.isValid(timer) and timer.isActive():
                found.append(f"active QTimer {timer.objectName() or type(timer).__name__} "
                             f"({timer.interval()} ms) started at {where}")
        return found


def _threads_of_ours(before: set[int]) -> list[tuple[threading.Thread, str]]:
    """Threads started since ``before`` running spacrq's or a test's code, with the innermost
    such line (a library's own long-lived thread, zarr's I/O loop, is that library's business)."""
    frames = sys._current_frames()
    ours = []
    for thread in threading.enumerate():
        if thread.ident in before or not thread.is_alive():
            continue
        frame = frames.get(thread.ident)
        while frame is not None and not _ours(frame):
            frame = frame.f_back
        if frame is not None:
            ours.append((thread, f"{_line(frame)} in {frame.f_code.co_name}"))
    return ours


def threads_still_alive(before: set[int], grace: float = 0.0) -> list[str]:
    """Threads of ours started since ``before`` and still alive after ``grace`` seconds, named."""
    deadline = time.monotonic() + grace
    for thread, _where in _threads_of_ours(before):
        thread.join(max(0.0, deadline - time.monotonic()))
    return [f"thread {thread.name!r} alive at {where}" for thread, where in _threads_of_ours(before)]
