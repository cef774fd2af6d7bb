"""The Run Report pane's tables are wide enough for the figures that arrive in them."""
from __future__ import annotations


from fake_run import FakeRun
from spacrq.ui.report_pane import RunReportPane

WAIT = 10_000


def test_a_worker_drill_down_listed_into_an_empty_table_shows_whole_figures(workspace, qtbot):
    run = FakeRun(workspace.runs / "smooth", task_id="smooth", grid_shape=(6, 6))
    run.complete(30)
    run.finish()
    pane = RunReportPane(workspace)
    qtbot.addWidget(pane)
    try:
        pane.resize(1200, 700)
        pane.show()
        qtbot.waitUntil(lambda: pane.runs_proxy.rowCount() == 1, timeout=WAIT)
        pane.select(str((workspace.runs / "smooth").resolve()))
        pane.show_worker(1)
        qtbot.waitUntil(lambda: pane.worker_blocks_model.rowCount() == 15, timeout=WAIT)
        view = pane.worker_blocks_view
        header = view.horizontalHeader()
        qtbot.waitUntil(lambda: all(header.sectionSize(c) >= view.sizeHintForColumn(c)
                                    for c in range(pane.worker_blocks_model.columnCount())),
                        timeout=WAIT)
        wall = pane.worker_blocks_model.index(0, 2).data()
        assert wall.endswith(" ms")  # a figure with its unit, measured by the header above
    finally:
        pane.shutdown()
        pane.close()
