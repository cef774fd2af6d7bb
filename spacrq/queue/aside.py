"""Unsaved pane edits when a runner starts on the file from elsewhere: kept, never dropped.

The operator lines up jobs in the Queue pane; meanwhile somebody types
``spacrq queue run --detach Q`` (or another window presses Run).  From then
on the file is the runner's, and the pane's unsaved copy cannot simply be
saved over it.  Dropping it would lose work the operator believes is there
(a job just added), so :func:`keep_unsaved` keeps every unsaved change, in
the one way each can be kept:

* a job the pane added is added to the running queue itself, through the
  same locked, checked path Add job uses while a runner owns the file
  (:func:`spacrq.queue.edits.add_job`): the runner takes it in and runs it
  after the jobs already queued (a job already on disk exactly as the pane
  has it is not added twice);
* everything else — a waiting job changed or removed, the order or a queue
  setting changed, or an added job the check refused — cannot be applied to
  a queue being run, so the pane's whole queue is written as a copy next to
  the file, ``NAME.unsaved-YYYYmmdd-HHMMSS.queue.json``; the operator opens
  it to get those edits back (and copies them over once the run ends).

The answer is one sentence saying exactly which jobs were added and where
the copy is.  Runs on the watch's poller thread, never the GUI thread.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from spacrq.queue import edits
from spacrq.queue.merge import SETTINGS, _definition, _names
from spacrq.queue.model import Job, Queue, QueueError
from spacrq.queue.store import load_queue
from spacrq.runfiles import RunFileError, write_json

__all__ = ["Kept", "keep_unsaved", "unsaved_copy_path", "other_changes"]


@dataclass(frozen=True)
class Kept:
    """What happened to the pane's unsaved edits: ``added`` to the running queue,
    ``copy`` the file holding the rest (None: nothing else to keep), ``failed``
    the added jobs the runner's queue refused (each also in the copy)."""

    added: tuple[str, ...] = ()
    copy: Path | None = None
    failed: tuple[str, ...] = ()
    other: tuple[str, ...] = ()
    problem: str = ""

    def sentence(self, file_name: str) -> str:
        said = [f"A runner started on {file_name} while it had unsaved edits"]
        if self.added:
            said.append(f"your new {_names(self.added)} {'was' if len(self.added) == 1 else 'were'}"
                        " added to the running queue, which runs "
                        f"{'it' if len(self.added) == 1 else 'them'} after the jobs already "
                        "queued")
        if self.copy is not None:
            what = ", ".join(self.other + ((f"{_names(self.failed)} (not added: "
                                            f"{self.problem})",) if self.failed else ()))
            said.append(f"the rest ({what}) cannot change a running queue, so your whole "
                        f"unsaved queue was kept as {self.copy.name} next to it: open it to get "
                        "those edits back")
        elif self.problem:
            said.append(f"your edits could not be kept: {self.problem}")
        elif not self.added:
            said.append("nothing in them differed from the file, so there was nothing to keep")
        return "; ".join(said) + "."


def unsaved_copy_path(path: Path, now: datetime | None = None) -> Path:
    """``NAME.unsaved-YYYYmmdd-HHMMSS.queue.json`` next to ``path``, not yet taken."""
    stem = path.name[:-len(".queue.json")] if path.name.endswith(".queue.json") else path.stem
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    copy, n = path.with_name(f"{stem}.unsaved-{stamp}.queue.json"), 1
    while copy.exists() or copy.is_symlink():
        n += 1
        copy = path.with_name(f"{stem}.unsaved-{stamp}-{n}.queue.json")
    return copy


def other_changes(base: Queue | None, ours: Queue) -> tuple[tuple[Job, ...], tuple[str, ...]]:
    """The jobs the pane added since ``base``, and every other change (as short phrases)."""
    if base is None:
        return tuple(ours.jobs), ()
    was = {job.id: job for job in base.jobs}
    mine = {job.id for job in ours.jobs}
    added = tuple(job for job in ours.jobs if job.id not in was)
    changed = [job.id for job in ours.jobs
               if job.id in was and _definition(job) != _definition(was[job.id])]
    removed = [job.id for job in base.jobs if job.id not in mine]
    other = []
    if changed:
        other.append(f"changed {_names(changed)}")
    if removed:
        other.append(f"removed {_names(removed)}")
    common = [job.id for job in ours.jobs if job.id in was]
    if common != [job.id for job in base.jobs if job.id in mine]:
        other.append("the new run order")
    settings = [name for name in SETTINGS if getattr(base, name) != getattr(ours, name)]
    if settings:
        other.append(f"the setting{'s' if len(settings) > 1 else ''} {', '.join(settings)}")
    return added, tuple(other)


def keep_unsaved(path: Path, ours: Queue, base: Queue | None,
                 now: datetime | None = None) -> Kept:
    """Keep the pane's unsaved ``ours`` (read from ``path`` as ``base``) while a runner
    owns ``path``: new jobs added to the file, the rest written as a copy beside it."""
    new_jobs, other = other_changes(base, ours)
    try:
        on_disk = {job.id: job for job in load_queue(path).jobs}
    except (QueueError, RunFileError, OSError):
        on_disk = {}
    added, failed, problem = [], [], ""
    renamed: dict[str, str] = {}  # the pane's id -> the id the file gave it
    for job in new_jobs:
        there = on_disk.get(job.id)
        if there is not None and _definition(there) == _definition(job):
            continue  # already in the file as the pane has it
        data = _definition(job)
        data["depends_on"] = [renamed.get(d, d) for d in job.depends_on]
        if there is not None:
            data["id"] = ""  # the file has another job of that id: it gets an unused one
        try:
            done, _held = edits.add_job(path, Job.from_dict(data))
        except (edits.EditError, QueueError) as exc:
            failed.append(job.id)
            problem = problem or str(exc).removeprefix("Not added: ").rstrip(".")
            continue
        if done.id != job.id:
            renamed[job.id] = done.id
        added.append(done.id)
    if not other and not failed:
        return Kept(tuple(added))
    copy = unsaved_copy_path(path, now)
    document = ours.to_dict()
    document["journal_seq"] = 0  # a copy of its own: no journal covers it
    try:
        write_json(copy, document)
    except (OSError, RunFileError) as exc:
        return Kept(tuple(added), None, tuple(failed), other,
                    f"writing {copy.name} failed ({getattr(exc, 'strerror', None) or exc}); "
                    "they stay in the pane, unsaved: Save once the run ends")
    return Kept(tuple(added), copy, tuple(failed), other, problem)
