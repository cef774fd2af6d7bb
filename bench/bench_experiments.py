"""Benchmark: refreshing a long experiment run's status, progress and records.

A run ten hours in holds ~100 000 journal events and ~100 000 records.  The
Experiments pane refreshes every visible run at 2 Hz, so what matters is the
cost of one refresh *once loaded*: :class:`spacrq.experiments.RunWatch` reads
only the bytes appended since the last refresh.  This prints, side by side in
one run:

* the first load (everything read once),
* the incremental refresh with a few new lines (target <= 50 ms), and the bytes
  it read,
* a full re-read of the same run per refresh (what a reader without a tail
  pays), and the ratio,
* 20 live runs refreshed per 2 Hz tick (the pane's load).

Usage: ``python bench/bench_experiments.py [--lines 100000] [--refreshes 40]``
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacrq.experiments import RunWatch  # noqa: E402
from spacrq.procs import ProcessRef  # noqa: E402
from spacrq.runfiles import write_json  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _event(name: str, second: float, **fields) -> str:
    return json.dumps({"event": name, "ts": (T0 + timedelta(seconds=second)).isoformat(),
                       **fields}) + "\n"


def _record(i: int) -> str:
    return json.dumps({"index": i, "saved_at": (T0 + timedelta(seconds=i)).isoformat(),
                       "provenance": {"step_id": f"point[{i:06d}]", "op": "measure_point",
                                      "params": {"setpoint_mV": i * 0.01}},
                       "type": "value", "value": {"step": i, "setpoint_mV": i * 0.01,
                                                  "signal": 0.5 + (i % 97) / 100.0,
                                                  "stderr": 0.01}}) + "\n"


class LiveRun:
    """A synthetic run directory that keeps growing like a real one."""

    def __init__(self, root: Path, name: str, lines: int, total: int) -> None:
        self.dir = root / name
        self.dir.mkdir(parents=True)
        self.step = 0
        self.total = total
        write_json(self.dir / "plan.json", {"config": {}, "steps": [
            {"id": f"point[{i:06d}]", "op": "measure_point", "params": {}} for i in range(total)],
            "hash": "0" * 64})
        write_json(self.dir / "spacrq-process.json", ProcessRef.of(os.getpid()).to_dict())
        steps = max(0, (lines - 1) // 2)
        with open(self.dir / "journal.jsonl", "w") as journal, \
                open(self.dir / "records.jsonl", "w") as records:
            journal.write(_event("run_started", 0, run_id=name, total_steps=total,
                                 provenance={"experiment": "Bench"}))
            chunk_j, chunk_r = [], []
            for i in range(steps):
                chunk_j.append(_event("step_started", i, step_id=f"point[{i:06d}]", index=i))
                chunk_j.append(_event("step_completed", i + 0.5, step_id=f"point[{i:06d}]",
                                      index=i, recorded=True))
                chunk_r.append(_record(i))
                if len(chunk_r) >= 5000:
                    journal.write("".join(chunk_j))
                    records.write("".join(chunk_r))
                    chunk_j, chunk_r = [], []
            # records hold as many lines as the journal, as a run with sub-records would
            for i in range(steps, lines):
                chunk_r.append(_record(i))
            journal.write("".join(chunk_j))
            records.write("".join(chunk_r))
        self.step = steps

    def grow(self) -> None:
        """One more step: two journal events and a record, as a run appends them."""
        i = self.step
        with open(self.dir / "journal.jsonl", "a") as journal:
            journal.write(_event("step_started", i, step_id=f"point[{i:06d}]", index=i)
                          + _event("step_completed", i + 0.5, step_id=f"point[{i:06d}]",
                                   index=i, recorded=True))
        with open(self.dir / "records.jsonl", "a") as records:
            records.write(_record(i))
        self.step += 1


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--refreshes", type=int, default=40)
    parser.add_argument("--live-runs", type=int, default=20)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="spacrq-bench-exp-") as tmp:
        root = Path(tmp)
        run = LiveRun(root, "long", args.lines, total=args.lines * 2)
        sizes = ((run.dir / "journal.jsonl").stat().st_size, (run.dir / "records.jsonl").stat().st_size)
        print(f"run: {args.lines:,} journal lines ({sizes[0] / 1e6:.1f} MB), "
              f"{args.lines:,} records ({sizes[1] / 1e6:.1f} MB)")

        watch = RunWatch(run.dir)
        began = time.perf_counter()
        snap = watch.refresh()
        first = time.perf_counter() - began
        print(f"first load (status+progress+records, all read once): {_ms(first)}   "
              f"state={snap['status']['state']} completed={snap['status']['completed']:,} "
              f"records={snap['record_count']:,}")

        incremental, read_per_refresh = [], []
        for _ in range(args.refreshes):
            run.grow()
            before = watch.bytes_read
            began = time.perf_counter()
            snap = watch.refresh()
            incremental.append(time.perf_counter() - began)
            read_per_refresh.append(watch.bytes_read - before)
        assert snap["status"]["completed"] == run.step

        full = []
        for _ in range(max(3, args.refreshes // 8)):
            run.grow()
            began = time.perf_counter()
            RunWatch(run.dir).refresh()
            full.append(time.perf_counter() - began)

        inc_med, inc_p95 = statistics.median(incremental), sorted(incremental)[int(0.95 * len(incremental)) - 1]
        full_med = statistics.median(full)
        print(f"incremental refresh, 1 new step (3 lines):  median {_ms(inc_med)}  p95 {_ms(inc_p95)}"
              f"  read {statistics.median(read_per_refresh):,.0f} bytes/refresh  "
              f"[target <= 50 ms: {'met' if inc_p95 <= 0.050 else 'MISSED'}]")
        print(f"full re-read per refresh:                   median {_ms(full_med)}  "
              f"read {sum(sizes):,} bytes/refresh")
        print(f"ratio full / incremental: {full_med / inc_med:,.0f}x")

        lives = [LiveRun(root, f"live{i:02d}", 2_000, total=10_000) for i in range(args.live_runs)]
        watches = [RunWatch(r.dir) for r in lives]
        for w in watches:
            w.refresh()
        ticks = []
        for _ in range(10):
            for r in lives:
                r.grow()
            began = time.perf_counter()
            for w in watches:
                w.refresh()
            ticks.append(time.perf_counter() - began)
        print(f"{args.live_runs} live runs, one 2 Hz tick (all refreshed, off the GUI thread): "
              f"median {_ms(statistics.median(ticks))}  max {_ms(max(ticks))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
