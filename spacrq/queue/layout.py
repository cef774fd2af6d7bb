"""Where a queue file's own state lives: one logs folder per file, whatever its name.

``night.queue.json`` → ``night_logs/`` (spaCR's name for it);
``night.backup.queue.json`` → ``night.backup_logs/``; any other name ``X``
→ ``X.logs/``.  The journal, both locks, ``runner.json``, ``control.json``,
the job logs and their exit records live there, so two queue files in one
folder never share state.  Before this layout every file used ``<stem up to
the first dot>_logs/``; that folder is still read for the file its
``runner.json`` names (:func:`legacy_logs_dir`), and never for another.
"""
from __future__ import annotations

import os
from pathlib import Path

from spacrq.queue.locks import EditLock
from spacrq.runfiles import RunFileError, read_json

JOURNAL_FILE = "journal.jsonl"
#: the runner's record of itself (see :mod:`spacrq.queue.runner`)
RUNNER_FILE = "runner.json"
QUEUE_SUFFIX = ".queue.json"


def logs_dir(path: str | os.PathLike) -> Path:
    """The queue file's own folder: ``night.queue.json`` → ``night_logs``.

    Derived from the whole file name, so ``night.queue.json`` and
    ``night.backup.queue.json`` never share one.  A name that does not end
    in ``.queue.json`` gets ``<name>.logs`` (``.logs`` can never come out of
    the ``_logs`` rule, so the two families never meet).
    """
    target = Path(path)
    name = target.name
    if name.endswith(QUEUE_SUFFIX) and len(name) > len(QUEUE_SUFFIX):
        return target.parent / f"{name[:-len(QUEUE_SUFFIX)]}_logs"
    return target.parent / f"{name or 'queue'}.logs"


def legacy_logs_dir(path: str | os.PathLike) -> Path | None:
    """The shared folder of the layout before :func:`logs_dir`, when it is this file's.

    It is this file's only when its ``runner.json`` names this file: the
    old layout gave ``night.queue.json`` and ``night.backup.queue.json`` the
    same folder, and the other file's journal must never be applied here.
    """
    target = Path(path)
    old = target.parent / f"{target.name.split('.')[0] or 'queue'}_logs"
    if old == logs_dir(target) or not old.is_dir():
        return None
    return old if runner_names(old, target) is True else None


def runner_names(folder: Path, path: str | os.PathLike) -> bool | None:
    """Whether ``folder``'s ``runner.json`` names ``path`` (None: it names no file)."""
    try:
        record = read_json(folder / "runner.json", None, expect=dict, max_bytes=1 << 20)
    except RunFileError:
        return None
    named = record.get("queue") if isinstance(record, dict) else None
    if not isinstance(named, str):
        return None
    try:
        return os.path.realpath(named) == os.path.realpath(path)
    except (OSError, ValueError):
        return None


def refuse_other_names(path: str | os.PathLike) -> None:
    """Before a runner starts: a queue file with another name (a hard link to the same file)
    is refused.  Each name has its own logs folder and locks, so a runner started under
    each would run every job twice; the checkpoint a runner keeps of the file (a link in
    its logs folder, see :mod:`spacrq.queue.lastgood`) is not another name.

    :raises QueueError: one sentence with the fix."""
    from spacrq.queue.model import QueueError
    try:
        st = os.stat(path)
    except OSError:
        return  # (the load says what is wrong with it)
    others = st.st_nlink - 1
    for kept in ("last-checkpoint.json", ".last-checkpoint.json.tmp"):
        try:
            mine = os.lstat(logs_dir(path) / kept)
        except OSError:
            continue
        if (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino):
            others -= 1
    if others > 0:
        raise QueueError(f"{path} has {others} other name(s) (a hard link to the same file), "
                         "and spacrq keeps a queue's state by its file's name, so a runner "
                         "under each name would run every job twice: remove the other "
                         f"name(s) (find / -samefile {path}), or copy the file (cp) to make "
                         "a second queue")


def journal_path(path: str | os.PathLike) -> Path:
    return logs_dir(path) / JOURNAL_FILE


def edit_lock(path: str | os.PathLike) -> EditLock:
    """The lock every writer of ``path`` holds from load to save."""
    return EditLock(logs_dir(path))
