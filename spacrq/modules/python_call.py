"""The ``python`` module: call ``package.module:function`` with the job's settings.

The smallest way for a scientist to queue their own code: any importable
function taking one settings dict.  The function receives the resolved
settings (``target`` included); raising fails the job.  A function that
accepts a second argument also gets the run context, whose ``ledger`` stamps
per-item successes and failures so a partial result is reported as PARTIAL.
``inputs`` and ``writes`` work as for the ``command`` module.
"""
from __future__ import annotations

import importlib.util
import inspect
import re
from typing import Any

from spacrq.modules import ModuleSpec, load_target
from spacrq.modules.command import path_problems, written_folders
from spacrq.problems import ERROR, Problem

DEFAULTS: dict[str, Any] = {"target": "", "inputs": [], "writes": []}
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def validate(settings: dict) -> list[Problem]:
    target = str(settings.get("target") or "")
    if not _TARGET.match(target):
        return [Problem("", ERROR, f"target {target!r} is not of the form package.module:function",
                        "Write it like 'mylab.steps:segment'.", setting="target")]
    module = target.partition(":")[0]
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return [Problem("", ERROR, f"module {module!r} cannot be found",
                        "Install the package that provides it into the interpreter spacrq "
                        "runs in, or correct the spelling.", setting="target")]
    return path_problems(settings)


def run(settings: dict, ctx: Any) -> Any:
    fn = load_target(str(settings["target"]))
    return fn(settings, ctx) if _takes_context(fn) else fn(settings)


def _takes_context(fn: Any) -> bool:
    """True when ``fn`` accepts a second positional argument (the run context)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


MODULE = ModuleSpec(
    name="python",
    run=run,
    defaults=DEFAULTS,
    description="Call package.module:function with the job's settings.",
    validate=validate,
    writes=written_folders,
    settings_help={
        "target": "the function to call, package.module:function",
        "inputs": "paths the function reads; checked when the job is added",
        "writes": "folders the function writes, so later jobs may read from them",
    },
)
