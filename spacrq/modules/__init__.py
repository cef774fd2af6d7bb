"""The modules a queue job can run, and how they are found.

A module is what a scientist writes and an operator queues: a function that
takes a settings dict, plus what spacrq needs to check it *before* the night
starts — its defaults, a validator, the folders it writes (so a job chained
behind it may point at data that does not exist yet) and whether a rerun
picks up where an interrupted one stopped.

Modules come from spacrq's built-ins and from the entry point group
``spacrq.modules`` (each entry point names a :class:`ModuleSpec`), and, when
spaCR is installed, from spaCR's own registry.  Loading is lazy: listing
modules never imports a heavy pipeline.  Both listing (entry points, spaCR)
and describing a module (importing it) touch the disk, so a window asks its
watch to do them, never a slot.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable, Iterable, Mapping, Protocol

from spacrq.problems import Problem

__all__ = ["ModuleSpec", "ModuleInfo", "RunContext", "ModuleError", "BUILTIN_MODULES",
           "ENTRY_POINT_GROUP", "registry", "resolve_module", "describe_module", "load_target"]

ENTRY_POINT_GROUP = "spacrq.modules"

#: name -> "package.module:ATTRIBUTE" holding a :class:`ModuleSpec`.
BUILTIN_MODULES: dict[str, str] = {
    "command": "spacrq.modules.command:MODULE",
    "python": "spacrq.modules.python_call:MODULE",
    "blockwise": "spacrq.modules.blockwise:MODULE",
    "experiment": "spacrq.modules.experiment:MODULE",
}


class ModuleError(RuntimeError):
    """A module could not be found or loaded; the message names the fix."""


class RunContext(Protocol):
    """What a running module is handed besides its settings.

    ``ledger`` records per-item successes and failures so the queue can tell a
    complete result from a partial one; ``stop_requested()`` is True once the
    operator asked the job to stop at its next safe boundary; ``log`` writes a
    line to the job's own log; ``workdir`` is where relative paths resolve.
    """

    ledger: Any
    workdir: str

    def stop_requested(self) -> bool: ...

    def log(self, message: str) -> None: ...


@dataclass(frozen=True)
class ModuleSpec:
    """A runnable module.

    :param name: the key a job names it by.
    :param run: ``run(settings, context)``; raising means the job failed (exit 1).
    :param defaults: settings a job gets when it does not say.
    :param description: one line for ``--list`` and the job editor.
    :param validate: ``validate(settings) -> [Problem]``; every check that needs
        no running, made when a job is added.
    :param writes: ``writes(settings) -> [folder]``: where this job's output
        lands, so a downstream job's "not there yet" input is a warning.
    :param resumable: a rerun after an interruption continues instead of
        starting over (set ``resume=True`` on a rerun when the module has
        such a setting).
    :param settings_help: setting name -> one line, for ``--describe``.
    """

    name: str
    run: Callable[[dict, RunContext], Any]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    validate: Callable[[dict], list[Problem]] | None = None
    writes: Callable[[dict], list[str]] | None = None
    resumable: bool = False
    settings_help: Mapping[str, str] = field(default_factory=dict)

    def check(self, settings: dict) -> list[Problem]:
        """Run the validator, turning a crash of the validator into a problem."""
        if self.validate is None:
            return []
        try:
            return list(self.validate(dict(settings)))
        except Exception as exc:  # a broken validator must not hide the queue
            return [Problem("", "error", f"the {self.name} module's settings check failed: {exc}",
                            f"Fix the settings, or report the bug in module {self.name!r}.")]

    def output_folders(self, settings: dict) -> list[str]:
        if self.writes is None:
            return []
        try:
            return [str(p) for p in self.writes(dict(settings)) if p]
        except Exception:
            return []


def load_target(target: str) -> Any:
    """Import ``package.module:attribute`` (attribute may be dotted)."""
    if ":" not in target:
        raise ModuleError(f"{target!r} is not of the form package.module:name; "
                          "write it like 'mylab.steps:segment'")
    mod_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ModuleError(f"cannot import {mod_name!r} ({exc}); install the package that "
                          "provides it into the interpreter spacrq runs in") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ModuleError(f"{mod_name!r} has no {attr!r}; check the spelling of "
                              f"{target!r}") from None
    return obj


@functools.lru_cache(maxsize=1)
def _entry_points() -> dict[str, str]:
    """Installed ``spacrq.modules`` entry points, scanned once per process
    (``_entry_points.cache_clear()`` rescans after an install)."""
    found: dict[str, str] = {}
    try:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            found[ep.name] = ep.value
    except Exception:
        pass
    return found


def registry() -> dict[str, str]:
    """Every module name a job may use -> where its spec lives (not imported)."""
    names = dict(BUILTIN_MODULES)
    for name, target in _entry_points().items():
        names.setdefault(name, target)
    try:  # spaCR's own modules, when spaCR is installed (see spacrq.modules.spacr)
        from spacrq.modules import spacr as _spacr
        for name in _spacr.module_names():
            names.setdefault(name, f"spacrq.modules.spacr:spec_for:{name}")
    except Exception:
        pass
    return names


def _normalise(name: str) -> str:
    return str(name).strip().lower().replace("-", "_")


def resolve_module(name: str, names: Mapping[str, str] | None = None) -> ModuleSpec | None:
    """The :class:`ModuleSpec` called ``name``, or None when there is none.

    :raises ModuleError: when the module is registered but cannot be loaded.
    """
    names = dict(registry() if names is None else names)
    key = _normalise(name)
    table = {_normalise(k): v for k, v in names.items()}
    target = table.get(key)
    if target is None:
        return None
    if target.count(":") == 2:  # factory:argument, used for spaCR's modules
        factory_target, _, arg = target.rpartition(":")
        spec = load_target(factory_target)(arg)
    else:
        spec = load_target(target)
    if not isinstance(spec, ModuleSpec):
        raise ModuleError(f"{target} is a {type(spec).__name__}, not a spacrq ModuleSpec; "
                          "point the entry point at a ModuleSpec object")
    return spec


@dataclass(frozen=True)
class ModuleInfo:
    """What the job editor shows about a module: a line saying what it does, its settings."""

    name: str
    description: str
    keys: tuple[str, ...]
    settings_help: tuple[tuple[str, str], ...] = ()

    @property
    def about(self) -> str:
        return f"{self.description or self.name} — settings: {', '.join(self.keys) or 'none'}"


def describe_module(name: str, names: Mapping[str, str] | None = None) -> ModuleInfo | None:
    """The :class:`ModuleInfo` of ``name`` (imports the module), None when there is none.

    :raises ModuleError: when the module is registered but cannot be loaded.
    """
    spec = resolve_module(name, names)
    if spec is None:
        return None
    return ModuleInfo(spec.name, spec.description, tuple(sorted(spec.defaults)),
                      tuple(sorted((str(k), str(v)) for k, v in spec.settings_help.items())))


def module_names(names: Iterable[str] | None = None) -> list[str]:
    return sorted(registry() if names is None else names)
