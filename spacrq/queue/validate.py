"""Checking a queue before the night starts: every problem at once, each with its fix.

Discovering at 3 a.m. that job 9's input is misspelled wastes the night, so
everything that can be checked without running is checked when a job is
added and again before a run starts.  One rule softens this: an input that
does not exist *yet* is only a warning when an upstream job of this one
(transitively) writes the folder it lies in — a measure job chained behind
the mask job that creates its input is addable tonight, while a misspelled
path that nothing produces stays an error.  Type and name errors are never
deferred: wrong now is wrong in six hours.
"""
from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Callable
from typing import Any

from spacrq.modules import BUILTIN_MODULES, ModuleError, ModuleSpec, registry, resolve_module
from spacrq.modules.command import env_problems
from spacrq.modules.spacr import is_spacr
from spacrq.problems import ERROR, WARNING, Problem, format_problems
from spacrq.queue.model import (STATUS_PENDING, Job, Queue, QueueError, dependency_problems,
                                id_problem, refusal_of)
from spacrq.queue.settings import SettingsError, resolve_settings

__all__ = ["Modules", "resolve_job_settings", "validate_job", "validate_queue", "add_checked",
           "plan"]


class Modules:
    """Module lookups for one pass over a queue.

    The full registry (entry points, spaCR) is read at most once, and only
    when a job names a module that is not built in: scanning the installed
    packages' entry points costs more than running a no-op job.
    """

    def __init__(self, names: dict[str, str] | None = None) -> None:
        self._names = dict(names) if names is not None else None
        self._specs: dict[str, ModuleSpec | None | str] = {}

    @property
    def names(self) -> dict[str, str]:
        if self._names is None:
            self._names = dict(registry())
        return self._names

    def spec(self, name: str) -> ModuleSpec | None:
        """The spec, None when unknown.  :raises ModuleError: registered but broken."""
        if name not in self._specs:
            key = str(name).strip().lower().replace("-", "_")
            table = BUILTIN_MODULES if self._names is None and key in BUILTIN_MODULES \
                else self.names
            try:
                self._specs[name] = resolve_module(name, table)
            except ModuleError as exc:
                self._specs[name] = str(exc)
        found = self._specs[name]
        if isinstance(found, str):
            raise ModuleError(found)
        return found


def _open_keys(spec: ModuleSpec) -> bool:
    return bool(is_spacr(spec)) or not spec.defaults


def resolve_job_settings(job: Job, modules: Modules | None = None) -> dict[str, Any]:
    """The settings the job's module will receive: defaults → settings → overrides.

    :raises SettingsError: unknown module, unreadable settings, bad override.
    """
    modules = modules or Modules()
    try:
        spec = modules.spec(job.module)
    except ModuleError as exc:
        raise SettingsError(str(exc)) from None
    if spec is None:
        raise SettingsError(f"unknown module {job.module!r}; use one of "
                            f"{', '.join(sorted(modules.names))}")
    return resolve_settings(spec.name, spec.defaults, job.settings, job.override_args,
                            cwd=job.cwd or None, open_keys=_open_keys(spec))


def _within(path: str, root: str) -> bool:
    p = os.path.normpath(os.path.abspath(os.path.expanduser(path)))
    r = os.path.normpath(os.path.abspath(os.path.expanduser(root)))
    return p == r or p.startswith(r.rstrip(os.sep) + os.sep)


def _upstream_roots(job: Job, queue: Queue | None, modules: Modules) -> list[str]:
    """Folders written by the jobs this one (transitively) runs after."""
    if queue is None or not job.depends_on:
        return []
    roots: list[str] = []
    seen: set[str] = set()
    frontier = list(job.depends_on)
    while frontier:
        dep_id = frontier.pop()
        if dep_id in seen:
            continue
        seen.add(dep_id)
        dep = queue.find(dep_id)
        if dep is None:
            continue
        frontier.extend(dep.depends_on)
        try:
            spec = modules.spec(dep.module)
            if spec is not None:
                roots.extend(spec.output_folders(resolve_job_settings(dep, modules)))
        except (SettingsError, ModuleError):
            continue
    return roots


def _deferrable(problem: Problem, settings: dict, roots: list[str]) -> bool:
    if not roots or not problem.setting:
        return False
    value = settings.get(problem.setting)
    targets = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value or "")]
    missing = [t for t in targets if t and not os.path.exists(os.path.expanduser(t))]
    return bool(missing) and all(any(_within(t, r) for r in roots) for t in missing)


#: The most retries a job may have, and the longest wait before one (seconds).
MAX_RETRIES = 1000
MAX_RETRY_DELAY = 86400.0


def validate_job(job: Job, queue: Queue | None = None,
                 modules: Modules | None = None,
                 positions: dict[str, int] | None = None) -> list[Problem]:
    """Every problem with one job, as ``spacrq.run --dry-run`` plus the queue rules would find.

    Never raises.
    """
    modules = modules or Modules()
    jid = job.id or job.default_label()
    problems: list[Problem] = []
    bad_id = id_problem(job.id)
    if bad_id:  # an empty id too: ids name the job's log, and --after needs one
        problems.append(Problem(jid, ERROR, bad_id, "Give the job an id made of letters, "
                                "digits, '-' and '_' (or delete the \"id\" field to have one "
                                "made up)."))
    deps = dependency_problems(job, queue, positions)
    try:
        spec = modules.spec(job.module)
    except ModuleError as exc:
        return problems + [Problem(jid, ERROR, str(exc), "Fix the module's installation, or "
                                   "remove this job.")] + deps
    if spec is None:
        from spacrq.modules.spacr import module_names as spacr_modules
        hint = "" if spacr_modules() else (
            "; spaCR's steps (mask, measure, …) are modules once spaCR is installed in the "
            "interpreter spacrq runs in (pip install spacr)")
        return problems + [Problem(jid, ERROR, f"unknown module {job.module!r}",
                                   f"Use one of: {', '.join(sorted(modules.names))} "
                                   f"(python -m spacrq.run --list){hint}.")] + deps
    for problem in env_problems(job.env):
        problems.append(Problem(jid, ERROR, problem, "Name each variable with letters, digits "
                                "and '_' (its value after '='), e.g. --env OMP_NUM_THREADS=4."))
    if job.retries < 0:
        problems.append(Problem(jid, ERROR, f"retries {job.retries} is negative",
                                "Give how many times to run it again after a failure: 0 or more."))
    elif job.retries > MAX_RETRIES:
        problems.append(Problem(jid, ERROR, f"retries {job.retries:,} is more than "
                                f"{MAX_RETRIES:,}: a job failing that often would hold the "
                                "queue all night", f"Give {MAX_RETRIES:,} retries or fewer."))
    if job.retry_delay and job.retry_delay > MAX_RETRY_DELAY:
        problems.append(Problem(jid, ERROR, f"retry_delay {job.retry_delay:g}s is more than a "
                                "day: the queue would wait past the morning for one retry",
                                f"Give at most {MAX_RETRY_DELAY:g} seconds."))
    if job.timeout is not None and job.timeout <= 0:
        problems.append(Problem(jid, ERROR, f"timeout {job.timeout} is not a positive number "
                                "of seconds", "Give a positive timeout, or none."))
    if job.retry_delay and not job.retries:
        problems.append(Problem(jid, WARNING, f"it waits {job.retry_delay:g}s before a retry, "
                                "but it is never retried (retries is 0)",
                                "Give it retries, or leave the delay out."))
    try:
        settings = resolve_settings(spec.name, spec.defaults, job.settings, job.override_args,
                                    cwd=job.cwd or None, open_keys=_open_keys(spec))
    except SettingsError as exc:
        return problems + [Problem(jid, ERROR, str(exc), "Fix the settings file or the "
                                   "override, then validate again.")] + deps
    if job.cwd and not os.path.isdir(os.path.expanduser(job.cwd)):
        what = ("is a file, not a folder" if os.path.exists(os.path.expanduser(job.cwd))
                else "does not exist")
        problems.append(Problem(jid, ERROR, f"working folder {job.cwd} {what}",
                                "Create it, or change the job's cwd."))
    roots: list[str] | None = None
    for found in spec.check(settings):
        severity, message = found.severity, found.message
        if found.is_error:
            if roots is None:
                roots = _upstream_roots(job, queue, modules)
            if _deferrable(found, settings, roots):
                severity = WARNING
                message = (f"{message} yet (an earlier job in this queue writes there; "
                           "checked again when this job starts)")
        problems.append(dataclasses.replace(found, job_id=jid, severity=severity,
                                            message=message))
    return problems + deps


def _cycle_problems(queue: Queue) -> list[Problem]:
    """Dependency cycles (iterative depth-first search; a 2000-deep chain is fine)."""
    by_id = {job.id: job for job in queue.jobs}
    state: dict[str, int] = {}
    problems = []
    for root in queue.jobs:
        if state.get(root.id):
            continue
        stack = [(root.id, iter(root.depends_on))]
        trail = [root.id]
        state[root.id] = 1
        while stack:
            node, deps = stack[-1]
            for dep in deps:
                if dep not in by_id:
                    continue
                if state.get(dep) == 1:
                    cycle = trail[trail.index(dep):] + [dep]
                    problems.append(Problem(dep, ERROR, "dependency cycle: "
                                            + " -> ".join(cycle), "Break the cycle: a queue "
                                            "runs top to bottom and cannot satisfy it."))
                    continue
                if not state.get(dep):
                    state[dep] = 1
                    stack.append((dep, iter(by_id[dep].depends_on)))
                    trail.append(dep)
                    break
            else:
                state[node] = 2
                stack.pop()
                trail.pop()
    return problems


def add_checked(queue: Queue, job: Job, modules: Modules | None = None) -> list[Problem]:
    """Check ``job`` as :func:`validate_job` does, then add it: what ``queue add`` does.

    :returns: the warnings it was added with.
    :raises QueueError: every error found, each with its fix; nothing is added.
    """
    if not job.id:
        job.id = queue.mint_id(job.module)
    if not job.label:
        job.label = job.default_label()
    problems = validate_job(job, queue, modules)
    errors = [p for p in problems if p.is_error]
    if errors:
        raise QueueError(refusal_of(job, errors))
    queue.add(job)
    return problems


def validate_queue(queue: Queue, modules: Modules | None = None,
                   stop: Callable[[], bool] | None = None) -> list[Problem]:
    """Every job's problems and the queue's own (shared ids, cycles, empty), all at once.

    ``stop`` is asked between jobs: a window closing mid-check gets what was
    found so far at once instead of waiting for 2000 jobs.
    """
    if not queue.jobs:
        return [Problem("", WARNING, "the queue is empty, so nothing would run",
                        "Add a job (spacrq queue add FILE MODULE …) before running it.")]
    modules = modules or Modules()
    problems: list[Problem] = []
    counts: dict[str, int] = {}
    positions: dict[str, int] = {}
    for i, job in enumerate(queue.jobs):
        counts[job.id] = counts.get(job.id, 0) + 1
        positions.setdefault(job.id, i)
    for job_id, n in counts.items():
        if n > 1:
            problems.append(Problem(job_id, ERROR, f"{n} jobs share the id {job_id!r}",
                                    "Job ids must be unique: rename all but one."))
    problems.extend(_cycle_problems(queue))
    for job in queue.jobs:
        if stop is not None and stop():
            break
        problems.extend(validate_job(job, queue, modules, positions))
    return problems


def plan(queue: Queue, modules: Modules | None = None) -> str:
    """What the queue would do, in order, without doing any of it."""
    modules = modules or Modules()
    lines = [f"queue {queue.name}: {len(queue.jobs)} job(s), run one at a time, top to bottom; "
             f"on failure: {queue.on_error}"
             + (f", stop after {queue.max_consecutive_failures} failures in a row"
                if queue.max_consecutive_failures else "")]
    width = max((len(job.id) for job in queue.jobs), default=2)
    for i, job in enumerate(queue.jobs, start=1):
        after = f"  after {', '.join(job.depends_on)}" if job.depends_on else ""
        lines.append(f"{i:>4}. {job.id.ljust(width)}  {job.module}: {job.label}{after}")
        try:
            settings = resolve_job_settings(job, modules)
        except SettingsError as exc:
            lines.append(f"        settings unreadable: {exc}")
            settings = None
        if settings is not None and job.module == "command":
            argv = [str(a) for a in settings.get("argv") or []]
            lines.append("        runs " + shlex.join(argv).replace("\n", "\\n"))
        if job.override_args:
            lines.append("        --set " + " --set ".join(job.override_args))
        extras = []
        if job.timeout:
            extras.append(f"timeout {job.timeout:g}s")
        if job.retries:
            extras.append(f"up to {job.retries} retries")
        if job.status != STATUS_PENDING:
            extras.append(f"status {job.status}")
        if extras:
            lines.append("        " + ", ".join(extras))
    lines.append(format_problems(validate_queue(queue, modules), title="check"))
    return "\n".join(lines)
