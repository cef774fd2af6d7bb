"""Running blockwise tasks: ``run_blockwise(tasks) -> report``.

This module wires the pieces together for one run: it opens each task's
tracking store (refusing a mismatched one before any worker starts), builds
the schedule with every block already done marked skipped, hands the run to
an executor (``local`` worker processes, ``serial`` in this process, or
``dask``), publishes live progress, and at the end flushes the store,
builds each task's report and appends it to ``runs.jsonl``.

The returned :class:`BlockwiseRun` *is* the run's ``RunReport`` (the object
model and the JSON of ``runs.jsonl``), plus what the caller needs to decide: ``succeeded``
is False whenever any block failed or was orphaned — a partial run never
reads as success — and ``problems()`` says what went wrong in sentences.
"""
from __future__ import annotations

import logging
import os
import stat
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from spacrq.blockwise.figures import TaskFigures
from spacrq.blockwise.progress import progress_path, publish
from spacrq.blockwise.report import RUNS_FILE, RunReport, TaskReport, append_run
from spacrq.blockwise.scheduler import Schedule, TaskSchedule
from spacrq.blockwise.task import Task
from spacrq.blockwise.ownfiles import open_own
from spacrq.blockwise.tracking import ALL_ARRAYS, TrackingError, TrackingStore
from spacrq.runfiles import RunFileError, append_text

__all__ = ["run_blockwise", "BlockwiseRun", "TaskRun", "Run", "EXECUTORS"]

log = logging.getLogger("spacrq.blockwise")
EXECUTORS = ("local", "serial", "dask")
PROGRESS_INTERVAL = 0.25
FLUSH_INTERVAL = 2.0


class BlockwiseRun(RunReport):
    """The report of one run, with its verdict.

    ``outcome[task_id]`` holds the block counts of this run (total, done,
    skipped, failed, orphaned) and ``errors[task_id]`` the last error of each
    failed block (spatial id -> message).
    """

    def __init__(self, tasks: dict, outcome: dict, errors: dict, interrupted: bool = False) -> None:
        super().__init__(tasks)
        self.outcome = outcome
        self.errors = errors
        self.interrupted = interrupted

    @property
    def succeeded(self) -> bool:
        if self.interrupted:
            return False
        return all(o["failed"] == 0 and o["orphaned"] == 0 and
                   o["done"] + o["skipped"] == o["total"] for o in self.outcome.values())

    def __bool__(self) -> bool:
        return self.succeeded

    def problems(self) -> list[str]:
        """One sentence per task that did not finish, naming where to look."""
        out = []
        for tid, o in self.outcome.items():
            unfinished = o["total"] - o["done"] - o["skipped"]
            if not unfinished:
                continue
            parts = []
            if o["failed"]:
                first = next(iter(self.errors.get(tid, {}).items()), None)
                why = f" (block {first[0]}: {first[1]})" if first else ""
                parts.append(f"{o['failed']} block(s) failed{why}")
            if o["orphaned"]:
                parts.append(f"{o['orphaned']} block(s) orphaned behind failed ones")
            rest = unfinished - o["failed"] - o["orphaned"]
            if rest:
                parts.append(f"{rest} block(s) not run (the run was stopped)")
            out.append(f"task {tid!r}: " + ", ".join(parts) +
                       f"; see the worker logs in {o['log_dir']} and rerun to retry them")
        return out


@dataclass
class TaskRun:
    """One task within a run: its schedule, figures, store and folders."""

    task: Task
    sched: TaskSchedule
    figures: TaskFigures
    store: TrackingStore | None
    log_dir: Path
    progress_file: Path


class Run:
    """The state executors share: schedule, figures, progress, stop requests."""

    def __init__(self, task_runs: list[TaskRun], schedule: Schedule,
                 stop_requested: Callable[[], bool] | None = None) -> None:
        self.tasks = task_runs
        self.schedule = schedule
        self.run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.started_at = time.time()
        self._stop_requested = stop_requested
        self._stop_checked = 0.0
        self.stop_seen = False
        self._next_progress = 0.0
        self._next_flush = time.monotonic() + FLUSH_INTERVAL
        self.by_sched = {id(tr.sched): tr for tr in task_runs}

    # -- results ------------------------------------------------------------------
    def results(self, tr: TaskRun, worker_id: int, results: list, sent_at: float,
                returned_at: float, worker_life: bool = True) -> None:
        ok, failed = tr.figures.results(worker_id, results, sent_at, returned_at, worker_life)
        if ok:
            self.schedule.completed(tr.sched, ok)
        for sid, error in failed:
            self.failure(tr, sid, error)

    def failure(self, tr: TaskRun, spatial_id: int, error: str) -> None:
        tr.figures.failure(spatial_id)
        final = self.schedule.failed_attempt(tr.sched, spatial_id, error)
        if final:
            self.log(tr, f"block {spatial_id} failed for good after {tr.sched.max_retries + 1} "
                         f"attempt(s): {error}")

    def log(self, tr: TaskRun, message: str) -> None:
        """A line in the task's scheduler.log (never through a link planted there) and on stderr."""
        log.warning("%s: %s", tr.task.task_id, message)
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n"
        path = tr.log_dir / "scheduler.log"
        try:
            append_text(path, line, durable=False)
        except RunFileError:
            try:  # a link or FIFO in its place: replaced by a file of its own, and said so
                fd, note = open_own(path)
                with os.fdopen(fd, "a", encoding="utf-8") as handle:
                    handle.write((f"{time.strftime('%Y-%m-%d %H:%M:%S')} {note}\n" if note else "")
                                 + line)
            except (RunFileError, OSError) as exc:
                log.warning("%s: %s", tr.task.task_id, exc)
        except OSError as exc:
            log.warning("%s: could not write %s: %s", tr.task.task_id, path, exc.strerror or exc)

    def unstall(self) -> None:
        for tr in self.tasks:
            if not tr.sched.resolved() and not tr.sched.running:
                self.schedule.abandon(tr.sched, "its dependencies can never be met")

    # -- stop requests --------------------------------------------------------------
    def stopping(self) -> bool:
        """True once the caller asked the run to stop at the next block boundary."""
        if self.stop_seen or self._stop_requested is None:
            return self.stop_seen
        now = time.monotonic()
        if now - self._stop_checked >= 0.2:
            self._stop_checked = now
            try:
                self.stop_seen = bool(self._stop_requested())
            except Exception:
                self.stop_seen = False
        return self.stop_seen

    # -- periodic work --------------------------------------------------------------
    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now >= self._next_progress:
            self._next_progress = now + PROGRESS_INTERVAL
            for tr in self.tasks:
                publish(tr.progress_file, run_id=self.run_id, state="running",
                        started_at=self.started_at, sched=tr.sched, figures=tr.figures,
                        ran_on=getattr(self, "ran_on", None))
        if now >= self._next_flush:
            self._next_flush = now + FLUSH_INTERVAL
            for tr in self.tasks:
                if tr.store is not None:
                    tr.store.flush(background=True)


def _all_tasks(tasks: Iterable[Task]) -> list[Task]:
    """The tasks and their upstream tasks, upstream first, each once."""
    order: list[Task] = []
    seen: dict[int, str] = {}

    def visit(task: Task, path: tuple) -> None:
        if id(task) in path:
            raise ValueError(f"task {task.task_id!r} depends on itself through its upstream tasks")
        if id(task) in seen:
            return
        for up in task.upstream_tasks:
            visit(up, path + (id(task),))
        seen[id(task)] = task.task_id
        order.append(task)

    if isinstance(tasks, Task):
        tasks = [tasks]
    for task in tasks:
        if not isinstance(task, Task):
            raise TypeError(f"run_blockwise takes spacrq Tasks, not {type(task).__name__}")
        visit(task, ())
    ids = [t.task_id for t in order]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ValueError(f"two different tasks are called {sorted(dupes)[0]!r}; give each task its own id")
    return order


def run_blockwise(tasks, *, executor: str = "local", log_dir=None,
                  stop_requested: Callable[[], bool] | None = None,
                  dask_cluster=None) -> BlockwiseRun:
    """Run ``tasks`` (and their upstream tasks) to the end; returns the report.

    :param executor: ``"local"`` (worker processes, the default), ``"serial"``
        (everything in this process, for debugging) or ``"dask"``.
    :param log_dir: where worker logs go for tasks without a tracking store
        (``<log_dir>/<task_id>/``, default ``./spacrq_logs``); tasks with a
        store log into ``<store>/logs/``.
    :param stop_requested: polled a few times a second; when it returns True no
        new block starts, blocks in flight finish, and the run ends interrupted.
    :param dask_cluster: for ``executor="dask"``: a scheduler address, a
        ``distributed.Client``, a ``LocalCluster`` or a dask-jobqueue cluster.
    :raises TrackingError: a tracking store is corrupt or for another layout.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    order = _all_tasks(tasks)
    base_logs = Path(log_dir) if log_dir else Path.cwd() / "spacrq_logs"
    folders: dict[str, tuple[Path, Path]] = {}
    for task in order:
        if task.tracking_path is not None:
            folders[task.task_id] = (task.tracking_path, task.tracking_path / "logs")
        else:
            folders[task.task_id] = (base_logs / task.task_id, base_logs / task.task_id)
        _make_log_folder(folders[task.task_id][1])
    locks = _hold_run_locks(order, folders)
    try:
        return _run_held(order, folders, executor, stop_requested, dask_cluster)
    finally:
        for fd in locks:
            os.close(fd)  # closing releases the lock


RUN_LOCK = ".run.lock"


def _hold_run_locks(order: list[Task], folders: dict) -> list[int]:
    """Lock each task's folder for this run; TrackingError when another run holds one.

    Two runs of one task at once would each do every block (the other's done
    marks are not on disk yet), overwrite each other's store chunks and
    fight over ``progress.json``: the second is refused before it starts.
    """
    import fcntl
    held: list[int] = []
    try:
        for task in order:
            lock = folders[task.task_id][1] / RUN_LOCK
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                             | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0), 0o644)
            except OSError as exc:
                raise TrackingError(f"{lock} cannot be opened ({exc.strerror or exc}); spacrq "
                                    "does not write through links: remove it (the run makes "
                                    "it itself)") from None
            held.append(fd)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise TrackingError(f"{lock} is not a regular file; remove it (the run makes "
                                    "it itself)")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                other = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                raise TrackingError(
                    f"task {task.task_id!r} is already being run (process {other or 'unknown'}) "
                    f"from {folders[task.task_id][0]}; wait for that run to end, or watch it with "
                    f"'spacrq report {folders[task.task_id][0]} --follow'") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except BaseException:
        for fd in held:
            os.close(fd)
        raise
    return held


def _run_held(order: list[Task], folders: dict, executor: str, stop_requested,
              dask_cluster) -> BlockwiseRun:
    """The run itself, once every task's folder is locked for it."""
    pool = None
    if executor == "local":
        from spacrq.blockwise.local import LocalPool
        pool = LocalPool(order, {tid: logs for tid, (_, logs) in folders.items()})
        for task in order:  # first runs: workers boot while the stores open
            fresh = task.tracking_path is None or not (task.tracking_path / "zarr.json").exists()
            if fresh and task.check_function is None:
                pool.prestart(task)
    try:
        task_runs = _task_runs(order, folders)
    except BaseException:
        if pool is not None:
            pool.discard()
        raise
    schedule = Schedule([tr.sched for tr in task_runs])
    schedule.start({tr.task.task_id: tr.store.done_mask() for tr in task_runs if tr.store is not None})
    run = Run(task_runs, schedule, stop_requested)
    run.tick(force=True)
    interrupted = False
    restore = _sigterm_as_interrupt()
    try:
        if executor == "serial":
            from spacrq.blockwise.serial import run_serial
            run_serial(run)
        elif executor == "local":
            from spacrq.blockwise.local import run_local
            run_local(run, pool)
        else:
            from spacrq.blockwise.dask_executor import run_dask
            run_dask(run, dask_cluster)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        restore()
        result = _finish(run, interrupted or run.stop_seen)
    return result


def _make_log_folder(logs: Path) -> None:
    """The folder a task's logs and worker slots go in; refused when it is a link.

    Everything under it is written by name, so a ``logs`` planted as a link
    would put the run's files wherever it points.
    """
    if logs.is_symlink():
        raise TrackingError(f"{logs} is a symbolic link; spacrq does not write through links: "
                            "remove the link (the run makes the folder itself)")
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrackingError(f"the log folder {logs} cannot be made ({exc.strerror or exc}); "
                            "check that its parent folder is writable") from None
    if not logs.is_dir():
        raise TrackingError(f"{logs} is not a folder; move it away so the run can keep its "
                            "logs there")


def _refuse_folder_links(store: Path) -> None:
    """Refuse a store holding a link to a folder where the run writes (an array, its chunks).

    Chunk files are replaced, never written through, so a linked *file* is
    harmless; a linked *folder* would take the run's chunks and metadata
    wherever it points.
    """
    for name in ALL_ARRAYS:
        top = store / name
        if top.is_symlink():
            found = top
        elif not top.is_dir():
            continue
        else:
            found = next((Path(root) / d for root, dirs, _ in os.walk(top) for d in dirs
                          if os.path.islink(os.path.join(root, d))), None)
        if found is not None:
            raise TrackingError(f"{found} in tracking store {store} is a symbolic link to a "
                                "folder; spacrq does not write through links: remove the link, "
                                "or delete the store to start the task over")


def _sigterm_as_interrupt() -> Callable[[], None]:
    """While a run goes, SIGTERM (the queue's Abort, a shutdown) ends it like Ctrl-C:
    workers are stopped, the store flushed and an ``interrupted`` report written.
    Returns the function restoring the previous handler (a no-op off the main thread)."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        return lambda: None
    return lambda: signal.signal(signal.SIGTERM, previous)


def _task_runs(order: list[Task], folders: dict) -> list[TaskRun]:
    """Open every store (refusing a bad one before any block runs) and build the schedules."""
    task_runs: list[TaskRun] = []
    by_task: dict[int, TaskSchedule] = {}
    for task in order:
        folder, logs = folders[task.task_id]
        store = None
        if task.tracking_path is not None:
            _refuse_folder_links(task.tracking_path)
            if (task.tracking_path / "zarr.json").exists():  # a run before this one
                from spacrq.blockwise.report_store import record_unreported_run
                noted = record_unreported_run(task.tracking_path)
                if noted:
                    print(f"spacrq: {task.task_id}: {noted}", file=sys.stderr, flush=True)
            store = TrackingStore.open(task.tracking_path, task.task_id, task.grid,
                                       task.resource_tracking, writes=getattr(task, "writes", None))
        task._log_dir = logs if store is None else None
        sched = TaskSchedule(task.task_id, task.grid, task.max_retries, task.check_function)
        for up in task.upstream_tasks:
            sched.add_upstream(by_task[id(up)])
        by_task[id(task)] = sched
        figures = TaskFigures(task.task_id, store, task.resource_tracking)
        task_runs.append(TaskRun(task, sched, figures, store, logs, progress_path(folder)))
    return task_runs


def _finish(run: Run, interrupted: bool) -> BlockwiseRun:
    """Flush the stores, build and append the reports, publish the final progress."""
    reports: dict[str, TaskReport] = {}
    outcome: dict[str, dict] = {}
    errors: dict[str, dict] = {}
    now = time.time()
    for tr in run.tasks:
        s = tr.sched
        tr.figures.finished_at = now
        if tr.store is not None:
            problem = tr.store.close()
            if problem:
                run.log(tr, problem)
        report = tr.figures.report(count=s.total, skipped=s.skipped, failures=s.failed_attempts)
        reports[tr.task.task_id] = report
        counts = {"total": s.total, "done": s.done, "skipped": s.skipped, "failed": s.failed,
                  "orphaned": s.orphaned, "log_dir": str(tr.log_dir)}
        outcome[tr.task.task_id] = counts
        errors[tr.task.task_id] = {sid: s.errors[sid] for sid in sorted(s.errors)
                                   if s.state[sid] == 5}
        tr.task._last_report = report
        ok = s.failed == 0 and s.orphaned == 0 and s.done + s.skipped == s.total
        state = "interrupted" if interrupted and not ok else ("finished" if ok else "failed")
        report.outcome = {"state": state, "run_id": run.run_id,
                          **{k: v for k, v in counts.items() if k != "log_dir"},
                          **getattr(run, "ran_on", {})}  # where it ran (the dask executor says)
        runs_path = (tr.store.path if tr.store is not None else tr.log_dir) / RUNS_FILE
        try:
            append_run(runs_path, report)
        except RunFileError as exc:  # a link planted as runs.jsonl: refused, never followed
            run.log(tr, f"this run's report was not appended: {exc}")
        except OSError as exc:
            run.log(tr, f"could not append to {runs_path}: {exc.strerror or exc}")
        publish(tr.progress_file, run_id=run.run_id, state=state, started_at=run.started_at,
                sched=s, figures=tr.figures, ran_on=getattr(run, "ran_on", None))
    return BlockwiseRun(reports, outcome, errors, interrupted=interrupted)
