"""Give pyqtgraph's parentless menus a Qt parent, so they die with their plot on the GUI thread.

pyqtgraph builds each plot's right-click menus (``ViewBoxMenu``, the plot
options menu) and the ``WidgetGroup`` objects behind them without a Qt
parent, so only Python owns them.  Python frees them when its garbage
collector breaks the cycles they sit in, and that collector runs on
whichever thread happens to allocate: a poller's, zarr's.  Destroying a
menu there, while the GUI thread draws, brought the window down with a
segmentation fault.  Handing them to a widget of ours makes Qt destroy them
with that widget, on the GUI thread; Python then only drops empty wrappers.
"""
from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

#: set on every object adopted here: pyqtgraph's own menus, not spacrq's (tests tell them apart)
ADOPTED = "spacrq_pyqtgraph_own"


def _adopt(owner: QWidget, obj) -> None:
    if not isinstance(obj, QObject) or obj.parent() is not None:
        return
    obj.setProperty(ADOPTED, True)
    if isinstance(obj, QWidget):  # a menu stays a popup window of its own
        obj.setParent(owner, obj.windowFlags())
    else:
        obj.setParent(owner)


def adopt_plot_orphans(owner: QWidget, plot, *boxes) -> None:
    """Parent ``plot``'s (a ``pg.PlotItem``) and ``boxes``' (``pg.ViewBox``) menus to ``owner``."""
    _adopt(owner, getattr(plot, "ctrlMenu", None))
    _adopt(owner, getattr(plot, "stateGroup", None))
    for box in (getattr(plot, "vb", None), *boxes):
        menu = getattr(box, "menu", None)
        _adopt(owner, menu)
        for group in getattr(menu, "widgetGroups", ()):
            _adopt(owner, group)
