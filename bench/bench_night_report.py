"""Benchmark: the morning report of a 2000-job night and of a night holding a 1 000 000-block task.

Targets (issue 12): each report written in ≤ 2 s, each file ≤ 5 MB (charts
downsampled).  Side by side in one run, with the plain-text queue summary
(what the runner prints at the end) and the Run Report's ``report_from_store``
alone as the reference points: the report should cost little more than the
readers it is built from.

Usage::

    .venv/bin/python bench/bench_night_report.py [--jobs 2000] [--blocks 1000000] [--repeat 3]
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
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import CODECS, grid_for, make_store  # noqa: E402  (the same 1M-block store)

from spacrq.blockwise.report import report_from_store  # noqa: E402
from spacrq.night import write_report  # noqa: E402
from spacrq.queue.model import Job, Queue  # noqa: E402
from spacrq.queue.store import load_queue, logs_dir, save_queue  # noqa: E402
from spacrq.queue.summary import QueueResult  # noqa: E402

OUTCOMES = ("success", "success", "success", "success", "failed", "skipped", "not_run")


def big_queue(folder: Path, jobs: int) -> Path:
    """A finished night of ``jobs`` command jobs of every outcome, with logs."""
    queue = Queue(name="bench")
    start = datetime(2026, 12, 1, 20, 0, tzinfo=timezone.utc)
    logs = logs_dir(folder / "bench.queue.json")
    logs.mkdir(parents=True, exist_ok=True)
    for i in range(jobs):
        status = OUTCOMES[i % len(OUTCOMES)]
        job = Job(module="command", id=f"job{i:04d}", label=f"job number {i}",
                  settings={"argv": ["true"]})
        job.status = status
        if status in ("success", "failed"):
            t0 = start + timedelta(seconds=10 * i)
            job.started, job.finished = t0.isoformat(), (t0 + timedelta(seconds=8)).isoformat()
            job.attempts = 1 + (i % 11 == 0)
            job.log_path = str(logs / f"{i:04d}_{job.id}.log")
            Path(job.log_path).write_text("working\n")
        if status == "failed":
            job.exit_code, job.failure_kind = 1, ("FileNotFoundError" if i % 2 else "JobFailure")
            job.error = "no such share: /mnt/plates" if i % 2 else f"exited with code {i % 5}"
        if status == "success" and i % 13 == 0:
            job.run_status = {"n_attempted": 384, "n_succeeded": 344, "n_failed": 40,
                              "artifacts": [f"/data/plate{i}.csv"]}
        queue.jobs.append(job)
    path = folder / "bench.queue.json"
    save_queue(queue, path)
    return path


def blockwise_night(folder: Path, store: Path, started: float) -> Path:
    queue = Queue(name="million")
    job = Job(module="blockwise", id="smooth", label="smooth a million blocks",
              settings={"input": "in.zarr", "output": "out.zarr", "block_shape": [8, 8, 8],
                        "tracking": str(store)})
    job.status = "success"
    t0 = datetime.fromtimestamp(started, tz=timezone.utc)  # the store's second run: this job
    job.started, job.finished = t0.isoformat(), (t0 + timedelta(days=30)).isoformat()
    queue.jobs.append(job)
    path = folder / "million.queue.json"
    save_queue(queue, path)
    return path


def timed(fn, repeat: int) -> float:
    fn()  # the first call pays one-off imports
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--blocks", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="spacrq-bench-night-"))
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; median of {args.repeat}")
    try:
        path = big_queue(root, args.jobs)
        out = root / "big.html"
        summary = timed(lambda: QueueResult(queue=load_queue(path)).summary(), args.repeat)
        report = timed(lambda: write_report(path, out), args.repeat)
        size = out.stat().st_size
        print(f"\n{args.jobs} jobs:        text summary {summary:.3f} s | morning report "
              f"{report:.3f} s ({report / summary:.1f}× the summary), {size / 1e6:.2f} MB"
              f"  target ≤ 2 s and ≤ 5 MB: {'met' if report <= 2 and size <= 5e6 else 'MISSED'}")

        grid = grid_for(args.blocks)
        store = root / "store"
        second, skipped = make_store(store, grid, CODECS["engine's (bytes + gzip 1)"])
        night = blockwise_night(root, store, second)
        out = root / "million.html"
        alone = timed(lambda: report_from_store(store), args.repeat)
        report = timed(lambda: write_report(night, out), args.repeat)
        size = out.stat().st_size
        page = out.read_text()
        assert page.count("<polyline") >= 8 and 'class="chart empty"' not in page, "empty charts"
        print(f"{math.prod(grid):,} blocks: report_from_store {alone:.3f} s | morning report "
              f"{report:.3f} s ({report / alone:.1f}× the store's report), {size / 1e6:.2f} MB"
              f"  target ≤ 2 s and ≤ 5 MB: {'met' if report <= 2 and size <= 5e6 else 'MISSED'}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
