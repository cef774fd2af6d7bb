"""The workspace: one folder holding a workstation's queues, runs and experiments.

``spacrq`` opens the workspace named by ``--workspace``, else
``$SPACRQ_WORKSPACE``, else ``~/spacrq-workspace``.  A new workspace is laid
out and filled with a small demo of each kind of work, so the window opened
on a fresh machine shows something to run::

    <workspace>/
      workspace.json        marks the folder as a spacrq workspace
      queues/               *.queue.json, each with its <name>_logs/ folder
      runs/                 blockwise tracking stores (runs.jsonl inside each)
      data/                 the demo's zarr volumes
      experiments/          experiments.json (declarations) and one run root each

Each package seeds its own part of the demo (``seed_demo(workspace)`` in
``spacrq.queue.demo``, ``spacrq.blockwise.demo``, ``spacrq.experiments.demo``);
a part that fails to seed is reported, never fatal.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from spacrq.runfiles import write_json

MARKER = "workspace.json"
DEMO_SEEDERS = ("spacrq.queue.demo", "spacrq.blockwise.demo", "spacrq.experiments.demo")


def default_path() -> Path:
    env = os.environ.get("SPACRQ_WORKSPACE")
    return Path(env).expanduser() if env else Path.home() / "spacrq-workspace"


@dataclass(frozen=True)
class Workspace:
    root: Path

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


def open_workspace(path: str | os.PathLike | None = None, *, demo: bool = True) -> tuple[Workspace, list[str]]:
    """Open (creating and seeding when new) the workspace at ``path``.

    :returns: the workspace and a list of one-line notes about demo parts that
        could not be seeded (empty when all went well).
    """
    root = Path(path).expanduser() if path else default_path()
    ws = Workspace(root.resolve())
    notes: list[str] = []
    fresh = not ws.is_initialised()
    for folder in (ws.queues, ws.runs, ws.data, ws.experiments):
        folder.mkdir(parents=True, exist_ok=True)
    if fresh:
        # Marked first: the seeders (and anything they run) find their workspace by it.
        write_json(ws.marker, {"spacrq_workspace": 1, "demo": demo})
        if demo:
            for name in DEMO_SEEDERS:
                try:
                    seeder = importlib.import_module(name)
                    seeder.seed_demo(ws)
                except Exception as exc:  # one broken demo must not stop the window
                    notes.append(f"the demo from {name} could not be set up: {exc}")
    return ws, notes
