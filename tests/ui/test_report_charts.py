"""The Run Report's charts of finished runs, drawn from the tracking store (pytest-qt)."""
from __future__ import annotations

import numpy as np
import pytest

from fake_run import FakeRun
from spacrq.ui.report_charts import LEGEND_ROWS, LiveCharts
from spacrq.ui.report_pane import RunReportPane

WAIT = 10_000


@pytest.fixture
def make_pane(open_pane):
    return lambda: open_pane(RunReportPane)


def _key(workspace, name):
    return str((workspace.runs / name).resolve())


def test_a_finished_run_opens_on_four_charts_with_curves(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "smooth", grid_shape=(8, 8), workers=2, noise=0.003)
    run.complete(64)
    run.finish()
    pane = make_pane()
    pane.select(_key(workspace, "smooth"))
    # the last plot of a snapshot to be drawn is the peak RSS one
    qtbot.waitUntil(lambda: pane.charts.point_counts()["rss"] == 64, timeout=WAIT)
    counts = pane.charts.point_counts()
    assert counts["rss"] == 64 and counts["trend"] == 2 and counts["rate"] >= 1
    assert counts["compute"] == {0: 33, 1: 33} and counts["idle"] == {0: 33, 1: 33}
    assert pane.tabs.currentIndex() == 0  # the charts, not an empty page, on first open
    assert all(not item.isVisible() for item in pane.charts.words.values())  # nothing to excuse
    assert "tracking store: 64 blocks" in pane.charts.note.text()


def test_workers_have_their_own_colours_and_the_hover_names_them(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "w", grid_shape=(12,), workers=3)
    run.complete(12)
    wall, wid = run.group["wall_seconds"][...], run.group["worker_id"][...]
    run.group["wall_seconds"][...] = np.where(wid == 2, wall * 3, wall)  # its curve stands apart
    run.finish()
    pane = make_pane()
    pane.select(_key(workspace, "w"))
    qtbot.waitUntil(lambda: len(pane.charts.compute_curves) == 3
                    and pane.charts.point_counts()["rss"] == 12, timeout=WAIT)
    colours = pane.charts.worker_colours()
    assert len(set(colours.values())) == 3
    for w, compute in pane.charts.compute_curves.items():
        idle = pane.charts.idle_curves[w]
        assert idle.opts["pen"].color().name() == colours[w]  # idle: the worker's colour, dashed
        assert idle.opts["pen"].style() != compute.opts["pen"].style()
    x, y = pane.charts.compute_curves[2].getData()
    text = pane.charts.hover_text(float(x[-1]), float(y[-1]))
    assert text.startswith("worker 2:") and "compute" in text


def test_thirty_two_workers_stay_apart_in_colour_and_legend(qtbot):
    charts = LiveCharts()
    qtbot.addWidget(charts)
    x = np.linspace(0, 10, 20)
    snap = {"version": 1, "run_id": "r", "source": "store", "blocks": 640, "measured": True,
            "rss_measured": True, "idle_measured": True, "missed": 0, "slowest": "",
            "wall": (x, x), "rss": (x, x), "rate": (x, x), "trend": (x[:2], x[:2]),
            "trend_slope_ms": 0.0,
            "compute": {w: (x, x * (1 + w / 100)) for w in range(32)},
            "idle": {w: (x, x / 50) for w in range(32)}}
    charts.show_charts(snap)
    qtbot.waitUntil(lambda: charts.point_counts()["rss"] == len(x), timeout=WAIT)
    assert len(set(charts.worker_colours().values())) == 32
    assert charts.workers_legend.columnCount == 32 // LEGEND_ROWS


def test_the_slowest_worker_is_said_under_the_chart(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "slow", grid_shape=(24,), workers=3)
    run.complete(24)
    wall, wid = run.group["wall_seconds"][...], run.group["worker_id"][...]
    run.group["wall_seconds"][...] = np.where(wid == 1, wall * 3, wall)
    run.finish()
    pane = make_pane()
    pane.select(_key(workspace, "slow"))
    qtbot.waitUntil(lambda: "Slowest worker: 1" in pane.charts.note.text(), timeout=WAIT)


def test_a_run_without_per_block_records_says_so_in_words(workspace, make_pane, qtbot):
    run = FakeRun(workspace.runs / "plain", tracked=False)
    run.complete(5)
    run.finish()
    pane = make_pane()
    pane.select(_key(workspace, "plain"))
    qtbot.waitUntil(lambda: "resource_tracking=True" in pane.charts._empty.text(), timeout=WAIT)
    assert pane.charts._stack.currentWidget() is pane.charts._empty


def _snapshot(version: int, scale: float) -> dict:
    x = np.linspace(0, 10, 50)
    y = x * scale
    return {"version": version, "run_id": "r", "source": "store", "blocks": 50, "measured": True,
            "rss_measured": True, "idle_measured": True, "missed": 0, "slowest": "",
            "wall": (x, y), "rss": (x, y * 2**20), "rate": (x, y), "trend": (x[:2], y[:2]),
            "trend_slope_ms": 0.0, "compute": {0: (x, y)}, "idle": {0: (x, y / 50)}}


def test_new_figures_never_re_lay_out_the_plots(qtbot):
    """A plot's axes are sized for their tick text before the first paint and never shrink:
    figures of another magnitude (a reopened run, the next snapshot) repaint the plot they
    change, instead of resizing axes that re-lay out and repaint all four in one turn (the
    65 ms stall a reopened million-block run caused)."""
    charts = LiveCharts()
    qtbot.addWidget(charts)
    charts.resize(900, 640)
    charts.show()
    qtbot.waitExposed(charts)

    def boxes():
        charts.grab()  # a paint: where pyqtgraph measures the tick text it drew
        return [v.getPlotItem().vb.geometry() for v in charts.views]

    charts.show_charts(_snapshot(1, 12345.0))  # five-digit ticks
    qtbot.waitUntil(lambda: charts.point_counts()["rss"] == 50, timeout=WAIT)
    first = boxes()
    charts.show_charts(_snapshot(2, 0.5))  # one-digit ticks: shorter text
    qtbot.waitUntil(lambda: float(charts.rss_curve.getData()[1][-1]) == 5.0 * 2**20, timeout=WAIT)
    assert boxes() == first
    charts.show_charts(_snapshot(3, 3.0))
    qtbot.waitUntil(lambda: float(charts.rss_curve.getData()[1][-1]) == 30.0 * 2**20, timeout=WAIT)
    assert boxes() == first


def test_the_peak_rss_axis_reads_in_the_tables_binary_units(qtbot):
    """The tables say "max 49.0 MiB": the axis says 49 (MiB), not pyqtgraph's SI 51.3 MB;
    a run whose blocks peak above 1 GiB is drawn in GiB, as the tables write it."""
    from spacrq.blockwise.report_format import format_bytes
    charts = LiveCharts()
    qtbot.addWidget(charts)
    snap = _snapshot(1, 1.0)
    x = snap["rss"][0]
    snap["rss"] = (x, np.linspace(20, 49, x.size) * 2**20)  # bytes, as both sources give them
    charts.show_charts(snap)
    qtbot.waitUntil(lambda: charts.point_counts()["rss"] == 50, timeout=WAIT)
    axis = charts.rss_plot.getAxis("left")
    assert format_bytes(snap["rss"][1].max()) == "49.0 MiB"
    assert axis.labelText == "peak RSS (MiB)" and axis.labelUnits == "" and not axis.autoSIPrefix
    charts.rss_plot.vb.autoRange(padding=0)
    top = max(axis.range) * axis.scale  # what the ticks read at the top of the axis
    assert abs(top - 49.0) < 0.01, top
    snap = dict(_snapshot(2, 1.0), rss=(x, np.linspace(1, 3, x.size) * 2**30))
    charts.show_charts(snap)
    qtbot.waitUntil(lambda: charts.point_counts()["rss"] == 50
                    and axis.labelText == "peak RSS (GiB)", timeout=WAIT)
    charts.rss_plot.vb.autoRange(padding=0)
    assert abs(max(axis.range) * axis.scale - 3.0) < 0.01
