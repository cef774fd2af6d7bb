"""The environment variables a module says its runs read, and which a run would lack.

A module's manifest lists the variables its runs read (``environment``: each
with a ``name``, a ``description`` and whether it is ``required``).  A
required variable that the run's environment — the bench's, then the
module's ``.env``, then the declaration's ``env`` — leaves empty is a run
that fails at its first step, or mid-plan when the step that needs it comes;
said before the start, it costs the operator one edit instead of a night.
"""
from __future__ import annotations

from typing import Any, Mapping

__all__ = ["environment_check", "missing_required", "missing_sentence"]


def _entries(manifest: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    entries = manifest.get("environment") if isinstance(manifest, Mapping) else None
    if not isinstance(entries, (list, tuple)):
        return []
    return [e for e in entries if isinstance(e, Mapping) and isinstance(e.get("name"), str)
            and e["name"]]


def environment_check(manifest: Mapping[str, Any], env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each variable the module reads: ``name``, ``description``, ``required`` and ``set``.

    ``required`` follows plesty-lib: a variable is required unless it says
    otherwise.  ``set`` is whether the run's environment ``env`` gives it a
    value (an empty value counts as unset, as it does for the module).
    """
    return [{"name": str(e["name"]), "description": str(e.get("description") or ""),
             "required": e.get("required", True) is not False,
             "set": bool(env.get(str(e["name"])))} for e in _entries(manifest)]


def missing_required(manifest: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """The required variables ``env`` leaves unset, in the manifest's order."""
    return [v["name"] for v in environment_check(manifest, env) if v["required"] and not v["set"]]


def missing_sentence(names: list[str], who: str) -> str:
    """What the operator reads when a run is refused for ``names``."""
    listed = ", ".join(names)
    them = "it" if len(names) == 1 else "them"
    return (f"{who} needs {listed} set for a run, and the run's environment leaves "
            f"{them} empty; set {them} in the experiment's declaration ('env'), in the module's "
            ".env, or in the environment spacrq runs in")
