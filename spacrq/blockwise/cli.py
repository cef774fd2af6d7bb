"""``spacrq blockwise run SPEC``: run the steps of a JSON spec from the command line.

Exit 0 when every block of every task is done (now or in an earlier run),
1 when any block failed or was orphaned (the report says which, and where the
logs are), 2 when the spec is bad (one sentence naming the fix; nothing ran).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["register", "run_spec"]


def register(subparsers) -> None:
    group = subparsers.add_parser("blockwise", help="blockwise tasks over zarr volumes")
    sub = group.add_subparsers(dest="blockwise_command", metavar="COMMAND")
    run = sub.add_parser("run", help="run the tasks of a JSON spec")
    run.add_argument("spec", help="JSON file: {\"tasks\": [{\"input\", \"output\", \"block_shape\", ...}]}")
    run.add_argument("--executor", choices=("local", "serial"), default=None,
                     help="override every task's executor (serial: in this process, for debugging)")
    run.add_argument("--json", action="store_true", help="print the run report as JSON")
    run.set_defaults(handler=run_spec)
    group.set_defaults(handler=lambda args: _usage(group))


def _usage(parser) -> int:
    parser.print_help(sys.stderr)
    return 2


def run_spec(args: argparse.Namespace) -> int:
    from spacrq.blockwise import spec
    from spacrq.blockwise.run import run_blockwise
    from spacrq.blockwise.tracking import TrackingError
    from spacrq.cli import CliError
    from spacrq.runfiles import RunFileError

    path = Path(args.spec).expanduser()
    try:
        steps = spec.load_spec(path)
        tasks = spec.build_tasks(steps, path.resolve().parent)
    except spec.SpecError as exc:
        raise CliError(str(exc)) from None
    except ValueError as exc:
        raise CliError(f"the spec cannot be turned into tasks: {exc}") from None
    from spacrq.blockwise.clusters import ClusterError, ClusterLost, executor_for
    from spacrq.blockwise.live import tasks_lines
    from spacrq.terminal import LiveLines
    try:  # the first step names the executor (and the dask cluster) for the whole spec
        with executor_for({**spec.DEFAULTS, **steps[0]}, args.executor) as (executor, cluster), \
                LiveLines(lambda: tasks_lines(t.tracking_path for t in tasks)):
            report = run_blockwise(tasks, executor=executor, dask_cluster=cluster)
    except ClusterLost as exc:  # some blocks ran and are kept: a failed run, not a bad spec
        print(f"spacrq: {exc}", file=sys.stderr)
        return 1
    except (TrackingError, RunFileError, ClusterError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps({"schema": 1, "kind": "blockwise-run", "succeeded": report.succeeded,
                          "outcome": report.outcome, "report": report.to_dict()}))
    else:
        panel = report.render(task_order=[t.task_id for t in tasks])
        if panel:
            print(panel)
        for tid, o in report.outcome.items():
            print(f"{tid}: {o['done']} done, {o['skipped']} skipped, {o['failed']} failed, "
                  f"{o['orphaned']} orphaned of {o['total']}")
    for line in report.problems():
        print(f"spacrq: {line}", file=sys.stderr)
    return 0 if report.succeeded else 1
