"""What a terminal shows of running blockwise tasks: blocks done of total, rate, ETA, busy workers.

Read from each task's ``progress.json`` (the snapshot the Run Report's live
charts read), so showing a run costs it nothing and ``spacrq report PATH
--follow`` of a run started elsewhere shows the same lines.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterable

from spacrq.runfiles import PROGRESS_FILE, read_progress
from spacrq.terminal import bar, eta_text


def task_line(store: str | os.PathLike, *, now: float | None = None) -> str:
    """One line for the task whose tracking store is ``store``."""
    snap = read_progress(Path(store) / PROGRESS_FILE)
    name = Path(store).name
    if snap is None or not isinstance(snap.get("task"), dict):
        return f"{name}: waiting for the first progress snapshot"
    task = snap["task"]
    now = time.time() if now is None else now

    def count(key: str) -> int:
        value = task.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return 0
        return int(min(max(value, 0), 2 ** 53))  # a planted 1e308 must not overflow the bar

    total = count("total")
    done, skipped = count("done"), count("skipped")
    failed, orphaned = count("failed"), count("orphaned")
    finished = done + skipped + failed + orphaned
    rate = task.get("blocks_per_second")
    rate_text = f"{rate:.1f} blocks/s" if isinstance(rate, (int, float)) else "— blocks/s"
    listed = snap.get("workers")
    workers = [w for w in listed if isinstance(w, dict)] if isinstance(listed, list) else []
    busy = sum(1 for w in workers if w.get("state") == "busy")
    started = snap.get("started_at")
    elapsed = now - started if isinstance(started, (int, float)) else 0.0
    return (f"{task.get('task_id') or name}: {done + skipped} of {total} blocks done, "
            f"{failed} failed, {orphaned} orphaned {bar(finished, total, 16)} {rate_text}"
            f"  {eta_text(finished - skipped, total - skipped, elapsed)}"
            f"  workers busy {busy}/{len(workers)}")


def tasks_lines(stores: Iterable[str | os.PathLike]) -> list[str]:
    return [task_line(store) for store in stores]
