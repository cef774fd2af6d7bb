"""``spacrq queue …``: build, check, run, watch and stop a queue from a terminal.

Every command answers bad input with one sentence naming the fix on stderr
and exit code 2, and overwrites nothing on the way out.  ``run`` and
``resume`` exit 0 when every job completed (nothing failed, skipped, partial
or left unrun) and 1 otherwise; ``validate`` exits 1 when it found errors.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from spacrq.fmt import duration
from spacrq.cli import CliError
from spacrq.problems import format_problems
from spacrq.queue.live import queue_frame, queue_lines
from spacrq.terminal import FOLLOW_STOPPED, LiveLines, follow, plain
from spacrq.queue.engine import _UNSET
from spacrq.queue.adopt import unwatched
from spacrq.queue.control import ABORT, STOP_AFTER_JOB
from spacrq.queue.model import (ON_ERROR_CHOICES, STATUS_FAILED, STATUS_NOT_RUN, STATUS_PENDING,
                                STATUS_RUNNING, STATUS_SKIPPED, Job, Queue, QueueError)
from spacrq.queue.keeper import run_kept
from spacrq.queue.locks import runner_holds
from spacrq.queue.resume import prepare_resume
from spacrq.queue.runner import request_stop, runner_state, serve, start_runner
from spacrq.queue.settings import SettingsError, split_override
from spacrq.queue.store import edit_queue, load_queue, logs_dir, open_queue
from spacrq.queue.summary import lost_runs_text
from spacrq.queue.validate import add_checked, plan, validate_queue
from spacrq.runfiles import RunFileError, asked, control_problem, refuse_link


def _load(path: str) -> Queue:
    """The queue, its journal folded in after a crash; what was skipped is said on stderr."""
    try:
        queue = open_queue(path)
    except QueueError as exc:
        raise CliError(str(exc)) from None
    for warning in queue.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return queue


def _edit(path: str, change, create: Queue | None = None, landed=None) -> Queue:
    try:
        return edit_queue(path, change, create=create, landed=landed)
    except QueueError as exc:
        raise CliError(str(exc)) from None


def _refuse_if_running(path: str, doing: str) -> None:
    state = runner_state(path)
    if state and state.get("alive"):
        raise CliError(f"this queue is being run by process {state.get('pid')}, so it cannot "
                       f"{doing} now; stop it with 'spacrq queue stop {path}' or wait")


def _positive(kind: type, what: str):
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, not {text!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{what} must be a finite number, not {text!r}")
        if value < 0:
            raise argparse.ArgumentTypeError(f"{what} cannot be negative")
        return value
    return parse


def cmd_add(args: argparse.Namespace) -> int:
    """Add one job, under the queue's edit lock: two adds at once both land.

    A queue being run takes the job too: the runner reads it in at its next
    transition and runs it after the jobs already queued.
    """
    path = args.file
    _refuse_linked(path)
    if not Path(path).exists() and not Path(path).parent.is_dir():
        raise CliError(f"folder {Path(path).parent} does not exist; create it first")
    env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--env {item!r} is not NAME=value; write it like --env OMP_NUM_THREADS=4")
        env[key] = value
    _check_overrides(args.set)
    settings: Any = args.settings or ""
    if args.program:
        if args.module != "command":
            raise CliError("a program after '--' is only for the command module; use --settings "
                           "or --set for other modules")
        if args.settings:
            raise CliError("--settings and a program after '--' both give the command's "
                           "settings; give one of them (a settings file may hold argv)")
        settings = {"argv": list(args.program)}
    cwd = os.path.abspath(args.cwd) if args.cwd else os.getcwd()
    if settings and isinstance(settings, str):
        settings = os.path.abspath(settings)
    _check_label(args.label)
    job = Job(module=args.module, settings=settings, id=args.id or "", label=args.label or "",
              overrides=list(args.set), depends_on=list(args.after), timeout=args.timeout,
              retries=args.retries or 0, retry_delay=args.retry_delay or 0.0, env=env, cwd=cwd)
    # Everything that can be refused is refused before the queue's lock (and logs folder) is
    # made, against the file as it is now: a refused add changes no file.  The whole check
    # runs again under the lock, against the file as it is then.
    try:
        now = load_queue(path) if Path(path).exists() else Queue()
        add_checked(now, job.copy(id=job.id or now.mint_id(job.module)))
    except QueueError as exc:
        raise CliError(str(exc)) from None
    held = []

    def add(queue: Queue) -> None:
        add_checked(queue, job)
        held.append(runner_holds(logs_dir(path)))

    queue = _edit(path, add, create=Queue(name=Path(path).name.split(".")[0] or "queue"),
                  landed=lambda q: any(j.id == job.id for j in q.jobs))
    for warning in queue.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    tail = ""
    if held and held[0]:
        stopping = asked(logs_dir(path)).get("stop") in (STOP_AFTER_JOB, ABORT)
        tail = ("; the queue is stopping as asked, so the job runs when it is resumed"
                if stopping else "; the queue is running: its runner takes the job in and "
                                 "runs it after the jobs already queued")
    print(f"added {job.id} ({job.label}) to {path}; {len(queue)} job(s) queued{tail}")
    return 0


#: version of every ``--json`` document ``spacrq queue`` prints (documented in the README)
JSON_SCHEMA = 1


def _say(text: str) -> None:
    """Print text that holds names and messages read from files, without control characters."""
    print(plain(text))


def _print_json(kind: str, document: dict[str, Any]) -> None:
    print(json.dumps({"schema": JSON_SCHEMA, "kind": kind, **document}, indent=2, default=str))


def cmd_validate(args: argparse.Namespace) -> int:
    problems = validate_queue(_load(args.file))
    errors = sum(1 for p in problems if p.is_error)
    if args.json:
        _print_json("queue-validate", {"file": str(args.file), "errors": errors,
                                       "warnings": len(problems) - errors,
                                       "problems": [p.to_dict() for p in problems]})
    else:
        _say(format_problems(problems, title=args.file))
    return 1 if errors else 0


def cmd_plan(args: argparse.Namespace) -> int:
    queue = _load(args.file)
    if args.json:
        problems = validate_queue(queue)
        _print_json("queue-plan", {
            "file": str(args.file), "name": queue.name, "on_error": queue.on_error,
            "max_consecutive_failures": queue.max_consecutive_failures,
            "jobs": [{"index": i, "id": j.id, "module": j.module, "label": j.label,
                      "after": list(j.depends_on), "status": j.status, "timeout": j.timeout,
                      "retries": j.retries} for i, j in enumerate(queue.jobs, start=1)],
            "problems": [p.to_dict() for p in problems]})
        return 0
    _say(plan(queue))
    return 0


def _apply_run_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if getattr(args, "on_error", None):
        options["on_error"] = args.on_error
    if getattr(args, "max_consecutive_failures", None) is not None:
        options["max_consecutive_failures"] = args.max_consecutive_failures
    return options


def _check_before_starting(path: str, queue: Queue, resume: bool, retry_failed: bool) -> None:
    """What the runner would refuse, refused here: exit 2, nothing started, no file made."""
    if resume or retry_failed:
        prepare_resume(queue, retry_failed)
    problems = validate_queue(queue)
    errors = [p for p in problems if p.is_error]
    if errors:
        raise CliError(f"refusing to start: {len(errors)} problem(s) must be fixed first, all "
                       "listed here so they can be fixed in one pass; nothing was started\n  "
                       + format_problems(problems, title="queue check").replace("\n", "\n  "))


def _nothing_left(path: str, queue: Queue, retry_failed: bool) -> int | None:
    """When no job is left to run: say so and how to run the failed ones again, and the exit
    code (0 if every job succeeded); None when there is work.  A finished queue run again
    used to print a fresh, empty summary and rewrite the night's report and history."""
    waiting = (STATUS_PENDING, STATUS_NOT_RUN, STATUS_RUNNING)
    again = [j for j in queue.jobs if j.status in (STATUS_FAILED, STATUS_SKIPPED)]
    if not queue.jobs or any(j.status in waiting for j in queue.jobs) or (retry_failed and again):
        return None
    counts = ", ".join(f"{n} {s}" for s, n in queue.counts().items() if n)
    hint = (f"; 'spacrq queue restart-failed {path}' runs the {len(again)} failed or skipped "
            "job(s) again" if again else "")
    print(f"nothing left to run in {path}: every job has ended ({counts}){hint}")
    return 1 if again or any(j.is_partial for j in queue.jobs) else 0


def _take_kept_state(path: str, copy: str) -> None:
    """``--kept-state COPY``: the operator's word that this file is the queue a runner's kept
    state was kept for, moved here since (see :mod:`spacrq.queue.memcopy`): taken in, under
    the edit lock, before anything runs."""
    from spacrq.queue import memcopy

    def take(queue: Queue) -> None:
        try:
            moved = memcopy.take_from(queue, path, copy)
        except (OSError, RunFileError) as exc:
            raise QueueError(str(getattr(exc, "strerror", None) or exc)) from None
        print(f"took in the state of {moved} job(s) from {copy}")
    _refuse_if_running(path, "take in a kept state")
    _edit(path, take)


def _refuse_unclaimed_kept_state(queue: Queue, args: argparse.Namespace) -> None:
    """A kept state that may be this queue's, moved here since: running without it runs
    again every job it says ended, so a run is refused until the operator says which."""
    if queue.kept_elsewhere and not getattr(args, "no_kept_state", False):
        raise CliError(f"refusing to start: a runner's kept state may be this queue's (moved "
                       f"here since), and running without it would run again every job it "
                       f"says ended; say which: --kept-state {queue.kept_elsewhere[0]} takes it "
                       "in, --no-kept-state runs without it")


def _run(args: argparse.Namespace, resume: bool, retry_failed: bool) -> int:
    path = args.file
    _refuse_linked(path)
    if getattr(args, "kept_state", None):
        _take_kept_state(path, args.kept_state)
    if not args.detach:  # the command becomes its runner's keeper (spacrq.queue.keeper)
        run_kept(logs_dir(Path(path).resolve()))
    # one sentence now for a file that cannot be run (and a dead runner's journal folded)
    queue = _load(path)
    _refuse_unclaimed_kept_state(queue, args)
    done = _nothing_left(path, queue, retry_failed)
    if done is not None:
        return done
    options = _apply_run_options(args)
    # a queue that cannot start is refused before anything is changed (--notify included)
    _check_before_starting(path, _load(path), resume, retry_failed)
    if args.notify:
        _refuse_if_running(path, "be changed")

        def set_notify(q: Queue) -> None:
            q.notify_command = list(args.notify)
        _edit(path, set_notify)
    if args.detach:
        _refuse_if_running(path, "be started again")
        if options:
            def set_options(q: Queue) -> None:
                q.on_error = options.get("on_error", q.on_error)
                q.max_consecutive_failures = options.get("max_consecutive_failures",
                                                         q.max_consecutive_failures)
            _edit(path, set_options)
        try:
            ref = start_runner(path, resume=resume, retry_failed=retry_failed,
                               without_kept_state=getattr(args, "no_kept_state", False))
        except QueueError as exc:
            raise CliError(str(exc)) from None
        print(f"runner started as process {ref.pid}; watch it with 'spacrq queue status {path}'"
              f", its log is {logs_dir(path) / 'runner.log'}")
        return 0
    live = LiveLines(lambda: queue_lines(path))
    try:
        with live:
            result = serve(path, resume=resume, retry_failed=retry_failed,
                           on_error=options.get("on_error"),
                           max_consecutive_failures=options.get("max_consecutive_failures",
                                                                _UNSET),
                           echo=not live.enabled)
    except QueueError as exc:
        raise CliError(str(exc).replace("\n", "\n  ")) from None
    if live.enabled:  # the summary once the live lines are done drawing
        print(result.summary())
    # (a file that could not be saved does not show what ran: a morning script must notice)
    return 0 if result.ok and not result.save_problem else 1


def cmd_run(args: argparse.Namespace) -> int:
    return _run(args, resume=False, retry_failed=False)


def cmd_resume(args: argparse.Namespace) -> int:
    return _run(args, resume=True, retry_failed=args.retry_failed)


def cmd_restart_failed(args: argparse.Namespace) -> int:
    queue = _load(args.file)
    again = [j.id for j in queue.jobs if j.status in (STATUS_FAILED, STATUS_SKIPPED)]
    if not again:
        print("no job failed or was skipped; nothing to restart")
        return 0
    print(f"restarting {len(again)} job(s): {', '.join(again[:30])}")
    return _run(args, resume=True, retry_failed=True)


def cmd_status(args: argparse.Namespace) -> int:
    if args.follow:
        last, code = follow(lambda: queue_frame(args.file),
                            on_stop=f"the queue goes on; 'spacrq queue stop {args.file}' stops it")
        if code == FOLLOW_STOPPED:
            return code
        _print_status(args)
        return code
    return _print_status(args)


def _print_status(args: argparse.Namespace) -> int:
    queue = _load(args.file)
    state = runner_state(args.file)
    if args.json:
        _print_json("queue-status", {"file": str(args.file), "queue": queue.to_dict(),
                                     "counts": dict(queue.counts()), "runner": state})
        return 0
    counts = ", ".join(f"{n} {s}" for s, n in queue.counts().items() if n)
    runner = "no runner has run it yet"
    logs = logs_dir(args.file)
    if not state and os.path.lexists(logs) and not os.path.isdir(logs):
        runner = f"no runner's record can be read: {logs} is not a folder (move it away)"
    elif not state and any(j.status == STATUS_RUNNING for j in queue.jobs):
        runner = "no runner's record is left, yet a job is marked running"
    alive = bool(state and state.get("alive"))
    if state:
        runner = f"runner {state.get('state')} (process {state.get('pid') or 'unknown'}"
        runner += ", alive)" if alive else ", gone)"
        if state.get("problem"):
            runner += f"; {state['problem']}"
        asked_now = asked(logs_dir(args.file)).get("stop") if alive else None
        unreadable = control_problem(logs_dir(args.file)) if alive else None
        if unreadable:
            runner += f"; its control file cannot be read ({unreadable}), so it is asked nothing"
        elif asked_now in (STOP_AFTER_JOB, ABORT):
            runner += ("; a stop is asked: it stops after the running job"
                       if asked_now == STOP_AFTER_JOB else
                       "; an abort is asked: the running job is being stopped")
    _say(f"{queue.name}: {len(queue)} job(s) — {counts or 'empty'}; {runner}")
    width = max((len(j.id) for j in queue.jobs), default=2)
    for i, job in enumerate(queue.jobs, start=1):
        mark = "success (PARTIAL)" if job.is_partial and job.status == "success" else job.status
        line = f"{i:>4}. {job.id.ljust(width)}  {mark.ljust(17)} {duration(job.elapsed_s).rjust(8)}  {job.label}"
        _say(line)
        if job.status == STATUS_RUNNING and not alive:
            _say(f"        {unwatched(job, args.file)}")
        elif job.error:
            _say(f"        {job.error}")
        if job.lost_runs:
            _say(f"        ran again from its start after {lost_runs_text(job)}")
    if queue.stopped_reason:
        _say(f"stopped: {queue.stopped_reason}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    _refuse_linked(args.file)
    try:
        _load(args.file)
    except CliError:
        # a file a runner runs, garbled meanwhile: the night can still be stopped (the
        # request goes to the logs folder; the runner writes its whole state over the file)
        if not runner_holds(logs_dir(args.file)):
            raise
    state = runner_state(args.file)
    if not state or not state.get("alive"):
        print("no runner is running this queue; nothing to stop")
        return 0
    try:
        asked = request_stop(args.file, now=args.now)
    except (OSError, RunFileError) as exc:
        raise CliError(f"could not ask the runner to stop: {str(exc).splitlines()[0]}; ask "
                       "again once it can be written, or abort now with --now, which signals "
                       "the runner instead") from None
    if asked.get("signalled"):
        print(f"could not write the request ({asked.get('why')}), so process "
              f"{asked['signalled']} was sent SIGTERM, which aborts the running job the same "
              "way: it becomes not_run and can be resumed (a runner waiting for room to save "
              "its final state gives that up instead, and the jobs that ended since the disk "
              "filled run again on resume)")
    elif args.now:
        print(f"asked process {state.get('pid')} to abort the running job now; it becomes "
              "not_run and can be resumed")
    else:
        print(f"asked process {state.get('pid')} to stop after the running job")
    return 0


def _refuse_linked(path: str) -> None:
    """A queue file that is a link is refused: replacing it would replace the link with a
    copy (and lock another logs folder than its target's)."""
    try:
        refuse_link(path, "queue file")
    except RunFileError as exc:
        raise CliError(str(exc)) from None


def _check_overrides(items: list[str]) -> None:
    for item in items:
        try:
            split_override(item)
        except SettingsError as exc:
            raise CliError(str(exc)) from None


def _check_label(label: str | None) -> None:
    """A label is one line of text: the queue's listings, the pane and the report show it."""
    if label and any(ord(c) < 32 or ord(c) == 127 for c in label):
        raise CliError(f"the label {label!r} holds a line break or another control character; "
                       "give a label on one line (--label 'mask plate 3')")


def cmd_edit(args: argparse.Namespace) -> int:
    """Change a job that is still to run, under the queue's edit lock and checked as an add
    is: a running queue's runner takes the change in before the job starts; a job that
    started or ended is refused (its run is what it is)."""
    from spacrq.queue.edits import EditError, edit_job
    _refuse_linked(args.file)
    changes: dict[str, Any] = {}
    if args.label is not None:
        _check_label(args.label)
        changes["label"] = args.label
    if args.no_timeout:
        changes["timeout"] = None
    elif args.timeout is not None:
        changes["timeout"] = args.timeout
    if args.no_after or args.after:
        changes["after"] = [] if args.no_after else list(args.after)
    if args.settings and args.program:
        raise CliError("--settings and a program after '--' both give the job's settings; "
                       "give one of them")
    if args.settings:
        changes["settings"] = os.path.abspath(args.settings)
    _check_overrides(args.set)
    if not changes and not args.set and not args.program:
        raise CliError("nothing to change: give --set KEY=VALUE, --settings, --label, --after, "
                       "--no-after, --timeout, --no-timeout, or a command's program after '--'")

    def derive(job: Job) -> dict[str, Any]:  # (the job as it is in the file, under the lock)
        more: dict[str, Any] = {}
        if args.program:
            if job.module != "command":
                raise CliError(f"job {job.id} runs the {job.module} module; a program after "
                               "'--' is only for command jobs (use --set or --settings)")
            settings = dict(job.settings) if isinstance(job.settings, dict) else {}
            more["settings"] = dict(settings, argv=list(args.program))
            if args.label is None and job.label == job.default_label():
                more["label"] = ""  # (a label made from the old program: made again)
        if args.set:
            keys = {split_override(item)[0] for item in args.set}
            kept = [o for o in job.override_args if o.split("=", 1)[0].strip() not in keys]
            more["overrides"] = kept + list(args.set)
        return more

    warnings: list[str] = []
    try:
        job = edit_job(args.file, args.id, changes, warnings=warnings, derive=derive)
    except EditError as exc:
        raise CliError(str(exc)) from None
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    running = runner_holds(logs_dir(args.file))
    tail = "; the queue's runner takes the change in before the job starts" if running else ""
    print(f"changed {job.id} ({job.label}) in {args.file}{tail}")
    return 0


def _with_program(base: type) -> type:
    """A parser that keeps everything after ``--`` as the program of a command job."""

    class WithProgram(base):  # type: ignore[misc, valid-type]
        def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001
            args = list(sys.argv[1:] if args is None else args)
            program: list[str] = []
            if "--" in args:
                cut = args.index("--")
                args, program = args[:cut], args[cut + 1:]
            ns, extras = super().parse_known_args(args, namespace)
            ns.program = program
            return ns, extras

    return WithProgram


def register(subparsers: Any) -> None:
    queue = subparsers.add_parser("queue", help="a resumable queue of jobs run one at a time")
    sub = queue.add_subparsers(dest="queue_command", metavar="ACTION",
                               parser_class=type(queue))
    queue.set_defaults(handler=lambda a: (queue.print_help(), 2)[1])

    plain = sub._parser_class

    def with_program(name: str, **kw: Any) -> argparse.ArgumentParser:
        """A subcommand whose arguments after ``--`` are a command job's program."""
        sub._parser_class = _with_program(plain)
        try:
            return sub.add_parser(name, **kw)
        finally:
            sub._parser_class = plain

    add = with_program("add", help="add a job (checked now, not at 3 a.m.)",
                       epilog="For the command module the program may follow '--': "
                              "spacrq queue add night.queue.json command -- rsync -a A B")
    add.add_argument("file", help="the queue file (NAME.queue.json), made if it does not exist")
    add.add_argument("module", help="what the job runs: command, python, blockwise, experiment, "
                                    "or a spaCR step ('python -m spacrq.run --list' lists them)")
    add.add_argument("--settings", help="settings file (CSV Key,Value or JSON)")
    add.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="one setting, on top of --settings (repeat for more)")
    add.add_argument("--id", help="the job's id (default: made from the module, e.g. command-2); "
                                  "it names the job's log")
    add.add_argument("--label", help="the name shown for the job (default: from its settings)")
    add.add_argument("--after", action="append", default=[], metavar="ID",
                     help="run only after job ID succeeded, else skip it (repeat for more)")
    add.add_argument("--timeout", type=_positive(float, "--timeout"), metavar="SECONDS",
                     help="stop the job and fail it after this long (default: none)")
    add.add_argument("--retries", type=_positive(int, "--retries"), default=0,
                     help="run a failed job again up to this many times (default 0)")
    add.add_argument("--retry-delay", type=_positive(float, "--retry-delay"), default=0.0,
                     metavar="SECONDS",
                     help="wait this long before each retry (default 0: at once)")
    add.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                     help="an environment variable the job gets (repeat for more)")
    add.add_argument("--cwd", help="folder the job runs in (default: this one)")
    add.set_defaults(handler=cmd_add)

    edit = with_program("edit", help="change a job still to run (checked now)",
                        epilog="A command job's program may follow '--': spacrq queue edit "
                               "night.queue.json copy-1 -- rsync -a A C")
    edit.add_argument("file", help="the queue file")
    edit.add_argument("id", help="the job to change (it must not have started)")
    edit.add_argument("--settings", help="a new settings file (CSV Key,Value or JSON)")
    edit.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="one setting, on top of its settings: replaces an earlier --set of "
                           "the same key (repeat for more)")
    edit.add_argument("--label", help="a new name shown for the job")
    edit.add_argument("--after", action="append", default=[], metavar="ID",
                      help="run it only after job ID succeeded: replaces what it ran after "
                           "(repeat for more)")
    edit.add_argument("--no-after", action="store_true", help="it runs after no job")
    edit.add_argument("--timeout", type=_positive(float, "--timeout"), metavar="SECONDS",
                      help="a new timeout")
    edit.add_argument("--no-timeout", action="store_true", help="no timeout")
    edit.set_defaults(handler=cmd_edit)

    for name, fn, text in (("validate", cmd_validate, "list every problem with its fix"),
                           ("plan", cmd_plan, "show what would run, in order")):
        p = sub.add_parser(name, help=text)
        p.add_argument("file")
        p.add_argument("--json", action="store_true",
                       help=f"print the {'problems' if name == 'validate' else 'plan'} as JSON")
        p.set_defaults(handler=fn)

    run = sub.add_parser("run", help="run the queue (this process becomes its runner)")
    run.add_argument("file")
    run.add_argument("--on-error", choices=ON_ERROR_CHOICES,
                     help="after a failed job: go on with the next (continue) or stop (stop); "
                          "kept in the file")
    run.add_argument("--max-consecutive-failures", type=_positive(int, "--max-consecutive-failures"),
                     help="stop after this many failures in a row, a systematic problem "
                          "(0: never); kept in the file")
    run.add_argument("--detach", action="store_true", help="run in the background and return")
    run.add_argument("--notify", action="append", default=[], metavar="ARG",
                     help="command run once when the queue ends, one --notify per argument "
                          "(e.g. --notify notify-send --notify 'queue done'); never a shell")
    _kept_state_options(run)
    run.set_defaults(handler=cmd_run)

    status = sub.add_parser("status", help="what ran, what runs, what failed")
    status.add_argument("file")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.add_argument("--follow", action="store_true",
                        help="refresh until the queue's runner ends, then print the status and "
                             "exit with the run's code (Ctrl-C stops following, not the queue)")
    status.set_defaults(handler=cmd_status)

    stop = sub.add_parser("stop", help="stop after the running job (--now: abort it)")
    stop.add_argument("file")
    stop.add_argument("--now", action="store_true",
                      help="abort the running job now (its processes are stopped; it becomes "
                           "not_run and runs again on resume)")
    stop.set_defaults(handler=cmd_stop)

    for name, fn, text in (("resume", cmd_resume, "carry on after a stop, abort or crash"),
                           ("restart-failed", cmd_restart_failed,
                            "run failed jobs and their skipped dependents again")):
        p = sub.add_parser(name, help=text)
        p.add_argument("file")
        if name == "resume":
            p.add_argument("--retry-failed", action="store_true",
                           help="also run failed jobs, and the jobs skipped because of them, again")
        p.add_argument("--on-error", choices=ON_ERROR_CHOICES, help="as for run")
        p.add_argument("--max-consecutive-failures",
                       type=_positive(int, "--max-consecutive-failures"), help="as for run")
        p.add_argument("--detach", action="store_true", help="run in the background and return")
        p.add_argument("--notify", action="append", default=[], metavar="ARG", help="as for run")
        _kept_state_options(p)
        p.set_defaults(handler=fn)


def _kept_state_options(parser: argparse.ArgumentParser) -> None:
    kept = parser.add_mutually_exclusive_group()
    kept.add_argument("--kept-state", metavar="COPY",
                      help="this file is the queue a runner's kept state COPY was kept for, "
                           "moved here: take it in first (status names COPY)")
    kept.add_argument("--no-kept-state", action="store_true",
                      help="this file is not the queue a runner's kept state was kept for "
                           "(a copy made before): run it without")


if __name__ == "__main__":  # pragma: no cover
    from spacrq.cli import main
    sys.exit(main(["queue", *sys.argv[1:]]))
