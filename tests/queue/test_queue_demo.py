"""The demo night's queue chains all three kinds of work and checks clean before it runs."""
from __future__ import annotations

from spacrq.queue import load_queue, validate_queue
from spacrq.queue.demo import line_up_again, seed_demo


def test_demo_queue_chains_prepare_blockwise_measure_experiment_failure_and_skip(workspace):
    from spacrq.experiments.demo import seed_demo as declare_sweep
    declare_sweep(workspace)
    path = seed_demo(workspace)
    assert path.parent == workspace.queues
    queue = load_queue(path)
    assert not [p for p in validate_queue(queue) if p.is_error]
    assert [j.module for j in queue.jobs] == ["python", "blockwise", "blockwise", "python",
                                              "experiment", "command", "command"]
    assert queue.find("after-failure").depends_on == ["fails-on-purpose"]
    assert queue.find("threshold").settings["input"] == queue.find("smooth").settings["output"]
    assert seed_demo(workspace) == path  # never overwritten
    assert line_up_again(workspace) == path  # still to run: left as it is
    assert load_queue(path).to_dict() == queue.to_dict()
