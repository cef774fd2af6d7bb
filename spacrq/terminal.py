"""Long work shown as it happens on a terminal, and plain text everywhere else.

A scientist over ssh wants to see a 25-second blockwise run move, not wait
for a panel at the end; a cron job or a pipe wants the final summary and not
one escape sequence.  So a live display is drawn only when standard output is
a terminal (and not under CI, and not on a ``dumb`` terminal); otherwise
nothing is drawn and the summaries printed afterwards are exactly those of a
run without it.

The display is drawn with `rich <https://rich.readthedocs.io>`_: it redraws a
block of several lines in place (a task per line, the running job and its last
log line), knows the terminal's width, and is widely kept.  tqdm draws one bar
per line well but a multi-line status block poorly.

Every display here is a *poller*: a function that reads the run's own files
(progress snapshot, queue file, journal) and returns the lines to show.  So a
display never slows the work it shows, and ``--follow`` of a run started
elsewhere is the same code as the live view of a run started here.
"""
from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence, TextIO

from spacrq.fmt import duration

__all__ = ["live_enabled", "LiveLines", "follow", "Frame", "bar", "eta_text", "FOLLOW_STOPPED",
           "plain"]

#: exit code of ``--follow`` stopped with Ctrl-C (the run itself goes on)
FOLLOW_STOPPED = 130
#: polls in a row that may fail before ``--follow`` gives up (a wait always ends)
FOLLOW_MAX_FAILURES = 30

#: every control character but newline and tab, shown as "?": C0, DEL and C1
_CONTROLS = {c: "?" for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)] if c not in (0x09, 0x0A)}


def plain(text: str) -> str:
    """``text`` without control characters, so a name read from a run file cannot drive the terminal.

    Task ids, job names and log lines come from files anyone with write access
    to the folder could have planted; an escape sequence among them would
    clear the operator's screen, retitle the window or hide lines.
    """
    return text.translate(_CONTROLS)


def live_enabled(stream: TextIO | None = None) -> bool:
    """Whether to draw a live display on ``stream`` (stdout by default)."""
    stream = stream if stream is not None else sys.stdout
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return False
    if os.environ.get("TERM", "") == "dumb" or os.environ.get("SPACRQ_NO_LIVE"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


@dataclass(frozen=True)
class Frame:
    """What a display shows now, and whether the run it shows has ended."""

    lines: tuple[str, ...]
    ended: bool = False
    exit_code: int = 0
    #: what counts as a change worth a new line when the output is not a terminal: the lines
    #: without their clocks (elapsed, ETA), so a log of ``--follow`` gets a line per event
    #: rather than one a second (empty: the lines themselves)
    key: tuple = ()


def bar(done: int, total: int | None, width: int = 24) -> str:
    """``[#########...........]`` of ``done`` in ``total`` (plain characters)."""
    if not total or total <= 0:
        return "[" + "?" * width + "]"
    filled = max(0, min(width, round(width * done / total)))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def eta_text(done: int, total: int | None, elapsed: float) -> str:
    """``ETA 3m 12s`` from the rate so far; ``ETA —`` when nothing is done yet."""
    if not total or done <= 0 or elapsed <= 0 or done >= total:
        return "ETA —" if done < (total or 1) else "done"
    return f"ETA {duration(elapsed / done * (total - done))}"


class LiveLines:
    """A block of lines redrawn in place on a terminal while ``poll`` keeps answering.

    Used as a context manager around work done in the calling thread: a
    daemon thread calls ``poll()`` a few times a second and redraws what it
    returns; leaving the block draws the last frame once more and stops.
    Where :func:`live_enabled` is false it does nothing at all.
    """

    def __init__(self, poll: Callable[[], Sequence[str]], *, stream: TextIO | None = None,
                 interval: float = 0.25, enabled: bool | None = None) -> None:
        self.poll = poll
        self.stream = stream if stream is not None else sys.stdout
        self.interval = interval
        self.enabled = live_enabled(self.stream) if enabled is None else enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live = None

    def _lines(self) -> Sequence[str]:
        try:
            return list(self.poll())
        except Exception as exc:  # a display never ends the work it shows
            return [f"(live display: {exc})"]

    def _render(self, lines: Iterable[str]):
        from rich.text import Text
        return Text(plain("\n".join(lines)), no_wrap=True, overflow="ellipsis")

    def __enter__(self) -> "LiveLines":
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.live import Live
        console = Console(file=self.stream, force_terminal=True, highlight=False)
        self._live = Live(self._render(self._lines()), console=console, auto_refresh=False,
                          transient=False, redirect_stdout=False, redirect_stderr=False)
        self._live.start()
        self._thread = threading.Thread(target=self._run, name="spacrq-live", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._live.update(self._render(self._lines()), refresh=True)

    def __exit__(self, *exc: object) -> None:
        if not self.enabled or self._live is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self._live.update(self._render(self._lines()), refresh=True)
        finally:
            self._live.stop()


def follow(poll: Callable[[], Frame], *, stream: TextIO | None = None, interval: float = 1.0,
           enabled: bool | None = None, on_stop: str = "") -> tuple[Frame | None, int]:
    """Show ``poll()``'s frames until one says the run ended; ``(last frame, exit code)``.

    On a terminal the frame is redrawn in place; elsewhere each *changed* frame
    is printed once as plain lines (so a log of ``--follow`` reads like a
    history, not a flood).  Ctrl-C stops following and leaves the run alone:
    ``on_stop`` is printed (e.g. "the queue goes on; 'spacrq queue stop'
    stops it") and the exit code is :data:`FOLLOW_STOPPED`.
    """
    stream = stream if stream is not None else sys.stdout
    live = live_enabled(stream) if enabled is None else enabled
    last: Frame | None = None
    shown: tuple[str, ...] | None = None
    wake = threading.Event()

    def current() -> Sequence[str]:
        return last.lines if last is not None else ()

    failures = 0
    try:
        with LiveLines(current, stream=stream, interval=min(0.25, interval), enabled=live):
            while True:
                try:
                    last = poll()
                    failures = 0
                except Exception as exc:  # a damaged file is a line to show, never a traceback
                    failures += 1
                    last = Frame((f"(cannot read the run: {exc})",),
                                 ended=failures >= FOLLOW_MAX_FAILURES, exit_code=1)
                if not live and (last.key or last.lines) != shown:
                    stream.write(plain("\n".join(last.lines)) + "\n")
                    stream.flush()
                    shown = last.key or last.lines
                if last.ended:
                    break
                wake.wait(interval)
    except KeyboardInterrupt:
        if on_stop:
            print(f"stopped following: {on_stop}", file=sys.stderr)
        return last, FOLLOW_STOPPED
    return last, last.exit_code if last is not None else 1
