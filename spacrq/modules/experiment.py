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

The job's configuration is checked against the module's manifest when the
job is added or validated (the module is asked, once per half minute, see
:mod:`spacrq.experiments.checking`), with the sentence the module would
print; a module that cannot be asked then is a warning, and is asked again
when the job runs.  A run the module refused before it started fails the job
with the module's own reason: a :class:`ConfigurationError` (fix the job's
settings; rerunning as it is cannot help) when the module said its input was
bad (exit code 2), else :class:`ExperimentRunFailed`.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from spacrq.modules import ModuleSpec
from spacrq.procs import interpreter
from spacrq.problems import ERROR, WARNING, Problem

DEFAULTS: dict[str, Any] = {"experiment": "", "workspace": "", "module": "", "python": "",
                            "cwd": "", "run_root": "", "env": {}, "run_id": "", "config": None,
                            "config_file": "", "resume": True, "poll": 0.5}


class ExperimentRunFailed(RuntimeError):
    """The run ended in a state other than completed."""


class ConfigurationError(ExperimentRunFailed):
    """The run's configuration is one its module refuses: rerunning the job as it is
    cannot help.  (Named so: the queue files a job's failure under the name of the
    exception its log ends with, and tells the operator to fix the job's settings.)"""


#: the exit code of a module that refused its input (plesty-lib's and spacrq's authoring base)
EXIT_BAD_INPUT = 2


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
    if not problems:
        problems.extend(_config_problems(settings, spec))
    return problems


def _given_config(settings: dict) -> tuple[dict | None, str]:
    """The configuration a new run would get, and the setting it comes from (the
    file wins over ``config``, as in :func:`spacrq.experiments.start_run`)."""
    if settings.get("config_file"):
        from spacrq.experiments import read_config_file
        path = Path(str(settings["config_file"])).expanduser()
        return read_config_file(path, "config_file"), "config_file"
    config = settings.get("config")
    return (dict(config) if isinstance(config, dict) else None), "config"


def _config_problems(settings: dict, spec) -> list[Problem]:
    """The configuration checked as the module checks it; a warning when it cannot be asked."""
    from spacrq.experiments.checking import manifest_for_check
    from spacrq.experiments.manifest import config_problems_of
    config, where = _given_config(settings)
    if config is None:
        return []  # the module's defaults: nothing given, nothing to refuse
    manifest, why = manifest_for_check(spec)
    if manifest is None:
        return [Problem("", WARNING, f"the configuration could not be checked against what "
                        f"{spec.name} takes: {why}", "It is checked again when the job starts; "
                        "fix the module or its declaration to have it checked now.",
                        setting=where)]
    fix = (f"Fix '{where}' in the job's settings ('spacrq exp manifest {spec.name}' lists what "
           "it takes).")
    refused, doubtful = config_problems_of(manifest, config)
    return ([Problem("", ERROR, text, fix, setting=where) for text in refused]
            + [Problem("", WARNING, f"{text} (its manifest does not declare it, so the module "
                       "may ignore it)", fix, setting=where) for text in doubtful])


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
        manifest = _refuse_bad_config(spec, settings)
        _log(ctx, f"starting run {run_id} of {spec.module} in {spec.run_root}")
        launched = ex.start_run(spec, run_id, config, config_text=text,
                                config_source=str(settings.get("config_file") or ""),
                                detached=False, manifest=manifest)
    starts = int(status.get("starts") or 0)
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
    if launched is not None and int(final.get("starts") or 0) <= starts:
        _never_started(run_id, launched)
    _log(ctx, f"run {run_id} ended {final['state']} after {final['completed']} steps")
    if final["state"] != "completed":
        why = final.get("error") or final.get("reason") or ""
        # the status's own problem names the log already; the log is said once
        log = f" (its log: {launched.log})" if launched and not final.get("problem") else ""
        why = why or final.get("problem") or ""
        raise ExperimentRunFailed(f"run {run_id} ended {final['state']}"
                                  + (f": {why}" if why else "")
                                  + f"; rerun this job to resume it{log}")
    return {"run_id": run_id, "state": "completed", "steps": final["completed"]}


def _refuse_bad_config(spec, settings: dict) -> dict | None:
    """The module's manifest, after refusing a configuration it would refuse (before any
    run folder is made); ``None`` when it cannot say (the module then checks for itself)."""
    from spacrq import experiments as ex
    from spacrq.experiments.checking import ConfigRefused, refuse_bad_config
    config, where = _given_config(settings)
    try:
        manifest = ex.read_manifest(spec)
    except ex.ExperimentError:
        return None
    if config is not None:
        try:
            refuse_bad_config(manifest, config, f"fix '{where}' in the job's settings")
        except ConfigRefused as exc:
            raise ConfigurationError(f"{spec.name} refuses this configuration: {exc}") from None
    return manifest


def _never_started(run_id: str, launched: Any) -> None:
    """Fail the job with what the module said when it exited before its run started."""
    from spacrq.experiments.checking import start_refusal
    code = launched.popen.returncode if launched.popen is not None else None
    said = start_refusal(launched.log) or f"it exited with code {code} and printed nothing"
    where = f" (its log: {launched.log})"
    if code == EXIT_BAD_INPUT:
        raise ConfigurationError(f"run {run_id} never started: {said}; the module refused its "
                                 f"input, so fix the job's settings{where}")
    raise ExperimentRunFailed(f"run {run_id} never started: {said}; fix what the module "
                              f"says, then rerun this job{where}")


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
