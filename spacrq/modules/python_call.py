"""The ``python`` module: call ``package.module:function`` with the job's settings.

The smallest way for a scientist to queue their own code: any importable
function taking one settings dict.  The function receives the resolved
settings (``target`` included); raising fails the job.  A function that
accepts a second argument also gets the run context, whose ``ledger`` stamps
per-item successes and failures so a partial result is reported as PARTIAL.
``inputs`` and ``writes`` work as for the ``command`` module.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import os
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
    name = target.partition(":")[2].split(".")[0]
    if _defines(found.origin, name) is False:
        return [Problem("", ERROR, f"module {module!r} has no {name!r} (its source "
                        f"{found.origin} defines no such name)",
                        "Correct the function's name, or add it to the module.",
                        setting="target")]
    return path_problems(settings)


def _defines(origin: str | None, name: str) -> bool | None:
    """Whether the module source at ``origin`` defines ``name`` at its top level, read
    without importing it (importing a scientist's module at add time could do anything);
    None when its source cannot tell (compiled, unreadable, or names made at run time)."""
    if not origin or not origin.endswith(".py"):
        return None
    try:
        st = os.stat(origin)
    except OSError:
        return None
    names = _top_level_names(origin, st.st_mtime_ns, st.st_size)
    return None if names is None else name in names


@functools.lru_cache(maxsize=64)
def _top_level_names(origin: str, _mtime: int, _size: int) -> frozenset | None:
    """The names a module source binds at its top level (None: it can bind any at run time)."""
    try:
        with open(origin, "rb") as fh:
            tree = ast.parse(fh.read(), filename=origin)
    except (OSError, SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None  # whatever the other module holds
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            return None  # e.g. sys.modules[__name__].work = f: names made at run time
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("globals", "setattr", "exec"):
            return None  # names made at run time
    if "__getattr__" in names:
        return None
    return frozenset(names)


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
