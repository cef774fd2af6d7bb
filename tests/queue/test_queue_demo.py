"""The demo queue a fresh workspace gets runs in seconds and shows every outcome."""
from __future__ import annotations

from spacrq.queue import load_queue, run_queue, validate_queue
from spacrq.queue.demo import seed_demo


def test_demo_queue_runs_and_shows_partial_failure_and_skip(workspace):
    path = seed_demo(workspace)
    assert path.parent == workspace.queues
    queue = load_queue(path)
    assert not [p for p in validate_queue(queue) if p.is_error]
    result = run_queue(queue, path)
    status = {j.id: j.status for j in load_queue(path).jobs}
    assert status == {"prepare": "success", "measure": "success", "summarise": "success",
                      "slow": "success", "fails-on-purpose": "failed",
                      "after-failure": "skipped"}
    assert [j.id for j in result.partial] == ["measure"]
    assert "fails on purpose" in queue.find("fails-on-purpose").error
    assert seed_demo(workspace) == path  # never overwritten
