"""Whole writes to a descriptor, for every process of spacrq's (the lean ones included).

Imports only ``os`` and ``errno``: the job supervisor and the runner's keeper,
which start with the runner and import as little as they can, use it too.
"""
from __future__ import annotations

import errno
import os


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` or raise: a short write on a full disk is not a write.

    ``os.write`` may take only part of the bytes (a nearly full disk, a
    signal); ignoring what it returns would lose the rest of the line silently
    — and the line after it, glued to the torn one.  A write that takes
    nothing raises ``ENOSPC`` like the disk would.
    """
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]
