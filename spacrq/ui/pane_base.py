"""What every pane shares: its watch, the poller that drives it, numbered requests, shutdown.

A pane is a thin window over a :class:`spacrq.watching.Watch`.  This base
owns the watch's lifecycle so the three panes cannot drift apart:

* :meth:`PaneBase.start_watch` starts one :class:`~spacrq.ui.poller.Poller`
  (a plain thread, parented to the pane) calling ``watch.poll(view)``;
* :meth:`PaneBase.set_view` changes what the watch looks at (a file, a run,
  a job) and polls at once;
* :meth:`PaneBase.ask` numbers an action, submits it to the watch and polls
  at once; its :class:`~spacrq.watching.Outcome` comes back through
  :meth:`PaneBase.outcome_arrived` with the same token;
* every snapshot goes to :meth:`PaneBase.show_snapshot`, after its outcomes;
* :meth:`PaneBase.shutdown` stops the poller and closes the watch within a
  budget (one second by default) and says whether both ended — the window
  closes on time even in the middle of a heavy poll.

The pane reads no file itself: everything it shows comes from snapshots.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from spacrq.ui.poller import Poller
from spacrq.watching import Outcome, Watch

__all__ = ["PaneBase", "SHUTDOWN_BUDGET"]

#: seconds a pane may take to stop its poller and close its watch
SHUTDOWN_BUDGET = 1.0


def outcomes_of(snapshot: Any) -> tuple[Outcome, ...]:
    """The outcomes a snapshot carries (an attribute, or a key of a mapping)."""
    if isinstance(snapshot, Mapping):
        found = snapshot.get("outcomes", ())
    else:
        found = getattr(snapshot, "outcomes", ())
    return tuple(found or ())


class PaneBase(QWidget):
    """A pane over one watch; subclasses implement :meth:`show_snapshot`."""

    #: one sentence for the status bar and the tray
    notify = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.watch: Watch | None = None
        self.poller: Poller | None = None
        self._token = 0
        self._waiting: dict[int, str] = {}
        self._view: dict[str, Any] = {}
        self._shut = False

    # -- lifecycle ----------------------------------------------------------------
    def start_watch(self, watch: Watch, interval: float, **view: Any) -> None:
        """Start polling ``watch`` every ``interval`` seconds, looking at ``view``."""
        self.watch = watch
        self._shut = False
        self._view.update(view)
        self.poller = Poller(watch.poll, interval, self)
        self.poller.snapshot.connect(self._snapshot_arrived)
        self.poller.error.connect(self._error_arrived)
        self.poller.request(**self._view)
        self.poller.start()

    def begin_shutdown(self) -> None:
        """Tell the poller and the watch to stop, without waiting for either.

        The window calls this on every pane before waiting for any, so the
        polls of all three wind down side by side instead of one after another.
        """
        self._shut = True
        if self.poller is not None:
            self.poller.halt()
        if self.watch is not None:
            self.watch.close(0.0)  # sets the watch's closing flag; waits for nothing

    def shutdown(self, budget: float = SHUTDOWN_BUDGET) -> bool:
        """Stop the poller and close the watch within ``budget`` seconds.

        True when both ended in time; a watch that could not close in time
        is left to finish on its own (the poller thread is a daemon, and
        every run the pane started goes on regardless).
        """
        deadline = time.monotonic() + max(0.0, budget)
        self._shut = True  # a snapshot still queued for the GUI thread is not shown
        ok = True
        if self.poller is not None:
            self.poller.halt()
        if self.watch is not None:
            ok = bool(self.watch.close(max(0.0, deadline - time.monotonic()))) and ok
        if self.poller is not None:
            ok = self.poller.stop(max(0.0, deadline - time.monotonic())) and ok
        return ok

    # -- asking ---------------------------------------------------------------------
    @property
    def view(self) -> Mapping[str, Any]:
        return dict(self._view)

    def set_view(self, **changes: Any) -> None:
        """Change what the watch looks at, and poll at once."""
        self._view.update(changes)
        if self.poller is not None:
            self.poller.request(**changes)

    def ask(self, action: str, **args: Any) -> int:
        """Submit ``action`` to the watch; returns the token its outcome will carry.

        After :meth:`shutdown` nothing is submitted (the watch is closed) and
        the token is never answered.
        """
        self._token += 1
        token = self._token
        if self._shut:
            return token
        self._waiting[token] = action
        if self.watch is not None:
            self.watch.submit(token, action, **args)
        if self.poller is not None:
            self.poller.poll_now()
        return token

    def waiting_for(self, action: str | None = None) -> bool:
        """True while an action (``action``, or any) has no outcome yet."""
        if action is None:
            return bool(self._waiting)
        return action in self._waiting.values()

    def poll_now(self) -> None:
        if self.poller is not None:
            self.poller.poll_now()

    # -- answers ----------------------------------------------------------------------
    def _snapshot_arrived(self, snapshot: Any) -> None:
        if self._shut:
            return
        for outcome in outcomes_of(snapshot):
            self._waiting.pop(outcome.token, None)
            self.outcome_arrived(outcome)
        self.show_snapshot(snapshot)

    def _error_arrived(self, message: str) -> None:
        if not self._shut:  # a poll that failed as the pane shut down: nobody looks
            self.poll_failed(message)

    def running_now(self) -> tuple[str, ...]:
        """What this pane is running now, one short phrase each, for the status bar."""
        return ()

    def outcome_arrived(self, outcome: Outcome) -> None:
        """One action ended (subclasses say so to the operator)."""

    def show_snapshot(self, snapshot: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def poll_failed(self, message: str) -> None:
        """A poll raised (the poller keeps going): say so once."""
        self.notify.emit(f"Reading failed: {message}")
