"""Blockwise benchmarks: spacrq's scheduler beside daisy 2.0.0, in one run.

    .venv/bin/python bench/bench_blockwise.py            # full: 10 000 and 100 000 blocks
    .venv/bin/python bench/bench_blockwise.py --quick    # 10 000 blocks, fewer repeats

1. No-op blocks, 2 workers, tracking store and resource tracking on:
   blocks/s for spacrq and for daisy doing the same (target: spacrq >= 2x daisy).
   daisy runs in its own interpreter (``--daisy-python``, default
   /tmp/daisyvenv/bin/python, else this one if it can import daisy).
2. 20 ms CPU-bound numpy blocks, 2 workers: throughput against twice the
   serial throughput (target: >= 90 %).
3. Executors side by side, no-op and 20 ms blocks, 2 workers: the local executor, dask on a
   LocalCluster (2 worker processes, 1 thread each) and dask on separate ``dask scheduler`` /
   ``dask worker`` processes on loopback: blocks/s and per-block overhead for each
   (target: 20 ms blocks on dask >= 90 % of the local executor's throughput).
   ``--no-dask`` leaves this section out.
4. Per-block measurement cost inside the worker (target: <= 50 us).

Figures are wall-clock on this machine while it does whatever else it does;
each pair is measured back to back so the ratio is the figure to read.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

from bench_blocks import cpu_block, noop  # noqa: E402  (workers import only that module)


def calibrate(target=0.020) -> int:
    """Iterations for ~20 ms of CPU time (CPU, not wall: other processes on the machine
    must not change how much work a block is)."""
    cpu_block(1, None)  # import numpy first: the import is not part of a block
    n = 8
    while True:
        dt = sorted(_timed(cpu_block, n) for _ in range(3))[1]  # the median of three
        if dt > 0.05:
            return max(1, int(n * target / dt))
        n *= 2


def _timed(fn, *args) -> float:
    t0 = time.process_time()
    fn(*args, None)
    return time.process_time() - t0


DAISY_SCRIPT = r'''
import json, sys, tempfile, time
import daisy
def noop(block):
    pass
def main(n, workers):
    side = int(round(n ** 0.5))
    total = daisy.Roi((0, 0), (side * 8, side * 8))
    blk = daisy.Roi((0, 0), (8, 8))
    with tempfile.TemporaryDirectory() as d:
        task = daisy.Task("noop", total, blk, blk, process_function=noop,
                          read_write_conflict=False, max_workers=workers,
                          tracking_path=d + "/track", resource_tracking=True)
        t0 = time.perf_counter()
        ok = daisy.run_blockwise(task, progress=False, summary=False)
        dt = time.perf_counter() - t0
    print(json.dumps({"blocks": side * side, "seconds": dt, "ok": bool(ok)}))
if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
'''


def daisy_python(given: str | None) -> str | None:
    for candidate in ([given] if given else []) + ["/tmp/daisyvenv/bin/python", sys.executable]:
        if candidate and Path(candidate).exists():
            ok = subprocess.run([candidate, "-c", "import daisy; assert daisy.__version__.startswith('2')"],
                                capture_output=True).returncode == 0
            if ok:
                return candidate
    return None


def run_daisy(python: str, n: int, workers: int = 2) -> dict | None:
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "daisy_noop.py"
        script.write_text(DAISY_SCRIPT)
        proc = subprocess.run([python, str(script), str(n), str(workers)], capture_output=True,
                              text=True, cwd=d, timeout=1800)
    if proc.returncode != 0:
        print(f"  daisy failed: {proc.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_spacrq_noop(n: int, workers: int = 2) -> dict:
    from spacrq.blockwise import Roi, Task, run_blockwise
    side = int(round(n ** 0.5))
    with tempfile.TemporaryDirectory() as d:
        task = Task("noop", Roi((0, 0), (side * 8, side * 8)), Roi((0, 0), (8, 8)), Roi((0, 0), (8, 8)),
                    noop, read_write_conflict=False, num_workers=workers,
                    tracking_path=Path(d) / "track", resource_tracking=True)
        t0 = time.perf_counter()
        report = run_blockwise([task], log_dir=d)
        dt = time.perf_counter() - t0
    startup = report["noop"].workers.startup.mean
    return {"blocks": side * side, "seconds": dt, "ok": report.succeeded, "startup": startup,
            **_split(report["noop"], dt, workers)}


def _split(tr, elapsed: float, workers: int) -> dict:
    """What the Summary says a block's round trip was made of, beside what the benchmark measures.

    The benchmark's own figure for spacrq's cost: the worker time per block not spent inside a
    block while the run went, ``(workers × (elapsed − start-up) − Σ wall) / blocks``.  The
    Summary's ``overhead`` (round trip − queued − wall) should come out at that, not at the
    time blocks wait behind each other in their worker (``queued``).
    """
    b = tr.blocks
    measured = (workers * (elapsed - (tr.workers.startup.mean or 0.0)) - b.wall.total) / max(b.wall.n, 1)
    return {"round_trip": b.round_trip.mean, "queued": b.queued.mean, "wall": b.wall.mean,
            "overhead": b.overhead.mean, "bench_cost": measured}


def _print_split(r: dict) -> None:
    print(f"   Summary per block: round trip {r['round_trip'] * 1e3:.3f} ms = queued {r['queued'] * 1e3:.3f} ms"
          f" + wall {r['wall'] * 1e3:.3f} ms + overhead {r['overhead'] * 1e6:.1f} µs;"
          f" the benchmark's spacrq cost per block {r['bench_cost'] * 1e6:.1f} µs"
          f" (overhead / that = {r['overhead'] / r['bench_cost']:.2f}; round trip − wall, the old"
          f" overhead, would say {(r['round_trip'] - r['wall']) * 1e6:.0f} µs)")


def bench_noop(sizes, daisy_py, repeats: int):
    print(f"1. no-op blocks, 2 workers, tracking store + resource tracking (best of {repeats}, alternating)")
    print(f"   {'blocks':>8} {'spacrq blocks/s':>16} {'daisy blocks/s':>15} {'ratio':>7}")
    for n in sizes:
        mine, theirs = [], []
        for _ in range(repeats):
            mine.append(run_spacrq_noop(n))
            if daisy_py:
                found = run_daisy(daisy_py, n)
                if found:
                    theirs.append(found)
        best = min(mine, key=lambda r: r["seconds"])
        a = best["blocks"] / best["seconds"]
        other = min(theirs, key=lambda r: r["seconds"]) if theirs else None
        b = other["blocks"] / other["seconds"] if other else float("nan")
        print(f"   {best['blocks']:>8,} {a:>16,.0f} {b:>15,.0f} {a / b:>6.2f}x"
              f"   (spacrq {best['seconds']:.2f} s incl. {best['startup']:.2f} s worker start-up, "
              f"daisy {other['seconds'] if other else float('nan'):.2f} s)")
        _print_split(best)


def bench_cpu(blocks: int, repeats: int):
    import functools

    from spacrq.blockwise import Roi, Task, run_blockwise
    iterations = calibrate()
    fn = functools.partial(cpu_block, iterations)
    print(f"2. ~20 ms CPU-bound numpy blocks ({blocks} blocks, {iterations} iterations each, "
          f"best of {repeats}, alternating)")
    results: dict[str, float] = {}
    walls: dict[str, float] = {}
    cpus: dict[str, float] = {}
    busy = 0.0
    split: dict = {}
    for _ in range(repeats):
        for label, executor, workers in (("serial", "serial", 1), ("2 workers", "local", 2)):
            with tempfile.TemporaryDirectory() as d:
                task = Task(f"cpu{workers}", Roi((0,), (blocks * 8,)), Roi((0,), (8,)), Roi((0,), (8,)),
                            fn, read_write_conflict=False, num_workers=workers,
                            tracking_path=Path(d) / "t", resource_tracking=True)
                t0 = time.perf_counter()
                report = run_blockwise([task], executor=executor, log_dir=d)
                elapsed = time.perf_counter() - t0
                rate = blocks / elapsed
                if rate > results.get(label, 0.0):
                    results[label] = rate
                    walls[label] = report[task.task_id].blocks.wall.mean
                    cpus[label] = report[task.task_id].blocks.cpu.mean
                    if workers > 1:
                        busy = report[task.task_id].workers.compute.total / (workers * elapsed)
                        split = _split(report[task.task_id], elapsed, workers)
    for label in ("serial", "2 workers"):
        print(f"   {label:>10}: {results[label]:7.1f} blocks/s   (mean block wall {walls[label] * 1e3:.1f} ms, "
              f"CPU {cpus[label] * 1e3:.1f} ms)")
    print(f"   the 2 workers were computing {busy * 100:.0f} % of the run's wall time "
          "(start-up, messaging and scheduling take the rest)")
    _print_split(split)
    share = results["2 workers"] / (2 * results["serial"])
    bare = bare_processes(iterations, blocks, repeats)
    print(f"   2 workers reach {share * 100:.0f} % of twice the serial throughput (target >= 90 %)")
    print(f"   the machine's own ceiling: two bare processes running the same blocks with no scheduler,\n"
          f"   no tracking and no measurement reach {bare / (2 * results['serial']) * 100:.0f} % of twice serial "
          f"({bare:.1f} blocks/s); spacrq reaches {results['2 workers'] / bare * 100:.0f} % of that")
    print("   (a worker's block CPU above the serial one means the two cores were shared with other\n"
          "    processes or slowed each other; the computing share is what the scheduler controls)")


def _bare_worker(iterations: int, n: int) -> None:
    for _ in range(n):
        cpu_block(iterations, None)


def bare_processes(iterations: int, blocks: int, repeats: int) -> float:
    """Blocks/s of two plain processes splitting the blocks: what the hardware allows."""
    import multiprocessing as mp
    best = 0.0
    with mp.get_context("spawn").Pool(2) as pool:
        pool.starmap(_bare_worker, [(iterations, 2), (iterations, 2)])  # start-up and imports
        for _ in range(repeats):
            t0 = time.perf_counter()
            pool.starmap(_bare_worker, [(iterations, blocks // 2), (iterations, blocks - blocks // 2)])
            best = max(best, blocks / (time.perf_counter() - t0))
    return best


def _dask_processes(workers: int = 2):
    """``dask scheduler`` and ``workers`` ``dask worker`` processes on loopback; a context manager."""
    import contextlib
    import signal
    import socket

    @contextlib.contextmanager
    def cm():
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        address = f"tcp://127.0.0.1:{port}"
        here = str(Path(__file__).resolve().parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
        quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                     start_new_session=True)
        procs = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1",
                                   "--port", str(port), "--no-dashboard"], **quiet)]
        try:
            procs += [subprocess.Popen([sys.executable, "-m", "dask", "worker", address, "--nthreads",
                                        "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"],
                                       **quiet) for _ in range(workers)]
            from distributed import Client
            with Client(address, timeout="30s") as client:
                client.wait_for_workers(workers, timeout=60)
            yield address
        finally:
            for p in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return cm()


def _executor_run(fn, blocks: int, executor: str, cluster) -> dict:
    from spacrq.blockwise import Roi, Task, run_blockwise
    with tempfile.TemporaryDirectory() as d:
        task = Task("ex", Roi((0,), (blocks * 8,)), Roi((0,), (8,)), Roi((0,), (8,)), fn,
                    read_write_conflict=False, num_workers=2, tracking_path=Path(d) / "t",
                    resource_tracking=True)
        t0 = time.perf_counter()
        report = run_blockwise([task], executor=executor, log_dir=d, dask_cluster=cluster)
        elapsed = time.perf_counter() - t0
    tr = report["ex"]
    startup = tr.workers.startup.mean or 0.0  # local workers start inside the run; dask ones before
    overhead = (2 * (elapsed - startup) - tr.blocks.wall.total) / max(tr.blocks.wall.n, 1)
    assert report.succeeded, report.problems()
    return {"rate": blocks / elapsed, "overhead": overhead, "elapsed": elapsed, "startup": startup,
            "cluster": (tr.outcome or {}).get("cluster", "local worker processes")}


def bench_executors(noop_blocks: int, cpu_blocks: int, repeats: int) -> None:
    import functools

    from distributed import LocalCluster
    iterations = calibrate()
    cases = (("no-op", noop, noop_blocks),
             ("20 ms", functools.partial(cpu_block, iterations), cpu_blocks))
    print(f"3. executors side by side, 2 workers, tracking store + resource tracking "
          f"(best of {repeats}, alternating; overhead = worker time per block not spent in it)")
    best: dict = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as local_cluster, _dask_processes(2) as address:
        executors = (("local executor", "local", None),
                     ("dask LocalCluster", "dask", local_cluster),
                     ("dask worker processes", "dask", address))
        for _ in range(repeats):
            for case, fn, blocks in cases:
                for label, executor, cluster in executors:
                    r = _executor_run(fn, blocks, executor, cluster)
                    key = (case, label)
                    if key not in best or r["rate"] > best[key]["rate"]:
                        best[key] = r
    print(f"   {'blocks':>14} {'executor':<22} {'blocks/s':>10} {'overhead/block':>15} {'vs local':>9}")
    for case, _, blocks in cases:
        local = best[(case, "local executor")]["rate"]
        for label, _, _ in executors:
            r = best[(case, label)]
            print(f"   {f'{blocks:,} {case}':>14} {label:<22} {r['rate']:>10,.1f} "
                  f"{r['overhead'] * 1e6:>12,.0f} µs {r['rate'] / local * 100:>8.0f}%")
    for label in ("dask LocalCluster", "dask worker processes"):
        share = best[("20 ms", label)]["rate"] / best[("20 ms", "local executor")]["rate"]
        print(f"   20 ms blocks on {label}: {share * 100:.0f} % of the local executor's throughput "
              f"(target >= 90 %)")
    print("   (the local executor's figures include its workers' start-up inside the run, "
          f"{best[('20 ms', 'local executor')]['startup']:.2f} s; the dask clusters were up before)")


def bench_measure(n: int):
    from spacrq.blockwise.measure import BlockMeter
    meter = BlockMeter()
    t0 = time.perf_counter()
    for _ in range(n):
        pass
    bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):
        meter.start()
        meter.stop()
    measured = time.perf_counter() - t0
    meter.close()
    cost = (measured - bare) / n * 1e6
    print(f"4. per-block measurement (wall, CPU, per-block peak RSS reset+read, IO): {cost:.1f} µs "
          f"per block (target <= 50 µs; peak reset {'on' if meter.resets_peak else 'unavailable'})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 000 blocks only, smaller runs")
    parser.add_argument("--daisy-python", help="interpreter with daisy 2.0.0 installed")
    parser.add_argument("--no-dask", action="store_true", help="leave out the dask executors (3)")
    parser.add_argument("--only-executors", action="store_true", help="run section 3 alone")
    args = parser.parse_args(argv)
    daisy_py = daisy_python(args.daisy_python)
    if daisy_py is None:
        print("daisy 2.x not found: install it with 'pip install daisy==2.0.0' "
              "(e.g. into /tmp/daisyvenv); daisy columns are left empty")
    print(f"spacrq blockwise benchmarks on {os.cpu_count()} CPU(s), load {os.getloadavg()[0]:.1f}")
    repeats = 1 if args.quick else 2
    if args.only_executors:
        bench_executors(2_000 if args.quick else 5_000, 100 if args.quick else 300, repeats)
        return 0
    bench_noop([10_000] if args.quick else [10_000, 100_000], daisy_py, repeats)
    bench_cpu(100 if args.quick else 400, repeats)
    if not args.no_dask:
        bench_executors(2_000 if args.quick else 5_000, 100 if args.quick else 300, repeats)
    bench_measure(20_000 if args.quick else 200_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
