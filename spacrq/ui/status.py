"""The status bar's standing line: what is running now, across the three panes.

Read from what the panes already hold in memory (their last snapshots), never
from a file, once a second.  A pane that is still loading, or that lacks what
is asked of it, adds nothing rather than failing.
"""
from __future__ import annotations

from typing import Mapping

RUNNING = ("running", "stopping")


def running_summary(panes: Mapping[str, object]) -> str:
    parts = []
    queue = panes.get("Queue")
    runner = getattr(queue, "runner", None)
    if isinstance(runner, dict) and runner.get("alive"):
        path = getattr(queue, "path", None)
        name = getattr(path, "name", "") or "the queue"
        job = runner.get("current_job")
        parts.append(f"{name}: running {job}" if job else f"{name}: running")
    report = panes.get("Run Report")
    states = getattr(report, "_states", None)
    if isinstance(states, dict):
        tasks = sorted(str(k).rstrip("/").rsplit("/", 1)[-1] for k, v in states.items()
                       if v == "running")  # keys are store paths: the folder is the task
        if tasks:
            parts.append(f"blockwise {', '.join(tasks[:3])}{' …' if len(tasks) > 3 else ''}")
    experiments = panes.get("Experiments")
    rows = getattr(getattr(experiments, "runs", None), "rows", ())  # the run table's rows
    live = [str(row.key) for row in rows if getattr(row, "look", "") in RUNNING] \
        if isinstance(rows, tuple) else []
    if live:
        parts.append(f"experiment run {', '.join(live[:3])}")
    return "Running — " + " · ".join(parts) if parts else "Nothing running"
