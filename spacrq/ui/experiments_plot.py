"""The live plot of a run's records: one chosen field against step index.

One curve, created once; new records extend two numpy buffers (grown by
doubling, so appending is amortised constant time) and the curve is given the
filled part with ``setData``.  Peak downsampling and clipping to the view keep
a plot of a ten-hour run as quick to draw as one of a minute.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget




class _Series:
    """x/y buffers that grow by doubling."""

    def __init__(self) -> None:
        self.x = np.empty(256)
        self.y = np.empty(256)
        self.n = 0

    def clear(self) -> None:
        self.n = 0

    def extend(self, xs: list[float], ys: list[float]) -> None:
        need = self.n + len(xs)
        if need > len(self.x):
            size = max(need, 2 * len(self.x))
            self.x = np.resize(self.x, size)
            self.y = np.resize(self.y, size)
        self.x[self.n:need] = xs
        self.y[self.n:need] = ys
        self.n = need


class RecordsPlot(QWidget):
    """A field chooser over a pyqtgraph plot of that field against step index."""

    SYMBOL_LIMIT = 500

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.chooser = QComboBox()
        self.chooser.setObjectName("plot-field")
        self.chooser.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.chooser.currentTextChanged.connect(self._field_chosen)
        self.plot = pg.PlotWidget(background="w")
        self.plot.setLabel("bottom", "step index")
        self.plot.getAxis("left").enableAutoSIPrefix(False)  # a reading reads as written
        self.plot.setDownsampling(auto=True, mode="peak")
        self.plot.setClipToView(True)
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#2471a3", width=1),
                                    symbol="o", symbolSize=5, symbolBrush="#2471a3",
                                    symbolPen=None)
        top = QHBoxLayout()
        top.addWidget(QLabel("Plot"))
        top.addWidget(self.chooser)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.plot, 1)
        self._series: dict[str, _Series] = {}
        self._field = ""

    @property
    def field(self) -> str:
        return self._field

    def point_count(self) -> int:
        series = self._series.get(self._field)
        return series.n if series else 0

    def curve_data(self) -> tuple[np.ndarray, np.ndarray]:
        """What the curve shows now (the filled part of the chosen field's buffers)."""
        series = self._series.get(self._field)
        if series is None:
            return np.empty(0), np.empty(0)
        return series.x[:series.n], series.y[:series.n]

    def clear(self) -> None:
        self._series = {}
        self.chooser.blockSignals(True)
        self.chooser.clear()
        self.chooser.blockSignals(False)
        self._field = ""
        self.curve.setData([], [])
        self.curve.setSymbol("o")
        self.plot.setLabel("left", "")

    def append(self, columns: dict[str, Any]) -> None:
        """Add newly committed records, as :func:`~spacrq.experiments.watch.plot_columns` gives them.

        New numeric fields join the chooser; the first becomes the plotted one.
        """
        for name in columns.get("fields", []):
            xs, ys = columns["series"][name]
            series = self._series.get(name)
            if series is None:
                series = self._series[name] = _Series()
                series.extend(xs, ys)
                self.chooser.addItem(name)  # the first one becomes current and is drawn
            else:
                series.extend(xs, ys)
        if self._field in columns.get("fields", []):
            self._draw()

    def choose(self, name: str) -> None:
        self.chooser.setCurrentText(name)

    def _field_chosen(self, name: str) -> None:
        self._field = name
        self.plot.setLabel("left", name.removeprefix("value.") if name else "")
        self._draw()

    def _draw(self) -> None:
        x, y = self.curve_data()
        if len(x) > self.SYMBOL_LIMIT and self.curve.opts.get("symbol") is not None:
            self.curve.setSymbol(None)  # markers on thousands of points only cost time
        self.curve.setData(x, y)
