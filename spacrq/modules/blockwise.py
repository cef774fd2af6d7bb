"""The ``blockwise`` queue module: one blockwise step as an overnight queue job.

A job's settings name an input zarr array, an output array, a block shape and
context, and either a built-in operation (Gaussian smoothing, threshold,
downsample by 2) or ``package.module:function``; the job runs it with N worker
processes, writing a tracking store (``<workspace>/runs/<task_id>`` by default)
so the Run Report pane shows it, and a rerun of the job skips the blocks that
are done.  The job fails (exit 1) whenever any block failed or was orphaned.
Settings are described in :mod:`spacrq.blockwise.spec`.
"""
from __future__ import annotations

import os
from pathlib import Path

from spacrq.blockwise import spec
from spacrq.modules import ModuleSpec
from spacrq.problems import Problem

__all__ = ["MODULE", "BlockwiseFailed"]

#: failed blocks listed one by one in the queue's ledger; the rest are summed up
LEDGER_ITEMS = 200


class BlockwiseFailed(RuntimeError):
    """Some blocks failed or were orphaned; the message says how many and where to look."""


def _base(settings: dict, ctx=None) -> Path:
    workdir = getattr(ctx, "workdir", None) if ctx is not None else None
    return Path(workdir or os.getcwd())


def validate(settings: dict) -> list[Problem]:
    return spec.problems(settings, _base(settings))


def writes(settings: dict) -> list[str]:
    if not settings.get("output"):
        return []
    return [str(spec.output_folder(settings, _base(settings)))]


def run(settings: dict, ctx) -> dict:
    from spacrq.blockwise.run import run_blockwise

    base = _base(settings, ctx)
    found = [p for p in spec.problems(settings, base) if p.is_error]
    if found:
        raise spec.SpecError("; ".join(f"{p.message} ({p.fix})" for p in found))
    task = spec.build_task(settings, base)
    say = getattr(ctx, "log", None) or print
    say(f"blockwise {task.task_id}: {task.grid.size} blocks of {list(task.write_roi.shape)}, "
        f"{task.num_workers} worker(s), tracking store {task.tracking_path}")
    stop = getattr(ctx, "stop_requested", None)
    from spacrq.blockwise.clusters import describe, executor_for
    step = {**spec.DEFAULTS, **settings}
    if step["executor"] == "dask":
        say(f"blockwise {task.task_id}: on the {describe(step)}")
    with executor_for(step) as (executor, cluster):  # a cluster started for the job closes here
        report = run_blockwise([task], executor=str(executor), stop_requested=stop,
                               dask_cluster=cluster)
    panel = report.render()
    if panel:
        say(panel)
    counts = report.outcome[task.task_id]
    _account(getattr(ctx, "ledger", None), report, task, spec.output_folder(settings, base))
    if not report.succeeded:
        raise BlockwiseFailed(" ".join(report.problems()) or "the run was stopped before every block ran")
    say(f"blockwise {task.task_id}: {counts['done']} block(s) done, {counts['skipped']} skipped "
        f"(done before)")
    return {k: v for k, v in counts.items() if k != "log_dir"}


def _account(ledger, report, task, output: Path) -> None:
    """Tell the queue's ledger what the run did, so a partial result reads as partial.

    Blocks done (now or before) count as succeeded items; each failed block is
    a failed item with its error, each orphaned one names why.  The stamp lands
    beside the output array (``<output stem>.run_status.json``).
    """
    if ledger is None:
        return
    counts = report.outcome[task.task_id]
    ledger.n_succeeded += counts["done"] + counts["skipped"]
    errors = report.errors.get(task.task_id, {})
    for sid, message in list(errors.items())[:LEDGER_ITEMS]:
        ledger.failed(f"block {sid}", message, stage="blockwise")
    if len(errors) > LEDGER_ITEMS:
        ledger.failed(f"{len(errors) - LEDGER_ITEMS} more failed blocks",
                      "see the worker logs", stage="blockwise")
    if counts["orphaned"]:
        ledger.failed(f"{counts['orphaned']} orphaned blocks",
                      "they depend on failed blocks and were not run", stage="blockwise")
    ledger.stamp(output)


MODULE = ModuleSpec(
    name="blockwise",
    run=run,
    defaults={k: v for k, v in spec.DEFAULTS.items() if k != "upstream"},
    description="Process a zarr volume block by block with N workers (smooth, threshold, downsample or your function)",
    validate=validate,
    writes=writes,
    resumable=True,
    settings_help=spec.HELP,
)
