"""Operator notes on a run: ``notes.txt``, appended while the run goes or after it ended.

Plain text, so a note is readable with ``cat`` on the bench PC years later;
each note starts with a mark line ``--- <ISO time> by <who>`` and keeps its
own blank lines.  A note is appended without following a link: a
``notes.txt`` (or run folder) that is a symbolic link is refused in one
sentence rather than written where it points.  A text line that itself begins with the mark is escaped
with a backslash, so no note can forge the start of another.
"""
from __future__ import annotations

import os
import re
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from spacrq.experiments.errors import NOTE_MARK, NOTES_FILE, ExperimentError
from spacrq.runfiles import RunFileError, append_text, refuse_link

__all__ = ["add_note", "notes_of"]

#: Most of a notes file shown: a year of notes is far less; a planted file is cut.
MAX_NOTES_BYTES = 4 * 1024 * 1024
_HEADER = re.compile(r"^--- (\S+) by (.*)$")


def add_note(run_dir: str | os.PathLike, text: str, by: str, when: Any = None) -> None:
    """Append a note to the run's ``notes.txt`` (one write, fsync'd).

    :raises ExperimentError: when the note is empty or cannot be written.
    """
    body = str(text or "").replace("\r\n", "\n").strip("\n")
    if not body.strip():
        raise ExperimentError("a note cannot be empty; type what happened")
    author = " ".join(str(by or "").split()) or "operator"
    moment = when if isinstance(when, datetime) else datetime.now(timezone.utc)
    if moment.tzinfo is None:
        moment = moment.astimezone()
    lines = [("\\" + ln) if ln.startswith(NOTE_MARK) or ln.startswith("\\" + NOTE_MARK) else ln
             for ln in body.split("\n")]
    entry = f"{NOTE_MARK}{moment.isoformat(timespec='seconds')} by {author}\n" + "\n".join(lines) + "\n"
    path = Path(run_dir) / NOTES_FILE
    try:
        refuse_link(run_dir, "run folder")
    except RunFileError as exc:
        raise ExperimentError(str(exc)) from None
    if not Path(run_dir).is_dir():
        raise ExperimentError(f"there is no run folder {run_dir}; was the run renamed or removed?")
    try:
        append_text(path, entry)  # one write, fsync'd, never through a link at notes.txt
    except RunFileError as exc:
        raise ExperimentError(str(exc)) from None
    except OSError as exc:
        raise ExperimentError(f"could not write the note to {path}: {exc.strerror or exc}") from None


def notes_of(run_dir: str | os.PathLike) -> list[dict[str, str]]:
    """The run's notes, oldest first: each ``{"at", "by", "text"}``; ``[]`` without a file."""
    text = _notes_text(Path(run_dir) / NOTES_FILE)
    if not text:
        return []
    notes: list[dict[str, str]] = []
    current: dict[str, Any] | None = None
    for line in text.split("\n"):
        header = _HEADER.match(line)
        if header and _is_time(header.group(1)):
            if current is not None:
                notes.append(_finish(current))
            current = {"at": header.group(1), "by": header.group(2), "lines": []}
            continue
        if current is None:  # text before any mark: a note written by hand
            current = {"at": "", "by": "", "lines": []}
        if line.startswith("\\" + NOTE_MARK) or line.startswith("\\\\" + NOTE_MARK):
            line = line[1:]
        current["lines"].append(line)
    if current is not None:
        notes.append(_finish(current))
    return [n for n in notes if n["text"] or n["at"]]


def _notes_text(path: Path) -> str:
    """The notes file as text: a regular file only (a FIFO never blocks), the last
    :data:`MAX_NOTES_BYTES` of it, bytes that are not UTF-8 shown as replacement marks."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        start = max(0, st.st_size - MAX_NOTES_BYTES)
        data = os.pread(fd, MAX_NOTES_BYTES, start)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def _is_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
        return True
    except ValueError:
        return False


def _finish(note: dict[str, Any]) -> dict[str, str]:
    return {"at": note["at"], "by": note["by"], "text": "\n".join(note["lines"]).strip("\n")}
