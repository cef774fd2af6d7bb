"""The live charts of a running blockwise task.

Four plots: each worker's cumulative idle and compute time, blocks per
second, per-block wall time against completion order with its trend line,
and per-block peak RSS.  Every curve is created once and fed with
``setData``; the data arrive already decimated by the watcher (a few
thousand points whatever the run's length) and pyqtgraph draws only the
visible part at screen resolution (peak downsampling, clip to view), so a
ten-hour run redraws as fast as a one-minute one.

A new snapshot is applied one plot per event-loop turn, so each plot is
repainted in a frame of its own: the window never stalls for the time of
all four at once.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QStackedWidget, QVBoxLayout, QWidget

#: colours per worker, cycling; idle is drawn dashed in the worker's colour
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
TREND_PEN = pg.mkPen("#d62728", width=2)


def _fast(item: pg.PlotDataItem) -> pg.PlotDataItem:
    item.setDownsampling(auto=True, method="peak")
    item.setClipToView(True)
    return item


def _retitle(plot: pg.PlotItem, title: str) -> None:
    """Set a plot's title only when it changed: a new title re-lays out the plot."""
    if plot.titleLabel.text != title:
        plot.setTitle(title)


class LiveCharts(QWidget):
    """Charts of one live run; :meth:`show_charts` takes the watcher's ``charts`` snapshot."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._stack = QStackedWidget(self)
        self._empty = QLabel(self)
        self._empty.setWordWrap(True)
        self._empty.setMargin(24)
        self._graphics = pg.GraphicsLayoutWidget(self)
        self._graphics.setBackground("w")
        self._stack.addWidget(self._empty)
        self._stack.addWidget(self._graphics)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._stack)

        g = self._graphics
        self.workers_plot = g.addPlot(row=0, col=0, title="worker time: compute (solid), idle (dashed)")
        self.workers_plot.setLabel("left", "cumulative", units="s")
        self.workers_plot.setLabel("bottom", "run time", units="s")
        self.workers_legend = self.workers_plot.addLegend(offset=(5, 5), labelTextSize="8pt")
        self.rate_plot = g.addPlot(row=0, col=1, title="blocks per second")
        self.rate_plot.setLabel("bottom", "run time", units="s")
        self.wall_plot = g.addPlot(row=1, col=0, title="wall time per block")
        self.wall_plot.setLabel("left", "wall", units="s")
        self.wall_plot.setLabel("bottom", "completion order")
        self.rss_plot = g.addPlot(row=1, col=1, title="peak RSS per block")
        self.rss_plot.setLabel("left", "peak RSS", units="B")
        self.rss_plot.setLabel("bottom", "completion order")
        for plot in (self.workers_plot, self.rate_plot, self.wall_plot, self.rss_plot):
            plot.showGrid(x=True, y=True, alpha=0.25)

        self.rate_curve = _fast(self.rate_plot.plot(pen=pg.mkPen("#1f77b4", width=1)))
        self.wall_curve = _fast(self.wall_plot.plot(pen=pg.mkPen("#1f77b4", width=1)))
        self.trend_curve = self.wall_plot.plot(pen=TREND_PEN, antialias=True)  # 2 points: smooth is free
        self.rss_curve = _fast(self.rss_plot.plot(pen=pg.mkPen("#2ca02c", width=1)))
        self.compute_curves: dict = {}
        self.idle_curves: dict = {}
        self._version = None
        self._run_id = None
        self._pending: dict | None = None
        self._steps: list = []
        self._stagger = QTimer(self)
        self._stagger.setInterval(16)  # one frame at 60 Hz: each plot paints on its own
        self._stagger.timeout.connect(self._next_step)
        self.show_charts(None)

    def _worker_curves(self, worker_id) -> tuple[pg.PlotDataItem, pg.PlotDataItem]:
        if worker_id not in self.compute_curves:
            colour = PALETTE[len(self.compute_curves) % len(PALETTE)]
            self.compute_curves[worker_id] = _fast(self.workers_plot.plot(
                pen=pg.mkPen(colour, width=1), name=f"worker {worker_id}"))
            self.idle_curves[worker_id] = _fast(self.workers_plot.plot(
                pen=pg.mkPen(colour, width=1, style=pg.QtCore.Qt.PenStyle.DashLine)))
        return self.compute_curves[worker_id], self.idle_curves[worker_id]

    def _forget_workers(self) -> None:
        """A new run: its workers are not the last run's."""
        for curve in list(self.compute_curves.values()) + list(self.idle_curves.values()):
            self.workers_plot.removeItem(curve)
        self.workers_legend.clear()
        self.compute_curves.clear()
        self.idle_curves.clear()

    def show_charts(self, charts: dict | None, reason: str = "") -> None:
        """Draw a snapshot; unchanged snapshots (same version) cost nothing."""
        if charts is None:
            self._version = None
            self._pending, self._steps = None, []
            self._stagger.stop()
            self._empty.setText(reason or "No live figures: this task is not running now. "
                                "Charts appear while a run is in progress; the tables and the "
                                "text hold the finished runs' figures.")
            self._stack.setCurrentWidget(self._empty)
            return
        self._stack.setCurrentWidget(self._graphics)
        if charts.get("version") == self._version and charts.get("run_id") == self._run_id:
            return
        if charts.get("run_id") != self._run_id:
            self._forget_workers()
        self._version, self._run_id = charts.get("version"), charts.get("run_id")
        self._pending = charts
        self._steps = [self._draw_workers, self._draw_rate, self._draw_wall, self._draw_rss]
        self._next_step()  # the first plot now, the others in the next turns of the event loop
        if self._steps:
            self._stagger.start()

    def _next_step(self) -> None:
        if not self._steps or self._pending is None:
            self._stagger.stop()
            return
        self._steps.pop(0)(self._pending)
        if not self._steps:
            self._stagger.stop()

    def is_drawing(self) -> bool:
        """True while a snapshot is still being applied plot by plot."""
        return bool(self._steps)

    def _draw_workers(self, charts: dict) -> None:
        for wid, (x, y) in charts["compute"].items():
            self._worker_curves(wid)[0].setData(x, y, skipFiniteCheck=True)
        for wid, (x, y) in charts["idle"].items():
            self._worker_curves(wid)[1].setData(x, y, skipFiniteCheck=True)

    def _draw_rate(self, charts: dict) -> None:
        self.rate_curve.setData(*charts["rate"], skipFiniteCheck=True)

    def _draw_rss(self, charts: dict) -> None:
        self.rss_curve.setData(*charts["rss"], skipFiniteCheck=True)
        _retitle(self.rss_plot, "peak RSS per block" if charts.get("measured")
                 else "peak RSS per block — not measured")

    def _draw_wall(self, charts: dict) -> None:
        self.wall_curve.setData(*charts["wall"], skipFiniteCheck=True)
        self.trend_curve.setData(*charts["trend"])
        slope = charts.get("trend_slope_ms", 0.0)
        missed = charts.get("missed", 0)
        wall_title = "wall time per block"
        if not charts.get("measured"):
            wall_title += " — not measured: run with resource_tracking"
        elif len(charts["trend"][0]):
            wall_title += f" — trend {slope:+.4f} ms/block"
        if missed:
            wall_title += f" ({missed:,} blocks finished between looks)"
        _retitle(self.wall_plot, wall_title)

    def point_counts(self) -> dict:
        """How many points each curve holds (for tests and the benchmark)."""
        def n(curve):
            x = curve.getData()[0]
            return 0 if x is None else len(np.asarray(x))
        return {"wall": n(self.wall_curve), "rss": n(self.rss_curve), "rate": n(self.rate_curve),
                "trend": n(self.trend_curve),
                "compute": {w: n(c) for w, c in self.compute_curves.items()},
                "idle": {w: n(c) for w, c in self.idle_curves.items()}}
