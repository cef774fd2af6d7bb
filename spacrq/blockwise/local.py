"""The local executor: worker OS processes on this machine, fed through pipes.

Each task gets up to ``num_workers`` workers of its own (started when it has
ready blocks, released when it has nothing left to run).  The scheduler loop
below is the only place that touches them:

* **Batches, two deep.**  A worker is handed a batch of blocks sized so one
  batch takes ~10 ms, and a second batch is queued behind it, so a worker
  never waits for the scheduler and a no-op block costs microseconds of
  messaging.  With a ``timeout`` batches are one block, one deep, so a block
  is never stuck behind a hung one.
* **A lost worker costs only its block.**  When a worker dies (crash,
  SIGKILL, out of memory) its *slot* says which block it was running: that
  block is charged one failed attempt, the rest of its batches go back to the
  front of the queue uncharged, and a new worker replaces it — up to the
  task's ``max_worker_restarts``.  With no worker left and none allowed, the
  task's remaining blocks fail and their dependents orphan; other tasks go on.
* **Timeouts.**  A block running longer than the task's ``timeout`` has its
  worker killed (exit ``timeout``) and is retried like any failure.
* **Clean endings.**  Workers are asked to stop and their teardown timed;
  one that does not leave within the grace period is killed.  A worker
  interrupted (Ctrl-C, SIGTERM) charges its block nothing: it is simply not done.
"""
from __future__ import annotations

import mmap
import os
import struct
import subprocess
import sys
import time
from collections import deque
from multiprocessing.connection import Connection, wait
from pathlib import Path

from spacrq.blockwise.figures import WorkerLife
from spacrq.blockwise.ownfiles import open_own
from spacrq.blockwise.worker import IDLE, SLOT_FORMAT, SLOT_SIZE
from spacrq.procs import grace_seconds, module_argv
from spacrq.runfiles import RunFileError

__all__ = ["run_local", "LocalPool"]

BATCH_SECONDS = 0.01
MAX_BATCH = 512
#: a worker that has not loaded the process function by then is stuck (a hanging import)
STARTUP_TIMEOUT = float(os.environ.get("SPACRQ_WORKER_STARTUP_TIMEOUT", 120))
_unpack = struct.Struct(SLOT_FORMAT).unpack_from
#: exit codes of a worker stopped by Ctrl-C or SIGTERM rather than by a fault
INTERRUPTED = (130, -2, -15)


class WorkerHandle:
    """The scheduler's side of one worker process."""

    def __init__(self, task, worker_id: int, popen: subprocess.Popen, to_worker: Connection,
                 from_worker: Connection, slot_path: Path, slot: mmap.mmap, life) -> None:
        self.task = task
        self.tr = None
        self.worker_id = worker_id
        self.popen = popen
        self.to_worker = to_worker
        self.from_worker = from_worker
        self.slot_path = slot_path
        self.slot = slot
        self.life = life
        self.ready = False
        self.inflight: deque[list] = deque()
        self.stopping = False
        self.gone = False
        self.exit_kind: str | None = None
        self.suspect: tuple[int, float] | None = None

    def running_block(self) -> tuple[int, float]:
        try:
            return _unpack(self.slot, 0)
        except (ValueError, struct.error):
            return IDLE, 0.0

    def close(self) -> None:
        for conn in (self.to_worker, self.from_worker):
            try:
                conn.close()
            except OSError:
                pass
        try:
            self.slot.close()
        except (ValueError, BufferError):
            pass
        try:
            self.slot_path.unlink()
        except OSError:
            pass


class LocalPool:
    """Workers for every task of one run, and the loop that feeds them.

    Built before the tracking stores are opened (:meth:`prestart` starts the
    first workers of tasks that can begin at once, so their interpreter
    start-up overlaps the scheduler's own set-up); :meth:`attach` then hands
    it the run.
    """

    def __init__(self, tasks, log_dirs: dict) -> None:
        self.run = None
        self.tasks = {t.task_id: t for t in tasks}
        self.log_dirs = log_dirs
        self.workers: list[WorkerHandle] = []
        self.early_notes: list[tuple] = []  # said before the run was attached (prestart)
        self.next_id: dict[str, int] = {t.task_id: 0 for t in tasks}
        self.block_cost: dict[str, float] = {t.task_id: 0.0 for t in tasks}
        self.setups: dict[str, dict] = {}
        for task in tasks:
            payload, main_path = task.function_for_worker()
            self.setups[task.task_id] = {
                "task_id": task.task_id, "function": payload, "main_path": main_path,
                "grid": {"total_roi": task.grid.total_roi, "read_roi": task.grid.read_roi,
                         "write_roi": task.grid.write_roi, "fit": task.grid.fit,
                         "read_write_conflict": task.grid.read_write_conflict},
                "resource_tracking": task.resource_tracking,
                "sys_path": [p for p in sys.path if p],
            }

    def prestart(self, task) -> None:
        for _ in range(min(task.num_workers, task.grid.size)):
            self.spawn(task)

    def attach(self, run) -> None:
        self.run = run
        by_id = {tr.task.task_id: tr for tr in run.tasks}
        for handle in self.workers:
            handle.tr = by_id[handle.task.task_id]
            handle.tr.figures.workers[handle.worker_id] = handle.life
        for task, message in self.early_notes:
            self.run.log(by_id[task.task_id], message)
        self.early_notes = []

    # -- starting workers -------------------------------------------------------------
    def spawn(self, task) -> WorkerHandle | None:
        tid = task.task_id
        worker_id = self.next_id[tid]
        self.next_id[tid] += 1
        life = WorkerLife(worker_id)
        log_dir = self.log_dirs[tid]
        slot_path = log_dir / f".worker-{worker_id}.slot"
        try:  # never through a link planted in the store: a fresh slot, the log appended
            slot_fd, slot_note = open_own(slot_path, fresh=True, mode=0o600)
        except RunFileError as exc:
            return self._not_started(task, worker_id, life, exc)
        try:
            log_fd, log_note = open_own(log_dir / f"worker-{worker_id}.log")
        except RunFileError as exc:
            os.close(slot_fd)
            return self._not_started(task, worker_id, life, exc)
        for note in (slot_note, log_note):
            if note:
                self._say(task, note)
        os.write(slot_fd, struct.pack(SLOT_FORMAT, IDLE, 0.0))
        slot = mmap.mmap(slot_fd, SLOT_SIZE)
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([package_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        try:
            popen = subprocess.Popen(
                module_argv("spacrq.blockwise.worker", str(down_r), str(up_w)),
                stdin=subprocess.DEVNULL, stdout=log_fd, stderr=subprocess.STDOUT,
                pass_fds=(down_r, up_w, slot_fd), env=env, close_fds=True)
        except OSError as exc:
            for fd in (down_r, down_w, up_r, up_w, slot_fd, log_fd):
                os.close(fd)
            slot.close()
            return self._not_started(task, worker_id, life, exc)
        for fd in (down_r, up_w, slot_fd, log_fd):
            os.close(fd)
        life.pid = popen.pid
        life.spawned_at = time.time()
        handle = WorkerHandle(task, worker_id, popen, Connection(down_w, readable=False),
                              Connection(up_r, writable=False), slot_path, slot, life)
        # the slot travels as an open descriptor: the worker never opens it by name
        setup = dict(self.setups[tid], worker_id=worker_id, slot=str(slot_path), slot_fd=slot_fd)
        try:
            handle.to_worker.send(("setup", setup))
        except OSError:
            pass  # noticed as a lost worker on the next poll
        if self.run is not None:
            handle.tr = self._tr(task)
            handle.tr.figures.workers[worker_id] = life
        self.workers.append(handle)
        return handle

    def _not_started(self, task, worker_id: int, life, exc: BaseException) -> None:
        """A worker that could not be started: its life ends as an error, said in the log."""
        life.exit = "error"
        life.state = "exited"
        if self.run is not None:
            self._tr(task).figures.workers.setdefault(worker_id, life)
        self._say(task, f"could not start worker {worker_id}: {exc}")
        return None

    def _say(self, task, message: str) -> None:
        """A line in the task's scheduler.log (held until the run is attached, when it is not yet)."""
        if self.run is None:
            self.early_notes.append((task, message))
        else:
            self.run.log(self._tr(task), message)

    def discard(self) -> None:
        """Stop workers started before the run could begin (a store refused to open)."""
        for handle in self.workers:
            if handle.popen.poll() is None:
                handle.popen.kill()
            try:
                handle.popen.wait(timeout=grace_seconds())
            except subprocess.TimeoutExpired:
                pass
            handle.gone = True
            handle.close()

    def _tr(self, task):
        return next(tr for tr in self.run.tasks if tr.task is task)

    def alive(self, tr) -> list[WorkerHandle]:
        return [w for w in self.workers if w.tr is tr and not w.gone]

    def staff(self, tr) -> None:
        """Start workers while the task has more ready blocks than workers to take them."""
        sched = tr.sched
        if not sched.ready or self.run.stopping():
            return
        working = [w for w in self.alive(tr) if not w.stopping]
        want = min(tr.task.num_workers, len(working) + len(sched.ready))
        while len(working) < want:
            if self.next_id[tr.task.task_id] >= tr.task.num_workers + tr.task.max_worker_restarts:
                if not working:
                    self.run.log(tr, "no worker can be started any more "
                                     f"({tr.task.max_worker_restarts} restarts used); giving up the task")
                    self.run.schedule.abandon(
                        sched, "workers kept dying; see the worker logs (max_worker_restarts reached)")
                return
            handle = self.spawn(tr.task)
            if handle is None:
                continue
            working.append(handle)

    # -- feeding ----------------------------------------------------------------------
    def batch_size(self, tr, handle) -> int:
        if tr.task.timeout is not None:
            return 1
        cost = self.block_cost[tr.task.task_id]
        size = 1 if cost <= 0 else int(BATCH_SECONDS / max(cost, 1e-6))  # first: learn the cost
        peers = max(1, len([w for w in self.alive(tr) if w.ready and not w.stopping]))
        share = -(-len(tr.sched.ready) // peers)
        return max(1, min(size, MAX_BATCH, share))

    def feed(self, handle: WorkerHandle) -> None:
        tr = handle.tr
        depth = 1 if tr.task.timeout is not None else 2
        while (handle.ready and not handle.stopping and len(handle.inflight) < depth
               and tr.sched.ready and not self.run.stopping()):
            ids = self.run.schedule.take(tr.sched, self.batch_size(tr, handle))
            if not ids:
                return
            sent = time.time()
            handle.inflight.append([ids, sent, 0])  # ids, sent at, results returned so far
            try:
                handle.to_worker.send(("run", ids, sent))  # the worker times the wait in its pipe
            except OSError:
                return  # the loss is handled when the pipe reports it
            handle.life.state = "busy"

    # -- messages -----------------------------------------------------------------------
    def receive(self, handle: WorkerHandle) -> None:
        try:
            message = handle.from_worker.recv()
        except (EOFError, OSError):
            self.lost(handle, None)
            return
        kind = message[0]
        tr = handle.tr
        if kind == "part":  # a long batch reports what it has so far
            batch = handle.inflight[0]
            batch[2] += len(message[1])
            self.run.results(tr, handle.worker_id, message[1], batch[1], time.time())
        elif kind == "done":
            results = message[1]
            ids, sent, _ = handle.inflight.popleft() if handle.inflight else ([], time.time(), 0)
            now = time.time()
            self.run.results(tr, handle.worker_id, results, sent, now)
            if ids:  # what a block costs the worker, measuring and messaging included
                cost = float(message[2]) / len(ids)
                old = self.block_cost[tr.task.task_id]
                self.block_cost[tr.task.task_id] = cost if old <= 0 else 0.7 * old + 0.3 * cost
            if not handle.inflight:
                handle.life.state = "idle"
        elif kind == "ready":
            handle.ready = True
            handle.life.startup = time.time() - handle.life.spawned_at
            handle.life.state = "idle"
        elif kind == "bye":
            handle.life.final_wait = float(message[1])
        elif kind == "setup_failed":
            self.run.log(tr, f"worker {handle.worker_id} could not load the process function: "
                             f"{message[1]}")
            handle.exit_kind = "error"
            # the function cannot be loaded anywhere: no point restarting workers
            self.run.schedule.abandon(tr.sched, f"the process function could not be loaded: {message[1]}")

    def lost(self, handle: WorkerHandle, reason: str | None) -> None:
        """The worker is gone or must go: charge its running block, return the rest."""
        if handle.gone:
            return
        handle.gone = True
        tr = handle.tr
        running, _ = handle.running_block()
        code = handle.popen.poll()
        if code is None and handle.stopping and handle.exit_kind is None and not handle.inflight:
            try:  # it said goodbye and is on its way out: give it the grace period
                code = handle.popen.wait(timeout=grace_seconds())
            except subprocess.TimeoutExpired:
                code = None
        if code is None:
            handle.popen.kill()
            try:
                code = handle.popen.wait(timeout=grace_seconds())
            except subprocess.TimeoutExpired:
                code = None
        life = handle.life
        life.state = "exited"
        if handle.stopping and handle.exit_kind is None and not handle.inflight:
            life.exit = "clean" if code == 0 else ("interrupted" if code in INTERRUPTED else "error")
            if life.stop_sent_at is not None:
                life.teardown = max(0.0, time.time() - life.stop_sent_at)
        else:
            life.exit = handle.exit_kind or ("interrupted" if code in INTERRUPTED else "error")
        pending: list[int] = []
        for ids, _, returned in handle.inflight:
            pending.extend(ids[returned:])
        handle.inflight.clear()
        if running != IDLE and running in pending and life.exit != "interrupted":
            pending.remove(running)
            why = reason or (f"worker {handle.worker_id} (pid {handle.popen.pid}) died with "
                             f"{_describe_exit(code)} while running this block")
            self.run.failure(tr, running, why)
            life.blocks_failed += 1
            self.run.log(tr, f"block {running}: {why}")
        elif pending or life.exit == "error":
            self.run.log(tr, f"worker {handle.worker_id} exited with {_describe_exit(code)}")
        self.run.schedule.returned_unrun(tr.sched, pending)
        handle.close()

    def check_timeouts(self, now: float) -> None:
        for handle in self.workers:
            if not handle.gone and not handle.ready and now - handle.life.spawned_at > STARTUP_TIMEOUT:
                handle.exit_kind = "timeout"
                self.run.log(handle.tr, f"worker {handle.worker_id} did not start within "
                                        f"{STARTUP_TIMEOUT:g} s; see its log")
                self.lost(handle, None)
                continue
            timeout = handle.tr.task.timeout
            if handle.gone or timeout is None or not handle.inflight:
                continue
            sid, started = handle.running_block()
            seen, handle.suspect = handle.suspect, (sid, started)
            # the same block over time on two looks: a slot read mid-write can never kill a worker
            if sid != IDLE and now - started > timeout and seen == (sid, started):
                handle.exit_kind = "timeout"
                self.lost(handle, f"block exceeded its timeout of {timeout:g} s; worker "
                                  f"{handle.worker_id} was stopped")

    def release_idle(self) -> None:
        """Ask workers with nothing left to do to leave."""
        for handle in self.workers:
            if handle.gone or handle.stopping or handle.inflight or not handle.ready:
                continue
            sched = handle.tr.sched
            nothing_left = sched.remaining() - sched.running <= 0 and not sched.ready
            if nothing_left or self.run.stopping() or self.run.schedule.finished():
                self.stop(handle)

    def stop(self, handle: WorkerHandle) -> None:
        handle.stopping = True
        handle.life.stop_sent_at = time.time()
        try:
            handle.to_worker.send(("stop",))
        except OSError:
            pass

    # -- the loop --------------------------------------------------------------------------
    def loop(self) -> None:
        run = self.run
        while True:
            for tr in run.tasks:
                self.staff(tr)
            for handle in self.workers:
                if not handle.gone:
                    self.feed(handle)
            self.release_idle()
            live = [h for h in self.workers if not h.gone]
            if not live:
                if dispatch_finished(run, run.stopping()):
                    return
                continue
            conns = {h.from_worker: h for h in live}
            for conn in wait(list(conns), timeout=0.05):
                handle = conns[conn]
                self.receive(handle)
                while not handle.gone and handle.from_worker.poll():
                    self.receive(handle)
                if not handle.gone:
                    self.feed(handle)
            now = time.time()
            for handle in live:
                if not handle.gone and handle.popen.poll() is not None and not handle.from_worker.poll():
                    self.lost(handle, None)
            self.check_timeouts(now)
            run.tick()

    def shutdown(self) -> None:
        """Stop every worker still there: ask, wait the grace period, then kill."""
        for handle in self.workers:
            if not handle.gone and not handle.stopping:
                self.stop(handle)
        deadline = time.monotonic() + grace_seconds()
        for handle in self.workers:
            if handle.gone:
                continue
            left = max(0.05, deadline - time.monotonic())
            try:
                while handle.from_worker.poll(min(left, 0.5)):
                    self.receive(handle)
                    if handle.gone:
                        break
                    left = max(0.05, deadline - time.monotonic())
            except (EOFError, OSError):
                pass
            if not handle.gone:
                try:
                    handle.popen.wait(timeout=max(0.05, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
                self.lost(handle, None)


def dispatch_finished(run, stopping: bool) -> bool:
    """With no block in flight: whether an executor's dispatch loop is over (else go round again).

    Over when every task is resolved, a stop was asked for, or nothing is
    ready to send.  A stalled schedule (blocks left, none ready, none
    running: a dependency that can never be met) is unstuck first, so it
    ends as abandoned blocks, never as a hang.  Shared by the local and the
    dask executor, which must end their runs on the same terms.
    """
    if run.schedule.finished() or stopping:
        return True
    if run.schedule.stalled():
        run.unstall()
        return False
    return not any(tr.sched.ready for tr in run.tasks)


def _describe_exit(code) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        import signal
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def run_local(run, pool: LocalPool | None = None) -> None:
    if pool is None:
        pool = LocalPool([tr.task for tr in run.tasks], {tr.task.task_id: tr.log_dir for tr in run.tasks})
    pool.attach(run)
    try:
        pool.loop()
    except KeyboardInterrupt:
        for handle in pool.workers:
            if not handle.gone:
                handle.exit_kind = "interrupted"
        raise
    finally:
        pool.shutdown()
