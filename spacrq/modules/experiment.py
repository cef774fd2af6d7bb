"""The ``experiment`` module: a queue job that runs an experiment run to its end.

So experiments chain overnight with the processing of what they measured: a
job runs one run of a declared experiment (or of a module named directly),
waits for it, and succeeds only if the run's *journal* says ``completed`` — a
canceled or aborted run is not a success whatever its exit code was.

The run is started in the job's own process group, so the queue's *Abort*
(which stops the job's group) aborts the run too; the queue's *Stop* (after
this job) lets it finish.  A job rerun after an interruption resumes the same
run from its last committed step (``resume``, on by default), and a job whose
run already completed succeeds without measuring again.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from spacrq.modules import ModuleSpec
from spacrq.procs import interpreter
from spacrq.problems import ERROR, Problem

DEFAULTS: dict[str, Any] = {"experiment": "", "workspace": "", "module": "", "python": "",
                            "cwd": "", "run_root": "", "env": {}, "run_id": "", "config": None,
                            "config_file": "", "resume": True, "poll": 0.5}


class ExperimentRunFailed(RuntimeError):
    """The run ended in a state other than completed."""


def _workspace(settings: dict) -> Path:
    from spacrq.workspace import default_path
    given = str(settings.get("workspace") or "")
    return Path(given).expanduser() if given else default_path()


def spec_of(settings: dict):
    """The :class:`ExperimentSpec` a job runs: declared by name, or given in full."""
    from spacrq.experiments import ExperimentSpec, find_experiment
    name = str(settings.get("experiment") or "").strip()
    if name:
        return find_experiment(_workspace(settings), name)
    module = str(settings.get("module") or "").strip()
    run_root = str(settings.get("run_root") or "") or str(Path.cwd() / "runs")
    return ExperimentSpec(name=module.rpartition(".")[2] or "experiment", module=module,
                          python=str(settings.get("python") or interpreter()),
                          cwd=str(settings.get("cwd") or os.getcwd()),
                          env={str(k): str(v) for k, v in (settings.get("env") or {}).items()},
                          run_root=run_root)


def validate(settings: dict) -> list[Problem]:
    from spacrq.experiments import ExperimentError, check_run_id
    problems: list[Problem] = []

    def bad(message: str, fix: str, setting: str) -> None:
        problems.append(Problem("", ERROR, message, fix, setting=setting))

    if not settings.get("experiment") and not settings.get("module"):
        bad("the job names no experiment", "Set 'experiment' to a name declared in the "
            "workspace, or 'module' to the module to run.", "experiment")
        return problems
    try:
        spec = spec_of(settings)
    except ExperimentError as exc:
        bad(str(exc), "Declare the experiment in the Experiments pane, or fix the name.",
            "experiment")
        return problems
    if not Path(spec.python).exists():
        bad(f"interpreter {spec.python} does not exist", "Fix 'python'.", "python")
    if spec.cwd and not Path(spec.cwd).is_dir():
        bad(f"working folder {spec.cwd} does not exist", "Create it, or fix 'cwd'.", "cwd")
    if settings.get("run_id"):
        try:
            check_run_id(str(settings["run_id"]))
        except ExperimentError as exc:
            bad(str(exc), "Give the run a plain folder name.", "run_id")
    if settings.get("config") is not None and not isinstance(settings["config"], dict):
        bad("config must be an object of settings", 'Write it like {"points": 50}.', "config")
    cfg = settings.get("config_file")
    if cfg and not Path(str(cfg)).expanduser().is_file():
        bad(f"configuration file {cfg} does not exist", "Correct config_file.", "config_file")
    elif cfg:
        from spacrq.experiments import read_config_file
        try:  # garbage in the file is said now, not when the job runs at 3 a.m.
            read_config_file(Path(str(cfg)).expanduser(), "config_file")
        except ExperimentError as exc:
            bad(str(exc), "Fix the file, or point config_file at another.", "config_file")
    if not isinstance(settings.get("env") or {}, dict):
        bad("env must be an object of NAME: value", 'Write it like {"STAGE": "B"}.', "env")
    return problems


def writes(settings: dict) -> list[str]:
    try:
        return [spec_of(settings).run_root]
    except Exception:
        return []


def _log(ctx: Any, message: str) -> None:
    logger = getattr(ctx, "log", None)
    if callable(logger):
        logger(message)
    else:
        print(message, flush=True)


def run(settings: dict, ctx: Any) -> dict:
    from spacrq import experiments as ex
    spec = spec_of(settings)
    run_id = str(settings.get("run_id") or "") or ex.new_run_id(spec.name)
    run_dir = ex.run_dir_of(spec.run_root, run_id)  # one folder name, never a link
    config = settings.get("config")
    text = None
    if settings.get("config_file"):
        given = ex.read_config_file(Path(str(settings["config_file"])).expanduser(),
                                    "config_file")
        text = ex.config_text_of(given)
    status = ex.status_of(run_dir) if run_dir.is_dir() else {"state": "not_started"}
    if status["state"] == "completed":
        _log(ctx, f"run {run_id} already completed; nothing to do")
        return {"run_id": run_id, "state": "completed"}
    if ex.has_started(run_dir):
        if not settings.get("resume", True):
            raise ExperimentRunFailed(f"run {run_id} has already started and resume is off; "
                                      "set resume to true or choose another run_id")
        _log(ctx, f"resuming run {run_id} ({status['state']}, {status['completed']} steps done)")
        launched = ex.resume_run(spec, run_id, detached=False)
    else:
        _log(ctx, f"starting run {run_id} of {spec.module} in {spec.run_root}")
        launched = ex.start_run(spec, run_id, config, config_text=text,
                                config_source=str(settings.get("config_file") or ""),
                                detached=False)
    poll = max(0.05, float(settings.get("poll") or 0.5))
    watch = ex.RunWatch(run_dir)
    said = None
    while launched is not None and launched.popen is not None and launched.popen.poll() is None:
        state = watch.status()
        line = f"{state['state']}: {state['completed']}/{state.get('total') or '?'} steps"
        if line != said:
            _log(ctx, line)
            said = line
        time.sleep(poll)
    if launched is None:  # a paused run was let go on; wait for it through its files,
        # which ends when its process does whatever the journal says
        ex.wait_for(run_dir, ex.ENDED_STATES, timeout=float("inf"), poll=poll)
    final = ex.RunWatch(run_dir).status()
    _log(ctx, f"run {run_id} ended {final['state']} after {final['completed']} steps")
    if final["state"] != "completed":
        why = final.get("error") or final.get("reason") or final.get("problem") or ""
        log = f", its log is {launched.log}" if launched else ""
        raise ExperimentRunFailed(f"run {run_id} ended {final['state']}"
                                  + (f" ({why})" if why else "")
                                  + f"; rerun this job to resume it{log}")
    return {"run_id": run_id, "state": "completed", "steps": final["completed"]}


MODULE = ModuleSpec(
    name="experiment",
    run=run,
    defaults=DEFAULTS,
    description="Run an experiment module to the end of its run (success only if it completed).",
    validate=validate,
    writes=writes,
    resumable=True,
    settings_help={
        "experiment": "name of an experiment declared in the workspace",
        "workspace": "workspace folder (default: $SPACRQ_WORKSPACE or ~/spacrq-workspace)",
        "module": "or: the module to run as 'python -m MODULE' (with python, cwd, run_root)",
        "run_id": "the run's name (default <experiment>_<date-time>); rerun resumes it",
        "config": "the run's configuration, as an object",
        "config_file": "or: a configuration file (JSON or YAML)",
        "resume": "continue the run if it already started (default true)",
    },
)
