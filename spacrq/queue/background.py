"""Closing, on a thread of its own, the files the runner lets go of.

Closing the last descriptor of a file nobody names any more frees it (its
inode and its blocks): 0.6 ms on this project's 2-core machine.  The
runner's queue file replacer (:mod:`spacrq.queue.replacing`) lets go of a
replaced file at every job of a long burst of short jobs; made by the runner
itself, that close was a third of a 450-job queue's time.  :class:`Closer`
is one daemon thread that closes the descriptors handed to it
(:meth:`Closer.close_later`), in order, while the runner goes on;
:meth:`Closer.drain` waits until it closed all it was given (a full disk
waits for the space), and :meth:`Closer.stop` ends it once it did.  Where no
thread can be started, a descriptor is closed at once.
"""
from __future__ import annotations

import collections
import os
import threading


class Closer:
    """One thread closing the descriptors handed to it (see the module's docstring)."""

    def __init__(self, name: str = "spacrq-closer") -> None:
        self._cond = threading.Condition(threading.Lock())
        self._fds: collections.deque[int] = collections.deque()
        self._stopping = False
        self._busy = False  # (a close under way)
        self._thread: threading.Thread | None = threading.Thread(
            target=self._loop, name=name, daemon=True)
        try:
            self._thread.start()
        except RuntimeError:  # (no thread can be started: each is closed at once)
            self._thread = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._fds and not self._stopping:
                    self._cond.wait()
                if not self._fds:
                    return  # (stopping, and nothing left)
                fds, self._busy = list(self._fds), True  # (all handed over so far, at once)
                self._fds.clear()
            for fd in fds:
                _close(fd)
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def close_later(self, *fds: int) -> None:
        """Close ``fds`` on the thread (they are the thread's from now on)."""
        with self._cond:
            if self._thread is not None and not self._stopping:
                self._fds.extend(fds)
                self._cond.notify_all()
                return
        for fd in fds:
            _close(fd)

    def drain(self) -> None:
        """Return once every descriptor handed over so far is closed."""
        with self._cond:
            while self._thread is not None and (self._fds or self._busy):
                self._cond.wait()

    def stop(self) -> None:
        """End the thread once it closed everything it was given (idempotent)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
