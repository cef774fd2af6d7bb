"""Changing a job that has not run yet, in its queue file, checked like a new job.

An operator who spots a wrong input at 18:00 wants to fix job 7, not remove
it and add a copy at the end (which would change the order and drop every
``after`` that named it).  :func:`edit_job` changes the fields an operator
writes — ``settings``, ``overrides``, ``after``, ``timeout``, ``label`` — of
one job, under the queue's edit lock, and saves the file atomically: two
writers at once both land, and a crash mid-save leaves the old file whole.

Which jobs may change: only those a run will still start, ``pending`` and
``not_run`` (a queue that was stopped or aborted before reaching them).
A running job already read its settings; a finished one (success, failed,
skipped) is the record of what produced its results, and rewriting that
record would make the morning report lie — to run it again differently,
duplicate it.

The edited job is validated exactly as the Add button validates a new one
(:func:`spacrq.queue.validate.validate_job`): errors refuse the edit and
nothing is written; warnings are passed back.  ``after`` may only name jobs
earlier in the queue, which also rules out a cycle.

A queue whose runner is running can be edited too, as it can be added to:
the runner takes the new values in before it starts the job
(:func:`take_edits`, called by :mod:`spacrq.queue.persist`), and it marks the
job running in its journal under the same lock, so an edit either reaches
the job before it starts or is refused because it already started — never
written and then silently ignored.  While the runner's state is nowhere on
disk (a full disk refused its file and its journal), the file may show as
waiting a job that already ran, so every edit is refused until the runner
saved again (:func:`spacrq.queue.locks.runner_unsaved`); an edit that reached
such a job all the same (a folder where no lock can be held) is said in the
runner's log and the morning summary (:func:`unapplied_edits`), never dropped
unsaid.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from spacrq.queue.model import (RESUMABLE_STATUSES, STATUS_RUNNING, Job, Queue, QueueError)
from spacrq.queue.settings import SettingsError, split_override
from spacrq.queue.locks import runner_holds, runner_unsaved
from spacrq.queue.store import (edit_lock, edit_queue, load_queue, logs_dir, refuse_unreadable,
                                save_queue)
from spacrq.queue.validate import Modules, add_checked, validate_job
from spacrq.watching import Code

__all__ = ["EDIT_KEYS", "EDITABLE_STATUSES", "EditError", "EditRefused", "EditInvalid",
           "EditMissing", "EditBusy", "EditFailed", "add_job", "edit_job", "edit_refusal",
           "take_edits", "unapplied_edits"]

#: the keys of ``changes`` (``after`` is the job's ``depends_on``)
EDIT_KEYS: tuple[str, ...] = ("settings", "overrides", "after", "timeout", "label")
#: the job fields those keys change, as the file names them
EDIT_FIELDS: tuple[str, ...] = ("settings", "overrides", "depends_on", "timeout", "label")
#: jobs a run will still start: the only ones whose settings may change
EDITABLE_STATUSES: tuple[str, ...] = RESUMABLE_STATUSES


class EditError(Exception):
    """An edit that was not made; the message is one sentence with the fix."""

    code: Code = Code.FAILED


class EditRefused(EditError):
    """The job cannot change now (it is running or finished)."""

    code = Code.REFUSED


class EditInvalid(EditError):
    """A value is wrong; the message says which and how to write it."""

    code = Code.INVALID


class EditMissing(EditError):
    """The queue file or the job is not there (any more)."""

    code = Code.MISSING


class EditBusy(EditError):
    """Another writer held the queue for longer than an edit waits."""

    code = Code.CONFLICT


class EditFailed(EditError):
    """The file could not be read, locked or written; nothing was changed."""

    code = Code.FAILED


def edit_refusal(job: Job) -> str:
    """Why ``job`` cannot be edited in place, or ``''`` when it can (the pane's tip)."""
    if job.status in EDITABLE_STATUSES:
        return ""
    if job.status == STATUS_RUNNING:
        return (f"job {job.id} is running and already read its settings; wait for it to end, "
                "then duplicate it to run it again differently")
    ended = _ENDED.get(job.status, f"is {job.status.replace('_', ' ')}")
    return (f"job {job.id} {ended}: its settings are the record of what ran; duplicate it to "
            "run it again differently")


_ENDED = {"success": "succeeded", "failed": "failed", "skipped": "was skipped"}


# -- reading the changes --------------------------------------------------------------

def _settings(value: Any) -> str | dict:
    if value is None:
        return ""
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise EditInvalid("every setting name must be text; write settings like "
                              '{"diameter": 30}')
        return dict(value)
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value).strip()
    raise EditInvalid(f"settings must be a settings file path or an object of settings, not "
                      f"a {type(value).__name__}")


def _overrides(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        items = [f"{k}={v}" for k, v in value.items()]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value if v.strip()]
    else:
        raise EditInvalid('overrides must be key=value texts, written like ["diameter=30"]')
    for item in items:
        try:
            split_override(item)
        except SettingsError as exc:
            raise EditInvalid(str(exc)) from None
    return items


def _after(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, str) and v.strip() for v in value):
        raise EditInvalid('"after" must be a list of job ids, written like ["mask-1"]')
    out: list[str] = []
    for item in value:
        if item.strip() not in out:
            out.append(item.strip())
    return out


def _timeout(value: Any) -> float | None:
    if value in (None, ""):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EditInvalid(f"the timeout must be a number of seconds or none, not {value!r:.40}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise EditInvalid(f"the timeout {value:g} is not a positive number of seconds; give "
                          "one, or none for no limit")
    return value


def _label(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise EditInvalid(f"the label must be text, not a {type(value).__name__}")
    return value.strip()


_READ = {"settings": _settings, "overrides": _overrides, "after": _after,
         "timeout": _timeout, "label": _label}


def _read_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` as job fields; :raises EditInvalid: an unknown key or a bad value."""
    if not isinstance(changes, Mapping):
        raise EditInvalid("the changes must be an object of settings, overrides, after, "
                          "timeout and label")
    unknown = sorted(str(k) for k in changes if k not in _READ)
    if unknown:
        raise EditInvalid(f"{', '.join(unknown)} cannot be edited; a waiting job's "
                          f"{', '.join(EDIT_KEYS)} can")
    fields = {}
    for key, value in changes.items():
        fields["depends_on" if key == "after" else key] = _READ[key](value)
    return fields


# -- the edit -------------------------------------------------------------------------

def _cycle(queue: Queue, job_id: str, after: list[str]) -> list[str]:
    """A dependency path leading back to ``job_id`` from its new ``after``, or []."""
    by_id = {job.id: job for job in queue.jobs}
    seen: set[str] = set()
    stack = [(dep, [job_id, dep]) for dep in after]
    while stack:
        node, trail = stack.pop()
        if node == job_id:
            return trail
        if node in seen or node not in by_id:
            continue
        seen.add(node)
        stack.extend((dep, trail + [dep]) for dep in by_id[node].depends_on)
    return []


def _edited(job: Job, fields: Mapping[str, Any]) -> Job:
    """A copy of ``job`` with ``fields`` changed (the job itself stays as it was)."""
    data = dict(job.to_dict())
    data.update(fields)
    edited = Job.from_dict(data)
    if not edited.label:
        edited.label = edited.default_label()
    return edited


def edit_job(queue_path: str | os.PathLike, job_id: str, changes: Mapping[str, Any], *,
             modules: Modules | None = None, warnings: list[str] | None = None,
             derive: Callable[[Job], Mapping[str, Any]] | None = None) -> Job:
    """Change the waiting job ``job_id`` of the queue in ``queue_path``; the job as saved.

    ``changes`` holds any of :data:`EDIT_KEYS`; a key left out keeps its value.
    ``derive(job)``, when given, makes more of them from the job as it is in the file
    under the lock (a change *to* its settings — one override more — rather than a
    whole new value: an edit made meanwhile by someone else is built on, never lost).
    ``warnings`` (a list) receives a sentence per warning the check found.

    :raises EditError: :class:`EditMissing` (no such file or job),
        :class:`EditRefused` (running or finished), :class:`EditInvalid` (a bad
        value, or the check found errors), :class:`EditFailed` (the file
        could not be read, locked or written) — nothing is written then.
    """
    try:
        job, problems, loaded = _edit(Path(queue_path), job_id, _read_changes(changes),
                                      modules, derive)
    except EditError as exc:
        raise type(exc)(f"Not changed: {exc}") from None
    if warnings is not None:
        warnings.extend(loaded)
        warnings.extend(f"{p.message} — {p.fix}" for p in problems)
    return job


def _edit(path: Path, job_id: str, fields: Mapping[str, Any], modules: Modules | None,
          derive: Callable[[Job], Mapping[str, Any]] | None = None
          ) -> tuple[Job, list, list[str]]:
    if not path.exists():
        raise EditMissing(f"the queue file {path} is not there any more; open it again")
    try:
        refuse_unreadable(path)
    except QueueError as exc:
        raise EditFailed(str(exc)) from None
    lock = edit_lock(path)
    try:
        lock.__enter__()
    except QueueError as exc:
        raise EditBusy(str(exc)) from None
    try:
        queue = load_queue(path, unique_keys=True)
        job = queue.find(job_id)
        if job is None:
            known = ", ".join(j.id for j in queue.jobs[:8]) + (", …" if len(queue.jobs) > 8
                                                                else "")
            raise EditMissing(f"job {job_id!r} is not in {path.name} (never there, removed, or "
                              f"the file was replaced); its jobs are: {known or 'none'}")
        shared = sum(1 for j in queue.jobs if j.id == job_id)
        if shared > 1:  # (which one is meant cannot be told: none is changed)
            raise EditInvalid(f"{shared} jobs of {path.name} share the id {job_id!r}, so which "
                              "one to change cannot be told; give each its own id (spacrq "
                              "queue validate lists them), then edit again")
        if runner_unsaved(logs_dir(path)):
            raise EditRefused(f"the queue's runner could not save its state lately (a full "
                              f"disk?), so {path.name} may show job {job.id} waiting although "
                              "it already ran; edit it once the runner saved again (spacrq "
                              "queue status shows the job as it stands then; adding jobs "
                              "works meanwhile)")
        if job.status == STATUS_RUNNING and not runner_holds(logs_dir(path)):
            raise EditRefused(f"job {job.id} was left running by a runner that is gone; "
                              f"'spacrq queue resume {path}' records, adopts or reruns it, "
                              "and a job cannot be edited before that")
        refusal = edit_refusal(job)
        if refusal:
            raise EditRefused(refusal)
        if derive is not None:
            fields = {**fields, **_read_changes(derive(job))}
        edited = _edited(job, fields)
        loop = _cycle(queue, job.id, edited.depends_on)
        if loop:
            raise EditInvalid(f"it would make a dependency cycle ({' -> '.join(loop)}); "
                              "drop one of them from after")
        problems = validate_job(edited, queue, modules)
        errors = [p for p in problems if p.is_error]
        if errors:
            raise EditInvalid(f"{errors[0].message} — {errors[0].fix}"
                              + (f" ({len(errors) - 1} more problem(s))"
                                 if len(errors) > 1 else ""))
        for name in EDIT_FIELDS:
            setattr(job, name, getattr(edited, name))
        save_queue(queue, path)
        # (what reading a damaged file had to do, said with the change)
        return job, problems, queue.warnings if queue.recovered_from else []
    except QueueError as exc:
        if not path.exists():
            raise EditMissing(f"the queue file {path} is not there any more; open it "
                              "again") from None
        raise EditFailed(str(exc)) from None
    except OSError as exc:
        raise EditFailed(f"{path} could not be written ({exc.strerror or exc}); check the "
                         "folder is writable") from None
    finally:
        lock.__exit__(None, None, None)


# -- adding a job to the file ---------------------------------------------------------

def add_job(queue_path: str | os.PathLike, job: Job, *, modules: Modules | None = None,
            warnings: list[str] | None = None) -> tuple[Job, bool]:
    """Add ``job`` to the queue file as ``spacrq queue add`` does; ``(the job as added,
    whether a runner holds the queue)``.

    The pane adds this way while a runner owns the file (its own copy is the
    runner's then, not the operator's to save): checked by
    :func:`~spacrq.queue.validate.add_checked` under the edit lock, through
    :func:`~spacrq.queue.store.edit_queue`, so the runner takes the job in at
    its next transition and runs it after the jobs already queued.  A job
    without an id gets one unused in the file.

    :raises EditError: :class:`EditMissing` (no such file), :class:`EditInvalid`
        (the check found errors), :class:`EditFailed` (the file could not be
        locked, read or written) — nothing is written then.
    """
    path = Path(queue_path)
    held: list[bool] = []
    problems: list = []

    def add(queue: Queue) -> None:
        try:
            problems.extend(add_checked(queue, job, modules))
        except QueueError as exc:
            raise EditInvalid(str(exc)) from None
        held.append(runner_holds(logs_dir(path)))

    if not path.exists():
        raise EditMissing(f"Not added: the queue file {path} is not there any more; open it "
                          "again")
    try:
        edit_queue(path, add)
    except EditError as exc:
        raise type(exc)(f"Not added: {exc}") from None
    except QueueError as exc:
        if not path.exists():
            raise EditMissing(f"Not added: the queue file {path} is not there any "
                              "more") from None
        raise EditFailed(f"Not added: {exc}") from None  # the lock, the read or the write
    if warnings is not None:
        warnings.extend(f"{p.message} — {p.fix}" for p in problems)
    return job, bool(held and held[0])


# -- the runner's side ----------------------------------------------------------------

def _differs(mine: Job, theirs: Job) -> bool:
    return (mine.settings != theirs.settings or mine.override_args != theirs.override_args
            or mine.depends_on != theirs.depends_on or mine.timeout != theirs.timeout
            or mine.label != theirs.label)


def take_edits(mine: Queue, theirs: Queue) -> list[Job]:
    """Copy the edited fields of waiting jobs from ``theirs`` (the file) into ``mine``
    (a runner's queue); the jobs of ``mine`` that changed.

    Only a job waiting in both takes anything: the runner's state of a job it
    ran, or is running, stays the truth, whatever the file says about it.
    """
    waiting = {job.id: job for job in mine.jobs if job.status in EDITABLE_STATUSES}
    changed = []
    for other in theirs.jobs:
        job = waiting.get(other.id)
        if job is None or other.status not in EDITABLE_STATUSES or not _differs(job, other):
            continue
        for name in EDIT_FIELDS:
            value = getattr(other, name)
            setattr(job, name, dict(value) if isinstance(value, dict)
                    else list(value) if isinstance(value, list) else value)
        changed.append(job)
    return changed


def unapplied_edits(mine: Queue, theirs: Queue) -> list[Job]:
    """The jobs of ``theirs`` (the file) edited while ``mine`` (a runner's queue) had
    already started or ended them: the file, behind the runner's state (it could not
    save it), showed them waiting.  :func:`take_edits` leaves them as they ran; the
    runner says so, so that an edit accepted is never dropped unsaid."""
    ran = {job.id: job for job in mine.jobs if job.status not in EDITABLE_STATUSES}
    return [other for other in theirs.jobs
            if other.status in EDITABLE_STATUSES and other.id in ran
            and _differs(ran[other.id], other)]
