"""What an experiment's manifest declares for its configuration form, read into plain values.

The Experiments pane builds its form from these alone (:mod:`spacrq.ui.experiments_form`
holds only the widgets): each ``schema`` entry becomes a :class:`Parameter` with the
editor kind its declared type name needs, each declared command-line option an
:class:`Option`, and the environment check the sentence an operator reads.  Deciding
all of that here, without Qt, lets a plain test reach every decision.

Type names arrive as text (``"float"``, ``"int | None"``, ``"yaml"``); an optional type
(``| None``) may be left empty; anything not a single plain type is a document
(YAML or JSON).
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any, Mapping

from spacrq.runfiles import dumps

#: the group an ungrouped key belongs to (plesty-lib's name for it)
DEFAULT_GROUP = "default"
INT_LIMIT = 2**31 - 1
FLOAT_LIMIT = 1e15


class FormError(ValueError):
    """A value in the form cannot be used; the message names the field and the fix."""


@dataclass(frozen=True)
class Parameter:
    """One configuration key as the manifest declares it."""

    group: str
    name: str
    kind: str  # int | float | bool | choice | text | document
    optional: bool
    default: Any
    unit: str
    minimum: float | None
    maximum: float | None
    options: tuple
    description: str
    read_only: bool

    @property
    def key(self) -> str:
        return self.name if self.group == DEFAULT_GROUP else f"{self.group}.{self.name}"


def kind_of(dtype: Any, options: Any) -> tuple[str, bool]:
    """The editor a declared type name needs, and whether it may be left empty."""
    members = [m.strip().lower() for m in str(dtype or "Any").split("|")]
    optional = "none" in members or "nonetype" in members
    members = [m for m in members if m not in ("none", "nonetype")] or ["any"]
    if options:
        return "choice", optional
    if len(members) == 1:
        name = members[0]
        if name in ("int", "integer"):
            return "int", optional
        if name in ("float", "double", "number"):
            return "float", optional
        if name in ("bool", "boolean"):
            return "bool", optional
        if name in ("str", "string", "path"):
            return "text", optional
    return "document", optional


def finite_number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def parameters_of(manifest: Mapping[str, Any]) -> list[Parameter]:
    """Every declared parameter of a manifest document, groups in order.

    :raises FormError: when the schema is not the ``{group: [parameter]}`` shape.
    """
    schema = manifest.get("schema") or {}
    if not isinstance(schema, Mapping):
        raise FormError("the module's manifest has a schema that is not a mapping of groups; "
                        "fix the module's manifest")
    out: list[Parameter] = []
    for group, entries in schema.items():
        if not isinstance(entries, (list, tuple)):
            raise FormError(f"the manifest's group {group!r} is not a list of parameters; "
                            "fix the module's manifest")
        for entry in entries:
            if not isinstance(entry, Mapping) or not entry.get("name"):
                raise FormError(f"the manifest's group {group!r} holds a parameter without a "
                                "name; fix the module's manifest")
            options = entry.get("options")
            options = tuple(options) if isinstance(options, (list, tuple)) else ()
            kind, optional = kind_of(entry.get("dtype"), options)
            out.append(Parameter(
                group=str(group), name=str(entry["name"]), kind=kind, optional=optional,
                default=entry.get("default", entry.get("value")),
                unit=str(entry.get("unit") or ""),
                minimum=finite_number(entry.get("min_value")), maximum=finite_number(entry.get("max_value")),
                options=options, description=str(entry.get("description") or ""),
                read_only=bool(entry.get("read_only", False)),
            ))
    return out


def step_for(low: float, high: float, default: Any) -> float:
    """A spin step that moves a value by a sensible fraction of its scale."""
    span = high - low if high - low < FLOAT_LIMIT else abs(finite_number(default) or 1.0) * 10
    if span <= 0:
        return 1.0
    return float(10 ** math.floor(math.log10(span / 10))) if span >= 1e-12 else 1e-12


def document_text(value: Any) -> str:
    """A document shown for editing: JSON, which every YAML reader reads too."""
    return dumps(value, indent=2)


@dataclass(frozen=True)
class Option:
    """One extra command-line option the module declares (``--prominence``)."""

    flag: str
    kind: str  # bool | int | float | choice | text
    description: str
    sets: str
    choices: tuple


def options_of(manifest: Mapping[str, Any]) -> list[Option]:
    """The manifest's ``options``, each with the editor its declared type needs."""
    out = []
    for entry in manifest.get("options") or []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("flag"), str):
            continue
        choices = entry.get("choices")
        choices = tuple(str(c) for c in choices) if isinstance(choices, (list, tuple)) else ()
        kind, _ = kind_of(entry.get("dtype") or "str", choices)
        if kind == "document":
            kind = "text"
        out.append(Option(entry["flag"], kind, str(entry.get("description") or ""),
                          str(entry.get("sets") or ""), choices))
    return out


def environment_text(variables: list[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """The environment list as rich text, and the required variables a run would lack."""
    missing = [str(v["name"]) for v in variables if v.get("required") and not v.get("set")]
    lines = []
    for v in variables:
        name = html.escape(str(v["name"]))
        need = "required" if v.get("required") else "optional"
        state = "set" if v.get("set") else "not set"
        line = f"<b>{name}</b> — {need}, {state}"
        if v.get("description"):
            line += f": {html.escape(str(v['description']))}"
        if v.get("required") and not v.get("set"):
            line = f"<span style='color:#c0392b'>{line}</span>"
        lines.append(line)
    if missing:
        lines.append("<span style='color:#c0392b'>A run is refused until "
                     f"{html.escape(', '.join(missing))} {'is' if len(missing) == 1 else 'are'} "
                     "set: add it to the declaration's env, the module's .env, or the "
                     "environment spacrq runs in.</span>")
    return "<br>".join(lines), missing
