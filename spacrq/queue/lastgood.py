"""The last durable queue file a runner wrote, kept beside its journal until the run ends.

A small queue's file is replaced at every transition without an fsync of
its own (its journal line is the durable record, see
:mod:`spacrq.queue.store`).  ext4 and btrfs write a renamed file's data
before the rename, so after a power cut the file is the old one or the new
one; XFS, F2FS, ext4 mounted ``noauto_da_alloc`` and network file systems
do not promise that, and may leave the renamed name empty or full of zero
bytes.  The journal has every transition since the last checkpoint, but
not the jobs themselves — so each checkpoint (the file written durably)
is also hard-linked as ``<logs>/last-checkpoint.json``: no second write,
the same bytes under a second name that later replaces of the file do not
touch.  When the queue file cannot be parsed and this runner's journal is
there, :func:`spacrq.queue.store.load_queue` reads the checkpoint and
replays the journal onto it, which is the state the journal made durable.

The journal holds transitions, not jobs: so the runner's write that takes
in a change another writer made to the file (a job added or edited) is a
checkpoint too, and a change confirmed to its writer is in the checkpoint
before the next replace could be lost.

A checkpoint is trusted only when nothing between it and the journal can
be missing: it is a regular file (never read or written through a link,
its folder's included), not the damaged file itself, of the queue the
journal's first line names, and the journal's first transition — read
from a start that is whole — follows on from the checkpoint's
``journal_seq``.  It is removed when the run ends cleanly, and by any other
writer's durable write of the file while no runner holds it (a crash's
checkpoint would undo that write), so a stale one never stands in for a
file that was damaged later by something else.  One that cannot be kept
(a folder in its place, no hard links) is said in the run's summary.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from spacrq.queue.layout import JOURNAL_FILE, logs_dir
from spacrq.runfiles import RunFileError, loads

CHECKPOINT_FILE = "last-checkpoint.json"
_TEMP = f".{CHECKPOINT_FILE}.tmp"
_SAFE = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
#: How much of a journal's start is read to find its first transition.
_HEAD_BYTES = 1 << 16


def checkpoint_path(path: str | os.PathLike) -> Path:
    return logs_dir(path) / CHECKPOINT_FILE


def _open_logs(path: str | os.PathLike) -> int:
    """The logs folder, opened as itself: never a link in its place (every name below is
    made relative to this descriptor, so a folder swapped for a link afterwards is never
    written through).  :raises OSError: it is a link, or cannot be opened."""
    return os.open(logs_dir(path), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                   | getattr(os, "O_NOFOLLOW", 0))


def keep_checkpoint(path: str | os.PathLike, durable: bool = True) -> str:
    """Link the queue file just written durably as its last checkpoint: ``''``, or why it
    could not be kept.

    Never fatal and never through a link: a logs folder that is a link, or a file
    system without hard links, leaves no checkpoint (an older one is removed, so it is
    never taken for this one)."""
    try:
        logs = _open_logs(path)
    except OSError as exc:
        return f"its folder {logs_dir(path)} cannot be opened as a folder ({_why(exc)})"
    try:
        try:
            os.unlink(_TEMP, dir_fd=logs)
        except FileNotFoundError:
            pass
        os.link(path, _TEMP, dst_dir_fd=logs, follow_symlinks=False)
        os.replace(_TEMP, CHECKPOINT_FILE, src_dir_fd=logs, dst_dir_fd=logs)
        if durable:  # made durable before the journal is emptied, whatever the file system
            os.fsync(logs)
        return ""
    except OSError as exc:
        _drop(logs)
        return f"{logs_dir(path) / CHECKPOINT_FILE}: {_why(exc)}"
    finally:
        os.close(logs)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def drop_checkpoint(path: str | os.PathLike) -> None:
    """Remove the last checkpoint (the run ended, or the file was written again)."""
    try:
        logs = _open_logs(path)
    except OSError:
        return
    try:
        _drop(logs)
    finally:
        os.close(logs)


def _drop(logs: int) -> None:
    for name in (CHECKPOINT_FILE, _TEMP):
        try:
            if not stat.S_ISDIR(os.stat(name, dir_fd=logs, follow_symlinks=False).st_mode):
                os.unlink(name, dir_fd=logs)
        except OSError:
            pass


def _open_regular(path: str | os.PathLike, name: str) -> tuple[int, os.stat_result] | None:
    """``name`` in ``path``'s logs folder, opened for reading with its stat, when it is a
    regular file reached through no link (its folder's included); else None."""
    try:
        logs = _open_logs(path)
    except OSError:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | _SAFE, dir_fd=logs)
    except OSError:
        return None
    finally:
        os.close(logs)
    try:
        st = os.fstat(fd)
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def read_checkpoint(path: str | os.PathLike, limit: int) -> tuple[bytes, int] | None:
    """The bytes of ``path``'s last checkpoint and its inode, or None when there is none
    usable (absent, a link or behind one, not a regular file, larger than ``limit``)."""
    opened = _open_regular(path, CHECKPOINT_FILE)
    if opened is None:
        return None
    fd, st = opened
    try:
        if st.st_size > limit:
            return None
        with open(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1), st.st_ino
    except OSError:
        return None
    finally:
        os.close(fd)


#: What :func:`journal_start` says of a journal whose start is damaged.
DAMAGED = "damaged"


def journal_start(path: str | os.PathLike) -> tuple[str | None, int] | str | None:
    """``(the queue its header names, or None; the seq of its first transition, 0 when it
    holds none)`` of ``path``'s journal; None when it is absent or behind a link,
    :data:`DAMAGED` when its start is damaged — then whether it follows on from a
    checkpoint cannot be told, and no checkpoint is trusted (a runner's journal is always
    there, its lines whole but the last)."""
    opened = _open_regular(path, JOURNAL_FILE)
    if opened is None:
        return None
    fd, st = opened
    try:
        data, size = os.read(fd, _HEAD_BYTES), st.st_size
    except OSError:
        return None
    finally:
        os.close(fd)
    owner: str | None = None
    if not data.strip(b"\0"):
        return (None, 0) if len(data) == size else DAMAGED
    for number, raw in enumerate(data.split(b"\n")[:-1]):  # (whole lines only)
        if not raw.strip(b"\0"):
            break  # zeros: lines a power cut lost (fsync'd lines are always the first)
        try:
            record = loads(raw)
        except RunFileError:
            return DAMAGED  # (a damaged line before the first transition: its seq is unknown)
        if not isinstance(record, dict):
            return DAMAGED
        if number == 0 and "queue" in record and "job" not in record:
            owner = record["queue"] if isinstance(record["queue"], str) else None
            continue
        seq = record.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool) and "job" in record:
            return owner, seq
        return DAMAGED
    else:
        if len(data) < size:
            return DAMAGED  # (no transition in its first 64 KiB: not a runner's journal)
    return owner, 0
