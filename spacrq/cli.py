"""The ``spacrq`` command.

With no arguments it opens the window on the default workspace.  Below it, the
headless commands a scientist scripts with::

    spacrq queue  add | validate | plan | run | status | stop | resume
    spacrq blockwise run SPEC
    spacrq report [PATH] [--json] [--task ID] [--block B] [--history]
    spacrq exp    manifest | list | create | run | pause | continue | stop | abort | resume | note | status
    spacrq gui    [--workspace DIR]
    spacrq demo   [--workspace DIR] [--headless]

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
    "spacrq.system_cli",
    "spacrq.night.cli",
)


class CliError(Exception):
    """Bad input: printed as one sentence, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one sentence, exit 2, no usage dump
        raise CliError(f"{message} (see '{self.prog} --help')")


#: commands that open the window: parsed without importing the headless groups, so the
#: window is not kept waiting for modules it does not use
WINDOW_COMMANDS = ("gui", "demo")


def build_parser(groups: Sequence[str] = GROUPS) -> argparse.ArgumentParser:
    parser = _Parser(prog="spacrq", description="The overnight lab workstation.")
    parser.add_argument("--version", action="version", version=f"spacrq {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    gui = sub.add_parser("gui", help="open the window")
    gui.add_argument("--workspace", help="workspace folder (default: $SPACRQ_WORKSPACE or ~/spacrq-workspace)")
    gui.set_defaults(handler=_run_gui)
    demo = sub.add_parser("demo", help="run the demo night: one queue driving all three kinds of work")
    demo.add_argument("--workspace", help="workspace folder (default: $SPACRQ_WORKSPACE or ~/spacrq-workspace)")
    demo.add_argument("--headless", action="store_true",
                      help="run it here and print what happened, even with a display")
    demo.set_defaults(handler=_run_demo)
    for name in groups:
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


def _has_display() -> bool:
    """Whether a window could be shown here (decided without importing Qt)."""
    if os.environ.get("QT_QPA_PLATFORM", "") in ("offscreen", "minimal"):
        return False
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def _run_demo(args: argparse.Namespace) -> int:
    """With a display: open the window and start the demo night in it.  Without: run it here."""
    from spacrq.workspace import WorkspaceError, open_workspace
    if _has_display() and not args.headless:
        from spacrq.ui.app import main as gui_main
        argv = ["--workspace", args.workspace] if args.workspace else []
        return gui_main(argv + ["--demo"])
    try:
        ws, notes = open_workspace(args.workspace)
    except WorkspaceError as exc:
        raise CliError(str(exc)) from None
    for note in notes:
        print(f"spacrq: note: {note}", file=sys.stderr)
    from spacrq.queue import QueueError
    from spacrq.queue.demo import demo_path, line_up_again
    from spacrq.queue.runner import runner_state, serve
    state = runner_state(demo_path(ws))
    if state and state.get("alive"):
        raise CliError(f"the demo night is already running in {ws.root} (process "
                       f"{state.get('pid')}); watch it with 'spacrq queue status {demo_path(ws)}'")
    path = line_up_again(ws)
    print(f"spacrq demo: running the demo night in {ws.root} (about half a minute)…", flush=True)
    try:
        result = serve(path, echo=True)  # prints the queue summary when it ends
    except QueueError as exc:
        raise CliError(str(exc).replace("\n", "\n  ")) from None
    from spacrq.blockwise.report import RunReport
    from spacrq.blockwise.report_show import collect
    report_notes: list[str] = []
    tasks = collect(ws.runs, report_notes)
    print("\nRun Report\n" + (RunReport(tasks).render() or "(no blockwise run measured)"))
    print(f"\nOpen the window on it (on a desktop, or over ssh -X): spacrq gui --workspace {ws.root}")
    expected = (len(result.partial), len(result.failed), len(result.skipped), len(result.not_run))
    return 0 if expected == (1, 1, 1, 0) else 1


def command() -> int:
    """The ``spacrq`` command itself (``python -m spacrq``, the installed script, the bundle):
    :func:`main` on this process's arguments, as the one process that may replace itself
    (a foreground ``queue run`` becomes its runner's keeper, see
    :mod:`spacrq.queue.keeper`); a test or a script calling :func:`main` never is."""
    from spacrq import steadylog
    from spacrq.queue import keeper
    steadylog.install()  # (output into a log file on a disk that fills never ends the command)
    keeper.MAY_KEEP = True
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and (argv[0] == "--workspace" or argv[0].startswith("--workspace=")):
        argv = ["gui", *argv]  # bare `spacrq` opens the window: so does `spacrq --workspace A`
    if not argv:
        from spacrq.ui.app import main as gui_main
        return gui_main([])
    try:
        os.getcwd()
    except FileNotFoundError:  # (every relative path would raise it, somewhere deep)
        print("spacrq: the folder this command was started in was removed; change to a "
              "folder that exists (cd) and run the command again", file=sys.stderr)
        return EXIT_USAGE
    try:
        parser = build_parser(() if argv[0] in WINDOW_COMMANDS else GROUPS)
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
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (stdout for the rest of the process)
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
