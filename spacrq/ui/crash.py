"""Crash safety: what went wrong is written down, and the window carries on.

A window left open all night meets the unexpected: a slot that raises on a
file nobody foresaw, a thread that dies, a native crash in a library.  None
of these may pass unrecorded, and none of the Python ones may take the
window (or the night it watches) with it.  So:

* ``sys.excepthook`` and ``threading.excepthook`` write every uncaught
  exception, with its traceback, to ``crash.log`` and tell the window, which
  shows a message naming that file (never a modal dialog: nobody is there
  at 3 a.m. to press OK, and the next error must not queue behind it).  An
  error in a slot is written by a short-lived writer thread, not by the GUI
  thread it interrupted: formatting a traceback reads source files, and the
  log may sit on a slow disk.  The writer is not a daemon, so an error raised
  just before the process exits is still written;
* ``faulthandler`` writes a native crash's Python stacks to ``native-crash.log``;
* the application log ``spacrq.log`` rotates (1 MB, five old files kept) and
  is written by a thread of its own (a ``QueueListener``): a slot that logs a
  line only hands it over, it never waits on the disk.

They all live in the per-user state folder (:func:`logs_dir`), which the
About box names.  When the home folder cannot be written, a private folder
under the temporary directory is used instead, and when nothing can be
written the records still go to stderr.
"""
from __future__ import annotations

import collections
import faulthandler
import logging
import os
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from PySide6.QtCore import QObject, Signal

LOG_NAME = "spacrq.log"
CRASH_LOG = "crash.log"
NATIVE_LOG = "native-crash.log"
LOG_BYTES = 1_000_000
LOG_BACKUPS = 5

log = logging.getLogger("spacrq")


def state_dir() -> Path:
    """The per-user folder for spacrq's own state (logs, instance lock), not a workspace's."""
    given = os.environ.get("SPACRQ_STATE_DIR")
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state") / "spacrq"


def _private_folder(path: Path) -> Path | None:
    """``path`` created (0700 when new) and writable by us, or None."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        if path.is_symlink() or not os.access(path, os.W_OK | os.X_OK):
            return None
        probe = path / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        return path
    except OSError:
        return None


def logs_dir() -> Path:
    """Where the logs go: the state folder, else a private temporary folder."""
    for candidate in (state_dir() / "logs",
                      Path(tempfile.gettempdir()) / f"spacrq-{os.getuid()}" / "logs"):
        found = _private_folder(candidate)
        if found is not None:
            return found
    return Path(tempfile.gettempdir())


class CrashGuard(QObject):
    """Installs the hooks; ``crashed(summary, log_path)`` reaches the GUI thread as a signal."""

    crashed = Signal(str, str)

    def __init__(self, folder: Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.folder = Path(folder) if folder is not None else logs_dir()
        self.crash_log = self.folder / CRASH_LOG
        self.native_log = self.folder / NATIVE_LOG
        self.app_log = self.folder / LOG_NAME
        self._previous: tuple = ()
        self._native_file = None
        self._handler: logging.Handler | None = None  # what the logger writes to: a queue
        self._listener = None  # the thread writing the queued records to the log file
        self._opener: threading.Thread | None = None
        self._lock = threading.Lock()
        self._later: collections.deque = collections.deque()  # records for the writer thread
        self._later_lock = threading.Lock()
        self._writer: threading.Thread | None = None
        self.count = 0

    # -- installing ---------------------------------------------------------------
    def install(self, *, native: bool = True, log_file: bool = True) -> "CrashGuard":
        """Hook in; ``log_file=False`` leaves the application log for :meth:`start_log`
        (the window opens it after its first paint: the hooks matter from the start,
        the rotating log can wait a few hundred milliseconds)."""
        _private_folder(self.folder)  # made here when a caller named it; failing is handled below
        self._previous = (sys.excepthook, threading.excepthook)
        sys.excepthook = self._sys_hook
        threading.excepthook = self._thread_hook
        if log_file:
            self.start_log()
        if native:
            self._start_faulthandler()
        return self

    def uninstall(self) -> None:
        self.flush(5.0)
        if self._previous:
            sys.excepthook, threading.excepthook = self._previous
            self._previous = ()
        if self._handler is not None:
            log.removeHandler(self._handler)
            if self._opener is not None:
                self._opener.join(5.0)
            if self._listener is not None:
                self._listener.stop()  # writes what is queued, then ends its thread
                for handler in self._listener.handlers:
                    handler.close()
            self._handler = self._listener = self._opener = None
        if self._native_file is not None:
            faulthandler.disable()
            self._native_file.close()
            self._native_file = None

    def start_log(self) -> None:
        """Log to ``spacrq.log`` from now on; the file is opened and written on other threads."""
        if self._handler is not None:
            return
        import logging.handlers
        import queue
        records: queue.SimpleQueue = queue.SimpleQueue()
        self._handler = logging.handlers.QueueHandler(records)
        log.addHandler(self._handler)
        log.setLevel(logging.INFO)
        self._opener = threading.Thread(target=self._open_log, args=(records,), name="spacrq-log-open",
                                        daemon=True)
        self._opener.start()

    def _open_log(self, records) -> None:
        """Open the rotating log and start writing the queued records to it (or to stderr)."""
        import logging.handlers
        try:
            handler: logging.Handler = logging.handlers.RotatingFileHandler(
                self.app_log, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
        except OSError:
            handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self._listener = logging.handlers.QueueListener(records, handler)
        self._listener.start()

    def _start_faulthandler(self) -> None:
        try:
            self._native_file = open(self.native_log, "a", encoding="utf-8")  # noqa: SIM115 (held for life)
            self._native_file.write(f"--- spacrq {os.getpid()} started {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            self._native_file.flush()
            faulthandler.enable(file=self._native_file, all_threads=True)
        except OSError:
            faulthandler.enable(all_threads=True)  # stderr, better than nothing

    # -- the hooks ----------------------------------------------------------------
    def _sys_hook(self, kind, value, tb) -> None:
        if issubclass(kind, KeyboardInterrupt):
            self._previous[0](kind, value, tb) if self._previous else None
            return
        self.record_later(kind, value, tb, where="the window")

    def record_later(self, kind, value, tb, where: str = "the window") -> None:
        """:meth:`record` on the writer thread (started when there is none), so the thread
        that met the error does not wait on the disk; records are written in order."""
        with self._later_lock:
            self._later.append((kind, value, tb, where))
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_later, name="spacrq-crash-log")
                self._writer.start()

    def _write_later(self) -> None:
        while True:
            with self._later_lock:
                if not self._later:
                    self._writer = None
                    return
                kind, value, tb, where = self._later.popleft()
            self.record(kind, value, tb, where)

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the records still to be written; True when none are."""
        with self._later_lock:
            writer = self._writer
        if writer is not None:
            writer.join(timeout)
            return not writer.is_alive()
        return True

    def _thread_hook(self, args) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "a thread"
        self.record(args.exc_type, args.exc_value, args.exc_traceback, where=f"thread {name}")

    def record(self, kind, value, tb, where: str = "the window") -> None:
        """Write the traceback to the crash log and tell the window; never raises."""
        text = "".join(traceback.format_exception(kind, value, tb))
        summary = f"{kind.__name__}: {value}" if str(value) else kind.__name__
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            with self._lock, open(self.crash_log, "a", encoding="utf-8") as out:
                out.write(f"--- {stamp} uncaught in {where} (pid {os.getpid()})\n{text}\n")
            where_logged = str(self.crash_log)
        except OSError:
            sys.stderr.write(text)
            where_logged = "stderr"
        log.error("uncaught in %s: %s (traceback in %s)", where, summary, where_logged)
        self.count += 1
        try:
            self.crashed.emit(f"{summary} (in {where})", where_logged)
        except RuntimeError:  # the guard's Qt side is gone (shutting down)
            pass
