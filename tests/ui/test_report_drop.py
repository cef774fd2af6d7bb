"""A tracking store folder, or its runs.jsonl, dropped on the Run Report opens its report."""
from __future__ import annotations

import pytest
from dropping import drop_files  # tests/dropping.py
from fake_run import FakeRun  # tests/blockwise/fake_run.py

from spacrq.ui.drops import REPORT_HINT
from spacrq.ui.report_pane import RunReportPane

WAIT = 10_000


@pytest.fixture
def pane(open_pane, qtbot):
    pane = open_pane(RunReportPane)
    qtbot.waitUntil(lambda: pane.snapshots > 0, timeout=WAIT)
    return pane


def _tasks(pane):
    proxy = pane.runs_proxy
    return sorted(proxy.index(r, 0).data() for r in range(proxy.rowCount()))


def _finished(folder, task_id):
    run = FakeRun(folder, task_id=task_id)
    run.complete(2)
    run.finish()
    return folder


def test_a_dropped_store_folder_opens_its_report(pane, qtbot, tmp_path):
    store = _finished(tmp_path / "elsewhere", "outside")
    assert drop_files(pane.runs_view, [store])
    qtbot.waitUntil(lambda: _tasks(pane) == ["outside"], timeout=WAIT)


def test_a_dropped_runs_jsonl_opens_its_report_wherever_it_lands(pane, qtbot, tmp_path):
    store = _finished(tmp_path / "far" / "smooth-2", "far-away")
    assert drop_files(pane.tabs, [store / "runs.jsonl"])
    qtbot.waitUntil(lambda: _tasks(pane) == ["far-away"], timeout=WAIT)


def test_a_drop_that_is_no_store_says_what_can_be_dropped(pane, qtbot, tmp_path):
    assert drop_files(pane, [tmp_path / "photo.png", tmp_path / "notes.txt"])
    assert pane.open_problems.isVisibleTo(pane)
    assert REPORT_HINT in pane.open_problems.text() and "photo.png" in pane.open_problems.text()
    assert _tasks(pane) == []


def test_a_folder_that_is_not_a_store_is_said_by_the_watch(pane, qtbot, tmp_path):
    (tmp_path / "plain").mkdir()
    assert drop_files(pane, [tmp_path / "plain"])
    qtbot.waitUntil(lambda: "not a tracking store" in pane.open_problems.text(), timeout=WAIT)
