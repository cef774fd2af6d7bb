"""The one wait-until helper of the tests that run without Qt, and the two waits on
processes the tests start detached (a runner, a job writing its pid).

A test waits on a condition with a deadline, never for a fixed time: the
condition is checked every ``interval`` seconds (a short poll of a file or a
process, not a sleep standing in for the event) and the test fails with
``what`` when the deadline passes.  UI tests use ``qtbot.waitUntil``.
"""
from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import psutil

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


def reap(pid: int, timeout: float = 60.0) -> None:
    """Wait until the process ``pid`` (started detached by the test) has ended; one that
    ended already is fine.  :raises psutil.TimeoutExpired: still running after ``timeout``."""
    try:
        psutil.Process(pid).wait(timeout)
    except psutil.NoSuchProcess:
        pass


def pid_in(file: Path) -> int | None:
    """The pid a job wrote to ``file``, once it is there whole (created is not yet written)."""
    try:
        text = file.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.strip() else None


def gone_pid() -> int:
    """The pid of a process that has ended (an earlier run's, long gone)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@contextmanager
def runner_lock_held(logs: Path) -> Iterator[subprocess.Popen]:
    """Another process holding the queue's runner lock in ``logs`` for the block (a runner
    that could not write its record): that process, killed and reaped after."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from spacrq.queue.locks import RunnerLock; "
         f"RunnerLock({str(logs)!r}).acquire(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        yield holder
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
