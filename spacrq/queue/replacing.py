"""The runner's replace of its queue file, with the slow parts kept off the job's way.

A small queue's file is replaced at every transition, and the next job
waits for that replace.  Two of its parts need not be waited for, and on a
busy disk they cost more than the rest (up to a millisecond each, measured
on a shared 2-core machine while others ran tests):

* creating the temporary file: it is created ahead, while the job runs
  (:meth:`QuickReplacer.prepare`), so the replace itself is one write and
  one rename;
* letting go of the file that was replaced (its blocks freed): the runner
  keeps it open so the rename does not free it, and lets go of it once a
  job has run long enough that nobody waits (:meth:`QuickReplacer.tidy`).  A
  burst of short jobs keeps up to :data:`KEEP` files (at most
  :data:`KEEP_BYTES` in all) open; past that the oldest are let go of, down
  to half of both bounds, at once.

The closing is done by a thread of the replacer's own
(:class:`spacrq.queue.background.Closer`): closing the last descriptor of a
replaced file (which frees it) took 0.6 ms on this project's 2-core machine,
and made by the runner it was paid at every job of a burst longer than
:data:`KEEP` (a 450-job queue of short jobs spent a third of its time
there).  The files are handed to it a batch at a time: handed over one per
replace, its wake at every job (each taking the interpreter's lock from the
runner for a moment) cost a 500-job queue of short jobs ~50 us per job, a
tenth of its overhead over a bare process start.  A full disk waits for it
(:meth:`QuickReplacer.write`).  (Creating
the next files on a thread too — this temporary file and the next job's log —
was tried: a queue of short jobs ran 12 % slower per job, handing them over
cost more than it saved.)

The promise is :func:`spacrq.runfiles.write_bytes`'s with ``durable=False``:
a reader sees the old file or the new one, never part of one; nothing is
written through a link (the temporary file is created exclusively, never
opened if it exists; a crash's leftover is removed first); the file keeps
its mode.  It costs less per write, which a small queue pays at every job:
the caller holds the queue's edit lock, so one fixed temporary name next to
the file serves, and the file's mode is looked up once.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from spacrq.queue.background import Closer
from spacrq.runfiles import still_named

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
#: Replaced files kept open at most, and their bytes at most, between two tidies.
KEEP = 64
KEEP_BYTES = 8 << 20


class QuickReplacer:
    """The runner's atomic replace of its queue file between durable checkpoints, with its
    temporary file made ahead and the replaced files closed when idle."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.temp = self.path.with_name(f".{self.path.name}.runner.tmp")
        self.mode: int | None = None
        self._held: list[int] = []  # replaced files kept open (see the module's docstring)
        self._ready = -1  # the temporary file, created ahead and still empty
        self._sizes: list[int] = []  # the bytes of each file in _held
        self._closer: Closer | None = None  # (started when the first file is let go of)

    def prepare(self) -> None:
        """Create the next temporary file now (never fatal: :meth:`write` tries again)."""
        if self._ready >= 0:
            return
        try:
            self._ready = self._create()
        except OSError:
            self._ready = -1

    def _create(self) -> int:
        if self.mode is None:
            self.mode = self._current_mode()
        try:
            fd = os.open(self.temp, _CREATE, self.mode)
        except FileExistsError:  # left by a runner that died mid-write
            os.unlink(self.temp)
            fd = os.open(self.temp, _CREATE, self.mode)
        try:
            os.fchmod(fd, self.mode)  # whatever the umask says
        except OSError:
            os.close(fd)
            raise
        return fd

    def _current_mode(self) -> int:
        """The mode of the file replaced (kept, as write_bytes keeps it), else 0o644."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return 0o644
        return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o644

    def write(self, data: bytes) -> None:
        """:raises OSError: the file could not be replaced (it is as it was).

        A full disk is tried once more after letting go of the replaced files kept open
        (and waiting until they are closed): their blocks are the runner's own, and a
        burst of short jobs on a nearly full disk must not fail its saves for the space
        it holds itself."""
        try:
            self._write(data)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT) \
                    or (len(self._held) <= 1 and self._closer is None):
                raise
            self.tidy()
            if self._closer is not None:
                self._closer.drain()  # (their blocks freed before the second try)
            self._write(data)

    def _write(self, data: bytes) -> None:
        fd, self._ready = self._ready, -1
        if fd >= 0 and not self._still_ours(fd):
            os.close(fd)
            fd = -1
        if fd < 0:
            fd = self._create()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.replace(self.temp, self.path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(self.temp)
            except OSError:
                pass
            raise
        self._held.append(fd)  # the replaced file stays open: see the module's docstring
        self._sizes.append(len(data))
        if len(self._held) > 1 and (len(self._held) > KEEP or sum(self._sizes[:-1]) > KEEP_BYTES):
            # Down to half the bounds, handed over at once: the closer thread wakes once
            # every few replaces, not at each (see the module's docstring).
            n, kept = 0, sum(self._sizes[:-1])
            while len(self._held) - n > 1 and (len(self._held) - n > KEEP // 2
                                               or kept > KEEP_BYTES // 2):
                kept -= self._sizes[n]
                n += 1
            self._let_go(n)

    def _still_ours(self, fd: int) -> bool:
        """Whether the temporary name still is the file made ahead (nobody swapped it)."""
        return still_named(fd, self.temp)

    def tidy(self) -> None:
        """Let go of the replaced files kept open (all but the current one)."""
        self._let_go(len(self._held) - 1)

    def _let_go(self, n: int) -> None:
        """Let go of the ``n`` oldest replaced files (closed by the replacer's closer thread,
        handed over at once)."""
        if n <= 0:
            return
        fds = self._held[:n]
        del self._held[:n], self._sizes[:n]
        if self._closer is None:
            self._closer = Closer("spacrq-queue-file-closer")
        self._closer.close_later(*fds)

    def close(self) -> None:
        """Close everything kept open (the closer thread ended once it closed what it was
        given), and remove a temporary file made ahead."""
        if self._ready >= 0:
            os.close(self._ready)
            self._ready = -1
            try:
                os.unlink(self.temp)
            except OSError:
                pass
        closer, self._closer = self._closer, None
        if closer is not None:
            closer.stop()
        self._sizes.clear()
        while self._held:
            os.close(self._held.pop())
