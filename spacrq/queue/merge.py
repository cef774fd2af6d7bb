"""The pane's Save: its own changes applied onto the file as it is now, never a blind overwrite.

While the operator lines up jobs in the Queue pane, somebody else may change
the same file: ``spacrq queue add`` from a terminal, Edit… from another
window, a runner resumed from the command line.  Writing the pane's copy
over the file would silently drop their work, so Save is a three-way merge
of *base* (the file as the pane last loaded or saved it), *ours* (the pane's
queue now) and *theirs* (the file now, read under the edit lock):

* a job added on disk is kept, after the pane's jobs at its place (a job
  ``queue add`` appended comes after the jobs the pane appended);
* a job the pane removed is removed; a job removed on disk stays removed;
* a job changed only in the pane takes the pane's values, a job changed only
  on disk keeps the disk's, and the fields a runner writes (status, times,
  exit code, log…) always come from the disk: the pane's copy of them is
  only ever stale;
* a job added on both sides under the same id (both minted ``command-1``)
  is two jobs: the pane's gets a fresh id (``command-2``; a name of the
  operator's own, ``nightly``, becomes ``nightly-2``), and the jobs that run
  after it are renamed with it; the same job added identically on both sides
  (the pane's own earlier save, say) is one job, and the note says so;
* the queue's settings (name, on_error, max_consecutive_failures,
  notify_command) and the run order merge the same way.

A job changed on both sides (including one the pane changed that a runner
has run since), removed on one side and changed on the other, a setting
changed both ways, or the order changed both ways, is a :class:`Conflict`:
the save is refused with a sentence naming them.  The operator then either
Opens the file again (their edits are dropped), or presses Save once more to
keep the pane's version of exactly what they were told about
(``keep_ours``): everything else changed on disk is still kept, and a
conflict that changed again on disk since is refused again.

A job the pane changed that a runner ran since (the disk's run fields
moved) is that conflict too, named as a job that ran.  Keeping the pane's
version never dresses the new settings in the old run's status: the job
that ran stays as it ran (its record and log are the truth about that run),
and the pane's version is added right after it as a new job waiting to run,
under a fresh id (``a`` -> ``a-2``); jobs that ran after ``a`` still do.

Some saves are refused outright, with no "Save again" (:attr:`Merged.problem`):

* a job id used by more than one job in the pane's queue or the file: the
  merge pairs jobs by id, so it would lose one of them or write one twice —
  give each its own id (Validate lists them), then Save;
* a merge whose result has a job running after a job no longer in the
  queue (removed on disk while the pane added a follower, or removed in
  the pane while the disk added one): the file would not validate, so the
  sentence names both jobs and the operator changes the follower's After.

Renames keep one set of ids in use for the whole merge (never a queue built
per rename), so a save stays quick under the edit lock however many clash.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from spacrq.queue.model import RUN_FIELDS, Job, Queue
from spacrq.runfiles import dumps

__all__ = ["Conflict", "Merged", "DiskNews", "merge_queues", "disk_news", "RUNNER_FIELDS",
           "SETTINGS", "CHANGED_BOTH", "REMOVED_HERE", "REMOVED_THERE", "SETTING", "ORDER"]

#: job fields only a runner writes: the file's values always win
RUNNER_FIELDS: tuple[str, ...] = tuple(f for f in RUN_FIELDS if f != "overrides")
#: the queue's own settings an operator changes
SETTINGS: tuple[str, ...] = ("name", "on_error", "max_consecutive_failures", "notify_command")

CHANGED_BOTH = "changed_both"    # changed here and on disk, differently
REMOVED_HERE = "removed_here"    # removed here, changed on disk
REMOVED_THERE = "removed_there"  # changed here, removed on disk
SETTING = "setting"              # a queue setting changed both ways
ORDER = "order"                  # the run order changed both ways


@dataclass(frozen=True)
class Conflict:
    """Something both sides changed.  ``theirs`` fingerprints the disk's version, so keeping
    the pane's version covers exactly what the operator was told about."""

    what: str
    name: str  # the job id, or the setting's name ("" for the order)
    theirs: str = ""
    #: CHANGED_BOTH of a job that a runner ran since the pane read it
    ran: bool = False

    def sentence(self) -> str:
        if self.what == CHANGED_BOTH and self.ran:
            return (f"job {self.name} was changed here but ran meanwhile with its old "
                    "settings")
        if self.what == CHANGED_BOTH:
            return f"job {self.name} was changed both here and on disk"
        if self.what == REMOVED_HERE:
            return f"job {self.name} was removed here but changed on disk"
        if self.what == REMOVED_THERE:
            return f"job {self.name} was changed here but removed on disk"
        if self.what == SETTING:
            return f"the setting {self.name} was changed both here and on disk"
        return "the run order was changed both here and on disk"


@dataclass(frozen=True)
class Merged:
    """What a save would write: ``queue`` (None when there are conflicts) and what it kept."""

    queue: Queue | None
    conflicts: tuple[Conflict, ...] = ()
    #: jobs added on disk, kept
    kept: tuple[str, ...] = ()
    #: jobs changed on disk (edited, or run), whose disk version was kept
    taken: tuple[str, ...] = ()
    #: jobs removed on disk, not written back
    dropped: tuple[str, ...] = ()
    #: (the pane's id, its new id): the pane's job whose id the disk took first
    renamed: tuple[tuple[str, str], ...] = ()
    #: (the job that ran, the new id): the pane's version added as a new waiting job
    reruns: tuple[tuple[str, str], ...] = ()
    #: jobs added identically on both sides, written once
    same: tuple[str, ...] = ()
    #: a refusal no "Save again" gets past (duplicate ids, a dangling After), with its fix
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.problem

    def refusal(self, file_name: str) -> str:
        """The one sentence refusing the save: what conflicts, and the two ways out."""
        if self.problem:
            return f"Not saved: in {file_name}, {self.problem}"
        shown = [c.sentence() for c in self.conflicts[:MOST_NAMED]]
        more = len(self.conflicts) - len(shown)
        said = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        ran = any(c.ran for c in self.conflicts)
        return (f"Not saved: in {file_name}, {said}; Open reloads the file (your edits are "
                "dropped), or Save again to keep your version of "
                f"{'these' if len(self.conflicts) > 1 else 'it'} (everything else changed on "
                "disk is still kept"
                + ("; a job that ran keeps its run and your version is added as a new job "
                   "waiting to run" if ran else "") + ").")

    def note(self) -> str:
        """What the save kept of others' work, as a sentence to follow "Saved X." (or "")."""
        parts = []
        if self.kept:
            parts.append(f"kept {_names(self.kept)} added on disk")
        if self.taken:
            parts.append(f"kept the disk's {_names(self.taken)}")
        if self.dropped:
            parts.append(f"left out {_names(self.dropped)} removed on disk")
        text = ("It " + ", ".join(parts) + ".") if parts else ""
        if self.same:
            text += (f" {_names(self.same)} {'was' if len(self.same) == 1 else 'were'} on disk "
                     "already exactly as you added, so each is in the file once.")
        for mine, new in self.renamed[:MOST_NAMED]:
            text += f" Your {mine} is now {new}: the file gained a job of its own under that id."
        if len(self.renamed) > MOST_NAMED:
            text += f" {len(self.renamed) - MOST_NAMED} more of yours were renamed the same way."
        for ran, new in self.reruns[:MOST_NAMED]:
            text += (f" {ran} ran meanwhile with its old settings and keeps that run; your "
                     f"version is added as {new}, waiting to run.")
        if len(self.reruns) > MOST_NAMED:
            text += f" {len(self.reruns) - MOST_NAMED} more were added the same way."
        return text.strip()


@dataclass(frozen=True)
class DiskNews:
    """How the file now differs from what the pane loaded (for the "changed on disk" line)."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    settings: tuple[str, ...] = field(default=())


#: how many jobs or conflicts one sentence names before "and N more"
MOST_NAMED = 5


def _names(ids: Sequence[str], most: int = MOST_NAMED) -> str:
    shown = ", ".join(ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _definition(job: Job) -> dict:
    """The job as the operator wrote it (what the pane may change)."""
    data = dict(job.to_dict())
    for name in RUNNER_FIELDS:
        data.pop(name, None)
    return data


def _whole(job: Job) -> dict:
    return dict(job.to_dict())


def _fingerprint(value) -> str:
    return hashlib.sha1(dumps(value).encode()).hexdigest()[:16]


def _with_run_fields(mine: Job, disk: Job) -> Job:
    """The pane's definition of a job with the disk's run fields (a fresh object)."""
    data = _definition(mine)
    whole = _whole(disk)
    data.update({name: whole[name] for name in RUNNER_FIELDS})
    return Job.from_dict(data)


class FreshIds:
    """Ids not yet used in this merge, minted in time linear in the ids handed out.

    One set of the ids in use and, per stem, the next number to try: a
    minted id is ``<module>-N`` for an id the pane minted from its module
    (``command-1`` -> ``command-2``), else the operator's own name with a
    number (``nightly`` -> ``nightly-2``).  ``probes`` counts the ids tried.
    """

    def __init__(self, used: Collection[str]) -> None:
        self.used = set(used)
        self._next: dict[str, int] = {}
        self.probes = 0

    def mint(self, job: Job) -> str:
        module = re.sub(r"[^a-z0-9_]+", "-", str(job.module).strip().lower()).strip("-") or "job"
        found = re.fullmatch(r"(.+)-(\d+)", job.id)
        stem = found.group(1) if found else job.id  # run-2 clashes: run-3, nightly: nightly-2
        if len(stem) > 90:
            stem = stem[:90]
        n = self._next.get(stem, 1 if stem == module else 2)
        while True:
            self.probes += 1
            new = f"{stem}-{n}"
            n += 1
            if new not in self.used:
                break
        self._next[stem] = n
        self.used.add(new)
        return new


def _renamed(ours: Queue, base_ids: set[str], theirs: dict[str, Job],
             fresh: FreshIds) -> tuple[list[Job], list, list]:
    """Ours' jobs with the pane-added ones whose id the disk took for another job renamed,
    and the ids added identically on both sides."""
    renames: dict[str, str] = {}
    same: list[str] = []
    for job in ours.jobs:
        other = theirs.get(job.id)
        if job.id in base_ids or other is None:
            continue
        if _definition(other) == _definition(job):
            same.append(job.id)
            continue
        renames[job.id] = fresh.mint(job)
    if not renames:
        return list(ours.jobs), [], same
    jobs = []
    for job in ours.jobs:
        if job.id in renames or any(d in renames for d in job.depends_on):
            data = _whole(job)
            data["id"] = renames.get(job.id, job.id)
            data["depends_on"] = [renames.get(d, d) for d in job.depends_on]
            job = Job.from_dict(data)
        jobs.append(job)
    return jobs, list(renames.items()), same


def _twice(*queues: Queue) -> list[str]:
    """Ids used by more than one job in any of ``queues``, in the order met."""
    twice: dict[str, None] = {}
    for queue in queues:
        seen: set[str] = set()
        for job in queue.jobs:
            if job.id in seen:
                twice[job.id] = None
            seen.add(job.id)
    return list(twice)


def _duplicates(base: Queue, ours: Queue, theirs: Queue) -> str:
    twice = _twice(base, ours, theirs)
    if not twice:
        return ""
    where = [w for w, q in (("in the pane", ours), ("on disk", theirs)) if _twice(q)]
    one = len(twice) == 1
    return (f"the job id{'' if one else 's'} {_names(twice)} {'is' if one else 'are'} used by "
            f"more than one job ({' and '.join(where) or 'in the queue last read'}), so a save "
            "would lose or double one of them; give each job its own id (Validate lists "
            "them; rename one in the pane, or in the file with an editor), then Save again.")


def _dangling(merged: Queue, ours_ids: set[str], their_ids: set[str]) -> str:
    """The sentence for jobs the merge leaves running after a job it left out (or "")."""
    ids = {job.id for job in merged.jobs}
    pairs = [(job.id, dep) for job in merged.jobs for dep in job.depends_on
             if dep not in ids and (dep in ours_ids or dep in their_ids)]
    if not pairs:
        return ""
    said = [f"{job} runs after {dep}, which was removed "
            f"{'on disk' if dep in ours_ids else 'here'}" for job, dep in pairs[:MOST_NAMED]]
    more = len(pairs) - len(said)
    followers = sorted({job for job, _ in pairs})
    return ("; ".join(said) + (f"; and {more} more" if more > 0 else "")
            + f", so the file would not validate; change the After of {_names(followers)} "
            "(or Open the file again), then Save again.")


def merge_queues(base: Queue | None, ours: Queue, theirs: Queue,
                 keep_ours: Collection[Conflict] = ()) -> Merged:
    """The queue a save writes: ``ours``' changes since ``base`` applied onto ``theirs``.

    ``base`` None means the pane never read this file (it was missing when
    the pane opened it): every job on disk is then one added by somebody
    else.  None of the three queues is changed.
    """
    if base is None:
        base = Queue(jobs=[], name=theirs.name, on_error=theirs.on_error,
                     max_consecutive_failures=theirs.max_consecutive_failures,
                     notify_command=list(theirs.notify_command))
    twice = _duplicates(base, ours, theirs)
    if twice:
        return Merged(None, problem=twice)
    keep = set(keep_ours)
    b = {job.id: job for job in base.jobs}
    t = {job.id: job for job in theirs.jobs}
    fresh = FreshIds(set(b) | set(t) | {job.id for job in ours.jobs})
    our_jobs, renamed, same = _renamed(ours, set(b), t, fresh)
    o = {job.id: job for job in our_jobs}
    reruns: dict[str, Job] = {}  # the job that ran -> the pane's version, a new waiting job
    conflicts: list[Conflict] = []
    taken: list[str] = []
    dropped: list[str] = []
    chosen: dict[str, Job] = {}

    def clash(conflict: Conflict) -> bool:
        """True when the pane's version wins (the operator said so for this very conflict)."""
        if conflict in keep:
            return True
        conflicts.append(conflict)
        return False

    for job in our_jobs:
        disk = t.get(job.id)
        if job.id not in b:  # the pane added it (or the same job is on disk already)
            chosen[job.id] = disk if disk is not None else job
            continue
        was = b[job.id]
        mine = _definition(job) != _definition(was)
        if disk is None:  # removed on disk
            if mine and clash(Conflict(REMOVED_THERE, job.id)):
                chosen[job.id] = job
            elif not mine:
                dropped.append(job.id)
            continue
        changed_there = _whole(disk) != _whole(was)
        if not mine:
            chosen[job.id] = disk
            if changed_there:
                taken.append(job.id)
        elif not changed_there or _definition(disk) == _definition(job):
            chosen[job.id] = _with_run_fields(job, disk)  # the pane's job, the disk's run
        elif _ran(was, disk):  # never the new settings dressed in the old run's status
            chosen[job.id] = disk
            if clash(Conflict(CHANGED_BOTH, job.id, _fingerprint(_whole(disk)), ran=True)):
                data = _definition(job)
                data["id"] = fresh.mint(job)
                reruns[job.id] = Job.from_dict(data)
        elif clash(Conflict(CHANGED_BOTH, job.id, _fingerprint(_whole(disk)))):
            chosen[job.id] = _with_run_fields(job, disk)
    for was in base.jobs:  # the pane removed it
        disk = t.get(was.id)
        if was.id in o or disk is None:
            continue
        if _whole(disk) != _whole(was):  # else it is simply removed
            clash(Conflict(REMOVED_HERE, was.id, _fingerprint(_whole(disk))))
    kept = [job.id for job in theirs.jobs if job.id not in b and job.id not in o]
    for job_id in kept:
        chosen[job_id] = t[job_id]

    order = _order(base, our_jobs, theirs, chosen, clash)
    settings = {}
    for name in SETTINGS:
        was, mine, disk = (getattr(q, name) for q in (base, ours, theirs))
        if mine == was or disk == mine:
            settings[name] = disk
        elif disk == was or clash(Conflict(SETTING, name, _fingerprint(disk))):
            settings[name] = mine
        else:
            settings[name] = disk
    if conflicts:
        return Merged(None, tuple(conflicts))
    jobs = []
    for job_id in order:
        jobs.append(chosen[job_id])
        if job_id in reruns:
            jobs.append(reruns[job_id])
    merged = Queue(jobs=jobs, created=theirs.created,
                   stopped_reason=theirs.stopped_reason, journal_seq=theirs.journal_seq,
                   name=settings["name"], on_error=settings["on_error"],
                   max_consecutive_failures=settings["max_consecutive_failures"],
                   notify_command=list(settings["notify_command"]))
    dangling = _dangling(merged, {job.id for job in our_jobs}, set(t))
    if dangling:
        return Merged(None, problem=dangling)
    return Merged(merged, (), tuple(kept), tuple(taken), tuple(dropped), tuple(renamed),
                  tuple((ran, job.id) for ran, job in reruns.items()), tuple(same))


def _ran(was: Job, disk: Job) -> bool:
    """Whether a runner ran (or is running) the job since the pane read it."""
    before, now = _whole(was), _whole(disk)
    return any(before.get(name) != now.get(name) for name in RUNNER_FIELDS)


def _order(base: Queue, ours: Sequence[Job], theirs: Queue, chosen: dict[str, Job],
           clash) -> list[str]:
    """The run order: the pane's, unless only the disk reordered the jobs both have.

    The other side's extra jobs go in after the nearest job before them on
    their side; a job added on disk goes after the pane's jobs added there.
    """
    base_ids = {job.id for job in base.jobs}
    our_ids = [job.id for job in ours if job.id in chosen]
    their_ids = [job.id for job in theirs.jobs if job.id in chosen]
    common = set(our_ids) & set(their_ids) & base_ids
    was = [job.id for job in base.jobs if job.id in common]
    mine = [i for i in our_ids if i in common]
    disk = [i for i in their_ids if i in common]
    disk_first = disk != was and mine == was
    if disk != was and mine != was and disk != mine:
        disk_first = not clash(Conflict(ORDER, "", _fingerprint(disk)))
    primary, other = (their_ids, our_ids) if disk_first else (our_ids, their_ids)
    placed = list(primary)
    here = set(placed)
    pane_added = {i for i in our_ids if i not in base_ids}
    disk_added = {i for i in their_ids if i not in base_ids and i not in pane_added}
    last_shared = max((k for k, i in enumerate(other) if i in here), default=-1)
    for n, job_id in enumerate(other):
        if job_id in here:
            continue
        if n > last_shared:  # added at the end: at the end
            at = len(placed)
            while disk_first and at > 0 and placed[at - 1] in disk_added:
                at -= 1  # the pane's jobs come before those added on disk
        else:
            anchor = next((other[k] for k in range(n - 1, -1, -1) if other[k] in here), None)
            at = 0 if anchor is None else placed.index(anchor) + 1
            while not disk_first and at < len(placed) and placed[at] in pane_added:
                at += 1  # a job from disk goes after the pane's jobs added at that place
        placed.insert(at, job_id)
        here.add(job_id)
    return placed


def disk_news(base: Queue | None, theirs: Queue) -> DiskNews:
    """What changed on disk since the pane loaded ``base``."""
    if base is None:
        return DiskNews(added=tuple(job.id for job in theirs.jobs))
    b = {job.id: job for job in base.jobs}
    t = {job.id: job for job in theirs.jobs}
    return DiskNews(
        added=tuple(i for i in t if i not in b),
        changed=tuple(i for i in t if i in b and _whole(t[i]) != _whole(b[i])),
        removed=tuple(i for i in b if i not in t),
        settings=tuple(n for n in SETTINGS if getattr(base, n) != getattr(theirs, n)))
