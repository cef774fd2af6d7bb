"""What happened overnight, in the words the operator reads over coffee.

Failures are classified from the last lines of each job's log and grouped:
twelve jobs that died on the same missing share are one problem worth one
line, not twelve.  ``skipped``, ``failed``, ``not_run`` and PARTIAL are each
listed on their own, because none of them is a success.
"""
from __future__ import annotations

import os

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from spacrq.queue.model import (STATUS_FAILED, STATUS_NOT_RUN, STATUS_PENDING, STATUS_SKIPPED,
                                STATUS_SUCCESS, Job, Queue, fmt_duration, parse_iso)
from spacrq.runfiles import directly_in, open_regular

_RULE = "=" * 78
_EXC_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Failed|Timeout))"
                       r"(?::\s*(?P<msg>.*))?$")
_NAMED = re.compile(r"^(?P<type>[A-Za-z_]\w*):\s*(?P<msg>.+)$")


def log_tail(log_path: str | Path, max_lines: int = 40, max_bytes: int = 16384,
             within: str | Path | None = None) -> list[str]:
    """The last non-empty lines of a log, reading at most ``max_bytes`` from its end.

    A job's log is named in the queue file, which anybody may have written: it is read
    only when it is a regular file (never through a link in its place, never waiting on a
    pipe) and, with ``within`` (the queue's logs folder), only from that very folder."""
    if within is not None and not directly_in(log_path, within):
        return []
    try:
        fd = open_regular(log_path)
    except (OSError, ValueError):
        return []
    try:
        data = os.pread(fd, max_bytes, max(0, os.fstat(fd).st_size - max_bytes))
    except OSError:
        return []
    finally:
        os.close(fd)
    lines = [ln.rstrip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-max_lines:]


def classify_failure(exit_code: int | None, log_path: str | Path) -> tuple[str, str]:
    """``(kind, one-line message)`` from an exit code and the end of a log.

    ``spacrq.run`` ends a failed job's log with ``error: ExcType: message``;
    a Python traceback ends with ``pkg.ExcType: message``; other programs are
    described by their last line.  Exit code 2 is bad settings or arguments.
    """
    tail = [ln for ln in log_tail(log_path) if not ln.startswith("# ")]
    for line in reversed(tail):
        text = line.strip()
        if text.startswith("error: "):
            rest = text[len("error: "):]
            named = _NAMED.match(rest)
            if named and exit_code != 2:
                return named.group("type"), named.group("msg").strip()
            return ("ConfigurationError" if exit_code == 2 else "JobFailure"), rest
        match = _EXC_LINE.match(text)
        if match:
            kind = match.group("type").rsplit(".", 1)[-1]
            return kind, (match.group("msg") or kind).strip()
    if exit_code == 2:
        return "ConfigurationError", "bad settings or arguments (exit code 2)"
    if exit_code is not None and exit_code < 0:
        return "Killed", f"killed by signal {-exit_code}"
    return "JobFailure", (tail[-1].strip() if tail else "its log says nothing about why")


@dataclass(frozen=True)
class Progress:
    """One transition, handed to ``on_progress`` so a caller can show the queue moving.

    ``event`` is queue_started, job_started, job_finished, job_skipped,
    queue_stopped or queue_finished.
    """

    event: str
    job_id: str = ""
    index: int = 0
    total: int = 0
    status: str = ""
    message: str = ""


def lost_runs_text(job) -> str:
    """``a run lost with its runner (started …)``, the last three start times at most."""
    runs = job.lost_runs
    when = ", ".join(str(r.get("started", "?"))[:40] for r in runs[-3:])
    more = f" and {len(runs) - 3} earlier" if len(runs) > 3 else ""
    what = "a run" if len(runs) == 1 else f"{len(runs)} runs"
    return f"{what} lost with its runner (started {when}{more})"


@dataclass
class QueueResult:
    """The queue with every job's final status, and the summary that is the deliverable."""

    queue: Queue
    log_dir: str = ""
    started: str = ""
    finished: str = ""
    stopped_reason: str = ""
    path: str = ""
    state: str = "finished"
    notes: list[str] = field(default_factory=list)
    #: '' when the queue file holds the final state; else what failed and where the state is
    save_problem: str = ""
    report_path: str = ""  # the morning report written when the run ended

    def jobs_with(self, status: str) -> list[Job]:
        return [job for job in self.queue.jobs if job.status == status]

    @property
    def succeeded(self) -> list[Job]:
        return self.jobs_with(STATUS_SUCCESS)

    @property
    def failed(self) -> list[Job]:
        return self.jobs_with(STATUS_FAILED)

    @property
    def skipped(self) -> list[Job]:
        return self.jobs_with(STATUS_SKIPPED)

    @property
    def not_run(self) -> list[Job]:
        return self.jobs_with(STATUS_NOT_RUN) + self.jobs_with(STATUS_PENDING)

    @property
    def partial(self) -> list[Job]:
        return [job for job in self.queue.jobs if job.status == STATUS_SUCCESS and job.is_partial]

    @property
    def ok(self) -> bool:
        """Everything ran, nothing failed, nothing is partial."""
        return not (self.failed or self.skipped or self.not_run or self.partial)

    @property
    def duration_s(self) -> float | None:
        start, end = parse_iso(self.started), parse_iso(self.finished)
        return None if start is None or end is None else (end - start).total_seconds()

    def grouped_failures(self) -> "OrderedDict[str, OrderedDict[str, list[Job]]]":
        """kind -> message -> jobs, in the order they first failed."""
        groups: OrderedDict[str, OrderedDict[str, list[Job]]] = OrderedDict()
        for job in self.failed:
            kind = job.failure_kind or "JobFailure"
            message = job.error.split(" (exit code")[0].split(" (log ")[0]
            if job.log_path and job.log_path in message:  # its own log: the same problem
                message = message.replace(job.log_path,
                                          os.path.join(os.path.dirname(job.log_path), "…"))
            groups.setdefault(kind, OrderedDict()).setdefault(message, []).append(job)
        return groups

    def headline(self) -> str:
        counts = self.queue.counts()
        return (f"{counts[STATUS_SUCCESS]} ok ({len(self.partial)} partial), "
                f"{counts[STATUS_FAILED]} failed, {counts[STATUS_SKIPPED]} skipped, "
                f"{counts[STATUS_NOT_RUN] + counts[STATUS_PENDING]} not run")

    def summary(self) -> str:
        """What ran, what failed and why (grouped), what was skipped, what is partial."""
        q = self.queue
        lines = [_RULE, f" spacrq queue '{q.name}': {len(q.jobs)} job(s), {self.headline()}", _RULE,
                 f" started  {self.started or '—'}",
                 f" finished {self.finished or '—'} ({fmt_duration(self.duration_s)})"]
        if self.log_dir:
            lines.append(f" logs     {self.log_dir}")
        if self.path:
            lines.append(f" queue    {self.path}")
        if self.report_path:
            lines.append(f" report   {self.report_path}")
        lines.append("")
        width = max((len(job.id) for job in q.jobs), default=2)
        for i, job in enumerate(q.jobs, start=1):
            mark = "success (PARTIAL)" if job.status == STATUS_SUCCESS and job.is_partial else job.status
            lines.append(f" {i:>4}. {job.id.ljust(width)}  {mark.ljust(17)} "
                         f"{fmt_duration(job.duration_s).rjust(8)}  {job.label}")
        lines.append("")
        groups = self.grouped_failures()
        if groups:
            lines.append(" Failures, grouped (identical failures are one problem, not many):")
            for kind, messages in groups.items():
                lines.append(f"   {kind} x{sum(len(j) for j in messages.values())}")
                for message, jobs in messages.items():
                    lines.append(f"     {message} ({', '.join(j.id for j in jobs)})")
            for job in self.failed:
                if job.log_path:
                    lines.append(f"   {job.id}: full log {job.log_path}")
            lines.append("")
        if self.skipped:
            lines.append(" Skipped (NOT a success and NOT a failure; these never ran):")
            lines.extend(f"   {job.id}: {job.error}" for job in self.skipped)
            lines.append("")
        if self.partial:
            lines.append(" PARTIAL (exited 0, but their own run status says items failed):")
            for job in self.partial:
                rs = job.run_status or {}
                lines.append(f"   {job.id}: {rs.get('n_succeeded', '?')} of "
                             f"{rs.get('n_attempted', '?')} items; {rs.get('n_failed', '?')} "
                             f"failed. Artifacts: {', '.join(rs.get('artifacts') or []) or '—'}")
            lines.append("   Anything computed from those artifacts covers a subset.")
            lines.append("")
        twice = [job for job in q.jobs if job.lost_runs]
        if twice:
            lines.append(" Ran again from their start (a run was lost with its runner: its "
                         "outcome unknown):")
            lines.extend(f"   {job.id}: {lost_runs_text(job)}" for job in twice)
            lines.append("")
        stopped = [job for job in self.jobs_with(STATUS_NOT_RUN) if job.started]
        halted = [job for job in self.jobs_with(STATUS_NOT_RUN) if not job.started]
        waiting = self.jobs_with(STATUS_PENDING)
        for jobs, what in ((stopped, "stopped while it ran, on request; it runs again when the "
                                     "queue is resumed"),
                           (halted, "the queue halted before reaching them"),
                           (waiting, "waiting: added after the queue stopped, they run when it "
                                     "is resumed")):
            if jobs:
                lines.append(f" Not run ({len(jobs)}; {what}): "
                             + ", ".join(job.id for job in jobs[:50])
                             + (" …" if len(jobs) > 50 else ""))
                lines.append("")
        if self.stopped_reason:
            lines.append(f" STOPPED: {self.stopped_reason}")
            lines.append("")
        lines.extend(f" note: {n}" for n in self.notes)
        if self.ok and q.jobs:
            lines.append(" Every job completed and nothing is partial.")
        elif not q.jobs:
            lines.append(" The queue holds no job: nothing ran.")
        lines.append(_RULE)
        return "\n".join(lines)
