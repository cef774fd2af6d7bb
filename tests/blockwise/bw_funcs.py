"""Process functions the blockwise tests hand to worker processes.

They live in a module (not in the test files) so workers import them by
reference; parameters travel with ``functools.partial``.
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path


def noop(block) -> None:
    pass


def stamp(folder, block, sleep: float = 0.0) -> None:
    """Record when the block ran (start, end) in ``folder/<task>-<id>.json``."""
    start = time.time()
    if sleep:
        time.sleep(sleep)
    end = time.time()
    Path(folder, f"{block.task_id}-{block.spatial_id}.json").write_text(
        json.dumps({"start": start, "end": end, "pid": os.getpid()}))


def slow_block(folder, slow_id: int, seconds: float, block) -> None:
    stamp(folder, block, seconds if block.spatial_id == slow_id else 0.0)


def raise_on(bad_ids, block) -> None:
    if block.spatial_id in bad_ids:
        raise RuntimeError(f"bad block {block.spatial_id}")


def count_attempts(folder, bad_ids, block) -> None:
    """Append one line per attempt; fail the bad ones."""
    with open(Path(folder) / f"attempts-{block.spatial_id}", "a") as handle:
        handle.write("x")
    if block.spatial_id in bad_ids:
        raise ValueError("always fails")


def sigkill_once(folder, victim: int, block) -> None:
    """SIGKILL the worker the first time ``victim`` runs (as the OOM killer would)."""
    marker = Path(folder) / f"killed-{victim}"
    if block.spatial_id == victim and not marker.exists():
        marker.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    stamp(folder, block)


def always_sigkill(block) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def hang_on(victim: int, block) -> None:
    if block.spatial_id == victim:
        time.sleep(60)


def busy_or_sleep(seconds: float, block) -> None:
    """Even blocks burn ``seconds`` of CPU time, odd blocks sleep ``seconds``."""
    if block.spatial_id % 2 == 0:
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
    else:
        time.sleep(seconds)


def slowing(step: float, block) -> None:
    """Each block sleeps a little longer than the one before it (a leak, say)."""
    time.sleep(0.002 + step * block.spatial_id)


def memory_on(big_id: int, megabytes: int, block) -> None:
    if block.spatial_id == big_id:
        data = bytearray(megabytes * 1024 * 1024)
        for i in range(0, len(data), 4096):
            data[i] = 1
        del data


def invert(data, block):
    """A scientist's block operation for the queue module: (data, block) -> array."""
    return -data


def explode(data, block):
    raise RuntimeError("this operation always fails")


def close_dask_worker_once(folder, victim: int, block) -> None:
    """Close the (in-process) dask worker running ``victim`` mid-block, once: a lost worker."""
    marker = Path(folder) / f"closed-{victim}"
    if block.spatial_id == victim and not marker.exists():
        from distributed import get_worker
        marker.write_text("closed")
        worker = get_worker()
        worker.loop.add_callback(worker.close)
        time.sleep(1.0)
    stamp(folder, block)
