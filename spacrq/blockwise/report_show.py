"""``spacrq report [PATH] [--json] [--task ID] [--block B] [--history]``: the run report, headless.

PATH may be a ``runs.jsonl`` (its last run), a tracking store (its latest
run, rebuilt from the store's arrays), or a folder holding stores or task
log folders — by default the workspace's ``runs/`` folder.  The morning
question is "what ran overnight", so a folder shows every task in it at once.

Bad input — a missing path, a file that holds no report, an unknown task or
block — is one sentence naming the fix, exit 2.  The command says so itself
(:class:`ReportUsage`, caught by :func:`run_report`) rather than through the
top-level command's error type, so this module and ``spacrq.cli`` (which
lists the report in ``spacrq demo``) do not import each other.  A torn last line in
``runs.jsonl`` (a run cut off while writing its report) is not bad input:
the runs before it are shown.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from spacrq.blockwise.live import task_line
from spacrq.blockwise.report import (
    RUNS_FILE,
    ReportError,
    RunReport,
    RunsTail,
    TaskReport,
    block,
    read_runs,
    render_history,
    report_from_store,
    runs_file,
)
from spacrq.blockwise.report_runs import read_store_attributes
from spacrq.blockwise.run_state import run_state
from spacrq.runfiles import PROGRESS_FILE, read_progress
from spacrq.terminal import FOLLOW_STOPPED, Frame, follow, plain
from spacrq.workspace import default_path

#: the exit code of bad input, as every spacrq command answers it
EXIT_USAGE = 2


class ReportUsage(ReportError):
    """Bad input to ``spacrq report``: one sentence naming the fix, exit 2."""


def _fail(message: str):
    raise ReportUsage(message)


def _default_path(workspace: str | None) -> Path:
    root = Path(workspace).expanduser() if workspace else default_path()
    runs = root / "runs"
    if not runs.is_dir():
        _fail(f"there is no runs folder at {runs}; pass a runs.jsonl or tracking store as PATH, "
              "or name the workspace with --workspace")
    return runs


def _from_runs_file(path: Path, notes: list[str], why: list[str] | None = None
                    ) -> TaskReport | None:
    """The last run report of ``path``; ``why`` gets what is wrong with its lines."""
    tail = RunsTail(path)
    runs = tail.read()
    found = []
    if tail.unreadable:
        notes.append(tail.unreadable)
        found.append(tail.unreadable)
    if tail.bad_lines:
        last = f" (the last: {tail.last_problem})" if tail.last_problem else ""
        notes.append(f"{tail.bad_lines} damaged line(s) in {path} were skipped{last}")
        found.append(f"{tail.bad_lines} damaged line(s)")
    if tail.torn:
        notes.append(f"the last line of {path} is cut off (a run stopped while writing its "
                     "report); the runs before it are shown")
        found.append("its last line is cut off")
    if why is not None:
        why.extend(found)
    return runs[-1] if runs else None


def collect(path: Path, notes: list[str],
            sources: dict[str, Path] | None = None) -> dict[str, TaskReport]:
    """Every task report PATH holds, keyed by task id (by folder name when ids collide).

    ``sources``, when given, is filled with each task's ``runs.jsonl`` (for ``--history``).
    """
    sources = {} if sources is None else sources
    if path.is_file():
        why: list[str] = []
        report = _from_runs_file(path, notes, why)
        if report is None and why:  # it holds lines, none of them a report: say what they are
            _fail(f"{path} holds no readable run report ({', '.join(why)}); pass a runs.jsonl "
                  "written by a blockwise run, a tracking store, or a folder of them")
        if report is None:
            _fail(f"{path} holds no run report; pass a runs.jsonl written by a blockwise run, "
                  "a tracking store, or a folder of them")
        sources[report.task_id] = path
        return {report.task_id: report}
    attrs, problem = read_store_attributes(path)
    if problem is not None and not (path / RUNS_FILE).is_file():
        _fail(f"{path} cannot be read as a tracking store: {problem}")
    if attrs is not None:
        report = report_from_store(path, notes)
        sources[report.task_id] = runs_file(path)
        return {report.task_id: report}
    if problem is not None:
        notes.append(f"{problem}; the runs recorded in {path / RUNS_FILE} are shown instead")
    if (path / "workspace.json").is_file() and (path / "runs").is_dir():
        path = path / "runs"  # a workspace named as PATH: its runs are what is meant
    found: dict[str, TaskReport] = {}
    candidates = [path] + sorted(p for p in path.iterdir() if p.is_dir())
    for folder in candidates:
        try:
            attrs, problem = (None, None) if folder == path else read_store_attributes(folder)
            if problem is not None:
                notes.append(f"{problem}; " + ("its runs.jsonl is shown instead"
                                               if (folder / RUNS_FILE).is_file() else
                                               f"{folder.name} is left out"))
            if attrs is not None:
                report = report_from_store(folder, notes)
            elif (folder / RUNS_FILE).is_file():
                report = _from_runs_file(folder / RUNS_FILE, notes)
            else:
                continue
        except ReportError as exc:  # one broken store must not hide the others
            notes.append(str(exc))
            continue
        if report is not None:
            key = report.task_id if report.task_id not in found else f"{report.task_id} ({folder.name})"
            found[key] = report
            sources[key] = runs_file(folder)
    return found


#: the states of a store's latest run that has no report line yet (it is going, or it died)
_UNREPORTED = ("running", "interrupted")


def _history(key: str, tasks: dict[str, TaskReport], sources: dict[str, Path]) -> list[TaskReport]:
    """Every run of task ``key``, oldest first: its runs.jsonl lines, and after them the
    store's latest run when that one has no line — still going, or killed before it
    could write one (a history that left out the night that died would lie by omission)."""
    runs = read_runs(sources[key]) if key in sources else []
    latest = tasks.get(key)
    state = ((latest.outcome or {}).get("state") if latest is not None else None)
    if latest is not None and state in _UNREPORTED \
            and all(abs(r.started_at - latest.started_at) > 1e-6 for r in runs):
        runs = [*runs, latest]
    return runs


def _history_text(tasks: dict[str, TaskReport], sources: dict[str, Path]) -> str:
    """Every run of every task, one row a run (see :func:`_history`)."""
    parts = []
    for key in sorted(tasks):
        runs = _history(key, tasks, sources)
        parts.append(render_history(runs) if runs else
                     f"  {key}  no finished run yet (its report line is written when a run ends)")
    return "\n\n".join(parts) if parts else "No blockwise runs here yet."


def _parse_block(text: str):
    parts = [p.strip() for p in text.strip("()[] ").split(",") if p.strip()]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        _fail(f"--block {text!r} is neither a spatial id nor a grid coordinate; give e.g. 17 or 1,2")
    if not values:
        _fail("--block needs a spatial id or a grid coordinate, e.g. 17 or 1,2")
    return values[0] if len(values) == 1 and "," not in text else tuple(values)


def run_report(args: argparse.Namespace) -> int:
    """``spacrq report``: the answer on stdout, or one sentence on stderr and exit 2."""
    try:
        return _run_report(args)
    except ReportError as exc:
        print(f"spacrq: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _run_report(args: argparse.Namespace) -> int:
    path = Path(args.path).expanduser() if args.path else _default_path(args.workspace)
    if not path.exists():
        _fail(f"{path} does not exist; pass a runs.jsonl, a tracking store or a folder of them")
    if args.follow:
        return _follow(args, path)
    if args.max_workers < 0:
        _fail("--max-workers must be 0 or more")
    notes: list[str] = []
    sources: dict[str, Path] = {}
    try:
        tasks = collect(path, notes, sources)
    except ReportError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{path} cannot be read ({exc.strerror or exc}); check its permissions")
    if args.task is not None:
        if args.task not in tasks:
            known = ", ".join(sorted(tasks)) or "none"
            _fail(f"there is no task {args.task!r} in {path}; the tasks there are: {known}")
        tasks = {args.task: tasks[args.task]}
    for note in notes:
        print(f"spacrq: note: {note}", file=sys.stderr)
    if args.block is not None:
        text = _block_text(args, tasks, path)
    elif args.history:
        if args.json:
            text = _json("report-history", path=str(path),
                         tasks={key: [r.to_dict() for r in _history(key, tasks, sources)]
                                for key in sorted(tasks) if key in sources})
        else:
            text = _history_text(tasks, sources)
    else:
        text = _report_text(args, tasks, path)
    return _emit(text)


def _follow(args: argparse.Namespace, path: Path) -> int:
    """Show a live store's progress until its scheduler is gone, then its report."""
    attrs, problem = read_store_attributes(path)
    if attrs is None:
        _fail(f"--follow needs the tracking store of a run, and {path} is not one"
              + (f" ({problem})" if problem else "") + "; pass the store's folder")

    def poll() -> Frame:
        state = run_state(read_progress(path / PROGRESS_FILE))
        return Frame((task_line(path),), ended=state != "running")

    _, code = follow(poll, on_stop="the run goes on; 'spacrq report PATH' shows it again")
    if code == FOLLOW_STOPPED:
        return code
    notes: list[str] = []
    tasks = collect(path, notes)
    for note in notes:
        print(f"spacrq: note: {note}", file=sys.stderr)
    _emit(_report_text(args, tasks, path))
    return 0 if tasks and all(_complete(t) for t in tasks.values()) else 1


def _complete(task: TaskReport) -> bool:
    """Finished with no failed or orphaned block (a run that stopped early is not complete)."""
    outcome = task.outcome or {}
    if outcome.get("state") not in (None, "", "finished"):
        return False
    return not (outcome.get("failed") or outcome.get("orphaned"))


#: version of every ``--json`` document ``spacrq report`` prints (documented in the README)
JSON_SCHEMA = 1


def _json(kind: str, **document) -> str:
    return json.dumps({"schema": JSON_SCHEMA, "kind": kind, **document}, indent=2)


def _report_text(args: argparse.Namespace, tasks: dict[str, TaskReport], path: Path) -> str:
    run = RunReport(tasks)
    if args.json:  # "tasks" holds the {task_id: report} shape RunReport.to_dict writes
        return _json("report", path=str(path), tasks=run.to_dict())
    if not tasks:
        return f"No blockwise runs in {path} yet."
    parts = []
    panel = run.render(max_workers=args.max_workers)
    if panel:
        parts.append(panel)
    untimed = [t for tid, t in sorted(tasks.items()) if tid not in run.timed]
    if untimed:
        parts.append("Nothing was measured for (a serial run without resource tracking):\n"
                     + "\n".join("  " + t.headline() for t in untimed))
    return "\n\n".join(parts)


def _block_text(args: argparse.Namespace, tasks: dict[str, TaskReport], path: Path) -> str:
    if len(tasks) != 1:
        known = ", ".join(sorted(tasks)) or "none"
        _fail(f"--block needs one task but {path} holds {len(tasks)} ({known}); add --task ID")
    report = next(iter(tasks.values()))
    which = _parse_block(args.block)
    record = block(report.require_store(), which)
    return (_json("report-block", path=str(path), block=record.to_dict()) if args.json
            else record.describe())


def _emit(text: str) -> int:
    """Print the answer; a reader that stops early (``| head``) is not an error."""
    try:
        print(plain(text))  # names read from run files never drive the terminal
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush is quiet too
        os.close(devnull)
    return 0
