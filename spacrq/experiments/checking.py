"""Checking a run's configuration against its module's manifest before anything runs.

A configuration the module will refuse should be refused where it is typed —
``spacrq exp run``, a queue's ``experiment`` job when it is added or
validated — not by the module at 3 a.m. after a run folder was made for it.
The check is the one the module runs itself
(:func:`~spacrq.experiments.manifest.config_problems_of`), so the operator
reads the same sentence either way.  When a module refuses at its start all
the same (a check only it can make), :func:`start_refusal` finds the reason it
printed, so what it said is carried to the operator instead of "read its log".

Asking a module for its manifest runs its interpreter, so a queue of twenty
jobs of one experiment asks once: answers (and failures to answer) are kept
:data:`REMEMBER_S` seconds per module, interpreter, folder and environment.
That is short enough that an updated module is asked again before anyone
could run it, and a module that cannot be asked costs one timeout, not twenty.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Mapping

from spacrq.experiments.declarations import ExperimentSpec
from spacrq.experiments.errors import ExperimentError
from spacrq.experiments.manifest import config_problems_of, read_manifest, spec_environment

__all__ = ["CHECK_TIMEOUT", "REMEMBER_S", "ConfigRefused", "manifest_for_check",
           "refuse_bad_config", "forget_manifests", "start_refusal"]

#: seconds a module gets to say what it takes when a job is checked (a run gets more)
CHECK_TIMEOUT = 20.0
#: seconds an answer is kept for the next check of the same module
REMEMBER_S = 30.0

_lock = threading.Lock()
_answers: dict[tuple, tuple[float, dict[str, Any] | None, str]] = {}


class ConfigRefused(ExperimentError):
    """The configuration breaks what the module declares; ``problems`` lists each sentence."""

    def __init__(self, problems: list[str], fix: str) -> None:
        super().__init__("; ".join(problems) + (f"; {fix}" if fix else ""))
        self.problems = list(problems)


def _key(spec: ExperimentSpec, env: Mapping[str, str]) -> tuple:
    return (spec.python, spec.module, spec.cwd, tuple(sorted(env.items())))


def manifest_for_check(spec: ExperimentSpec, *, timeout: float = CHECK_TIMEOUT
                       ) -> tuple[dict[str, Any] | None, str]:
    """``(manifest, "")``, or ``(None, why it could not be asked)`` — never raises.

    For headless callers and workers only: it may run the module's interpreter.
    """
    env = spec_environment(spec)
    key = _key(spec, env)
    now = time.monotonic()
    with _lock:
        kept = _answers.get(key)
        if kept is not None and now - kept[0] < REMEMBER_S:
            return (dict(kept[1]) if kept[1] is not None else None), kept[2]
    try:
        manifest, why = read_manifest(spec, env=env, timeout=timeout), ""
    except ExperimentError as exc:
        manifest, why = None, str(exc)
    with _lock:
        _answers[key] = (time.monotonic(), manifest, why)
    return (dict(manifest) if manifest is not None else None), why


def forget_manifests() -> None:
    """Ask every module again next time (after installing a new version)."""
    with _lock:
        _answers.clear()


def refuse_bad_config(manifest: Mapping[str, Any], config: Mapping[str, Any] | None,
                      fix: str) -> None:
    """Raise :class:`ConfigRefused` (every problem, then ``fix``) when the module would refuse
    ``config``."""
    problems, _doubtful = config_problems_of(manifest, config)
    if problems:
        raise ConfigRefused(problems, fix)


#: bytes read from the end of a run's log for the reason its module gave
_TAIL_BYTES = 16384


def start_refusal(log: str | os.PathLike | None) -> str:
    """The reason a module printed before it exited: the last line of its log that
    says ``error``, a traceback's last line, or else its last line ("" for none).

    Only what is shown: no decision is taken on this text (the exit code says
    whether it was the configuration, see :mod:`spacrq.modules.experiment`).
    """
    if not log:
        return ""
    try:
        with open(log, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - _TAIL_BYTES))
            data = handle.read()
    except OSError:
        return ""
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    said = next((ln for ln in reversed(lines) if ln.lower().startswith("error")), None)
    if said is None:
        said = lines[-1] if lines else ""
    for mark in ("error: ", "error:", "error "):
        if said.lower().startswith(mark):
            said = said[len(mark):].strip()
            break
    return said if len(said) <= 300 else said[:299] + "…"
