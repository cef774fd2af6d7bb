"""The names every part of :mod:`spacrq.experiments` shares: files, events, the error.

A run directory is written by an experiment module (plesty-lib's or one built
on :mod:`spacrq.experiments.authoring`) and read by spacrq; the file and
event names below are that contract, spelled once.
"""
from __future__ import annotations

__all__ = [
    "ExperimentError", "MANIFEST_TIMEOUT", "JOB_KIND", "CONTROL_FILE", "CANCEL", "ABORT",
    "CREATED_FILE", "RUN_CONFIG_FILE", "RUN_REPORT_FILE", "RUN_LOGS_DIR", "NOTES_FILE",
    "NOTE_MARK", "PLAN_FILE", "JOURNAL_FILE", "RECORDS_FILE", "PROGRESS_FILE", "PROCESS_FILE",
    "TERMINAL_EVENTS", "STATES", "RESUMABLE_STATES",
]

#: Seconds a module gets to answer ``--manifest`` (or ``--devices``, ``--dry-run``).
MANIFEST_TIMEOUT = 60.0
#: What a queue job that runs an experiment is called.
JOB_KIND = "experiment"

CONTROL_FILE = "control.json"
#: ``stop`` values of the control document: finish the step in flight, or interrupt it.
CANCEL = "cancel"
ABORT = "abort"

CREATED_FILE = "created.json"
RUN_CONFIG_FILE = "config.yaml"
RUN_REPORT_FILE = "report.html"
RUN_LOGS_DIR = "job-logs"
NOTES_FILE = "notes.txt"
NOTE_MARK = "--- "

PLAN_FILE = "plan.json"
JOURNAL_FILE = "journal.jsonl"
RECORDS_FILE = "records.jsonl"
PROGRESS_FILE = "progress.json"
#: spacrq's own file in a run it started: the process (pid + start time) running it,
#: so a run whose journal says "running" but whose process is gone reads ``interrupted``.
PROCESS_FILE = "spacrq-process.json"

TERMINAL_EVENTS = ("run_completed", "run_canceled", "run_aborted")

#: Every state :func:`spacrq.experiments.status_of` can report.
STATES = ("not_started", "created", "running", "paused", "stopping", "canceled", "aborted",
          "interrupted", "not_responding", "completed", "failed")
#: States a run can be resumed from: it stopped without finishing (a live paused run
#: "resumes" by continuing).
RESUMABLE_STATES = ("paused", "canceled", "aborted", "interrupted", "failed")


class ExperimentError(RuntimeError):
    """An experiment could not be read, started or driven; the message names the fix."""
