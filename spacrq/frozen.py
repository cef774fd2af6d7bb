"""The bundle's one program: the window, every ``spacrq`` command, and every child spacrq starts.

A PyInstaller bundle has no ``python`` to start a queue runner, a job, a
block worker or an experiment with: its ``sys.executable`` is the bundle
itself.  So the bundle's executable answers the three ways spacrq starts a
process, the way a Python interpreter would:

    spacrq-bundle -m MODULE ARGS…      runs MODULE as ``__main__`` (a job, a worker, an experiment)
    spacrq-bundle -c CODE ARGS…        runs CODE (the demo's small command jobs)
    spacrq-bundle [COMMAND ARGS…]      the ``spacrq`` command; no arguments opens the window

and :func:`spacrq.procs.module_argv` asks for exactly these.  Experiment
declarations name an interpreter (``python``); for the built-in and demo
experiments that is ``sys.executable``, which in the bundle is this
dispatcher, so they run from the bundle too.
"""
from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import tempfile
from typing import Sequence

__all__ = ["main", "dispatch", "home_problem", "is_frozen"]

#: flags a caller may put before ``-m``/``-c`` out of habit; harmless to ignore here
_IGNORED_FLAGS = {"-u", "-B", "-s", "-E", "-I", "-O", "-OO"}


def is_frozen() -> bool:
    """True inside a PyInstaller (or similar) bundle."""
    return bool(getattr(sys, "frozen", False))


def home_problem(environ: "os._Environ[str] | dict[str, str] | None" = None) -> str:
    """Why the window cannot keep its workspace, settings and logs in the home folder; ``""`` if it can.

    A bundle double-clicked in a kiosk account or started by a service with no
    home would otherwise die in Qt or in a ``mkdir`` with a traceback nobody
    reads; this says it in a sentence before anything is opened.
    """
    env = os.environ if environ is None else environ
    home = env.get("HOME", "")
    if not home:
        return ("HOME is not set, and spacrq keeps its workspace, settings and logs in the home "
                "folder; set HOME to a folder you can write (or start spacrq from a desktop session)")
    if not os.path.isdir(home):
        return (f"the home folder {home} does not exist; set HOME to a folder you can write "
                "and start spacrq again")
    if not _can_write(home):
        return (f"the home folder {home} cannot be written, and spacrq keeps its workspace, "
                "settings and logs there; start it as a user whose home is writable, or set HOME "
                "to a folder you can write")
    return ""


def _can_write(folder: str) -> bool:
    """Try it: permission bits say nothing for root, or on a read-only file system."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".spacrq-probe-", dir=folder)
    except OSError:
        return False
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return True


def _needs_home(argv: Sequence[str]) -> bool:
    """The window (and the desktop/autostart commands) keep state in the home folder."""
    return (argv[0] if argv else "") in ("", "gui", "demo", "install-desktop", "autostart")


def _restore_library_path() -> None:
    """Give children the library path the operator had, not the bundle's private one.

    The bootloader may point ``LD_LIBRARY_PATH`` at the bundle's own copies of
    system libraries; a ``command`` job (rsync, a lab tool) started with that
    would load them instead of its own.  Children that are the bundle again
    get the bundle's path from their own bootloader.
    """
    original = os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    if original is not None:
        os.environ["LD_LIBRARY_PATH"] = original
    elif is_frozen():
        os.environ.pop("LD_LIBRARY_PATH", None)


def _extra_paths() -> None:
    """``PYTHONPATH`` reaches the bundle too, so a ``python`` job can name the lab's own code."""
    for entry in reversed([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]):
        if entry not in sys.path:
            sys.path.insert(1, entry)


def run_module(module: str, args: Sequence[str]) -> int:
    """``python -m module args…``: the module runs as ``__main__`` with ``sys.argv`` as Python sets it."""
    sys.argv = [module, *args]
    sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:  # as python says it, without a traceback of the dispatcher
        print(f"{sys.executable}: No module named {module}", file=sys.stderr)
        return 1
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


def run_code(code: str, args: Sequence[str]) -> int:
    """``python -c code args…``."""
    sys.argv = ["-c", *args]
    sys.path.insert(0, "")
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(code, "<string>", "exec"), namespace)  # noqa: S102 — exactly what python -c does
    return 0


def dispatch(argv: Sequence[str]) -> int:
    """Run what ``argv`` (without the program name) asks for; returns the exit code."""
    argv = list(argv)
    while argv and argv[0] in _IGNORED_FLAGS:
        argv.pop(0)
    if argv and argv[0] in ("-m", "-c"):
        if len(argv) < 2:
            print(f"spacrq: {argv[0]} needs an argument, as for python {argv[0]}", file=sys.stderr)
            return 2
        _extra_paths()
        return (run_module if argv[0] == "-m" else run_code)(argv[1], argv[2:])
    if _needs_home(argv):
        problem = home_problem()
        if problem:
            print(f"spacrq: {problem}", file=sys.stderr)
            return 2
    from spacrq.cli import main as cli_main
    return cli_main(argv)


def main() -> None:
    """The bundle's entry point (packaging/spacrq_bundle.py calls it)."""
    _restore_library_path()
    from spacrq.queue import keeper
    keeper.MAY_KEEP = True  # this process is the spacrq command (see spacrq.cli.command)
    sys.exit(dispatch(sys.argv[1:]))
