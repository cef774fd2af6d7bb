"""Does the Experiments pane keep the window responsive while 20 runs go at once?

A helper process plays 20 live runs — each appending journal events and a
record every ``--step`` seconds, with a progress snapshot, like a sweep in
flight — into a workspace; each run starts with ``--history`` steps already
journaled and recorded (a run hours in).  The pane watches them at 2 Hz with
one run selected (its records table and plot growing).  Meanwhile a 5 ms
QTimer measures how late the event loop answers: a stall is the GUI thread
busy with something, and the target is none over 50 ms.

Two phases in one run, side by side: the pane on an idle workspace (the
floor: what the timer itself and the machine cost), then the pane watching
the 20 live runs.  Building the pane (before the loop runs, as at the
window's start-up) is timed on its own; how long the opening takes — every
run's history read, the selected run's records all shown — is printed too.
It prints the figures; it asserts nothing.

    .venv/bin/python bench/bench_gui_experiments.py [--runs 20] [--seconds 20]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")



def _iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def _line(doc: dict) -> str:
    return json.dumps(doc, separators=(",", ":")) + "\n"


def seed_runs(run_root: Path, runs: int, steps: int, history: int) -> list[Path]:
    """``runs`` run directories, each ``history`` steps into a ``steps``-step plan."""
    out = []
    for r in range(runs):
        run_dir = run_root / f"live_{r:02d}"
        run_dir.mkdir(parents=True)
        (run_dir / "plan.json").write_text(json.dumps({"config": {"points": steps}, "steps": [
            {"id": f"p{i}", "op": "measure", "params": {"x": i}} for i in range(steps)]}))
        journal = [_line({"event": "run_started", "ts": _iso(), "run_id": run_dir.name,
                          "total_steps": steps})]
        records = []
        for i in range(history):
            journal.append(_line({"event": "step_started", "ts": _iso(), "step_id": f"p{i}",
                                  "index": i}))
            records.append(_line({"index": i, "saved_at": _iso(),
                                  "provenance": {"step_id": f"p{i}", "params": {"x": i}},
                                  "type": "value", "value": {"x": i, "signal": (i % 97) * 0.1}}))
            journal.append(_line({"event": "step_completed", "ts": _iso(), "step_id": f"p{i}",
                                  "index": i}))
        (run_dir / "journal.jsonl").write_text("".join(journal))
        (run_dir / "records.jsonl").write_text("".join(records))
        out.append(run_dir)
    return out


def writer(run_root: str, runs: int, history: int, step: float, seconds: float) -> None:
    """The helper process: every ``step`` seconds, one step of every run."""
    dirs = sorted(Path(run_root).glob("live_*"))
    (Path(run_root) / ".writer-ready").write_text("1")
    index = history
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        tick = time.monotonic()
        for run_dir in dirs:
            with open(run_dir / "journal.jsonl", "a") as j:
                j.write(_line({"event": "step_started", "ts": _iso(), "step_id": f"p{index}",
                               "index": index}))
            with open(run_dir / "records.jsonl", "a") as rec:
                rec.write(_line({"index": index, "saved_at": _iso(),
                                 "provenance": {"step_id": f"p{index}", "params": {"x": index}},
                                 "type": "value", "value": {"x": index, "signal": (index % 97) * 0.1}}))
            with open(run_dir / "journal.jsonl", "a") as j:
                j.write(_line({"event": "step_completed", "ts": _iso(), "step_id": f"p{index}",
                               "index": index}))
            tmp = run_dir / ".progress.tmp"
            tmp.write_text(json.dumps({"step_id": f"p{index + 1}", "done": 1, "total": 2,
                                       "detail": "reading", "written_at": time.time()}))
            os.replace(tmp, run_dir / "progress.json")
        index += 1
        time.sleep(max(0.0, step - (time.monotonic() - tick)))


#: seconds after opening the pane that count as its opening (first paint, first read
#: of every run's history); stalls after it are the steady state an operator lives in
SETTLE = 2.0


def measure(pane_factory, seconds: float, select: str | None, app, verbose: bool = False) -> dict:
    """Run the event loop for ``seconds`` with a 5 ms timer; how late was it?"""
    from PySide6.QtCore import QElapsedTimer, QTimer

    lateness: list[float] = []
    clock = QElapsedTimer()
    clock.start()
    last = [clock.nsecsElapsed()]

    stalls: list[tuple[float, float]] = []  # (seconds into the phase, ms late)

    def tick() -> None:
        now = clock.nsecsElapsed()
        late = max(0.0, (now - last[0]) / 1e6 - 5.0)
        lateness.append(late)
        if late > 50:
            stalls.append((now / 1e9, late))
        last[0] = now

    # building the pane happens before the event loop runs (the main window builds
    # its panes at start-up): timed on its own, not counted as a stall of the loop
    built = time.perf_counter()
    pane = pane_factory()
    pane.resize(1300, 820)
    pane.show()
    construct_ms = (time.perf_counter() - built) * 1000
    handled: list[float] = []
    original = pane.show_snapshot
    opened = time.perf_counter()
    # seconds after opening until every run's history was read (no row "reading…")
    # and until the selected run's records were all shown
    ready = {"runs_read_s": float("nan"), "records_read_s": float("nan")}

    def timed(snap):
        t0 = time.perf_counter()
        original(snap)
        handled.append((time.perf_counter() - t0) * 1000)
        if snap.runs and ready["runs_read_s"] != ready["runs_read_s"] \
                and not any(run.state == "reading" for run in snap.runs):
            ready["runs_read_s"] = t0 - opened
        detail = snap.detail
        if detail and not detail.more_records and ready["records_read_s"] != ready["records_read_s"]:
            ready["records_read_s"] = t0 - opened

    pane.show_snapshot = timed  # the pane's base hands every snapshot to it
    polls: list[float] = []  # CPU seconds of each poll on the poller's thread
    body = pane.poller._worker._poll

    def timed_poll(request):
        t0 = time.thread_time()
        try:
            return body(request)
        finally:
            polls.append((time.thread_time() - t0) * 1000)

    pane.poller._worker._poll = timed_poll
    gui_cpu = time.thread_time()
    timer = QTimer()
    timer.setTimerType(__import__("PySide6.QtCore", fromlist=["Qt"]).Qt.TimerType.PreciseTimer)
    timer.timeout.connect(tick)
    last[0] = clock.nsecsElapsed()
    timer.start(5)
    selected = False
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        if select and not selected and pane.runs.row_of(select) >= 0:
            pane.table.selectRow(pane.runs.row_of(select))
            selected = True
        time.sleep(0.001)
    timer.stop()
    gui_cpu = time.thread_time() - gui_cpu
    if verbose:
        print("stalls over 50 ms (s into the phase, ms):",
              [(round(a, 2), round(b)) for a, b in stalls], file=sys.stderr)
    rows = pane.runs.rowCount()
    points = pane.detail.plot.point_count()
    pane.shutdown()
    pane.close()
    pane.deleteLater()
    app.processEvents()
    lateness.sort()
    handled.sort()
    first_poll = polls[0] if polls else float("nan")  # reads every run's history
    later_polls = sorted(polls[1:])

    def pct(values, q):
        return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")

    settled = [late for at, late in stalls if at > SETTLE]
    return {"ticks": len(lateness), "max_ms": lateness[-1] if lateness else float("nan"),
            "settled_over_50": len(settled), "settled_max_ms": max(settled, default=0.0),
            "p99_ms": pct(lateness, 0.99), "over_50": sum(1 for v in lateness if v > 50),
            "snapshots": len(handled), "handle_max_ms": handled[-1] if handled else float("nan"),
            "handle_p50_ms": pct(handled, 0.5), "rows": rows, "points": points,
            "gui_busy": gui_cpu / seconds * 1000, "first_poll_ms": first_poll,
            "poll_p50_ms": pct(later_polls, 0.5),
            "poll_max_ms": later_polls[-1] if later_polls else float("nan"),
            "construct_ms": construct_ms, **ready}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--history", type=int, default=5000,
                        help="steps each run has already journaled and recorded")
    parser.add_argument("--step", type=float, default=0.2, help="seconds per step of each run")
    parser.add_argument("--verbose", action="store_true", help="list when each stall happened")
    parser.add_argument("--writer", nargs=5, metavar=("ROOT", "RUNS", "HISTORY", "STEP", "SECONDS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        root, runs, history, step, seconds = args.writer
        writer(root, int(runs), int(history), float(step), float(seconds))
        return 0

    from PySide6.QtWidgets import QApplication

    from spacrq.experiments.declarations import ExperimentSpec, declare_experiment
    from spacrq.ui.experiments_pane import ExperimentsPane
    from spacrq.workspace import open_workspace

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory(prefix="spacrq-bench-") as tmp:
        idle_ws, _ = open_workspace(Path(tmp) / "idle", demo=False)
        live_ws, _ = open_workspace(Path(tmp) / "live", demo=False)
        run_root = live_ws.experiments / "live" / "runs"
        # module "json.tool" answers --manifest with an error at once: the form stays
        # empty and only the run table, records and plot are measured
        for ws, name, root in ((idle_ws, "idle", idle_ws.experiments / "idle" / "runs"),
                               (live_ws, "live", run_root)):
            declare_experiment(ws.root, ExperimentSpec(name, "json.tool", sys.executable, tmp, {},
                                                       str(root)))
        t0 = time.perf_counter()
        seed_runs(run_root, args.runs, args.history + int(args.seconds / args.step) + 100,
                  args.history)
        seeded = time.perf_counter() - t0

        idle = measure(lambda: ExperimentsPane(idle_ws), args.seconds / 2, None, app, args.verbose)
        helper = subprocess.Popen([sys.executable, __file__, "--writer", str(run_root),
                                   str(args.runs), str(args.history), str(args.step),
                                   str(args.seconds + 5)])
        try:
            while not (run_root / ".writer-ready").exists():
                time.sleep(0.05)
            live = measure(lambda: ExperimentsPane(live_ws), args.seconds, "live_00", app, args.verbose)
        finally:
            helper.terminate()
            helper.wait(10)

    print(f"Experiments pane, {args.runs} live runs at 2 Hz, each {args.history} steps in "
          f"and stepping every {args.step:g} s (seeded in {seeded:.1f} s); "
          f"5 ms timer, {args.seconds:g} s")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} at the end "
          "(stalls count the machine's other work too; CPU figures do not)")
    print(f"{'':28}{'idle workspace':>16}{f'{args.runs} live runs':>16}{'ratio':>8}")
    for key, label in (("max_ms", "max loop stall (ms)"), ("p99_ms", "p99 loop stall (ms)"),
                       ("over_50", "stalls over 50 ms"),
                       ("settled_over_50", f"  of them after {SETTLE:g} s"),
                       ("settled_max_ms", f"max stall after {SETTLE:g} s (ms)"),
                       ("handle_max_ms", "snapshot handling max (ms)"),
                       ("handle_p50_ms", "snapshot handling p50 (ms)"), ("snapshots", "snapshots"),
                       ("gui_busy", "GUI thread CPU (ms per s)"),
                       ("first_poll_ms", "first poll CPU (ms)"),
                       ("poll_p50_ms", "later polls CPU p50 (ms)"),
                       ("poll_max_ms", "later polls CPU max (ms)"),
                       ("construct_ms", "building the pane (ms)"),
                       ("runs_read_s", "all runs read after (s)"),
                       ("records_read_s", "all records shown after (s)"),
                       ("rows", "rows in table"), ("points", "points plotted")):
        a, b = idle[key], live[key]
        ratio = f"{b / a:8.1f}" if isinstance(a, (int, float)) and a and a == a else f"{'':8}"
        print(f"{label:28}{a:16.1f}{b:16.1f}{ratio}")
    verdict = "met" if live["over_50"] == 0 else "NOT met"
    settled = "met" if live["settled_over_50"] == 0 else "NOT met"
    print(f"target (no stall over 50 ms with {args.runs} live runs): {verdict} over the whole "
          f"phase; {settled} once open (after {SETTLE:g} s)")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # skip interpreter teardown: PySide6 and pyqtgraph can crash in the garbage
    # collector at exit, which would hide the figures' exit code
    os._exit(code)
