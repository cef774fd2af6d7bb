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

import os
import shutil
import stat
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from spacrq.experiments.errors import (CREATED_FILE, JOURNAL_FILE, PLAN_FILE, RUN_CONFIG_FILE,
                                       RUN_LOGS_DIR, RUN_REPORT_FILE, ExperimentError)
from spacrq.runfiles import (RunFileError, dumps, parse_document, read_json, read_json_checked,
                             refuse_link, safe_name, write_json, write_text)

__all__ = ["check_run_id", "new_run_id", "runs_of", "created_of", "create_run", "has_started",
           "rename_run", "reconfigure_run", "duplicate_run", "report_of", "keep_log", "kept_log",
           "latest", "find_run", "config_text_of", "run_config_of", "run_dir_of", "read_config_file",
           "refuse_linked_run", "linked_runs_of"]

_ALLOWED_PUNCT = "._-"
#: Largest configuration file read: settings, not data.
_MAX_CONFIG_BYTES = 16 * 1024 * 1024


def check_run_id(text: str) -> str:
    """``text``, trimmed, if it is usable as one directory name; else raise.

    spacrq's own check, not the module library's: the rule is about what a
    directory name may be and must hold whatever library wrote the module.
    Letters, digits, ``.``, ``-`` and ``_`` are what every filesystem agrees on.
    """
    name = str(text if text is not None else "").strip()
    if not name:
        raise ExperimentError("a run id cannot be empty; type a name such as 'scan_20260101-0900'")
    try:
        safe_name(name, "a run id")  # the run-file protocol's rule first: never a path
    except RunFileError:
        raise ExperimentError(f"a run id is one folder name, not a path: {text!r}; "
                              "remove '/', '\\' and '..'") from None
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
    """The directory of ``run_id`` under ``run_root``; the id is checked first.

    :raises ExperimentError: for an id that is not one folder name, and for a
        run folder that is a symbolic link: every command refuses it alike
        (``exp list`` shows it refused), so nothing is written where it points.
    """
    path = Path(run_root) / check_run_id(run_id)
    refuse_linked_run(path)
    return path


def refuse_linked_run(path: str | os.PathLike) -> Path:
    """``path``, or :class:`ExperimentError` when the run folder is a symbolic link."""
    try:
        return refuse_link(path, "run folder")
    except RunFileError as exc:
        raise ExperimentError(str(exc)) from None


def linked_runs_of(run_root: str | os.PathLike) -> list[tuple[str, str]]:
    """Entries of the run root that are symbolic links to run folders: ``(name, why)``.

    Not runs spacrq reads or writes; listed so ``exp list`` says why they are missing.
    """
    try:
        entries = list(os.scandir(run_root))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
    out = []
    for entry in entries:
        if entry.is_symlink() and _is_run(Path(entry.path)):
            try:
                refuse_link(entry.path, "run folder")
            except RunFileError as exc:
                out.append((entry.name, str(exc)))
    return sorted(out, reverse=True)


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
    path = run_dir_of(run_root, run_id)  # refuses a linked run folder
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
    return dumps(config, indent=2) + "\n"


def read_config_file(path: str | os.PathLike, what: str = "configuration file") -> dict[str, Any]:
    """A configuration file (JSON or YAML) as a mapping; ``{}`` for an empty file.

    Read by the one JSON-or-YAML reader (:func:`spacrq.runfiles.parse_document`):
    a file that looks like JSON must be valid JSON (YAML would read ``NaN`` or
    a torn object as text and the run would start on nonsense); other text is
    YAML, held to the same rules.

    :raises ExperimentError: naming the file and the fix, for anything that
        is not a mapping of settings.
    """
    target = Path(path)
    raw = _read_small(target, what)
    try:
        doc = parse_document(raw, where=target)
    except RunFileError as exc:
        raise ExperimentError(f"{exc}; the {what} must be JSON or YAML") from None
    if doc is None and _no_settings(raw):  # empty, or a YAML file of comments only
        return {}
    if not isinstance(doc, dict):
        raise ExperimentError(f"{target} holds {_kind(doc)}, not a mapping of settings; "
                              f"fix the {what}")
    return doc


def _no_settings(raw: bytes) -> bool:
    """Whether a document holds nothing but blank lines and comments."""
    return all(not line.strip() or line.lstrip().startswith(b"#") for line in raw.splitlines())


def _kind(doc: Any) -> str:
    return {list: "a list", str: "text", bool: "true or false", int: "a number",
            float: "a number", type(None): "null"}.get(type(doc), type(doc).__name__)


def _read_small(target: Path, what: str) -> bytes:
    """The bytes of a regular file of at most :data:`_MAX_CONFIG_BYTES` (a FIFO never blocks)."""
    try:
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ExperimentError(f"could not read the {what} {target}: {exc.strerror or exc}; "
                              "check the path") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ExperimentError(f"{target} is not a regular file; give a {what} there")
        if st.st_size > _MAX_CONFIG_BYTES:
            raise ExperimentError(f"{target} is {st.st_size:,} bytes, too large for a {what}; "
                                  "give the settings file, not data")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(_MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ExperimentError(f"could not read the {what} {target}: {exc.strerror or exc}; "
                              "check the path") from None
    finally:
        os.close(fd)


def run_config_of(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The run's own configuration (``config.yaml``) as a mapping, ``None`` without one."""
    path = Path(run_dir) / RUN_CONFIG_FILE
    if not path.exists() and not path.is_symlink():
        return None
    return read_config_file(path, "run's config.yaml")


def create_run(run_dir: str | os.PathLike, config_text: str | None = None,
               **fields: Any) -> dict[str, Any]:
    """Name a run before it starts, recording what it will run with.

    :raises ExperimentError: when the directory already holds a run: naming a
        second run over a started one would interleave two journals.
    """
    path = Path(run_dir)
    check_run_id(path.name)
    refuse_linked_run(path)
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
    path = refuse_linked_run(run_dir)
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
    path = refuse_linked_run(run_dir)
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
    path = refuse_linked_run(run_dir)
    new_name = check_run_id(new_name)
    target = path.with_name(new_name)
    text = None
    config = run_config_of(path)
    if config is not None:
        text = config_text_of(config)
    else:  # a run started directly: its frozen configuration is in its plan
        plan, _ = read_json_checked(path / PLAN_FILE, None, expect=dict)
        if isinstance(plan, dict) and isinstance(plan.get("config"), dict):
            text = config_text_of(plan["config"])
    fields = {k: v for k, v in created_of(path).items()  # a hand-edited file may hold anything
              if isinstance(k, str) and k not in ("run_id", "created", "created_at", "copy_of",
                                                  "reconfigured", "run_dir", "config_text")}
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
    folder = refuse_linked_run(Path(run_dir)) / RUN_LOGS_DIR
    try:
        refuse_link(folder, "log folder")
    except RunFileError as exc:
        raise ExperimentError(str(exc)) from None
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(log).name
    # a temp name of its own (O_EXCL), never a fixed one a link could be planted at
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".copying", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out, open(log, "rb") as source:
            shutil.copyfileobj(source, out)
        os.replace(tmp, target)  # replaces a link at target itself, not what it points to
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


def kept_log(run_dir: str | os.PathLike) -> Path | None:
    """The newest job log the run keeps (log names end in their start time)."""
    folder = Path(run_dir) / RUN_LOGS_DIR
    try:
        logs = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return logs[-1] if logs else None
