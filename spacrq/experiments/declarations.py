"""The experiments a workspace declares: ``<workspace>/experiments/experiments.json``.

An experiment is declared once — which module, which interpreter runs it,
from which checkout, with what environment, and where its runs go — and the
window and the ``spacrq exp`` command both read it from here.  The file is
validated whole on load, every problem in one sentence each, because an
operator editing it by hand at the bench needs to see all that is wrong at
once rather than one complaint per attempt.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from spacrq.experiments.errors import ExperimentError
from spacrq.runfiles import RunFileError, read_json, write_json

__all__ = ["ExperimentSpec", "DECLARATIONS_FILE", "declarations_path", "load_experiments",
           "save_experiments", "find_experiment", "declare_experiment", "check_name"]

DECLARATIONS_FILE = "experiments.json"
#: Largest declarations file read: a few hundred bytes an experiment.
_MAX_DECLARATIONS_BYTES = 4 * 1024 * 1024
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class ExperimentSpec:
    """One declared experiment.

    :param name: what the operator calls it; also its folder under the workspace.
    :param module: the import path run as ``python -m MODULE``.
    :param python: the interpreter of the module's own environment (plesty-lib
        needs Python >= 3.12 while spacrq may run on 3.11).
    :param cwd: the module's checkout: where it runs, so its ``.env`` and
        relative configuration paths mean what they say.
    :param env: variables the declaration sets over the bench's and the ``.env``'s.
    :param run_root: where its run directories go.
    """

    name: str
    module: str
    python: str
    cwd: str
    env: Mapping[str, str] = field(default_factory=dict)
    run_root: str = ""

    @property
    def runs(self) -> Path:
        return Path(self.run_root)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "module": self.module, "python": self.python,
                "cwd": self.cwd, "env": dict(self.env), "run_root": self.run_root}


def check_name(name: str) -> str:
    """An experiment name becomes a folder, so it follows the run id's rule."""
    text = str(name or "").strip()
    if not _NAME.match(text) or text in (".", ".."):
        raise ExperimentError(
            f"{name!r} is not a usable experiment name; use letters, digits, '.', '-' and '_'")
    return text


def declarations_path(workspace_root: str | os.PathLike) -> Path:
    return Path(workspace_root) / "experiments" / DECLARATIONS_FILE


def _problems_of(entry: Any, where: str) -> list[str]:
    if not isinstance(entry, Mapping):
        return [f"{where} is a {type(entry).__name__}; write it as an object with name and module"]
    problems = []
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.match(name.strip() or "-") or name.strip() in (".", ".."):
        problems.append(f"{where} has no usable 'name'; use letters, digits, '.', '-' and '_'")
    module = entry.get("module")
    if not isinstance(module, str) or not _MODULE.match(module):
        problems.append(f"{where} has no usable 'module'; give the import path run as "
                        "'python -m MODULE', like 'mylab.scan'")
    for key in ("python", "cwd", "run_root"):
        if key in entry and entry[key] is not None and not isinstance(entry[key], str):
            problems.append(f"{where} '{key}' must be a path written as text")
    env = entry.get("env", {})
    if env is not None and (not isinstance(env, Mapping)
                            or not all(isinstance(k, str) and isinstance(v, (str, int, float))
                                       for k, v in env.items())):
        problems.append(f"{where} 'env' must map variable names to text values")
    return problems


def _spec_of(entry: Mapping[str, Any], workspace_root: Path) -> ExperimentSpec:
    name = entry["name"].strip()
    cwd = entry.get("cwd") or str(workspace_root / "experiments" / name)
    run_root = entry.get("run_root") or str(workspace_root / "experiments" / name / "runs")
    python = entry.get("python") or _default_python()
    env = {str(k): str(v) for k, v in (entry.get("env") or {}).items()}
    return ExperimentSpec(name, entry["module"], str(python), str(cwd), env, str(run_root))


def _default_python() -> str:
    from spacrq.procs import interpreter  # python, or the bundle's dispatcher
    return interpreter()


def load_experiments(workspace_root: str | os.PathLike) -> list[ExperimentSpec]:
    """The workspace's declared experiments, in file order; ``[]`` without a file.

    :raises ExperimentError: naming every problem of the file at once.
    """
    root = Path(workspace_root)
    path = declarations_path(root)
    try:  # the run-file protocol's strict reader: garbage here is a sentence, never a traceback
        doc = read_json(path, default={"experiments": []}, expect=dict,
                        max_bytes=_MAX_DECLARATIONS_BYTES)
    except RunFileError as exc:
        raise ExperimentError(f"the experiment declarations: {exc}") from None
    if not isinstance(doc.get("experiments", []), list):
        raise ExperimentError(f"{path} must hold an object with an 'experiments' list; fix the "
                              "file, or remove it and declare the experiments again")
    problems: list[str] = []
    specs: list[ExperimentSpec] = []
    seen: set[str] = set()
    for i, entry in enumerate(doc.get("experiments", [])):
        where = f"experiment #{i + 1}"
        found = _problems_of(entry, where)
        if found:
            problems.extend(found)
            continue
        spec = _spec_of(entry, root)
        if spec.name in seen:
            problems.append(f"{where} repeats the name {spec.name!r}; give each experiment its own")
            continue
        seen.add(spec.name)
        specs.append(spec)
    if problems:
        raise ExperimentError(f"{path}: " + "; ".join(problems))
    return specs


def save_experiments(workspace_root: str | os.PathLike, specs: list[ExperimentSpec]) -> Path:
    """Replace the declarations file with ``specs`` (atomically)."""
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ExperimentError(f"experiment names must differ; {', '.join(dupes)} is declared twice")
    for spec in specs:
        found = _problems_of(spec.to_dict(), f"experiment {spec.name!r}")
        if found:
            raise ExperimentError("; ".join(found))
    return write_json(declarations_path(workspace_root),
                      {"experiments": [s.to_dict() for s in specs]})


def find_experiment(workspace_root: str | os.PathLike, name: str) -> ExperimentSpec:
    """The declared experiment called ``name``.

    :raises ExperimentError: when none is, naming those that are.
    """
    specs = load_experiments(workspace_root)
    for spec in specs:
        if spec.name == name:
            return spec
    known = ", ".join(s.name for s in specs) or "none yet"
    raise ExperimentError(f"no experiment called {name!r} is declared in "
                          f"{declarations_path(workspace_root)} (declared: {known})")


def declare_experiment(workspace_root: str | os.PathLike, spec: ExperimentSpec) -> Path:
    """Add ``spec`` to the declarations, replacing one of the same name."""
    specs = [s for s in load_experiments(workspace_root) if s.name != spec.name]
    return save_experiments(workspace_root, [*specs, spec])
