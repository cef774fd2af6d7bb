"""The Queue pane's table rows: what each job reads as, and how rows change.

Rows are plain immutable values built on the poller thread, so turning a
new poll into table signals is a cheap comparison (:func:`diff_rows`): a
2000-job queue whose runner rewrites the file at every transition costs the
view a handful of changed rows, never a reset.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

from spacrq.queue.model import fmt_duration, parse_iso
from spacrq.queue.watch_read import breathe

__all__ = ["JobRow", "RowDiff", "FINISHED_STATUSES", "row_of", "rows_of", "status_word",
           "status_text", "time_text", "diff_rows", "progress_of"]

#: statuses that count towards "done" in "done / total jobs"
FINISHED_STATUSES = ("success", "failed", "skipped")


@dataclass(frozen=True)
class JobRow:
    """One job as the table shows it: immutable, so rows compare with ``==``."""

    number: int
    job_id: str
    module: str
    label: str
    after: str
    status: str
    error: str = ""
    partial: bool = False
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    attempts: int = 0
    log_path: str = ""
    timeout: float | None = None

    @cached_property
    def cells(self) -> tuple[str, ...]:
        """The table's text for this row, time column left empty (it ticks).

        Computed once per row, on the poller thread for rows it builds, so
        painting the table is a tuple lookup per cell.
        """
        return (str(self.number), self.job_id, self.module, self.label, self.after,
                status_text(self), "", os.path.basename(self.log_path) if self.log_path else "")


def _epoch(text: Any) -> float | None:
    """ISO-8601 (what the queue file stores) to epoch seconds, or None."""
    moment = parse_iso(text)
    return None if moment is None else moment.timestamp()


def row_of(number: int, job: Any) -> JobRow:
    """The row of one :class:`spacrq.queue.model.Job`, its cells computed here (off the GUI thread)."""
    row = JobRow(
        number=number,
        job_id=str(job.id),
        module=str(job.module),
        label=str(job.label or ""),
        after=", ".join(job.depends_on),
        status=str(job.status),
        error=str(job.error or ""),
        partial=job.is_partial and job.status == "success",
        started_at=_epoch(job.started),
        finished_at=_epoch(job.finished),
        exit_code=job.exit_code,
        attempts=int(getattr(job, "attempts", 0) or 0),
        log_path=str(job.log_path or ""),
        timeout=getattr(job, "timeout", None),
    )
    row.cells  # noqa: B018 (computed now, on the caller's thread)
    return row


def rows_of(queue: Any) -> tuple[JobRow, ...]:
    """The table rows of a :class:`spacrq.queue.model.Queue`, in run order."""
    rows = []
    for number, job in enumerate(queue.jobs, start=1):
        rows.append(row_of(number, job))
        breathe()
    return tuple(rows)


def status_word(status: str, partial: bool = False) -> str:
    """The word an operator reads for a status; a partial success never reads as success."""
    if status == "success":
        return "partial" if partial else "succeeded"
    return "not run" if status == "not_run" else status


def status_text(row: JobRow) -> str:
    """The status word of one row (see :func:`status_word`)."""
    return status_word(row.status, row.partial)


def time_text(row: JobRow, now: float) -> str:
    """How long the job took, or how long it has been running (ticks with ``now``)."""
    if row.started_at is None:
        return "—"
    if row.finished_at is not None:
        return fmt_duration(row.finished_at - row.started_at)
    if row.status == "running":
        return fmt_duration(now - row.started_at)
    return "—"


def progress_of(rows: Sequence[JobRow]) -> tuple[int, int, dict[str, int]]:
    """``(done, total, jobs per status word)`` for the progress bar and its caption."""
    tally = Counter((row.status, row.partial and row.status == "success") for row in rows)
    counts: dict[str, int] = {}
    done = 0
    for (status, partial), n in tally.items():
        word = status_word(status, partial)
        counts[word] = counts.get(word, 0) + n
        if status in FINISHED_STATUSES:
            done += n
    return done, len(rows), counts


@dataclass(frozen=True)
class RowDiff:
    """How a table goes from ``old`` rows to ``new`` rows, in the fewest signals.

    ``kind`` is ``"same"``, ``"update"`` (``changed`` rows only), ``"insert"``
    (``count`` rows at ``first``, then ``changed``), ``"remove"`` (``count``
    rows at ``first``, then ``changed``) or ``"reset"`` (anything else).
    ``changed`` indices refer to the *new* rows.
    """

    kind: str
    changed: tuple[int, ...] = ()
    first: int = 0
    count: int = 0


def _changed_in_place(old: Sequence[JobRow], new: Sequence[JobRow]) -> tuple[int, ...]:
    """Indices of rows whose content differs, position by position."""
    return tuple(i for i, (a, b) in enumerate(zip(old, new)) if a is not b and a != b)


def diff_rows(old: Sequence[JobRow], new: Sequence[JobRow]) -> RowDiff:
    """The smallest change that turns ``old`` into ``new``.

    Rows are matched by job id.  A block of ids inserted or removed in one
    place (add, duplicate, remove) becomes an insert or a remove; ids that
    kept their positions, or swapped within an equal-length span (move up /
    down), become an update of the rows whose content differs.  Only a
    reshuffle that is none of these resets the table.
    """
    old_ids = [r.job_id for r in old]
    new_ids = [r.job_id for r in new]
    if old_ids == new_ids:
        changed = _changed_in_place(old, new)
        return RowDiff("update", changed) if changed else RowDiff("same")
    prefix = 0
    limit = min(len(old_ids), len(new_ids))
    while prefix < limit and old_ids[prefix] == new_ids[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < limit - prefix
           and old_ids[len(old_ids) - 1 - suffix] == new_ids[len(new_ids) - 1 - suffix]):
        suffix += 1
    gone = len(old_ids) - prefix - suffix
    came = len(new_ids) - prefix - suffix
    if gone == 0 and came > 0:
        aligned = list(old[:prefix]) + [None] * came + list(old[prefix:])
        changed = tuple(i for i, row in enumerate(new)
                        if not prefix <= i < prefix + came and aligned[i] != row)
        return RowDiff("insert", changed, prefix, came)
    if came == 0 and gone > 0:
        aligned = list(old[:prefix]) + list(old[prefix + gone:])
        changed = tuple(i for i, row in enumerate(new) if aligned[i] != row)
        return RowDiff("remove", changed, prefix, gone)
    if gone == came and sorted(old_ids[prefix:prefix + gone]) == sorted(new_ids[prefix:prefix + came]):
        return RowDiff("update", _changed_in_place(old, new))
    return RowDiff("reset")
