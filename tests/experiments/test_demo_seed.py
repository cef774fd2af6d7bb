"""The demo workspace declares the sweep and holds one finished run with records and a note."""
from __future__ import annotations

from spacrq import experiments as ex
from spacrq.workspace import open_workspace


def test_new_workspace_has_the_demo_experiment_and_a_finished_run(tmp_path):
    ws, _notes = open_workspace(tmp_path / "ws", demo=True)
    (spec,) = ex.load_experiments(ws.root)
    assert spec.module == "spacrq.experiments.demo_sweep"
    (run,) = ex.runs_of(spec.run_root)
    snap = ex.RunWatch(run).refresh()
    assert snap["status"]["state"] == "completed" and snap["record_count"] == 12
    assert ex.notes_of(run)[0]["by"] == "spacrq"
    assert ex.run_config_of(run)["points"] == 12
    from spacrq.experiments.demo import seed_demo
    seed_demo(ws)  # seeding again changes nothing
    assert len(ex.runs_of(spec.run_root)) == 1
