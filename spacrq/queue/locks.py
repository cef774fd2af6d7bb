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

A third, ``unsaved.lock``, is held by a runner only while its state is ahead
of everything on disk (a full disk refused the file and the journal alike):
the file then still shows as waiting a job that ran, and an edit of it would
be accepted and never applied.  An editor asks :func:`runner_unsaved` under
the edit lock and refuses instead.  A lock needs no room on the disk, which is
why it is a lock and not a file's contents; the file is made when the runner
starts, while there is room.

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
from spacrq.runfiles import still_named

EDIT_LOCK_FILE = "queue.lock"
RUNNER_LOCK_FILE = "runner.lock"
UNSAVED_LOCK_FILE = "unsaved.lock"
#: Longest an editor waits for another writer to finish (a 2000-job save takes ~0.1 s).
EDIT_WAIT = 10.0
#: Longest a starting runner waits out a look at its lock (held shared for microseconds).
PROBE_WAIT = 0.5


def linked_logs(folder: "str | os.PathLike") -> str:
    """One sentence when the queue's logs folder is a symbolic link (else ''): spacrq never
    writes through a link, and every file of a run is in that folder."""
    if not os.path.islink(folder):
        return ""
    return (f"the queue's logs folder {folder} is a symbolic link; spacrq does not write "
            "through links: replace it with a real folder (move what it points to into its "
            "place)")


def refuse_linked_logs(folder: Path) -> None:
    """:raises QueueError: one sentence when the queue's logs folder is a symbolic link."""
    problem = linked_logs(folder)
    if problem:
        raise QueueError(problem)


def _open(file: Path) -> int:
    """The lock file, opened; :raises QueueError: one sentence when its folder is unusable
    (a symbolic link included: every writer of the queue takes this lock first, and spacrq
    never writes through a link)."""
    refuse_linked_logs(file.parent)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise QueueError(f"could not use the queue's logs folder {file.parent} "
                         f"({exc.strerror or exc}); move what is in its place, or make the "
                         "folder writable") from None
    try:
        return os.open(file, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        what = ("a folder" if file.is_dir() and not file.is_symlink() else
                "a symbolic link" if file.is_symlink() else "")
        where = f"{what} is in its place" if what else (exc.strerror or str(exc))
        raise QueueError(f"could not open the queue's lock file {file} ({where}); move it "
                         "away (spacrq makes it again), or make the folder writable") from None


def _flock_until(fd: int, deadline: float) -> bool:
    """Take ``fd``'s exclusive flock, waiting until ``deadline``; False when it did not come."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)


def _open_folder(folder: str) -> int:
    """The logs folder, opened to be locked; -1 where folders cannot be (NFS emulates flock
    with write locks, which a folder cannot take): the lock file alone is the lock there."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # (can it be locked at all?)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        pass  # it can: somebody holds it
    except OSError:
        os.close(fd)
        return -1
    return fd


class EditLock:
    """``with EditLock(folder):`` load, change and save the queue file, alone.

    Two locks, taken in this order by every writer: the queue's logs folder
    (a folder cannot be removed while it holds the queue's files, so nobody
    can take the lock from under its holder) and the ``queue.lock`` file in
    it (what older spacrq versions take, and the lock where folders cannot
    be locked).  A lock file removed or replaced while a writer waited is
    opened again; :meth:`held` tells a writer whether it was removed while
    it held it.
    """

    def __init__(self, folder: str | os.PathLike, wait: float = EDIT_WAIT) -> None:
        self.file = Path(folder) / EDIT_LOCK_FILE
        self.folder = str(folder)
        self.wait = wait
        self.fd = -1
        self.folder_fd = -1

    def __enter__(self) -> "EditLock":
        deadline = time.monotonic() + self.wait
        fd = _open(self.file)  # (makes the folder when it is missing)
        if self.folder_fd < 0:
            self.folder_fd = _open_folder(self.folder)
        if self.folder_fd >= 0 and not _flock_until(self.folder_fd, deadline):
            os.close(fd)
            self._drop_folder()
            raise self._busy()
        while True:
            if not _flock_until(fd, deadline):
                os.close(fd)
                self._drop_folder()
                raise self._busy()
            if still_named(fd, str(self.file)):
                break
            # the file was removed or replaced while we waited: the lock that counts is the
            # one at its path now (everybody else takes that one)
            os.close(fd)
            fd = _open(self.file)
        self.fd = fd
        return self

    def _busy(self) -> QueueError:
        return QueueError(f"another process has been changing this queue for {self.wait:g}s "
                          f"({self.file} is locked); nothing was changed: try again in a moment")

    def held(self) -> bool:
        """Whether the lock is still the lock at its path (nobody removed or replaced the
        file, nor the folder, since it was taken)."""
        if self.folder_fd >= 0:  # the folder's lock cannot be taken from under us
            return still_named(self.folder_fd, self.folder)
        return self.fd >= 0 and still_named(self.fd, str(self.file))

    def _drop_folder(self) -> None:
        if self.folder_fd >= 0:
            os.close(self.folder_fd)
            self.folder_fd = -1

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock
            self.fd = -1
        self._drop_folder()


class HeldEditLock(EditLock):
    """The runner's edit lock: the same locks, their files kept open between writes.

    A small queue's runner takes the edit lock at every job; opening the lock
    file each time cost more than the flock itself.  Releasing unlocks and
    keeps the descriptors; a lock file (or folder) that was replaced meanwhile
    (another inode at its path) is opened afresh, so the lock is always the
    one every other writer takes.
    """

    def __init__(self, folder: str | os.PathLike, wait: float = EDIT_WAIT) -> None:
        super().__init__(folder, wait)
        self._name = str(self.file)

    def __enter__(self) -> "HeldEditLock":
        if self.fd < 0:
            EditLock.__enter__(self)
            return self
        deadline = time.monotonic() + self.wait
        if self.folder_fd >= 0 and not _flock_until(self.folder_fd, deadline):
            raise self._busy()
        if not _flock_until(self.fd, deadline):
            self._unlock(self.folder_fd)
            raise self._busy()
        # Looked at once the locks are taken (a replaced file's lock is then let go of at
        # once): the lock file and the folder are still the ones at their paths.
        if still_named(self.fd, self._name) and (self.folder_fd < 0
                                            or still_named(self.folder_fd, self.folder)):
            return self
        self._unlock(self.fd)  # removed or replaced: take the ones there now
        self._unlock(self.folder_fd)
        self.close()
        EditLock.__enter__(self)
        return self

    @staticmethod
    def _unlock(fd: int) -> None:
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                pass

    def __exit__(self, *exc: object) -> None:
        self._unlock(self.fd)
        self._unlock(self.folder_fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self._drop_folder()


class RunnerLock:
    """The exclusive ``runner.lock`` of one queue, held for the runner's life."""

    def __init__(self, folder: str | os.PathLike, queue: str | os.PathLike = "FILE") -> None:
        self.file = Path(folder) / RUNNER_LOCK_FILE
        self.queue = str(queue)  # named in the refusal
        self.fd = -1

    def acquire(self) -> "RunnerLock":
        """:raises QueueError: a runner holds it.  A look by :func:`runner_holds` (``queue
        status``, the pane's poll) holds it shared for a moment: that is waited out
        (:data:`PROBE_WAIT`), so a look never makes a runner refuse to start."""
        fd = _open(self.file)
        if not _flock_until(fd, time.monotonic() + PROBE_WAIT):
            said = os.pread(fd, 200, 0).decode("utf-8", "replace")
            said = "".join(c for c in said if c.isprintable()).strip()[:80]  # (a file's bytes)
            kernel = None if said else flock_holder(self.file)  # (no pid written: a full disk)
            holder = f"process {said}" if said else f"process {kernel}" if kernel \
                else "another process"
            os.close(fd)
            raise QueueError(f"this queue is already being run by {holder}; stop it "
                             f"with 'spacrq queue stop {self.queue}' or wait for it to finish") from None
        try:  # who holds it, for a second runner's refusal: the flock is the lock itself
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        except OSError:
            pass  # (a full disk: the refusal then says "another process")
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def flock_holder(file: str | os.PathLike) -> int | None:
    """The pid that holds an exclusive ``flock`` on ``file``, asked of the kernel (Linux's
    ``/proc/locks``): for a runner that could not write its pid into its lock file (a disk
    full before it started).  None where it cannot be told."""
    try:
        st = os.stat(file)
        with open("/proc/locks", "rb") as locks:
            text = locks.read(1 << 20).decode("ascii", "replace")
    except OSError:
        return None
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in text.splitlines():
        parts = line.split()  # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2155006 0 EOF"
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[3] == "WRITE" \
                and parts[5] == where and parts[4].isdigit():
            return int(parts[4]) or None
    return None


class UnsavedFlag:
    """``unsaved.lock``, held exclusively by a runner while its state is nowhere on disk.

    Opened when the runner starts (while the disk has room for the file); raising and
    lowering it are flock calls, which no full disk refuses.  Where it cannot be opened
    (a linked or unwritable folder) it is never raised, and the runner's own check of
    the edits it could not apply (:func:`spacrq.queue.edits.take_edits`) is what is left.
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        self.file = Path(folder) / UNSAVED_LOCK_FILE
        self.fd = -1
        self.raised = False
        if linked_logs(self.file.parent):
            return
        try:
            self.fd = os.open(self.file, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
                              0o644)
        except OSError:
            self.fd = -1

    def set(self, unsaved: bool) -> None:
        """Raise (``True``) or lower the flag; nothing when it already is so."""
        if self.fd < 0 or unsaved == self.raised:
            return
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB if unsaved else fcntl.LOCK_UN)
            self.raised = unsaved
        except OSError:
            pass  # (a probe holds it shared for a moment: raised at the next failure or save)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # (closing drops the flock)
            self.fd = -1
        self.raised = False


def _held_by_another(file: Path) -> bool:
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


def runner_unsaved(folder: str | os.PathLike) -> bool:
    """Whether a runner of this queue holds a state that it could not save anywhere (its
    file and journal then show jobs as waiting that it already ran): asked of the kernel."""
    return _held_by_another(Path(folder) / UNSAVED_LOCK_FILE)


def runner_holds(folder: str | os.PathLike) -> bool:
    """Whether a live runner holds this queue now (asked of the kernel, not of a file)."""
    return _held_by_another(Path(folder) / RUNNER_LOCK_FILE)
