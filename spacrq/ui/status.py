"""The status bar's standing line: what is running now, across the three panes.

Each pane says what it is running from what it already holds in memory (its
last snapshot) through :meth:`spacrq.ui.pane_base.PaneBase.running_now`; this
joins their answers once a second and reads no file.  A pane that is still
loading says nothing.
"""
from __future__ import annotations

from typing import Mapping

RUNNING = ("running", "stopping")


def running_summary(panes: Mapping[str, object]) -> str:
    parts: list[str] = []
    for pane in panes.values():
        running_now = getattr(pane, "running_now", None)  # a placeholder while loading has none
        if callable(running_now):
            parts.extend(running_now())
    return "Running — " + " · ".join(parts) if parts else "Nothing running"


def first_few(names: list[str], most: int = 3) -> str:
    """``"a, b, c …"``: at most ``most`` names, and a mark when there are more."""
    return ", ".join(names[:most]) + (" …" if len(names) > most else "")
