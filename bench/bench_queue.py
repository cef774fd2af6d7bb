"""Queue overhead: no-op ``command`` jobs through ``spacrq queue run``, beside task-spooler.

Usage::

    .venv/bin/python bench/bench_queue.py [--sizes 10 2000] [--repeat 3]

For each queue size N it times, wall clock, in one run:

* ``bare``    — N ``/bin/true`` processes started and waited for one after
  another (the floor any queue pays: the cost of a process);
* ``spacrq``  — ``python -m spacrq queue run FILE`` on a queue of N ``true``
  jobs, timed by the runner itself from taking the queue's lock to writing its
  final state (``runner.json`` ``started_at`` → ``finished_at``), so the
  interpreter's start-up — a fixed cost of ~0.2–1 s, not a per-job one — is
  left out (it is printed separately).  Every transition is durable (fsync'd
  journal), each job gets its own log file and process group;
* ``tsp``     — Debian's task-spooler (``/usr/bin/tsp``, private
  ``TS_SOCKET``, one slot): N ``tsp true`` enqueues then ``tsp -w`` for the
  last, the same way an operator uses it.

It prints per-job time, per-job overhead above ``bare``, and the ratios
(spacrq/tsp, and 2000-job/10-job per-job overhead for flatness).  Then it
times load + validate + plan of a 2000-job queue file.
"""
from __future__ import annotations

import argparse
from datetime import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from spacrq.queue import Job, Queue, load_queue, plan, save_queue, validate_queue
from spacrq.queue.runner import runner_state

TRUE = shutil.which("true") or "/bin/true"
TSP = "/usr/bin/tsp"


def _queue_file(folder: Path, n: int) -> Path:
    queue = Queue(name=f"bench{n}", max_consecutive_failures=0)
    for _ in range(n):
        queue.add(Job(module="command", settings={"argv": [TRUE]}), validate=False)
    path = folder / f"bench{n}.queue.json"
    save_queue(queue, path)
    return path


def time_bare(n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        subprocess.Popen([TRUE]).wait()
    return time.perf_counter() - t0


def time_spacrq(n: int, folder: Path) -> tuple[float, float]:
    """(seconds inside the runner, seconds of the whole command)."""
    path = _queue_file(folder, n)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "spacrq", "queue", "run", str(path)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - t0
    statuses = {j.status for j in load_queue(path).jobs}
    assert statuses <= {"success"}, statuses
    state = runner_state(path)
    inside = (datetime.fromisoformat(state["finished_at"])
              - datetime.fromisoformat(state["started_at"])).total_seconds()
    return inside, elapsed


def time_tsp(n: int, folder: Path) -> float:
    env = dict(os.environ, TS_SOCKET=str(folder / f"tsp{n}-{uuid.uuid4().hex[:8]}.socket"),
               TMPDIR=str(folder),
               TS_MAXFINISHED=str(n + 10), TS_SLOTS="1")
    subprocess.run([TSP, "-S", "1"], env=env, check=True, stdout=subprocess.DEVNULL)
    t0 = time.perf_counter()
    for _ in range(n):
        subprocess.run([TSP, TRUE], env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([TSP, "-w"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - t0
    subprocess.run([TSP, "-K"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return elapsed


def time_load_validate_plan(folder: Path, n: int = 2000) -> tuple[float, float, float]:
    path = _queue_file(folder, n)
    t0 = time.perf_counter()
    queue = load_queue(path)
    t1 = time.perf_counter()
    validate_queue(queue)
    t2 = time.perf_counter()
    plan(queue)
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 2000])
    ap.add_argument("--repeat", type=int, default=5, help="runs per figure (median kept)")
    args = ap.parse_args(argv)
    have_tsp = os.access(TSP, os.X_OK)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench_queue_") as tmp:
        folder = Path(tmp)
        empty = [time_spacrq(0, folder) for _ in range(args.repeat)]
        startup = statistics.median(t[1] - t[0] for t in empty)
        fixed = statistics.median(t[0] for t in empty)
        tsp_startup = statistics.median(time_tsp(0, folder) for _ in range(args.repeat)) \
            if have_tsp else float("nan")
        # Rounds interleave the sizes so a change in machine load hits all of them alike;
        # a large queue runs once, in the middle round.
        samples: dict[int, list[tuple[float, float, float]]] = {n: [] for n in args.sizes}
        for r in range(args.repeat):
            for n in args.sizes:
                if n > 200 and r != args.repeat // 2:
                    continue
                tsp = (time_tsp(n, folder) - tsp_startup) / n if have_tsp else float("nan")
                samples[n].append((time_bare(n) / n, time_spacrq(n, folder)[0] / n, tsp))
        for n, got in samples.items():
            rows[n] = tuple(statistics.median(s[i] for s in got) for i in range(3))
        lvp = time_load_validate_plan(folder)
    ms = 1000.0
    print(f"no-op command jobs, wall clock per job (ms); load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores; left out: spacrq interpreter start-up "
          f"{startup * ms:.0f} ms, tsp server start {tsp_startup * ms:.0f} ms; kept in: the "
          f"runner's fixed cost per run (lock, load, check, final write) {fixed * ms:.0f} ms")
    print(f"{'jobs':>6} {'bare':>8} {'spacrq':>8} {'tsp':>8} {'spacrq-bare':>12} "
          f"{'tsp-bare':>9} {'spacrq/tsp':>11}")
    for n, (bare, ours, tsp) in rows.items():
        print(f"{n:>6} {bare * ms:8.2f} {ours * ms:8.2f} {tsp * ms:8.2f} {(ours - bare) * ms:12.2f} "
              f"{(tsp - bare) * ms:9.2f} {ours / tsp:11.2f}")
    if len(rows) >= 2:
        small, large = min(rows), max(rows)
        flat = (rows[large][1] - rows[large][0]) / max(1e-9, rows[small][1] - rows[small][0])
        print(f"flatness: spacrq overhead per job at {large} jobs / at {small} jobs = {flat:.2f} "
              "(target <= 1.5)")
    load, validate, planned = lvp
    print(f"2000-job queue: load {load * ms:.0f} ms, validate {validate * ms:.0f} ms, plan "
          f"{planned * ms:.0f} ms, total {(load + validate + planned) * ms:.0f} ms (target < 1000)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
