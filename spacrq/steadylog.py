"""Log streams that never end a process: a line the disk refuses is counted, not raised.

A detached runner writes its log — its stderr and stdout — into the queue's
logs folder, on the disk the night fills.  Python raises from ``print`` when
the write fails (``OSError: [Errno 28] No space left on device``), so the
very message saying "could not write the queue file; the run goes on" ended
the run instead, and a runner started on a full disk died before its first
job; and a pipe whose reader went away (``spacrq queue run q | logger``,
the logger restarted) ended the night with exit 0.  :func:`install` puts a
:class:`SteadyStream` in place of each standard stream that is not a
terminal — a log file, a pipe, a device: every write goes straight to it (no
buffer that a failed flush leaves half-full), a write it refuses is dropped,
and the next one that succeeds first says how many lines were lost, from
when, and why.  The night goes on whatever becomes of its output.  A
terminal is left as it is (one that hangs up sends SIGHUP, which the runner
takes as an abort).

Imports only the standard library's ``os`` and ``sys``: the job supervisor,
which the runner waits for at its start, installs it too.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO


class SteadyStream:
    """A text stream over a log file's descriptor whose writes never raise."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._fd = stream.fileno()
        self.encoding = getattr(stream, "encoding", None) or "utf-8"
        self.errors = "replace"
        self._lost = 0       # lines the file refused (a text without its newline counts once)
        self._since = ""     # when the first of them was refused
        self._why = ""
        self._torn = False   # a line was cut short: the next text starts on a fresh line
        self._open_line = False  # the last text lost did not end its line (counted already)

    def write(self, text: str) -> int:
        data = text.encode(self.encoding, "replace")
        if self._lost:
            note = (f"{chr(10) if self._torn else ''}spacrq: {self._lost} line(s) of this log "
                    f"could not be written, from {self._since} ({self._why})\n")
            if not self._put(note.encode(self.encoding, "replace")):
                self._count(data)
                return len(text)
            self._lost, self._torn, self._open_line = 0, False, False
        elif self._torn and data:
            self._torn = False
            data = b"\n" + data
        if not self._put(data):
            self._count(data)
        return len(text)

    def _put(self, data: bytes) -> bool:
        """Write all of ``data``; False (and the reason kept) when the file refused some."""
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except InterruptedError:
                continue
            except OSError as exc:
                if len(view) < len(data):
                    self._torn = True
                self._why = exc.strerror or str(exc)
                return False
            view = view[written:]
        return True

    def _count(self, data: bytes) -> None:
        if not self._lost and not self._open_line:
            self._since = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        lines = data.count(b"\n")
        if self._open_line and lines:  # (print's text, then its newline: one line)
            lines -= 1
        self._open_line = bool(data) and not data.endswith(b"\n")
        self._lost += lines + self._open_line

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Nothing is buffered: every write went to the file already."""

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    @property
    def buffer(self) -> Any:
        return self._stream.buffer

    @property
    def closed(self) -> bool:
        return False

    def close(self) -> None:
        """Left open: the descriptor is the process's own stream."""


def _may_fail(stream: Any) -> bool:
    """Whether ``stream`` is a descriptor that is not a terminal (a file, a pipe, a device)."""
    try:
        fd = stream.fileno()
        os.fstat(fd)
        return not os.isatty(fd)
    except (AttributeError, OSError, ValueError):
        return False


def install() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` steady where they are not terminals; what
    they held so far is flushed first (failing quietly: the disk may be full)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None or isinstance(stream, SteadyStream) or not _may_fail(stream):
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
        setattr(sys, name, SteadyStream(stream))
