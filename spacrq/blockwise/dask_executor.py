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
teardown (spacrq never saw them start).
"""
from __future__ import annotations

import os
import time
import traceback

__all__ = ["run_dask", "run_blocks"]

MAX_BATCH = 64
BATCH_SECONDS = 0.05
_loaded: dict[str, tuple] = {}
_last_end: dict[str, float] = {}


def run_blocks(setup: dict, ids: list[int]) -> tuple[str, list]:
    """Run ``ids`` on this dask worker; ``(worker name, results)`` like a local worker's."""
    from spacrq.blockwise.grid import BlockGrid
    from spacrq.blockwise.measure import BlockMeter
    from spacrq.blockwise.worker import load_function

    key = setup["task_id"] + ":" + setup["run_id"]
    if key not in _loaded:
        _loaded[key] = (BlockGrid(**setup["grid"]), load_function(setup["function"]), BlockMeter())
    grid, function, meter = _loaded[key]
    try:
        from distributed import get_worker
        name = get_worker().address
    except Exception:
        name = f"pid-{os.getpid()}"
    tracking = setup["resource_tracking"]
    results = []
    last = _last_end.get(key, time.perf_counter())
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
        results.append((sid, error, wall, cpu, peak, read, write, t0 - last))
        last = t0 + wall
    _last_end[key] = last
    return name, results


def _client_for(cluster):
    """``(client, whether we own it)`` for an address, Client or cluster object."""
    from distributed import Client
    if cluster is None:
        raise ValueError("executor='dask' needs dask_cluster: a scheduler address, a Client, "
                         "a LocalCluster or a dask-jobqueue cluster")
    if isinstance(cluster, Client):
        return cluster, False
    if isinstance(cluster, str):
        return Client(cluster, timeout="20s"), True
    return Client(cluster), True


def run_dask(run, cluster) -> None:
    from distributed import wait
    from distributed.client import FutureCancelledError

    from spacrq.blockwise.local import dispatch_finished

    try:
        from distributed.scheduler import KilledWorker
    except ImportError:  # pragma: no cover - older distributed
        KilledWorker = RuntimeError
    client, owned = _client_for(cluster)
    names: dict[str, int] = {}  # dask worker address -> the id the report shows
    used: dict[str, set] = {}  # task id -> the dask workers that ran its blocks
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
            slots = max(2, 2 * sum(client.nthreads().values() or [1]))
            for tr in run.tasks:
                while not stopping and tr.sched.ready and len(inflight) < slots:
                    c = cost.get(tr.task.task_id, 0.0)
                    size = 1 if c <= 0 else max(1, min(MAX_BATCH, int(BATCH_SECONDS / c)))
                    ids = run.schedule.take(tr.sched, size)
                    if not ids:
                        break
                    future = client.submit(run_blocks, setups[tr.task.task_id], ids, pure=False)
                    inflight[future] = (tr, ids, time.time())
            if not inflight:
                if dispatch_finished(run, stopping):
                    return
                continue
            done, _ = wait(list(inflight), timeout=0.25, return_when="FIRST_COMPLETED")
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
        if owned:
            client.close()
