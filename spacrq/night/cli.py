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
    from spacrq.night import write_report
    from spacrq.runfiles import RunFileError
    queue = Path(args.queue).expanduser()
    if not queue.is_file():
        raise CliError(f"queue file not found: {queue}; give the path of a *.queue.json file")
    try:
        path = write_report(queue, args.out)
    except (OSError, RunFileError) as exc:
        raise CliError(f"could not write the report: {exc}; choose another place with --out") from exc
    print(path)
    return 0
