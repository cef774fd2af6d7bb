"""Queue overhead: no-op ``command`` jobs through ``spacrq queue run``, beside task-spooler.

Usage::

    .venv/bin/python bench/bench_queue.py [--sizes 10 500 2000] [--repeat 3]

For each queue size N it times, wall clock, in one run:

* ``bare``    — N ``/bin/true`` processes started and waited for one after
  another (the floor any queue pays: the cost of a process);
* ``spacrq``  — ``python -m spacrq queue run FILE`` on a queue of N ``true``
  jobs, timed by the runner itself from taking the queue's lock to writing its
  final state (``runner.json`` ``started_at`` → ``finished_at``), so the
  interpreter's start-up — a fixed cost of ~0.2–1 s, not a per-job one — is
  left out (it is printed separately).  Every transition is durable, each job
  gets its own log file and process group, and its lines in the queue's exit
  record (the runner starts its jobs as its own children under its keeper,
  which records any a dead runner left), in both persistence modes, each forced at both sizes:
  ``file`` (every transition written to the journal before the job it
  concerns starts and fsync'd as that job starts — on the runner's fsync
  thread, one at a time, so a job's transitions are durable by the time the
  job after it started — and the queue file replaced atomically at every job
  so it is current: the default up to 500 jobs) and ``journal`` (the same fsync'd
  journal, the file replaced only at checkpoints: the default above);
* ``tsp``     — Debian's task-spooler (``/usr/bin/tsp``, private
  ``TS_SOCKET``, one slot): N ``tsp true`` enqueues then ``tsp -w`` for the
  last, the same way an operator uses it.  The enqueues overlap the jobs, so
  this is bounded by the ``tsp`` client's starts; tsp's server alone (the
  jobs queued beforehand behind one blocked on a fifo) is timed and printed
  too, for the smallest size (``tsp server only``).

With ``--against TREE`` (another checkout of spacrq, e.g. a ``git worktree``
of an older commit) the 10-job file mode of that tree is timed in the same
rounds, run by the same interpreter through ``PYTHONPATH``: a before/after
comparison under the same load.

A ``lean loop`` is timed beside it: the per-job system calls of the runner's
design — jobs as its own children under a subreaper keeper, the next job's
files opened while a job runs, every durability of file mode kept (its fsync
made in the loop, where the runner overlaps it on a thread) — in a bare
loop with none of the runner's bookkeeping (see
:func:`time_lean`): what is left between it and ``file`` is the runner's
Python.

A ``floor`` is timed too, for the smallest size: the work file mode cannot
leave out (a journal line fsync'd, the file replaced, the log created, the
job spawned and waited for), done one after the other in a bare loop with no
runner around it and nothing overlapped — file mode, which overlaps the
fsync and the files' creation with the job before, can come in below it.

It prints per-job time, per-job overhead above ``bare``, and the ratios
(spacrq/tsp, and for flatness the 2000-job/10-job per-job overhead, each size
in the mode it runs in by default — 2000-job journal over 10-job file — with
the same-mode ratios beside it, and each size between, such as the 500 jobs
of file mode's bound, over the 10-job one).  Then it
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
from spacrq.queue.store import DIRECT_MAX_JOBS

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


def time_floor(n: int, folder: Path) -> float:
    """Seconds for n jobs (from the second's start, scaled) of only the work file mode cannot
    leave out, in a bare loop: per
    job a journal line written and fsync'd, the queue file (its real bytes) replaced
    atomically, the job's log created, the job spawned in a session of its own into it,
    and waited for, and its end journalled.  No runner logic, no supervisor, no Python
    between the steps but the calls themselves: what a runner with nothing else to do
    would cost."""
    work = folder / f"floor{n}-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    data = _queue_file(work, n).read_bytes()
    journal = os.open(work / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    target, temp = str(work / "q.queue.json"), str(work / ".q.tmp")
    env = dict(os.environ)
    t0 = time.perf_counter()
    for i in range(n):
        if i == 1:  # (timed from the second job, as spacrq's per-job figure is)
            t0 = time.perf_counter()
        os.write(journal, b'{"job":"j%d","set":{"status":"running"},"seq":%d}\n' % (i, 2 * i))
        os.fsync(journal)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.replace(temp, target)
        os.close(fd)
        log = os.open(work / f"{i:03d}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        pid = os.posix_spawn(TRUE, [TRUE], env, setsid=True,
                             file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0),
                                           (os.POSIX_SPAWN_DUP2, log, 1),
                                           (os.POSIX_SPAWN_DUP2, log, 2)])
        os.wait4(pid, 0)
        os.close(log)
        os.write(journal, b'{"job":"j%d","set":{"status":"success"},"seq":%d}\n' % (i, 2 * i + 1))
    elapsed = time.perf_counter() - t0
    os.close(journal)
    os.close(devnull)
    return elapsed / max(1, n - 1) * n  # (so that / n gives the per-job figure)


def time_lean(n: int, folder: Path) -> float:
    """Seconds for n jobs (from the second's start, scaled) of a lean runner loop: the
    per-job system calls of the runner's design with none of its bookkeeping — it starts
    each job itself (its jobs its own children, a subreaper parent recording the end of
    any it leaves behind), with every durability of file mode kept.  Per job: the two
    jobs that changed serialised again and the file replaced atomically (its temporary
    file made while the job before ran), the "running" line written, the job spawned in
    its own session into its log (opened while the job before ran) and its "starting"
    written to the queue's exit record (open for the whole run), its start written to
    the record, the journal fsync'd, the next job's log opened, its end seen with
    ``waitid(WNOWAIT)`` — so a runner that dies before journalling it leaves a zombie for
    the subreaper to record — journalled, then reaped and written to its record."""
    import orjson
    work = folder / f"lean{n}-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    jobs = [{"id": f"j{i}", "module": "command", "settings": {"argv": [TRUE]},
             "status": "pending", "started": "", "finished": "", "exit_code": None,
             "log_path": "", "attempts": 0} for i in range(n)]
    parts = [orjson.dumps(job, option=orjson.OPT_INDENT_2) for job in jobs]
    journal = os.open(work / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    target, temp = str(work / "q.queue.json"), str(work / ".q.tmp")
    env, seq, before = dict(os.environ), 0, None
    made = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    record = os.open(work / "exits.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def files(i: int) -> tuple[str, int]:
        log = str(work / f"{i:03d}_{jobs[i]['id']}.log")
        return log, os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    ahead = files(0)
    t0 = time.perf_counter()
    for i, job in enumerate(jobs):
        if i == 1:
            t0 = time.perf_counter()
        log, log_fd = ahead
        job.update(status="running", started=datetime.now().astimezone().isoformat(),
                   attempts=1, log_path=log)
        seq += 1
        os.write(journal, orjson.dumps({"job": job["id"], "set": {
            k: job[k] for k in ("status", "started", "attempts", "log_path")}, "seq": seq}) + b"\n")
        parts[i] = orjson.dumps(job, option=orjson.OPT_INDENT_2)
        if before is not None:
            parts[before] = orjson.dumps(jobs[before], option=orjson.OPT_INDENT_2)
        os.write(made, b'{"jobs": [' + b",".join(parts) + b"]}")
        os.replace(temp, target)
        os.close(made)
        os.write(record, orjson.dumps({"key": job["started"], "starting": time.time()}) + b"\n")
        pid = os.posix_spawn(TRUE, [TRUE], env, setsid=True,
                             file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0),
                                           (os.POSIX_SPAWN_DUP2, log_fd, 1),
                                           (os.POSIX_SPAWN_DUP2, log_fd, 2)])
        os.write(record, orjson.dumps({"key": job["started"], "pid": pid}) + b"\n")
        os.fsync(journal)  # (as the job starts)
        made = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # (while it runs)
        if i + 1 < n:
            ahead = files(i + 1)
        code = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT).si_status
        job.update(status="success" if code == 0 else "failed", exit_code=code,
                   finished=datetime.now().astimezone().isoformat())
        seq += 1
        os.write(journal, orjson.dumps({"job": job["id"], "set": {
            k: job[k] for k in ("status", "finished", "exit_code")}, "seq": seq}) + b"\n")
        os.waitpid(pid, 0)
        os.write(record, orjson.dumps({"key": job["started"], "exit_code": code}) + b"\n")
        os.close(log_fd)
        before = i
    os.fsync(journal)
    elapsed = time.perf_counter() - t0
    for fd in (made, journal, devnull, record):
        os.close(fd)
    return elapsed / max(1, n - 1) * n  # (so that / n gives the per-job figure)


MODES = {"file": str(10 ** 9), "journal": "0"}  # SPACRQ_QUEUE_DIRECT_MAX_JOBS forcing each


def time_spacrq(n: int, folder: Path, mode: str = "file",
                tree: str | None = None) -> tuple[float, float, float]:
    """(seconds inside the runner, seconds of the whole command, seconds per job).

    Per job is the jobs' own span, the second job's start to the last job's end
    (as the queue file records them), over N - 1: every per-job cost — the
    durable writes, the supervisor round trip, the log, the exit record — and
    none of the run's fixed ones (interpreter, lock, load, check, the job
    supervisor's start, which the first job waits for, the last write).
    """
    path = _queue_file(folder, n)
    env = dict(os.environ, SPACRQ_QUEUE_DIRECT_MAX_JOBS=MODES[mode],
               SPACRQ_QUEUE_DIRECT_MAX_BYTES=str(10 ** 12))  # (file mode: by jobs alone)
    if tree:
        env["PYTHONPATH"] = tree
    t0 = time.perf_counter()
    # (run from the queue's folder: ``-m`` puts the working folder first on the path, so
    # run from a checkout it would import that checkout whatever PYTHONPATH says)
    subprocess.run([sys.executable, "-m", "spacrq", "queue", "run", str(path)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=folder)
    elapsed = time.perf_counter() - t0
    jobs = load_queue(path).jobs
    statuses = {j.status for j in jobs}
    assert statuses <= {"success"}, statuses
    state = runner_state(path)
    inside = (datetime.fromisoformat(state["finished_at"])
              - datetime.fromisoformat(state["started_at"])).total_seconds()
    span = ((datetime.fromisoformat(jobs[-1].finished) - datetime.fromisoformat(jobs[1].started))
            .total_seconds() / (n - 1)) if n > 1 else 0.0
    return inside, elapsed, span


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


def time_tsp_run(n: int, folder: Path) -> float:
    """Seconds task-spooler's server takes to run n jobs queued beforehand: the jobs wait
    behind a first job that blocks on a fifo, the fifo is written, and the clock stops when
    the last job ended (less a ``tsp -w`` on an idle server) — tsp's own per-job cost,
    without the ``tsp`` client starts that :func:`time_tsp` overlaps with the jobs."""
    tag = uuid.uuid4().hex[:8]
    env = dict(os.environ, TS_SOCKET=str(folder / f"tspr{n}-{tag}.socket"),
               TMPDIR=str(folder), TS_MAXFINISHED=str(n + 10), TS_SLOTS="1")
    fifo = folder / f"tspr{n}-{tag}.fifo"
    os.mkfifo(fifo)
    quiet = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.run([TSP, "-S", "1"], check=True, **quiet)
    subprocess.run([TSP, "sh", "-c", 'read x < "$0"', str(fifo)], check=True, **quiet)
    for _ in range(n):
        subprocess.run([TSP, TRUE], check=True, **quiet)
    t0 = time.perf_counter()
    with open(fifo, "w") as f:
        f.write("go\n")
    subprocess.run([TSP, "-w"], **quiet)
    elapsed = time.perf_counter() - t0
    t1 = time.perf_counter()
    subprocess.run([TSP, "-w"], **quiet)
    idle_wait = time.perf_counter() - t1
    subprocess.run([TSP, "-K"], **quiet)
    return max(0.0, elapsed - idle_wait)


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
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, DIRECT_MAX_JOBS, 2000])
    ap.add_argument("--repeat", type=int, default=5, help="runs per figure (median kept)")
    ap.add_argument("--against", metavar="TREE",
                    help="another spacrq checkout, timed in the same rounds (file mode)")
    args = ap.parse_args(argv)
    have_tsp = os.access(TSP, os.X_OK)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench_queue_") as tmp:
        folder = Path(tmp)
        empty = [time_spacrq(0, folder) for _ in range(args.repeat)]
        startup = statistics.median(t[1] - t[0] for t in empty)
        # The fixed cost of a run with one job (lock, load, check, starting the job supervisor,
        # first and last write), printed; the per-job figures leave it out, as tsp's server
        # start is left out of tsp's.
        one = {mode: statistics.median(time_spacrq(1, folder, mode)[0] - time_bare(1)
                                       for _ in range(args.repeat)) for mode in MODES}
        fixed = statistics.median(t[0] for t in empty)
        tsp_startup = statistics.median(time_tsp(0, folder) for _ in range(args.repeat)) \
            if have_tsp else float("nan")
        # Rounds interleave the sizes and modes so a change in machine load hits all of them
        # alike; a large queue runs once, in the middle round.
        samples: dict[int, list[tuple[float, ...]]] = {n: [] for n in args.sizes}
        against: dict[int, list[float]] = {n: [] for n in args.sizes}
        floors: list[float] = []  # the smallest size's floor, per round
        leans: list[float] = []  # the smallest size's lean loop, over tsp, per round
        tsp_runs: list[float] = []  # the smallest size's tsp server-side run, per round
        for r in range(args.repeat):
            for n in args.sizes:
                if n > 200 and r != args.repeat // 2:
                    continue
                tsp = (time_tsp(n, folder) - tsp_startup) / n if have_tsp else float("nan")
                # The other tree goes first in every other round: what runs right after
                # another run pays for the disk writes that one left behind.
                if args.against and n <= 200 and r % 2:
                    against[n].append(time_spacrq(n, folder, "file", args.against)[2] / tsp)
                samples[n].append((time_bare(n) / n, time_spacrq(n, folder, "file")[2],
                                   time_spacrq(n, folder, "journal")[2], tsp))
                if n == min(args.sizes):
                    floors.append(time_floor(n, folder) / n)
                    leans.append(time_lean(n, folder) / n / tsp)
                    if have_tsp:
                        tsp_runs.append(time_tsp_run(n, folder) / n)
                if args.against and n <= 200 and not r % 2:
                    against[n].append(time_spacrq(n, folder, "file", args.against)[2] / tsp)
        for n, got in samples.items():
            rows[n] = tuple(statistics.median(s[i] for s in got) for i in range(4))
        lvp = time_load_validate_plan(folder)
    ms = 1000.0
    print(f"no-op command jobs, wall clock per job (ms); load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores; left out: spacrq interpreter start-up "
          f"{startup * ms:.0f} ms, tsp server start {tsp_startup * ms:.0f} ms, spacrq's fixed "
          f"cost of a run with jobs (lock, load, check, first and last write: "
          f"file {one['file'] * ms:.0f} ms, journal {one['journal'] * ms:.0f} ms; of an empty "
          f"run {fixed * ms:.0f} ms); spacrq per job = 2nd job's start to last job's end / (N - 1)")
    print(f"{'jobs':>6} {'bare':>7} {'file':>7} {'journal':>8} {'tsp':>7} {'file-bare':>10} "
          f"{'jrnl-bare':>10} {'tsp-bare':>9} {'file/tsp':>9} {'jrnl/tsp':>9}")
    for n, (bare, ours, jrnl, tsp) in rows.items():
        print(f"{n:>6} {bare * ms:7.2f} {ours * ms:7.2f} {jrnl * ms:8.2f} {tsp * ms:7.2f} "
              f"{(ours - bare) * ms:10.2f} {(jrnl - bare) * ms:10.2f} {(tsp - bare) * ms:9.2f} "
              f"{ours / tsp:9.2f} {jrnl / tsp:9.2f}")
    floor = statistics.median(floors)
    small_row = rows[min(rows)]
    print(f"floor at {min(rows)} jobs (only the work file mode cannot leave out, in a bare "
          f"loop: journal line + fsync, file replace, log, spawn, wait): {floor * ms:.2f} ms "
          f"per job; file/floor {small_row[1] / floor:.2f}, tsp/floor {small_row[3] / floor:.2f}")
    print(f"lean loop at {min(rows)} jobs (the runner's system calls per job, jobs as its own "
          f"children under a subreaper, with none of its bookkeeping): lean/tsp "
          f"{statistics.median(leans):.2f} (median of the rounds' ratios)")
    if tsp_runs:
        tsp_run = statistics.median(tsp_runs)
        print(f"tsp server only at {min(rows)} jobs (jobs queued beforehand, no client starts "
              f"overlapping them): {tsp_run * ms:.2f} ms per job; file/that "
              f"{small_row[1] / tsp_run:.2f}, journal/that {small_row[2] / tsp_run:.2f}")
    if len(rows) >= 2:
        small, large = min(rows), max(rows)

        def overhead(n: int, col: int) -> float:
            return rows[n][col] - rows[n][0]

        # The target compares each size in the mode a queue of that size runs in by default:
        # the file rewritten at every job up to DIRECT_MAX_JOBS, the journal above.
        col = {n: 1 if n <= DIRECT_MAX_JOBS else 2 for n in (small, large)}
        name = {1: "file", 2: "journal"}
        flat = overhead(large, col[large]) / max(1e-9, overhead(small, col[small]))
        print(f"flatness (each size in its default mode; file up to {DIRECT_MAX_JOBS} jobs, "
              f"journal above): overhead per job at {large} jobs ({name[col[large]]}) / at "
              f"{small} jobs ({name[col[small]]}) = {flat:.2f} (target <= 1.5)")
        for n in sorted(rows)[1:-1]:  # (each size between, in its default mode)
            c = 1 if n <= DIRECT_MAX_JOBS else 2
            print(f"  at {n} jobs ({name[c]}{', its bound' if n == DIRECT_MAX_JOBS else ''}): "
                  f"overhead per job / at {small} jobs ({name[col[small]]}) = "
                  f"{overhead(n, c) / max(1e-9, overhead(small, col[small])):.2f}")
        for c in (1, 2):
            forced = [n for n in (small, large) if col[n] != c]
            note = (f"; {', '.join(map(str, forced))} jobs forced into it, for comparison"
                    if forced else "")
            print(f"  same mode at both sizes ({name[c]}{note}): "
                  f"{overhead(large, c) / max(1e-9, overhead(small, c)):.2f}")
    print(f"targets: at {min(rows)} jobs, file mode (every transition durable, the file "
          "current) <= tsp per job")
    for n, ratios in against.items():
        if ratios:
            ours = statistics.median(s[1] / s[3] for s in samples[n])
            print(f"against {args.against} at {n} jobs, file mode: its file/tsp "
                  f"{statistics.median(ratios):.2f}, this tree's {ours:.2f} (medians of the "
                  f"rounds' ratios)")
    load, validate, planned = lvp
    print(f"2000-job queue: load {load * ms:.0f} ms, validate {validate * ms:.0f} ms, plan "
          f"{planned * ms:.0f} ms, total {(load + validate + planned) * ms:.0f} ms (target < 1000)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
