"""The runner's state kept where it outlives the runner, for the night the disk takes nothing.

A disk that is full from the start (no room could be kept for the journal)
or a share that went away refuses the queue file, its journal and the rescue
copy alike.  The runner then holds the night's ends in its memory only, waits
to save them, and says so (:func:`spacrq.queue.engine._wait_to_save`).  Were
it killed meanwhile — the OOM killer, an operator's ``kill -9`` — ``resume``
would run again every job that ended since.  So while its state is saved
nowhere on disk the runner keeps a copy of it in every one of these places
that takes it (:func:`places`):

* in memory: ``$XDG_RUNTIME_DIR/spacrq`` and ``/dev/shm/spacrq-UID`` (RAM, so a
  full disk cannot refuse it; gone with a restart of the machine, which ends
  every job anyway, and perhaps with the user's last logout, which systemd may
  clear them at);
* on the user's own disk: ``$XDG_STATE_HOME/spacrq/unsaved`` (survives both,
  when it is not the disk that is full).

Every reader looks in all of them, whichever environment it runs in (a runner
started by cron has no ``XDG_RUNTIME_DIR``; a resume from a desktop has).

The copy holds, for every job that ran, its run fields as a journal line
would, and the *identity* of the queue file version it is ahead of: device,
inode, size, mtime and ctime as the runner last read or wrote it (the ctime
is the one no copy can keep: ``cp -p`` of a template over the file keeps its
inode and restores its mtime, never its ctime).  Every reader of the queue
applies it as it replays the journal (:func:`take_in`, called by
:func:`spacrq.queue.store.load_queue`), but only to that very file: one
replaced or rewritten since by anything but spacrq is another queue's, and
the copy is not applied to it (said); the same file under another path (its
folder renamed) is found by its identity.  A file moved to another disk
(``mv``, ``cp -a``, ``tar``) cannot be told from a copy of it made before the
night — the same bytes, of the same queue — so neither is guessed: the copy
is suggested (:func:`_moved_here`), and ``run`` and ``resume`` refuse until the
operator says which (``--kept-state COPY`` takes it in, :func:`take_from`;
``--no-kept-state`` runs without).  It only moves a job forward — a later
attempt, or the same attempt further on — never back.  A command that
opens the queue with no runner holding it writes the file in full and removes
the copy (:func:`spacrq.queue.store.open_queue`); the runner removes it as
soon as a save succeeds.

Nothing of it is trusted: each folder must be the user's own, not a link, and
closed to others; a copy that is not a regular file of the user's, too large,
not JSON, of another queue or of the wrong types is not applied (said once as
a warning) and is removed by the next command that folds.
"""
from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path
from typing import Any

from spacrq.queue.journal import transition_problem
from spacrq.queue.model import RESUMABLE_STATUSES, RUN_FIELDS, STATUS_RUNNING, Queue, now_iso
from spacrq.runfiles import RunFileError, dumps, file_stamp, loads, open_regular

#: The copy's format marker (and version).
FORMAT = "spacrq_state_in_memory"
#: The largest copy read (a 10 000-job queue's run fields are a few MB).
MAX_BYTES = 64 * 1024 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _own_private_folder(folder: Path, make: bool) -> bool:
    """Whether ``folder`` is a real folder of this user's that nobody else can enter (made so
    when ``make`` and missing)."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        if not make:
            return False
        try:
            os.mkdir(folder, 0o700)
            st = os.lstat(folder)
        except OSError:
            return False
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and not st.st_mode & 0o077)


#: The shared memory folder (a test points it elsewhere).
SHM = "/dev/shm"


def places(make: bool = False) -> list[Path]:
    """Every private folder where copies are kept, in memory first (``SPACRQ_MEMORY_DIR``
    names the only one, for tests); made when ``make``."""
    if not hasattr(os, "getuid"):
        return []
    chosen = os.environ.get("SPACRQ_MEMORY_DIR")
    if chosen:
        return [Path(chosen)] if _own_private_folder(Path(chosen), make) else []
    found = []
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and _own_private_folder(Path(runtime), False):
        found.append(Path(runtime) / "spacrq")
    if os.path.isdir(SHM):
        found.append(Path(SHM) / f"spacrq-{os.getuid()}")
    state = _state_folder()
    if state is None:  # (no HOME, no XDG_STATE_HOME: cron's bare environment)
        return [place for place in found if _own_private_folder(place, make)]
    if make:
        try:
            state.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            pass
    found.append(state / "unsaved")
    return [place for place in found if _own_private_folder(place, make)]


def _state_folder() -> Path | None:
    """spacrq's folder of the user's own state (as :func:`spacrq.autostart.state_dir` names
    it, which this layer may not import), or None where neither XDG_STATE_HOME nor HOME
    says where it is."""
    given, home = os.environ.get("XDG_STATE_HOME", ""), os.environ.get("HOME", "")
    if given and os.path.isabs(given):
        return Path(given) / "spacrq"
    return Path(home) / ".local" / "state" / "spacrq" if home and os.path.isabs(home) else None


def folder(make: bool = False) -> Path | None:
    """The first place copies are kept (see :func:`places`), or None."""
    found = places(make)
    return found[0] if found else None


def _prefix(path: str | os.PathLike) -> str:
    """The start of the names of the copies of the queue file at ``path`` (its real path's
    hash); the rest names the file's device and inode, so that the same file under another
    path — its folder moved — is found by name, nothing read."""
    real = os.path.realpath(path)
    return f"queue-{hashlib.sha256(real.encode('utf-8', 'surrogateescape')).hexdigest()[:32]}-"


def _created(queue: Queue) -> str:
    """The queue's ``created`` as its file says it ('' where a hand-written file does not)."""
    return queue.created if queue.created_in_file else ""


def _carried(created: str, file_id: list[int]) -> str:
    """What a move of the file to another disk keeps of it (``mv``, ``cp -a``, ``tar``
    across filesystems: a new device, inode and ctime, an mtime perhaps to the second
    only; the same queue and bytes), hashed, to find its candidates by name."""
    key = f"{created}|{file_id[2]}".encode("utf-8", "surrogateescape")
    return hashlib.sha256(key).hexdigest()[:16]


def _name(path: str | os.PathLike, file_id: list[int], created: str) -> str:
    return f"{_prefix(path)}{file_id[0]}-{file_id[1]}-{_carried(created, file_id)}.json"


def _content(path: str | os.PathLike) -> str:
    """The sha256 of the file's bytes ('' when it cannot be read)."""
    digest = hashlib.sha256()
    try:
        fd = open_regular(path)
    except OSError:
        return ""
    try:
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return digest.hexdigest()


def _listed(place: Path) -> list[str]:
    try:
        return [n for n in os.listdir(place) if n.startswith("queue-") and n.endswith(".json")]
    except OSError:
        return []


def copy_path(path: str | os.PathLike, created: str, make: bool = False) -> Path | None:
    """Where the first place keeps the copy of the queue (``created``) whose file is at
    ``path``, as the file is now."""
    place, file_id = folder(make), identity(path)
    return place / _name(path, file_id, created) if place is not None and file_id else None


def identity(path: str | os.PathLike, seen: tuple | None = None) -> list[int] | None:
    """The file's identity (device, inode, size, mtime, ctime); with ``seen`` (a
    :func:`~spacrq.runfiles.file_stamp`), None unless the file still is that version."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if seen is not None and tuple(seen) != (st.st_ino, st.st_size, st.st_mtime_ns):
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def keep(queue: Queue, path: str | os.PathLike, seen: tuple | None) -> str:
    """Write (replace) the copy of ``queue``'s state, ahead of the file version ``seen``, in
    every place that takes it; the first path written, or '' when none could be (no private
    folder, the file changed since the runner last saw it)."""
    file_id = identity(path, seen) if seen is not None else None
    if file_id is None:
        return ""
    jobs = [{"job": job.id, "seq": 1, "set": {name: getattr(job, name) for name in RUN_FIELDS}}
            for job in queue.jobs if job.id and job.status not in RESUMABLE_STATUSES]
    kept, name = "", _name(path, file_id, _created(queue))
    if _hashed[0] != file_id:  # (kept at every failed save: the file is read once a version)
        _hashed[:] = [file_id, _content(path)]
    data = dumps({FORMAT: 2, "file": os.path.realpath(path), "queue": _created(queue),
                  "identity": file_id, "content": _hashed[1], "written_at": now_iso(),
                  "jobs": jobs}).encode()
    for place in places(make=True):
        if _write(place / name, data) and not kept:
            kept = str(place / name)
        _prune(place, superseded=_prefix(path), current=name)
    return kept


#: The file version whose bytes were last hashed for a copy, and their hash.
_hashed: list = [None, ""]

#: A copy left this long (a queue deleted while its state was kept) is removed.
STALE_SECONDS = 30 * 24 * 3600.0


def _prune(place: Path, superseded: str | None = None, current: str = "") -> None:
    """Remove any copy a month old (its queue is long gone) and, with ``superseded`` (a
    queue's name prefix), that queue's copies of older file versions than ``current``."""
    for name in _listed(place):
        if name == current:
            continue
        try:
            if (superseded is not None and name.startswith(superseded)) \
                    or time.time() - os.lstat(place / name).st_mtime > STALE_SECONDS:
                os.unlink(place / name)
        except OSError:
            pass


def _write(target: Path, data: bytes) -> bool:
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(temp, target)
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass
        return False
    return True


def drop(path: str | os.PathLike, also: str = "") -> None:
    """Remove the copies of the queue at ``path`` (its state is on disk now), and ``also``
    (a copy of it found under another path's name: its folder was moved)."""
    prefix, found = _prefix(path), places()
    twin = os.path.basename(also) if also and Path(also).parent in found else None
    for place in found:
        for name in _listed(place):
            if name.startswith(prefix) or name == twin:  # (the copy found, in every place)
                try:
                    os.unlink(place / name)
                except OSError:
                    pass
        _prune(place)


def stamp(path: str | os.PathLike) -> tuple | None:
    """What changes when a copy of the queue at ``path`` is written or removed, None when
    there is none: a watcher reads the queue again when it changes."""
    prefix = _prefix(path)
    stamps = tuple((name, file_stamp(place / name)) for place in places()
                   for name in _listed(place) if name.startswith(prefix))
    return stamps or None


def exists(path: str | os.PathLike) -> bool:
    prefix = _prefix(path)
    return any(name.startswith(prefix) for place in places() for name in _listed(place))


def _read(target: Path) -> Any:
    try:
        fd = open_regular(target)
    except OSError as exc:
        if exc.errno:
            raise
        raise RunFileError(f"{target} is not a regular file of this user's") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise RunFileError(f"{target} is not a regular file of this user's")
        if st.st_size > MAX_BYTES:
            raise RunFileError(f"{target} is larger than a copy of a queue's state can be")
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return loads(b"".join(chunks), where=target)


def _ahead(record: dict, attempts: int, status: str, started: str) -> bool:
    """Whether a copy's run fields are further on than the job's as the file has them."""
    theirs = record.get("attempts", 0)
    if theirs != attempts:
        return theirs > attempts
    rank = {STATUS_RUNNING: 1}
    mine = 0 if status in RESUMABLE_STATUSES else rank.get(status, 2)
    new = record.get("status", status)
    new_rank = 0 if new in RESUMABLE_STATUSES else rank.get(new, 2)
    return new_rank > mine and (mine == 0 or record.get("started", started) == started)


def _copies(path: str | os.PathLike, listed: list[Path], file_id: list[int] | None,
            created: str) -> tuple[list[Path], list[Path]]:
    """``(the copies named after this path, those named after another path that may be of
    this file — its folder moved since, on its disk or to another)`` of ``listed``."""
    mine, moved = [], []
    prefix = _prefix(path)
    same = f"-{file_id[0]}-{file_id[1]}-" if file_id else None
    carried = f"-{_carried(created, file_id)}.json" if file_id else None
    for copy in listed:
        if copy.name.startswith(prefix):
            mine.append(copy)
        elif same is not None and (same in copy.name or copy.name.endswith(carried)):
            moved.append(copy)
    return mine, moved


def take_in(queue: Queue, path: str | os.PathLike) -> int:
    """Apply a copy of ``path``'s queue state kept by a runner (when there is one, and it is
    ahead of this very file) to ``queue``, read from that file; the jobs moved on.  What
    keeps a copy of this path from being applied is a warning of ``queue``'s;
    ``queue.memory_copy`` is set to the copy found (applied or not) for the folding command
    to remove."""
    listed = [place / name for place in places() for name in _listed(place)]
    if not listed:  # (every read of every queue asks: nothing more than the listing then)
        return 0
    here = identity(path)
    mine, others = _copies(path, listed, here, _created(queue))
    if not mine and not others:
        return 0
    best: tuple[str, dict, Path] | None = None
    said = ""
    for target in mine + others:
        try:
            doc = _read(target)
        except (OSError, RunFileError) as exc:
            if target in mine:
                said = said or (f"a copy of a runner's state ({target}) could not be read "
                                f"({getattr(exc, 'strerror', None) or exc}); it was not "
                                "applied")
            continue
        problem = _problem(doc, path, queue, here)
        if problem:
            if target in mine:
                said = said or (f"a copy of a runner's state ({target}) was not applied: "
                                f"{problem}")
            elif here is not None and _moved_here(doc, path, here):
                queue.kept_elsewhere.append(str(target))
                queue.warnings.append(
                    f"a runner's state that the disk could not take was kept for "
                    f"{doc.get('file')}, which is gone now, and this file holds the very "
                    f"bytes that runner last saw: if this file is that queue moved here, "
                    f"'spacrq queue resume {path} --kept-state {target}' takes it in, so that "
                    "nothing that ran runs again; if it is a copy made before the night, "
                    "'--no-kept-state' runs it without (resume and run refuse until told which)")
            continue
        if best is None or str(doc.get("written_at")) > best[0]:
            best = (str(doc.get("written_at")), doc, target)
    if mine:
        queue.memory_copy = str(mine[0])
    if best is None:
        if said:
            queue.warnings.append(said)
        return 0
    doc, target = best[1], best[2]
    queue.memory_copy = str(target)
    moved = _apply(queue, doc)
    if moved:
        queue.warnings.append(f"{moved} job(s) were read from a runner's copy of its state "
                              f"({target}): the disk could not take it then")
    return moved


def _apply(queue: Queue, doc: dict) -> int:
    """Move each job of ``queue`` forward to the copy ``doc``'s run fields; how many moved."""
    index = {job.id: job for job in queue.jobs}
    moved = 0
    for record in doc["jobs"]:
        job = index.get(record["job"])
        fields = record["set"]
        if job is None or not _ahead(fields, job.attempts, job.status, job.started):
            continue
        for name, value in fields.items():
            setattr(job, name, dict(value) if isinstance(value, dict) else
                    list(value) if isinstance(value, list) else value)
        moved += 1
    return moved


def _problem(doc: Any, path: str | os.PathLike, queue: Queue, here: list[int] | None,
             identity_checked: bool = True) -> str:
    """Why the copy ``doc`` does not apply to the file at ``path`` (identity ``here``), or ''.

    It applies to the very file it was kept for — at its path, or renamed on its disk (the
    same identity).  A file moved to another disk cannot be told from a copy of it made
    before the night (the same bytes, of the same queue; what tells them apart, a ctime, any
    chmod changes): such a file is only suggested (:func:`_moved_here`), and the operator
    says which it is (:func:`take_from`, with ``identity_checked`` False)."""
    if not isinstance(doc, dict) or doc.get(FORMAT) != 2 or not isinstance(doc.get("jobs"), list):
        return "it is not such a copy"
    if doc.get("queue") and queue.created_in_file and doc.get("queue") != queue.created:
        return "it is of another queue (the file was replaced by another queue since)"
    if identity_checked and (here is None or doc.get("identity") != here):
        return ("the file was written since by something other than spacrq (a copy over it, "
                "an edit), so the copy may not belong to it")
    bad = next((transition_problem(r) for r in doc["jobs"] if transition_problem(r)), "")
    if bad:
        return f"a job of it is wrong ({bad})"
    return ""


def _moved_here(doc: dict, path: str | os.PathLike, here: list[int]) -> bool:
    """Whether the file at ``path`` may be the one the copy ``doc`` was kept for, moved to
    another disk since (``mv``, ``cp -a``, ``tar``, a link perhaps left in its place): the
    path it was kept for no longer names a file of its own, and this file holds the very
    bytes the runner last saw, of the same queue.  So may a copy of it made before the
    night: only the operator can tell, so it is suggested, never applied unasked."""
    kept, old = doc.get("identity"), doc.get("file")
    if not (isinstance(kept, list) and len(kept) == 5 and kept[2] == here[2]
            and isinstance(old, str) and old):
        return False
    if os.path.lexists(old) and os.path.realpath(old) == old:
        return False  # (the file it was kept for is still there: this one is a copy of it)
    return bool(doc.get("content")) and doc.get("content") == _content(path)


def take_from(queue: Queue, path: str | os.PathLike, copy: str | os.PathLike) -> int:
    """Apply the copy ``copy`` — the operator's word that the file at ``path`` is the queue
    it was kept for, moved — to ``queue`` (read from that file), forward only; the jobs
    moved on.  :raises RunFileError: one sentence when it is not a copy spacrq keeps, of
    this queue."""
    target = Path(copy)
    if target.parent not in places() or not target.name.startswith("queue-"):
        raise RunFileError(f"{copy} is not a copy of a runner's state that spacrq keeps; give "
                           "the path the warning of 'spacrq queue status' names", target)
    doc = _read(target)
    problem = _problem(doc, path, queue, identity(path), identity_checked=False)
    if problem:
        raise RunFileError(f"{copy} cannot be taken in: {problem}", target)
    queue.memory_copy = str(target)
    return _apply(queue, doc)
