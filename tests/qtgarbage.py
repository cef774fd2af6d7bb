"""Qt objects only Python owns, found in the garbage: the UI tests' check and its own test."""
from __future__ import annotations

import gc


def orphans_for_the_collector() -> list[str]:
    """Collect garbage here, on the GUI thread, naming each live Qt object only Python owned.

    Such an object is destroyed by whichever thread next runs the collector (a poller's,
    zarr's); destroyed there while the GUI thread works, it crashes the process.  Collected
    with DEBUG_SAVEALL to see them, then for real, so they die here, on the GUI thread.
    """
    from PySide6.QtCore import QObject
    from shiboken6 import Shiboken

    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
    finally:
        gc.set_debug(0)
    found = sorted(type(o).__name__ for o in gc.garbage
                   if isinstance(o, QObject) and Shiboken.isValid(o) and Shiboken.ownedByPython(o))
    gc.garbage.clear()
    gc.collect()
    return found
