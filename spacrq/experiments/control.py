"""What a run is asked to do: its ``control.json`` (plesty-lib's control document).

``{"paused": bool, "stop": "cancel" | "abort" | null, "reason": str, "reports": [str]}``
is read by the run at each step boundary (and, for ``abort``, while a step is
in flight).  spacrq writes it the way every run file is written — merged by
key and replaced atomically — so the run sees the old request or the new one,
never half of each.  A garbled file reads as "nothing asked" (with the reason
kept for the window) and is repaired by the next request.
"""
from __future__ import annotations

import os
from typing import Any

from spacrq import runfiles
from spacrq.experiments.errors import ABORT, CANCEL, CONTROL_FILE, ExperimentError

__all__ = ["ask", "asked", "clear", "pause", "proceed", "cancel", "report", "request_abort"]


def ask(run_dir: str | os.PathLike, **changes: Any) -> dict[str, Any]:
    """Amend the run's control document and return what it now asks for."""
    try:
        return runfiles.ask(run_dir, CONTROL_FILE, **changes)
    except runfiles.RunFileError as exc:
        raise ExperimentError(str(exc)) from None


def asked(run_dir: str | os.PathLike) -> dict[str, Any]:
    """What the run is currently asked for; ``{}`` when nothing (or the file is garbled)."""
    return runfiles.asked(run_dir, CONTROL_FILE)


def clear(run_dir: str | os.PathLike) -> None:
    """Remove the control file, so a resumed run is not stopped by yesterday's request."""
    runfiles.clear(run_dir, CONTROL_FILE)


def pause(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Hold before the next step; the run keeps its instruments."""
    return ask(run_dir, paused=True)


def proceed(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Let a held run go on (the window's *Continue*)."""
    return ask(run_dir, paused=False)


def cancel(run_dir: str | os.PathLike, reason: str = "") -> dict[str, Any]:
    """Finish the step in flight, then stop (the window's *Stop*)."""
    return ask(run_dir, paused=False, stop=CANCEL, reason=reason)


def request_abort(run_dir: str | os.PathLike, reason: str = "") -> dict[str, Any]:
    """Ask the run to stop without finishing the step in flight (see ``launch.abort_run``)."""
    return ask(run_dir, paused=False, stop=ABORT, reason=reason)


def report(run_dir: str | os.PathLike, text: str) -> dict[str, Any]:
    """Tell the run something worth journaling where it happened (a helium top-up)."""
    text = str(text or "").strip()
    if not text:
        raise ExperimentError("a report cannot be empty; type what happened")
    current = asked(run_dir).get("reports")
    reports = [str(r) for r in current] if isinstance(current, list) else []
    return ask(run_dir, reports=[*reports, text])
