"""How a run built on the authoring base hears what it is asked, between steps and during one.

The run reads ``control.json`` at every step boundary — where the journal has
just committed, the only coherent place to hold or stop — and journals the
operator's reports there.  An abort is the one request that must not wait for
the boundary: a watcher thread reads the file while a step is in flight and,
when the run owns its signals, interrupts the main thread (SIGUSR1), so even a
step blocked in a long ``time.sleep`` or driver call stops.  SIGTERM (what
spacrq's escalation and the queue's Abort send) is treated as an abort too,
so the journal says ``run_aborted`` instead of ending silently.
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from spacrq.experiments.errors import ABORT, CANCEL, CONTROL_FILE
from spacrq.runfiles import asked

__all__ = ["RunStopped", "StepControl"]


class RunStopped(Exception):
    """The operator (or a signal) stopped the run: ``kind`` is ``cancel`` or ``abort``."""

    def __init__(self, kind: str, reason: str = "", by: str = "operator") -> None:
        super().__init__(kind)
        self.kind, self.reason, self.by = kind, reason, by


class StepControl:
    """The control side of one run: boundary checks, the abort watcher and signals.

    :param run_dir: the run directory holding ``control.json``.
    :param journal: ``journal(event, **fields)`` appends to the run's journal.
    :param poll: seconds between reads while a step runs or the run is paused.
    """

    def __init__(self, run_dir: Path, journal: Callable[..., None], poll: float) -> None:
        self.run_dir = run_dir
        self.journal = journal
        self.poll = poll
        self.aborted = threading.Event()
        self.reason = ""
        self.by = "operator"
        self.reported = 0
        self._in_step = False
        self._terminated = False
        self._signals = False
        self._previous: dict[int, Any] = {}
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    # -- reading -------------------------------------------------------------

    def read(self) -> dict[str, Any]:
        """The control document; a garbled one asks nothing (a run never dies over it)."""
        return asked(self.run_dir, CONTROL_FILE)

    def skip_reports(self) -> None:
        """A resumed run does not journal again the reports its first start journaled."""
        reports = self.read().get("reports")
        self.reported = len(reports) if isinstance(reports, list) else 0

    def _journal_reports(self, doc: Mapping[str, Any]) -> None:
        reports = doc.get("reports")
        if not isinstance(reports, list):
            return
        for text in reports[self.reported:]:
            self.journal("report", text=str(text))
        self.reported = max(self.reported, len(reports))

    def _raise_if_stopped(self, doc: Mapping[str, Any]) -> None:
        if self.aborted.is_set() or self._terminated:
            raise RunStopped(ABORT, self.reason, self.by)
        if doc.get("stop") in (CANCEL, ABORT):
            raise RunStopped(str(doc["stop"]), str(doc.get("reason") or ""))

    def at_boundary(self, run_id: str) -> None:
        """Journal new reports; hold while paused; raise :class:`RunStopped` on a stop."""
        doc = self.read()
        self._journal_reports(doc)
        self._raise_if_stopped(doc)
        if not doc.get("paused"):
            return
        self.journal("run_paused", run_id=run_id)
        while True:
            self.aborted.wait(self.poll)
            doc = self.read()
            self._journal_reports(doc)
            self._raise_if_stopped(doc)
            if not doc.get("paused"):
                self.journal("run_resumed", run_id=run_id)
                return

    def sleep(self, seconds: float) -> None:
        """Wait, waking at once (with :class:`RunStopped`) when the run is aborted."""
        if self.aborted.wait(max(0.0, seconds)) or self._terminated:
            raise RunStopped(ABORT, self.reason, self.by)

    @contextmanager
    def step(self) -> Iterator[None]:
        """Mark a step in flight: only then may an abort interrupt the main thread."""
        if self.aborted.is_set() or self._terminated:
            raise RunStopped(ABORT, self.reason, self.by)
        self._in_step = True
        try:
            yield
        finally:
            self._in_step = False

    # -- watching ------------------------------------------------------------

    def start(self, install_signals: bool) -> None:
        """Start the abort watcher; with ``install_signals`` also take SIGTERM and SIGUSR1."""
        self._signals = bool(install_signals and hasattr(signal, "SIGUSR1")
                             and threading.current_thread() is threading.main_thread())
        if self._signals:
            self._previous = {signal.SIGUSR1: signal.signal(signal.SIGUSR1, self._on_abort),
                              signal.SIGTERM: signal.signal(signal.SIGTERM, self._on_term)}
        self._watcher = threading.Thread(target=self._watch, name="control-watch", daemon=True)
        self._watcher.start()

    def close(self) -> None:
        """Stop the watcher and give the signals back."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous, self._signals = {}, False

    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            if self._terminated and not self.aborted.is_set():
                self.aborted.set()  # wakes a pause or a sleep (the handler itself must not)
                continue
            doc = self.read()
            if doc.get("stop") == ABORT and not self.aborted.is_set():
                self.reason = str(doc.get("reason") or "")
                self.aborted.set()
                if self._signals and self._in_step:
                    os.kill(os.getpid(), signal.SIGUSR1)

    def _on_abort(self, signum: int, frame: Any) -> None:
        if self._in_step:
            self._in_step = False
            raise RunStopped(ABORT, self.reason, self.by)

    def _on_term(self, signum: int, frame: Any) -> None:
        # Only plain assignments here: the main thread may hold the Event's lock
        # when the signal lands, and setting the Event would deadlock on it.
        self.reason, self.by = "terminated by signal", "signal"
        self._terminated = True
        if self._in_step:
            self._in_step = False
            raise RunStopped(ABORT, self.reason, self.by)
