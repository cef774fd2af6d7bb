"""A run's committed step records, kept column by column.

A long run commits a hundred thousand records; kept as they are read — a
dict within a dict within a dict each — they cost the window memory, the
garbage collector long walks, and the table and plot a Python lookup per
cell.  Here each record field is a column: its numbers in one numpy array
(NaN where a record has none), the rare text values beside it by row.  The
plot takes a field's points as two array slices, the table formats one cell
when it is painted.

:func:`chunk_of` turns the records one poll read into a :class:`RecordsChunk`
(an immutable batch, what the poller hands the window); :class:`RecordColumns`
is the run's whole table the window keeps, grown chunk by chunk.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["FIXED", "RecordsChunk", "RecordColumns", "chunk_of", "field_value",
           "numeric_fields", "cell_text"]

#: the table columns every record has, first
FIXED = ("index", "step")

#: beyond this an int is not exact as a float64: it is kept as text
_EXACT = 2 ** 53


def _number(value: Any) -> bool:
    return (type(value) is int and -_EXACT <= value <= _EXACT) or type(value) is float


def field_value(record: Mapping[str, Any], name: str) -> float | None:
    """The number a record holds under a dotted ``name`` (``value``, ``value.x``, ``index``)."""
    node: Any = record
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if node is True or node is False or not isinstance(node, (int, float)):
        return None
    return float(node)


def numeric_fields(record: Mapping[str, Any]) -> list[str]:
    """The plottable fields of a record: its scalar value, or the numbers inside it.

    A result's own measurements come first; numbers that only echo the step's
    inputs (a key of its ``params``) or its position (a ``step``/``index``
    equal to its index) go last, so the plot starts on what was measured.
    """
    value = record.get("value")
    if isinstance(value, (int, float)) and value is not True and value is not False:
        return ["value"]
    if not isinstance(value, dict):
        return []
    provenance = record.get("provenance")
    params = provenance.get("params") if isinstance(provenance, dict) else None
    inputs = params if isinstance(params, dict) else {}
    index = record.get("index")
    measured, echoes = [], []
    for key, inner in value.items():
        if inner is True or inner is False or not isinstance(inner, (int, float)):
            continue
        echo = key in inputs or (key in ("step", "index", "i") and inner == index)
        (echoes if echo else measured).append(f"value.{key}")
    return measured + echoes


def cell_text(value: Any) -> str:
    """A value that is not a plain number, as its table cell reads."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)[:200]
    return str(value)


def _number_text(value: float, is_int: bool) -> str:
    if is_int and math.isfinite(value):
        return str(int(value))
    return f"{value:.6g}"


@dataclass(frozen=True)
class _Cells:
    """One column of a chunk: numbers (NaN: none here), which are ints, and text values by row."""

    numbers: np.ndarray
    ints: np.ndarray
    texts: Mapping[int, str]


@dataclass(frozen=True)
class RecordsChunk:
    """The records one poll read, column by column.

    ``first`` is the run's row number of its first record; ``reset`` says the
    records file was replaced (what the window holds belongs to the old one).
    ``columns`` are the table columns the records bring, in order of first
    appearance; ``fields`` the plottable fields (``value``, ``value.<key>``),
    measured ones first, and ``swept`` those echoing a step's input (what a
    scientist plots against).
    """

    first: int = 0
    count: int = 0
    reset: bool = False
    index: np.ndarray = field(default_factory=lambda: np.empty(0))
    step: tuple[str, ...] = ()
    saved_at: tuple[str, ...] = ()
    cells: Mapping[str, _Cells] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    values: Mapping[str, np.ndarray] = field(default_factory=dict)
    fields: tuple[str, ...] = ()
    swept: tuple[str, ...] = ()

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The (step index, value) points of field ``name`` in this chunk."""
        return _points(self.index, self.values.get(name))

    @property
    def plot(self) -> dict[str, Any]:
        """The chunk as the plot takes it: ``{"fields", "series": {field: (xs, ys)}, "swept"}``."""
        series = {name: self.series(name) for name in self.fields}
        fields = [name for name in self.fields if len(series[name][0])]
        return {"fields": fields, "series": {n: series[n] for n in fields},
                "swept": [n for n in self.swept if n in fields]}


def _points(index: np.ndarray, values: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    if values is None:
        return np.empty(0), np.empty(0)
    keep = ~(np.isnan(index) | np.isnan(values))
    return index[keep], values[keep]


class _Builder:
    """Gathers one column of a chunk: numbers by row, text values by row."""

    __slots__ = ("rows", "numbers", "int_rows", "texts")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.numbers: list[float] = []
        self.int_rows: list[int] = []
        self.texts: dict[int, str] = {}

    def put(self, row: int, value: Any) -> None:
        kind = type(value)
        if kind is float:
            self.rows.append(row)
            self.numbers.append(value)
        elif kind is int and -_EXACT <= value <= _EXACT:
            self.rows.append(row)
            self.numbers.append(value)
            self.int_rows.append(row)
        elif value is not None:
            self.texts[row] = cell_text(value)

    def cells(self, n: int) -> _Cells:
        numbers = np.full(n, np.nan)
        ints = np.zeros(n, dtype=bool)
        if self.rows:
            numbers[self.rows] = self.numbers
        if self.int_rows:
            ints[self.int_rows] = True
        return _Cells(numbers, ints, dict(self.texts))


def _values(rows: list[int], numbers: list[float], n: int) -> np.ndarray:
    out = np.full(n, np.nan)
    if rows:
        out[rows] = numbers
    return out


def chunk_of(records: Iterable[Any], first: int = 0, *, reset: bool = False,
             known: Sequence[str] = ()) -> RecordsChunk:
    """The records as a :class:`RecordsChunk` (anything that is not an object is skipped).

    A record whose value is a mapping gives one table column per key; any
    other record gives its top-level fields (its ``value`` as ``value``).
    Index and step always come from the record itself.  ``known`` lists the
    swept fields seen in earlier chunks of the run.
    """
    index: list[float] = []
    steps: list[str] = []
    saved: list[str] = []
    builders: dict[str, _Builder] = {}
    columns: dict[str, None] = {}
    plotted: dict[str, tuple[list[int], list[float]]] = {}
    fields: dict[str, None] = {}
    swept: dict[str, None] = dict.fromkeys(known)
    row = 0
    for record in records:
        if not isinstance(record, dict):
            continue
        at = record.get("index")
        index.append(float(at) if _number(at) else math.nan)
        provenance = record.get("provenance")
        step = provenance.get("step_id") if isinstance(provenance, dict) else None
        steps.append("" if step is None else str(step))
        saved.append(str(record.get("saved_at", "?")))
        value = record.get("value")
        if isinstance(value, dict):
            params = provenance.get("params") if isinstance(provenance, dict) else None
            for key, inner in value.items():
                key = str(key)
                if key not in FIXED:
                    columns.setdefault(key)
                    column = builders.get(key)
                    if column is None:
                        column = builders[key] = _Builder()
                    column.put(row, inner)
                if isinstance(params, dict) and key in params:
                    swept.setdefault(f"value.{key}")
            names = numeric_fields(record)
        else:
            columns.setdefault("value" if "value" in record else "type")
            for key, inner in record.items():
                if key in ("provenance", "index") or key in FIXED:
                    continue
                column = builders.get(key)
                if column is None:
                    column = builders[key] = _Builder()
                column.put(row, inner)
            names = ["value"] if _number(value) else []
        for name in names:
            fields.setdefault(name)
            y = value if name == "value" else value[name[6:]]
            if not _number(y):
                continue
            points = plotted.get(name)
            if points is None:
                points = plotted[name] = ([], [])
            points[0].append(row)
            points[1].append(y)
        row += 1
    n = row
    return RecordsChunk(
        first=first, count=n, reset=reset, index=np.array(index, dtype=np.float64),
        step=tuple(steps), saved_at=tuple(saved),
        cells={name: b.cells(n) for name, b in builders.items()},
        columns=tuple(columns),
        values={name: _values(r, v, n) for name, (r, v) in plotted.items()},
        fields=tuple(fields), swept=tuple(name for name in swept if name in fields or name in known))


class _Grow:
    """A numpy array grown by doubling (``fill`` where nothing was put)."""

    __slots__ = ("data", "n", "fill")

    def __init__(self, dtype=np.float64, fill: Any = np.nan) -> None:
        self.data = np.empty(256, dtype=dtype)
        self.n = 0
        self.fill = fill

    def extend_to(self, n: int) -> None:
        if n > len(self.data):
            grown = np.empty(max(n, 2 * len(self.data)), dtype=self.data.dtype)
            grown[:self.n] = self.data[:self.n]
            self.data = grown
        if n > self.n:
            self.data[self.n:n] = self.fill
            self.n = n

    def put(self, at: int, values: np.ndarray) -> None:
        self.extend_to(at)
        self.extend_to(at + len(values))
        self.data[at:at + len(values)] = values

    def view(self) -> np.ndarray:
        return self.data[:self.n]


class RecordColumns:
    """Every record of one run the window holds, column by column, grown chunk by chunk."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.count = 0
        self._index = _Grow()
        self._steps: list[str] = []
        self._saved: list[str] = []
        self._numbers: dict[str, _Grow] = {}
        self._ints: dict[str, _Grow] = {}
        self._texts: dict[str, dict[int, str]] = {}
        self._values: dict[str, _Grow] = {}
        self.columns: list[str] = list(FIXED)
        self.fields: list[str] = []
        self.swept: list[str] = []

    def add(self, chunk: RecordsChunk) -> list[str]:
        """Append ``chunk``'s records; returns the table columns it added.

        A chunk marked ``reset`` starts the run's records afresh: the caller
        clears first (a view must say so to its own watchers before).
        """
        at, n = self.count, chunk.count
        if not n:
            return []
        self._index.put(at, chunk.index)
        self._steps.extend(chunk.step)
        self._saved.extend(chunk.saved_at)
        for name, cells in chunk.cells.items():
            numbers = self._numbers.get(name)
            if numbers is None:
                numbers = self._numbers[name] = _Grow()
                self._ints[name] = _Grow(bool, False)
                self._texts[name] = {}
            numbers.put(at, cells.numbers)
            self._ints[name].put(at, cells.ints)
            if cells.texts:
                self._texts[name].update({at + r: t for r, t in cells.texts.items()})
        for name, values in chunk.values.items():
            self._values.setdefault(name, _Grow()).put(at, values)
        self.count = at + n
        shown = set(self.columns)
        added = [c for c in chunk.columns if c not in shown]
        self.columns.extend(added)
        self.fields += [f for f in chunk.fields if f not in self.fields]
        self.swept += [f for f in chunk.swept if f not in self.swept]
        return added

    # -- reading ----------------------------------------------------------------
    def cell(self, row: int, column: str) -> str:
        """The text of one table cell."""
        if not 0 <= row < self.count:
            return ""
        if column == "index":
            value = self._index.data[row]
            return "" if math.isnan(value) else _number_text(float(value), float(value).is_integer())
        if column == "step":
            return self._steps[row]
        numbers = self._numbers.get(column)
        if numbers is None or row >= numbers.n:
            return ""
        value = float(numbers.data[row])
        if not math.isnan(value):
            return _number_text(value, bool(self._ints[column].data[row]))
        return self._texts[column].get(row, "")

    def saved_at(self, row: int) -> str:
        return self._saved[row] if 0 <= row < self.count else ""

    def step(self, row: int) -> str:
        return self._steps[row] if 0 <= row < self.count else ""

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Every (step index, value) point of field ``name``."""
        values = self._values.get(name)
        if values is None:
            return np.empty(0), np.empty(0)
        values.extend_to(self.count)
        return _points(self._index.view(), values.view())
