"""What every pane's watch is: the one protocol between a pane and the files it shows.

A *watch* is the Qt-free object a pane's poller thread drives.  Each area
(``queue``, ``experiments``, ``blockwise``) has one, in ``<area>/watch.py``,
and each answers the same three calls:

``poll(view) -> snapshot | None``
    Read what changed on disk for ``view`` (a plain mapping: which file,
    which run, which job the operator looks at), carry out the actions
    submitted since the last poll, and return an immutable snapshot for the
    GUI thread — or ``None`` when nothing changed.  Every snapshot has an
    ``outcomes`` tuple: one :class:`Outcome` per action carried out.

``submit(token, action, **args)``
    Ask for an action (save, run, stop, create a run…).  Thread-safe and
    instant: the action is carried out by the next poll, on the poller's
    thread.  ``token`` is the number the pane gave the request; the outcome
    carries it back.

``close(timeout) -> bool``
    Stop: any poll in flight returns at its next check of :meth:`WatchBase.
    interrupted`, and ``close`` waits up to ``timeout`` seconds for it.
    ``True`` when the watch is idle and holds nothing open.

Outcomes carry a :class:`Code`, never a sentence to match: a pane decides
what to do from ``outcome.code`` and shows ``outcome.message`` to the
operator as it is.

The pane's table rows are :class:`Row` values built on the poller thread with
their cells already as text; :func:`diff_rows` turns two row tuples into the
fewest table signals, so a poll that changes one status costs the view one
row.
"""
from __future__ import annotations

import enum
import threading
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

__all__ = ["Code", "Outcome", "Watch", "WatchBase", "Button", "Row", "RowDiff", "diff_rows"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Code(enum.Enum):
    """How an action ended, as a pane decides on it."""

    DONE = "done"            # carried out
    REFUSED = "refused"      # not allowed now (the state forbids it), nothing changed
    INVALID = "invalid"      # the input is wrong: the message says what to fix
    MISSING = "missing"      # the file, run or job it names is not there (any more)
    CONFLICT = "conflict"    # someone else changed or holds it (a lock, a live runner)
    FAILED = "failed"        # tried and failed (a write, a start): the message says why
    TIMED_OUT = "timed_out"  # did not answer in time (a manifest, a cluster)


@dataclass(frozen=True)
class Outcome:
    """The answer to one submitted action."""

    token: int
    action: str
    code: Code
    message: str = ""
    data: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @property
    def ok(self) -> bool:
        return self.code is Code.DONE


class Watch(Protocol):
    """What a pane's poller drives (see the module docstring)."""

    def poll(self, view: Mapping[str, Any]) -> Any: ...

    def submit(self, token: int, action: str, **args: Any) -> None: ...

    def close(self, timeout: float) -> bool: ...


class WatchBase:
    """The parts of the protocol every watch shares: the inbox and closing.

    A subclass implements ``_poll(view)`` and calls :meth:`take_submissions`
    to get the actions to carry out; long loops inside a poll check
    :meth:`interrupted` between files and return early when it is true.
    """

    def __init__(self) -> None:
        self._inbox: list[tuple[int, str, dict[str, Any]]] = []
        self._inbox_lock = threading.Lock()
        self._closing = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._released = False

    # -- the protocol -----------------------------------------------------
    def submit(self, token: int, action: str, **args: Any) -> None:
        with self._inbox_lock:
            self._inbox.append((int(token), str(action), dict(args)))

    def poll(self, view: Mapping[str, Any]) -> Any:
        self._idle.clear()  # busy before looking at the flag: a close now waits for this poll
        try:
            if self._closing.is_set():
                return None
            return self._poll(view)
        finally:
            self._idle.set()

    def close(self, timeout: float = 1.0) -> bool:
        self._closing.set()
        idle = self._idle.wait(max(0.0, timeout))
        if idle and not self._released:
            self._released = True
            self._release()
        return idle

    # -- for subclasses -----------------------------------------------------
    def _poll(self, view: Mapping[str, Any]) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _release(self) -> None:
        """Let go of what the watch holds (child processes, open files); called once idle."""

    def interrupted(self) -> bool:
        """True once :meth:`close` was called: a poll returns as soon as it sees it."""
        return self._closing.is_set()

    def pending(self) -> bool:
        with self._inbox_lock:
            return bool(self._inbox)

    def take_submissions(self) -> list[tuple[int, str, dict[str, Any]]]:
        """The actions submitted since the last call, oldest first."""
        with self._inbox_lock:
            taken, self._inbox = self._inbox, []
        return taken


@dataclass(frozen=True)
class Button:
    """One control of a pane: whether it can be used now, and the tooltip saying what it
    does or why it is off.  Each area's ``pane.controls()`` returns them."""

    enabled: bool
    tip: str = ""


@dataclass(frozen=True)
class Row:
    """One table row as a pane shows it, built off the GUI thread.

    ``key`` identifies the row across polls (a job id, a run id, a block);
    ``cells`` is the text of each column; ``tips`` the tooltip of each column
    (``""``: none); ``look`` names a style of the table's (a status word) that
    colours the columns marked to take it; ``sort`` holds a sort key per
    column where the text would sort wrongly (numbers, times); ``value`` is the
    area's own record for the row (what selection logic reads).
    """

    key: Hashable
    cells: tuple[str, ...]
    tips: tuple[str, ...] = ()
    look: str = ""
    sort: tuple[Any, ...] = ()
    value: Any = field(default=None, compare=False)

    def tip(self, column: int) -> str:
        return self.tips[column] if column < len(self.tips) else ""

    def sort_key(self, column: int) -> Any:
        if column < len(self.sort) and self.sort[column] is not None:
            return self.sort[column]
        return self.cells[column] if column < len(self.cells) else ""


@dataclass(frozen=True)
class RowDiff:
    """How a table goes from ``old`` rows to ``new`` rows, in the fewest signals.

    ``kind`` is ``"same"``, ``"update"`` (``changed`` rows only), ``"insert"``
    (``count`` rows at ``first``, then ``changed``), ``"remove"`` (``count``
    rows at ``first``, then ``changed``) or ``"reset"`` (anything else).
    ``changed`` indices refer to the *new* rows.
    """

    kind: str
    changed: tuple[int, ...] = ()
    first: int = 0
    count: int = 0


def _key(row: Any) -> Hashable:
    return row.key


def _changed_in_place(old: Sequence[Any], new: Sequence[Any]) -> tuple[int, ...]:
    return tuple(i for i, (a, b) in enumerate(zip(old, new)) if a is not b and a != b)


def diff_rows(old: Sequence[Any], new: Sequence[Any], key=_key) -> RowDiff:
    """The smallest change that turns ``old`` rows into ``new`` ones.

    Rows are matched by ``key(row)`` (``row.key`` by default).  A block of
    keys inserted or removed in one place becomes an insert or a remove;
    keys that kept their positions, or swapped within an equal-length span
    (a move up or down), become an update of the rows whose content differs.
    Only a reshuffle that is none of these resets the table.
    """
    if key is _key:  # the usual case, without a call per row (2000 rows, every poll)
        old_keys, new_keys = [r.key for r in old], [r.key for r in new]
    else:
        old_keys, new_keys = [key(r) for r in old], [key(r) for r in new]
    if old_keys == new_keys:
        changed = _changed_in_place(old, new)
        return RowDiff("update", changed) if changed else RowDiff("same")
    prefix = 0
    limit = min(len(old_keys), len(new_keys))
    while prefix < limit and old_keys[prefix] == new_keys[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < limit - prefix
           and old_keys[len(old_keys) - 1 - suffix] == new_keys[len(new_keys) - 1 - suffix]):
        suffix += 1
    gone = len(old_keys) - prefix - suffix
    came = len(new_keys) - prefix - suffix
    if gone == 0 and came > 0:
        aligned = list(old[:prefix]) + [None] * came + list(old[prefix:])
        changed = tuple(i for i, row in enumerate(new)
                        if not prefix <= i < prefix + came and aligned[i] != row)
        return RowDiff("insert", changed, prefix, came)
    if came == 0 and gone > 0:
        aligned = list(old[:prefix]) + list(old[prefix + gone:])
        changed = tuple(i for i, row in enumerate(new) if aligned[i] != row)
        return RowDiff("remove", changed, prefix, gone)
    if gone == came and sorted(map(repr, old_keys[prefix:prefix + gone])) == sorted(
            map(repr, new_keys[prefix:prefix + came])):
        return RowDiff("update", _changed_in_place(old, new))
    return RowDiff("reset")
