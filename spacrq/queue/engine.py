"""Running a queue: strictly one job at a time, every transition persisted.

Jobs compete for one GPU (two segmentation jobs sharing a card is how a night
turns into an out-of-memory crash), so there is deliberately no parallelism:
run two queues in two processes if there really are two cards.

The rules a night nobody watches depends on:

* The whole queue is validated before the first job starts; any error
  refuses the start with *every* problem listed.
* A job whose dependency did not succeed is **skipped**, with an error naming
  the blocker; ``skipped``, ``failed`` and ``not_run`` stay distinct.
* ``on_error="stop"`` halts at the first failure; ``continue`` runs what does
  not depend on it, until ``max_consecutive_failures`` in a row says the
  problem is systematic (a missing share) rather than twelve accidents.
* Each transition is on disk before the next job starts (the file itself for
  a small queue, its journal for a large one: :mod:`spacrq.queue.persist`),
  so a crash or reboot loses nothing and :func:`resume_queue` carries on; a
  save that fails never ends the night (the state stays in memory and is
  written at the next save that succeeds).
* A job's end is written down by something that outlives the runner — the
  runner's keeper (:mod:`spacrq.queue.keeper`, :mod:`spacrq.queue.direct`), or
  for a runner with none a supervisor process (:mod:`spacrq.queue.supervise`) —
  so a job that ends while its runner is dead is recorded by the next runner,
  never run twice (:mod:`spacrq.queue.adopt`).
"""
from __future__ import annotations

import os
import socket
import stat
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, NamedTuple

from spacrq.modules import ModuleError
from spacrq.problems import format_problems
from spacrq.procs import ProcessRef
from spacrq.queue import adopt, compact
from spacrq.queue.control import ABORT, STOP_AFTER_JOB, Control
from spacrq.queue.ending import notify, queue_ledger, write_morning_report
from spacrq.queue.jobproc import (JobCancelled, JobNotStarted, JobPlan, JobTimeout,
                                  ProcessRunner, Supervisor, SupervisorLost, grace_seconds)
from spacrq.queue.locks import RunnerLock, linked_logs, refuse_linked_logs
from spacrq.queue.model import (ON_ERROR_CHOICES, STATUS_FAILED, STATUS_NOT_RUN, STATUS_PENDING,
                                STATUS_RUNNING, STATUS_SKIPPED, STATUS_SUCCESS, Job, Queue,
                                QueueError, id_problem, now_iso)
from spacrq.queue.persist import CHECKPOINT_MIN_LINES, CHECKPOINT_SECONDS, QueueWriter
from spacrq.queue.room import EXIT_RECORD_ROOM, keep_room, room_for
from spacrq.queue.supervise import EXIT_RECORD, open_append
from spacrq.queue.settings import SettingsError
from spacrq.queue.stamps import collect, snapshot
from spacrq.queue.store import logs_dir
from spacrq.queue.summary import Progress, QueueResult, classify_failure
from spacrq.queue.validate import Modules, resolve_job_settings, validate_queue
from spacrq.runfiles import RunFileError, clear, directly_in, write_json

CANCELLED = ("stopped on request while it ran (its processes were ended); it runs again, "
             "from its start, when the queue is resumed")
INTERRUPTED = "interrupted by the user"
#: Seconds between a runner's tries at saving a final state that nothing on disk holds:
#: the first wait, doubled after each try up to the last (see _wait_to_save).
SAVE_RETRY_SECONDS = (1.0, 30.0)
#: The exit record's room is kept again from its end after this many attempts (a fraction
#: of what the room holds: see spacrq.queue.room).
EXIT_ROOM_EVERY = 16
_UNSET: Any = object()
__all__ = ["run_queue", "CANCELLED", "INTERRUPTED", "CHECKPOINT_SECONDS", "CHECKPOINT_MIN_LINES"]

Runner = Callable[[Job, str, str], int]


def _safe(fn: Callable[..., Any] | None, *args: Any) -> None:
    """A progress callback must never take the queue down with it."""
    if fn is None:
        return
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 — reported, the night goes on
        print(f"spacrq: a progress callback raised {type(exc).__name__}: {exc}", file=sys.stderr)


def _report(text: str) -> None:
    """The runner's own log is its stderr (``runner.log`` when it runs detached)."""
    print(f"spacrq: {text}", file=sys.stderr, flush=True)


def _blocker(job: Job, by_id: dict[str, Job]) -> Job | None:
    """The first dependency that did not succeed: its output is missing or partial."""
    for dep_id in job.depends_on:
        dep = by_id.get(dep_id)
        if dep is not None and dep.status != STATUS_SUCCESS:
            return dep
    return None


def _systematic(n: int) -> str:
    return (f"{n} jobs failed in a row, which points to one systematic problem (a missing "
            "share, a broken environment, a wrong path root) rather than unrelated accidents; "
            "the queue stopped so the night is not spent repeating it — fix the cause and "
            "resume, or raise max_consecutive_failures (0 turns the check off)")


class _Ahead(NamedTuple):
    """The next job, prepared while the one before it runs: its module, its settings as
    resolved, and its :class:`~spacrq.queue.jobproc.JobPlan`.  Only a job whose settings
    are in the queue file itself (nothing else is read ahead: a settings file may change
    meanwhile, or hang on a dead share while the job at hand must be watched), and used
    only if no merge changed the queue since (``generation``: an edit or an added job
    makes it be prepared again in its turn) — its settings are then what its turn would
    resolve.  Its checks (inputs, program, working folder: an earlier job may make or
    remove them), its skip and its output folders' snapshot are all in its turn, as
    always."""

    job: Job
    generation: int
    spec: Any
    settings: dict
    settings_path: str
    folders: list
    plan: JobPlan


class _Run:
    """The state of one pass over a queue (kept out of run_queue to keep it readable)."""

    def __init__(self, queue: Queue, path: str | None, log_root: Path, runner: Runner | None,
                 control: Control, on_progress: Callable | None, stop_flag: Callable | None,
                 durable: bool, heartbeat: Callable[[], None] | None, modules: Modules,
                 mode: str | None, loaded_key: tuple | None,
                 supervisor: Supervisor | None = None) -> None:
        self.queue, self.path, self.log_root = queue, path, log_root
        self._root = str(log_root)  # (joined as text: a Path per job cost more than its use)
        self.control, self.on_progress, self.stop_flag = control, on_progress, stop_flag
        self.modules, self.heartbeat = modules, heartbeat
        self.writer = (QueueWriter(queue, path, durable=durable, mode=mode,
                                   loaded_key=loaded_key) if path else None)
        self.injected = runner
        self.processes = ProcessRunner(control=control, on_spawn=self._spawned,
                                       heartbeat=heartbeat,
                                       supervisor=supervisor or Supervisor(),
                                       meanwhile=self._meanwhile, idle=self._idle)
        if runner is None and any(j.status != STATUS_SUCCESS for j in queue.jobs):
            self.processes.supervisor.warm()
        self.total = len(queue.jobs)
        self.by_id = {job.id: job for job in queue.jobs}
        self.width = max(2, len(str(self.total)))
        self.consecutive = 0
        self.stopped = ""
        self.state = "finished"
        self.ran_with = {"host": socket.gethostname(), "python": sys.executable,
                         "runner_pid": os.getpid()}
        try:  # (the runner never changes folder; one removed under it must not end the run)
            self._cwd = os.getcwd()
        except OSError:
            self._cwd = ""
        self._at = 0  # the place (1-based) of the job at hand
        self._ahead: _Ahead | None = None  # the next job, prepared while this one runs
        self._checked_plan: _Ahead | None = None  # …and checked just before its claim
        self.exit_room = 0  # the room kept past the exit record's end (see _exit_record_room)
        self._attempts = self._room_at = 0  # attempts started; …when the room was last kept

    # -- persistence -----------------------------------------------------------
    def persist(self, job: Job, *fields: str, sync: bool = False) -> None:
        if self.writer is not None:
            self.writer.touch(job, fields, sync)

    def commit(self, defer_sync: bool = False) -> None:
        """Everything so far on disk (before a job starts, and at the end); with
        ``defer_sync`` its fsync is :meth:`QueueWriter.sync`'s, once the job started."""
        if self.writer is None:
            return
        problem = self.writer.problem
        added = self.writer.commit(defer_sync)
        if added:
            self.total = len(self.queue.jobs)
            self.by_id.update((job.id, job) for job in added)
        if self.writer.problem and self.writer.problem != problem:
            self.queue_note(f"could not save the queue file ({self.writer.problem}); the run "
                            "goes on and saves it at the next chance")

    def claim(self, job: Job, keep: bool = False) -> None:
        """``job`` is next: edits made to it in the file are taken in before it is read.
        ``keep``: the edit lock is kept until its start is written (see
        :meth:`QueueWriter.claim`; :meth:`_checked_ahead` says when)."""
        if self.writer is None:
            return
        added = self.writer.claim(job, keep)
        if added:
            self.total = len(self.queue.jobs)
            self.by_id.update((j.id, j) for j in added)

    def queue_note(self, text: str) -> None:
        """A line in the log of the job at hand, if any (saving problems go there too)."""
        job = next((j for j in self.queue.jobs if j.status == STATUS_RUNNING and j.log_path), None)
        if job is not None:
            adopt.note(job, f"# spacrq: {text}")

    def _spawned(self, job: Job, ref: ProcessRef) -> None:
        """The job has run a moment (named once it outlives :data:`spacrq.queue.supervise.ANNOUNCE_AFTER`):
        its process is journalled, and a small queue's file shows it too — nobody waits
        for this write, the job runs."""
        job.process = ref.to_dict()
        self.persist(job, "process")
        if self.writer is not None and self.writer.mode == "file":
            self.commit()

    def _meanwhile(self) -> None:
        if self.writer is not None:
            self.writer.sync()  # the fsync of its "running" (and the last job's end) overlaps it
            self.writer.prepare()  # once the job was sent, not before it starts
        if self.exit_room and self._attempts - self._room_at >= EXIT_ROOM_EVERY:
            self._room_at = self._attempts  # (kept again from its end, while the job runs)
            _exit_record_room(self.log_root, self.exit_room)
        self._look_ahead()

    def _look_ahead(self) -> None:
        """While the job at hand runs: prepare the next one as far as its own settings go
        (see :class:`_Ahead`): nothing is read or looked at on disk, so the job at hand is
        watched (abort, timeout) without delay; only its log and exit record are opened,
        in the folder the log of the job at hand was opened in a moment ago, and let go
        of again once the job at hand ran a while (:meth:`_idle`).  Never fatal: whatever
        fails here is met again, and said, when that job's turn comes.  Only ``command`` jobs: they are the
        jobs short enough for the moment between two jobs to count; any other job starts
        an interpreter of its own."""
        self._ahead = None
        if self.injected is not None or self.stopped or self.writer is None \
                or linked_logs(self._root):  # (its files would be made through the link)
            return
        jobs = self.queue.jobs
        at = self._at
        while at < len(jobs) and jobs[at].status not in (STATUS_PENDING, STATUS_NOT_RUN,
                                                          STATUS_RUNNING):
            at += 1
        if at >= len(jobs) or jobs[at].status == STATUS_RUNNING:
            return
        job = jobs[at]
        if job.module != "command" or not isinstance(job.settings, dict):
            return  # (settings in a file are read in its turn: the file may change meanwhile)
        try:
            if id_problem(job.id):
                return
            spec = self.modules.spec(job.module)
            if spec is None:
                return
            settings = resolve_job_settings(job, self.modules)
            settings_path = os.path.join(self._root, f"{job.id}.settings.json")
            log_path = self._log_path(at + 1, job)
            plan = JobPlan.of(job, spec, settings, settings_path, log_path)
            self._ahead = _Ahead(job, self.writer.generation, spec, settings, settings_path,
                                 spec.output_folders(settings), plan)
            self.processes.open_ahead(plan)  # (its log and exit record: no creation at its start)
        except Exception:  # noqa: BLE001 — its turn says what is wrong with it
            self._ahead = None

    def _planned(self, job: Job) -> "_Ahead | None":
        """The next job as prepared ahead, if nothing it depends on changed since."""
        ahead, self._ahead = self._ahead, None
        if ahead is None or ahead.job is not job or self.writer is None \
                or ahead.generation != self.writer.generation:
            return None
        return ahead

    def _log_path(self, i: int, job: Job) -> str:
        return os.path.join(self._root, f"{i:0{self.width}d}_{job.id}.log")

    def _idle(self) -> None:
        """Once the job ran a while (nobody waits for it now): the housekeeping, and the
        heartbeat, so the runner's record names this job even when its start came too
        soon after the last one's to be written at once."""
        if self.writer is not None:
            self.writer.tidy()
        self.processes.let_go_ahead()
        _safe(self.heartbeat)

    def progress(self, event: str, job: Job | None, i: int, message: str = "") -> None:
        _safe(self.on_progress, Progress(event, job.id if job else "", i, self.total,
                                         job.status if job else "", message))

    # -- one job -----------------------------------------------------------------
    def finish(self, job: Job, status: str, error: str = "", kind: str = "",
               code: int | None = None, finished: str = "") -> None:
        job.status, job.error, job.failure_kind, job.exit_code = status, error, kind, code
        job.finished = finished or now_iso()
        job.process = None
        self.persist(job, "status", "error", "failure_kind", "exit_code", "finished",
                     "process", "run_status", "attempts")

    def fail_early(self, job: Job, i: int, kind: str, message: str) -> None:
        job.started = now_iso()
        self.finish(job, STATUS_FAILED, message, kind, 2)
        self.persist(job, "started")
        self.after_failure(job)
        self.progress("job_finished", job, i, job.error)

    def after_failure(self, job: Job) -> None:
        self.consecutive += 1
        if not self._left_after(job):  # the last job: a stop would stop nothing, and say so
            return
        limit = self.queue.max_consecutive_failures
        if self.queue.on_error == "stop":
            self.stopped = (f"job {job.id} failed and on_error is 'stop', so the remaining jobs "
                            f"were not run: {job.error}")
        elif limit and self.consecutive >= limit:
            self.stopped = _systematic(self.consecutive)

    def _left_after(self, job: Job) -> bool:
        """Whether a job after ``job`` is still to run."""
        jobs = self.queue.jobs
        at = next((i for i, j in enumerate(jobs) if j is job), len(jobs))
        return any(j.status in (STATUS_PENDING, STATUS_NOT_RUN) for j in jobs[at + 1:])

    def prepare(self, i: int, job: Job) -> tuple | None:
        """``(spec, settings, settings_path, folders, plan)``, or None when the job ended
        before it ran."""
        if self._unsafe_id(job) or self._skipped(i, job):
            return None
        ahead = self._planned(job)
        if ahead is not None and ahead.spec.name == "command":  # (no settings file to write)
            if ahead is not self._checked_plan \
                    and not self._checked(i, job, ahead.spec, ahead.settings):
                return None
            return ahead.spec, ahead.settings, ahead.settings_path, ahead.folders, ahead.plan
        spec, settings, folders = self._resolved(i, job)
        if spec is None:
            return None
        settings_path = os.path.join(self._root, f"{job.id}.settings.json")
        if spec.name != "command" or self.injected is not None:
            try:
                write_json(settings_path, settings, durable=False)
            except (OSError, RunFileError) as exc:
                self.fail_early(job, i, "SaveError", f"could not write its settings file "
                                f"{settings_path} ({getattr(exc, 'strerror', None) or exc})")
                return None
        return spec, settings, settings_path, folders, None

    def _resolved(self, i: int, job: Job) -> tuple:
        """``(spec, settings, folders)``; spec None when the job failed early."""
        try:
            spec = self.modules.spec(job.module)
            if spec is None:
                raise SettingsError(f"unknown module {job.module!r}")
            settings = resolve_job_settings(job, self.modules)
        except (SettingsError, ModuleError) as exc:
            self.fail_early(job, i, "ConfigurationError", str(exc))
            return None, None, None
        if not self._checked(i, job, spec, settings):
            return None, None, None
        return spec, settings, spec.output_folders(settings)

    def _checked(self, i: int, job: Job, spec: Any, settings: dict) -> bool:
        """The job's checks, in its turn (its inputs, program, working folder as they are
        now: an earlier job may have made or removed them); False when it failed early."""
        late = [p for p in spec.check(settings) if p.is_error]  # deferred inputs, checked now
        if late:
            self.fail_early(job, i, "ConfigurationError",
                            "; ".join(f"{p.message} (fix: {p.fix})" for p in late))
            return False
        return True

    def run_job(self, i: int, job: Job, attempts: int = 0) -> None:
        """Run one job to its verdict: skipped, failed early, or its attempts' outcome
        (``attempts``: how many it already had — a dead runner's, whose last failed)."""
        self.processes.settle()  # the job before, reaped (before the lock: it may take a grace)
        self.claim(job, keep=self._checked_ahead(job))
        try:
            self._run_claimed(i, job, attempts)
        finally:
            if self.writer is not None:
                self.writer.let_go()  # (kept by the claim: let go of once the job started)

    def _checked_ahead(self, job: Job) -> bool:
        """Whether ``job`` was prepared ahead and passes its checks now, before its claim:
        then nothing between its claim and its start waits for anything (no settings
        to read, no check, no output folder to look at; its working folder is looked
        at here), and the claim keeps the edit lock until the start is written.  A job
        that fails its checks here is checked again, and failed, in its turn as any
        other."""
        ahead = self._ahead
        self._checked_plan = None
        if ahead is None or ahead.job is not job or ahead.folders \
                or self.writer is None or ahead.generation != self.writer.generation:
            return False
        try:
            if any(p.is_error for p in ahead.spec.check(ahead.settings)) \
                    or ahead.plan.cwd and not os.path.isdir(ahead.plan.cwd):
                return False
        except Exception:  # noqa: BLE001 — its turn says what is wrong with it
            return False
        self._checked_plan = ahead
        return True

    def _run_claimed(self, i: int, job: Job, attempts: int = 0) -> None:
        ready = self.prepare(i, job)
        if ready is None:
            return
        spec, settings, settings_path, folders, plan = ready
        before_this = job.started  # a run of this job that was stopped, or lost with its runner
        job.log_path = self._log_path(i, job)
        if before_this and not attempts and os.path.isfile(job.log_path):
            adopt.note(job, f"# spacrq: the job runs again from its start (its run of "
                            f"{before_this} did not finish); what follows is the new run")
        job.attempts, job.run_status = attempts, None
        before = snapshot(folders) if folders else {}
        while True:
            self._started(i, job)
            try:
                code, kind, message = self._attempt(i, job, spec, settings, settings_path,
                                                    before, folders, plan)
            except JobCancelled:
                return self._cancelled(i, job)
            if code == 0:
                return self._succeeded(i, job, collect(folders, before) if folders else None)
            if not kind:
                kind, message = classify_failure(code, job.log_path)
            if self._may_retry(job, kind):
                self._retrying(job, kind, message)
                if self._waited_to_retry(job):
                    continue
            job.run_status = collect(folders, before) if folders else None
            return self._failed(i, job, code, kind, message)

    def _attempt(self, i: int, job: Job, spec: Any, settings: dict, settings_path: str,
                 before: dict, folders: list, plan: JobPlan | None) -> tuple[int, str, str]:
        """One attempt: ``(exit code, kind, message)`` (kind '' = read it from the log)."""
        announced = []

        def ready() -> None:  # exactly once, before the job starts
            if not announced:
                announced.append(True)
                self._announce(i, job)
        try:
            if self.injected is not None:
                ready()
                return int(self.injected(job, settings_path, job.log_path)), "", ""
            self._attempts += 1
            return self.processes.run(job, spec, settings, settings_path, job.log_path,
                                      before=before, folders=folders, ready=ready,
                                      plan=plan), "", ""
        except (JobCancelled, KeyboardInterrupt):
            raise
        except JobTimeout as exc:  # the code it ended with once stopped (-1: not heard)
            return (-1 if exc.code is None else exc.code), "Timeout", str(exc)
        except JobNotStarted as exc:
            return 127, "NotStarted", str(exc)
        except SupervisorLost as exc:
            adopt.note(job, f"# spacrq: {exc}; the outcome of this attempt is unknown")
            return -1, "SupervisorLost", f"{exc}; the outcome of this attempt is unknown"
        except Exception as exc:  # noqa: BLE001 — an in-process runner that raised: job failed
            adopt.note(job, traceback.format_exc().rstrip()
                       + f"\nerror: {type(exc).__name__}: {exc}")
            return 1, type(exc).__name__, str(exc) or type(exc).__name__
        finally:
            ready()  # (a no-op once done) whatever failed before the job could start
            if self.writer is not None:
                self.writer.sync()  # (a no-op once done)

    def _failed(self, i: int, job: Job, code: int, kind: str, message: str,
                finished: str = "") -> None:
        self.finish(job, STATUS_FAILED, f"{message} (exit code {code}; log {job.log_path})",
                    kind, code, finished)
        self.after_failure(job)
        self.progress("job_finished", job, i, job.error)

    def _unsafe_id(self, job: Job) -> bool:
        """Only reachable with ``force=True``: an id that names files outside the logs folder."""
        problem = id_problem(job.id)
        if problem:
            job.status, job.error = STATUS_FAILED, problem
            job.failure_kind, job.finished = "ConfigurationError", now_iso()
            self.persist(job, "status", "error", "failure_kind", "finished")
        return bool(problem)

    def _skipped(self, i: int, job: Job) -> bool:
        blocker = _blocker(job, self.by_id)
        if blocker is None:
            return False
        how = "failed" if blocker.status == STATUS_FAILED else f"is {blocker.status}"
        job.status = STATUS_SKIPPED
        job.error = (f"skipped: it runs after {blocker.id} ({blocker.label}), which {how}; "
                     "running it anyway would compute from a missing or partial input")
        job.finished = now_iso()
        self.persist(job, "status", "error", "finished")
        self.progress("job_skipped", job, i, job.error)
        return True

    def _started(self, i: int, job: Job) -> None:
        """``job`` is running, in memory and in the journal; :meth:`_announce` puts it on disk."""
        job.attempts += 1
        job.status, job.started, job.finished, job.error = STATUS_RUNNING, now_iso(), "", ""
        job.exit_code, job.failure_kind = None, ""
        job.ran_with = dict(self.ran_with, cwd=job.cwd or self._cwd)
        self.persist(job, "status", "started", "finished", "error", "exit_code",
                     "failure_kind", "log_path", "attempts", "run_status", "ran_with")

    def _announce(self, i: int, job: Job) -> None:
        """Before the job starts: the file says "running" (and the last job's end); the
        journal has both, fsync'd as the job starts (see :meth:`QueueWriter.commit`)."""
        self.commit(defer_sync=True)  # (its fsync as the job starts: see QueueWriter.commit)
        if self.writer is not None:
            self.writer.let_go()  # (the claim's, if it kept it: the start is written)
        self.progress("job_started", job, i, f"[{i}/{self.total}] {job.label}")

    def _cancelled(self, i: int, job: Job) -> None:
        job.status, job.error, job.finished = STATUS_NOT_RUN, CANCELLED, now_iso()
        job.process = None
        self.persist(job, "status", "error", "finished", "process", sync=True)
        self.stopped, self.state = "aborted by request; the running job was stopped", "aborted"
        self.progress("job_finished", job, i, CANCELLED)

    def _succeeded(self, i: int, job: Job, run_status: dict | None, finished: str = "") -> None:
        job.run_status = run_status
        self.finish(job, STATUS_SUCCESS, code=0, finished=finished)
        if job.is_partial:
            rs = job.run_status or {}
            job.error = (f"exited 0 but its run status says {rs.get('n_failed')} of "
                         f"{rs.get('n_attempted')} items failed (PARTIAL)")
            self.persist(job, "error")
        self.consecutive = 0
        self.progress("job_finished", job, i, job.error or f"{job.label} finished")

    def _may_retry(self, job: Job, kind: str) -> bool:
        """Whether the attempt that just failed (as ``kind``) leaves ``job`` another one."""
        # a job its module refused (bad settings, exit 2) would be refused again: not retried
        return (job.attempts <= job.retries and kind != "ConfigurationError"
                and not self.control.request())

    def _retrying(self, job: Job, kind: str, message: str) -> None:
        # the failed attempt reaped and written down now, not after the delay: a runner that
        # dies waiting leaves its keeper nothing to record (it dated the end at its death)
        self.processes.settle(now=True)
        left = job.retries - job.attempts + 1
        when = f" in {job.retry_delay:g}s" if job.retry_delay else ""
        adopt.note(job, f"# attempt {job.attempts} failed ({kind}: {message}); retrying{when} "
                        f"({left} {'retry' if left == 1 else 'retries'} left)")

    def _waited_to_retry(self, job: Job) -> bool:
        """Wait ``job.retry_delay`` before its next attempt, the runner's heartbeat going on;
        False (no more attempts: it ends with the one that failed) when a stop or abort is
        asked meanwhile."""
        end = time.monotonic() + job.retry_delay
        beat = time.monotonic()
        while time.monotonic() < end:
            if self.control.request() or (self.stop_flag is not None and self.stop_flag()):
                adopt.note(job, "# spacrq: not retried: a stop was asked while it waited")
                return False
            if time.monotonic() - beat >= 2.0:
                beat = time.monotonic()
                _safe(self.heartbeat)
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))
        return True

    # -- a job its dead runner left running ---------------------------------------
    def _moved_log(self, job: Job) -> None:
        """A job whose log is named in a folder that is no longer the queue's — the queue and
        its logs folder were moved, or the share is mounted elsewhere, since it started —
        while the queue's logs folder holds a log of that name: the log and the exit record
        are read here (only a plain name joined to the queue's own folder: nothing else is
        ever read or written), and its log says so."""
        old = os.path.dirname(job.log_path)
        name = os.path.basename(job.log_path)
        if not name or name in (".", "..") or os.path.basename(old) != os.path.basename(
                self._root) or directly_in(job.log_path, self._root):
            return
        here = os.path.join(self._root, name)
        try:
            if not stat.S_ISREG(os.lstat(here).st_mode):
                return
        except OSError:
            return
        job.log_path = here
        adopt.note(job, f"# spacrq: the queue's logs folder was {old} when this attempt "
                        f"started; it is {self._root} now, where its log and exit record are read")
        self.persist(job, "log_path")

    def take_over(self, i: int, job: Job) -> None:
        """Record, adopt, or (outcome unknown) rerun a job left ``running``: see :mod:`adopt`."""
        if job.log_path:
            self._moved_log(job)
        # (a log outside the queue's logs folder is neither read nor written to)
        if job.log_path and not directly_in(job.log_path, self._root):
            record = adopt.Record(adopt.UNKNOWN, why=f"its log_path {job.log_path} is not in "
                                  f"the queue's logs folder {self._root}")
            job.log_path = ""
        else:
            record = adopt.examine(job) if self.injected is None else adopt.Record(adopt.UNKNOWN)
            if record.skipped:  # (read all the same; said where the operator looks)
                adopt.note(job, f"# spacrq: {record.skipped}")
        adopted = record.state == adopt.RUNNING
        if adopted:
            adopt.note(job, f"# spacrq: adopted at {now_iso()} by runner {os.getpid()}: the job "
                            "kept running while no runner watched it")
            ref = record.ref
            if ref is not None and job.process != ref.to_dict():
                # (found by its pid in the exit record, or among the running processes: the
                # file names it, and following it never looks for it again)
                job.process = ref.to_dict()
                self.persist(job, "process")
            self.progress("job_started", job, i, f"[{i}/{self.total}] {job.label} (adopted)")
            _safe(self.heartbeat)  # runner.json names the adopted job at once
            how, record = adopt.wait_for_end(job, record, self.control, self.heartbeat,
                                             grace_seconds())
            if how == "aborted":
                return self._cancelled(i, job)
            if how == "timeout":  # the code it ended with once stopped (-1: not recorded)
                code = record.exit_code if record.exit_code is not None else -1
                return self._attempt_failed(i, job, code, "Timeout", "still running after its "
                                            f"timeout of {job.timeout:g}s; stopped", "", None)
            if how == "lost":
                return self._ended_unrecorded(i, job, record)
        if record.state == adopt.FINISHED:
            return self._record_end(i, job, record, adopted=adopted)
        if record.state == adopt.UNSEEN:
            return self._ended_unrecorded(i, job, record, adopted=False)
        why = record.why or "nothing recorded how it ended"
        adopt.note(job, f"# spacrq: the outcome of attempt {job.attempts} is unknown ({why}); "
                        "running the job again")
        adopt.resume_override(job, self.modules)
        job.reset(lost=why)
        self.persist(job, "overrides", "lost_runs")
        self.run_job(i, job)

    def _record_end(self, i: int, job: Job, record: "adopt.Record", adopted: bool = False) -> None:
        """The job ended under its supervisor: its outcome, as the runner would have seen it."""
        code, finished = record.exit_code, str(record.end.get("finished") or "")
        kind, message = classify_failure(code, job.log_path) if code else ("", "")
        if not adopted:
            then = ("; the job's next attempt follows" if code and self._may_retry(job, kind)
                    else ", which is not run again")
            adopt.note(job, f"# spacrq: it ended at {finished} with exit code {code} while no "
                            f"runner watched; recorded as attempt {job.attempts}'s outcome{then}")
        folders = record.start.get("folders") or []
        before = record.start.get("before") or {}
        run_status = collect(folders, before) if folders and isinstance(before, dict) else None
        if code == 0:
            return self._succeeded(i, job, run_status, finished)
        self._attempt_failed(i, job, code, kind, message, finished, run_status)

    def _attempt_failed(self, i: int, job: Job, code: int, kind: str, message: str,
                        finished: str, run_status: dict | None) -> None:
        """An attempt a dead runner left failed (seen ended, or adopted and followed to its
        end): the job's next attempt, as that runner would have made it, if it has one
        left; else its failure."""
        if self._may_retry(job, kind):
            self._retrying(job, kind, message)
            if self._waited_to_retry(job):
                return self.run_job(i, job, attempts=job.attempts)
        job.run_status = run_status
        self._failed(i, job, code, kind, message, finished)

    def _ended_unrecorded(self, i: int, job: Job, record: "adopt.Record",
                          adopted: bool = True) -> None:
        """A job ended, and nothing could record how: the runner that started it and its
        keeper (or supervisor) are both gone, and only the parent of a process learns its
        exit status — it ended while adopted, or before (``adopted`` False) while no
        runner watched it.  It ran, perhaps to its end, so it is not run again (nothing is
        done twice): it is failed with an unknown outcome, which its log may tell, and
        ``restart-failed`` runs it again if it must."""
        job.run_status = None
        why = record.why or "nothing recorded how it ended"
        when = f"at {now_iso()} while adopted" if adopted else "while no runner watched it"
        adopt.note(job, f"# spacrq: attempt {job.attempts} ended {when}, and its exit status "
                        f"is unknown ({why}); it is not run again")
        ran = "ran to its end while adopted" if adopted else "ran while no runner watched it"
        self.finish(job, STATUS_FAILED, f"it {ran}, but its exit status is unknown ({why}): "
                    f"see its log {job.log_path}, and run 'spacrq queue restart-failed' if it "
                    "must run again", "OutcomeUnknown", None)
        self.after_failure(job)
        self.progress("job_finished", job, i, job.error)

    # -- the queue ---------------------------------------------------------------
    def requested_stop(self, job: Job) -> None:
        if self.stopped:
            return
        request = self.control.request()
        if request == ABORT:
            self.stopped, self.state = "aborted by request", "aborted"
        elif request == STOP_AFTER_JOB or (self.stop_flag is not None and self.stop_flag()):
            self.stopped, self.state = f"stopped by request after job {job.id}", "stopped"

    def _logs_replaced_by_link(self) -> None:
        """The logs folder became a symbolic link while the queue ran (it is refused at the
        start): no job starts, for its log, exit record and settings would be written
        through it; the queue stops, its state in the queue file (beside the folder)."""
        problem = linked_logs(self._root) if self.writer is not None else ""
        if problem and not self.stopped:
            self.stopped = (f"{problem}, then 'spacrq queue resume'; it was replaced while "
                            "the queue ran, so the jobs left were not run")
            self.state = "stopped"

    def run(self) -> None:
        i = 0
        while i < len(self.queue.jobs):
            job = self.queue.jobs[i]
            i += 1
            self._at = i
            if job.status in (STATUS_PENDING, STATUS_NOT_RUN, STATUS_RUNNING):
                self._logs_replaced_by_link()
            if not self.stopped and job.status == STATUS_RUNNING:
                self.take_over(i, job)
                self.requested_stop(job)
            elif not self.stopped and job.status in (STATUS_PENDING, STATUS_NOT_RUN):
                self.run_job(i, job)
                self.requested_stop(job)
            elif self.stopped and job.status in (STATUS_PENDING, STATUS_RUNNING):
                job.status = STATUS_NOT_RUN
                self.persist(job, "status")
        if self.stopped and self.state == "finished":
            self.state = "stopped"

    def interrupted(self) -> None:
        """Ctrl-C in-process: the job at hand failed, the rest did not run, all of it saved."""
        for job in self.queue.jobs:
            if job.status == STATUS_RUNNING:
                job.process = None
                self.finish(job, STATUS_FAILED, INTERRUPTED, "KeyboardInterrupt", job.exit_code)
                adopt.note(job, f"# {INTERRUPTED} at {job.finished}")
            elif job.status == STATUS_PENDING:
                job.status = STATUS_NOT_RUN
                self.persist(job, "status")
        self.stopped, self.state = INTERRUPTED + "; the remaining jobs were not run", "aborted"


def _keep_record_small(logs: Path, queue: Queue, locked: bool) -> None:
    """Rewrite the queue's outgrown exit record with only what its jobs may still be asked
    about (see :mod:`spacrq.queue.compact`), before any job starts: under the runner lock,
    which the caller holds (``locked``) or which is taken for it — a queue another runner
    runs is left alone."""
    lock = None
    if not locked:
        try:
            lock = RunnerLock(logs).acquire()
        except QueueError:
            return
    try:
        said = compact.compact_exit_record(logs, queue.jobs)
    finally:
        if lock is not None:
            lock.release()
    if said:
        print(f"spacrq: {said}", file=sys.stderr, flush=True)


def _wait_to_save(run: "_Run", release_lock: Callable[[], None] | None,
                  take_more: bool) -> list[Job]:
    """The queue ended and its state could not be saved anywhere a command reads it — not
    the file, not its journal, not even a rescue copy (a full disk without room kept, a
    share that went away): were the runner to exit now, ``resume`` would run again every
    job that ended since.  So it keeps trying — waiting 1 s, then twice as long each time
    up to 30 s — holding the queue, until a save succeeds (the jobs added meanwhile, if
    any, returned to be run) or an abort is asked from now on (``spacrq queue stop --now``,
    or a signal); a runner signalled before (a shutdown) does not wait.  Its log says
    which."""
    writer, control = run.writer, run.control
    if writer is None or control.signalled or not writer.unsaved() or writer.rescue():
        return []
    since = writer.failed_at
    lost = (f"the jobs that ended since {since} would run again on resume" if not
            writer.in_memory else f"its copy ({writer.in_memory}) would then be all there is "
            f"of the jobs that ended since {since}: spacrq commands read it, but a restart of "
            "the machine may lose it, and they would then run again on resume")
    print(f"spacrq: the queue's final state could not be saved on disk ({writer.problem}): "
          "it is only in memory, so the runner keeps trying, every few seconds, "
          "until it can be (free space on the disk, bring the share back) or until it is "
          f"asked to abort (spacrq queue stop --now, or SIGTERM to process {os.getpid()}); "
          f"{lost}", file=sys.stderr, flush=True)
    mark = control.mark()
    delay, longest = SAVE_RETRY_SECONDS
    tries, added = 0, []
    while True:
        until = time.monotonic() + delay
        while time.monotonic() < until:
            if control.aborted_since(mark):
                print("spacrq: asked to abort, so the final state was not saved on disk: "
                      + (f"it is kept as {writer.in_memory}, which spacrq commands read "
                         "and the first that can writes into the file (a restart of the "
                         "machine may lose it)" if writer.in_memory else
                         f"the jobs that ended since {since} run again on resume"),
                      file=sys.stderr, flush=True)
                return []
            time.sleep(min(0.25, max(0.0, until - time.monotonic())))
        tries += 1
        if added:  # (jobs added meanwhile: the state is written first, then they run)
            added += writer.write(durable=True)
        else:
            added = writer.finish(release_lock, take_more)
            if added:
                added += writer.write(durable=True)
        if not writer.problem:
            more = (f"; the {len(added)} job(s) added meanwhile run now" if added else "")
            print(f"spacrq: the final state was saved after {tries} more "
                  f"{'try' if tries == 1 else 'tries'}; nothing was lost{more}",
                  file=sys.stderr, flush=True)
            return added
        if run.heartbeat is not None:  # (after the try: the room freed goes to the state)
            _safe(run.heartbeat)
        delay = min(delay * 2, longest)


def _exit_record_room(logs: Path, nbytes: int) -> None:
    """Keep room past the end of the exit record, so that a disk that fills in the night
    cannot refuse the lines saying how its jobs ended (see :mod:`spacrq.queue.room`; the
    journal's writer says when none can be kept in this folder).  It is not given back
    when the run ends: a keeper of an earlier run may still append to the record, and
    cutting the file to its end could cut such a line; the room stays, and the next run
    keeps it from the new end (a record rewritten by :mod:`spacrq.queue.compact` starts
    without), so it never exceeds one run's."""
    try:
        fd = open_append(str(logs / EXIT_RECORD))
    except OSError:
        return  # (the supervisor says what is wrong with it, at the first job)
    try:
        keep_room(fd, nbytes)
    finally:
        os.close(fd)


def run_queue(queue: Queue, path: str | os.PathLike | None = None, *,
              on_error: str | None = None, log_dir: str | os.PathLike | None = None,
              max_consecutive_failures: Any = _UNSET, on_progress: Callable | None = None,
              runner: Runner | None = None, stop_flag: Callable[[], bool] | None = None,
              force: bool = False, echo: bool = False, control: Control | None = None,
              heartbeat: Callable[[], None] | None = None, durable: bool = True,
              persistence: str | None = None, loaded_key: tuple | None = None,
              release_lock: Callable[[], None] | None = None,
              supervisor: Supervisor | None = None, wait_to_save: bool = False) -> QueueResult:
    """Run ``queue`` top to bottom, one job at a time, and report on all of it.

    :param path: the queue file, kept current after every transition (without
        it a run cannot be resumed).
    :param runner: ``(job, settings_path, log_path) -> exit code``, injected by
        tests and in-process callers; by default each job is its own process.
        A runner that raises fails that job (exit code 1, the traceback in its
        log) and the queue goes on.
    :param stop_flag: polled between jobs; True stops after the running job.
    :param persistence: ``"file"`` or ``"journal"`` to force a mode (see
        :mod:`spacrq.queue.persist`); by default the queue's size decides.
    :param loaded_key: :func:`spacrq.queue.store.file_key` of ``path`` when
        ``queue`` was read from it, so jobs added to the file since are taken in.
    :param release_lock: the runner lock's release, called with the last write.
    :param supervisor: the job supervisor, when the caller started it early (it is closed here).
    :param wait_to_save: when the final state cannot be saved anywhere, keep trying until
        it can or an abort is asked (the detached runner's way), rather than return at once
        with the state in the result only.
    :raises QueueError: validation found errors (all listed) and ``force`` is False.
    :raises KeyboardInterrupt: after the job at hand was recorded ``failed``
        ("interrupted by the user"), the rest ``not_run``, and all of it saved:
        a script's Ctrl-C still ends the script.
    """
    if on_error is not None:
        if on_error not in ON_ERROR_CHOICES:
            raise QueueError(f"on_error must be 'continue' or 'stop', not {on_error!r}")
        queue.on_error = on_error
    if max_consecutive_failures is not _UNSET:
        queue.max_consecutive_failures = max_consecutive_failures
    modules = Modules()
    problems = validate_queue(queue, modules)
    errors = [p for p in problems if p.is_error]
    if errors and not force:
        raise QueueError(f"refusing to start: {len(errors)} problem(s) must be fixed first, "
                         "all listed here so they can be fixed in one pass\n"
                         + format_problems(problems, title="queue check"))
    path = str(path) if path else None
    log_root = Path(log_dir) if log_dir else (logs_dir(path) if path else None)
    if log_root is None:
        import tempfile
        log_root = Path(tempfile.mkdtemp(prefix="spacrq_queue_"))
    refuse_linked_logs(log_root)  # before anything is written into it
    try:
        log_root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise QueueError(f"could not create the logs folder {log_root} ({exc.strerror or exc}); "
                         "move what is in its place, or make the folder writable") from None
    if path and control is None:
        clear(logs_dir(path))
    if path and compact.outgrown(log_root, len(queue.jobs)) and log_root == logs_dir(path):
        # (only the queue's own logs folder: its runner lock is the one every runner takes)
        _keep_record_small(log_root, queue, locked=release_lock is not None)
    room = room_for(queue.jobs, EXIT_RECORD_ROOM, str(log_root)) if runner is None else 0
    if room:  # (jobs run by the supervisor, which appends to the exit record)
        _exit_record_room(log_root, room)
    control = control or Control(logs_dir(path) if path else None, report=_report)
    queue.stopped_reason = ""
    result = QueueResult(queue=queue, log_dir=str(log_root), started=now_iso(), path=path or "")
    run = _Run(queue, path, log_root, runner, control, on_progress, stop_flag, durable, heartbeat,
               modules, persistence, loaded_key, supervisor)
    run.exit_room = room
    try:
        if run.writer is not None:
            run.writer.start()
        run.progress("queue_started", None, 0, f"{queue.name}: {run.total} job(s), one at a time")
        try:
            while True:
                run.run()
                queue.stopped_reason = run.stopped
                added = run.writer.finish(release_lock, not run.stopped) if run.writer else []
                if not added and wait_to_save:
                    added = _wait_to_save(run, release_lock, not run.stopped)
                if not added:
                    break
                run.total = len(queue.jobs)  # jobs added to the file while it ran: run them too
                run.by_id.update((job.id, job) for job in added)
        except KeyboardInterrupt:
            run.interrupted()
            queue.stopped_reason = run.stopped
            if run.writer is not None:
                run.writer.finish(release_lock, take_more=False)
            raise
        result.finished, result.stopped_reason, result.state = now_iso(), run.stopped, run.state
        if run.writer is not None:
            result.notes.extend(run.writer.notes)
            result.save_problem = run.writer.final_problem()
            if result.save_problem:
                result.notes.append(result.save_problem)
    finally:
        if run.writer is not None:
            run.writer.close()
        run.processes.supervisor.close()
    if run.stopped:
        run.progress("queue_stopped", None, run.total, run.stopped)
    if path:
        try:
            queue_ledger(result).stamp_file(f"{path}.run_status.json")
        except (OSError, RunFileError) as exc:
            result.notes.append(f"could not stamp the queue's run status: {exc}")
        result.report_path, problem = write_morning_report(path)
        if problem:
            result.notes.append(problem)
    note = notify(queue, result)
    if note:
        result.notes.append(note)
    if echo:
        print(result.summary())
    run.progress("queue_finished", None, run.total, result.headline())
    return result
