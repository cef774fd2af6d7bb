"""Asking an experiment module what it takes, and building the environment it runs in.

``python -m MODULE --manifest`` runs in the module's own interpreter and
prints what it declares: its title, its configuration schema (groups of
fields with types, units, bounds, options), the environment it reads.  The
answer is asked fresh each time rather than cached, so an updated module
never leaves a stale copy of its own contract behind.

The question is an argument list, never a shell line, and it has a deadline:
a module that hangs on import (a driver waiting for hardware) must not hang
the window's worker, and a module that prints a warning before its JSON, or
exits non-zero, is reported in one sentence with what it said.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping

from spacrq.experiments.declarations import ExperimentSpec
from spacrq.experiments.errors import MANIFEST_TIMEOUT, ExperimentError
from spacrq.experiments.fields import Field, config_problems, undeclared_settings
from spacrq.runfiles import RunFileError, loads

__all__ = ["read_manifest", "read_devices", "run_environment", "spec_environment", "read_dotenv",
           "ask_module", "ModuleTimedOut", "ModuleNotRun",
           "fields_of", "manifest_defaults", "plan_digest", "check_setting",
           "config_problems_of"]


class ModuleTimedOut(ExperimentError):
    """The module did not answer its question within the timeout (it was stopped)."""


class ModuleNotRun(ExperimentError):
    """The module could not be started at all (no interpreter, no working folder)."""


def ask_module(spec: ExperimentSpec, args: list[str], cwd: str | os.PathLike,
               env: Mapping[str, str] | None, timeout: float, *,
               on_start: Callable[[subprocess.Popen], Any] | None = None
               ) -> subprocess.CompletedProcess:
    """Run a question the module answers without connecting to anything.

    ``on_start`` is handed the child process as soon as it runs, so a caller
    that must let go early (a window closing) can kill it.

    :raises ModuleTimedOut: when it does not answer in time (it is killed).
    :raises ModuleNotRun: when it cannot be run.
    """
    python = str(spec.python)
    argv = [python, "-m", spec.module, *args]
    if cwd and not Path(cwd).is_dir():
        raise ModuleNotRun(f"the working folder {cwd} of experiment {spec.name!r} does not "
                           "exist; create it or fix 'cwd' in its declaration")
    try:
        child = subprocess.Popen(argv, cwd=str(cwd) if cwd else None,
                                 env=dict(env) if env else None, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise ModuleNotRun(f"the interpreter {python} of experiment {spec.name!r} does not "
                           "exist; fix 'python' in its declaration") from None
    except OSError as exc:
        raise ModuleNotRun(f"could not run {python} -m {spec.module}: {exc.strerror or exc}; "
                           "check the declaration's 'python' and 'cwd'") from None
    with child:
        if on_start is not None:
            on_start(child)
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise ModuleTimedOut(
                f"{spec.module} did not answer '{' '.join(args)}' within {timeout:g} s; check "
                "that importing it connects to nothing (or raise the timeout)") from None
    done = subprocess.CompletedProcess(argv, child.returncode, out, err)
    # the bytes as printed, for the strict reader; text (bytes that are not
    # UTF-8 shown as marks) for what is quoted back to the operator
    done.raw_stdout = out
    done.stdout = out.decode("utf-8", errors="replace")
    done.stderr = err.decode("utf-8", errors="replace")
    return done


def _last_words(text: str, limit: int = 200) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    said = lines[-1] if lines else "nothing"
    return said if len(said) <= limit else said[: limit - 1] + "…"


def _json_document(stdout: bytes | str, where: str) -> Any:
    """The JSON document in ``stdout``, tolerating log lines printed before it.

    Read by the run-file protocol's strict reader (:func:`spacrq.runfiles.loads`):
    bytes that are not UTF-8, ``NaN``, ``1e400`` and absurd nesting are refused
    like in any file spacrq reads.

    :raises RunFileError: when no line starts a document the strict reader accepts.
    """
    raw = stdout.encode("utf-8") if isinstance(stdout, str) else bytes(stdout)
    raw = raw.strip()
    try:
        return loads(raw, where=where)
    except RunFileError as exc:
        first = exc
    start = raw.find(b"\n{")
    while start >= 0:
        try:
            return loads(raw[start + 1:], where=where)
        except RunFileError:
            start = raw.find(b"\n{", start + 1)
    raise first


def _refuse(spec: ExperimentSpec, reason: str) -> ExperimentError:
    return ExperimentError(f"{spec.module} --manifest printed a manifest plesty-lib refuses: "
                           f"{reason}; fix the module's manifest")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _field_problem(group: str, entry: Any, seen: set[str]) -> str | None:
    """Why one field declaration is not one plesty-lib's ``Manifest`` would rebuild, or None."""
    if not isinstance(entry, dict):
        return f"schema group {group!r}: a parameter must be a mapping"
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        return f"schema group {group!r}: a parameter has no 'name'"
    if name in seen:
        return f"{group}.{name} is declared twice"
    seen.add(name)
    for key in ("dtype", "unit", "description"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            return f"{group}.{name} has a {key!r} that is not text"
    for key in ("min_value", "max_value"):
        if entry.get(key) is not None and not _is_number(entry[key]):
            return f"{group}.{name} has a {key!r} that is not a number"
    low, high = entry.get("min_value"), entry.get("max_value")
    if _is_number(low) and _is_number(high) and low > high:
        return f"{group}.{name} has a min_value above its max_value"
    if entry.get("options") is not None and not isinstance(entry["options"], list):
        return f"{group}.{name} has 'options' that are not a list"
    for key in ("read_only", "write_only"):
        if entry.get(key) is not None and not isinstance(entry[key], bool):
            return f"{group}.{name} has a {key!r} that is not true or false"
    return None


def _schema_of(doc: dict[str, Any], spec: ExperimentSpec) -> dict[str, list[dict[str, Any]]]:
    """The manifest's fields as ``{group: [field, ...]}``, checked as plesty-lib checks them.

    ``schema`` is plesty-lib's spelling; ``fields`` (a list of declarations, or
    groups of them) is accepted too, never a number or text in its place.
    """
    groups: dict[str, Any] = {}
    schema = doc.get("schema")
    if schema is not None:
        if not isinstance(schema, dict):
            raise _refuse(spec, "'schema' must be a mapping of group to parameters")
        groups.update(schema)
    fields = doc.get("fields")
    if fields is not None:
        if isinstance(fields, list):
            fields = {"default": fields}
        if not isinstance(fields, dict):
            raise _refuse(spec, "'fields' must be a list of field declarations, or a mapping "
                                "of group to such lists")
        for group, entries in fields.items():
            if group in groups:
                raise _refuse(spec, f"group {group!r} is declared in both 'schema' and 'fields'")
            groups[group] = entries
    out: dict[str, list[dict[str, Any]]] = {}
    for group, entries in groups.items():
        if not isinstance(entries, list):
            raise _refuse(spec, f"schema group {group!r} must be a list of parameters")
        seen: set[str] = set()
        for entry in entries:
            problem = _field_problem(str(group), entry, seen)
            if problem:
                raise _refuse(spec, problem)
        out[str(group)] = [dict(e) for e in entries]
    return out


def _checked_manifest(doc: Any, spec: ExperimentSpec) -> dict[str, Any]:
    """The manifest, refused as strictly as plesty-lib's ``Manifest.from_dict`` refuses it.

    The module must name itself (plesty-lib: "a manifest needs the module it
    runs"); the fields must be groups of declarations with a name each, no
    name twice in a group, and every attribute of the type it has there;
    environment entries need a ``name`` and options a ``flag``.
    """
    if not isinstance(doc, dict):
        raise ExperimentError(f"{spec.module} --manifest printed {_kind(doc)}, not a manifest "
                              "object; it must print the module's declaration as JSON")
    module = doc.get("module")
    if not isinstance(module, str) or not module.strip():
        raise _refuse(spec, "a manifest needs the module it runs ('module' is missing)")
    if doc.get("title") is not None and not isinstance(doc["title"], str):
        raise _refuse(spec, "'title' must be text")
    schema = _schema_of(doc, spec)
    for key, need in (("environment", "name"), ("options", "flag")):
        entries = doc.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise _refuse(spec, f"{key!r} must be a list")
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get(need), str) \
                    or not entry[need]:
                what = "environment entry" if key == "environment" else "option entry"
                raise _refuse(spec, f"{what} has no {need!r}")
    doc.pop("fields", None)
    doc["schema"] = schema
    if not doc.get("title"):
        doc["title"] = spec.name
    doc["environment"] = doc.get("environment") or []
    doc["options"] = doc.get("options") or []
    return doc


def _kind(doc: Any) -> str:
    return {list: "a list", str: "text", bool: "true or false", int: "a number",
            float: "a number", type(None): "null"}.get(type(doc), type(doc).__name__)


def read_manifest(spec: ExperimentSpec, python: str | os.PathLike | None = None,
                  cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
                  timeout: float = MANIFEST_TIMEOUT, *,
                  on_start: Callable[[subprocess.Popen], Any] | None = None) -> dict[str, Any]:
    """Ask the module what it takes and return its manifest (plesty-lib's document shape).

    Without ``env`` the module gets the environment its runs get
    (:func:`spec_environment`), so a module reading its own package data or
    ``.env`` answers as it will run.

    :raises ExperimentError: when the command fails, times out, or prints
        something that is not a manifest.
    """
    if python is not None:
        spec = ExperimentSpec(spec.name, spec.module, str(python), spec.cwd, spec.env, spec.run_root)
    env = spec_environment(spec) if env is None else env
    done = ask_module(spec, ["--manifest"], cwd if cwd is not None else spec.cwd, env, timeout,
                      on_start=on_start)
    if done.returncode != 0:
        raise ExperimentError(f"{spec.module} --manifest exited with code {done.returncode} "
                              f"saying: {_last_words(done.stderr or done.stdout)}; fix the module "
                              "or its environment")
    where = f"the output of {spec.module} --manifest"
    try:
        doc = _json_document(getattr(done, "raw_stdout", done.stdout), where)
    except RunFileError as exc:
        raise ExperimentError(f"{spec.module} --manifest printed no manifest spacrq can read "
                              f"({exc}; it said: {_last_words(done.stdout)}); is "
                              f"{spec.module!r} an experiment module?") from None
    return _checked_manifest(doc, spec)


def read_devices(spec: ExperimentSpec, python: str | os.PathLike | None, cwd: str | os.PathLike | None,
                 config: str, env: Mapping[str, str] | None = None,
                 timeout: float = MANIFEST_TIMEOUT, *,
                 on_start: Callable[[subprocess.Popen], Any] | None = None) -> list[str] | None:
    """Which devices of the module's ``setup.yaml`` a run of ``config`` uses (``None``: all).

    Only for a module whose manifest says ``chooses_devices``.  ``on_start`` is
    handed the child as it runs (so a closing window can kill it).
    """
    if python is not None:
        spec = ExperimentSpec(spec.name, spec.module, str(python), spec.cwd, spec.env, spec.run_root)
    env = spec_environment(spec) if env is None else env
    done = ask_module(spec, ["--devices", "--config", str(config)],
                      cwd if cwd is not None else spec.cwd, env, timeout, on_start=on_start)
    if done.returncode != 0:
        raise ExperimentError(f"{spec.module} --devices exited with code {done.returncode} saying: "
                              f"{_last_words(done.stderr or done.stdout)}")
    try:
        doc = _json_document(getattr(done, "raw_stdout", done.stdout),
                             f"the output of {spec.module} --devices")
    except RunFileError:
        doc = None
    if not isinstance(doc, dict) or "devices" not in doc:
        raise ExperimentError(f"{spec.module} --devices printed no device list; it must print "
                              '{"devices": [...]} or {"devices": null}')
    devices = doc["devices"]
    if devices is None:
        return None
    if not isinstance(devices, list):
        raise ExperimentError(f"{spec.module} --devices printed {devices!r}, not a list of names")
    return [str(d) for d in devices]


_PLAN_DIGEST = re.compile(r"content hash ([0-9a-f]{8,64})")


def plan_digest(spec: ExperimentSpec, config_file: str | os.PathLike | None,
                env: Mapping[str, str] | None = None,
                timeout: float = MANIFEST_TIMEOUT) -> str | None:
    """The content hash (prefix) of the plan the module would build now, via ``--dry-run``.

    ``None`` when the module does not say (a module that prints its plan
    differently): the module's own check on ``--resume`` still applies.
    """
    args = ["--dry-run"] + (["--config", str(config_file)] if config_file else [])
    done = ask_module(spec, args, spec.cwd, env, timeout)
    if done.returncode != 0:
        raise ExperimentError(f"{spec.module} --dry-run exited with code {done.returncode} saying: "
                              f"{_last_words(done.stderr or done.stdout)}; fix the module or the "
                              "run's configuration")
    found = _PLAN_DIGEST.search(done.stdout or "")
    return found.group(1) if found else None


def read_dotenv(path: str | os.PathLike) -> dict[str, str]:
    """``KEY=value`` lines of a ``.env`` file (comments, blanks and ``export`` allowed)."""
    out: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return out
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export "):
            line = line[len("export "):].strip()
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if key:
            out[key] = value
    return out


def run_environment(spec: ExperimentSpec, base: Mapping[str, str],
                    dotenv: Mapping[str, str]) -> dict[str, str]:
    """The environment a run gets: the bench's, then the module's ``.env``, then the declaration's.

    The declaration comes last so it is what an operator edits to point one
    experiment elsewhere; the ``.env`` stays the module's own deployment file.
    """
    env = {str(k): str(v) for k, v in base.items()}
    env.update({str(k): str(v) for k, v in dotenv.items()})
    env.update({str(k): str(v) for k, v in (spec.env or {}).items()})
    return env


def spec_environment(spec: ExperimentSpec, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """:func:`run_environment` of ``spec`` over ``base`` (this process's environment by
    default) and the ``.env`` in its checkout."""
    dotenv = read_dotenv(Path(spec.cwd) / ".env") if spec.cwd else {}
    return run_environment(spec, os.environ if base is None else base, dotenv)


def fields_of(manifest: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every declared field as ``(key, field)``: ``group.name``, or ``name`` in ``default``."""
    out = []
    for group, fields in (manifest.get("schema") or {}).items():
        for entry in fields:
            key = entry["name"] if group == "default" else f"{group}.{entry['name']}"
            out.append((key, dict(entry)))
    return out


def manifest_defaults(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The declared defaults shaped like a configuration file (groups nest)."""
    config: dict[str, Any] = {}
    for group, fields in (manifest.get("schema") or {}).items():
        values = {f["name"]: f.get("default") for f in fields if f.get("default") is not None}
        if not values:
            continue
        if group == "default":
            config.update(values)
        else:
            config.setdefault(group, {}).update(values)
    return config


#: the field types spacrq checks itself; a field of another type (``yaml``, a union) is the
#: module's to check
_PLAIN_DTYPES = ("int", "float", "str", "bool")


def _field_of(key: str, entry: Mapping[str, Any]) -> Field | None:
    """The :class:`Field` spacrq checks ``key`` with, or None when its type is the module's."""
    if entry.get("dtype") not in _PLAIN_DTYPES:
        return None
    group, _, name = key.rpartition(".")
    try:
        return Field(name, entry["dtype"], default=entry.get("default"), unit=entry.get("unit"),
                     min_value=entry.get("min_value"), max_value=entry.get("max_value"),
                     options=entry.get("options"), group=group or "default")
    except (TypeError, ValueError):
        return None


def config_problems_of(manifest: Mapping[str, Any], config: Mapping[str, Any] | None
                       ) -> tuple[list[str], list[str]]:
    """``(refused, doubtful)``: what the module would refuse in ``config``, and what it
    may not read, one sentence each.

    The fields' checks are :func:`spacrq.experiments.fields.config_problems`,
    the ones a module built on spacrq's authoring base runs when it starts, so
    the sentence is the one it would print.  A value its field's type, bounds
    or options refuse is refused, as ``--set`` and the form refuse it.  A
    setting no field declares is refused for a module of spacrq's authoring
    base (it refuses one itself) and only doubtful for another (a plesty-lib
    configuration file may carry sections of its own).  A missing value is
    left to the module (a manifest's empty default may mean "the module decides").
    """
    fields, unchecked = [], []
    for key, entry in fields_of(manifest):
        field = _field_of(key, entry)
        if field is None:
            unchecked.append(key)
        else:
            fields.append(field)
    wrong = config_problems(fields, config, unchecked=unchecked, need_values=False, unknown=False)
    undeclared = undeclared_settings(fields, config, unchecked=unchecked)
    if manifest.get("authoring") == "spacrq":
        return undeclared + wrong, []
    return wrong, undeclared


def check_setting(manifest: Mapping[str, Any], key: str, value: Any, who: str = "") -> None:
    """Refuse a ``--set KEY=VALUE`` the manifest does not declare, or a value its field refuses.

    Always checked: a module that declares no fields takes no settings, so
    nothing passes unchecked.  The value is checked for the plain types
    (``int``, ``float``, ``str``, ``bool``, with bounds and options); a field of
    another type (``yaml``, a union) is the module's to check.

    :raises ExperimentError: one sentence naming the setting and the fix.
    """
    who = who or str(manifest.get("title") or manifest.get("module") or "this experiment")
    declared = dict(fields_of(manifest))
    if key not in declared:
        if not declared:
            raise ExperimentError(f"{who} declares no settings, so {key!r} cannot be set; "
                                  "remove --set")
        raise ExperimentError(f"{key!r} is not a setting of {who}; it takes "
                              f"{', '.join(sorted(declared))}")
    field = _field_of(key, declared[key])
    if field is None:
        return
    try:
        field.coerce(value)
    except ValueError as exc:
        raise ExperimentError(f"{exc}; fix --set {key}") from None
