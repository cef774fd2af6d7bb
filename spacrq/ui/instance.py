"""One window per workspace: a lock the kernel holds for us, and a socket to be called on.

A second ``spacrq`` on the same workspace does not open a second window that
would race the first over the same files.  It finds the workspace's lock
taken (an ``flock``: the kernel lets go when the holder dies, however it
dies, so a crash never leaves a workspace locked) and asks the running window
over a local socket, no network, to come to the front.

Both live in a folder only this user can enter, mode 0700 set explicitly so
no umask loosens it (``$XDG_RUNTIME_DIR/spacrq``, else the state folder, else
a private folder under the temporary directory): another account on the
workstation can neither call the window nor squat the lock.

The lock is taken twice: in that private folder, and in the workspace itself
(``.spacrq-window.lock``, holding the window's socket path).  The private
folder depends on the environment (``XDG_RUNTIME_DIR`` is set by a desktop
login, not by ``su``, cron or some ssh shells), so two launches with different
environments would not see each other's lock there; the workspace's own lock
they always share, and it says where to call the window.

Taking the lock costs microseconds and happens before the window paints; the
socket (QtNetwork) starts listening right after the first paint, and a
second launch in that moment waits for it, up to a few seconds.
"""
from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import threading
import time
import zlib
from pathlib import Path

from spacrq.ui.crash import state_dir

#: how long a second launch waits for the first window's socket (it listens after its first paint)
ANSWER_WAIT = 5.0


def server_name(root: str) -> str:
    data = root.encode()
    return f"spacrq-{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def _mine(info: os.stat_result) -> bool:
    """Whether ``info`` is a real folder (not a link) of this user's."""
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def _private_dir(path: Path) -> Path | None:
    """``path`` as a folder owned by us with mode 0700, or None when it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        info = os.lstat(path)
        if not _mine(info):
            return None
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(path, 0o700)
        return path
    except OSError:
        return None


def instance_dir() -> Path:
    """The private folder for sockets and locks, short enough for a socket path."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    candidates = [Path(runtime) / "spacrq"] if runtime else []
    candidates += [state_dir() / "instance", Path(tempfile.gettempdir()) / f"spacrq-{os.getuid()}"]
    for candidate in candidates:
        if len(str(candidate)) > 80:  # a unix socket path is at most ~107 bytes
            continue
        found = _private_dir(candidate)
        if found is not None:
            return found
    raise OSError("no private folder for spacrq's instance lock could be made; check that "
                  f"{tempfile.gettempdir()} is writable")


#: the workspace's own window lock (see the module's docstring)
WORKSPACE_LOCK = ".spacrq-window.lock"


def _locked(path: str) -> int | None:
    """``path`` opened and flocked; None when another live process holds it.
    :raises OSError: it cannot be opened (its folder is not writable, a link is there)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _ours(socket: str) -> bool:
    """Whether ``socket`` (read from the workspace's lock) is in a private folder of this
    user's, as every spacrq window's is: a name planted in the file calls nobody else."""
    try:
        info = os.lstat(os.path.dirname(socket))
    except (OSError, ValueError):
        return False
    return socket.startswith("/") and _mine(info) and stat.S_IMODE(info.st_mode) == 0o700


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(4096).decode("utf-8", "replace")
    except OSError:
        return ""


class SingleInstance:
    """The workspace's lock and, once :meth:`listen` ran, its "show yourself" socket."""

    def __init__(self, root: str, folder: Path | None = None) -> None:
        self.folder = folder or instance_dir()
        self.name = str(self.folder / server_name(root))
        self.lock_path = self.name + ".lock"
        self.workspace_lock = str(Path(root) / WORKSPACE_LOCK)
        self._fd: int | None = None
        self._workspace_fd: int | None = None
        self.server = None
        self._give_up = threading.Event()  # set by cancel(): signal_running stops trying

    def cancel(self) -> None:
        """Make a :meth:`signal_running` under way (on another thread) give up at once."""
        self._give_up.set()

    def acquire(self) -> bool:
        """Take the locks; False when another live process holds either (then
        :meth:`signal_running` calls that window, wherever its socket is)."""
        fd = _locked(self.lock_path)
        if fd is None:
            return False
        try:
            wfd = _locked(self.workspace_lock)
        except OSError:  # a workspace that cannot hold the file: the private lock alone
            wfd = -1
        if wfd is None:  # open from another environment: call the window where it listens
            os.close(fd)
            other = _read(self.workspace_lock).split("\n")
            if len(other) >= 2 and _ours(other[1]):
                self.name, self.lock_path = other[1], other[1] + ".lock"
            self._other_pid = other[0]
            return False
        for handle in (fd, wfd):
            if handle >= 0:
                os.ftruncate(handle, 0)
                os.write(handle, f"{os.getpid()}\n{self.name}\n".encode())
        self._fd, self._workspace_fd = fd, (wfd if wfd >= 0 else None)
        return True

    def holder(self) -> str:
        """The process id written by whoever holds the lock, or '' if unreadable."""
        return getattr(self, "_other_pid", "") or _read(self.lock_path).split("\n")[0].strip()

    def listen(self):
        """Start answering second launches (call after acquire)."""
        from PySide6.QtNetwork import QLocalServer
        QLocalServer.removeServer(self.name)  # a dead holder's socket file
        server = QLocalServer()
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        server.listen(self.name)
        try:
            os.chmod(self.name, 0o600)
        except OSError:
            pass
        self.server = server
        return server

    def signal_running(self, wait: float = ANSWER_WAIT) -> bool:
        """Ask the holder to show its window; True once it was asked.

        Never called on a thread with a window: a second launch calls it before it
        made any (and then exits), an open window from a thread of its own.  Between
        tries it waits on an event (:meth:`cancel` ends the wait), never sleeps."""
        from PySide6.QtNetwork import QLocalSocket
        deadline = time.monotonic() + wait
        while True:
            sock = QLocalSocket()
            sock.connectToServer(self.name)
            if sock.waitForConnected(1000):
                sock.write(b"show\n")
                sock.waitForBytesWritten(1000)
                sock.disconnectFromServer()
                return True
            left = deadline - time.monotonic()
            # the holder listens right after its first paint: try again in a moment
            if left <= 0 or self._give_up.wait(min(0.1, left)):
                return False

    def release(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for name in ("_workspace_fd", "_fd"):
            fd = getattr(self, name)
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                setattr(self, name, None)
