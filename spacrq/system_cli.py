"""``spacrq install-desktop`` and ``spacrq autostart …``: spacrq's place on the workstation.

    spacrq install-desktop [--remove]     the menu entry and icons, for this user
    spacrq autostart add QUEUE            resume this queue after a reboot (installs the autostart)
    spacrq autostart drop QUEUE           stop doing so
    spacrq autostart list                 the marked queues and what a reboot would do with each
    spacrq autostart install | remove     put the autostart in place / take it away
    spacrq autostart run                  what the autostart runs at login / boot
"""
from __future__ import annotations

import argparse

from spacrq.runfiles import RunFileError


def _fail(message: str):
    from spacrq.cli import CliError
    raise CliError(message)


def _install_desktop(args: argparse.Namespace) -> int:
    from spacrq.desktop import DesktopError, install_desktop, remove_desktop
    try:
        if args.remove:
            removed = remove_desktop()
            print(f"removed {len(removed)} file(s)" + (f": {removed[0]} …" if removed else ""))
            return 0
        written = install_desktop()
    except (DesktopError, FileNotFoundError) as exc:
        _fail(str(exc))
    entry = written[-1]
    print(f"installed {entry} and {len(written) - 1} icon(s); spacrq is in the application menu "
          "(log out and in again if the menu does not show it yet)")
    return 0


def _autostart(args: argparse.Namespace) -> int:
    from spacrq import autostart as au
    try:
        return _AUTOSTART[args.action](au, args)
    except (au.AutostartError, RunFileError) as exc:
        _fail(str(exc))
    except OSError as exc:  # a folder where a file belongs, a read-only home: say which and why
        where = exc.filename or "the autostart's files"
        _fail(f"could not write {where}: {exc.strerror or exc}; check that the folder is yours "
              "and writable, and that no file stands where a folder belongs")
    return 2


def _install(au, args) -> int:
    target, notes = au.install()
    print(f"installed {target}: at every start it resumes the queues marked with "
          "'spacrq autostart add QUEUE' whose runner died with the machine")
    for note in notes:
        print(f"  note: {note}")
    return 0


def _remove(au, args) -> int:
    removed = au.remove()
    print("removed " + (", ".join(map(str, removed)) if removed else "nothing (no autostart was installed)"))
    return 0


def _add(au, args) -> int:
    path = au.mark(args.queue)
    print(f"{path} will be resumed after a reboot")
    if not au.installed():
        _install(au, args)
    return 0


def _drop(au, args) -> int:
    if au.unmark(args.queue):
        print(f"{args.queue} will no longer be resumed after a reboot")
    else:
        print(f"{args.queue} was not marked")
    return 0


def _list(au, args) -> int:
    queues = au.marked()
    where = au.installed()
    print("autostart: " + (", ".join(map(str, where)) if where else
                           "not installed (spacrq autostart install)"))
    if not queues:
        print("no queue is marked to resume after a reboot (spacrq autostart add QUEUE)")
    for path in queues:
        why_not = au._interrupted(path) if path.is_file() else "the file is gone"
        print(f"  {path}: " + (f"would be left ({why_not})" if why_not else "would be resumed now"))
    return 0


#: longest boot wait ``autostart run --wait`` accepts: a wait must end, even for a share that never mounts
MAX_BOOT_WAIT = 24 * 3600.0


def _run(au, args) -> int:
    if not 0.0 <= args.wait <= MAX_BOOT_WAIT:  # also refuses nan
        _fail(f"--wait {args.wait} is not a number of seconds from 0 to {MAX_BOOT_WAIT:.0f}; "
              f"give how long to wait for queue files on a share, e.g. {au.BOOT_WAIT}")
    outcomes = au.resume_marked(notify=not args.no_notify, wait=args.wait)
    for outcome in outcomes:
        pid = f" as process {outcome.pid}" if outcome.pid else ""
        print(f"{outcome.action}{pid}: {outcome.queue} ({outcome.reason})")
    if not outcomes:
        print("no queue is marked to resume after a reboot")
    return 1 if any(o.action == "refused" for o in outcomes) else 0


_AUTOSTART = {"install": _install, "remove": _remove, "add": _add, "drop": _drop,
              "list": _list, "run": _run}


def register(sub: argparse._SubParsersAction) -> None:
    desk = sub.add_parser("install-desktop", help="put spacrq in the desktop's application menu",
                          description="Install spacrq's menu entry and icons for this user "
                                      "(under $XDG_DATA_HOME, default ~/.local/share).")
    desk.add_argument("--remove", action="store_true", help="take the entry and icons away")
    desk.set_defaults(handler=_install_desktop)

    auto = sub.add_parser("autostart", help="resume marked queues after a reboot",
                          description="A night that survives a reboot: mark a queue with 'add', "
                                      "and at the next start the autostart resumes it if its "
                                      "runner died with the machine.")
    actions = auto.add_subparsers(dest="action", metavar="ACTION", required=True,
                                  parser_class=type(auto))  # bad input: one sentence, exit 2
    for name, text in (("install", "put the autostart in place (systemd user unit, else XDG autostart)"),
                       ("remove", "take the autostart away"),
                       ("list", "the marked queues and what a reboot would do with each"),
                       ("run", "resume every marked queue whose runner died with the machine")):
        p = actions.add_parser(name, help=text)
        if name == "run":
            p.add_argument("--no-notify", action="store_true", help="resume without notifying")
            p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                           help="wait this long for marked queue files on a share mounted late")
    for name, text in (("add", "resume this queue after a reboot"),
                       ("drop", "no longer resume this queue after a reboot")):
        p = actions.add_parser(name, help=text)
        p.add_argument("queue", help="the queue file (*.queue.json)")
    auto.set_defaults(handler=_autostart)
