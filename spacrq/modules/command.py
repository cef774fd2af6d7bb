"""The ``command`` module: run any program as a queue job, never through a shell.

``argv`` is the program and its arguments as a list (``["rsync", "-a", src,
dst]``), so a file name with a space or a ``;`` is an argument, not a second
command.  ``cwd`` and ``env`` say where and with what extra environment it
runs.  ``inputs`` lists paths the program needs (checked when the job is
added; a path an upstream job writes is only a warning until it starts) and
``writes`` the folders it produces, so jobs chained behind it can name them.

The queue runner executes a ``command`` job directly (no Python wrapper, the
cheapest possible job); ``python -m spacrq.run command`` runs the same thing.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from spacrq.modules import ModuleSpec
from spacrq.problems import ERROR, Problem

DEFAULTS: dict[str, Any] = {"argv": [], "cwd": "", "env": {}, "inputs": [], "writes": []}


class CommandFailed(RuntimeError):
    """The program exited with a non-zero code."""


def _paths(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if str(v).strip()]
    return []


def path_problems(settings: dict) -> list[Problem]:
    """Each input that does not exist, as an error tagged ``inputs`` (deferrable)."""
    problems = []
    for path in _paths(settings.get("inputs")):
        if not os.path.exists(os.path.expanduser(path)):
            problems.append(Problem("", ERROR, f"input {path} does not exist",
                                    "Correct the path, or queue the job that writes it earlier "
                                    "and list it in 'after'.", setting="inputs"))
    return problems


def written_folders(settings: dict) -> list[str]:
    return _paths(settings.get("writes"))


def program_problem(argv: Any, cwd: str = "") -> str:
    """Why ``argv`` cannot be started, or ``''``."""
    if not isinstance(argv, list) or not argv or not all(isinstance(a, (str, int, float)) for a in argv):
        return "argv must be a non-empty list of arguments, e.g. [\"echo\", \"hello\"]"
    program = str(argv[0])
    if os.sep in program:
        full = program if os.path.isabs(program) or not cwd else os.path.join(cwd, program)
        if not os.access(full, os.X_OK):
            return f"program {program} does not exist or is not executable"
    elif not _on_path(program):
        return f"program {program!r} is not on PATH"
    return ""


_FOUND: dict[tuple[str, str], str] = {}


def _on_path(program: str) -> bool:
    """``shutil.which`` remembered per PATH: a 2000-job queue of one program looks it up once.

    Only programs found are remembered, so one installed after a failed
    check is found on the next.
    """
    key = (program, os.environ.get("PATH", ""))
    if key not in _FOUND:
        found = shutil.which(program)
        if found is None:
            return False
        _FOUND[key] = found
    return True


def validate(settings: dict) -> list[Problem]:
    problems = []
    bad = program_problem(settings.get("argv"), str(settings.get("cwd") or ""))
    if bad:
        problems.append(Problem("", ERROR, bad, "Set argv to the program and its arguments as "
                                "a list, with the program installed.", setting="argv"))
    cwd = settings.get("cwd")
    if cwd and not os.path.isdir(os.path.expanduser(str(cwd))):
        what = ("is a file, not a folder" if os.path.exists(os.path.expanduser(str(cwd)))
                else "does not exist")
        problems.append(Problem("", ERROR, f"working folder {cwd} {what}",
                                "Create it, or correct cwd.", setting="cwd"))
    env = settings.get("env")
    if env not in (None, "") and not isinstance(env, dict):
        problems.append(Problem("", ERROR, "env must be an object of NAME: value",
                                'Write it like {"OMP_NUM_THREADS": "4"}.', setting="env"))
    elif isinstance(env, dict):
        problems += [Problem("", ERROR, problem, "Name each variable with letters, digits and "
                             "'_', e.g. OMP_NUM_THREADS.", setting="env")
                     for problem in env_problems(env)]
    return problems + path_problems(settings)


def env_problems(env: object) -> list[str]:
    """Why variables of an environment (a job's, or a command's) could not be set: the job
    failed at its start, exit 127, for a name ``validate`` had let through."""
    out = []
    for name, value in (env.items() if isinstance(env, dict) else ()):
        name = str(name)
        if not name or "=" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
            out.append(f"the environment variable name {name!r} cannot be set (empty, or "
                       "holding '=' or a control character)")
        elif "\0" in str(value):
            out.append(f"the environment variable {name} has a NUL character in its value")
    return out


def command_env(settings: dict, base: dict | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update({str(k): str(v) for k, v in (settings.get("env") or {}).items()})
    return env


def run(settings: dict, ctx: Any) -> None:
    argv = [str(a) for a in settings["argv"]]
    code = subprocess.call(argv, cwd=settings.get("cwd") or None, env=command_env(settings))
    if code != 0:
        raise CommandFailed(f"{argv[0]} exited with code {code}")


MODULE = ModuleSpec(
    name="command",
    run=run,
    defaults=DEFAULTS,
    description="Run a program given as an argument list (never through a shell).",
    validate=validate,
    writes=written_folders,
    settings_help={
        "argv": "the program and its arguments, as a list",
        "cwd": "folder to run in (default: the job's working folder)",
        "env": "extra environment variables, NAME: value",
        "inputs": "paths the program reads; checked when the job is added",
        "writes": "folders the program writes, so later jobs may read from them",
    },
)
