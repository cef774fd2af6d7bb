"""What the night did, gathered from the files the panes read: the morning report's facts.

Nothing here parses a file of its own: the queue comes from
:func:`spacrq.queue.store.load_queue`, a blockwise job's figures from its
tracking store through :mod:`spacrq.blockwise.report_store`, an experiment
job's outcome from its run directory through :mod:`spacrq.experiments`.  A
job whose store, run or log cannot be read is still in the report, with the
sentence saying what could not be read and why: a damaged night is exactly
the night someone needs the report for.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spacrq.runfiles import RunFileError, directly_in, safe_name
from spacrq.queue.model import (STATUS_FAILED, STATUS_NOT_RUN, STATUS_PENDING, STATUS_RUNNING,
                                STATUS_SKIPPED, STATUS_SUCCESS, Job, Queue, parse_iso)

#: the queue modules whose jobs leave a blockwise tracking store / an experiment run
BLOCKWISE_MODULES = ("blockwise",)
EXPERIMENT_MODULES = ("experiment",)


@dataclass
class BlockwisePart:
    """A blockwise job's run: its panel, its figures, the series its charts are drawn from."""

    store: str
    panel: str = ""
    headline: str = ""
    series: dict[str, Any] = field(default_factory=dict)
    problem: str = ""


@dataclass
class ExperimentPart:
    """An experiment job's run: its state, steps, notes and records."""

    run_dir: str
    state: str = ""
    completed: int = 0
    total: int | None = None
    reason: str = ""
    notes: list[dict[str, str]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    x_column: str = ""
    problem: str = ""


@dataclass
class JobFacts:
    """One job of the night, as the report tells it."""

    index: int
    job: Job
    outcome: str
    log_readable: bool
    blockwise: BlockwisePart | None = None
    experiment: ExperimentPart | None = None
    #: the job's peak resident memory, when it is known exactly
    peak_rss_bytes: int | None = None
    #: when it is not: the most it can have been (a job smaller than its supervisor is
    #: given the supervisor's peak by the kernel, see :func:`spacrq.queue.supervise._peak_of`)
    peak_rss_at_most_bytes: int | None = None


@dataclass
class Night:
    """Everything the report says, gathered once."""

    queue_path: Path
    queue: Queue | None
    problem: str = ""
    jobs: list[JobFacts] = field(default_factory=list)
    machine: dict[str, str] = field(default_factory=dict)
    runner_log: str = ""
    logs_dir: str = ""
    #: when a runner that had died was followed by another (a crash, a kill, a reboot)
    resumed_after_crash: list[str] = field(default_factory=list)
    #: the last runner died and nothing has resumed the queue since
    runner_died: bool = False
    #: what happened to the night's runners, oldest first: deaths, stops, resumes
    events: list["NightEvent"] = field(default_factory=list)


#: kinds of :class:`NightEvent`
DIED_RESUMED, STOPPED, ABORTED, RESUMED, RUN_AGAIN = (
    "died_resumed", "stopped", "aborted", "resumed", "run_again")


@dataclass
class NightEvent:
    """One turn of the night's runners, from ``runner-history.jsonl``, in the order it came.

    ``died_resumed``: a runner died (crash, kill, reboot) and the next one resumed the queue
    at ``at``; ``stopped``/``aborted``: a runner ended early at ``at`` (an operator's stop or
    abort, or the failure policy), ``after_job`` the last job that had ended by then and
    ``reason`` the queue's own sentence (known for its latest stop only); ``resumed``: a
    runner started again after such a stop; ``run_again``: after a night that had ended.
    The stop of the runner still writing the report is not in the history yet: its ``at``
    is when the last job ended (or was aborted), the moment it stopped.
    """

    kind: str
    at: str = ""
    after_job: str = ""
    reason: str = ""


def outcome_of(job: Job) -> str:
    """The job's outcome in the report's words: ``partial`` is its own outcome."""
    if job.status == STATUS_SUCCESS and job.is_partial:
        return "partial"
    if job.status == STATUS_PENDING:
        return STATUS_NOT_RUN
    return job.status


def _resolved_settings(job: Job, queue_dir: Path) -> tuple[dict[str, Any], Path]:
    """The settings the job's module received, and the folder it ran in."""
    from spacrq.queue.validate import resolve_job_settings
    ran_in = (job.ran_with or {}).get("cwd") if isinstance(job.ran_with, dict) else None
    base = Path(str(ran_in or job.cwd or queue_dir)).expanduser()
    return resolve_job_settings(job), base


def _blockwise_part(job: Job, queue_dir: Path) -> BlockwisePart:
    from spacrq.blockwise import spec as bw_spec
    from spacrq.blockwise.report_store import report_from_store
    from spacrq.blockwise.watch_charts import run_window, store_charts
    try:
        settings, base = _resolved_settings(job, queue_dir)
        store = bw_spec.tracking_folder({**bw_spec.DEFAULTS, **settings}, base)
    except Exception as exc:  # any bad setting: the report says so and goes on
        return BlockwisePart(store="", problem=f"its settings could not be read: {exc}")
    part = BlockwisePart(store=str(store))
    if not store.is_dir():
        part.problem = f"its tracking store {store} does not exist (the job never got that far)"
        return part
    start, end = parse_iso(job.started), parse_iso(job.finished)
    try:
        report = report_from_store(store)
        part.panel = report.render()
        part.headline = report.headline()
        # the charts of this job's run, from the run's own start: the Run Report's zero
        lo = start.timestamp() - 1.0 if start else None
        hi = end.timestamp() + 1.0 if end else None
        part.series = store_charts(store, *run_window(store, lo, hi))
    except Exception as exc:  # a damaged store is described, never fatal
        part.problem = f"its tracking store {store} could not be read: {exc}"
    return part


def _experiment_part(job: Job, queue_dir: Path) -> ExperimentPart | None:
    from spacrq import experiments as ex
    from spacrq.modules.experiment import spec_of
    try:
        settings, _ = _resolved_settings(job, queue_dir)
        spec = spec_of(settings)
    except Exception as exc:
        return ExperimentPart(run_dir="", problem=f"its experiment could not be found: {exc}")
    run_id = str(settings.get("run_id") or "")
    try:
        safe_name(run_id, "run id") if run_id else None
    except RunFileError:  # "../../elsewhere" would tell another folder's run as this job's
        return ExperimentPart(run_dir=spec.run_root,
                              problem=f"its run id {run_id!r} is not a folder name inside "
                                      f"{spec.run_root}, so no run of it is told here")
    run_dir = _run_of_job(job, Path(spec.run_root), run_id)
    if run_dir is None:
        return ExperimentPart(run_dir=spec.run_root,
                              problem="no run of it started while the job ran")
    part = ExperimentPart(run_dir=str(run_dir))
    try:
        status = ex.status_of(run_dir)
        part.state = str(status.get("state") or "")
        part.completed = int(status.get("completed") or 0)
        part.total = status.get("total")
        part.reason = str(status.get("error") or status.get("reason") or status.get("problem")
                          or "")
        part.notes = ex.notes_of(run_dir)
        part.records = [ex.record_row(r) for r in ex.records_of(run_dir, limit=0)]
        part.x_column = _swept_column(part.records)
    except Exception as exc:
        part.problem = f"its run {run_dir} could not be read: {exc}"
    return part


def _run_of_job(job: Job, run_root: Path, run_id: str) -> Path | None:
    """The run a job ran: the one it names, else the newest one created while it ran."""
    from spacrq import experiments as ex
    if run_id:
        candidate = run_root / safe_name(run_id, "run id")
        return candidate if candidate.is_dir() else None
    start, end = parse_iso(job.started), parse_iso(job.finished)
    if start is None:
        return None
    lo = start.timestamp() - 1.0
    hi = end.timestamp() + 1.0 if end is not None else float("inf")
    best: tuple[float, Path] | None = None
    for run in ex.runs_of(run_root):
        created = ex.created_of(run).get("created_at")
        when = parse_iso(created).timestamp() if isinstance(created, str) and parse_iso(created) \
            else _mtime(run)
        if lo <= when <= hi and (best is None or when > best[0]):
            best = (when, run)
    return best[1] if best else None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("-inf")


def _swept_column(rows: list[dict[str, Any]]) -> str:
    """The first setpoint column the records name (``setpoint_mV``), else the index."""
    if not rows:
        return ""
    for key in rows[0]:
        if key.lower().startswith(("setpoint", "set_")) and _numeric(rows, key):
            return key
    return "index"


def _numeric(rows: list[dict[str, Any]], key: str) -> bool:
    return any(isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)
               for r in rows[:50])


def machine() -> dict[str, str]:
    """The machine the night ran on: host, CPU, memory, GPU when one is visible."""
    import psutil
    info = {"host": platform.node(), "system": f"{platform.system()} {platform.release()}",
            "cpu": f"{platform.processor() or platform.machine()}, "
                   f"{psutil.cpu_count(logical=True)} logical cores",
            "memory": f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
            "python": platform.python_version()}
    gpu = _gpus()
    info["gpu"] = gpu or "none visible"
    return info


def _gpus() -> str:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ""
    try:
        out = subprocess.run([smi, "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return "; ".join(line.strip() for line in out.splitlines() if line.strip())


def gather(queue_path: str | os.PathLike, *, with_machine: bool = True) -> Night:
    """The night of ``queue_path``: the queue, each job's parts, the machine."""
    from spacrq.queue.model import QueueError
    from spacrq.queue.store import load_queue, logs_dir
    path = Path(queue_path)
    try:
        queue = load_queue(path)
    except QueueError as exc:
        return Night(queue_path=path, queue=None, problem=str(exc),
                     machine=machine() if with_machine else {})
    night = Night(queue_path=path, queue=queue, machine=machine() if with_machine else {})
    folder = logs_dir(path)
    night.logs_dir = str(folder)
    runner_log = folder / "runner.log"
    night.runner_log = str(runner_log) if runner_log.is_file() else ""
    night.resumed_after_crash, night.runner_died = crashes(path)
    night.events = events(path, queue)
    for i, job in enumerate(queue.jobs, start=1):
        facts = JobFacts(index=i, job=job, outcome=outcome_of(job),
                         log_readable=bool(job.log_path) and os.access(job.log_path, os.R_OK))
        ran = job.status not in (STATUS_PENDING, STATUS_NOT_RUN, STATUS_SKIPPED)
        if ran and job.module in BLOCKWISE_MODULES:
            facts.blockwise = _blockwise_part(job, path.parent)
            rss = facts.blockwise.series.get("rss")
            if facts.blockwise.series.get("rss_measured") and rss is not None and len(rss[1]):
                facts.peak_rss_bytes = int(np.nanmax(rss[1]))
        elif ran and job.module in EXPERIMENT_MODULES:
            facts.experiment = _experiment_part(job, path.parent)
        if facts.peak_rss_bytes is None:
            facts.peak_rss_bytes, facts.peak_rss_at_most_bytes = _job_peak_rss(job, folder)
        night.jobs.append(facts)
    return night


def crashes(path: Path) -> tuple[list[str], bool]:
    """``(times a dead runner's queue was resumed, whether the last runner died unresumed)``.

    From the runner history: a start with no end before the next start is a
    runner that died (a crash, a kill, a reboot).
    """
    from spacrq.queue.runner import runner_history, runner_state
    history = runner_history(path)
    resumed: list[str] = []
    for before, after in zip(history, history[1:]):
        if before["event"] == "started" and after["event"] == "started":
            resumed.append(after["at"])
    died = False
    if history and history[-1]["event"] == "started":
        state = runner_state(path) or {}
        died = not state.get("alive") and state.get("pid") == history[-1].get("pid")
    return resumed, died


def events(path: Path, queue: Queue) -> list[NightEvent]:
    """The night's runner turns in order: each death and resume, each stop and what followed.

    From the runner history (a start with no end before the next start is a
    runner that died; an end says how the runner ended).  The queue's own
    ``stopped_reason`` is its latest run's: it tells the last stop, and a
    stop not in the history yet (the report written by the runner that is
    ending, or a queue run without a runner) is added last.
    """
    from spacrq.queue.runner import runner_history
    history = runner_history(path)
    out: list[NightEvent] = []
    for i, entry in enumerate(history):
        if entry["event"] == "started" and i:
            before = history[i - 1]
            kind = DIED_RESUMED if before["event"] == "started" else \
                RESUMED if before.get("state") in (STOPPED, ABORTED) else RUN_AGAIN
            out.append(NightEvent(kind, entry["at"]))
        elif entry["event"] == "ended" and entry.get("state") in (STOPPED, ABORTED):
            out.append(NightEvent(entry["state"], entry["at"], _last_ended(queue, entry["at"])))
    reason = queue.stopped_reason
    if reason:
        last = out[-1] if out else None
        if history and history[-1]["event"] == "ended" and last and last.kind in (STOPPED, ABORTED):
            last.reason = reason
        else:  # it stopped as its last job ended (or was aborted): that moment is its time
            ends = [(when, job.finished) for job in queue.jobs
                    if (when := parse_iso(job.finished)) is not None]
            out.append(NightEvent(STOPPED, max(ends)[1] if ends else "",
                                  _last_ended(queue, ""), reason))
    return out


def _last_ended(queue: Queue, by: str) -> str:
    """The job that ended last before ``by`` (an ISO time; "" for now): a stop came after it."""
    limit = parse_iso(by) if by else None
    best: tuple[float, str] | None = None
    for job in queue.jobs:
        # a job not run (the one an abort stopped among them) did not end before the stop
        when = parse_iso(job.finished) if job.status not in (STATUS_PENDING, STATUS_NOT_RUN) \
            else None
        if when is None or (limit is not None and when > limit):
            continue
        if best is None or when.timestamp() >= best[0]:
            best = (when.timestamp(), job.id)
    return best[1] if best else ""


def _amount(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _job_peak_rss(job: Job, folder: Path) -> tuple[int | None, int | None]:
    """``(exact peak, at most)`` of the job process's memory, as its supervisor recorded it.

    From the end line of the job's latest attempt in its exit record (an
    older attempt's figure is another run's).  A record written before the
    supervisor told the two apart has ``peak_rss_bytes`` only; it is taken
    as written.
    """
    # (the exit record beside the job's log, only in the queue's own logs folder: the file
    # names the log, and anybody may have written the file)
    if job.log_path and directly_in(job.log_path, folder):
        from spacrq.queue.adopt import record_lines
        lines = record_lines(job)[0]  # (the record is read once for all the night's jobs)
        ends = [line for line in lines if "exit_code" in line]
        mine = [line for line in ends if job.started and line.get("key") == job.started]
        for line in reversed(mine or ends):
            exact, at_most = _amount(line.get("peak_rss_bytes")), \
                _amount(line.get("peak_rss_at_most_bytes"))
            if exact is not None or at_most is not None:
                return exact, None if exact is not None else at_most
            if mine:
                break  # this attempt's end says nothing was measured: no other run's figure
    for source in (job.ran_with, job.process, job.run_status):
        if isinstance(source, dict):
            value = source.get("peak_rss_bytes")
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value, None
    return None, None


__all__ = ["Night", "NightEvent", "JobFacts", "BlockwisePart", "ExperimentPart", "gather",
           "outcome_of", "events", "machine", "STATUS_FAILED", "STATUS_RUNNING"]
