"""The two locks of a queue file: a short one for every edit, a long one for its runner.

Two people adding a job at the same moment must both find their job in the
file, so every writer of a queue file — ``spacrq queue add``, the pane's Save,
the runner at each transition — holds the **edit lock** (``queue.lock``)
from loading the file to replacing it.  Held for milliseconds; a writer
that cannot get it within :data:`EDIT_WAIT` seconds refuses in a sentence
instead of writing blind.

The **runner lock** (``runner.lock``) is held by the queue's runner for its
whole life, so a second runner refuses instead of running every job twice,
and an editor can ask "does a runner own this file right now?" without
trusting a pid in a file.

Both are ``flock`` locks on files in the queue's own logs folder
(:func:`spacrq.queue.store.logs_dir`), so two queue files never share one,
and the kernel drops them when their holder dies, however it dies.
"""
from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

from spacrq.queue.model import QueueError

EDIT_LOCK_FILE = "queue.lock"
RUNNER_LOCK_FILE = "runner.lock"
#: Longest an editor waits for another writer to finish (a 2000-job save takes ~0.1 s).
EDIT_WAIT = 10.0


def _open(file: Path) -> int:
    """The lock file, opened; :raises QueueError: one sentence when its folder is unusable."""
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        return os.open(file, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        raise QueueError(f"could not use the queue's logs folder {file.parent} "
                         f"({exc.strerror or exc}); move what is in its place, or make the "
                         "folder writable") from None


class EditLock:
    """``with EditLock(folder):`` load, change and save the queue file, alone."""

    def __init__(self, folder: str | os.PathLike, wait: float = EDIT_WAIT) -> None:
        self.file = Path(folder) / EDIT_LOCK_FILE
        self.wait = wait
        self.fd = -1

    def __enter__(self) -> "EditLock":
        fd = _open(self.file)
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise QueueError(f"another process has been changing this queue for "
                                     f"{self.wait:g}s ({self.file} is locked); nothing was "
                                     "changed: try again in a moment") from None
                time.sleep(0.002)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock
            self.fd = -1


class HeldEditLock(EditLock):
    """The runner's edit lock: the same lock, its file kept open between writes.

    A small queue's runner takes the edit lock at every job; opening the lock
    file each time cost more than the flock itself.  Releasing unlocks and
    keeps the descriptor; a lock file that was replaced meanwhile (another
    inode at its path) is opened afresh, so the lock is always the one every
    other writer takes.
    """

    def __init__(self, folder: str | os.PathLike, wait: float = EDIT_WAIT) -> None:
        super().__init__(folder, wait)
        self._name = str(self.file)

    def __enter__(self) -> "HeldEditLock":
        if self.fd >= 0:
            try:
                current = os.stat(self._name).st_ino == os.fstat(self.fd).st_ino
            except OSError:
                current = False
            if not current:
                self.close()
        if self.fd < 0:
            EditLock.__enter__(self)
            return self
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise QueueError(f"another process has been changing this queue for "
                                     f"{self.wait:g}s ({self.file} is locked); nothing was "
                                     "changed: try again in a moment") from None
                time.sleep(0.002)

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            except OSError:
                self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class RunnerLock:
    """The exclusive ``runner.lock`` of one queue, held for the runner's life."""

    def __init__(self, folder: str | os.PathLike, queue: str | os.PathLike = "FILE") -> None:
        self.file = Path(folder) / RUNNER_LOCK_FILE
        self.queue = str(queue)  # named in the refusal
        self.fd = -1

    def acquire(self) -> "RunnerLock":
        fd = _open(self.file)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise QueueError(f"this queue is already being run by process {holder}; stop it "
                             f"with 'spacrq queue stop {self.queue}' or wait for it to finish") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def runner_holds(folder: str | os.PathLike) -> bool:
    """Whether a live runner holds this queue now (asked of the kernel, not of a file)."""
    file = Path(folder) / RUNNER_LOCK_FILE
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False
