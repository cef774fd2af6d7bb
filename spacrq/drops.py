"""What a dropped file is, told from its name alone.

A pane decides what to do with files dragged onto it while the operator's
mouse button is still down, on the GUI thread, where no file may be read
(a dropped folder on a sleeping network share would freeze the window).  So
the kind of each path comes from its name only; whoever then opens it (the
pane's watch, on its own thread) checks what is really there and answers
with a sentence when the name lied.

The kinds:

* **queue** — ``*.queue.json``: a queue file, opened in the Queue pane;
* **settings** — ``*.csv`` or any other ``*.json``: a settings file (CSV
  ``Key,Value`` as spaCR writes it, or a JSON object);
* **store** — a Run Report source: ``runs.jsonl`` (or any ``*.jsonl``),
  a store's ``zarr.json``, or a folder — a name without a suffix, or
  ``*.zarr``, is taken for the tracking store folder it most likely is;
* anything else is **unknown**, and the pane says in one sentence what it
  takes.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

__all__ = ["Drop", "classify", "kind_of", "QUEUE", "SETTINGS", "STORE", "UNKNOWN"]

QUEUE = "queue"
SETTINGS = "settings"
STORE = "store"
UNKNOWN = "unknown"

_STORE_FILES = ("runs.jsonl", "zarr.json")


def kind_of(path: str | os.PathLike) -> str:
    """The kind of one path (:data:`QUEUE`, :data:`SETTINGS`, :data:`STORE` or
    :data:`UNKNOWN`), from its name."""
    name = PurePath(os.fspath(path).rstrip("/\\") or "/").name.lower()
    if not name:
        return UNKNOWN
    if name.endswith(".queue.json"):
        return QUEUE
    if name in _STORE_FILES or name.endswith(".jsonl"):
        return STORE
    suffix = PurePath(name).suffix
    if suffix in (".csv", ".json"):
        return SETTINGS
    if suffix in ("", ".zarr") and not name.startswith("."):
        return STORE
    return UNKNOWN


@dataclass(frozen=True)
class Drop:
    """The paths of one drop, sorted by kind (each in the order dropped)."""

    queues: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    stores: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.queues or self.settings or self.stores or self.unknown)

    @property
    def paths(self) -> tuple[str, ...]:
        return self.queues + self.settings + self.stores + self.unknown

    def only(self, *kinds: str) -> bool:
        """True when the drop holds something, and nothing but ``kinds``."""
        held = {QUEUE: self.queues, SETTINGS: self.settings, STORE: self.stores,
                UNKNOWN: self.unknown}
        return not self.empty and all(not paths for kind, paths in held.items()
                                      if kind not in kinds)


def classify(paths: Iterable[str | os.PathLike]) -> Drop:
    """Sort dropped ``paths`` by kind; duplicates are dropped, order is kept."""
    kinds: dict[str, list[str]] = {QUEUE: [], SETTINGS: [], STORE: [], UNKNOWN: []}
    seen: set[str] = set()
    for path in paths:
        text = os.fspath(path)
        if not text or text in seen:
            continue
        seen.add(text)
        kinds[kind_of(text)].append(text)
    return Drop(queues=tuple(kinds[QUEUE]), settings=tuple(kinds[SETTINGS]),
                stores=tuple(kinds[STORE]), unknown=tuple(kinds[UNKNOWN]))
