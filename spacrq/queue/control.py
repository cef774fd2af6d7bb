"""The operator's requests to a running queue, read cheaply between and during jobs.

Requests travel through ``control.json`` in the queue's own logs folder (``{"stop":
"after_job" | "abort" | null}``), written by ``spacrq queue stop`` or the
window.  The runner looks at it between jobs and several times a second while
a job runs, so the look costs one ``stat`` unless the file changed.  A control
file that cannot be read (binary, not UTF-8, a list, ``null``, huge) means
"nothing asked"; ``report`` is told why once per change (the runner's log).
A SIGTERM
to the runner itself (a shutdown, ``kill``) is treated as an abort: the job
is stopped safely rather than orphaned.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from spacrq.runfiles import CONTROL_FILE, asked, control_problem, file_stamp

STOP_AFTER_JOB = "after_job"
ABORT = "abort"


class Control:
    def __init__(self, run_dir: str | os.PathLike | None,
                 report: Callable[[str], None] | None = None) -> None:
        self.run_dir = Path(run_dir) if run_dir else None
        self._file = str(self.run_dir / CONTROL_FILE) if self.run_dir else ""
        self.report = report
        self._seen: tuple[int, int, int] | None = None
        self._request: str | None = None
        self.signalled: str | None = None

    def request(self) -> str | None:
        """``'after_job'``, ``'abort'`` or None."""
        if self.signalled:
            return self.signalled
        if self.run_dir is None:
            return None
        key = file_stamp(self._file)
        if key is None:
            self._seen, self._request = None, None
            return None
        if key != self._seen:
            self._seen = key
            value = asked(self.run_dir).get("stop")
            known = isinstance(value, str) and value in (STOP_AFTER_JOB, ABORT)
            self._request = value if known else None
            problem = control_problem(self.run_dir) if value is None else None if known else (
                f"{self._file} asks stop={str(value)[:60]!r}, which is neither "
                f"{STOP_AFTER_JOB!r} nor {ABORT!r}")
            if problem and self.report is not None:
                self.report(f"{problem}; taken as nothing asked")
        return self._request

    def abort_requested(self) -> bool:
        return self.request() == ABORT

    def mark(self) -> tuple | None:
        """Where the requests stand now, for :meth:`aborted_since`."""
        return file_stamp(self._file) if self._file else None

    def aborted_since(self, mark: tuple | None) -> bool:
        """Whether an abort was asked after :meth:`mark` (a new request, or a signal)."""
        if self.signalled == ABORT:
            return True
        return bool(self._file) and file_stamp(self._file) != mark and self.request() == ABORT
