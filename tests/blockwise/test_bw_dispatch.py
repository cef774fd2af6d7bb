"""When an executor's dispatch loop ends: the one rule the local and the dask executor share."""
from __future__ import annotations

from types import SimpleNamespace

from spacrq.blockwise.local import dispatch_finished


class FakeRun:
    """Just the schedule answers ``dispatch_finished`` asks for, and a record of unstalling."""

    def __init__(self, *, finished=False, stalled=False, ready=()):
        self.schedule = SimpleNamespace(finished=lambda: finished, stalled=lambda: stalled)
        self.tasks = [SimpleNamespace(sched=SimpleNamespace(ready=list(r))) for r in ready]
        self.unstalled = 0

    def unstall(self):
        self.unstalled += 1


def test_a_finished_or_stopping_run_ends_the_loop():
    assert dispatch_finished(FakeRun(finished=True), stopping=False)
    assert dispatch_finished(FakeRun(ready=[[1, 2]]), stopping=True)


def test_a_stalled_run_is_unstuck_and_goes_round_again():
    run = FakeRun(stalled=True, ready=[[]])
    assert not dispatch_finished(run, stopping=False)
    assert run.unstalled == 1


def test_blocks_ready_to_send_keep_the_loop_going_and_none_ready_ends_it():
    assert not dispatch_finished(FakeRun(ready=[[], [7]]), stopping=False)
    assert dispatch_finished(FakeRun(ready=[[], []]), stopping=False)
