"""Save, Run / Resume / Retry failed, Stop and Abort, carried out on the poller thread.

A 2000-job save is fsync'd and starting the runner forks a process; neither
may freeze the window, so the pane asks its poller, which calls these and
hands back an :class:`ActionResult` whose ``message`` is one sentence for
the operator.  Each of them re-reads the runner's state first: a window
that has not yet seen a runner start must still never overwrite its file.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from spacrq.queue.model import QueueError
from spacrq.queue.pane_rules import edit_refusal
from spacrq.queue.runner import request_stop, runner_state, start_runner
from spacrq.queue.locks import runner_holds
from spacrq.queue.store import edit_lock, logs_dir, replay_journal, save_queue
from spacrq.queue.watch_read import build_queue, check_queue, read_document
from spacrq.runfiles import RunFileError

__all__ = ["ActionResult", "save_document", "start_queue", "send_stop"]


@dataclass(frozen=True)
class ActionResult:
    """How a save, run or stop went: ``message`` is one sentence for the operator."""

    kind: str
    token: int
    ok: bool
    message: str
    problems: list | None = None
    pid: int | None = None
    saved: bool = False


def _refusal(path: Path, action: str) -> str | None:
    try:
        return edit_refusal(runner_state(path), action)
    except Exception:  # an unreadable runner.json is no reason to refuse
        return None


def save_document(path: Path, token: int, document: Mapping[str, Any]) -> ActionResult:
    """Write the pane's queue document to ``path``, unless a runner owns the file."""
    refusal = _refusal(path, "save the queue")
    if refusal:
        return ActionResult("save", token, False, refusal)
    try:
        queue = build_queue(document)
        with edit_lock(path):  # the same lock as every writer: a runner cannot start meanwhile
            if runner_holds(logs_dir(path)):
                return ActionResult("save", token, False, "Not saved: a runner started on this "
                                    "queue a moment ago; its file is the runner's until it ends.")
            save_queue(queue, path)
    except QueueError as exc:
        return ActionResult("save", token, False, f"Not saved: {exc}")
    except OSError as exc:
        return ActionResult("save", token, False,
                            f"Not saved: could not write {path} ({exc.strerror or exc}).")
    return ActionResult("save", token, True, f"Saved {path.name}.", saved=True)


def start_queue(path: Path, token: int, how: str,
                document: Mapping[str, Any] | None) -> ActionResult:
    """Save ``document`` (when given), check the file, then start the detached runner.

    ``how`` is ``"run"``, ``"resume"`` or ``"retry"`` (resume, running failed
    jobs again); the result's ``message`` is ``how`` when it started.
    """
    if document is not None:
        saved = save_document(path, token, document)
        if not saved.ok:
            return ActionResult("run", token, False, saved.message)
    result = _check_and_start(path, token, how)
    return dataclasses.replace(result, saved=document is not None)


def _check_and_start(path: Path, token: int, how: str) -> ActionResult:
    refusal = _refusal(path, "start the queue again")
    if refusal:
        return ActionResult("run", token, False, refusal)
    try:  # load_queue, paced for the window (see spacrq.queue.watch_read)
        queue = build_queue(read_document(path))
        replay_journal(queue, path)
        problems = check_queue(queue)
    except QueueError as exc:
        return ActionResult("run", token, False, f"Not started: {exc}")
    errors = [p for p in problems if p.is_error]
    if errors:
        return ActionResult("run", token, False,
                            f"Not started: {len(errors)} problem(s) must be fixed first; "
                            "each is listed below with its fix.", problems=problems)
    try:
        ref = start_runner(path, resume=how != "run", retry_failed=how == "retry")
    except (QueueError, OSError) as exc:
        return ActionResult("run", token, False, f"Not started: {str(exc).splitlines()[0]}",
                            problems=problems)
    return ActionResult("run", token, True, how, problems=problems, pid=ref.pid)


def send_stop(path: Path, token: int, now: bool) -> ActionResult:
    """Ask the runner to stop after the running job, or (``now``) to abort it."""
    try:
        request_stop(path, now=now)
    except (RunFileError, OSError) as exc:
        return ActionResult("stop", token, False,
                            f"{'Abort' if now else 'Stop'} not sent: {exc}")
    return ActionResult("stop", token, True, "abort" if now else "after_job")
