"""``spacrq exp``: declare, start, drive and read experiment runs without the window.

::

    spacrq exp declare NAME MODULE [--python P] [--cwd DIR] [--run-root DIR] [--env K=V]
                       [--replace] [--no-check]
    spacrq exp manifest NAME [--json]
    spacrq exp list [NAME]          (runs by start time, the newest last)
    spacrq exp create NAME RUN_ID [--config FILE] [--set KEY=VALUE ...]
    spacrq exp run NAME [RUN_ID] [--config FILE] [--set KEY=VALUE ...] [--wait]
    spacrq exp pause | continue | stop | abort NAME RUN_ID [--reason TEXT] [--wait]
    spacrq exp resume NAME [RUN_ID] [--wait]
    spacrq exp note NAME RUN_ID TEXT [--by WHO]
    spacrq exp status NAME [RUN_ID] [--json]

Bad input is one sentence naming the fix, exit 2: a configuration (``--set``
or ``--config``) the module's manifest refuses, and a module ``declare``
cannot ask for its manifest (the Declare… dialog's check; ``--no-check``
declares without asking, for a module whose environment is installed later).  ``run --wait`` and
``resume --wait`` exit 0 only when the run's journal says completed; every
wait (``pause --wait`` and ``stop --wait`` too) ends when the run's process
does, whatever its journal says, with exit 1 and the reason.  A run folder
that is a symbolic link is refused by every command and listed as refused.
"""
from __future__ import annotations

import argparse
import getpass
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from spacrq.experiments.live import RunLines
from spacrq.terminal import FOLLOW_STOPPED, LiveLines, follow, plain
from spacrq import experiments as ex
from spacrq.cli import CliError
from spacrq.experiments.checking import refuse_bad_config
from spacrq.experiments.declarations import declaration_of, declare_checked, probe_spec
from spacrq.experiments.errors import ExperimentError
from spacrq.experiments.manifest import spec_environment
from spacrq.fmt import duration
from spacrq.runfiles import RunFileError, dumps, loads
from spacrq.workspace import default_path


def _fail(message: str):
    raise CliError(message)


def _root(args) -> Path:
    return Path(args.workspace).expanduser() if args.workspace else default_path()


def _spec(args) -> ex.ExperimentSpec:
    return ex.find_experiment(_root(args), args.name)


def _run_dir(args, run_id: str | None, *, must_exist: bool = True) -> Path:
    spec = _spec(args)
    if run_id is None:
        found = ex.latest(spec.run_root)
        if found is None:
            _fail(f"experiment {spec.name!r} has no runs yet; start one with 'spacrq exp run "
                  f"{spec.name}'")
        return found
    path = ex.run_dir_of(spec.run_root, run_id)  # refuses a linked run folder
    if must_exist and ex.find_run(spec.run_root, run_id) is None:
        _fail(f"experiment {spec.name!r} has no run {run_id!r}; see 'spacrq exp list {spec.name}'")
    return path


def _value(text: str) -> Any:
    """A ``--set`` value: JSON when it reads as strict JSON (``20``, ``true``), else the text."""
    try:
        return loads(text, where="a --set value")
    except RunFileError:
        return text


def _config(args, spec: ex.ExperimentSpec) -> dict[str, Any] | None:
    """The configuration of ``--config`` under ``--set``, checked as the module checks it
    (a queue's ``experiment`` job is checked alike when it is added)."""
    config: dict[str, Any] | None = None
    manifest = None
    if args.config:
        path = Path(args.config).expanduser()
        if not path.exists():
            _fail(f"configuration file {path} does not exist; correct --config")
        config = ex.read_config_file(path, "--config file")
        manifest = ex.read_manifest(spec)
        refuse_bad_config(manifest, config, f"fix {path}")
    if args.set:
        manifest = manifest or ex.read_manifest(spec)
        config = dict(config or {})
        for item in args.set:
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or not key:
                _fail(f"--set {item!r} must be KEY=VALUE, like --set points=20")
            ex.check_setting(manifest, key, _value(raw), spec.name)
            group, dot, name = key.rpartition(".")
            target = config.setdefault(group, {}) if dot else config
            if not isinstance(target, dict):
                _fail(f"{group!r} is a value in the configuration, not a group; fix --set {item}")
            target[name] = _value(raw)
    return config


#: version of every ``--json`` document ``spacrq exp`` prints (documented in the README)
JSON_SCHEMA = 1


def _say(text: str) -> None:
    """Print text that holds names, notes and reasons read from files, without control characters."""
    print(plain(text))


def _print_json(kind: str, document: dict) -> None:
    print(dumps({"schema": JSON_SCHEMA, "kind": kind, **document}, indent=2))


def _print_status(status: dict, as_json: bool) -> None:
    if as_json:
        _print_json("exp-status", {"status": status})
        return
    total = status.get("total") or "?"
    _say(f"{status['run_id']}: {status['state'].replace('_', ' ')}  "
          f"{status['completed']}/{total} steps"
          + (f", {status['failed']} failed attempts" if status.get("failed") else ""))
    for key in ("started", "ended"):
        if status.get(key):
            _say(f"  {key}: {status[key]}")
    if status.get("owner") and status["state"] in ("running", "paused", "stopping"):
        _say(f"  run by: {status['owner']}")  # a run spacrq did not start: who has it
    for key in ("reason", "error", "problem", "control_problem", "journal_problem"):
        if status.get(key):
            _say(f"  {key.replace('_', ' ')}: {status[key]}")
    if status.get("bad_lines"):
        _say(f"  journal: {status['bad_lines']} unreadable or malformed lines skipped")
    for key in ("progress_problem", "records_problem"):
        if (status.get("progress") or {}).get(key) or status.get(key):
            _say(f"  {key.replace('_', ' ')}: "
                  f"{(status.get('progress') or {}).get(key) or status.get(key)}")
    if status.get("in_flight"):
        _say(f"  step in flight: {status['in_flight'].get('step_id')}")
    progress = status.get("progress") or {}
    if progress.get("eta_s") is not None and status["state"] == "paused":
        # a held run is not getting closer to its end: no "left" while it waits
        _say(f"  {progress['fraction']:.0%} done, paused (about {duration(progress['eta_s'])} "
             f"of steps left once it continues, {progress['step_s']:.2f} s a step)")
    elif progress.get("eta_s") is not None:
        _say(f"  {progress['fraction']:.0%} done, about {duration(progress['eta_s'])} left "
              f"({progress['step_s']:.2f} s a step)")
    for note in status.get("notes") or []:
        _say(f"  note by {note['by']} at {note['at']}: {note['text']}")
    for line in status.get("reports") or []:
        _say(f"  report: {line}")


def _wait(run_dir: Path, until: tuple[str, ...] = ex.ENDED_STATES, ok: tuple[str, ...] = (
        "completed",)) -> int:
    """Wait for the run to reach ``until`` — or for its process to end, whatever the journal
    says.  Exit 0 only in an ``ok`` state; else 1, with the reason on stderr."""
    with LiveLines(RunLines(run_dir)):
        final = ex.wait_for(run_dir, until, timeout=float("inf"), poll=0.25)
    _print_status(final, False)
    if final["state"] in ok:
        return 0
    why = final.get("problem") or final.get("error") or final.get("reason") or ""
    print(plain(f"spacrq: run {run_dir.name} is {final['state']}" + (f": {why}" if why else "")),
          file=sys.stderr)
    return 1


def _here(path: str | None) -> str | None:
    """A path typed at the shell means what it says from where it was typed."""
    return str(Path(path).expanduser().absolute()) if path else None


def cmd_declare(args) -> int:
    """Checked as the Declare… dialog checks: the declaration whole, then the module is asked
    for its manifest (unless ``--no-check``); a name that is taken needs ``--replace``."""
    env = {}
    for item in args.env or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            _fail(f"--env {item!r} must be NAME=value")
        env[key.strip()] = value
    root = _root(args)
    spec = declaration_of(root, name=args.name, module=args.module, python=_here(args.python),
                          cwd=_here(args.cwd), run_root=_here(args.run_root), env=env)
    if not args.no_check:
        probe = probe_spec(root, spec)
        try:
            ex.read_manifest(probe, env=spec_environment(probe))
        except ExperimentError as exc:
            _fail(f"{spec.name} is not declared: {exc} (or declare it unchecked with --no-check)")
    spec, old = declare_checked(root, spec, replace=args.replace)
    if old is not None:
        print(f"replaced {spec.name} (was python -m {old.module}): python -m {spec.module} "
              f"(runs in {spec.run_root})")
    else:
        print(f"declared {spec.name}: python -m {spec.module} (runs in {spec.run_root})")
    return 0


def cmd_manifest(args) -> int:
    manifest = ex.read_manifest(_spec(args))
    if args.json:
        _print_json("exp-manifest", {"experiment": args.name, "manifest": manifest})
        return 0
    _say(f"{manifest.get('title') or args.name}  (python -m {manifest.get('module')})")
    for key, field in ex.fields_of(manifest):
        unit = f" {field['unit']}" if field.get("unit") else ""
        bounds = ""
        if field.get("min_value") is not None or field.get("max_value") is not None:
            bounds = f"  [{field.get('min_value', '')} .. {field.get('max_value', '')}]"
        options = f"  one of {field['options']}" if field.get("options") else ""
        _say(f"  {key} ({field.get('dtype')}) = {field.get('default')}{unit}{bounds}{options}"
              + (f"  — {field['description']}" if field.get("description") else ""))
    return 0


def _runs_by_start(spec: ex.ExperimentSpec) -> list[tuple[Path, dict]]:
    """Every run with its status, oldest start first, newest last (next to the prompt); a
    run that never started counts from when it was created."""
    found = [(run_dir, ex.status_of(run_dir)) for run_dir in ex.runs_of(spec.run_root)]

    def began(item: tuple[Path, dict]) -> tuple[float, str]:
        run_dir, status = item
        when = status.get("started_at") or ex.created_of(run_dir).get("created")
        if not isinstance(when, (int, float)) or isinstance(when, bool):
            try:
                when = run_dir.stat().st_mtime
            except OSError:
                when = 0.0
        return float(when), run_dir.name
    return sorted(found, key=began)


def _when(epoch: Any) -> str:
    if not isinstance(epoch, (int, float)) or isinstance(epoch, bool) or not epoch:
        return "-".ljust(16)
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M")


def _state_words(status: dict) -> str:
    """The state as ``exp list`` says it: a run whose start failed says it never started."""
    words = status["state"].replace("_", " ")
    if "start_failed" in status and status["state"] == "created":
        said = status["start_failed"]
        return "never started" + (f" ({said})" if said else " (the module exited first)")
    return words


def cmd_list(args) -> int:
    if args.json:
        return _list_json(args)
    if not args.name:
        specs = ex.load_experiments(_root(args))
        if not specs:
            print("no experiments declared; add one with 'spacrq exp declare NAME MODULE'")
        for spec in specs:
            _say(f"{spec.name}: python -m {spec.module}  ({_runs(len(ex.runs_of(spec.run_root)))})")
        return 0
    spec = _spec(args)
    for run_dir, status in _runs_by_start(spec):
        _say(f"{_when(status.get('started_at'))}  {run_dir.name}  {_state_words(status)}  "
             f"{status['completed']}/{status.get('total') or '?'}")
    for name, why in ex.linked_runs_of(spec.run_root):
        _say(f"{name}  refused: {why}")
    return 0


def _list_json(args) -> int:
    if not args.name:
        specs = ex.load_experiments(_root(args))
        _print_json("exp-list", {"experiments": [
            {"name": s.name, "module": s.module, "python": s.python, "cwd": s.cwd,
             "run_root": s.run_root, "runs": len(ex.runs_of(s.run_root))} for s in specs]})
        return 0
    spec = _spec(args)
    runs = []
    for run_dir, status in _runs_by_start(spec):
        runs.append({"run_id": run_dir.name, "state": status["state"],
                     "completed": status["completed"], "total": status.get("total"),
                     "started_at": status.get("started_at"),
                     "never_started": "start_failed" in status and status["state"] == "created",
                     "start_failed": status.get("start_failed")})
    refused = [{"run_id": name, "refused": why} for name, why in ex.linked_runs_of(spec.run_root)]
    _print_json("exp-runs", {"experiment": spec.name, "runs": runs, "refused": refused})
    return 0


def cmd_create(args) -> int:
    spec = _spec(args)
    config = _config(args, spec)
    run_dir = Path(spec.run_root) / ex.check_run_id(args.run_id)
    ex.create_run(run_dir, ex.config_text_of(config) if config is not None else None,
                  experiment=spec.name, module=spec.module, config=args.config or "")
    print(f"created run {run_dir.name} in {spec.run_root}")
    return 0


def cmd_run(args) -> int:
    spec = _spec(args)
    config = _config(args, spec)
    run_id = args.run_id if args.run_id is not None else ex.new_run_id(spec.name)
    launched = ex.start_run(spec, run_id, config, config_source=args.config or "")
    print(f"started run {run_id} (pid {launched.ref.pid}, log {launched.log})")
    return _wait(launched.run_dir) if args.wait else 0


def cmd_resume(args) -> int:
    spec = _spec(args)
    run_id = args.run_id if args.run_id is not None else ex.resumable(spec.run_root)
    if run_id is None:
        _fail(f"experiment {spec.name!r} has no run to resume; every run completed or none "
              "started")
    launched = ex.resume_run(spec, run_id)
    if launched is None:
        print(f"run {run_id} was paused; asked it to continue")
    else:
        print(f"resumed run {run_id} (pid {launched.ref.pid}, log {launched.log})")
    return _wait(ex.run_dir_of(spec.run_root, run_id)) if args.wait else 0


def _live_run(args) -> Path:
    run_dir = _run_dir(args, args.run_id)
    state = ex.status_of(run_dir)["state"]
    if state not in ("running", "paused", "stopping", "not_responding"):
        _fail(f"run {run_dir.name!r} is {state}, not running; there is nothing to {args.exp_command}")
    return run_dir


def cmd_pause(args) -> int:
    run_dir = _live_run(args)
    ex.pause_run(run_dir)
    print("asked the run to pause before its next step")
    return _wait(run_dir, ("paused", *ex.ENDED_STATES), ("paused",)) if args.wait else 0


def cmd_continue(args) -> int:
    ex.continue_run(_live_run(args))
    print("asked the run to continue")
    return 0


def cmd_stop(args) -> int:
    run_dir = _live_run(args)
    ex.stop_run(run_dir, args.reason or "")
    print("asked the run to stop after the step in flight")
    return _wait(run_dir, ex.ENDED_STATES, ("canceled", "completed")) if args.wait else 0


def cmd_abort(args) -> int:
    status = ex.abort_run(_live_run(args), args.reason or "")
    how = f" (its process group was {status['escalated']})" if status.get("escalated") else ""
    print(f"run {status['run_id']} is {status['state']}{how}")
    return 0


def cmd_note(args) -> int:
    run_dir = _run_dir(args, args.run_id)
    ex.add_note(run_dir, args.text, by=args.by or getpass.getuser())
    print(f"noted on run {run_dir.name}")
    return 0


def cmd_status(args) -> int:
    run_dir = _run_dir(args, args.run_id)
    code = 0
    if args.follow:
        _, code = follow(RunLines(run_dir).frame,
                         on_stop=f"run {run_dir.name} goes on; 'spacrq exp stop' stops it")
        if code == FOLLOW_STOPPED:
            return code
    status = ex.RunWatch(run_dir).refresh()
    doc = {**status["status"], "progress": status["progress"], "notes": ex.notes_of(run_dir),
           "records_problem": status["records_problem"]}
    _print_status(doc, args.json)
    return code


def _guarded(fn):
    def handler(args) -> int:
        try:
            return fn(args)
        except (ExperimentError, RunFileError) as exc:
            _fail(str(exc))
    return handler


def register(subparsers) -> None:
    """Add ``exp`` and its subcommands to the ``spacrq`` command."""
    exp = subparsers.add_parser("exp", help="declare, run, drive and read experiments",
                                description="Experiments: step-by-step modules run into run "
                                            "directories, stopped and resumed.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--workspace", metavar="DIR",
                        help="workspace folder (default: $SPACRQ_WORKSPACE or ~/spacrq-workspace)")
    sub = exp.add_subparsers(dest="exp_command", metavar="COMMAND")

    def add(name: str, fn, help_text: str, run_id: str | None = None):
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.add_argument("name", metavar="NAME", help="the declared experiment")
        if run_id == "required":
            p.add_argument("run_id", metavar="RUN_ID")
        elif run_id == "optional":
            p.add_argument("run_id", metavar="RUN_ID", nargs="?")
        p.set_defaults(handler=_guarded(fn))
        return p

    p = add("declare", cmd_declare, "declare an experiment in the workspace")
    p.description = ("Declare an experiment in the workspace, checked as the window's Declare… "
                     "checks it: the module is asked for its manifest (python -m MODULE "
                     "--manifest, in its interpreter and folder) and a module that cannot "
                     "answer is refused (exit 2). A name already declared is refused too, "
                     "unless --replace is given.")
    p.add_argument("module", metavar="MODULE",
                   help="run as 'python -m MODULE' (an import path, or its package folder)")
    p.add_argument("--python", help="its interpreter, or its venv folder (default: spacrq's)")
    p.add_argument("--cwd", help="its checkout (default: the workspace's experiment folder)")
    p.add_argument("--run-root", help="where its runs go")
    p.add_argument("--env", action="append", metavar="NAME=VALUE", help="a variable it gets")
    p.add_argument("--replace", action="store_true",
                   help="replace the declaration of the same name (its runs stay on disk); "
                        "says what it replaced")
    p.add_argument("--no-check", action="store_true",
                   help="do not ask the module now (its environment is installed later, or this "
                        "machine cannot run it); a run asks it when it starts")
    p = add("manifest", cmd_manifest, "print what the module takes")
    p.add_argument("--json", action="store_true", help="the manifest as JSON")
    p = sub.add_parser("list", parents=[common], help="the declared experiments, or one's runs",
                       description="The declared experiments; with NAME, that experiment's runs "
                                   "ordered by start time, oldest first and the newest last "
                                   "(a run not started yet by when it was created), each with "
                                   "its start, state and steps done; a run whose module exited "
                                   "before it started says 'never started' and why.")
    p.add_argument("name", metavar="NAME", nargs="?")
    p.add_argument("--json", action="store_true", help="the list as JSON")
    p.set_defaults(handler=_guarded(cmd_list))
    for name, fn, text in (("create", cmd_create, "name and configure a run without starting it"),
                           ("run", cmd_run, "start a run, detached")):
        p = add(name, fn, text, "required" if name == "create" else "optional")
        p.add_argument("--config", metavar="FILE", help="the run's configuration (JSON or YAML)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="one setting (group.name for a grouped one); repeatable")
        if name == "run":
            p.add_argument("--wait", action="store_true", help="wait; exit 0 only if it completed")
    p = add("resume", cmd_resume, "continue a run from its last committed step", "optional")
    p.add_argument("--wait", action="store_true", help="wait; exit 0 only if it completed")
    p = add("pause", cmd_pause, "hold the run before its next step", "required")
    p.add_argument("--wait", action="store_true", help="wait until it holds; exit 0 only then")
    add("continue", cmd_continue, "let a paused run go on", "required")
    for name, fn, text in (("stop", cmd_stop, "stop the run after the step in flight"),
                           ("abort", cmd_abort, "stop the run now, interrupting its step")):
        p = add(name, fn, text, "required")
        p.add_argument("--reason", help="why, journaled with the stop")
        if name == "stop":
            p.add_argument("--wait", action="store_true",
                           help="wait until it stopped; exit 0 only then")
    p = add("note", cmd_note, "add a note to a run", "required")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--by", help="who writes it (default: the login name)")
    p = add("status", cmd_status, "what a run is doing (default: the newest)", "optional")
    p.add_argument("--json", action="store_true", help="the full status as JSON")
    p.add_argument("--follow", action="store_true",
                   help="refresh until the run ends, then print its status; exit 0 only if it "
                        "completed (Ctrl-C stops following, not the run)")

    def usage(args) -> int:
        exp.print_help()
        return 2

    exp.set_defaults(handler=usage)


def _runs(n: int) -> str:
    return "1 run" if n == 1 else f"{n} runs"
