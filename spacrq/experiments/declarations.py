"""The experiments a workspace declares: ``<workspace>/experiments/experiments.json``.

An experiment is declared once — which module, which interpreter runs it,
from which checkout, with what environment, and where its runs go — and the
window and the ``spacrq exp`` command both read it from here.  The file is
validated whole on load, every problem in one sentence each, because an
operator editing it by hand at the bench needs to see all that is wrong at
once rather than one complaint per attempt.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from spacrq.experiments.errors import ExperimentError
from spacrq.procs import interpreter
from spacrq.runfiles import RunFileError, read_json, write_json
from spacrq.watching import Code

__all__ = ["ExperimentSpec", "DECLARATIONS_FILE", "declarations_path", "load_experiments",
           "save_experiments", "find_experiment", "declare_experiment", "check_name",
           "DeclarationError", "declare", "undeclare", "module_of", "declaration_of",
           "declare_checked", "probe_spec", "probe_of"]

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
    return interpreter()  # python, or the bundle's dispatcher


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


# -- declaring and removing from the window ------------------------------------

#: the lock beside the declarations file, so two windows (or a window and
#: ``spacrq exp declare``) adding an experiment at once both land
_LOCK_FILE = ".experiments.json.lock"


class DeclarationError(ExperimentError):
    """A declaration was refused; nothing was written.  ``code`` says how
    (``INVALID``: a bad name, module or path; ``MISSING``: no such experiment;
    ``CONFLICT``: the name is taken), the message what to fix."""

    def __init__(self, message: str, code: Code = Code.INVALID) -> None:
        super().__init__(message)
        self.code = code


@contextlib.contextmanager
def _declarations_locked(workspace_root: Path) -> Iterator[None]:
    folder = declarations_path(workspace_root).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / _LOCK_FILE, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
    except OSError as exc:
        raise DeclarationError(f"could not lock the declarations in {folder}: "
                               f"{exc.strerror or exc}; check that the workspace is writable",
                               Code.FAILED) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def _current(workspace_root: Path) -> list[ExperimentSpec]:
    try:
        return load_experiments(workspace_root)
    except ExperimentError as exc:
        raise DeclarationError(f"{exc} — fix or remove that file before declaring or removing "
                               "an experiment here", Code.CONFLICT) from None


def _path_of(text: str | os.PathLike, base: Path) -> Path:
    path = Path(os.path.expanduser(str(text).strip()))
    return path if path.is_absolute() else base / path


def module_of(module: str | os.PathLike) -> tuple[str, Path | None]:
    """The import path of ``module`` and, for a package folder, the folder it runs from.

    ``module`` is either a dotted import path (``lab.scan``, found by the
    interpreter) or a folder holding a package with a ``__main__.py`` (the
    checkout's own copy); the folder's parent is then where ``python -m`` runs.

    :raises DeclarationError: naming what is wrong and the fix.
    """
    text = str(module or "").strip()
    if not text:
        raise DeclarationError("no module is given; type its import path (like 'lab.scan') "
                               "or choose the package folder holding its __main__.py")
    looks_like_path = any(sep in text for sep in ("/", "\\", os.sep)) or text.startswith(("~", "."))
    if not looks_like_path and _MODULE.match(text):
        return text, None
    folder = Path(os.path.expanduser(text))
    if not folder.is_dir():
        if looks_like_path:
            raise DeclarationError(f"the module folder {folder} does not exist; choose the "
                                   "package folder holding the module's __main__.py")
        raise DeclarationError(f"{text!r} is not an import path; give one like 'lab.scan', or "
                               "choose the package folder holding its __main__.py")
    folder = folder.resolve()
    if not (folder / "__main__.py").is_file():
        raise DeclarationError(f"{folder} holds no __main__.py, so 'python -m {folder.name}' "
                               "cannot run it; choose the package folder that has one")
    if not _MODULE.match(folder.name) or "." in folder.name:
        raise DeclarationError(f"the folder name {folder.name!r} is not an importable name; "
                               "rename it with letters, digits and '_' only")
    return folder.name, folder.parent


def _python_of(python: str | os.PathLike | None) -> str:
    """The interpreter: spacrq's own by default, a venv folder meaning its ``bin/python``."""
    if python is None or not str(python).strip():
        return interpreter()
    path = Path(os.path.expanduser(str(python).strip()))
    if path.is_dir():
        found = [p for p in (path / "bin" / "python", path / "Scripts" / "python.exe")
                 if p.is_file()]
        if not found:
            raise DeclarationError(f"{path} is a folder with no bin/python; choose the python "
                                   "of the module's environment (a venv's bin/python)")
        path = found[0]
    if not path.is_file():
        raise DeclarationError(f"the interpreter {path} does not exist; choose the python of "
                               "the module's environment, or leave it empty for spacrq's own")
    if not os.access(path, os.X_OK):
        raise DeclarationError(f"the interpreter {path} is not executable; choose a python "
                               "program (a venv's bin/python)")
    return str(path.absolute())


def declaration_of(workspace_root: str | os.PathLike, *, name: str, module: str,
                   python: str | os.PathLike | None = None, cwd: str | os.PathLike | None = None,
                   run_root: str | os.PathLike | None = None,
                   env: Mapping[str, str] | None = None) -> ExperimentSpec:
    """The declaration :func:`declare` would write, checked whole; nothing is written.

    The name (a folder name), the module (an import path, or a package
    folder), the interpreter (spacrq's own when none is given), the working
    folder (it must exist; the workspace's folder for the experiment by
    default, or the package folder's parent) and the run root (not a file).
    Relative paths are taken from the workspace.

    :raises DeclarationError: one sentence with the fix.
    """
    root = Path(workspace_root)
    try:
        name = check_name(name)
    except ExperimentError as exc:
        raise DeclarationError(str(exc)) from None
    module_name, package_home = module_of(module)
    python = _python_of(python)
    default_folder = root / "experiments" / name
    if cwd is not None and str(cwd).strip():
        work = _path_of(cwd, root)
        if not work.is_dir():
            raise DeclarationError(f"the working folder {work} does not exist; choose the "
                                   "module's checkout (or leave it empty)")
    else:
        work = package_home or default_folder
    runs = _path_of(run_root, root) if run_root is not None and str(run_root).strip() \
        else default_folder / "runs"
    if runs.exists() and not runs.is_dir():
        raise DeclarationError(f"the run root {runs} is a file; choose a folder for the runs")
    if runs.is_symlink():
        raise DeclarationError(f"the run root {runs} is a symbolic link; choose the folder "
                               "itself")
    spec = ExperimentSpec(name, module_name, python, str(work.absolute()),
                          {str(k): str(v) for k, v in (env or {}).items()}, str(runs.absolute()))
    found = _problems_of(spec.to_dict(), f"experiment {name!r}")
    if found:
        raise DeclarationError("; ".join(found))
    return spec


def probe_spec(workspace_root: str | os.PathLike, spec: ExperimentSpec) -> ExperimentSpec:
    """``spec`` as its module is asked for its manifest before it is declared.

    A working folder the declaration will make (the workspace's folder for the
    experiment) does not exist yet: the module is asked from the workspace
    then, so asking writes nothing.  The Declare… dialog's question and
    ``spacrq exp declare``'s check are this one.
    """
    if spec.cwd and not Path(spec.cwd).is_dir():
        return dataclasses.replace(spec, cwd=str(Path(workspace_root).absolute()))
    return spec


def probe_of(workspace_root: str | os.PathLike, module: str,
             python: str | os.PathLike | None = None,
             cwd: str | os.PathLike | None = None) -> ExperimentSpec:
    """What the Declare… dialog asks for the fields typed so far (no name yet): the
    module, interpreter and working folder as :func:`declaration_of` reads them.

    :raises DeclarationError: for a module, interpreter or folder that cannot be used.
    """
    module_name, home = module_of(module)
    work = _path_of(cwd, Path(workspace_root)) if cwd is not None and str(cwd).strip() \
        else (home or Path(workspace_root))
    if not work.is_dir():
        raise DeclarationError(f"the working folder {work} does not exist; choose the "
                               "module's checkout (or leave it empty)")
    return ExperimentSpec(module_name, module_name, _python_of(python), str(work.absolute()),
                          {}, "")


def declare(workspace_root: str | os.PathLike, *, name: str, module: str,
            python: str | os.PathLike | None = None, cwd: str | os.PathLike | None = None,
            run_root: str | os.PathLike | None = None) -> ExperimentSpec:
    """Add an experiment to the workspace's declarations, checked whole first
    (:func:`declaration_of`); a name that is taken is refused.

    :raises DeclarationError: one sentence with the fix.
    """
    return declare_checked(workspace_root, declaration_of(
        workspace_root, name=name, module=module, python=python, cwd=cwd, run_root=run_root))[0]


def declare_checked(workspace_root: str | os.PathLike, spec: ExperimentSpec, *,
                    replace: bool = False) -> tuple[ExperimentSpec, ExperimentSpec | None]:
    """Write ``spec`` (made by :func:`declaration_of`) into the declarations, under a lock,
    atomically; a refused declaration leaves the file and the disk as they were.

    A name that is taken is refused unless ``replace`` is given; then the
    declaration replaces the old one (its runs stay where they are).

    :returns: ``(spec, the declaration it replaced or None)``.
    :raises DeclarationError: ``CONFLICT`` for a name that is taken.
    """
    root = Path(workspace_root)
    default_folder = root / "experiments" / spec.name
    with _declarations_locked(root):
        specs = _current(root)
        old = next((s for s in specs if s.name == spec.name), None)
        if old is not None and not replace:
            raise DeclarationError(f"an experiment called {spec.name!r} is declared already "
                                   f"(python -m {old.module}); choose another name, or remove "
                                   "that one first ('spacrq exp declare --replace' replaces it)",
                                   Code.CONFLICT)
        try:
            if Path(spec.cwd) == default_folder.absolute():
                default_folder.mkdir(parents=True, exist_ok=True)
            Path(spec.run_root).mkdir(parents=True, exist_ok=True)
            save_experiments(root, [s if s is not old else spec for s in specs]
                             + ([] if old is not None else [spec]))
        except OSError as exc:
            raise DeclarationError(f"could not write the declaration of {spec.name!r}: "
                                   f"{exc.strerror or exc}; check that the workspace is writable",
                                   Code.FAILED) from None
    return spec, old


def undeclare(workspace_root: str | os.PathLike, name: str) -> ExperimentSpec:
    """Remove a declaration; its runs stay on disk where they are.

    :returns: the declaration removed (so the operator can be told where the runs are).
    :raises DeclarationError: ``MISSING`` when no experiment of that name is declared.
    """
    root = Path(workspace_root)
    with _declarations_locked(root):
        specs = _current(root)
        gone = next((s for s in specs if s.name == str(name)), None)
        if gone is None:
            known = ", ".join(s.name for s in specs) or "none"
            raise DeclarationError(f"no experiment called {name!r} is declared (declared: "
                                   f"{known}); it may have been removed already", Code.MISSING)
        try:
            save_experiments(root, [s for s in specs if s is not gone])
        except OSError as exc:
            raise DeclarationError(f"could not write the declarations: {exc.strerror or exc}; "
                                   "check that the workspace is writable", Code.FAILED) from None
    return gone
