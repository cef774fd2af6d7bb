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
* Each transition is one journal line, durable before the next job starts
  (see :mod:`spacrq.queue.store`), so a crash or reboot loses nothing and
  :func:`resume_queue` carries on.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable

from spacrq.modules import ModuleError
from spacrq.problems import format_problems
from spacrq.procs import ProcessRef
from spacrq.queue.control import ABORT, STOP_AFTER_JOB, Control
from spacrq.queue.jobproc import JobCancelled, JobTimeout, ProcessRunner
from spacrq.queue.model import (ON_ERROR_CHOICES, STATUS_FAILED, STATUS_NOT_RUN, STATUS_PENDING,
                                STATUS_RUNNING, STATUS_SKIPPED, STATUS_SUCCESS, Job, Queue,
                                QueueError, id_problem, now_iso)
from spacrq.queue.settings import SettingsError
from spacrq.queue.ending import notify, queue_ledger
from spacrq.queue.stamps import collect, snapshot
from spacrq.queue.store import Journal, logs_dir
from spacrq.queue.summary import Progress, QueueResult, classify_failure
from spacrq.queue.validate import Modules, resolve_job_settings, validate_queue
from spacrq.runfiles import clear, write_json

CANCELLED = "cancelled safely; run this job again to resume"
#: The queue file is rewritten after this many seconds with transitions pending…
CHECKPOINT_SECONDS = 60.0
#: …or once the journal holds four lines per job of the queue (a job writes
#: about three), and at least this many: a rewrite costs O(jobs), so it is
#: paid once per O(jobs) lines and the cost per job stays flat however long
#: the queue, while replaying the journal never costs more than reading the file.
CHECKPOINT_MIN_LINES = 256
_UNSET: Any = object()

Runner = Callable[[Job, str, str], int]


def _safe(fn: Callable[..., Any] | None, *args: Any) -> None:
    """A progress callback must never take the queue down with it."""
    if fn is None:
        return
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 — reported, the night goes on
        print(f"spacrq: a progress callback raised {type(exc).__name__}: {exc}", file=sys.stderr)


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


class _Run:
    """The state of one pass over a queue (kept out of run_queue to keep it readable)."""

    def __init__(self, queue: Queue, path: str | None, log_root: Path, runner: Runner | None,
                 control: Control, on_progress: Callable | None, stop_flag: Callable | None,
                 durable: bool, heartbeat: Callable[[], None] | None,
                 modules: Modules) -> None:
        self.queue, self.path, self.log_root = queue, path, log_root
        self.control, self.on_progress, self.stop_flag = control, on_progress, stop_flag
        self.modules = modules
        self.journal = Journal(queue, path, durable=durable) if path else None
        self.injected = runner
        self.processes = ProcessRunner(control=control, on_spawn=self._spawned,
                                       heartbeat=heartbeat)
        self.total = len(queue.jobs)
        self.by_id = {job.id: job for job in queue.jobs}
        self.width = max(2, len(str(self.total)))
        self.consecutive = 0
        self.stopped = ""
        self.state = "finished"
        self.last_checkpoint = time.monotonic()
        self.checkpoint_seq = self.journal.seq if self.journal is not None else 0
        self.ran_with = {"host": socket.gethostname(), "python": sys.executable,
                         "runner_pid": os.getpid()}

    # -- persistence -----------------------------------------------------------
    def persist(self, job: Job, *fields: str, sync: bool = True) -> None:
        if self.journal is not None:
            self.journal.job(job, fields, sync)

    def maybe_checkpoint(self) -> None:
        if self.journal is None:
            return
        if self.stopped:  # nothing may wait for the next job's line: there is none
            self.journal.flush()
        lines = self.journal.seq - self.checkpoint_seq
        if lines >= max(CHECKPOINT_MIN_LINES, 4 * self.total) or (
                lines and time.monotonic() - self.last_checkpoint > CHECKPOINT_SECONDS):
            self.journal.checkpoint()
            self.last_checkpoint = time.monotonic()
            self.checkpoint_seq = self.journal.seq

    def _spawned(self, job: Job, ref: ProcessRef) -> None:
        job.process = ref.to_dict()
        self.persist(job, "process", sync=False)

    def progress(self, event: str, job: Job | None, i: int, message: str = "") -> None:
        _safe(self.on_progress, Progress(event, job.id if job else "", i, self.total,
                                         job.status if job else "", message))

    # -- one job -----------------------------------------------------------------
    def finish(self, job: Job, status: str, error: str = "", kind: str = "",
               code: int | None = None) -> None:
        job.status, job.error, job.failure_kind, job.exit_code = status, error, kind, code
        job.finished = now_iso()
        job.process = None
        self.persist(job, "status", "error", "failure_kind", "exit_code", "finished",
                     "process", "run_status", "attempts", sync=False)

    def fail_early(self, job: Job, i: int, kind: str, message: str) -> None:
        job.started = now_iso()
        self.finish(job, STATUS_FAILED, message, kind, 2)
        self.persist(job, "started", sync=False)
        self.after_failure(job)
        self.progress("job_finished", job, i, job.error)

    def after_failure(self, job: Job) -> None:
        self.consecutive += 1
        limit = self.queue.max_consecutive_failures
        if self.queue.on_error == "stop":
            self.stopped = (f"job {job.id} failed and on_error is 'stop', so the remaining jobs "
                            f"were not run: {job.error}")
        elif limit and self.consecutive >= limit:
            self.stopped = _systematic(self.consecutive)

    def run_job(self, i: int, job: Job) -> None:
        """Run one job to its verdict: skipped, failed early, or its attempts' outcome."""
        if self._unsafe_id(job) or self._skipped(i, job):
            return
        try:
            spec = self.modules.spec(job.module)
            if spec is None:
                raise SettingsError(f"unknown module {job.module!r}")
            settings = resolve_job_settings(job, self.modules)
        except (SettingsError, ModuleError) as exc:
            return self.fail_early(job, i, "ConfigurationError", str(exc))
        late = [p for p in spec.check(settings) if p.is_error]  # deferred inputs, checked now
        if late:
            return self.fail_early(job, i, "ConfigurationError",
                                   "; ".join(f"{p.message} (fix: {p.fix})" for p in late))
        settings_path = str(self.log_root / f"{job.id}.settings.json")
        if spec.name != "command" or self.injected is not None:
            write_json(settings_path, settings, durable=False)
        job.log_path = str(self.log_root / f"{i:0{self.width}d}_{job.id}.log")
        job.attempts, job.run_status = 0, None
        folders = spec.output_folders(settings)
        before = snapshot(folders) if folders else {}
        while True:
            self._started(i, job)
            try:
                if self.injected is not None:
                    code = int(self.injected(job, settings_path, job.log_path))
                else:
                    code = self.processes.run(job, spec, settings, settings_path, job.log_path)
                kind = message = ""
            except JobCancelled:
                return self._cancelled(i, job)
            except JobTimeout as exc:
                code, kind, message = -1, "Timeout", str(exc)
            if code == 0:
                return self._succeeded(i, job, collect(folders, before) if folders else None)
            if not kind:
                kind, message = classify_failure(code, job.log_path)
            if job.attempts <= job.retries and not self.control.request():
                self._retrying(job, kind, message)
                continue
            job.run_status = collect(folders, before) if folders else None
            self.finish(job, STATUS_FAILED, f"{message} (exit code {code}; log {job.log_path})",
                        kind, code)
            self.after_failure(job)
            self.progress("job_finished", job, i, job.error)
            return

    def _unsafe_id(self, job: Job) -> bool:
        """Only reachable with ``force=True``: an id that names files outside the logs folder."""
        problem = id_problem(job.id)
        if problem:
            job.status, job.error = STATUS_FAILED, problem
            job.failure_kind, job.finished = "ConfigurationError", now_iso()
            self.persist(job, "status", "error", "failure_kind", "finished", sync=False)
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
        self.persist(job, "status", "error", "finished", sync=False)
        self.progress("job_skipped", job, i, job.error)
        return True

    def _started(self, i: int, job: Job) -> None:
        job.attempts += 1
        job.status, job.started, job.finished, job.error = STATUS_RUNNING, now_iso(), "", ""
        job.exit_code, job.failure_kind = None, ""
        job.ran_with = dict(self.ran_with, cwd=job.cwd or os.getcwd())
        self.persist(job, "status", "started", "finished", "error", "exit_code",
                     "failure_kind", "log_path", "attempts", "run_status", "ran_with")
        self.progress("job_started", job, i, f"[{i}/{self.total}] {job.label}")

    def _cancelled(self, i: int, job: Job) -> None:
        job.status, job.error, job.finished = STATUS_NOT_RUN, CANCELLED, now_iso()
        job.process = None
        self.persist(job, "status", "error", "finished", "process")
        self.stopped, self.state = "aborted by request; the running job was stopped", "aborted"
        self.progress("job_finished", job, i, CANCELLED)

    def _succeeded(self, i: int, job: Job, run_status: dict | None) -> None:
        job.run_status = run_status
        self.finish(job, STATUS_SUCCESS, code=0)
        if job.is_partial:
            rs = job.run_status or {}
            job.error = (f"exited 0 but its run status says {rs.get('n_failed')} of "
                         f"{rs.get('n_attempted')} items failed (PARTIAL)")
            self.persist(job, "error", sync=False)
        self.consecutive = 0
        self.progress("job_finished", job, i, job.error or f"{job.label} finished")

    def _retrying(self, job: Job, kind: str, message: str) -> None:
        left = job.retries - job.attempts + 1
        with open(job.log_path, "a", encoding="utf-8") as log:
            log.write(f"\n# attempt {job.attempts} failed ({kind}: {message}); retrying "
                      f"({left} {'retry' if left == 1 else 'retries'} left)\n")

    # -- the queue ---------------------------------------------------------------
    def requested_stop(self, job: Job) -> None:
        if self.stopped:
            return
        request = self.control.request()
        if request == ABORT:
            self.stopped, self.state = "aborted by request", "aborted"
        elif request == STOP_AFTER_JOB or (self.stop_flag is not None and self.stop_flag()):
            self.stopped, self.state = f"stopped by request after job {job.id}", "stopped"

    def run(self) -> None:
        for i, job in enumerate(self.queue.jobs, start=1):
            if not self.stopped and job.status in (STATUS_PENDING, STATUS_NOT_RUN, STATUS_RUNNING):
                self.run_job(i, job)
                self.requested_stop(job)
                self.maybe_checkpoint()
            elif self.stopped and job.status in (STATUS_PENDING, STATUS_RUNNING):
                job.status = STATUS_NOT_RUN
                self.persist(job, "status", sync=False)
        if self.journal is not None:
            self.journal.flush()
        if self.stopped and self.state == "finished":
            self.state = "stopped"


def _needs_checkpoint(journal: Journal, as_loaded: tuple) -> bool:
    """Whether the queue file must be rewritten before the first job.

    Only when there is something to fold in (a journal left by an earlier
    run), the file does not exist yet, or the run's options changed: a
    rewrite is O(jobs), a cost a short queue should not pay twice.
    """
    queue = journal.queue
    if (queue.on_error, queue.max_consecutive_failures, queue.stopped_reason) != as_loaded:
        return True
    try:
        return not journal.path.exists() or journal.file.stat().st_size > 0
    except OSError:
        return True


def run_queue(queue: Queue, path: str | os.PathLike | None = None, *,
              on_error: str | None = None, log_dir: str | os.PathLike | None = None,
              max_consecutive_failures: Any = _UNSET, on_progress: Callable | None = None,
              runner: Runner | None = None, stop_flag: Callable[[], bool] | None = None,
              force: bool = False, echo: bool = False, control: Control | None = None,
              heartbeat: Callable[[], None] | None = None, durable: bool = True) -> QueueResult:
    """Run ``queue`` top to bottom, one job at a time, and report on all of it.

    :param path: the queue file, kept current after every transition (without
        it a run cannot be resumed).
    :param runner: ``(job, settings_path, log_path) -> exit code``, injected by
        tests; by default each job is its own process.
    :param stop_flag: polled between jobs; True stops after the running job.
    :raises QueueError: validation found errors (all listed) and ``force`` is False.
    """
    as_loaded = (queue.on_error, queue.max_consecutive_failures, queue.stopped_reason)
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
    log_root.mkdir(parents=True, exist_ok=True)
    if path and control is None:
        clear(logs_dir(path))
    control = control or Control(logs_dir(path) if path else None)
    queue.stopped_reason = ""
    result = QueueResult(queue=queue, log_dir=str(log_root), started=now_iso(), path=path or "")
    run = _Run(queue, path, log_root, runner, control, on_progress, stop_flag, durable, heartbeat,
               modules)
    try:
        if run.journal is not None and _needs_checkpoint(run.journal, as_loaded):
            run.journal.checkpoint()
        run.progress("queue_started", None, 0, f"{queue.name}: {run.total} job(s), one at a time")
        run.run()
        queue.stopped_reason = run.stopped
        result.finished, result.stopped_reason, result.state = now_iso(), run.stopped, run.state
        if run.journal is not None:
            run.journal.checkpoint()
    finally:
        if run.journal is not None:
            run.journal.close()
    if run.stopped:
        run.progress("queue_stopped", None, run.total, run.stopped)
    if path:
        try:
            queue_ledger(result).stamp_file(f"{path}.run_status.json")
        except OSError as exc:
            result.notes.append(f"could not stamp the queue's run status: {exc}")
    note = notify(queue, result)
    if note:
        result.notes.append(note)
    if echo:
        print(result.summary())
    run.progress("queue_finished", None, run.total, result.headline())
    return result
