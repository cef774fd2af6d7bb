"""Reading and checking a queue file on the poller thread without freezing the window.

The poller shares the interpreter with the GUI thread, which calls into
Python for every cell it paints.  ``json.loads`` of a 2000-job queue file,
``Queue.from_dict`` of all its jobs or validating them in one go each hold
the interpreter for tens of milliseconds, and the window stutters for as
long.  The functions here do the same work as their namesakes in
:mod:`spacrq.queue.store`, :mod:`spacrq.queue.model` and
:mod:`spacrq.queue.validate`, a job (or a hundred) at a time, letting the
GUI thread in between (:func:`breathe`).  They give the same results; only
the pacing differs.
"""
from __future__ import annotations

import json
import re
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from spacrq.queue.model import Queue
from spacrq.queue.store import read_queue_document
from spacrq.queue.validate import Modules, validate_queue

__all__ = ["breathe", "short_turns", "parse_in_pieces", "build_queue", "read_document",
           "check_queue"]

_BREATH = threading.local()


def breathe(burst: float = 0.002, pause: float = 0.001) -> None:
    """Sleep ``pause`` after each ``burst`` seconds of work on this thread.

    Long loops on the poller call this once per item so the GUI thread gets
    the interpreter every few milliseconds.
    """
    now = time.perf_counter()
    last = getattr(_BREATH, "last", None)
    if last is None:
        _BREATH.last = now
    elif now - last > burst:
        time.sleep(pause)
        _BREATH.last = time.perf_counter()


@contextmanager
def short_turns(seconds: float = 0.0005) -> Iterator[None]:
    """Shorten the interpreter's thread switch interval while the core works here.

    Saving and checking a 2000-job queue is pure Python in code that cannot
    call :func:`breathe`; with the default 5 ms interval every call the GUI
    thread makes into Python meanwhile would wait up to 5 ms.
    """
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, seconds))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


class _BreathingModules(Modules):
    """Module look-ups that let the GUI thread in once per job validated."""

    def spec(self, name: str):
        breathe()
        return super().spec(name)


def check_queue(queue: Queue) -> list:
    """:func:`validate_queue`, yielding the interpreter between jobs."""
    return list(validate_queue(queue, _BreathingModules()))


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def parse_in_pieces(text: str) -> Any:
    """``json.loads(text)`` for a JSON object, decoding one top-level value (and
    one job of ``"jobs"``) at a time.

    Raises ``ValueError`` on anything it does not understand (the caller then
    reads the file the ordinary way, which names the fault).
    """
    def skip(i: int) -> int:
        return _SPACE.match(text, i).end()

    def past_comma(i: int, closer: str) -> int:
        """Step over the comma after an item; refuse a trailing comma or stray text."""
        i = skip(i)
        if text[i:i + 1] == ",":
            i = skip(i + 1)
            if text[i:i + 1] == closer:
                raise ValueError("trailing comma")
        elif text[i:i + 1] != closer:
            raise ValueError(f"expected ',' or {closer!r}")
        return i

    i = skip(0)
    if text[i:i + 1] != "{":
        raise ValueError("not an object")
    doc: dict[str, Any] = {}
    i = skip(i + 1)
    while text[i:i + 1] != "}":
        key, i = _DECODER.raw_decode(text, i)
        i = skip(i)
        if not isinstance(key, str) or text[i:i + 1] != ":":
            raise ValueError("bad key")
        i = skip(i + 1)
        if key == "jobs" and text[i:i + 1] == "[":
            value, i = [], skip(i + 1)
            while text[i:i + 1] != "]":
                item, i = _DECODER.raw_decode(text, i)
                value.append(item)
                breathe()
                i = past_comma(i, "]")
            i += 1
        else:
            value, i = _DECODER.raw_decode(text, i)
        doc[key] = value
        i = past_comma(i, "}")
    if skip(i + 1) != len(text):
        raise ValueError("trailing text")
    return doc


def build_queue(document: Any, chunk: int = 100) -> Queue:
    """``Queue.from_dict(document)``, a hundred jobs at a time.

    Only when every job already has its id and label (as every file spacrq
    writes does): minting ids needs the whole queue, so anything else is
    left to ``Queue.from_dict`` in one go.
    """
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if (not isinstance(jobs, list) or len(jobs) <= chunk
            or not all(isinstance(e, dict) and e.get("id") and e.get("label") for e in jobs)):
        return Queue.from_dict(document)
    head = dict(document, jobs=[])
    queue = Queue.from_dict(head)
    for start in range(0, len(jobs), chunk):
        queue.jobs.extend(Queue.from_dict(dict(head, jobs=jobs[start:start + chunk])).jobs)
        breathe()
    return queue


def read_document(path: Path) -> Any:
    """The queue file's JSON, parsed in pieces; the store's reader names any fault."""
    try:
        return parse_in_pieces(path.read_text(encoding="utf-8"))
    except (ValueError, OSError, RecursionError):
        return read_queue_document(path)  # raises QueueError with the one-sentence reason
