"""The one wait-until helper of the tests that run without Qt.

A test waits on a condition with a deadline, never for a fixed time: the
condition is checked every ``interval`` seconds (a short poll of a file or a
process, not a sleep standing in for the event) and the test fails with
``what`` when the deadline passes.  UI tests use ``qtbot.waitUntil``.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, what: str = "condition",
               interval: float = 0.01) -> T:
    """The first true value of ``predicate()``; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)
