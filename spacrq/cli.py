"""The ``spacrq`` command.

With no arguments it opens the window on the default workspace.  Below it, the
headless commands a scientist scripts with::

    spacrq queue  add | validate | plan | run | status | stop | resume
    spacrq blockwise run SPEC
    spacrq report [PATH] [--json] [--task ID] [--block B] [--history]
    spacrq exp    manifest | list | create | run | pause | continue | stop | abort | resume | note | status
    spacrq gui    [--workspace DIR]

Every command answers bad input with one sentence on stderr that names the
fix, and exit code 2; it never prints a traceback and never overwrites
anything on the way out.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from spacrq import __version__

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

#: subcommand group -> module with ``register(subparsers)``
GROUPS = (
    "spacrq.queue.cli",
    "spacrq.blockwise.cli",
    "spacrq.blockwise.report_cli",
    "spacrq.experiments.cli",
    "spacrq.night.cli",
)


class CliError(Exception):
    """Bad input: printed as one sentence, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one sentence, exit 2, no usage dump
        raise CliError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spacrq", description="The overnight lab workstation.")
    parser.add_argument("--version", action="version", version=f"spacrq {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    gui = sub.add_parser("gui", help="open the window")
    gui.add_argument("--workspace", help="workspace folder (default: $SPACRQ_WORKSPACE or ~/spacrq-workspace)")
    gui.set_defaults(handler=_run_gui)
    for name in GROUPS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        module.register(sub)
    return parser


def _run_gui(args: argparse.Namespace) -> int:
    from spacrq.ui.app import main as gui_main
    argv = ["--workspace", args.workspace] if getattr(args, "workspace", None) else []
    return gui_main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        from spacrq.ui.app import main as gui_main
        return gui_main([])
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return EXIT_USAGE
        return int(handler(args) or 0)
    except CliError as exc:
        print(f"spacrq: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("spacrq: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `spacrq … | head` closed the pipe: not an error worth a traceback
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
