"""The dask executor: blocks run on a dask.distributed cluster.

Give ``run_blockwise(..., executor="dask", dask_cluster=X)`` a scheduler
address (``"tcp://host:8786"``), a ``distributed.Client``, a ``LocalCluster``
or a dask-jobqueue cluster (Slurm, PBS, LSF).  The cluster is disposable:
spacrq's tracking store stays the record of what is done, every batch's
per-block figures ride back with its result, and a worker the cluster loses
costs only the blocks it had in flight (dask runs them elsewhere; a batch
that kills worker after worker — dask's ``KilledWorker`` — is charged as a
failed attempt of each of its blocks).

The cluster's workers are not spacrq's: the report counts them as unmanaged
clients and shows their idle and compute per block, but no startup or
teardown (spacrq never saw them start).  Each dask worker address gets the
next small integer id the first time it returns a batch, and the run's line
in ``runs.jsonl`` lists the addresses in id order (``outcome.dask_workers``)
beside the cluster's name (``outcome.cluster``, also given by
:mod:`~spacrq.blockwise.clusters` for a cluster named in settings).  A
cluster lost altogether (its scheduler gone) ends the run with
:class:`~spacrq.blockwise.clusters.ClusterLost` once dask gives up waiting
for it; the blocks done so far are in the store for the rerun.
"""
from __future__ import annotations

import os
import time
import traceback

__all__ = ["run_dask", "run_blocks"]

#: blocks per dask task, and the seconds of work one should carry: a dask task costs a
#: scheduler round trip or two (ms), so a batch holds ~0.2 s of blocks (bench_blockwise.py 3)
MAX_BATCH = 256
BATCH_SECONDS = 0.2
#: runs whose function and grid a dask worker keeps loaded
KEEP_LOADED = 4
#: how long a run waits for a scheduler given by address (validate already waited 2 s)
CONNECT_SECONDS = 20
_loaded: dict[str, tuple] = {}
_last_end: dict[str, float] = {}


def run_blocks(setup: dict, ids: list[int], sent_at: float | None = None) -> tuple[str, list]:
    """Run ``ids`` on this dask worker; ``(worker name, results)`` like a local worker's.

    With ``sent_at`` (the scheduler's ``time.time()`` when it submitted the
    batch) each result also carries the block's queued time, as a local
    worker's does: from submission to its start (the batch's wait in dask's
    queues and behind the blocks ahead of it), plus its wait after its end
    for the batch to finish, less the worker's own gap just before it
    (which is spacrq's cost, so it stays in the overhead).  Submission is
    read on the scheduler's clock and the start on this worker's: across
    machines a skew of a few ms moves time between queued and overhead, and
    a negative difference counts as no wait.
    """
    from spacrq.blockwise.grid import BlockGrid
    from spacrq.blockwise.measure import BlockMeter
    from spacrq.blockwise.worker import load_function

    key = setup["task_id"] + ":" + setup["run_id"]
    if key not in _loaded:
        while len(_loaded) >= KEEP_LOADED:  # a long-lived worker serves many runs
            oldest = next(iter(_loaded))
            del _loaded[oldest]
            _last_end.pop(oldest, None)
        _loaded[key] = (BlockGrid(**setup["grid"]), load_function(setup["function"]), BlockMeter())
    grid, function, meter = _loaded[key]
    try:
        from distributed import get_worker
        name = get_worker().address
    except Exception:
        name = f"pid-{os.getpid()}"
    tracking = setup["resource_tracking"]
    arrived = time.perf_counter()
    before = 0.0 if sent_at is None else max(0.0, time.time() - sent_at)
    results = []
    last = _last_end.get(key, arrived)
    batch_end = arrived
    for sid in ids:
        block = grid.block(sid, setup["task_id"])
        error = None
        meter.start()
        t0 = meter._t0
        try:
            if function(block) is False:
                error = "the process function returned False"
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        wall, cpu, peak, read, write = meter.stop()
        if not tracking:
            peak = read = write = -1
        own = t0 - max(batch_end, arrived)
        end = t0 + wall
        # queued so far: the wait before the batch began and behind the blocks ahead of it
        results.append((sid, error, wall, cpu, peak, read, write, t0 - last,
                        before + (t0 - arrived - own), own, end))
        last = batch_end = end
    _last_end[key] = last
    done = time.perf_counter()
    if sent_at is None:
        return name, [r[:8] for r in results]
    # and the wait after each block's end until the batch went back
    return name, [(*r[:8], r[8] + done - r[10], r[9]) for r in results]


def _client_for(cluster):
    """``(client, whether we own it)`` for an address, Client or cluster object."""
    from distributed import Client
    if cluster is None:
        raise ValueError("executor='dask' needs dask_cluster: a scheduler address, a Client, "
                         "a LocalCluster or a dask-jobqueue cluster")
    if isinstance(cluster, Client):
        return cluster, False
    if isinstance(cluster, str):
        from spacrq.blockwise.clusters import ClusterError
        try:
            return Client(cluster, timeout=f"{CONNECT_SECONDS}s"), True
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"the dask scheduler at {cluster} did not answer within "
                               f"{CONNECT_SECONDS} s ({type(exc).__name__}); start it (dask "
                               "scheduler) or correct the address; done blocks stay done") from None
    return Client(cluster), True


def _label_of(cluster) -> tuple[str, dict]:
    """A few words naming the cluster for the report, and the added report keys."""
    label = getattr(cluster, "label", None)
    if label:
        return label, dict(getattr(cluster, "extra", {}) or {})
    if isinstance(cluster, str):
        return f"dask scheduler {cluster}", {}
    address = getattr(cluster, "scheduler_address", "") or ""
    if not address:
        address = getattr(getattr(cluster, "scheduler", None), "address", "") or ""
    return f"dask {type(cluster).__name__}" + (f" at {address}" if address else ""), {}


class _Threads:
    """The cluster's thread count, asked of the scheduler at most once a second.

    Asking on every pass of the dispatch loop is a scheduler round trip per
    batch, which is most of the cost of a cheap block.
    """

    def __init__(self, client) -> None:
        self.client, self.value, self.at = client, 1, float("-inf")

    def __call__(self) -> int:
        now = time.monotonic()
        if now - self.at >= 1.0:
            self.at = now
            try:
                self.value = max(1, sum(self.client.nthreads().values()))
            except Exception:  # noqa: BLE001 - keep the last count while the scheduler is busy
                pass
        return self.value


def _lost_cluster(run, label: str, inflight: dict) -> None:
    """The cluster went away mid-run: its blocks in flight go back unrun, and the run ends.

    :raises ClusterError: one sentence; the blocks that are done stay done in the store.
    """
    from spacrq.blockwise.clusters import ClusterLost
    lost = 0
    for tr, ids, _ in inflight.values():
        run.schedule.returned_unrun(tr.sched, ids)
        lost += len(ids)
    inflight.clear()
    raise ClusterLost(f"the {label} was lost mid-run ({lost} block(s) in flight were not "
                       "finished); the blocks done so far are kept in the tracking store: rerun "
                       "the job, on this cluster once it is back or on another, to do the rest")


def run_dask(run, cluster) -> None:
    from concurrent.futures import CancelledError

    from distributed import wait
    from distributed.client import FutureCancelledError

    from spacrq.blockwise.local import dispatch_finished

    try:
        from distributed.scheduler import KilledWorker
    except ImportError:  # pragma: no cover - older distributed
        KilledWorker = RuntimeError  # noqa: N806 (the class it stands in for)
    label, extra = _label_of(cluster)
    cluster = getattr(cluster, "target", cluster)
    client, owned = _client_for(cluster)
    names: dict[str, int] = {}  # dask worker address -> the id the report shows
    used: dict[str, set] = {}  # task id -> the dask workers that ran its blocks
    threads = _Threads(client)
    # the report says where the task ran: added keys of its runs.jsonl line
    run.ran_on = {"executor": "dask", "cluster": label, **extra}
    try:
        setups = {}
        for tr in run.tasks:
            payload, _ = tr.task.function_for_worker()
            setup = {"task_id": tr.task.task_id, "run_id": run.run_id, "function": payload,
                     "grid": {"total_roi": tr.task.grid.total_roi, "read_roi": tr.task.grid.read_roi,
                              "write_roi": tr.task.grid.write_roi, "fit": tr.task.grid.fit,
                              "read_write_conflict": tr.task.grid.read_write_conflict},
                     "resource_tracking": tr.task.resource_tracking}
            setups[tr.task.task_id] = client.scatter(setup, broadcast=True)
        cost: dict[str, float] = {}
        inflight: dict = {}  # future -> (task run, ids, sent_at)
        while True:
            stopping = run.stopping()
            if client.status in ("closing", "closed"):
                _lost_cluster(run, label, inflight)
            slots = max(2, 2 * threads())
            for tr in run.tasks:
                while not stopping and tr.sched.ready and len(inflight) < slots:
                    c = cost.get(tr.task.task_id, 0.0)
                    size = 1 if c <= 0 else max(1, min(MAX_BATCH, int(BATCH_SECONDS / c)))
                    size = min(size, -(-len(tr.sched.ready) // threads()))  # a fair share at the end
                    ids = run.schedule.take(tr.sched, size)
                    if not ids:
                        break
                    sent = time.time()
                    future = client.submit(run_blocks, setups[tr.task.task_id], ids, sent,
                                           pure=False)
                    inflight[future] = (tr, ids, sent)
            if not inflight:
                if dispatch_finished(run, stopping):
                    return
                continue
            try:
                done, _ = wait(list(inflight), timeout=0.25, return_when="FIRST_COMPLETED")
            except TimeoutError:  # nothing came back yet: look at the stop request and go round
                done = ()
            except CancelledError:  # the client lost its scheduler (dask waited for it first)
                _lost_cluster(run, label, inflight)
            except ValueError:  # dask's wait looks the client up, and a client that gave up
                if client.status in ("closing", "closed"):  # on its scheduler is gone from it
                    _lost_cluster(run, label, inflight)
                raise
            for future in done:
                tr, ids, sent = inflight.pop(future)
                try:
                    name, results = future.result()
                except (KilledWorker, FutureCancelledError, OSError, TimeoutError) as exc:
                    lost = isinstance(exc, KilledWorker)
                    run.log(tr, f"dask batch of {len(ids)} block(s) lost: {type(exc).__name__}: {exc}")
                    if lost:  # the batch killed workers repeatedly: charge each block an attempt
                        for sid in ids:
                            run.failure(tr, sid, f"the dask worker running it died ({exc})")
                    else:
                        run.schedule.returned_unrun(tr.sched, ids)
                    continue
                except Exception as exc:  # noqa: BLE001 - the runner itself failed
                    for sid in ids:
                        run.failure(tr, sid, f"{type(exc).__name__}: {exc}")
                    continue
                worker_id = names.setdefault(name, len(names))
                used.setdefault(tr.task.task_id, set()).add(name)
                life = tr.figures.worker(worker_id)
                life.state = "idle"
                run.results(tr, worker_id, results, sent, time.time())
                if results:
                    per = sum(r[2] for r in results) / len(results) + 1e-4
                    old = cost.get(tr.task.task_id, 0.0)
                    cost[tr.task.task_id] = per if old <= 0 else 0.7 * old + 0.3 * per
            run.tick()
    finally:
        alive = set()
        try:
            alive = set(client.scheduler_info().get("workers", {}))
        except Exception:
            pass
        for tr in run.tasks:
            mine = used.get(tr.task.task_id, set())
            tr.figures.unmanaged_clients = len(mine)
            for name in mine:
                life = tr.figures.workers[names[name]]
                life.state = "exited"
                life.exit = "clean" if name in alive else "error"
        # dask worker addresses in the order of their report ids (id 0 first)
        run.ran_on["dask_workers"] = list(names)
        if owned:
            client.close()
