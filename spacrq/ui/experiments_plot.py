"""The live plot of a run's records: a chosen field against another, or against step index.

A scientist plots the signal against what was swept (the demo's
``setpoint_mV``), so x defaults to the first swept field the records name
(a field echoing a step's ``params``), else the step index; x and y are
chosen from the record columns, and the choice is remembered per experiment
for the rest of the session (:attr:`RecordsPlot.remembered`).

One curve, created once.  Each field's values are kept with their step
index in numpy buffers grown by doubling; the plotted pair is aligned by
step index (a record lacking either field adds no point) and extended chunk
by chunk as records arrive, so an append costs the new records, never the
whole run.  Peak downsampling and clipping to the view keep a plot of a
ten-hour run as quick to draw as one of a minute.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from spacrq.ui.qt_lifetime import adopt_plot_orphans

#: the x choice that means "the record's own step index"
STEP_INDEX = "step index"


class _Series:
    """x/y buffers that grow by doubling."""

    def __init__(self) -> None:
        self.x = np.empty(256)
        self.y = np.empty(256)
        self.n = 0

    def clear(self) -> None:
        self.n = 0

    def extend(self, xs, ys) -> None:
        need = self.n + len(xs)
        if need > len(self.x):
            size = max(need, 2 * len(self.x))
            self.x = np.resize(self.x, size)
            self.y = np.resize(self.y, size)
        self.x[self.n:need] = xs
        self.y[self.n:need] = ys
        self.n = need

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.x[:self.n], self.y[:self.n]


def _label(name: str) -> str:
    return name.removeprefix("value.") if name else ""


def align(x_index, x_values, y_index, y_values) -> tuple[np.ndarray, np.ndarray]:
    """The (x, y) pairs of the records that hold both fields, in step-index order."""
    if x_index is None:  # x is the step index itself
        return np.asarray(y_index, dtype=np.float64), np.asarray(y_values, dtype=np.float64)
    _, ix, iy = np.intersect1d(np.asarray(x_index, dtype=np.float64),
                               np.asarray(y_index, dtype=np.float64),
                               assume_unique=True, return_indices=True)
    return np.asarray(x_values, dtype=np.float64)[ix], np.asarray(y_values, dtype=np.float64)[iy]


class RecordsPlot(QWidget):
    """Choosers for x and y over a pyqtgraph plot of the one against the other."""

    SYMBOL_LIMIT = 500

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.chooser = QComboBox()  # y: what is plotted
        self.chooser.setObjectName("plot-field")
        self.chooser.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.chooser.setToolTip("The record column plotted up the side")
        self.x_chooser = QComboBox()
        self.x_chooser.setObjectName("plot-x")
        self.x_chooser.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.x_chooser.setToolTip("The record column plotted along the bottom "
                                  "(the swept set-point, or the step index)")
        self.x_chooser.addItem(STEP_INDEX)
        self.chooser.currentTextChanged.connect(self._y_chosen)
        self.x_chooser.currentTextChanged.connect(self._x_chosen)
        self.plot = pg.PlotWidget(background="w")
        adopt_plot_orphans(self, self.plot.getPlotItem())  # see spacrq.ui.qt_lifetime
        self.plot.setLabel("bottom", STEP_INDEX)
        self.plot.getAxis("left").enableAutoSIPrefix(False)  # a reading reads as written
        self.plot.getAxis("bottom").enableAutoSIPrefix(False)
        self.plot.setDownsampling(auto=True, mode="peak")
        self.plot.setClipToView(True)
        self._pen = pg.mkPen("#2471a3", width=1)
        self.curve = self.plot.plot([], [], pen=self._pen, symbol="o", symbolSize=5,
                                    symbolBrush="#2471a3", symbolPen=None)
        top = QHBoxLayout()
        top.addWidget(QLabel("Plot"))
        top.addWidget(self.chooser)
        top.addWidget(QLabel("against"))
        top.addWidget(self.x_chooser)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.plot, 1)
        self._series: dict[str, _Series] = {}
        self._field = ""
        self._x = STEP_INDEX
        self._pair = _Series()  # the plotted (x, y), aligned by step index
        self._swept: list[str] = []
        self._filling = False   # choosers changed by the plot itself, not the operator
        self._joined = True     # a line through the points (x moves one way)
        self.experiment: str | None = None
        #: experiment -> (x, y) the operator chose, kept for the session
        self.remembered: dict[str, tuple[str, str]] = {}

    @property
    def field(self) -> str:
        return self._field

    @property
    def x_field(self) -> str:
        return self._x

    def set_experiment(self, name: str | None) -> None:
        """The experiment whose runs are plotted next (its remembered choice applies)."""
        self.experiment = name

    def point_count(self) -> int:
        return self._pair.n

    def curve_data(self) -> tuple[np.ndarray, np.ndarray]:
        """What the curve shows now: the aligned (x, y) of the chosen fields."""
        return self._pair.arrays()

    def clear(self) -> None:
        self._series = {}
        self._swept = []
        self._filling = True
        self.chooser.clear()
        self.x_chooser.clear()
        self.x_chooser.addItem(STEP_INDEX)
        self._filling = False
        self._field, self._x = "", STEP_INDEX
        self._pair.clear()
        self.curve.setData([], [])
        self.curve.setSymbol("o")
        self.plot.setLabel("left", "")
        self.plot.setLabel("bottom", STEP_INDEX)

    def append(self, columns: dict[str, Any]) -> None:
        """Add newly committed records, as :attr:`~spacrq.experiments.records.RecordsChunk.plot`
        gives them: ``{"fields", "series": {field: (step indices, values)}, "swept"}``.

        New numeric fields join both choosers.  Until the operator chose, y is
        the first measured field and x the first swept one (else the step
        index); a choice remembered for this experiment wins once its fields exist.
        """
        fields = columns.get("fields", [])
        fresh = [name for name in fields if name not in self._series]
        for name in fields:
            xs, ys = columns["series"][name]
            self._series.setdefault(name, _Series()).extend(xs, ys)
        for name in columns.get("swept", []):
            if name not in self._swept:
                self._swept.append(name)
        if fresh:
            self._filling = True
            self.chooser.addItems(fresh)
            self.x_chooser.addItems(fresh)
            self._filling = False
            if self._settle():
                return  # the choice moved: redrawn whole
        self._extend_pair(columns)

    def _settle(self) -> bool:
        """Pick the (x, y) to show from what exists now; True when it changed (and was redrawn)."""
        want = self.remembered.get(self.experiment or "")
        if want and want[1] in self._series and (want[0] == STEP_INDEX or want[0] in self._series):
            x, y = want
        else:
            x = self._x if self._x != STEP_INDEX or not self._swept else self._swept[0]
            if x != STEP_INDEX and x not in self._series:
                x = STEP_INDEX
            y = self._field if self._field in self._series else ""
            if not y:
                measured = [n for n in self._series if n not in self._swept] or list(self._series)
                y = measured[0] if measured else ""
        if (x, y) == (self._x, self._field):
            return False
        self._filling = True
        self.x_chooser.setCurrentText(x)
        self.chooser.setCurrentText(y)
        self._filling = False
        self._x, self._field = x, y
        self._rebuild()
        return True

    def _extend_pair(self, columns: dict[str, Any]) -> None:
        """Extend the plotted pair with this chunk's records only."""
        series = columns.get("series", {})
        if self._field not in series:
            return
        yi, yv = series[self._field]
        if self._x == STEP_INDEX:
            xs, ys = align(None, None, yi, yv)
        elif self._x in series:
            xs, ys = align(*series[self._x], yi, yv)
        else:
            return
        self._pair.extend(xs, ys)
        self._draw()

    def choose(self, name: str) -> None:
        """Plot ``name`` up the side (as the operator would choose it)."""
        self.chooser.setCurrentText(name)

    def choose_x(self, name: str) -> None:
        """Plot against ``name`` (a record column, or :data:`STEP_INDEX`)."""
        self.x_chooser.setCurrentText(name)

    def _remember(self) -> None:
        if not self._filling and self.experiment and self._field:
            self.remembered[self.experiment] = (self._x, self._field)

    def _y_chosen(self, name: str) -> None:
        if self._filling:
            return
        self._field = name
        self._remember()
        self._rebuild()

    def _x_chosen(self, name: str) -> None:
        if self._filling:
            return
        self._x = name or STEP_INDEX
        self._remember()
        self._rebuild()

    def _rebuild(self) -> None:
        """Align the chosen fields over every record held (a new choice)."""
        self.plot.setLabel("left", _label(self._field))
        self.plot.setLabel("bottom", _label(self._x))
        self._pair.clear()
        y = self._series.get(self._field)
        if y is not None:
            if self._x == STEP_INDEX:
                self._pair.extend(*y.arrays())
            elif self._x in self._series:
                self._pair.extend(*align(*self._series[self._x].arrays(), *y.arrays()))
        self._draw()

    def _draw(self) -> None:
        x, y = self.curve_data()
        if len(x) > self.SYMBOL_LIMIT and self.curve.opts.get("symbol") is not None:
            self.curve.setSymbol(None)  # markers on thousands of points only cost time
        # a line joins points in step order: only honest when x moves one way (a sweep)
        steps = np.diff(x) if len(x) > 1 else np.empty(0)
        ordered = bool(len(steps) == 0 or (steps >= 0).all() or (steps <= 0).all())
        if ordered != self._joined:
            self._joined = ordered
            self.curve.setPen(self._pen if ordered else None)
            if not ordered and self.curve.opts.get("symbol") is None:
                self.curve.setSymbol("o")  # without a line the points are all there is
        self.curve.setData(x, y)
