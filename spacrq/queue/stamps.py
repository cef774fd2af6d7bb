"""Reading back the run-status stamps a job left, so exit 0 is not mistaken for complete.

Only the stamps a job *added* count: a ``measurements.db`` accumulates one
stamp per stage and per night, so the job's verdict is the difference
between the stamps before it ran and after.  The search is bounded on
purpose — the top level of each folder the module says it writes — because
walking a plate folder of 100 000 images to find a sidecar would cost more
than the job.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from spacrq.ledger import DB_SUFFIXES, RUN_STATUS_SUFFIX, RunStatusUnreadable, read_run_status


def status_artifacts(folders: Iterable[str]) -> list[Path]:
    """Stamp sidecars and SQLite databases directly inside ``folders``."""
    out: list[Path] = []
    seen: set[str] = set()
    for folder in folders:
        try:
            entries = sorted(os.scandir(os.path.expanduser(folder)), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            wanted = name.endswith(RUN_STATUS_SUFFIX) or name.lower().endswith(DB_SUFFIXES)
            if wanted and entry.path not in seen and entry.is_file():
                seen.add(entry.path)
                out.append(Path(entry.path))
    return out


def snapshot(folders: list[str]) -> dict[str, int]:
    """How many stamps each artifact already had before the job ran."""
    counts: dict[str, int] = {}
    for artifact in status_artifacts(folders):
        try:
            counts[str(artifact)] = len(read_run_status(artifact))
        except RunStatusUnreadable:
            counts[str(artifact)] = 0
    return counts


def collect(folders: list[str], before: dict[str, int]) -> dict[str, Any] | None:
    """The job's own verdict from its new stamps; None when it stamped nothing.

    An artifact whose stamp cannot be read makes the verdict ``partial``:
    a stamp torn mid-write is evidence of an interrupted run.
    """
    attempted = succeeded = failed = records = 0
    artifacts: list[str] = []
    unreadable: list[str] = []
    for artifact in status_artifacts(folders):
        key = str(artifact)
        try:
            stamps = read_run_status(artifact)
        except RunStatusUnreadable:
            unreadable.append(key)
            continue
        fresh = stamps[int(before.get(key, 0)):]
        if not fresh:
            continue
        artifacts.append(key)
        for stamp in fresh:
            records += 1
            try:
                attempted += int(stamp.get("n_attempted", 0) or 0)
                succeeded += int(stamp.get("n_succeeded", 0) or 0)
                failed += int(stamp.get("n_failed", 0) or 0)
            except (TypeError, ValueError):
                unreadable.append(key)
    if not records and not unreadable:
        return None
    status = "partial" if failed or unreadable else "complete" if attempted else "empty"
    return {"status": status, "n_attempted": attempted, "n_succeeded": succeeded,
            "n_failed": failed, "records": records, "artifacts": artifacts,
            "unreadable": unreadable}
