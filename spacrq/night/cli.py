"""``spacrq night-report QUEUE [--out FILE]``: write the morning report of a queue's night."""
from __future__ import annotations

import argparse
from pathlib import Path

from spacrq.cli import CliError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("night-report", help="write the morning report of a queue (one HTML page)",
                            description="Write one self-contained HTML page telling the whole "
                                        "night of a queue: the verdict, grouped failures, partial "
                                        "jobs, a timeline, each blockwise run's figures and charts, "
                                        "each experiment, the machine and where every log is.")
    parser.add_argument("queue", help="the queue file (*.queue.json)")
    parser.add_argument("--out", help="where to write it (default: morning-report.html beside the "
                                      "queue's logs)")
    parser.set_defaults(handler=_night_report)


def _night_report(args: argparse.Namespace) -> int:
    """Write the report; exit 2 when there is nothing to report on or nowhere to put it.

    A queue that can be read is reported whatever its night did (jobs whose
    logs, stores or runs are damaged are in the page with what could not be
    read: a damaged night is when a report is needed most).  A file that is
    not a readable queue is bad input, as ``queue status`` takes it: one
    sentence and exit 2, no page.  ``--out`` into a folder that does not
    exist is refused as ``queue add`` refuses it, never created at the root.
    """
    from spacrq.night import gather, write_report
    from spacrq.runfiles import RunFileError
    queue = Path(args.queue).expanduser()
    if not queue.is_file():
        raise CliError(f"queue file not found: {queue}; give the path of a *.queue.json file")
    out = Path(args.out).expanduser() if args.out else None
    if out is not None and not out.parent.is_dir():
        raise CliError(f"folder {out.parent} does not exist; create it first, or give --out a "
                       "file in a folder that exists")
    night = gather(queue)
    if night.queue is None:
        raise CliError(f"no report was written: {night.problem}")
    try:
        path = write_report(queue, out, night=night)
    except (OSError, RunFileError) as exc:
        raise CliError(f"could not write the report: {exc}; choose another place with --out") from exc
    print(path)
    return 0
