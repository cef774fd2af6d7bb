"""The files a run keeps in its own folders — worker logs, slots — opened without following links.

A store folder is shared ground: anyone who can write in it can plant a
symbolic link named like a worker's log or slot, and a run that opened the
name would append its output to, or map 16 bytes over, whatever the link
points at.  So where spacrq keeps a file of its own, something that is not a
plain file of its own — a symbolic link, a FIFO, a hard link to another file —
is removed (the link itself: its target is never touched), said once in a
note, and a fresh regular file is made in its place.  Every open is
``O_NOFOLLOW`` and a new file is created ``O_EXCL``, so a link slipped in
between the check and the open is refused, not followed.

``runs.jsonl`` and ``scheduler.log`` are appended through the run-file
protocol (:func:`spacrq.runfiles.append_jsonl` / ``append_text``), which
refuses a link outright; the report line in a refused runs.jsonl is not lost
silently: the run says so in its log and on stderr.
"""
from __future__ import annotations

import errno
import os
import stat as stat_mod
from pathlib import Path

from spacrq.runfiles import RunFileError

__all__ = ["open_own", "KINDS"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
#: what an open of a name someone just replaced fails with: a link (O_NOFOLLOW), a file made
#: meanwhile (O_EXCL), a FIFO with no reader (O_NONBLOCK)
_RACED = {errno.ELOOP, errno.EEXIST, errno.ENXIO, errno.EMLINK}

KINDS = {stat_mod.S_IFLNK: "symbolic link", stat_mod.S_IFIFO: "FIFO",
         stat_mod.S_IFSOCK: "socket", stat_mod.S_IFCHR: "device", stat_mod.S_IFBLK: "device"}


def _clear(path: Path, fresh: bool) -> str | None:
    """Remove what must not be written at ``path``; a note saying what, or None.

    ``fresh`` removes a plain file too (a slot left by a run that was killed).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat_mod.S_ISDIR(st.st_mode):
        raise RunFileError(f"{path} is a folder where spacrq keeps a file of its own; "
                           "move the folder away so the run can write its file there", path)
    if stat_mod.S_ISREG(st.st_mode) and st.st_nlink == 1:
        if fresh:
            os.unlink(path)
        return None
    kind = KINDS.get(stat_mod.S_IFMT(st.st_mode), "hard link to another file")
    os.unlink(path)
    return (f"{path} was a {kind}; spacrq removed it (whatever it pointed to is untouched) and "
            "wrote a new file of its own there, because it never writes through links")


def open_own(path: str | os.PathLike, *, fresh: bool = False,
             mode: int = 0o644) -> tuple[int, str | None]:
    """A descriptor for writing the regular file at ``path`` (appending unless ``fresh``).

    :returns: ``(fd, note)``: ``note`` says what had to be removed first, or is None.
    :raises RunFileError: a folder stands in the file's place, or the name keeps being
        replaced by something else (someone is racing the run for it).
    """
    target = Path(path)
    notes = []
    for _ in range(3):
        note = _clear(target, fresh)
        if note:
            notes.append(note)
        flags = os.O_CREAT | _NOFOLLOW | _CLOEXEC | _NONBLOCK
        flags |= (os.O_RDWR | os.O_EXCL) if fresh else (os.O_WRONLY | os.O_APPEND)
        try:
            fd = os.open(target, flags, mode)
        except OSError as exc:
            if exc.errno in _RACED:
                continue  # something was put there between the check and the open: look again
            raise RunFileError(f"could not write {target}: {exc.strerror or exc}; check that "
                               "its folder is writable", target) from None
        st = os.fstat(fd)
        if stat_mod.S_ISREG(st.st_mode) and st.st_nlink == 1:
            os.set_blocking(fd, True)
            return fd, (notes[0] if notes else None)
        os.close(fd)
    raise RunFileError(f"{target} keeps being replaced by something other than a plain file; "
                       "find what writes there and stop it, then rerun the task", target)
