"""The charts of one blockwise task's run, live or finished.

Four plots: each worker's cumulative compute (solid) and idle (dashed, same
colour) time over run time, blocks per second, per-block wall time against
completion order with its trend line, and per-block peak RSS.  A running
task's series come from its progress snapshots, a finished or reopened
one's from its tracking store (:mod:`spacrq.blockwise.watch_charts`); both
arrive as the same plain snapshot, already decimated on the poller's thread,
so this widget only calls ``setData``.

Every curve is created once and fed with ``setData``; pyqtgraph draws only
the visible part at screen resolution (peak downsampling, clip to view), so
a ten-hour run redraws as fast as a one-minute one.  A new snapshot is
applied one plot per event-loop turn, so each plot is repainted in a frame
of its own.  Where something was not measured the plot says so in words,
and hovering the worker chart names the worker and its figure.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, QTimer
from PySide6.QtGui import QColor, QFontMetrics
from PySide6.QtWidgets import QGridLayout, QLabel, QStackedWidget, QVBoxLayout, QWidget

from spacrq.blockwise.report_format import format_seconds
from spacrq.blockwise.watch_series import memory_unit
from spacrq.ui.qt_lifetime import adopt_plot_orphans

#: the first ten workers' colours (matplotlib's tab10, told apart by most eyes, with its grey
#: swapped for a deep indigo: a grey line reads as a grid line, not as a worker)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
           "#e377c2", "#393b79", "#bcbd22", "#17becf")
TREND_PEN = pg.mkPen("#d62728", width=2)
#: legend rows before it wraps into another column (32 workers: four columns of eight)
LEGEND_ROWS = 8
#: workers whose curves are set in one turn of the event loop
WORKERS_PER_TURN = 2
#: line widths of the first workers' compute curves (the rest: 1)
COMPUTE_WIDTHS = (3.5, 2.0)
NOT_MEASURED_PLOT = "not measured: run with resource_tracking=True"


def worker_colour(index: int) -> QColor:
    """The colour of the ``index``-th worker of a run: tab10, then hues a golden angle apart.

    Stepping the hue by the golden ratio keeps neighbouring workers far apart
    on the colour wheel however many there are; every second one is darker,
    so 32 workers still give 32 colours one can tell apart beside each other.
    """
    if index < len(PALETTE):
        return QColor(PALETTE[index])
    k = index - len(PALETTE)
    hue = (0.07 + k * 0.618033988749895) % 1.0
    return QColor.fromHsvF(hue, 0.85, 0.55 if k % 2 else 0.85)


def _fast(item: pg.PlotDataItem) -> pg.PlotDataItem:
    item.setDownsampling(auto=True, method="peak")
    item.setClipToView(True)
    return item


def _retitle(plot: pg.PlotItem, title: str) -> None:
    """Set a plot's title only when it changed: a new title re-lays out the plot."""
    if plot.titleLabel.text != title:
        plot.setTitle(title)


#: tick text the vertical axes make room for before anything is drawn: with SI prefixes in
#: the axis labels, tick values stay this short
TICK_TEXT = "-0.0000"


def _steady_axes(plot: pg.PlotItem) -> None:
    """Size the plot's axes for their tick text before the first paint, and let them grow
    but never shrink.

    pyqtgraph sizes an axis by the text it last drew: each new range resized the axes,
    which re-laid out the plot and repainted all four plots in one turn (65 ms on a
    reopened million-block run, the stall the pane's budget is 50 ms for)."""
    for name in ("left", "right", "bottom"):
        axis = plot.getAxis(name)
        axis.setStyle(autoReduceTextSpace=False)
        metrics = QFontMetrics(axis.style.get("tickFont") or axis.font())
        if name == "bottom":
            axis.textHeight = max(axis.textHeight, metrics.height())
            axis.setHeight(None)
        else:
            axis.textWidth = max(axis.textWidth, metrics.horizontalAdvance(TICK_TEXT))
            axis.setWidth(None)


def _words(plot: pg.PlotItem) -> pg.TextItem:
    """A sentence drawn inside a plot (top left, in pixels), for what it cannot show."""
    text = pg.TextItem(color="#7a4b00", anchor=(0, 0))
    text.setParentItem(plot.vb)
    text.setPos(8, 8)
    text.setZValue(10)
    return text


def _say(item: pg.TextItem, sentence: str) -> None:
    if item.toPlainText() != sentence:
        item.setText(sentence)
    item.setVisible(bool(sentence))


class LiveCharts(QWidget):
    """Charts of one run; :meth:`show_charts` takes the watcher's ``charts`` snapshot."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._stack = QStackedWidget(self)
        self._empty = QLabel(self)
        self._empty.setWordWrap(True)
        self._empty.setMargin(24)
        self._empty.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        page = QWidget(self)
        # one view per plot: new data repaints that plot alone, not all four
        self._graphics = QWidget(page)
        grid = QGridLayout(self._graphics)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(2)
        self.views = []
        for row, col in ((0, 0), (0, 1), (1, 0), (1, 1)):
            view = pg.PlotWidget(self._graphics, background="w")
            grid.addWidget(view, row, col)
            self.views.append(view)
        self.note = QLabel(page)  # the slowest worker, what was not measured
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #7a4b00;")
        self.hover = QLabel(page)  # what the pointer is on in the worker chart
        self.hover.setStyleSheet("color: #444;")
        # room kept for both lines: text coming and going must not re-lay out (and repaint) the plots
        line = self.note.fontMetrics().lineSpacing()
        self.note.setFixedHeight(2 * line + 4)
        self.hover.setFixedHeight(line + 4)
        pv = QVBoxLayout(page)
        pv.setContentsMargins(0, 0, 0, 0)
        pv.addWidget(self._graphics, 1)
        pv.addWidget(self.note)
        pv.addWidget(self.hover)
        self._page = page
        self._stack.addWidget(self._empty)
        self._stack.addWidget(page)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._stack)

        self.workers_plot, self.rate_plot, self.wall_plot, self.rss_plot = (
            v.getPlotItem() for v in self.views)
        self.workers_plot.setTitle("worker time: compute (solid), idle (dashed)")
        self.workers_plot.setLabel("left", "compute (solid)", units="s")
        self.workers_plot.setLabel("bottom", "run time", units="s")
        self.workers_legend = self.workers_plot.addLegend(offset=(5, 5), labelTextSize="8pt")
        # idle is a few per cent of compute: on the compute scale it would be a flat line along the
        # bottom, so it has a scale of its own, on the right, sharing the run-time axis
        self.idle_box = pg.ViewBox()
        self.workers_plot.showAxis("right")
        self.workers_plot.scene().addItem(self.idle_box)
        self.workers_plot.getAxis("right").linkToView(self.idle_box)
        self.workers_plot.getAxis("right").setLabel("idle (dashed)", units="s")
        self.idle_box.setXLink(self.workers_plot)
        self.workers_plot.vb.sigResized.connect(self._fit_idle_box)
        for plot in (self.workers_plot, self.rate_plot, self.wall_plot, self.rss_plot):
            adopt_plot_orphans(self, plot, *([self.idle_box] if plot is self.workers_plot else []))
        self.rate_plot.setTitle("blocks per second")
        self.rate_plot.setLabel("bottom", "run time", units="s")
        self.wall_plot.setTitle("wall time per block")
        self.wall_plot.setLabel("left", "wall", units="s")
        self.wall_plot.setLabel("bottom", "completion order")
        self.rss_plot.setTitle("peak RSS per block")
        self._rss_unit = ""
        self._set_rss_unit("MiB", 2.0**20)
        self.rss_plot.setLabel("bottom", "completion order")
        for plot in (self.workers_plot, self.rate_plot, self.wall_plot, self.rss_plot):
            plot.showGrid(x=True, y=True, alpha=0.25)
            _steady_axes(plot)
        self.words = {name: _words(plot) for name, plot in (
            ("workers", self.workers_plot), ("rate", self.rate_plot),
            ("wall", self.wall_plot), ("rss", self.rss_plot))}

        self.rate_curve = _fast(self.rate_plot.plot(pen=pg.mkPen("#1f77b4", width=1)))
        self.wall_curve = _fast(self.wall_plot.plot(pen=pg.mkPen("#1f77b4", width=1)))
        self.trend_curve = self.wall_plot.plot(pen=TREND_PEN, antialias=True)  # 2 points: smooth is free
        self.rss_curve = _fast(self.rss_plot.plot(pen=pg.mkPen("#2ca02c", width=1)))
        self.compute_curves: dict = {}
        self.idle_curves: dict = {}
        self._series: dict = {}  # worker -> {"compute": (x, y), "idle": (x, y)} for the hover
        self._widths: dict = {}
        self._emphasised = None
        self._version = None
        self._run_id = None
        self._pending: dict | None = None
        self._steps: list = []
        self._stagger = QTimer(self)
        self._stagger.setInterval(16)  # one frame at 60 Hz: each plot paints on its own
        self._stagger.timeout.connect(self._next_step)
        self.workers_plot.scene().sigMouseMoved.connect(self._on_mouse_moved)
        # the plots are laid out with the window, not when the first run arrives (that first
        # layout repaints them twice over: a one-off that belongs to opening the window)
        self._stack.setCurrentWidget(self._page)
        _say(self.words["workers"], "choose a run on the left to chart it")

    # -- workers' curves ----------------------------------------------------------
    def _fit_idle_box(self) -> None:
        self.idle_box.setGeometry(self.workers_plot.vb.sceneBoundingRect())
        self.idle_box.linkedViewChanged(self.workers_plot.vb, self.idle_box.XAxis)

    def _worker_curves(self, worker_id) -> tuple[pg.PlotDataItem, pg.PlotDataItem]:
        if worker_id not in self.compute_curves:
            index = len(self.compute_curves)
            colour = worker_colour(index)
            # workers that kept pace draw on top of each other: the first ones wider, so a
            # line on top of another still shows both colours
            width = COMPUTE_WIDTHS[index] if index < len(COMPUTE_WIDTHS) else 1
            self._widths[worker_id] = width
            self.compute_curves[worker_id] = _fast(self.workers_plot.plot(
                pen=pg.mkPen(colour, width=width), name=f"worker {worker_id}"))
            idle = _fast(pg.PlotDataItem(pen=pg.mkPen(colour, width=1, style=Qt.PenStyle.DashLine)))
            self.idle_box.addItem(idle)
            self.idle_curves[worker_id] = idle
            count = len(self.compute_curves)
            if count > LEGEND_ROWS:
                self.workers_legend.setColumnCount(math.ceil(count / LEGEND_ROWS))
        return self.compute_curves[worker_id], self.idle_curves[worker_id]

    def _emphasise(self, slow) -> None:
        """The slowest worker's compute line drawn wide, so a straggler among 32 is found at a glance."""
        if slow == self._emphasised:
            return
        for wid in (self._emphasised, slow):
            curve = self.compute_curves.get(wid)
            if curve is not None:
                pen = pg.mkPen(curve.opts["pen"])
                pen.setWidthF(4.0 if wid == slow else self._widths.get(wid, 1.0))
                curve.setPen(pen)
        self._emphasised = slow

    def _forget_workers(self) -> None:
        """A new run: its workers are not the last run's."""
        for curve in self.compute_curves.values():
            self.workers_plot.removeItem(curve)
        for curve in self.idle_curves.values():
            self.idle_box.removeItem(curve)
        self.workers_legend.clear()
        self.workers_legend.setColumnCount(1)
        self.compute_curves.clear()
        self.idle_curves.clear()
        self._series.clear()
        self._widths.clear()
        self._emphasised = None

    def worker_colours(self) -> dict:
        """Each charted worker's colour name (for tests: every worker has its own)."""
        return {w: c.opts["pen"].color().name() for w, c in self.compute_curves.items()}

    # -- snapshots ----------------------------------------------------------------
    def show_charts(self, charts: dict | None, reason: str = "") -> None:
        """Draw a snapshot; unchanged snapshots (same version) cost nothing.

        ``None`` shows ``reason`` in words instead of empty axes.
        """
        if charts is None:
            self._version = self._run_id = None
            self._pending, self._steps = None, []
            self._stagger.stop()
            text = reason or ("No figures to chart for this run: it recorded no per-block times. "
                              "The tables and the text hold what it measured.")
            if self._empty.text() != text:
                self._empty.setText(text)
            self._stack.setCurrentWidget(self._empty)
            return
        uncovered = self._stack.currentWidget() is not self._page
        self._stack.setCurrentWidget(self._page)
        if charts.get("version") == self._version and charts.get("run_id") == self._run_id:
            return
        if charts.get("run_id") != self._run_id:
            self._forget_workers()
        self._version, self._run_id = charts.get("version"), charts.get("run_id")
        self._pending = charts
        workers = sorted(set(charts["compute"]) | set(charts["idle"]),
                         key=lambda w: (isinstance(w, str), w if not isinstance(w, str) else 0, str(w)))
        chunks = [workers[i:i + WORKERS_PER_TURN] for i in range(0, len(workers), WORKERS_PER_TURN)]
        self._steps = [lambda c, ws=ws: self._draw_workers(c, ws) for ws in chunks]
        self._steps += [self._draw_worker_notes, self._draw_rate, self._draw_wall, self._draw_rss]
        if uncovered:  # the plots' first layout and paint take a turn of their own
            self._steps[:0] = [lambda c: None, lambda c: None]
        self._stagger.start()  # plot by plot in the next turns: the tables of this turn paint first

    def _next_step(self) -> None:
        if not self._steps or self._pending is None:
            self._stagger.stop()
            return
        self._steps.pop(0)(self._pending)
        if not self._steps:
            self._stagger.stop()

    def _draw_workers(self, charts: dict, workers: list) -> None:
        """A few workers' curves (a first look at 32 workers makes 64 curves: not in one turn)."""
        for wid in workers:
            compute, idle = self._worker_curves(wid)
            if wid in charts["compute"]:
                x, y = charts["compute"][wid]
                compute.setData(x, y, skipFiniteCheck=True)
                self._series.setdefault(wid, {})["compute"] = (x, y)
            if wid in charts["idle"]:
                x, y = charts["idle"][wid]
                idle.setData(x, y, skipFiniteCheck=True)
                self._series.setdefault(wid, {})["idle"] = (x, y)

    def _draw_worker_notes(self, charts: dict) -> None:
        words = ""
        many = len(self.compute_curves) > LEGEND_ROWS
        self.workers_legend.setVisible(not many)  # 32 names would cover the lines they name
        if not charts["compute"]:
            words = "no worker processes: the run was serial, so there is no worker timeline"
        elif not charts.get("idle_measured", True):
            words = "idle not recorded in this store (written by an older spacrq): compute only"
        elif many:
            words = f"{len(self.compute_curves)} workers: point at a line to name its worker"
        _say(self.words["workers"], words)
        self._emphasise(charts.get("slowest_id"))
        # idle up to half the height: auto-scaled like compute, two lines growing alike would lie
        # on top of each other; this way the compute lines reach the top and idle the middle
        top = max((float(y[-1]) for _, y in charts["idle"].values() if len(y)), default=0.0)
        if top > 0:
            self.idle_box.setYRange(0.0, 2.0 * top, padding=0.02)
        notes = [charts.get("slowest") or ""]
        if charts.get("source") == "store" and charts.get("blocks"):
            notes.append(f"Charted from the tracking store: {charts['blocks']:,} blocks.")
        note = "  ".join(n for n in notes if n)
        if self.note.text() != note:
            self.note.setText(note)

    def _draw_rate(self, charts: dict) -> None:
        x, y = charts["rate"]
        self.rate_curve.setData(x, y, skipFiniteCheck=True)
        _say(self.words["rate"], "" if len(x) else "no completion recorded yet")

    def _set_rss_unit(self, unit: str, size: float) -> None:
        """Label the peak-RSS axis in the tables' binary unit (MiB/GiB), never an SI prefix.

        The series stay in bytes; the axis draws them scaled, so its ticks read
        as the tables do ("max 49.0 MiB" is 49 here, not pyqtgraph's 51.3 MB).
        Relabelled only when the unit changes: a new label re-lays out the plot.
        """
        if unit == self._rss_unit:
            return
        axis = self.rss_plot.getAxis("left")
        axis.enableAutoSIPrefix(False)
        axis.setScale(1.0 / size)
        self.rss_plot.setLabel("left", f"peak RSS ({unit})")
        self._rss_unit = unit

    def _draw_rss(self, charts: dict) -> None:
        x, y = charts["rss"]
        y = np.asarray(y, dtype=np.float64)
        finite = y[np.isfinite(y)] if y.size else y
        self._set_rss_unit(*memory_unit(float(np.abs(finite).max()) if finite.size else None))
        self.rss_curve.setData(x, y, skipFiniteCheck=True)
        measured = charts.get("rss_measured", charts.get("measured"))
        _retitle(self.rss_plot, "peak RSS per block" if measured else "peak RSS per block — not measured")
        _say(self.words["rss"], "" if measured else NOT_MEASURED_PLOT)

    def _draw_wall(self, charts: dict) -> None:
        self.wall_curve.setData(*charts["wall"], skipFiniteCheck=True)
        self.trend_curve.setData(*charts["trend"])
        slope = charts.get("trend_slope_ms", 0.0)
        missed = charts.get("missed", 0)
        wall_title = "wall time per block"
        if not charts.get("measured"):
            wall_title += " — not measured"
        elif len(charts["trend"][0]):
            wall_title += f" — trend {slope:+.4f} ms/block"
        if missed:
            wall_title += f" ({missed:,} blocks finished between looks)"
        _retitle(self.wall_plot, wall_title)
        _say(self.words["wall"], "" if charts.get("measured") else NOT_MEASURED_PLOT)

    # -- hover ----------------------------------------------------------------------
    def hover_text(self, x: float, y: float, y_idle: float | None = None) -> str:
        """The worker curve nearest to the pointer, with its figure there.

        ``x`` is run time, ``y`` the pointer on the compute scale and
        ``y_idle`` on the idle one (None: compute curves only); distances are
        measured in each scale's share of its axis, as the eye sees them.
        """
        spans = {"compute": self.workers_plot.vb.viewRange()[1], "idle": self.idle_box.viewRange()[1]}
        best = None
        for wid, kinds in self._series.items():
            for kind, (xs, ys) in kinds.items():
                at = y if kind == "compute" else y_idle
                if at is None or len(xs) == 0 or x < xs[0] - 1e-9:
                    continue
                value = float(np.interp(x, xs, ys))
                lo, hi = spans[kind]
                gap = abs(value - at) / max(hi - lo, 1e-12)
                if best is None or gap < best[0]:
                    best = (gap, wid, kind, value)
        if best is None:
            return ""
        _, wid, kind, value = best
        return f"worker {wid}: {format_seconds(value)} {kind} by {format_seconds(x)} of run time"

    def _on_mouse_moved(self, pos: QPointF) -> None:
        vb = self.workers_plot.vb
        if not vb.sceneBoundingRect().contains(pos):
            if self.hover.text():
                self.hover.setText("")
            return
        p = vb.mapSceneToView(pos)
        text = self.hover_text(p.x(), p.y(), self.idle_box.mapSceneToView(pos).y())
        if self.hover.text() != text:
            self.hover.setText(text)

    def point_counts(self) -> dict:
        """How many points each curve holds (for tests and the benchmark)."""
        def n(curve):
            x = curve.getData()[0]
            return 0 if x is None else len(np.asarray(x))
        return {"wall": n(self.wall_curve), "rss": n(self.rss_curve), "rate": n(self.rate_curve),
                "trend": n(self.trend_curve),
                "compute": {w: n(c) for w, c in self.compute_curves.items()},
                "idle": {w: n(c) for w, c in self.idle_curves.items()}}
