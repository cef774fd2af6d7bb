"""The UI tests' GUI-thread I/O guard: a slot that reads a file, scans a folder, starts a process
or imports a spacrq module fails its test, naming the spacrq line that did it.

The window must never wait on the disk: an overnight workstation's share can
take seconds to answer a ``stat``, and every slot, constructor and event
handler that touches it freezes the window for that long.  So while Qt
delivers an event on the main thread (:class:`GuardedApplication` counts how
deep ``notify`` is), an audit hook (:func:`sys.addaudithook`) writes down
every

* ``open`` of a file that is not part of Python or an installed library
  (spacrq's own files and every data file count; an imported library reading
  its own resources does not),
* ``os.scandir``, ``os.listdir``, ``glob.glob``,
* ``subprocess.Popen``,
* import of a spacrq module not imported yet (the import event, or the open
  of its source),

with the Qt event being delivered and the innermost spacrq frame.  The import
machinery's own folder listings are left out (an import is flagged as such),
and so is I/O whose innermost project frame is in a test file: a test's own
check, run from a signal, is the test's business.

A hook cannot be removed once added, so :func:`install` adds it once per
session and :data:`GUARD` ``.active`` switches it on for one UI test at a time.
"""
from __future__ import annotations

import os
import site
import sys
import sysconfig
import threading
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPACRQ = str(ROOT / "spacrq") + os.sep
TESTS = str(ROOT / "tests") + os.sep

#: the audit events watched; everything else returns at the first line of the hook
WATCHED = frozenset({"open", "os.scandir", "os.listdir", "glob.glob", "glob.glob/2",
                     "subprocess.Popen", "import"})
MAX_FLAGS = 50


def _library_roots() -> tuple[str, ...]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            roots.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    try:
        roots.update(site.getsitepackages())
    except AttributeError:  # pragma: no cover - a virtualenv without it
        pass
    roots.add(site.getusersitepackages())
    return tuple(sorted(os.path.join(os.path.realpath(r), "") for r in roots if r))


@dataclass(frozen=True)
class Flag:
    """One piece of work the GUI thread did while delivering a Qt event."""

    what: str      # "open", "os.scandir", "import", …
    target: str    # the file, folder, module or command
    during: str    # the Qt event being delivered and its receiver
    where: str     # the innermost spacrq frame: file:line in function

    def __str__(self) -> str:
        return f"{self.what} {self.target}  (during {self.during}; at {self.where})"


@dataclass
class Guard:
    """What the hook consults; one per session (:data:`GUARD`)."""

    active: bool = False
    installed: bool = False
    main: int = field(default_factory=lambda: threading.main_thread().ident or 0)
    delivering: list = field(default_factory=list)  # (receiver, event) being delivered
    flags: list[Flag] = field(default_factory=list)
    busy: bool = False
    libraries: tuple[str, ...] = field(default_factory=_library_roots)

    def reset(self) -> None:
        self.flags.clear()

    # -- the hook's slow path -------------------------------------------------------
    def consider(self, event: str, args: tuple) -> None:
        frame = sys._getframe(2)
        where, in_import = _innermost_project_frame(frame)
        if where is None or where.startswith(TESTS):
            return  # not spacrq's doing (a library's own work), or the test's own check
        target = self._target(event, args, in_import)
        if target is None:
            return
        what, target = target
        flag = Flag(what, target, self._during(), _relative(where))
        if flag not in self.flags and len(self.flags) < MAX_FLAGS:
            self.flags.append(flag)

    def _target(self, event: str, args: tuple, in_import: bool) -> tuple[str, str] | None:
        if event == "import":
            name = str(args[0]) if args else ""
            return ("import", name) if name.split(".")[0] == "spacrq" else None
        if event == "subprocess.Popen":
            argv = args[1] if len(args) > 1 else args[0]
            text = " ".join(map(str, argv)) if isinstance(argv, (list, tuple)) else str(argv)
            return "subprocess.Popen", text[:160]
        path = args[0] if args else None
        if event in ("os.scandir", "os.listdir") and path is None:
            path = "."
        if path is None or isinstance(path, int):
            return None  # an open of a descriptor already open
        try:
            text = os.fsdecode(os.fspath(path))
        except TypeError:
            return None
        full = os.path.realpath(text) if event == "open" else os.path.abspath(text)
        if in_import:
            if event == "open" and full.startswith(SPACRQ) and full.endswith((".py", ".pyc")):
                return "import", _module_of(full)  # importlib.import_module raises no import event
            return None  # the import machinery listing sys.path: an import is flagged as one
        if full.startswith(self.libraries):
            return None
        return event, text

    def _during(self) -> str:
        if not self.delivering:
            return "an event"
        receiver, event = self.delivering[-1]
        try:
            kind = event.type()
            name = getattr(kind, "name", str(kind))
            return f"{name} to {type(receiver).__name__}"
        except (RuntimeError, AttributeError):
            return "an event"


GUARD = Guard()


def _at(frame) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


def _innermost_project_frame(frame) -> tuple[str | None, bool]:
    """Where the I/O happened: the innermost frame in spacrq or the tests ("file:line in
    function") — for spacrq, followed by the outermost spacrq frame Qt called (the slot or
    handler) when that is another — and whether the import machinery is in between."""
    in_import = False
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith("<frozen importlib"):
            in_import = True
        elif name.startswith((SPACRQ, TESTS)) and not name.endswith(("gui_io.py", "conftest.py")):
            break
        frame = frame.f_back
    if frame is None:
        return None, in_import
    where, called = _at(frame), frame
    while called.f_back is not None and called.f_back.f_code.co_filename.startswith(SPACRQ):
        called = called.f_back
    if called is not frame and frame.f_code.co_filename.startswith(SPACRQ):
        where += f", from {_relative(_at(called))}"
    return where, in_import


def _relative(where: str) -> str:
    return where[len(str(ROOT)) + 1:] if where.startswith(str(ROOT)) else where


def _module_of(path: str) -> str:
    rel = Path(path).relative_to(ROOT)
    parts = [p for p in rel.with_suffix("").parts if p != "__pycache__"]
    parts[-1] = parts[-1].split(".")[0]  # name.cpython-311 -> name
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _hook(event: str, args: tuple) -> None:
    if event not in WATCHED:
        return
    guard = GUARD
    if not guard.active or not guard.delivering or guard.busy:
        return
    if threading.get_ident() != guard.main:
        return
    guard.busy = True
    try:
        guard.consider(event, args)
    except Exception:  # pragma: no cover - the guard must never break what it watches
        pass
    finally:
        guard.busy = False


def install() -> Guard:
    """Add the audit hook (once per session) and return the guard it consults."""
    if not GUARD.installed:
        sys.addaudithook(_hook)
        GUARD.installed = True
    return GUARD


def application_class():
    """The QApplication the UI tests run under: it notes each event it delivers on the main
    thread, so the hook knows when the GUI thread is in a slot or an event handler."""
    from PySide6.QtWidgets import QApplication

    class GuardedApplication(QApplication):
        def notify(self, receiver, event):  # noqa: N802 (Qt naming)
            if threading.get_ident() != GUARD.main:
                return super().notify(receiver, event)
            GUARD.delivering.append((receiver, event))
            try:
                return super().notify(receiver, event)
            finally:
                GUARD.delivering.pop()

    return GuardedApplication
