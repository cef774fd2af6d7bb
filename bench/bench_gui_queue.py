"""How smooth the Queue pane stays while a 2000-job queue runs.

The pane is shown offscreen on a 2000-job queue of no-op ``command`` jobs and
the real runner (``spacrq queue run``, a separate process) is started on it,
so statuses change as fast as the runner can go — hundreds of transitions a
second, a checkpoint rewriting the whole file every few seconds, a job log
followed live.  A 5 ms QTimer measures how late the event loop answers: a
late tick is a stall the operator would feel as a frozen window.

Side by side, in the same run: the same pane with a table model that resets
itself on every poll (what a naive table does), and no pane at all (the
machine's own scheduling noise with the runner busy on the same cores).

Run:  .venv/bin/python bench/bench_gui_queue.py [--jobs 2000] [--seconds 20]
(each variant runs in its own fresh interpreter, one after the other)
Target: max stall < 50 ms with the diffing model.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QElapsedTimer, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from spacrq.queue.model import Job, Queue  # noqa: E402
from spacrq.queue.runner import request_stop, runner_state  # noqa: E402
from spacrq.queue.store import load_queue, save_queue  # noqa: E402
from spacrq.ui.table_model import RowTable  # noqa: E402
from spacrq.workspace import open_workspace  # noqa: E402

TICK_MS = 5


class StallMeter:
    """A 5 ms timer; each tick records how much later than asked it came."""

    def __init__(self) -> None:
        self.timer = QTimer()
        self.timer.setInterval(TICK_MS)
        self.clock = QElapsedTimer()
        self.lateness: list[float] = []
        self.timer.timeout.connect(self._tick)

    def start(self) -> None:
        self.clock.start()
        self.timer.start()

    def _tick(self) -> None:
        elapsed = self.clock.restart()
        self.lateness.append(max(0.0, elapsed - TICK_MS))

    def stop(self) -> None:
        self.timer.stop()


def make_queue(folder: Path, jobs: int, name: str) -> Path:
    q = Queue(name=name, max_consecutive_failures=0)
    for _ in range(jobs):
        q.add(Job(module="command", settings={"argv": ["true"]}), validate=False)
    path = folder / f"{name}.queue.json"
    save_queue(q, path)
    return path


def resetting_set_rows(self: RowTable, rows) -> None:
    """The naive table: throw everything away and start again on every poll."""
    self.beginResetModel()
    self._rows = tuple(rows)
    self._index = None
    self.endResetModel()


def _wait(app: QApplication, done, limit: float, step_ms: int = 20, shown=None) -> None:
    """Run the event loop (``exec``, as the real window does) until ``done()`` or ``limit`` s.

    Leaving ``exec`` hides top-level windows on the offscreen platform, so
    the pane is shown again each time: it must be painted while measured.
    """
    if shown is not None:
        shown.show()
    deadline = time.monotonic() + limit
    check = QTimer()
    check.setInterval(step_ms)
    check.timeout.connect(lambda: (done() or time.monotonic() > deadline) and app.quit())
    check.start()
    app.exec()
    check.stop()


def _figures(name: str, late: list[float]) -> dict:
    late = late or [0.0]
    return {
        "name": name, "ticks": len(late), "max_stall_ms": max(late),
        "p99_stall_ms": statistics.quantiles(late, n=100)[98] if len(late) >= 100 else max(late),
        "mean_lateness_ms": statistics.fmean(late),
        "stalls_over_50ms": sum(x > 50 for x in late),
    }


def measure(app: QApplication, ws, jobs: int, seconds: float, name: str,
            resetting: bool) -> dict:
    from spacrq.ui.queue_pane import QueuePane

    if resetting:
        RowTable.set_rows = resetting_set_rows
    pane = QueuePane(ws)  # built once at start-up, before the window shows
    pane.resize(1280, 820)
    pane.show()
    _wait(app, lambda: pane.path is not None and not pane.waiting_for(), 10, shown=pane)
    path = make_queue(ws.queues, jobs, name)
    meter = StallMeter()
    meter.start()
    opened = time.perf_counter()
    pane.open_queue(path)
    _wait(app, lambda: pane.model.rowCount() >= jobs, 30, shown=pane)
    open_seconds = time.perf_counter() - opened
    open_lateness = list(meter.lateness)
    meter.lateness.clear()
    snapshots = [0]
    pane.poller.snapshot.connect(lambda _s: snapshots.__setitem__(0, snapshots[0] + 1))
    pane.start("run")  # what the Run button does: save, check, start, off the GUI thread
    visible = []
    _wait(app, lambda: visible.append(pane.isVisible()) or
          pane.runner.get("state") in ("finished", "stopped", "aborted", "crashed"),
          seconds, shown=pane)
    assert all(visible), "the pane was measured while hidden"
    meter.stop()
    done = sum(r.value.status in ("success", "failed", "skipped") for r in pane.model.rows)
    request_stop(path, now=True)
    _wait(app, lambda: not (runner_state(path) or {}).get("alive"), 30, step_ms=100, shown=pane)
    pane.shutdown()
    figures = _figures("reset every poll" if resetting else "row diff (spacrq)", meter.lateness)
    figures.update(open_s=open_seconds, open_max_stall_ms=max(open_lateness or [0.0]),
                   jobs_done_while_measured=done, snapshots=snapshots[0])
    return figures


def measure_floor(app: QApplication, ws, jobs: int, seconds: float) -> dict:
    """The machine's own noise: the same runner, no pane, only the 5 ms timer.

    On a busy two-core machine the scheduler alone makes a timer late; this
    row says how much of a stall is the machine rather than the window.
    """
    from spacrq.queue.runner import start_runner

    path = make_queue(ws.queues, jobs, "floor")
    start_runner(path)
    meter = StallMeter()
    meter.start()
    _wait(app, lambda: (runner_state(path) or {}).get("state") in ("finished", "stopped",
                                                                    "aborted", "crashed"),
          seconds, step_ms=200)
    meter.stop()
    request_stop(path, now=True)
    deadline = time.monotonic() + 30
    while (runner_state(path) or {}).get("alive") and time.monotonic() < deadline:
        time.sleep(0.05)
    figures = _figures("no pane (floor)", meter.lateness)
    figures.update(open_s=0.0, open_max_stall_ms=0.0, snapshots=0,
                   jobs_done_while_measured=sum(j.status == "success"
                                                for j in load_queue(path).jobs))
    return figures


VARIANTS = ("diff", "reset", "floor")


def run_variant(variant: str, jobs: int, seconds: float) -> dict:
    """One measurement in this process (a fresh interpreter per variant keeps them fair)."""
    app = QApplication.instance() or QApplication(sys.argv[:1])
    with tempfile.TemporaryDirectory(prefix="spacrq-bench-gui-") as tmp:
        ws, _ = open_workspace(Path(tmp) / "ws", demo=False)
        if variant == "floor":
            return measure_floor(app, ws, jobs, seconds)
        return measure(app, ws, jobs, seconds, variant, resetting=variant == "reset")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.variant:
        print(json.dumps(run_variant(args.variant, args.jobs, args.seconds)))
        return 0
    results = []
    for variant in VARIANTS:
        done = subprocess.run([sys.executable, __file__, "--variant", variant, "--jobs",
                               str(args.jobs), "--seconds", str(args.seconds)],
                              capture_output=True, text=True, timeout=args.seconds + 180)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"{variant}: failed (exit {done.returncode})\n{done.stderr[-2000:]}")
            return 1
        results.append(json.loads(lines[-1]))
    print(f"Queue pane, {args.jobs} jobs, real runner, {args.seconds:.0f} s each, "
          f"{TICK_MS} ms timer, offscreen, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs\n")
    header = (f"{'model':<20} {'open s':>7} {'open max':>9} {'max stall':>10} {'p99':>7} "
              f"{'mean':>6} {'>50ms':>6} {'jobs done':>10} {'snapshots':>10}")
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['name']:<20} {r['open_s']:>7.2f} {r['open_max_stall_ms']:>7.0f}ms "
              f"{r['max_stall_ms']:>8.1f}ms {r['p99_stall_ms']:>5.1f}ms {r['mean_lateness_ms']:>5.2f} "
              f"{r['stalls_over_50ms']:>6} {r['jobs_done_while_measured']:>10} {r['snapshots']:>10}")
    ours, naive, floor = results
    ratio = naive["max_stall_ms"] / max(ours["max_stall_ms"], 0.1)
    print(f"\nmax stall, reset / diff: {ratio:.1f}x; diff / no pane: "
          f"{ours['max_stall_ms'] / max(floor['max_stall_ms'], 0.1):.1f}x   "
          f"target: diff max stall < 50 ms -> {'met' if ours['max_stall_ms'] < 50 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
