"""What the Experiments pane decides, without Qt: run rows, badges, ETA text and buttons.

Everything the pane shows about a run is worked out here, on the poller's
thread, as plain immutable values: a :class:`RunRow` per run (its state,
progress, what was asked of it, what is wrong with its files), the table's
:class:`~spacrq.watching.Row` for it with every cell already text, and
:func:`controls` — the one place that decides which run buttons are
enabled for the selected run.  A test reaches all of it without a window.
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spacrq.experiments.errors import RESUMABLE_STATES
from spacrq.fmt import duration
from spacrq.watching import Button, Row

__all__ = ["BADGES", "LIVE_STATES", "ANNOUNCED", "COLUMNS", "Button", "Controls", "RunRow",
           "badge", "controls", "eta_seconds", "eta_text", "progress_text",
           "clock_text", "run_row", "reading_row", "tooltip", "rows", "announcement",
           "running_line", "form_heading"]

#: state → (badge text, colour).  On a light table: blue is busy, amber waits
#: on the operator, green is done, red and brown are outcomes to look at.
BADGES: dict[str, tuple[str, str]] = {
    "created": ("created", "#7f8c8d"),
    "running": ("running", "#2471a3"),
    "paused": ("paused", "#b7950b"),
    "stopping": ("stopping after this step", "#ca6f1e"),
    "canceled": ("canceled", "#76448a"),
    "aborted": ("aborted", "#c0392b"),
    "interrupted": ("interrupted", "#a04000"),
    "not_responding": ("not responding", "#a04000"),
    "completed": ("completed", "#1e8449"),
    "failed": ("failed", "#922b21"),
    "not_started": ("not started", "#7f8c8d"),
    "reading": ("reading…", "#aab7b8"),
}

#: states in which the run's process is there to be asked something
LIVE_STATES = ("running", "paused", "stopping")

#: states worth a word in the status bar (and the tray) when a run reaches them
ANNOUNCED = ("paused", "canceled", "aborted", "interrupted", "completed", "failed")

#: the run table's columns: (title, header tooltip)
COLUMNS = (("Run", "The run's id: its folder under the experiment's run root"),
           ("State", "What the run is doing, read from its journal and its process"),
           ("Progress", "Steps committed of the plan's steps, and the time left while it runs"),
           ("Started", "When the run started"),
           ("Ended", "When the run ended"))


def badge(state: str | None) -> tuple[str, str]:
    """The text and colour of a run's state badge (an unknown state reads as itself)."""
    return BADGES.get(state or "", (state or "unknown", "#7f8c8d"))


@dataclass(frozen=True)
class Controls:
    """The run buttons for the selected run (``pause_label`` is the toggle's text)."""

    run: Button
    pause: Button
    stop: Button
    abort: Button
    resume: Button
    duplicate: Button
    rename: Button
    reconfigure: Button
    note: Button
    pause_label: str = "Pause"

    def enabled(self) -> set[str]:
        """The names of the buttons that can be clicked."""
        return {name for name in ("run", "pause", "stop", "abort", "resume", "duplicate",
                                  "rename", "reconfigure", "note") if getattr(self, name).enabled}


def _button(enabled: bool, why_not: str) -> Button:
    return Button(bool(enabled), "" if enabled else why_not)


def controls(state: str | None, *, pause_asked: bool = False,
             stop_asked: str | None = None) -> Controls:
    """Which run buttons are enabled for a run in ``state``, and the toggle's label.

    ``state`` is ``None`` when no run is selected.  Pause and Continue are one
    button: it reads *Continue* as soon as a pause is asked — before the run
    reaches the step boundary where it takes effect — so a second click never
    asks for the same thing twice.  Stop is refused once any stop is asked;
    Abort stays until an abort is asked, because Abort is what an operator
    reaches for when a Stop is not being answered.  Resume restarts a run
    whose process has ended; a paused run's process is still there and
    Continue is its resume.  Rename and Reconfigure exist only before the
    start: after it the configuration is frozen in the plan, and Duplicate is
    the way to run it again differently.
    """
    if state == "reading":  # not read yet: nothing is known to be possible
        state = None
    live = state in LIVE_STATES
    # nobody can tell whether its process is there: asking costs nothing, resuming
    # could start a second writer on the same journal
    asking = live or state == "not_responding"
    pausing = bool(pause_asked) or state == "paused"
    none = "Select a run first" if state is None else ""
    return Controls(
        run=_button(state == "created", none or "Only a run not yet started can be run"),
        pause=_button(live and not stop_asked,
                      none or ("A stop was asked" if stop_asked else "The run is not running")),
        stop=_button(asking and not stop_asked,
                     none or ("A stop was asked already" if stop_asked else "The run is not running")),
        abort=_button(asking and stop_asked != "abort",
                      none or ("An abort was asked already" if stop_asked == "abort"
                               else "The run is not running")),
        resume=_button(state in RESUMABLE_STATES and not live,
                       none or ("Continue lets a paused run go on" if state == "paused"
                                else f"A {state or 'selected'} run cannot be resumed")),
        duplicate=_button(state is not None, none),
        rename=_button(state == "created", none or "Only a run not yet started can be renamed"),
        reconfigure=_button(state == "created",
                            none or "A started run keeps its configuration: duplicate it instead"),
        note=_button(state is not None, none),
        pause_label="Continue" if pausing else "Pause",
    )


def eta_seconds(step_seconds: float | None, remaining: int, in_flight_for: float = 0.0) -> float | None:
    """Seconds until the run ends: the mean step time times the steps left,
    less what the step in flight has already spent (never below zero).

    ``None`` when no step has completed yet — an ETA guessed from no data
    reads as a promise.
    """
    if remaining <= 0:
        return 0.0
    if step_seconds is None or not math.isfinite(step_seconds) or step_seconds < 0:
        return None
    spent = max(0.0, min(in_flight_for, step_seconds))
    return max(0.0, step_seconds * remaining - spent)


def eta_text(seconds: float | None) -> str:
    """The ETA as the pane writes it (empty when there is none)."""
    return "" if seconds is None else duration(seconds, unknown="")


@dataclass(frozen=True)
class RunRow:
    """One run as the pane shows it: plain values, already decided."""

    run_id: str
    state: str
    badge: str
    colour: str
    done: int = 0
    total: int | None = None
    eta: float | None = None
    started: float | None = None
    ended: float | None = None
    failed_attempts: int = 0
    error: str = ""
    problem: str = ""
    step: str | None = None
    step_progress: Mapping[str, Any] | None = None
    pause_asked: bool = False
    stop_asked: str | None = None
    control_problem: str = ""
    journal_problem: str = ""
    progress_problem: str = ""
    reports: tuple[str, ...] = ()
    log: str = ""

    def controls(self) -> Controls:
        return controls(self.state, pause_asked=self.pause_asked, stop_asked=self.stop_asked)


def reading_row(run_id: str) -> RunRow:
    """The row of a run whose journal has not been read yet (a long history loads over a few polls)."""
    text, colour = badge("reading")
    return RunRow(run_id, "reading", text, colour)


def run_row(status: Mapping[str, Any], progress: Mapping[str, Any],
            now: float | None = None) -> RunRow:
    """The run table's row for one run, from its status and progress."""
    state = status.get("state") or "not_started"
    text, colour = badge(state)
    if state == "not_responding" and status.get("silent_s") is not None:
        text = f"{text} (silent {duration(status['silent_s'])})"
    elif state == "created" and "start_failed" in status:
        text = "never started"  # its module exited first: the problem says why
    asked = status.get("asked") or {}
    total = progress.get("total") or status.get("total") or None
    done = int(progress.get("completed") or 0)
    flight = status.get("in_flight") or {}
    eta = None
    if total and state in LIVE_STATES:
        now = time.time() if now is None else now
        in_flight_for = now - flight["started"] if (flight.get("started") and state != "paused") else 0.0
        eta = eta_seconds(progress.get("step_s"), total - done, in_flight_for)
    failure = status.get("last_failure") or {}
    step = progress.get("step")
    return RunRow(
        run_id=str(status.get("run_id", "")), state=state, badge=text, colour=colour,
        done=done, total=total, eta=eta,
        started=status.get("started_at"), ended=status.get("ended_at"),
        failed_attempts=int(status.get("failed") or 0),
        error=str(status.get("error") or failure.get("error") or ""),
        problem=str(status.get("problem") or ""),
        step=flight.get("step_id"),
        step_progress=dict(step) if isinstance(step, Mapping) else None,
        pause_asked=bool(asked.get("paused")), stop_asked=asked.get("stop") or None,
        control_problem=str(status.get("control_problem") or ""),
        journal_problem=str(status.get("journal_problem") or ""),
        progress_problem=str(progress.get("progress_problem") or ""),
        reports=tuple(str(r) for r in status.get("reports") or ()),
        log=str(status.get("log") or ""),
    )


def progress_text(run: RunRow) -> str:
    """``"12 / 40 steps · ETA 3m 10s"`` (the ETA only while it runs; the table paints the bar
    beside it, in the run's colour)."""
    if run.total:
        text = f"{run.done} / {run.total} steps"
    else:
        text = f"{run.done} steps" if run.done else ""
    eta = eta_text(run.eta)
    moving = run.state in ("running", "stopping")
    if eta and moving:
        text += f" · ETA {eta}"
    step = run.step_progress
    if moving and isinstance(step, Mapping) and step.get("total"):
        detail = f" {step.get('detail')}" if step.get("detail") else ""
        text += f" · step {step.get('done', 0)}/{step['total']}{detail}"
    return text


def clock_text(epoch: float | None, year: int | None = None) -> str:
    """A start/end time as the table shows it: the day and the minute, always — a run
    table read in the morning holds yesterday's runs beside today's.  ``01 Dec 17:12``
    within this year (``year``: the current one), ``2025-12-01 17:12`` before it; the
    seconds are in the tooltip."""
    if not epoch:
        return ""
    local = time.localtime(epoch)
    if local.tm_year == (year or time.localtime().tm_year):
        return time.strftime("%d %b %H:%M", local)
    return time.strftime("%Y-%m-%d %H:%M", local)


def _exact(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) if epoch else ""


def tooltip(run: RunRow) -> str:
    """Everything about the run that does not fit its row, one fact a line."""
    lines = [f"{run.run_id}: {run.badge}"]
    if run.started:
        lines.append(f"started {_exact(run.started)}"
                     + (f", ended {_exact(run.ended)}" if run.ended else ""))
    if run.step:
        lines.append(f"step in flight: {run.step}")
    if run.failed_attempts:
        lines.append(f"failed attempts: {run.failed_attempts}")
    if run.error:
        lines.append(f"last error: {run.error}")
    if run.problem:
        lines.append(run.problem)
    for name, text in (("control", run.control_problem), ("journal", run.journal_problem),
                       ("progress", run.progress_problem)):
        if text:
            lines.append(f"{name} file: {text}")
    lines.extend(f"report: {text}" for text in run.reports[-3:])
    return "\n".join(lines)


def rows(runs: Sequence[RunRow]) -> tuple[Row, ...]:
    """The run table's rows (newest run first, as ``runs`` come), cells as text."""
    out = []
    for run in runs:
        tip = tooltip(run)
        out.append(Row(key=run.run_id,
                       cells=(run.run_id, run.badge, progress_text(run),
                              clock_text(run.started), clock_text(run.ended)),
                       tips=(tip,) * len(COLUMNS), look=run.state,
                       sort=(None, None, run.done, run.started or 0.0, run.ended or 0.0),
                       value=run))
    return tuple(out)


def announcement(experiment: str, before: str | None, run: RunRow) -> tuple[str, bool] | None:
    """What to say when a run the pane was already showing reached an outcome or a hold:
    ``(sentence, good)``, or ``None`` when there is nothing to say."""
    if before in (None, "reading") or before == run.state or run.state not in ANNOUNCED:
        return None
    detail = f" after {run.done} of {run.total} steps" if run.total else ""
    good = run.state in ("paused", "completed", "canceled")
    return f"{experiment} run {run.run_id} {run.badge}{detail}", good


def running_line(experiment: str | None, runs: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """What the status bar says of ``experiment``'s runs (``(run id, state)`` each): those
    running, and those paused — a paused run's process is alive and holds its instruments,
    so "Nothing running" would be untrue while one waits."""
    who = f"experiment {experiment} " if experiment else "experiment "
    moving = [run_id for run_id, state in runs if state in ("running", "stopping")]
    held = [run_id for run_id, state in runs if state == "paused"]
    said = []
    if moving:
        said.append(f"{who}run {_first_few(moving)}")
    if held:
        said.append(f"{who}run{'s' if len(held) > 1 else ''} {_first_few(held)} paused")
    return tuple(said)


def _first_few(names: Sequence[str], most: int = 3) -> str:
    return ", ".join(names[:most]) + (" …" if len(names) > most else "")


def form_heading(experiment: str | None, run: RunRow | None, *, shows_run: bool,
                 has_config: bool = True, edited: bool = False) -> str:
    """What the configuration form says it holds: the selected run's own configuration, or
    the module's defaults for a new run — never left for the operator to guess.

    ``shows_run`` is whether the form was filled from ``run``; ``has_config``
    whether that run has a configuration file to fill it from; ``edited``
    whether the operator changed a field since.
    """
    changed = " (changed here since)" if edited else ""
    if shows_run and run is not None:
        if run.state == "created":
            return (f"Run {run.run_id}'s configuration{changed}: Reconfigure gives it the "
                    "form's values, Create makes a new run with them.")
        return (f"The configuration run {run.run_id} ran with{changed}. It keeps its own; "
                "Create makes a new run with the form's values.")
    who = f" of {experiment}" if experiment else ""
    note = ""
    if run is not None and not has_config:
        note = f" (run {run.run_id} has no configuration file of its own)"
    elif run is not None:
        note = f" (not run {run.run_id}'s configuration)"
    return f"A new run{who}: the module's defaults{changed}{note}."
