"""Experiments: step-by-step experiment modules, run detached and watched through their run directory.

The console's side of plesty-lib's experiment contract: before a run the module is asked what it takes
(:func:`read_manifest`); a run is started detached into its run directory
(:func:`start_run`) and from then on is watched through ``journal.jsonl``,
``records.jsonl`` and ``progress.json`` (:class:`RunWatch`, :func:`status_of`)
and driven through ``control.json`` (:func:`ask`, :func:`pause_run`,
:func:`stop_run`, :func:`abort_run`), then resumed from its journal
(:func:`resume_run`).  Nothing here imports Qt.
"""
from __future__ import annotations

from spacrq.experiments.control import ask, asked, cancel, clear, pause, proceed, report
from spacrq.experiments.declarations import (ExperimentSpec, declarations_path, declare_experiment,
                                             find_experiment, load_experiments, save_experiments)
from spacrq.experiments.errors import (ABORT, CANCEL, CONTROL_FILE, CREATED_FILE, JOB_KIND,
                                       JOURNAL_FILE, MANIFEST_TIMEOUT, NOTE_MARK, NOTES_FILE,
                                       PLAN_FILE, PROCESS_FILE, PROGRESS_FILE, RECORDS_FILE,
                                       RESUMABLE_STATES, RUN_CONFIG_FILE, RUN_LOGS_DIR,
                                       RUN_REPORT_FILE, STATES, ExperimentError)
from spacrq.experiments.launch import (ENDED_STATES, Launched, abort_run, continue_run, pause_run,
                                       resume_run, start_run, stop_run, wait_for)
from spacrq.experiments.manifest import (check_setting, fields_of, manifest_defaults, read_devices,
                                         read_dotenv, read_manifest, run_environment)
from spacrq.experiments.notes import add_note, notes_of
from spacrq.experiments.replay import (JournalReplay, RecordsTail, RunWatch, progress_of,
                                       progress_problem, record_row, records_of, reports_in,
                                       resumable, status_of, steps_of)
from spacrq.experiments.runs import (check_run_id, config_text_of, create_run, created_of,
                                     duplicate_run, find_run, has_started, keep_log, kept_log,
                                     latest, linked_runs_of, new_run_id, read_config_file,
                                     reconfigure_run, refuse_linked_run, rename_run, report_of,
                                     run_config_of, run_dir_of, runs_of)

__all__ = [
    "ExperimentError", "ExperimentSpec", "MANIFEST_TIMEOUT", "JOB_KIND", "CONTROL_FILE", "CANCEL",
    "ABORT", "CREATED_FILE", "RUN_CONFIG_FILE", "RUN_REPORT_FILE", "RUN_LOGS_DIR", "NOTES_FILE",
    "NOTE_MARK", "PLAN_FILE", "JOURNAL_FILE", "RECORDS_FILE", "PROGRESS_FILE", "PROCESS_FILE",
    "STATES", "RESUMABLE_STATES",
    "read_manifest", "read_devices", "run_environment", "read_dotenv", "fields_of",
    "manifest_defaults",
    "runs_of", "check_run_id", "new_run_id", "created_of", "add_note", "notes_of", "create_run",
    "has_started", "rename_run", "reconfigure_run", "duplicate_run", "report_of", "keep_log",
    "kept_log", "latest", "find_run", "resumable", "status_of", "progress_of", "steps_of",
    "records_of", "record_row", "ask", "asked", "clear", "pause", "proceed", "cancel", "report",
    "reports_in", "config_text_of", "run_config_of",
    "JournalReplay", "RecordsTail", "RunWatch",
    "Launched", "start_run", "resume_run", "pause_run", "continue_run", "stop_run", "abort_run",
    "wait_for", "ENDED_STATES", "check_setting", "progress_problem", "linked_runs_of",
    "read_config_file", "refuse_linked_run", "run_dir_of",
    "load_experiments", "save_experiments", "find_experiment", "declare_experiment",
    "declarations_path",
]
