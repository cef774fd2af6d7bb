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

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Mapping

from spacrq.experiments.declarations import ExperimentSpec
from spacrq.experiments.errors import MANIFEST_TIMEOUT, ExperimentError

__all__ = ["read_manifest", "read_devices", "run_environment", "spec_environment", "read_dotenv",
           "ask_module",
           "fields_of", "manifest_defaults", "plan_digest"]


def ask_module(spec: ExperimentSpec, args: list[str], cwd: str | os.PathLike,
               env: Mapping[str, str] | None, timeout: float) -> subprocess.CompletedProcess:
    """Run a question the module answers without connecting to anything.

    :raises ExperimentError: when it cannot be run or does not answer in time.
    """
    python = str(spec.python)
    argv = [python, "-m", spec.module, *args]
    if cwd and not Path(cwd).is_dir():
        raise ExperimentError(f"the working folder {cwd} of experiment {spec.name!r} does not "
                              "exist; create it or fix 'cwd' in its declaration")
    try:
        return subprocess.run(argv, cwd=str(cwd) if cwd else None, env=dict(env) if env else None,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ExperimentError(
            f"{spec.module} did not answer '{' '.join(args)}' within {timeout:g} s; check that "
            "importing it connects to nothing (or raise the timeout)") from None
    except FileNotFoundError:
        raise ExperimentError(f"the interpreter {python} of experiment {spec.name!r} does not "
                              "exist; fix 'python' in its declaration") from None
    except OSError as exc:
        raise ExperimentError(f"could not run {python} -m {spec.module}: {exc.strerror or exc}; "
                              "check the declaration's 'python' and 'cwd'") from None


def _last_words(text: str, limit: int = 200) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    said = lines[-1] if lines else "nothing"
    return said if len(said) <= limit else said[: limit - 1] + "…"


def _json_document(stdout: str) -> Any:
    """The JSON document in ``stdout``, tolerating log lines printed before it."""
    text = (stdout or "").strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    start = text.find("{")
    while start >= 0:
        try:
            return json.loads(text[start:])
        except json.JSONDecodeError:
            start = text.find("\n{", start + 1)
            start = start + 1 if start >= 0 else -1
    raise ValueError("no JSON object")


def _checked_manifest(doc: Any, spec: ExperimentSpec) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ExperimentError(f"{spec.module} --manifest printed a {type(doc).__name__}, not a "
                              "manifest object; it must print the module's declaration as JSON")
    schema = doc.get("schema", {}) or {}
    if not isinstance(schema, dict) or not all(isinstance(v, list) for v in schema.values()):
        raise ExperimentError(f"{spec.module} --manifest printed a 'schema' that is not groups of "
                              "field lists; fix the module's manifest")
    for group, fields in schema.items():
        for entry in fields:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise ExperimentError(f"{spec.module} --manifest declares a field without a name "
                                      f"in group {group!r}; fix the module's manifest")
    doc.setdefault("module", spec.module)
    doc.setdefault("title", spec.name)
    doc["schema"] = schema
    doc.setdefault("environment", [])
    doc.setdefault("options", [])
    return doc


def read_manifest(spec: ExperimentSpec, python: str | os.PathLike | None = None,
                  cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
                  timeout: float = MANIFEST_TIMEOUT) -> dict[str, Any]:
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
    done = ask_module(spec, ["--manifest"], cwd if cwd is not None else spec.cwd, env, timeout)
    if done.returncode != 0:
        raise ExperimentError(f"{spec.module} --manifest exited with code {done.returncode} "
                              f"saying: {_last_words(done.stderr or done.stdout)}; fix the module "
                              "or its environment")
    try:
        doc = _json_document(done.stdout)
    except ValueError:
        raise ExperimentError(f"{spec.module} --manifest printed no manifest (it said: "
                              f"{_last_words(done.stdout)}); is {spec.module!r} an experiment "
                              "module?") from None
    return _checked_manifest(doc, spec)


def read_devices(spec: ExperimentSpec, python: str | os.PathLike | None, cwd: str | os.PathLike | None,
                 config: str, env: Mapping[str, str] | None = None,
                 timeout: float = MANIFEST_TIMEOUT) -> list[str] | None:
    """Which devices of the module's ``setup.yaml`` a run of ``config`` uses (``None``: all).

    Only for a module whose manifest says ``chooses_devices``.
    """
    if python is not None:
        spec = ExperimentSpec(spec.name, spec.module, str(python), spec.cwd, spec.env, spec.run_root)
    env = spec_environment(spec) if env is None else env
    done = ask_module(spec, ["--devices", "--config", str(config)],
                      cwd if cwd is not None else spec.cwd, env, timeout)
    if done.returncode != 0:
        raise ExperimentError(f"{spec.module} --devices exited with code {done.returncode} saying: "
                              f"{_last_words(done.stderr or done.stdout)}")
    try:
        doc = _json_document(done.stdout)
    except ValueError:
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
