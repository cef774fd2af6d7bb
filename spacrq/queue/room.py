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

#: Room per job of the queue, and its bounds, for each record: a job's transitions take
#: about 550 bytes of journal and its attempt about 330 bytes of exit record (a night of
#: 40 no-op jobs), so the room holds four and three times that — retries, notes, long ids.
JOURNAL_ROOM = (2048, 256 * 1024, 16 * 1024 * 1024)
EXIT_RECORD_ROOM = (1024, 64 * 1024, 8 * 1024 * 1024)

_KEEP_SIZE = 0x01   # FALLOC_FL_KEEP_SIZE
_PUNCH_HOLE = 0x02  # FALLOC_FL_PUNCH_HOLE
_fallocate = None   # libc's fallocate, once looked up (False: there is none)


def room_for(jobs: int, kind: tuple[int, int, int] = JOURNAL_ROOM) -> int:
    """The bytes of room a record of a queue of ``jobs`` jobs keeps (none with
    ``SPACRQ_QUEUE_ROOM=0``: a disk where room cannot be kept, for the tests)."""
    if os.environ.get("SPACRQ_QUEUE_ROOM", "").strip() == "0":
        return 0
    per_job, least, most = kind
    return max(least, min(most, per_job * max(0, int(jobs))))


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
    """Allocate ``nbytes`` past the end of the open file ``fd`` (its size unchanged);
    '' when done, else why not (never raises)."""
    try:
        end = os.fstat(fd).st_size
    except OSError as exc:
        return exc.strerror or str(exc)
    return _call(fd, _KEEP_SIZE, end, nbytes) if nbytes > 0 else ""


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
