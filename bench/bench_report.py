"""Benchmark 3: build the run report from a 1 000 000-block tracking store (target ≤ 1 s).

The store is written with zarr directly, laid out as docs/CONVENTIONS.md says
(a zarr v3 group, every array shaped like the block grid, chunks of ~64 k
blocks like the engine's), holding two runs: the first did half the blocks,
the second the rest (so the report has skipped blocks, a report line and
worker ids to read).  It is written twice, side by side: with zarr's default
codecs (zstd) and with the engine's (bytes + gzip level 1, which
spacrq.blockwise.zarrlite writes and reads without the zarr library).  For
each it times, in the same process (the median is the figure; the first
call also pays one-off imports):

* ``report_from_store`` — the whole per-block summary (read every array whole,
  round trip, completion order, seven Stats, overhead, trend);
* ``store_charts`` — every chart series of the Run Report (each worker's cumulative
  compute and idle, blocks per second, wall and peak RSS against completion order
  with the trend), the store read once, decimated for the screen (target ≤ 1 s),
  beside the Summary alone (``report_from_store`` above);
* ``block`` — one block's drill-down, by spatial id;
* ``block_columns`` / ``block_records(worker=...)`` — one worker's blocks as
  arrays and as record objects, side by side.

Usage::

    .venv/bin/python bench/bench_report.py [--blocks 1000000] [--repeat 5] [--keep DIR]
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BytesCodec, GzipCodec

from spacrq.blockwise.watch_charts import store_charts
from spacrq.blockwise.report import (
    TaskReport,
    WorkerRecord,
    append_run,
    block,
    block_columns,
    block_records,
    report_from_store,
    runs_file,
    summarize_blocks,
    summarize_workers,
    Stat,
)

CHUNK_BLOCKS = 64 * 1024
WORKERS = 8


def grid_for(blocks: int) -> tuple[int, int, int]:
    side = round(blocks ** (1 / 3))
    return (side, side, max(1, blocks // (side * side)))


def chunks_for(grid: tuple[int, ...]) -> tuple[int, ...]:
    """Halve the longest axis until a chunk holds at most CHUNK_BLOCKS blocks."""
    chunk = list(grid)
    while math.prod(chunk) > CHUNK_BLOCKS:
        axis = max(range(len(chunk)), key=lambda i: chunk[i])
        chunk[axis] = -(-chunk[axis] // 2)
    return tuple(chunk)


#: how the arrays are encoded: zarr's defaults, and what the engine's tracking store writes
CODECS = {
    "zarr default (zstd)": {},
    "engine's (bytes + gzip 1)": {"serializer": BytesCodec(), "compressors": [GzipCodec(level=1)]},
}


def make_store(path: Path, grid: tuple[int, ...], codecs: dict) -> tuple[float, int]:
    """A two-run tracking store; returns (second run's start, blocks it skipped)."""
    rng = np.random.default_rng(0)
    n = math.prod(grid)
    group = zarr.open_group(str(path), mode="w", attributes={
        "spacrq_tracking": 1, "task_id": "bench", "layout_hash": "bench",
        "geometry": {"grid_shape": list(grid), "fit": "valid"}})
    chunks = chunks_for(grid)

    def put(name, values, dtype, fill):
        arr = group.create_array(name, shape=grid, chunks=chunks, dtype=dtype, fill_value=fill,
                                 **codecs)
        arr[...] = np.asarray(values, dtype=dtype).reshape(grid)

    first, second = 1_000_000.0, 2_000_000.0
    earlier = rng.random(n) < 0.5                    # done by the first run
    wall = rng.gamma(4.0, 0.005, n) * (1 + np.arange(n) / n)  # slowing down
    order_time = np.empty(n)
    order_time[earlier] = first + np.cumsum(wall[earlier]) / WORKERS
    order_time[~earlier] = second + np.cumsum(wall[~earlier]) / WORKERS
    sent = order_time - wall - rng.random(n) * 1e-3
    failures = (rng.random(n) < 0.001).astype(np.int32)
    put("done", np.ones(n, bool), bool, False)
    put("failures", failures, np.int32, 0)
    put("wall_seconds", wall, np.float64, np.nan)
    put("cpu_seconds", wall * 0.95, np.float64, np.nan)
    put("peak_rss_bytes", rng.integers(50 << 20, 400 << 20, n), np.int64, -1)
    put("io_read_bytes", rng.integers(0, 1 << 20, n), np.int64, -1)
    put("io_write_bytes", rng.integers(0, 1 << 20, n), np.int64, -1)
    put("worker_id", rng.integers(0, WORKERS, n), np.int32, -1)
    put("sent_at", sent, np.float64, np.nan)
    put("returned_at", order_time, np.float64, np.nan)
    put("queued_seconds", rng.random(n) * 1e-3, np.float64, np.nan)
    put("idle_seconds", rng.random(n) * 1e-4, np.float64, np.nan)

    # the second run's report line, as the engine appends it
    records = [WorkerRecord(i, startup=0.3, blocks_ok=n // 2 // WORKERS,
                            idle=Stat.of(rng.random(1000) * 1e-3),
                            compute=Stat.of(rng.random(1000) * 0.02), teardown=0.05, exit="clean")
               for i in range(WORKERS)]
    line = TaskReport("bench", summarize_blocks(count=n, skipped=int(earlier.sum()), failures=0,
                                                round_trip=[0.02]),
                      summarize_workers(records), second, float(order_time.max()), tracked=True)
    append_run(runs_file(path), line)
    return second, int(earlier.sum())


def timed(fn, repeat: int) -> tuple[float, list[float], object, float]:
    """(first call, later calls, result, median CPU seconds of the later calls).

    The first call includes one-off imports.  CPU seconds (all threads of this
    process) are the figure a busy machine does not inflate: on a shared
    2-core workstation other work stretches the wall time, not the CPU time.
    """
    t0 = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t0
    later, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        later.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return first, later, result, (statistics.median(cpu) if cpu else 0.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="build the store here and keep it")
    args = ap.parse_args(argv)

    root = args.keep or Path(tempfile.mkdtemp(prefix="spacrq-bench-report-"))
    grid = grid_for(args.blocks)
    n = math.prod(grid)
    print(f"{n:,} blocks, grid {grid}, chunks {chunks_for(grid)}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    try:
        for label, codecs in CODECS.items():
            store = root / ("bench-" + ("gzip" if codecs else "zstd"))
            t0 = time.perf_counter()
            _, skipped = make_store(store, grid, codecs)
            print(f"\nstore encoded with {label}: written in {time.perf_counter() - t0:.1f} s")
            first, later, report, cpu = timed(lambda: report_from_store(store), args.repeat)
            med = statistics.median(later)
            assert report.blocks.skipped == skipped and report.blocks.wall.n == n - skipped
            print(f"  report_from_store        first {first:.3f} s  median of {args.repeat} {med:.3f} s"
                  f" (CPU {cpu:.3f} s)  target ≤ 1 s: {'met' if med <= 1.0 else 'MISSED'}")
            start = report.started_at
            c_first, c_later, charts, c_cpu = timed(lambda: store_charts(store, start, None), args.repeat)
            c_med = statistics.median(c_later)
            assert charts["blocks"] == n - skipped and len(charts["compute"]) == WORKERS
            points = max(len(charts["wall"][0]), len(charts["rss"][0]),
                         *(len(x) for x, _ in charts["compute"].values()))
            print(f"  store_charts (all series) first {c_first:.3f} s  median of {args.repeat} {c_med:.3f} s"
                  f" (CPU {c_cpu:.3f} s)  target ≤ 1 s: {'met' if c_med <= 1.0 else 'MISSED'}; "
                  f"{c_med / med:.2f}× the Summary alone; at most {points:,} points a series")
            w_first, w_later, whole, w_cpu = timed(lambda: store_charts(store, None, None), args.repeat)
            assert whole["blocks"] == n
            print(f"  store_charts, all {n:,} blocks as one run: first {w_first:.3f} s  median "
                  f"{statistics.median(w_later):.3f} s (CPU {w_cpu:.3f} s)  target ≤ 1 s: "
                  f"{'met' if statistics.median(w_later) <= 1.0 else 'MISSED'}")
            first, later, _, _ = timed(lambda: block(store, n // 2 + 7), args.repeat)
            print(f"  block(spatial id)        first {first * 1e3:.1f} ms  "
                  f"median {statistics.median(later) * 1e3:.1f} ms")
            cols_first, _, cols, _ = timed(lambda: block_columns(store, worker=3), 0)
            rec_first, _, recs, _ = timed(lambda: block_records(store, worker=3), 0)
            assert len(recs) == cols["spatial_id"].size
            print(f"  one worker's {len(recs):,} blocks: block_columns {cols_first:.2f} s, "
                  f"block_records {rec_first:.2f} s ({rec_first / cols_first:.1f}× the columns)")
        print()
        print(report.render(max_workers=4))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
