"""The Queue pane's rules, as plain functions a test reaches without Qt.

Which buttons are live in which state (:func:`controls_for`), the sentence
that refuses an edit while a runner owns the file (:func:`edit_refusal`),
which queue the pane opens on start (:func:`queue_to_open`), and how the
job editor's text fields read (:func:`parse_timeout`,
:func:`parse_overrides`, :func:`parse_after`).  The window only applies
these answers; keeping them here keeps the window thin.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from spacrq.queue.runner import runner_state
from spacrq.queue.watch_rows import FINISHED_STATUSES, JobRow

__all__ = ["PaneState", "Controls", "controls_for", "edit_refusal", "queue_to_open",
           "newest_queue", "parse_timeout", "parse_overrides", "parse_after"]


@dataclass(frozen=True)
class PaneState:
    """Everything the buttons depend on."""

    runner_alive: bool = False
    stop_asked: bool = False
    has_path: bool = False
    dirty: bool = False
    rows: tuple[JobRow, ...] = ()
    selected: tuple[int, ...] = ()


@dataclass(frozen=True)
class Controls:
    """Which controls are live.  Editing is off while a runner owns the file."""

    add: bool
    duplicate: bool
    remove: bool
    move_up: bool
    move_down: bool
    validate: bool
    open: bool
    save: bool
    run: bool
    stop: bool
    abort: bool
    resume: bool
    retry_failed: bool
    edit_options: bool


def controls_for(state: PaneState) -> Controls:
    """The pane's buttons as a function of the state."""
    idle = not state.runner_alive
    selected = [i for i in state.selected if 0 <= i < len(state.rows)]
    statuses = {r.status for r in state.rows}
    runnable = "pending" in statuses
    resumable = bool(statuses & {"not_run", "running"}) or (
        runnable and bool(statuses & set(FINISHED_STATUSES)))
    return Controls(
        add=idle,
        duplicate=idle and bool(selected),
        remove=idle and bool(selected),
        move_up=idle and bool(selected) and min(selected) > 0,
        move_down=idle and bool(selected) and max(selected) < len(state.rows) - 1,
        validate=bool(state.rows),
        open=True,
        save=idle and (state.dirty or not state.has_path),
        run=idle and runnable,
        stop=state.runner_alive and not state.stop_asked,
        abort=state.runner_alive,
        resume=idle and resumable,
        retry_failed=idle and bool(statuses & {"failed", "skipped"}),
        edit_options=idle,
    )


def edit_refusal(runner: Mapping[str, Any] | None, action: str = "edit the queue") -> str | None:
    """The sentence that refuses an edit while a runner owns the file, else None."""
    if runner and runner.get("alive"):
        pid = runner.get("pid", "?")
        return (f"Cannot {action} while the queue runs (runner process {pid} owns the file); "
                f"Stop it first, then edit.")
    return None


# -- which queue opens first --------------------------------------------------------

def _queue_files(folder: str | os.PathLike) -> list[os.DirEntry]:
    """The ``*.queue.json`` entries of ``folder`` (none when it cannot be read)."""
    try:
        return [e for e in os.scandir(folder) if e.name.endswith(".queue.json")]
    except OSError:
        return []


def queue_to_open(folder: str | os.PathLike) -> Path | None:
    """The queue the pane opens on start: one that is running now, else the newest.

    Reopening the window in the middle of the night must land on the queue
    that is running, even when a newer queue file was written since.
    """
    running = []
    for entry in _queue_files(folder):
        try:
            state = runner_state(Path(folder) / entry.name) or {}
        except Exception:  # an unreadable runner.json says nothing about liveness
            state = {}
        if state.get("alive"):
            running.append(entry.name)
    if running:
        return Path(folder) / sorted(running)[0]
    return newest_queue(folder)


def newest_queue(folder: str | os.PathLike) -> Path | None:
    """The most recently modified ``*.queue.json`` in ``folder``, or None."""
    best: tuple[float, str] | None = None
    for entry in _queue_files(folder):
        try:
            if not entry.is_file():
                continue
            key = (entry.stat().st_mtime, entry.name)
        except OSError:
            continue
        if best is None or key > best:
            best = key
    return Path(folder) / best[1] if best else None


# -- reading the job editor's fields ----------------------------------------------

_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_timeout(text: str) -> tuple[float | None, str | None]:
    """``"90"``, ``"90s"``, ``"30m"``, ``"2h"``, ``"1h30m"`` or empty -> ``(seconds or None, error)``."""
    text = text.strip().lower().replace(" ", "")
    if not text or text in ("none", "0"):
        return None, None
    total, number, unit = 0.0, "", ""
    pieces: list[tuple[str, str]] = []
    for ch in text:
        if ch.isdigit() or ch == ".":
            if unit:
                pieces.append((number, unit))
                number, unit = "", ""
            number += ch
        elif ch.isalpha():
            unit += ch
        else:
            number = "?"
            break
    pieces.append((number, unit))
    try:
        for number, unit in pieces:
            total += float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        return None, (f"the timeout {text!r} is not a duration; write it like 90s, 30m, 2h or "
                      "1h30m, or leave it empty for none")
    if total <= 0:
        return None, None
    return total, None


def parse_overrides(text: str) -> tuple[list[str], str | None]:
    """``key=value`` words (quotes allowed for spaces) -> ``(overrides, error)``."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        return [], f"the overrides could not be read ({exc}); close the quote or remove it"
    bad = [w for w in words if "=" not in w or w.startswith("=")]
    if bad:
        return [], (f"the override {bad[0]!r} has no key=value; write overrides like "
                    "diameter=30 src=/data/plate1")
    return words, None


def parse_after(text: str) -> list[str]:
    """Job ids separated by commas or spaces, duplicates dropped, order kept."""
    out: list[str] = []
    for word in text.replace(",", " ").split():
        if word not in out:
            out.append(word)
    return out
