"""The Queue: a persistent, validated, resumable queue of ``(module, settings)`` jobs.

An operator lines up the night's work — mask, measure, classify, the same
again with another setting — and goes home.  Each job is checked when it is
added, runs in its own process one at a time, is persisted at every
transition, and ends ``success`` (perhaps PARTIAL), ``failed``, ``skipped``
(its input never got made) or ``not_run`` (the queue stopped first).

Public names follow spaCR's ``spacr.batch``, whose queue files load here
unchanged.  The window's side of it lives in :mod:`spacrq.queue.runner`.
"""
from spacrq.problems import Problem, format_problems
from spacrq.queue.engine import run_queue
from spacrq.queue.resume import prepare_resume, resume_queue
from spacrq.queue.model import (ALL_STATUSES, ON_ERROR_CHOICES, QUEUE_FORMAT, RESUMABLE_STATUSES,
                                STATUS_FAILED, STATUS_NOT_RUN, STATUS_PENDING, STATUS_RUNNING,
                                STATUS_SKIPPED, STATUS_SUCCESS, Job, Queue, QueueError,
                                fmt_duration, id_problem)
from spacrq.queue.settings import SettingsError
from spacrq.queue.store import apply_transition, journal_path, load_queue, logs_dir, save_queue
from spacrq.queue.summary import Progress, QueueResult, classify_failure
from spacrq.queue.validate import plan, resolve_job_settings, validate_job, validate_queue

__all__ = [
    "QUEUE_FORMAT", "STATUS_PENDING", "STATUS_RUNNING", "STATUS_SUCCESS", "STATUS_FAILED",
    "STATUS_SKIPPED", "STATUS_NOT_RUN", "ALL_STATUSES", "RESUMABLE_STATUSES", "ON_ERROR_CHOICES",
    "QueueError", "SettingsError", "Problem", "format_problems", "fmt_duration",
    "classify_failure", "id_problem", "Job", "Queue", "Progress", "QueueResult", "load_queue",
    "save_queue", "logs_dir", "journal_path", "apply_transition", "validate_job",
    "validate_queue", "plan", "resolve_job_settings", "run_queue", "resume_queue",
    "prepare_resume",
]
