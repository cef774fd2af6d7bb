"""``spacrq report``: the command's arguments, and its handler, which imports the report
(numpy, the store readers) only when the command runs — every other ``spacrq`` command
registers this one too, and must not wait for what only it uses.

The command itself is :mod:`spacrq.blockwise.report_show`.
"""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    """Add ``report`` to the ``spacrq`` command."""
    p = subparsers.add_parser(
        "report", help="print the Resource Utilization panel of blockwise runs",
        description="Print the run report of a runs.jsonl, a tracking store, or every "
                    "task in a folder of stores (default: the workspace's runs/ folder).")
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="a runs.jsonl, a tracking store folder, or a folder holding them")
    p.add_argument("--json", action="store_true",
                   help="print the reports as JSON ({task_id: report}) instead of the panel")
    p.add_argument("--task", metavar="ID", help="only this task")
    p.add_argument("--block", metavar="B",
                   help="print one block's tracking-store record: a spatial id (17) or a grid "
                        "coordinate (1,2); needs --task when PATH holds several tasks")
    p.add_argument("--history", action="store_true",
                   help="one row per run of each task (every line of its runs.jsonl), oldest first")
    p.add_argument("--max-workers", type=int, default=10, metavar="N",
                   help="rows of the per-worker table (default 10)")
    p.add_argument("--workspace", metavar="DIR",
                   help="workspace folder (default: $SPACRQ_WORKSPACE or ~/spacrq-workspace)")
    p.add_argument("--follow", action="store_true",
                   help="for a tracking store of a live run: show its progress until the run "
                        "ends, then print the report (exit 0 if every block is done)")
    p.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> int:
    from spacrq.blockwise.report_show import run_report as show
    return show(args)
