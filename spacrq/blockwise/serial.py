"""The serial executor: every block in this process, one after another.

For debugging a process function (a breakpoint in it just works, a traceback
is a traceback) and for tiny runs where starting workers costs more than the
work.  Same schedule, same measurements, same tracking store and report as
the local executor — only there are no worker processes, so the report has
no worker lifecycle (``workers.count == 0``), and a timeout cannot be
enforced (said once in the log instead of pretending).
"""
from __future__ import annotations

import time
import traceback

from spacrq.blockwise.measure import BlockMeter

__all__ = ["run_serial"]


def run_serial(run) -> None:
    meter = BlockMeter()
    for tr in run.tasks:
        if tr.task.timeout is not None:
            run.log(tr, f"serial mode cannot stop a block after {tr.task.timeout:g} s; "
                        "the timeout applies with the local executor only")
    functions = {tr.task.task_id: tr.task.resolved_function() for tr in run.tasks}
    try:
        while not run.schedule.finished() and not run.stopping():
            progressed = False
            for tr in run.tasks:
                ids = run.schedule.take(tr.sched, 1)
                if not ids:
                    continue
                progressed = True
                sid = ids[0]
                block = tr.sched.grid.block(sid, tr.task.task_id)
                sent = time.time()
                error = None
                meter.start()
                try:
                    if functions[tr.task.task_id](block) is False:
                        error = "the process function returned False"
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    run.log(tr, f"block {sid} failed:\n{traceback.format_exc()}")
                wall, cpu, rss, read, write = meter.stop()
                if not tr.task.resource_tracking:
                    rss = read = write = -1
                run.results(tr, 0, [(sid, error, wall, cpu, rss, read, write, 0.0)], sent, time.time(),
                            worker_life=False)
                run.tick()
            if not progressed:
                if run.schedule.stalled():
                    run.unstall()
                    continue
                break
    finally:
        meter.close()
