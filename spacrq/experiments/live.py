"""What a terminal shows of a running experiment: steps done of total, the step in flight, ETA.

One :class:`~spacrq.experiments.replay.RunWatch` per display reads only the
journal lines written since the last look, so following a ten-hour run for
ten hours costs what following it for a minute does.
"""
from __future__ import annotations

import os

from spacrq.experiments.replay import RunWatch
from spacrq.fmt import duration
from spacrq.terminal import Frame, bar

#: states after which a run will not move again without a person
ENDED = ("completed", "canceled", "aborted", "failed", "interrupted")


class RunLines:
    """The lines of one run, read incrementally each time it is called."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.watch = RunWatch(run_dir)
        self.status: dict = {}

    def __call__(self) -> list[str]:
        status = self.watch.status()
        self.status = status
        progress = self.watch.progress(status)
        done, total = progress["completed"], progress["total"] or None
        eta = progress.get("eta_s")
        elapsed = progress.get("elapsed_s")
        head = (f"{status.get('run_id')}: {status.get('state')}, {done} of {total or '?'} steps "
                f"{bar(done, total)}")
        if elapsed is not None:
            head += f"  elapsed {duration(elapsed)}"
        if eta is not None and status.get("state") == "paused":
            head += f"  paused ({duration(eta)} of steps left once it continues)"
        elif eta is not None:
            head += f"  ETA {duration(eta)}"
        lines = [head]
        flight = progress.get("in_flight") or {}
        if flight:
            step = progress.get("step") or {}
            detail = ""
            if isinstance(step.get("fraction"), (int, float)):
                detail = f" ({step['fraction'] * 100:.0f}%)"
            elif step.get("message"):
                detail = f" ({str(step['message'])[:80]})"
            lines.append(f"  step {flight.get('step_id')} {flight.get('op') or ''}{detail}".rstrip())
        problem = status.get("problem") or status.get("control_problem")
        if problem:
            lines.append(f"  note: {problem}")
        return lines

    def frame(self) -> Frame:
        lines = self()
        state = self.status.get("state")
        ended = state in ENDED
        return Frame(tuple(lines), ended=ended, exit_code=0 if state == "completed" else 1)
