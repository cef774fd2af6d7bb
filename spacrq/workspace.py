"""The workspace: one folder holding a workstation's queues, runs and experiments.

``spacrq`` opens the workspace named by ``--workspace``, else
``$SPACRQ_WORKSPACE``, else ``~/spacrq-workspace``.  A new workspace is laid
out and gets the demo night, so the window opened on a fresh machine has one
queue to run that drives all three kinds of work::

    <workspace>/
      workspace.json        marks the folder as a spacrq workspace
      queues/               *.queue.json, each with its <name>_logs/ folder
      runs/                 blockwise tracking stores (runs.jsonl inside each)
      data/                 the demo's zarr volumes
      experiments/          experiments.json (declarations) and one run root each

Opening and seeding are two steps on purpose: the window opens the folder
(cheap: a few ``mkdir``) before it paints and seeds the demo after, on a
thread, so a new workspace opens as fast as an old one.  Each package seeds
its own part of the demo (``seed_demo(workspace)`` in ``spacrq.queue.demo``,
``spacrq.blockwise.demo``, ``spacrq.experiments.demo``); a part that fails to
seed is a note, never fatal.

A folder spacrq cannot use is a :class:`WorkspaceError` with one sentence
naming the fix: a folder that holds other things (spacrq will not scatter
its folders through someone's documents), a file where the folder should be,
a folder that cannot be written.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

# spacrq.runfiles (and orjson with it) is imported where a marker is read or written: opening
# an existing workspace before the window's first paint needs neither.

MARKER = "workspace.json"
DEMO_SEEDERS = ("spacrq.blockwise.demo", "spacrq.experiments.demo", "spacrq.queue.demo")
_LAYOUT = ("queues", "runs", "data", "experiments")


class WorkspaceError(Exception):
    """A folder that cannot be a workspace; the message is one sentence with the fix."""


def default_path() -> Path:
    env = os.environ.get("SPACRQ_WORKSPACE")
    return Path(env).expanduser() if env else Path.home() / "spacrq-workspace"


class Workspace:
    """A workspace folder and where each kind of work lives in it (a value: equal by root)."""

    __slots__ = ("root",)

    def __init__(self, root: str | os.PathLike) -> None:
        object.__setattr__(self, "root", Path(root))

    def __setattr__(self, name, value) -> None:
        raise AttributeError("a Workspace is not changed; open another one")

    def __eq__(self, other) -> bool:
        return isinstance(other, Workspace) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __repr__(self) -> str:
        return f"Workspace(root={str(self.root)!r})"

    @property
    def queues(self) -> Path:
        return self.root / "queues"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def experiments(self) -> Path:
        return self.root / "experiments"

    @property
    def marker(self) -> Path:
        return self.root / MARKER

    def is_initialised(self) -> bool:
        return self.marker.is_file()

    def demo_pending(self) -> bool:
        """The workspace was made with the demo and the demo is not seeded yet.

        Kept in the marker, so a window closed (or killed) before seeding
        finished seeds on its next start instead of never.
        """
        if not self.is_initialised():
            return True  # opened by the window, which marks and seeds it after its first paint
        from spacrq.runfiles import read_json_checked
        doc, _problem = read_json_checked(self.marker, default={}, expect=dict)
        return bool(doc.get("demo")) and not doc.get("demo_seeded")


def is_workspace(path: str | os.PathLike) -> bool:
    return (Path(path) / MARKER).is_file()


def _read_only(folder: Path) -> bool:
    """True when the folder cannot, or is not meant to, be written.

    The owner's write bit counts even where the kernel would let us write
    (root ignores it): an operator who made a folder read-only meant it.
    """
    try:
        mode = folder.stat().st_mode
    except OSError:
        return True
    return not mode & 0o200 or not os.access(folder, os.W_OK | os.X_OK)


def _check_usable(root: Path) -> None:
    """Refuse a folder that cannot hold a workspace, saying what to do instead."""
    if root.exists() and not root.is_dir():
        raise WorkspaceError(f"{root} is a file, not a folder; choose a folder for the workspace "
                             "(--workspace DIR)")
    if root.is_dir() and not (root / MARKER).is_file():
        try:
            strangers = [p.name for p in root.iterdir() if p.name not in _LAYOUT]
        except OSError as exc:
            raise WorkspaceError(f"{root} cannot be read ({exc.strerror or exc}); check its "
                                 "permissions or choose another folder") from None
        if strangers:
            raise WorkspaceError(f"{root} is not a spacrq workspace (it has no {MARKER} and holds "
                                 f"other files, e.g. {sorted(strangers)[0]!r}); choose an empty or "
                                 "new folder, or an existing workspace")
    if root.is_dir() and _read_only(root):
        raise WorkspaceError(f"the workspace {root} is read-only; make it writable (chmod u+w "
                             f"{root}) or choose another folder")


def open_workspace(path: str | os.PathLike | None = None, *, demo: bool = True,
                   seed: bool = True) -> tuple[Workspace, list[str]]:
    """Open (creating when new) the workspace at ``path``.

    :param demo: a new workspace gets the demo night.
    :param seed: seed it now; the window passes False and calls :func:`seed_demo`
        after its first paint.
    :returns: the workspace and one-line notes about demo parts that could not be seeded.
    :raises WorkspaceError: the folder cannot be a workspace (the message says why and what to do).
    """
    root = Path(path).expanduser() if path else default_path()
    root = root.resolve()
    _check_usable(root)
    ws = Workspace(root)
    fresh = not ws.is_initialised()
    try:
        for name in _LAYOUT:
            (root / name).mkdir(parents=True, exist_ok=True)
        if fresh and (seed or not demo):
            # Marked first: the seeders (and anything they run) find their workspace by it.
            # The window (seed=False) leaves marking to seed_demo, after its first paint: the
            # folders alone still open as this workspace (they are all it holds).
            from spacrq.runfiles import write_json
            write_json(ws.marker, {"spacrq_workspace": 1, "demo": demo})
    except (OSError, RuntimeError) as exc:  # RuntimeError: runfiles' RunFileError
        why = getattr(exc, "strerror", None) or exc
        raise WorkspaceError(f"the workspace {root} cannot be laid out ({why}); make its parent "
                             "folder writable or choose another folder") from None
    notes = seed_demo(ws) if seed and ws.demo_pending() else []
    return ws, notes


def seed_demo(ws: Workspace) -> list[str]:
    """Seed the demo night into ``ws`` (each part only once); notes for the parts that failed."""
    from spacrq.runfiles import RunFileError, read_json_checked, write_json
    notes: list[str] = []
    if not ws.is_initialised():  # marked before the seeders run: they find the workspace by it
        write_json(ws.marker, {"spacrq_workspace": 1, "demo": True})
    for name in DEMO_SEEDERS:
        try:
            seeder = importlib.import_module(name)
            seeder.seed_demo(ws)
        except Exception as exc:  # one broken demo part must not stop the window
            notes.append(f"the demo from {name} could not be set up: {exc}")
    doc, _problem = read_json_checked(ws.marker, default={}, expect=dict)
    try:
        write_json(ws.marker, {**doc, "spacrq_workspace": 1, "demo": True, "demo_seeded": True})
    except (OSError, RunFileError) as exc:
        notes.append(f"the workspace marker {ws.marker} could not be updated: {exc}")
    return notes
