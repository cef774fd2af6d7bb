"""Run directories: naming, finding, creating and configuring them before they start.

A run is a directory under its experiment's run root, named by its run id.
spacrq can *create* a run before starting it — name it and give it its own
configuration (``config.yaml``) and a ``created.json`` saying where that came
from — so an operator can prepare tomorrow's runs tonight.  Until its plan
exists the run may be renamed or reconfigured; once the module has frozen the
configuration into ``plan.json`` it may not (a resume checks the plan against
that configuration), and the answer is to duplicate the run instead.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from spacrq.experiments.errors import (CREATED_FILE, JOURNAL_FILE, PLAN_FILE, RUN_CONFIG_FILE,
                                       RUN_LOGS_DIR, RUN_REPORT_FILE, ExperimentError)
from spacrq.runfiles import RunFileError, read_json, write_json, write_text

__all__ = ["check_run_id", "new_run_id", "runs_of", "created_of", "create_run", "has_started",
           "rename_run", "reconfigure_run", "duplicate_run", "report_of", "keep_log", "kept_log",
           "latest", "find_run", "config_text_of", "run_config_of", "run_dir_of"]

_ALLOWED_PUNCT = "._-"


def check_run_id(text: str) -> str:
    """``text``, trimmed, if it is usable as one directory name; else raise.

    spacrq's own check, not the module library's: the rule is about what a
    directory name may be and must hold whatever library wrote the module.
    Letters, digits, ``.``, ``-`` and ``_`` are what every filesystem agrees on.
    """
    name = str(text if text is not None else "").strip()
    if not name:
        raise ExperimentError("a run id cannot be empty; type a name such as 'scan_20260101-0900'")
    if name in (".", "..") or any(sep in name for sep in ("/", "\\", os.sep)) or ".." in name:
        raise ExperimentError(f"a run id is one folder name, not a path: {text!r}; "
                              "remove '/', '\\' and '..'")
    bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in _ALLOWED_PUNCT))})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise ExperimentError(f"a run id may hold letters, digits, '.', '-' and '_'; {text!r} "
                              f"has {shown}; replace them")
    if len(name) > 128:
        raise ExperimentError(f"a run id of {len(name)} characters is too long; keep it under 128")
    return name


def new_run_id(name: str, when: datetime | None = None) -> str:
    """``<experiment>_<YYYYmmdd-HHMMSS>``, the id plesty-lib gives a run it names itself."""
    return f"{name}_{(when or datetime.now()).strftime('%Y%m%d-%H%M%S')}"


def run_dir_of(run_root: str | os.PathLike, run_id: str) -> Path:
    """The directory of ``run_id`` under ``run_root``; the id is checked first."""
    return Path(run_root) / check_run_id(run_id)


def _is_run(path: Path) -> bool:
    return (path / JOURNAL_FILE).is_file() or (path / CREATED_FILE).is_file()


def runs_of(run_root: str | os.PathLike) -> list[Path]:
    """This experiment's run directories, newest first by name (run ids carry a date).

    A run directory holds a ``journal.jsonl``, or a ``created.json`` for a run
    named but not yet started; anything else beside them is not a run.
    """
    root = Path(run_root)
    try:
        entries = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False) and _is_run(Path(e.path))]
    return sorted(found, key=lambda p: p.name, reverse=True)


def latest(run_root: str | os.PathLike) -> Path | None:
    """The newest run of ``run_root``, or ``None``."""
    runs = runs_of(run_root)
    return runs[0] if runs else None


def find_run(run_root: str | os.PathLike, run_id: str | None) -> Path | None:
    """The run ``run_id`` names (created-but-not-started counts), or the newest one."""
    if run_id is None:
        return latest(run_root)
    path = run_dir_of(run_root, run_id)
    return path if path.is_dir() and _is_run(path) else None


def created_of(run_dir: str | os.PathLike) -> dict[str, Any]:
    """What spacrq recorded when the run was created; ``{}`` for a run started directly."""
    try:
        doc = read_json(Path(run_dir) / CREATED_FILE, default={})
    except RunFileError:
        return {}
    return doc if isinstance(doc, dict) else {}


def has_started(run_dir: str | os.PathLike) -> bool:
    """Whether the run has started: its configuration is frozen into its plan then."""
    path = Path(run_dir)
    return (path / PLAN_FILE).exists() or (path / JOURNAL_FILE).exists()


def config_text_of(config: dict[str, Any]) -> str:
    """A configuration as ``config.yaml`` text.

    Written as JSON, which every YAML 1.2 reader reads, so spacrq needs no
    YAML writer and the file means the same in every interpreter.
    """
    return json.dumps(config, indent=2, sort_keys=False, default=str) + "\n"


def run_config_of(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The run's own configuration (``config.yaml``) as a mapping, ``None`` without one."""
    path = Path(run_dir) / RUN_CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        try:
            import yaml  # a hand-written config.yaml
            doc = yaml.safe_load(text)
        except Exception:
            raise ExperimentError(f"{path} is neither JSON nor YAML; fix or replace it") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ExperimentError(f"{path} holds a {type(doc).__name__}, not a configuration mapping")
    return doc


def create_run(run_dir: str | os.PathLike, config_text: str | None = None,
               **fields: Any) -> dict[str, Any]:
    """Name a run before it starts, recording what it will run with.

    :raises ExperimentError: when the directory already holds a run: naming a
        second run over a started one would interleave two journals.
    """
    path = Path(run_dir)
    check_run_id(path.name)
    if _is_run(path) or (path / PLAN_FILE).exists():
        raise ExperimentError(f"run {path.name!r} already exists in {path.parent}; choose another "
                              "name")
    doc = {"run_id": path.name, "created": time.time(),
           "created_at": datetime.now().astimezone().isoformat(timespec="seconds"), **fields}
    try:
        path.mkdir(parents=True, exist_ok=True)
        if config_text is not None:
            write_text(path / RUN_CONFIG_FILE, config_text)
        write_json(path / CREATED_FILE, doc)
    except OSError as exc:
        raise ExperimentError(f"could not create run {path}: {exc.strerror or exc}; check that "
                              "the run root is writable") from None
    return doc


def _refuse_started(path: Path, doing: str) -> None:
    if has_started(path):
        raise ExperimentError(f"run {path.name!r} has started, so its configuration is frozen in "
                              f"its plan and it cannot be {doing}; duplicate the run instead")


def rename_run(run_dir: str | os.PathLike, new_name: str) -> Path:
    """Give a run that has not started another name (its directory's).

    Duplicates recorded as copies of it follow the new name.
    """
    path = Path(run_dir)
    new_name = check_run_id(new_name)
    if not path.is_dir():
        raise ExperimentError(f"there is no run {path.name!r} in {path.parent}")
    _refuse_started(path, "renamed")
    target = path.with_name(new_name)
    if target.exists():
        raise ExperimentError(f"a run called {new_name!r} already exists; choose another name")
    try:
        os.rename(path, target)
    except OSError as exc:
        raise ExperimentError(f"could not rename {path.name} to {new_name}: "
                              f"{exc.strerror or exc}") from None
    doc = created_of(target)
    if doc:
        doc["run_id"] = new_name
        write_json(target / CREATED_FILE, doc)
    for other in runs_of(target.parent):
        other_doc = created_of(other)
        if other_doc.get("copy_of") == path.name:
            other_doc["copy_of"] = new_name
            write_json(other / CREATED_FILE, other_doc)
    return target


def reconfigure_run(run_dir: str | os.PathLike, config_text: str, config: str = "") -> Path:
    """Replace the configuration of a run that has not started.

    :param config: the file it was taken from, recorded so the run table names it.
    :raises ExperimentError: when the run has started (duplicate it instead).
    """
    path = Path(run_dir)
    if not path.is_dir():
        raise ExperimentError(f"there is no run {path.name!r} in {path.parent}")
    _refuse_started(path, "reconfigured")
    target = write_text(path / RUN_CONFIG_FILE, config_text)
    doc = created_of(path)
    doc.update({"config": config, "reconfigured": time.time()})
    write_json(path / CREATED_FILE, doc)
    return target


def duplicate_run(run_dir: str | os.PathLike, new_name: str) -> Path:
    """A new, not-started run with the configuration of ``run_dir``, recorded as its copy."""
    path = Path(run_dir)
    new_name = check_run_id(new_name)
    target = path.with_name(new_name)
    text = None
    try:
        text = (path / RUN_CONFIG_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        try:  # a run started directly: its frozen configuration is in its plan
            plan = read_json(path / PLAN_FILE, default=None)
            if isinstance(plan, dict) and isinstance(plan.get("config"), dict):
                text = config_text_of(plan["config"])
        except RunFileError:
            text = None
    fields = {k: v for k, v in created_of(path).items()
              if k not in ("run_id", "created", "created_at", "copy_of", "reconfigured")}
    create_run(target, text, **fields, copy_of=path.name)
    return target


def report_of(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The run's own report: ``name``, ``path``, ``bytes``, ``written``; ``None`` without one."""
    path = Path(run_dir) / RUN_REPORT_FILE
    try:
        st = path.stat()
    except OSError:
        return None
    return {"name": path.name, "path": str(path), "bytes": st.st_size, "written": st.st_mtime}


def keep_log(run_dir: str | os.PathLike, log: str | os.PathLike) -> Path:
    """Copy a job's log into the run it ran, under ``job-logs/``."""
    folder = Path(run_dir) / RUN_LOGS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(log).name
    tmp = folder / f".{target.name}.copying"
    shutil.copyfile(log, tmp)
    os.replace(tmp, target)
    return target


def kept_log(run_dir: str | os.PathLike) -> Path | None:
    """The newest job log the run keeps (log names end in their start time)."""
    folder = Path(run_dir) / RUN_LOGS_DIR
    try:
        logs = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return logs[-1] if logs else None
