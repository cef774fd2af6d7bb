"""The Experiments part of the demo night: the simulated instrument sweep, declared.

Declares :mod:`spacrq.experiments.demo_sweep`, run by spacrq's own
interpreter, in the workspace.  No run is made here: the demo queue's
``experiment`` job runs it (:func:`demo_job_settings`), so the operator sees
the run appear in the Experiments pane and fill live, started by the queue
like a real night's measurement.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from spacrq.experiments.declarations import ExperimentSpec, declare_experiment, load_experiments
from spacrq.procs import interpreter

__all__ = ["seed_demo", "DEMO_NAME", "demo_spec", "demo_job_settings"]

DEMO_NAME = "demo-sweep"
#: the sweep the demo night runs: 24 set-points, a quarter second each
DEMO_CONFIG: dict[str, Any] = {"points": 24, "dwell": 0.25,
                               "detector": {"readings": 3, "noise": 0.03}}


def demo_spec(workspace_root: Path) -> ExperimentSpec:
    folder = Path(workspace_root) / "experiments" / DEMO_NAME
    return ExperimentSpec(name=DEMO_NAME, module="spacrq.experiments.demo_sweep",
                          python=interpreter(), cwd=str(folder), env={},
                          run_root=str(folder / "runs"))


def demo_job_settings(workspace_root: Path) -> dict[str, Any]:
    """The settings of the demo queue's ``experiment`` job (a new run each night)."""
    return {"experiment": DEMO_NAME, "workspace": str(workspace_root),
            "config": dict(DEMO_CONFIG), "poll": 0.25}


def seed_demo(ws) -> None:
    """Declare the demo sweep in ``ws`` (once)."""
    root = Path(ws.root)
    if any(s.name == DEMO_NAME for s in load_experiments(root)):
        return
    spec = demo_spec(root)
    Path(spec.cwd).mkdir(parents=True, exist_ok=True)
    Path(spec.run_root).mkdir(parents=True, exist_ok=True)
    declare_experiment(root, spec)
