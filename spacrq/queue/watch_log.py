"""Following one job's log for the Queue pane, bounded and kept inside the queue's folder.

The pane shows the selected job's log, else the running job's, else the
runner's own log, which ends with the last run's summary — what ran, what
failed and why — which is what the operator reads in the morning.  A job
can print hundreds of megabytes, or one 100 MB line without a newline; the
view must get at most a few tens of kilobytes per poll, with short lines,
and be told plainly what was left out.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from spacrq.queue.runner import RUNNER_LOG
from spacrq.queue.store import logs_dir
from spacrq.queue.watch_rows import JobRow
from spacrq.runfiles import TextTail

__all__ = ["LOG_KEEP_CHARS", "LOG_LINE_CHARS", "LogNews", "LogFollower", "trim_log"]

#: the log view keeps at most this much of one poll's new text, and cuts
#: any single line longer than :data:`LOG_LINE_CHARS`
LOG_KEEP_CHARS = 64 * 1024
LOG_LINE_CHARS = 2000


def trim_log(text: str, keep: int = LOG_KEEP_CHARS, line_chars: int = LOG_LINE_CHARS) -> tuple[str, bool]:
    """Bound what one poll hands the log view: ``(text, trimmed)``.

    Only the last ``keep`` characters survive, and any line longer than
    ``line_chars`` is cut with a note of how much was left out.
    """
    trimmed = False
    if len(text) > keep:
        cut = text.find("\n", len(text) - keep)
        start = cut + 1 if 0 <= cut < len(text) - 1 else len(text) - keep
        text = f"[… {start:,} characters of log skipped; open the file to read them …]\n" + text[start:]
        trimmed = True
    if any(len(line) > line_chars for line in text.split("\n")):
        text = "\n".join(line[:line_chars] + f" […{len(line) - line_chars:,} more characters]"
                         if len(line) > line_chars else line for line in text.split("\n"))
    return text, trimmed


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except (ValueError, OSError):
        return False


@dataclass(frozen=True)
class LogNews:
    """What one poll found in the followed log: ``restarted`` means drop what is shown."""

    job_id: str
    path: str
    text: str = ""
    restarted: bool = False


@dataclass
class LogFollower:
    """The log being followed for one queue file, and where each job's log was found."""

    max_initial: int = 64 * 1024
    max_chunk: int = 256 * 1024
    _key: tuple[str, str] = ("", "")
    _tail: TextTail | None = None
    _found: dict[str, str] = field(default_factory=dict)

    def follow(self, queue_path: Path, job_id: str, rows: Sequence[JobRow]) -> LogNews:
        """The new text of ``job_id``'s log (or of the runner's own log when ``job_id`` is empty)."""
        if job_id:
            log_path = self._log_of(queue_path, job_id, rows)
        else:
            runner_log = logs_dir(queue_path) / RUNNER_LOG
            log_path = str(runner_log) if runner_log.is_file() else ""
        switched = (job_id, log_path) != self._key
        if switched:
            self._key = (job_id, log_path)
            self._tail = TextTail(log_path, self.max_initial, self.max_chunk) if log_path else None
        if self._tail is None:
            return LogNews(job_id, log_path, "", switched)
        text, restarted = self._tail.read()
        if restarted and text and not text.startswith("[…") and self._tail.offset > len(text.encode()):
            cut = text.find("\n")  # the tail began mid-file: drop the partial first line
            text = "[… earlier lines not shown; open the file to read them …]\n" + text[cut + 1:]
        text, trimmed = trim_log(text)
        return LogNews(job_id, log_path, text, switched or restarted or trimmed)

    def _log_of(self, queue_path: Path, job_id: str, rows: Sequence[JobRow]) -> str:
        """Where ``job_id``'s log is, kept inside the queue's folder; ``""`` when nowhere."""
        row = next((r for r in rows if r.job_id == job_id), None)
        if row is not None and row.log_path:
            candidate = Path(row.log_path)
            if not candidate.is_absolute():
                candidate = queue_path.parent / candidate
            if _inside(candidate, queue_path.parent):
                return str(candidate)
        cached = self._found.get(job_id)
        if cached and os.path.exists(cached):
            return cached
        folder = Path(logs_dir(queue_path))
        try:  # the runner names each log NN_<id>.log
            names = sorted(e.name for e in os.scandir(folder)
                           if e.name.endswith(f"_{job_id}.log") and e.name[:1].isdigit())
        except OSError:
            names = []
        found = str(folder / names[-1]) if names else ""
        if found and _inside(Path(found), folder):
            self._found[job_id] = found
            return found
        return ""
