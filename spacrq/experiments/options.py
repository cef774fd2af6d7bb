"""The module's own command-line options and its devices, as a run is started with them.

A manifest may declare ``options`` beyond the standard command line — each a
``flag`` with a declared type (``bool`` for a switch, ``int``, ``float``,
text, or one of its ``choices``) and what it does — and say it
``chooses_devices`` (which devices of its ``setup.yaml`` a configuration
uses).  What the operator chose is checked here against the manifest before a
run is made, kept in the run's ``created.json``, and turned back into the
same arguments for every start and resume of that run.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

from spacrq.experiments.errors import ExperimentError

__all__ = ["check_options", "options_argv", "check_devices"]

#: flags spacrq itself gives every run: a module's option may not stand in for them
_STANDARD_FLAGS = ("--config", "-c", "--run-root", "--resume", "-r", "--run-id", "--dry-run",
                   "--manifest", "--devices", "-h", "--help")
_FLAG = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DEVICE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")


def _declared_options(manifest: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    entries = manifest.get("options") if isinstance(manifest, Mapping) else None
    return {str(e["flag"]): e for e in (entries or [])
            if isinstance(e, Mapping) and isinstance(e.get("flag"), str) and e["flag"]}


def _typed(flag: str, dtype: str, value: Any, choices: Any) -> Any:
    """``value`` as an option of ``dtype`` takes it, or ExperimentError naming the fix."""
    kind = (dtype or "str").split("|")[0].strip().lower()
    if kind in ("bool", "boolean"):
        if not isinstance(value, bool):
            raise ExperimentError(f"option {flag} is a switch; give true or false, not {value!r}")
        return value
    if kind in ("int", "integer"):
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ExperimentError(f"option {flag} takes a whole number, not {value!r}")
        return value
    if kind in ("float", "double", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(float(value)):
            raise ExperimentError(f"option {flag} takes a finite number, not {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise ExperimentError(f"option {flag} takes text, not {value!r}")
    if choices and value not in [str(c) for c in choices]:
        raise ExperimentError(f"option {flag} takes one of {', '.join(map(str, choices))}, "
                              f"not {value!r}")
    return value


def check_options(manifest: Mapping[str, Any], options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The options chosen for a run, checked against those the manifest declares.

    ``options`` maps each option's ``flag`` to its value, typed as the manifest
    declares it (``bool`` a switch, ``int``, ``float``, text, one of its
    ``choices`` when it lists them); ``None`` (and a switch left off) means
    "not given": the module's own default applies.

    :raises ExperimentError: for an undeclared flag or a value of the wrong type.
    """
    declared = _declared_options(manifest)
    out: dict[str, Any] = {}
    for flag, value in dict(options or {}).items():
        flag = str(flag)
        if flag not in declared:
            known = ", ".join(declared) or "none"
            raise ExperimentError(f"{flag} is not an option the module declares (it declares "
                                  f"{known}); choose the options its manifest lists")
        if flag in _STANDARD_FLAGS or not _FLAG.match(flag):
            raise ExperimentError(f"the module declares {flag} as an option, which spacrq "
                                  "cannot pass; fix the module's manifest")
        if value is None:
            continue
        entry = declared[flag]
        typed = _typed(flag, str(entry.get("dtype") or "str"), value, entry.get("choices"))
        if typed is False:
            continue
        out[flag] = typed
    return out


def options_argv(options: Any, where: Any = "") -> list[str]:
    """The arguments of a run's options: a switch alone, a value as ``--flag=value``.

    ``--flag=value`` keeps a value starting with ``-`` (a negative number) from
    reading as another flag.
    """
    if options is None:
        return []
    if not isinstance(options, Mapping):
        raise ExperimentError(f"{where} records options that are not a mapping of flag to "
                              "value; remove 'options' there or create the run again")
    argv: list[str] = []
    for flag, value in options.items():
        if not isinstance(flag, str) or not _FLAG.match(flag) or flag in _STANDARD_FLAGS:
            raise ExperimentError(f"{where} records {flag!r}, which is not an option spacrq "
                                  "passes; remove it there or create the run again")
        if value is True:
            argv.append(flag)
        elif value is None or value is False:
            continue
        elif isinstance(value, (int, float)) and math.isfinite(value):
            argv.append(f"{flag}={value!r}")
        elif isinstance(value, str) and "\0" not in value:
            argv.append(f"{flag}={value}")
        else:
            raise ExperimentError(f"{where} records {value!r} for {flag}, which is not a value "
                                  "spacrq passes; fix it there or create the run again")
    return argv


def check_devices(manifest: Mapping[str, Any] | None, devices: Any) -> list[str] | None:
    """The devices chosen for a run, as names; ``None`` when none were chosen.

    Only a module whose manifest says ``chooses_devices`` has devices to choose.
    """
    if devices is None:
        return None
    if manifest is not None and not manifest.get("chooses_devices"):
        raise ExperimentError("this module does not choose its devices (its manifest has no "
                              "'chooses_devices'); start the run without a device choice")
    if isinstance(devices, (str, bytes)) or not all(
            isinstance(d, str) and _DEVICE.match(d) for d in devices):
        raise ExperimentError(f"devices must be a list of device names from the module's "
                              f"setup.yaml, not {devices!r}")
    return list(dict.fromkeys(devices))
