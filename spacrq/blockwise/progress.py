"""Live progress of a running task, published as ``progress.json`` in its store.

The Run Report pane draws its live charts from this file (shape in
docs/CONVENTIONS.md): counts per task, each worker's cumulative idle and
compute time, and the last completed blocks with a running ``seq`` so a
reader takes only the completions it has not seen.  It is replaced
atomically several times a second without fsync — losing the last snapshot
to a power cut costs nothing, an fsync at 4 Hz would cost the disk.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from spacrq.blockwise.run_state import scheduler_record
from spacrq.runfiles import PROGRESS_FILE, write_progress

__all__ = ["publish", "progress_path"]


def progress_path(folder: Path) -> Path:
    return Path(folder) / PROGRESS_FILE


def publish(path: Path, *, run_id: str, state: str, started_at: float, sched, figures,
            ran_on: dict | None = None) -> None:
    """Replace ``path`` with the task's snapshot now.

    ``ran_on`` names where the blocks run (the dask executor's cluster), so a
    live run says so before its report line exists.
    """
    now = time.time()
    snapshot = {
        "run_id": run_id,
        "state": state,
        "pid": os.getpid(),
        # pid, start time and host: "running" only while this very process lives (run_state)
        "scheduler": scheduler_record(),
        "started_at": started_at,
        "written_at": now,
        "task": {
            "task_id": sched.task_id,
            "total": sched.total,
            "done": sched.done,
            "skipped": sched.skipped,
            "failed": sched.failed,
            "orphaned": sched.orphaned,
            "in_flight": sched.running,
            "blocks_per_second": round(figures.blocks_per_second(now), 3),
        },
        "workers": [life.progress() for life in figures.workers.values()],
        "seq": figures.seq,
        "ran_on": dict(ran_on) if ran_on else None,
        "recent": [list(r) for r in figures.recent],
    }
    try:
        write_progress(path, snapshot)
    except OSError:
        pass  # a full disk must not stop the run; the store and runs.jsonl still tell the story
