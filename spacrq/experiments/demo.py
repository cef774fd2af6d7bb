"""The Experiments part of a new workspace's demo.

Declares the simulated instrument sweep (:mod:`spacrq.experiments.demo_sweep`)
run by spacrq's own interpreter, and leaves one short finished run beside it,
so a window opened on a fresh machine has a run table, records and a plot to
show before anybody has pressed Run.
"""
from __future__ import annotations

import sys
from pathlib import Path

from spacrq.experiments.declarations import ExperimentSpec, declare_experiment, load_experiments
from spacrq.experiments.demo_sweep import InstrumentSweep
from spacrq.experiments.notes import add_note
from spacrq.experiments.runs import config_text_of, create_run, new_run_id

__all__ = ["seed_demo", "DEMO_NAME", "demo_spec"]

DEMO_NAME = "demo-sweep"


def demo_spec(workspace_root: Path) -> ExperimentSpec:
    folder = Path(workspace_root) / "experiments" / DEMO_NAME
    return ExperimentSpec(name=DEMO_NAME, module="spacrq.experiments.demo_sweep",
                          python=sys.executable, cwd=str(folder), env={},
                          run_root=str(folder / "runs"))


def seed_demo(ws) -> None:
    """Declare the demo sweep in ``ws`` and run a short sweep of it in-process."""
    root = Path(ws.root)
    if any(s.name == DEMO_NAME for s in load_experiments(root)):
        return
    spec = demo_spec(root)
    Path(spec.cwd).mkdir(parents=True, exist_ok=True)
    declare_experiment(root, spec)
    config = {"points": 12, "dwell": 0.0, "detector": {"readings": 3, "noise": 0.03}}
    run_id = new_run_id("sweep")
    run_dir = Path(spec.run_root) / run_id
    create_run(run_dir, config_text_of(config), experiment=spec.name, module=spec.module,
               config="demo")
    outcome = InstrumentSweep().run(spec.run_root, run_id=run_id, config=config)
    if outcome.state != "completed":
        raise RuntimeError(f"the demo sweep did not complete ({outcome.message})")
    add_note(run_dir, "Demo run made when the workspace was created: 12 points, no dwell.",
             by="spacrq")
