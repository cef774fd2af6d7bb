"""Starting, resuming and stopping experiment runs as detached processes.

A run is ``python -m MODULE --run-root ROOT --run-id ID [--config RUN/config.yaml]``
in the module's own interpreter and checkout, in a session of its own, its
output appended to ``RUN/job-logs/<id>_<start time>.log``.  spacrq records
the process (pid *and* start time) in ``RUN/spacrq-process.json`` so the
window, reopened tomorrow, can tell a run still going from one whose process
died under it.

Stopping follows the run-file protocol: Pause, Continue and Stop are
requests in ``control.json`` honoured at a step boundary.  Abort is a
request too, but a step that blocks in a synchronous driver call cannot
notice it, so :func:`abort_run` escalates: it waits ``SPACRQ_GRACE`` seconds,
then stops the process group (SIGTERM, grace, SIGKILL) and — if the module
could not say so itself — journals ``step_aborted`` and ``run_aborted`` on
its behalf, so the run reads ``aborted`` and resumes from its last committed
step rather than looking like a crash.

A run may carry the module's own command-line ``options`` (those its manifest
declares) and, for a module that ``chooses_devices``, the devices of its
``setup.yaml`` the operator expects it to use; both are kept in the run's
``created.json`` so a resume starts the same command.  The devices are a
record, never an argument: a plesty-lib module's ``--devices`` is the
question "which devices does this configuration use?" (it prints the list and
exits), and the module decides its devices from the configuration itself.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

import psutil

from spacrq.experiments import control
from spacrq.experiments.declarations import ExperimentSpec
from spacrq.experiments.environment import missing_required, missing_sentence
from spacrq.experiments.errors import (CREATED_FILE, JOURNAL_FILE, PLAN_FILE, PROCESS_FILE,
                                       RUN_CONFIG_FILE, RUN_LOGS_DIR, ExperimentError)
from spacrq.experiments.manifest import (plan_digest, read_devices, read_manifest,
                                         spec_environment)
from spacrq.experiments.options import check_devices, check_options, options_argv
from spacrq.experiments.replay import RunWatch, process_of, status_of
from spacrq.experiments.runs import (config_text_of, create_run, created_of, has_started,
                                     reconfigure_run, run_config_of, run_dir_of)
from spacrq.procs import ProcessRef, grace_seconds, spawn_detached, stop_group
from spacrq.runfiles import (RunFileError, append_jsonl, append_text, read_json_checked,
                             refuse_link, write_json)

__all__ = ["Launched", "start_run", "resume_run", "run_argv", "pause_run", "continue_run",
           "stop_run", "abort_run", "grace_seconds", "wait_for", "check_plan_unchanged",
           "ENDED_STATES", "check_options", "check_devices", "options_argv",
           "missing_environment", "refuse_missing_environment", "prepare_run", "devices_for"]


@dataclass
class Launched:
    """A run spacrq just started: where, which process, which log.

    ``popen`` may be dropped: the run does not depend on its starter.
    """

    run_dir: Path
    ref: ProcessRef
    log: Path
    popen: subprocess.Popen | None = None

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the process (only for a caller that started it and wants to)."""
        if self.popen is None:
            return None
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


def run_argv(spec: ExperimentSpec, run_dir: Path, *, resume: bool) -> list[str]:
    """The command line of a run (plesty-lib's ``ExperimentCLI`` flags), then the
    module's own options the run was created with (kept in its ``created.json``,
    so a resume starts the same command).

    :raises ExperimentError: when the recorded options are not ones spacrq wrote
        (a hand-edited ``created.json``).
    """
    argv = [str(spec.python), "-m", spec.module, "--run-root", str(run_dir.parent)]
    argv += ["--resume", run_dir.name] if resume else ["--run-id", run_dir.name]
    if (run_dir / RUN_CONFIG_FILE).is_file():
        argv += ["--config", str(run_dir / RUN_CONFIG_FILE)]
    return argv + options_argv(created_of(run_dir).get("options"), where=run_dir / CREATED_FILE)


# -- the module's own options, its devices, its environment -------------------------

def devices_for(spec: ExperimentSpec, config: Mapping[str, Any],
                env: Mapping[str, str] | None = None, *,
                on_start: Callable[[subprocess.Popen], Any] | None = None) -> list[str] | None:
    """The devices of its ``setup.yaml`` the module says a run of ``config`` uses
    (``None``: all of them) — for the form's device list; asked on a worker thread."""
    with tempfile.TemporaryDirectory(prefix="spacrq-devices-") as folder:
        path = Path(folder) / RUN_CONFIG_FILE
        path.write_text(config_text_of(dict(config)), encoding="utf-8")
        return read_devices(spec, None, None, str(path), env=_environment(spec, env),
                            on_start=on_start)


def missing_environment(spec: ExperimentSpec, manifest: Mapping[str, Any],
                        env: Mapping[str, str] | None = None) -> list[str]:
    """The required variables of ``manifest`` a run of ``spec`` would lack.

    The run's environment is ``env`` (this process's by default), then the
    module's ``.env``, then the declaration's ``env`` — the one it starts with.
    """
    return missing_required(manifest, _environment(spec, env))


def refuse_missing_environment(spec: ExperimentSpec, manifest: Mapping[str, Any] | None,
                               env: Mapping[str, str] | None = None) -> None:
    """The door: refuse a run whose module needs a variable its environment leaves unset.

    Without ``manifest`` the module is asked for it; a module that cannot say
    is left to say so itself when it starts.
    """
    if manifest is None:
        try:
            manifest = read_manifest(spec, env=_environment(spec, env))
        except ExperimentError:
            return
    missing = missing_environment(spec, manifest, env)
    if missing:
        who = str(manifest.get("title") or spec.name)
        raise ExperimentError(missing_sentence(missing, who))


def _launch_fields(spec: ExperimentSpec, manifest: Mapping[str, Any] | None,
                   options: Mapping[str, Any] | None, devices: Any,
                   env: Mapping[str, str] | None) -> tuple[dict[str, Any], Mapping | None]:
    """What a run records beside its configuration to start the same way on resume,
    and the manifest they were checked against (asked of the module when needed)."""
    fields: dict[str, Any] = {}
    if manifest is None and (options or devices is not None):
        manifest = read_manifest(spec, env=_environment(spec, env))
    if options:
        fields["options"] = check_options(manifest, options)
    chosen = check_devices(manifest, devices)
    if chosen is not None:
        fields["devices"] = chosen
    return fields, manifest


def prepare_run(spec: ExperimentSpec, run_id: str, config: Mapping[str, Any] | None = None, *,
                config_text: str | None = None, config_source: str = "",
                options: Mapping[str, Any] | None = None, devices: Any = None,
                manifest: Mapping[str, Any] | None = None, **fields: Any) -> Path:
    """Create a run to start later, with its configuration, options and devices.

    :raises ExperimentError: for options or devices the manifest does not allow,
        and (as :func:`~spacrq.experiments.runs.create_run`) a name that is taken.
    """
    run_dir = run_dir_of(spec.run_root, run_id)
    text = config_text if config_text is not None else (
        config_text_of(dict(config)) if config is not None else None)
    extra, _ = _launch_fields(spec, manifest, options, devices, None)
    create_run(run_dir, text, experiment=spec.name, module=spec.module, config=config_source,
               **fields, **extra)
    return run_dir


def _environment(spec: ExperimentSpec, base: Mapping[str, str] | None) -> dict[str, str]:
    return spec_environment(spec, base)


def _check_spec(spec: ExperimentSpec) -> None:
    if not Path(spec.python).exists():
        raise ExperimentError(f"the interpreter {spec.python} of experiment {spec.name!r} does not "
                              "exist; fix 'python' in its declaration")
    if spec.cwd and not Path(spec.cwd).is_dir():
        raise ExperimentError(f"the working folder {spec.cwd} of experiment {spec.name!r} does not "
                              "exist; create it or fix 'cwd' in its declaration")


def _spawn_attached(argv: list[str], log: Path, cwd: str | None,
                   env: Mapping[str, str]) -> subprocess.Popen:
    """Start the run in the caller's process group: a queue job's run is stopped with its job."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, cwd=cwd, env=dict(env), close_fds=True)


def _launch(spec: ExperimentSpec, run_dir: Path, *, resume: bool,
            env: Mapping[str, str] | None, detached: bool = True) -> Launched:
    _check_spec(spec)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    log = run_dir / RUN_LOGS_DIR / f"{run_dir.name}_{stamp}.log"
    argv = run_argv(spec, run_dir, resume=resume)
    try:
        refuse_link(run_dir, "run folder")
        refuse_link(run_dir / RUN_LOGS_DIR, "log folder")
        append_text(log, "")  # created here without following a link planted in its place
    except RunFileError as exc:
        raise ExperimentError(str(exc)) from None
    try:
        if detached:
            popen = spawn_detached(argv, log_path=log, cwd=spec.cwd or None,
                                   env=_environment(spec, env))
        else:
            popen = _spawn_attached(argv, log, spec.cwd or None, _environment(spec, env))
    except OSError as exc:
        raise ExperimentError(f"could not start {spec.module}: {exc.strerror or exc}; check the "
                              "declaration's 'python' and 'cwd'") from None
    ref = ProcessRef.of(popen.pid)
    write_json(run_dir / PROCESS_FILE, {**ref.to_dict(), "launched": time.time(), "argv": argv,
                                        "log": str(log), "resume": resume,
                                        "detached": detached, "experiment": spec.name})
    return Launched(run_dir, ref, log, popen)


def _refuse_if_live(run_dir: Path) -> None:
    ref = ProcessRef.from_dict(process_of(run_dir))
    if ref is not None and ref.alive():
        raise ExperimentError(f"run {run_dir.name!r} is still running (pid {ref.pid}); stop it or "
                              "wait for it to end")


def start_run(spec: ExperimentSpec, run_id: str, config: Mapping[str, Any] | None = None, *,
              config_text: str | None = None, config_source: str = "",
              env: Mapping[str, str] | None = None, detached: bool = True,
              options: Mapping[str, Any] | None = None, devices: Any = None,
              manifest: Mapping[str, Any] | None = None) -> Launched:
    """Start a new run ``run_id`` of ``spec``, detached (``detached=False``: in the
    caller's process group, for the queue's ``experiment`` job).

    A run created beforehand (``create_run``) starts with the configuration
    it was given; ``config``/``config_text`` here (re)configure it first, and
    ``options``/``devices`` (checked against ``manifest``) replace the ones it
    was created with.  A run whose module needs an environment variable the
    run would not get is refused before anything is written.
    """
    run_dir = run_dir_of(spec.run_root, run_id)
    _check_spec(spec)
    if has_started(run_dir):
        raise ExperimentError(f"run {run_id!r} has already started; resume it, or duplicate it "
                              "to run the same configuration again")
    extra, manifest = _launch_fields(spec, manifest, options, devices, env)
    refuse_missing_environment(spec, manifest, env)
    text = config_text if config_text is not None else (
        config_text_of(dict(config)) if config is not None else None)
    created = created_of(run_dir)
    if created:
        if text is not None:
            reconfigure_run(run_dir, text, config_source)
        if extra:
            write_json(run_dir / CREATED_FILE, {**created_of(run_dir), **extra})
    else:
        create_run(run_dir, text, experiment=spec.name, module=spec.module, config=config_source,
                   **extra)
    control.clear(run_dir)
    return _launch(spec, run_dir, resume=False, env=env, detached=detached)


def check_plan_unchanged(spec: ExperimentSpec, run_dir: Path,
                         env: Mapping[str, str] | None = None) -> None:
    """Refuse to resume under a plan that differs from the one the run froze.

    Two checks: the run's ``config.yaml`` must still be the configuration in
    its ``plan.json`` (someone edited it by hand), and the plan the module
    builds now (``--dry-run``) must carry the same content hash.
    """
    plan, _ = read_json_checked(run_dir / PLAN_FILE, None, expect=dict)
    if not isinstance(plan, dict):
        raise ExperimentError(f"run {run_dir.name!r} has no readable plan.json, so there is "
                              "nothing to resume from; start a new run instead")
    config = run_config_of(run_dir)
    if config is not None and isinstance(plan.get("config"), dict) and \
            not _within(config, plan["config"]):
        raise ExperimentError(f"the configuration of run {run_dir.name!r} was changed after its "
                              "plan was made; duplicate the run instead of resuming it")
    frozen = str(plan.get("hash") or "")
    if not frozen:
        return
    cfg = run_dir / RUN_CONFIG_FILE
    now = plan_digest(spec, cfg if cfg.is_file() else None, _environment(spec, env))
    if now is not None and not frozen.startswith(now):
        raise ExperimentError(f"the plan {spec.module} builds now differs from the one run "
                              f"{run_dir.name!r} started with (module or configuration changed); "
                              "duplicate the run instead of resuming it")


def _within(given: Any, frozen: Any) -> bool:
    """Whether every setting of ``given`` is in ``frozen`` with the same value.

    The frozen configuration may hold more: the module's defaults are filled in.
    """
    if isinstance(given, dict) and isinstance(frozen, dict):
        return all(k in frozen and _within(v, frozen[k]) for k, v in given.items())
    if isinstance(given, (int, float)) and isinstance(frozen, (int, float)) \
            and not isinstance(given, bool) and not isinstance(frozen, bool):
        return float(given) == float(frozen)
    return given == frozen


def resume_run(spec: ExperimentSpec, run_id: str, *, env: Mapping[str, str] | None = None,
               check_plan: bool = True, detached: bool = True,
               manifest: Mapping[str, Any] | None = None) -> Launched | None:
    """Continue a run that stopped without finishing, from its last committed step,
    with the command it started with (its options are kept with it).

    A run paused by a live process is simply let go on (``None`` is
    returned: nothing was started).  The stale control file is cleared first,
    so yesterday's "cancel" does not stop the resumed run at its first step.
    A run whose module needs an environment variable it would not get is refused.
    """
    run_dir = run_dir_of(spec.run_root, run_id)
    if not (run_dir / JOURNAL_FILE).is_file():
        if run_dir.is_dir() and not has_started(run_dir):
            raise ExperimentError(f"run {run_id!r} has not started yet; run it instead")
        raise ExperimentError(f"there is no run {run_id!r} in {spec.run_root}")
    state = status_of(run_dir)["state"]
    if state == "paused":
        control.proceed(run_dir)
        return None
    if state in ("running", "stopping"):
        raise ExperimentError(f"run {run_id!r} is {state}; it can be resumed once it has stopped")
    if state == "not_responding":
        raise ExperimentError(f"run {run_id!r} is not responding and spacrq cannot tell whether "
                              "its process is still running; check on the machine that ran it, "
                              "and resume it there once its process has ended")
    if state == "completed":
        raise ExperimentError(f"run {run_id!r} completed, so there is nothing to resume; "
                              "duplicate it to measure again")
    _refuse_if_live(run_dir)
    refuse_missing_environment(spec, manifest, env)
    if check_plan:
        check_plan_unchanged(spec, run_dir, env)
    control.clear(run_dir)
    return _launch(spec, run_dir, resume=True, env=env, detached=detached)


def pause_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    return control.pause(run_dir)


def continue_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    return control.proceed(run_dir)


def stop_run(run_dir: str | os.PathLike, reason: str = "") -> dict[str, Any]:
    """Stop after the step in flight (``stop: cancel``)."""
    return control.cancel(run_dir, reason)


#: States after which a run's process has nothing more to do.
ENDED_STATES = ("completed", "canceled", "aborted", "failed", "interrupted")


def wait_for(run_dir: str | os.PathLike, states: tuple[str, ...], timeout: float,
             poll: float = 0.05) -> dict[str, Any]:
    """Poll the run's status until its state is one of ``states``, its process is
    gone, nobody can tell whether it still runs, or ``timeout`` passes.

    Whatever the journal says, a wait ends when the process does: a module
    that exits before its first journal line, or dies mid-step, leaves a
    journal that would otherwise be waited on forever.  ``waited`` in the
    returned status says why it ended: ``"state"``, ``"gone"`` (with the
    reason in ``problem``), ``"unknown"`` or ``"timeout"``.

    For headless callers (the CLI, the queue module, tests) — never the GUI thread.
    """
    watch = RunWatch(run_dir)
    deadline = time.monotonic() + timeout
    while True:
        status = watch.status()
        if status["state"] in states:
            status["waited"] = "state"
            return status
        if status.get("alive") is False or status["state"] in ("interrupted", "not_responding"):
            status = watch.status()  # the journal's last lines, written just before the exit
            if status["state"] in states:
                status["waited"] = "state"
                return status
            status["waited"] = "unknown" if status["state"] == "not_responding" else "gone"
            status.setdefault("problem", "")
            if not status["problem"]:
                status["problem"] = _gone_reason(status)
            return status
        if time.monotonic() >= deadline:
            status["waited"] = "timeout"
            return status
        time.sleep(poll)


def _gone_reason(status: Mapping[str, Any]) -> str:
    log = status.get("log")
    where = f"; read its log {log} for why" if log else ""
    return f"the module's process exited while its journal says {status['state']}{where}"


def abort_run(run_dir: str | os.PathLike, reason: str = "", *,
              grace: float | None = None) -> dict[str, Any]:
    """Abort the run now: ask, wait ``grace`` seconds, then stop its process group.

    Blocks up to about three grace periods; call it from a worker, never
    from the GUI thread.  A run spacrq did not start (no process recorded) is
    only asked: nobody here can tell whether its process is still there.

    :returns: the run's status afterwards, plus ``"escalated"``: ``""`` when
        the module honoured the request itself, else what :func:`stop_group`
        had to do.
    """
    path = Path(run_dir)
    grace = grace_seconds() if grace is None else grace
    control.request_abort(path, reason)
    process = process_of(path) or {}
    ref = ProcessRef.from_dict(process)
    escalated = ""
    if ref is not None:
        _await_exit(path, ref, grace)
        if ref.alive():
            if process.get("detached", True):
                escalated = stop_group(ref.pid, grace, started=ref.started)
            else:  # a queue job's run shares the job's group: stop the run, not the job
                escalated = _stop_one(ref, grace)
    watch = RunWatch(path)
    status = watch.status()
    known_gone = ref is not None and not ref.alive()
    if known_gone and status["state"] not in ("aborted", "canceled", "completed", "failed") and \
            (path / JOURNAL_FILE).is_file():
        _journal_abort(path, watch, reason, escalated or "gone")
        status = RunWatch(path).status()
    status["escalated"] = escalated
    return status


def _stop_one(ref: ProcessRef, grace: float) -> str:
    """SIGTERM, ``grace`` seconds, SIGKILL — for one process, not its group."""
    try:
        proc = psutil.Process(ref.pid)
        proc.terminate()
        proc.wait(grace)
        return "terminated"
    except psutil.TimeoutExpired:
        proc.kill()
        try:
            proc.wait(5)
        except psutil.TimeoutExpired:
            pass
        return "killed"
    except psutil.NoSuchProcess:
        return "gone"


def _await_exit(path: Path, ref: ProcessRef, grace: float) -> None:
    """Wait for the run to leave on its own: ``grace`` seconds to honour the abort,
    and another ``grace`` to tear down once its journal says it stopped."""
    watch = RunWatch(path)
    start = time.monotonic()
    while ref.alive():
        waited = time.monotonic() - start
        if waited >= 2 * grace:
            return
        if waited >= grace and watch.status()["state"] not in ("aborted", "canceled",
                                                               "completed", "failed"):
            return
        time.sleep(0.05)


def _journal_abort(path: Path, watch: RunWatch, reason: str, how: str) -> None:
    """Write the abort the module could not: its step in flight, then the run."""
    now = datetime.now(timezone.utc).isoformat()
    flight = watch.replay.in_flight
    if flight:
        append_jsonl(path / JOURNAL_FILE, {"event": "step_aborted", "ts": now,
                                           "step_id": flight.get("step_id"),
                                           "index": flight.get("index"), "by": "spacrq"})
    append_jsonl(path / JOURNAL_FILE, {
        "event": "run_aborted", "ts": now, "run_id": path.name, "reason": reason, "by": "spacrq",
        "detail": f"the run did not honour the abort within the grace period; its process "
                  f"group was {how}"})
