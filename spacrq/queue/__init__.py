"""The Queue: a persistent, validated, resumable queue of ``(module, settings)`` jobs.

An operator lines up the night's work — mask, measure, classify, the same
again with another setting — and goes home.  Each job is checked when it is
added, runs in its own process one at a time, is persisted at every
transition, and ends ``success`` (perhaps PARTIAL), ``failed``, ``skipped``
(its input never got made) or ``not_run`` (the queue stopped first).

Public names follow spaCR's ``spacr.batch``, whose queue files load here
unchanged.  The window's side of it lives in :mod:`spacrq.queue.runner`.
"""
import importlib
from typing import Any

#: Where each public name lives.  Imported on first use, so that the job
#: supervisor (``python -m spacrq.queue.supervise``, started once per run)
#: does not pay for the engine, the modules and the validators it never uses.
_HOMES = {
    "Problem": "spacrq.problems", "format_problems": "spacrq.problems",
    "run_queue": "spacrq.queue.engine",
    "prepare_resume": "spacrq.queue.resume", "resume_queue": "spacrq.queue.resume",
    "SettingsError": "spacrq.queue.settings",
    "apply_transition": "spacrq.queue.store", "journal_path": "spacrq.queue.store",
    "load_queue": "spacrq.queue.store", "logs_dir": "spacrq.queue.store",
    "save_queue": "spacrq.queue.store", "open_queue": "spacrq.queue.store",
    "Progress": "spacrq.queue.summary", "QueueResult": "spacrq.queue.summary",
    "classify_failure": "spacrq.queue.summary",
    "plan": "spacrq.queue.validate", "resolve_job_settings": "spacrq.queue.validate",
    "validate_job": "spacrq.queue.validate", "validate_queue": "spacrq.queue.validate",
}
for _name in ("ALL_STATUSES", "ON_ERROR_CHOICES", "QUEUE_FORMAT", "RESUMABLE_STATUSES",
              "STATUS_FAILED", "STATUS_NOT_RUN", "STATUS_PENDING", "STATUS_RUNNING",
              "STATUS_SKIPPED", "STATUS_SUCCESS", "Job", "Queue", "QueueError",
              "fmt_duration", "id_problem"):
    _HOMES[_name] = "spacrq.queue.model"


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'spacrq.queue' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "QUEUE_FORMAT", "STATUS_PENDING", "STATUS_RUNNING", "STATUS_SUCCESS", "STATUS_FAILED",
    "STATUS_SKIPPED", "STATUS_NOT_RUN", "ALL_STATUSES", "RESUMABLE_STATUSES", "ON_ERROR_CHOICES",
    "QueueError", "SettingsError", "Problem", "format_problems", "fmt_duration",
    "classify_failure", "id_problem", "Job", "Queue", "Progress", "QueueResult", "load_queue",
    "save_queue", "logs_dir", "journal_path", "apply_transition", "validate_job",
    "validate_queue", "plan", "resolve_job_settings", "run_queue", "resume_queue",
    "prepare_resume", "open_queue",
]
