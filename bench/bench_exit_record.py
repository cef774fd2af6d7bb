"""The exit record of a queue run night after night: what reading it costs, kept small or not.

Usage::

    .venv/bin/python bench/bench_exit_record.py [--jobs 1000] [--nights 120] [--repeat 3]

Writes, in a temporary folder, the exit record (``NAME_logs/exits.jsonl``) a
queue of ``--jobs`` jobs leaves after ``--nights`` nights (each job one
attempt a night: a start line and an end line, as the runner writes them),
then times, median of ``--repeat``:

* ``read whole`` — what ``resume``, ``queue status`` and the morning report
  pay to read it (:func:`spacrq.queue.adopt._record_file`, uncached);
* ``compact`` — the runner's rewrite of it at a run's start
  (:func:`spacrq.queue.compact.compact_exit_record`), once it is past its
  bound;
* ``compact at the bound`` — the same, for a record just past the bound
  (``max(COMPACT_FROM, ROOM_PER_JOB × jobs)``), which is what a queue used
  every night pays, once every few nights, with the record kept small;
* ``read after`` — reading the record compacted.

And the ratios: read whole / read after, and the bound's rewrite per night it covers.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacrq.queue import adopt, compact  # noqa: E402
from spacrq.queue.supervise import EXIT_RECORD  # noqa: E402


def _night(jobs: int, night: int) -> bytes:
    key = f"2026-{1 + night // 28 % 12:02d}-{1 + night % 28:02d}T01:00:00.{night:06d}+00:00"
    out = []
    for j in range(jobs):
        start = {"key": key, "job": f"job{j:04d}", "pid": 10_000 + j, "started": 1.7e9 + night,
                 "supervisor": 1, "before": {"/data/plate/out": [12, 3_456_789]},
                 "folders": ["/data/plate/out"]}
        end = {"key": key, "job": f"job{j:04d}", "exit_code": 0, "finished": key,
               "peak_rss_bytes": 123_456_789 + j}
        out.append(orjson.dumps(start) + b"\n" + orjson.dumps(end) + b"\n")
    return b"".join(out)


def _write(folder: Path, jobs: int, nights: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / EXIT_RECORD
    with record.open("wb") as fh:
        for night in range(nights):
            fh.write(_night(jobs, night))
    return record


def _read(record: Path) -> float:
    adopt._READ.clear()
    began = time.perf_counter()
    adopt._record_file(str(record))
    return time.perf_counter() - began


def _compact(folder: Path, queue: list) -> tuple[float, str]:
    began = time.perf_counter()
    said = compact.compact_exit_record(folder, queue)
    return time.perf_counter() - began, said


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--nights", type=int, default=120)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    queue = [SimpleNamespace(id=f"job{j:04d}", started="") for j in range(args.jobs)]
    root = Path(tempfile.mkdtemp(prefix="spacrq_bench_exits_"))
    try:
        night_bytes = len(_night(args.jobs, 0))
        bound = max(compact.COMPACT_FROM, compact.ROOM_PER_JOB * args.jobs)
        at_bound = bound // night_bytes + 1  # nights until a run's start rewrites it
        reads, compacts, bounds, afters = [], [], [], []
        size = small_size = 0
        for _ in range(args.repeat):
            record = _write(root / "long", args.jobs, args.nights)
            size = record.stat().st_size
            reads.append(_read(record))
            seconds, said = _compact(root / "long", queue)
            assert said.startswith("the exit record"), said
            compacts.append(seconds)
            afters.append(_read(record))
            small = _write(root / "bound", args.jobs, at_bound)
            small_size = small.stat().st_size
            seconds, said = _compact(root / "bound", queue)
            assert said.startswith("the exit record"), said
            bounds.append(seconds)
        read, comp = statistics.median(reads), statistics.median(compacts)
        after, at = statistics.median(afters), statistics.median(bounds)
        kept = (root / "long" / EXIT_RECORD).stat().st_size
        print(f"exit record of a {args.jobs}-job queue run every night "
              f"({night_bytes / 1024:.0f} KB a night), median of {args.repeat}:")
        print(f"  after {args.nights} nights, never kept small: {size / 1e6:.1f} MB; "
              f"read whole (resume, status, morning report): {read * 1e3:.0f} ms")
        print(f"  compacted at a run's start: {comp * 1e3:.0f} ms, leaving {kept / 1024:.0f} KB; "
              f"read after: {after * 1e3:.1f} ms ({read / after:.0f}x faster)")
        print(f"  kept small, the record is rewritten once past {bound / 1e6:.1f} MB (every "
              f"{at_bound} nights): {at * 1e3:.0f} ms at that run's start, "
              f"{at / at_bound * 1e3:.0f} ms a night; the read never exceeds that of "
              f"{at_bound} nights ({small_size / 1e6:.1f} MB)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
