"""Room kept on the disk for the lines that say what a night did.

A disk fills in the night — a job's output, another user's copy — and then
every write that needs a new block fails.  The queue's two append-only
records are what a resumed runner trusts: the journal (each transition,
see :mod:`spacrq.queue.journal`) and the exit record (how each job ended,
see :mod:`spacrq.queue.supervise`).  Were their appends to fail too, the
jobs that finished on the full disk would be unknown to ``resume``, and run
again.  So the runner allocates room for them past their end when it starts
(``fallocate`` with ``FALLOC_FL_KEEP_SIZE``: blocks the file owns, its size
unchanged, so no reader sees them), enough for every line of a night of the
queue's size; appends then land in blocks already theirs, and a full disk
cannot refuse them.  The journal gives its room back when the run ends; the
exit record keeps it (see ``engine._exit_record_room`` for why).  The whole
queue file, replaced at each transition, needs new blocks and may still fail:
the journal holds what it misses, and every spacrq command folds the journal
into the file once the disk has room again.

Where the filesystem cannot allocate ahead (not Linux, ZFS, some network
shares) nothing is kept and the runner's log says so once; everything else
works as before.
"""
from __future__ import annotations

import errno
import os
import sys
from typing import Any

#: Room per attempt of a job, and its bounds, for each record: an attempt's transitions take
#: about 550 bytes of journal and 330 of exit record (a night of 40 no-op jobs with short
#: paths), and each carries the job's paths (its log, its working folder) two or three
#: times; the room holds about four times that.  Each record's room is kept again from its
#: end once half of it was written (see Journal and engine), so it lasts as long as the disk
#: has room, and what is left when the disk fills is at least half of it.
JOURNAL_ROOM = (2048, 256 * 1024, 64 * 1024 * 1024)
EXIT_RECORD_ROOM = (1024, 64 * 1024, 32 * 1024 * 1024)
#: The least room worth keeping when the whole of it cannot be (a nearly full disk).
LEAST_ROOM = 16 * 1024

_KEEP_SIZE = 0x01   # FALLOC_FL_KEEP_SIZE
_PUNCH_HOLE = 0x02  # FALLOC_FL_PUNCH_HOLE
_fallocate = None   # libc's fallocate, once looked up (False: there is none)


def room_for(jobs: Any, kind: tuple[int, int, int] = JOURNAL_ROOM, folder: str = "") -> int:
    """The bytes of room a record keeps for a queue's jobs (a count, or the jobs: then each
    job's attempts — one, and its retries — and the length of its paths count): none with
    ``SPACRQ_QUEUE_ROOM=0`` (a disk where room cannot be kept, for the tests)."""
    if os.environ.get("SPACRQ_QUEUE_ROOM", "").strip() == "0":
        return 0
    per_attempt, least, most = kind
    if isinstance(jobs, int):
        return max(least, min(most, per_attempt * max(0, jobs)))
    total, paths = 0, 3 * len(folder)
    for job in jobs:
        retries = getattr(job, "retries", 0)
        attempts = 1 + (retries if isinstance(retries, int) and 0 < retries < 1000 else 0)
        size = paths + 3 * (len(str(getattr(job, "id", ""))) + len(str(getattr(job, "cwd", "")
                                                                         or "")))
        total += attempts * (per_attempt + 4 * size)
        if total >= most:
            return most
    return max(least, total)


def _libc_fallocate():
    global _fallocate
    if _fallocate is None:
        _fallocate = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes
                libc = ctypes.CDLL(None, use_errno=True)
                function = getattr(libc, "fallocate64", None) or libc.fallocate
                function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
                function.restype = ctypes.c_int
                _fallocate = function
            except (OSError, AttributeError):
                pass
    return _fallocate


def _call(fd: int, mode: int, offset: int, length: int) -> str:
    function = _libc_fallocate()
    if not function:
        return "this system cannot allocate room ahead in a file"
    if function(fd, mode, offset, length) == 0:
        return ""
    import ctypes
    code = ctypes.get_errno()
    if code in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        return "its filesystem cannot allocate room ahead in a file"
    return os.strerror(code) if code else "fallocate failed"


def keep_room(fd: int, nbytes: int) -> str:
    """Allocate ``nbytes`` past the end of the open file ``fd`` (its size unchanged); ''
    when done, else why not (never raises).  Never more than half of what the disk has
    free (the queue file's own replacement needs room too), and on a disk too full for
    that, as much as fits, halving down to :data:`LEAST_ROOM` (a filesystem allocates all
    of a request or none); the reason says how much."""
    try:
        end = os.fstat(fd).st_size
    except OSError as exc:
        return exc.strerror or str(exc)
    if nbytes <= 0:
        return ""
    want = nbytes
    try:  # (never more than half of what is free: the queue file's own write needs room too)
        disk = os.fstatvfs(fd)
        free = disk.f_bavail * disk.f_frsize
    except OSError:
        free = want * 2
    if want > free // 2:
        want = max(LEAST_ROOM, free // 2 // 4096 * 4096)
        if not _call(fd, _KEEP_SIZE, end, want):
            return f"only {want // 1024} of the {nbytes // 1024} KB wanted (the disk is nearly full)"
    problem = _call(fd, _KEEP_SIZE, end, want)
    while problem == os.strerror(errno.ENOSPC) and want > LEAST_ROOM:
        want //= 2
        if not _call(fd, _KEEP_SIZE, end, want):
            return f"only {want // 1024} of the {nbytes // 1024} KB wanted ({problem})"
    return problem


def give_back_room(fd: int, nbytes: int) -> None:
    """Free the room :func:`keep_room` kept past the end of ``fd`` (what was written stays)."""
    try:
        end = os.fstat(fd).st_size
        os.ftruncate(fd, end)  # (ext4 frees the blocks past the end here)
    except OSError:
        return
    block = 4096
    start = -(-end // block) * block  # (the partly written last block is kept)
    if nbytes > 0:
        _call(fd, _PUNCH_HOLE | _KEEP_SIZE, start, nbytes + block)  # (tmpfs frees them here)


def kept_bytes(fd: int) -> int:
    """The bytes allocated past the end of ``fd`` (for tests and the runner's log)."""
    st = os.fstat(fd)
    return max(0, st.st_blocks * 512 - st.st_size)
