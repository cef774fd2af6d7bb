"""The demo workspace declares the sweep; the demo queue's experiment job runs it."""
from __future__ import annotations

from spacrq import experiments as ex
from spacrq.workspace import open_workspace


def test_new_workspace_declares_the_demo_experiment_and_the_queue_runs_it(tmp_path):
    ws, _notes = open_workspace(tmp_path / "ws", demo=True)
    (spec,) = ex.load_experiments(ws.root)
    assert spec.module == "spacrq.experiments.demo_sweep"
    assert ex.runs_of(spec.run_root) == []  # made by the demo night, not before
    from spacrq.experiments.demo import DEMO_NAME, seed_demo
    from spacrq.queue import load_queue
    job = load_queue(ws.queues / "demo.queue.json").find("sweep")
    assert job.module == "experiment" and job.settings["experiment"] == DEMO_NAME
    seed_demo(ws)  # seeding again changes nothing
    assert len(ex.load_experiments(ws.root)) == 1
