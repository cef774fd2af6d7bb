"""Which block may run next: readiness, retries, failure and orphans.

The schedule knows nothing about processes; executors ask it for ready
blocks and report back.  Per task it keeps a state per block and a count of
unmet dependencies: overlapping blocks of lower levels in the same task (when
``read_write_conflict``) plus the upstream blocks that write into the block's
read region.  A finished block decrements its dependents; one reaching zero
is ready.  There is no barrier between levels or tasks: a downstream block
starts as soon as exactly the blocks it reads from are done.

A block that fails ``max_retries + 1`` times is failed, and everything that
depends on it — transitively, across tasks — is orphaned.  Tasks that do not
depend on it carry on.
"""
from __future__ import annotations

from collections import deque
from typing import Callable, Iterable

import numpy as np

from spacrq.blockwise.grid import BlockGrid
from spacrq.blockwise.roi import Roi

__all__ = ["WAITING", "READY", "RUNNING", "DONE", "SKIPPED", "FAILED", "ORPHANED",
           "TaskSchedule", "Schedule"]

WAITING, READY, RUNNING, DONE, SKIPPED, FAILED, ORPHANED = range(7)


class TaskSchedule:
    """The blocks of one task and where each stands in this run."""

    def __init__(self, task_id: str, grid: BlockGrid, max_retries: int = 2,
                 check_function: Callable | None = None) -> None:
        self.task_id = task_id
        self.grid = grid
        self.max_retries = int(max_retries)
        self.check_function = check_function
        self.state = np.zeros(grid.size, dtype=np.int8)
        self.deps = grid.conflict_counts().astype(np.int32)
        self.attempts: dict[int, int] = {}
        self.errors: dict[int, str] = {}
        self.ready: deque[int] = deque()
        self.upstream: list[TaskSchedule] = []
        self.downstream: list[TaskSchedule] = []
        self.done = self.skipped = self.failed = self.orphaned = self.running = 0
        self.failed_attempts = 0

    @property
    def total(self) -> int:
        return self.grid.size

    @property
    def has_dependents(self) -> bool:
        return self.grid.conflicts or bool(self.downstream)

    def resolved(self) -> bool:
        return self.done + self.skipped + self.failed + self.orphaned == self.total

    def remaining(self) -> int:
        """Blocks that may still need a worker (waiting, ready or running)."""
        return self.total - (self.done + self.skipped + self.failed + self.orphaned)

    def add_upstream(self, upstream: "TaskSchedule") -> None:
        self.upstream.append(upstream)
        upstream.downstream.append(self)
        self.deps += self.grid.upstream_counts(upstream.grid)

    def _write_box(self, spatial_id: int) -> Roi:
        """The unclipped write region, the box dependency counts were made with."""
        g = self.grid
        coord = g.coord_of(spatial_id)
        return g.write_roi.shift([o + c * s for o, c, s in zip(g.origin, coord, g.stride)])

    def dependents(self, spatial_id: int) -> Iterable[tuple["TaskSchedule", int]]:
        if self.grid.conflicts:
            for other in self.grid.later_neighbours(spatial_id):
                yield self, other
        if self.downstream:
            box = self._write_box(spatial_id)
            for down in self.downstream:
                for other in down.grid.readers_of(box):
                    yield down, other


class Schedule:
    """All tasks of one run."""

    def __init__(self, tasks: list[TaskSchedule]) -> None:
        self.tasks = tasks
        self.by_id = {t.task_id: t for t in tasks}

    # -- start ---------------------------------------------------------------
    def start(self, done_masks: dict[str, np.ndarray]) -> None:
        """Mark blocks already done as skipped, then queue every block free to run."""
        for task in self.tasks:
            mask = done_masks.get(task.task_id)
            if mask is None or not mask.any():
                continue
            ids = np.flatnonzero(mask)
            task.state[ids] = SKIPPED
            task.skipped = int(ids.size)
            if task.has_dependents:
                for sid in ids.tolist():
                    for dep_task, dep in task.dependents(sid):
                        dep_task.deps[dep] -= 1
        for task in self.tasks:
            free = np.flatnonzero((task.state == WAITING) & (task.deps <= 0))
            task.state[free] = READY
            task.ready.extend(free.tolist())

    # -- handing out ------------------------------------------------------------
    def take(self, task: TaskSchedule, count: int) -> list[int]:
        """Up to ``count`` ready blocks of ``task``, now running.

        A ``check_function`` saying a block is already done makes it skipped
        here, in the scheduler, before any worker sees it.
        """
        out: list[int] = []
        ready = task.ready
        check = task.check_function
        while ready and len(out) < count:
            sid = ready.popleft()
            if check is not None:
                try:
                    already = bool(check(task.grid.block(sid, task.task_id)))
                except Exception as exc:
                    task.errors.setdefault(sid, f"check_function raised {type(exc).__name__}: {exc}")
                    already = False
                if already:
                    task.state[sid] = SKIPPED
                    task.skipped += 1
                    self._release(task, sid)
                    continue
            out.append(sid)
        if out:
            task.state[out] = RUNNING
            task.running += len(out)
        return out

    # -- results -------------------------------------------------------------------
    def _release(self, task: TaskSchedule, spatial_id: int) -> None:
        for dep_task, dep in task.dependents(spatial_id):
            left = dep_task.deps[dep] - 1
            dep_task.deps[dep] = left
            if left <= 0 and dep_task.state[dep] == WAITING:
                dep_task.state[dep] = READY
                dep_task.ready.append(int(dep))

    def completed(self, task: TaskSchedule, ids: list[int]) -> None:
        """Blocks that finished without error."""
        task.state[ids] = DONE
        task.done += len(ids)
        task.running -= len(ids)
        if task.has_dependents:
            for sid in ids:
                self._release(task, sid)

    def failed_attempt(self, task: TaskSchedule, spatial_id: int, error: str) -> bool:
        """One failed attempt; True when the block is now failed for good."""
        task.running -= 1
        task.failed_attempts += 1
        tries = task.attempts.get(spatial_id, 0) + 1
        task.attempts[spatial_id] = tries
        task.errors[spatial_id] = error
        if tries <= task.max_retries:
            task.state[spatial_id] = READY
            task.ready.append(spatial_id)
            return False
        task.state[spatial_id] = FAILED
        task.failed += 1
        self._orphan_from(task, spatial_id)
        return True

    def returned_unrun(self, task: TaskSchedule, ids: Iterable[int]) -> None:
        """Blocks handed to a worker that went away before running them: no charge."""
        back = [int(s) for s in ids]
        if not back:
            return
        task.state[back] = READY
        task.running -= len(back)
        task.ready.extendleft(reversed(back))

    def _orphan_from(self, task: TaskSchedule, spatial_id: int) -> None:
        stack = [(task, spatial_id)]
        while stack:
            t, sid = stack.pop()
            for dep_task, dep in t.dependents(sid):
                if dep_task.state[dep] == WAITING:
                    dep_task.state[dep] = ORPHANED
                    dep_task.orphaned += 1
                    stack.append((dep_task, int(dep)))

    def abandon(self, task: TaskSchedule, reason: str) -> int:
        """No worker can run ``task`` any more: its unrun blocks fail, dependents orphan."""
        count = 0
        while task.ready:
            sid = task.ready.popleft()
            task.state[sid] = FAILED
            task.failed += 1
            task.errors.setdefault(sid, reason)
            count += 1
            self._orphan_from(task, sid)
        waiting = np.flatnonzero(task.state == WAITING)
        for sid in waiting.tolist():
            if task.state[sid] == WAITING:
                task.state[sid] = ORPHANED
                task.orphaned += 1
                self._orphan_from(task, sid)
        return count

    # -- overall -------------------------------------------------------------------
    def finished(self) -> bool:
        return all(t.resolved() for t in self.tasks)

    def stalled(self) -> bool:
        """Nothing ready, nothing running, yet blocks remain: a dependency that can
        never be met (a bug, guarded so a run can never hang on it)."""
        return (not self.finished() and not any(t.ready for t in self.tasks)
                and not any(t.running for t in self.tasks))
