"""Closing the Run Report pane takes at most a second, even in the middle of a heavy poll."""
from __future__ import annotations

import time

from fake_run import heavy_poll

from spacrq.ui.report_pane import RunReportPane

WAIT = 10_000


def test_closing_the_run_report_during_a_heavy_poll_takes_under_a_second(workspace, qtbot,
                                                                          monkeypatch):
    started = heavy_poll(workspace, monkeypatch, stores=60)
    pane = RunReportPane(workspace)
    qtbot.addWidget(pane)
    try:
        qtbot.waitUntil(started.is_set, timeout=WAIT)
        t0 = time.monotonic()
        assert pane.shutdown()  # the watch closed and the poller thread ended
        assert time.monotonic() - t0 <= 1.0
        assert not pane.poller.is_running()
    finally:
        pane.shutdown()
        pane.close()
