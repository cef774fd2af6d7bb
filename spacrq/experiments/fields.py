"""Declared configuration fields of an experiment built on spacrq's authoring base.

Each field becomes one entry of the manifest's ``schema`` in plesty-lib's
shape (``name, dtype, unit, default, value, read_only, write_only, min_value,
max_value, options, description``), so the Experiments pane renders a spacrq
module and a plesty-lib module with the same form; and the same declaration
checks a configuration before a run starts, every problem at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

__all__ = ["Field", "ConfigProblem", "resolve_config", "config_problems",
           "undeclared_settings"]

_DTYPES = ("int", "float", "str", "bool")


class ConfigProblem(ValueError):
    """A configuration the experiment cannot run with; the message lists every problem."""


@dataclass(frozen=True)
class Field:
    """One setting: its type, default, unit, bounds or options, and what it means."""

    name: str
    dtype: str = "float"
    default: Any = None
    unit: str | None = None
    min_value: float | None = None
    max_value: float | None = None
    options: Sequence[Any] | None = None
    description: str = ""
    group: str = "default"
    read_only: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"field {self.name!r}: dtype must be one of {', '.join(_DTYPES)}")

    @property
    def key(self) -> str:
        return self.name if self.group == "default" else f"{self.group}.{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "unit": self.unit, "default": self.default,
                "value": None, "read_only": self.read_only, "write_only": False,
                "min_value": self.min_value, "max_value": self.max_value,
                "options": list(self.options) if self.options is not None else None,
                "description": self.description}

    def coerce(self, value: Any) -> Any:
        """``value`` as this field's type, or raise ``ValueError`` with the reason."""
        if self.dtype == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "on",
                                                                   "false", "no", "0", "off"):
                return value.strip().lower() in ("true", "yes", "1", "on")
            raise ValueError(f"{self.key} must be true or false, not {value!r}")
        if self.dtype == "str":
            if isinstance(value, (dict, list)):
                raise ValueError(f"{self.key} must be text, not {type(value).__name__}")
            out: Any = str(value)
        elif self.dtype == "int":
            try:
                number = float(value) if not isinstance(value, bool) else None
            except (TypeError, ValueError):
                number = None
            if number is None or number != int(number):
                raise ValueError(f"{self.key} must be a whole number, not {value!r}")
            out = int(number)
        else:
            try:
                if isinstance(value, bool):
                    raise TypeError
                out = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"{self.key} must be a number, not {value!r}") from None
            if out != out or out in (float("inf"), float("-inf")):
                raise ValueError(f"{self.key} must be a finite number")
        unit = f" {self.unit}" if self.unit else ""
        if self.min_value is not None and out < self.min_value:
            raise ValueError(f"{self.key} = {out}{unit} is below its minimum {self.min_value}{unit}")
        if self.max_value is not None and out > self.max_value:
            raise ValueError(f"{self.key} = {out}{unit} is above its maximum {self.max_value}{unit}")
        if self.options is not None and out not in list(self.options):
            raise ValueError(f"{self.key} must be one of {', '.join(map(str, self.options))}, "
                             f"not {out!r}")
        return out


def resolve_config(fields: Sequence[Field], given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The full configuration: declared defaults under what ``given`` sets, checked.

    Groups nest (``{"detector": {"gain": 2}}``); ungrouped fields are at the
    top level, as in plesty-lib's configuration files.

    :raises ConfigProblem: listing every problem (unknown keys, wrong types,
        out-of-bounds values, missing values without a default).
    """
    out, unknown, wrong = _resolved(fields, given, (), need_values=True)
    problems = unknown + wrong
    if problems:
        raise ConfigProblem("; ".join(problems))
    return out


def config_problems(fields: Sequence[Field], given: Mapping[str, Any] | None, *,
                    unchecked: Sequence[str] = (), need_values: bool = True,
                    unknown: bool = True) -> list[str]:
    """Every problem :func:`resolve_config` would refuse ``given`` for, one sentence each.

    What spacrq checks before a run starts (``spacrq exp run``, the queue's
    ``experiment`` job when it is added), so the operator reads at the door
    the sentence the module would print at 3 a.m.  ``unchecked`` are keys
    (``name`` or ``group.name``) of settings the module declares with a type
    only it can check: they are known, never refused here.  ``need_values``
    off leaves a missing value to the module (a manifest's ``None`` default
    may mean "the module decides"); ``unknown`` off leaves out the settings
    no field declares (see :func:`undeclared_settings`).
    """
    _, undeclared, wrong = _resolved(fields, given, tuple(unchecked), need_values=need_values)
    return (undeclared if unknown else []) + wrong


def undeclared_settings(fields: Sequence[Field], given: Mapping[str, Any] | None, *,
                        unchecked: Sequence[str] = ()) -> list[str]:
    """A sentence for each setting of ``given`` no field declares (``x is not a setting
    of this experiment``), and for a group given as a value."""
    return _resolved(fields, given, tuple(unchecked), need_values=False)[1]


def _resolved(fields: Sequence[Field], given: Mapping[str, Any] | None, unchecked: tuple[str, ...],
              *, need_values: bool) -> tuple[dict[str, Any], list[str], list[str]]:
    """``(configuration, undeclared settings, wrong values)``."""
    given = dict(given or {})
    unknown: list[str] = []
    problems: list[str] = []
    names_in: dict[str, set[str]] = {}
    for field in fields:
        names_in.setdefault(field.group, set()).add(field.name)
    for key in unchecked:  # "name" or "group.name"
        group, _, name = key.rpartition(".")
        names_in.setdefault(group or "default", set()).add(name)
    groups = {g for g in names_in if g != "default"}
    known_top = names_in.get("default", set()) | groups
    for key in given:
        if key not in known_top:
            unknown.append(f"{key} is not a setting of this experiment")
    for group in sorted(groups):
        raw_group = given.get(group, {})
        if not isinstance(raw_group, Mapping):
            unknown.append(f"{group} must be a group of settings")
            continue
        for key in raw_group:
            if key not in names_in[group]:
                unknown.append(f"{group}.{key} is not a setting of this experiment")
    out: dict[str, Any] = {}
    for field in fields:
        if field.group == "default":
            source: Mapping[str, Any] = given
            target = out
        else:
            raw_group = given.get(field.group, {})
            source = raw_group if isinstance(raw_group, Mapping) else {}
            target = out.setdefault(field.group, {})
        value = source.get(field.name, field.default)
        if value is None:
            if need_values:
                problems.append(f"{field.key} needs a value")
            continue
        try:
            target[field.name] = field.coerce(value)
        except ValueError as exc:
            problems.append(str(exc))
    return out, unknown, problems
