"""Settings layered the one way both the queue and ``spacrq.run`` read them.

defaults → settings file (CSV ``Key,Value`` as spaCR's GUI writes it, or a
JSON object) or an inline object → ``key=value`` overrides.  An override is
coerced to the type of the module's default, so ``--set n_jobs=4`` is the int
4 and ``--set save=no`` is False; an override naming a setting the module does
not have is an error naming the settings it does have, because a typo in an
override would otherwise be silently ignored all night.
"""
from __future__ import annotations

import ast
import csv
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from spacrq.runfiles import RunFileError, loads, read_regular

_CSV_COLUMNS = (("Key", "Value"), ("key", "value"), ("setting_key", "setting_value"),
                ("Setting", "Value"), ("name", "value"))
_TRUE = {"true", "t", "yes", "y", "on", "1"}
_FALSE = {"false", "f", "no", "n", "off", "0"}
_NONE = {"none", "null", ""}


class SettingsError(ValueError):
    """Settings that cannot be used; the message is one sentence with the fix."""


def parse_value(text: Any) -> Any:
    """A CSV cell or an untyped override read as what it looks like."""
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    low = stripped.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for reader in (json.loads, ast.literal_eval):
        try:
            value = reader(stripped)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            continue
        if isinstance(value, (int, float, list, dict, tuple, bool)) or value is None:
            return list(value) if isinstance(value, tuple) else value
    return text


def _resolve(path: str, cwd: str | None) -> Path:
    p = Path(os.path.expanduser(path))
    if not p.is_absolute() and cwd:
        p = Path(cwd) / p
    return p


#: Largest settings file read (a settings file is a few lines of Key,Value).
MAX_SETTINGS_BYTES = 16 << 20


def load_settings_file(path: str, cwd: str | None = None) -> dict[str, Any]:
    """Read a settings CSV (``Key,Value``) or JSON object.

    :raises SettingsError: missing, unreadable, or not settings.
    """
    target = _resolve(path, cwd)
    if target.is_dir():
        raise SettingsError(f"settings {target} is a folder; give a settings CSV or JSON file")
    try:
        text = read_regular(target, MAX_SETTINGS_BYTES).decode("utf-8-sig")
    except RunFileError as exc:  # (a pipe or a device in its place is refused, never waited on)
        raise SettingsError(str(exc)) from None
    except FileNotFoundError:
        raise SettingsError(f"settings file not found: {target}; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not a text file"
        raise SettingsError(f"settings file {target} cannot be read ({reason}); check it "
                            "is a readable CSV or JSON file") from None
    if target.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = loads(text, where=f"settings file {target}")
        except RunFileError as exc:  # the one rule: no NaN, no 1e400, no runaway nesting
            raise SettingsError(str(exc)) from None
        if not isinstance(data, dict):
            raise SettingsError(f"settings file {target} holds a {type(data).__name__}; it "
                                "must be a JSON object of setting: value")
        return data
    return _read_csv(text, target)


def _read_csv(text: str, target: Path) -> dict[str, Any]:
    reader = csv.DictReader(text.splitlines())
    names = [f for f in (reader.fieldnames or []) if f]
    pair = next(((k, v) for k, v in _CSV_COLUMNS if k in names and v in names), None)
    if pair is None:
        raise SettingsError(f"settings file {target} has columns {names or ['<none>']} but a "
                            "settings CSV needs a 'Key,Value' header; export it again or fix "
                            "the header")
    key_col, value_col = pair
    out: dict[str, Any] = {}
    for row in reader:
        key = (row.get(key_col) or "").strip()
        if key:
            out[key] = parse_value(row.get(value_col) or "")
    return out


def coerce(key: str, text: str, default: Any) -> Any:
    """``text`` as the type of ``default``.  :raises SettingsError: when it cannot be."""
    if isinstance(default, bool):
        low = text.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise SettingsError(f"setting {key!r} is true/false, and {text!r} is neither; write "
                            f"{key}=true or {key}=false")
    if isinstance(default, int):
        try:
            return int(text.strip())
        except ValueError:
            raise SettingsError(f"setting {key!r} is a whole number, and {text!r} is not one; "
                                f"write e.g. {key}={default}") from None
    if isinstance(default, float):
        try:
            return float(text.strip())
        except ValueError:
            raise SettingsError(f"setting {key!r} is a number, and {text!r} is not one; "
                                f"write e.g. {key}={default}") from None
    if isinstance(default, (list, tuple, dict)):
        value = parse_value(text)
        kind = "list" if isinstance(default, (list, tuple)) else "object"
        wanted = list if kind == "list" else dict
        if not isinstance(value, wanted):
            raise SettingsError(f"setting {key!r} is a {kind}, and {text!r} does not read as "
                                f"one; write it as JSON, e.g. {key}="
                                f"{json.dumps(list(default) if kind == 'list' else default)}")
        return value
    if isinstance(default, str):
        return text
    if text.strip().lower() in _NONE:
        return None
    return parse_value(text)


def split_override(item: str) -> tuple[str, str]:
    key, sep, value = str(item).partition("=")
    if not sep or not key.strip():
        raise SettingsError(f"override {item!r} is not key=value; write it like --set n_jobs=4")
    return key.strip(), value


def apply_overrides(settings: dict[str, Any], overrides: Iterable[str],
                    defaults: Mapping[str, Any], module: str,
                    open_keys: bool = False) -> dict[str, Any]:
    """Apply ``key=value`` overrides in place, each coerced to its default's type.

    ``open_keys`` lets a module without declared defaults take any key (its
    own program checks them).
    """
    for item in overrides:
        key, text = split_override(item)
        if key in defaults:
            settings[key] = coerce(key, text, defaults[key])
        elif open_keys or key in settings:
            settings[key] = coerce(key, text, settings.get(key))
        else:
            known = ", ".join(sorted(defaults)) or "(none)"
            raise SettingsError(f"module {module!r} has no setting {key!r}; use one of: {known}")
    return settings


def resolve_settings(module: str, defaults: Mapping[str, Any], settings: str | Mapping | None,
                     overrides: Iterable[str], cwd: str | None = None,
                     open_keys: bool = False) -> dict[str, Any]:
    """defaults → file or inline settings → overrides, as the module will receive them."""
    resolved = dict(defaults)
    if isinstance(settings, Mapping):
        resolved.update(settings)
    elif isinstance(settings, str) and settings.strip():
        resolved.update(load_settings_file(settings, cwd))
    elif settings not in (None, ""):
        raise SettingsError(f"settings must be a file path or an object, not a "
                            f"{type(settings).__name__}")
    return apply_overrides(resolved, overrides, defaults, module, open_keys)
