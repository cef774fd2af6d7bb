"""The queue table sorts for the eye; the run order, and the selection in it, stay the truth."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QTableView, QVBoxLayout, QWidget

from spacrq.queue import Job
from spacrq.queue import pane as qpane
from spacrq.ui.queue_sorting import QueueSorting, sorted_caption
from spacrq.ui.table_model import Column, RowTable


def _jobs():
    statuses = ["success", "failed", "pending", "success", "running"]
    times = [("2026-01-01T00:00:00+00:00", "2026-01-01T00:00:30+00:00"),
             ("2026-01-01T00:01:00+00:00", "2026-01-01T00:01:05+00:00"), ("", ""),
             ("2026-01-01T00:02:00+00:00", "2026-01-01T00:12:00+00:00"),
             ("2026-01-01T00:13:00+00:00", "")]
    jobs = []
    for i, (status, (start, end)) in enumerate(zip(statuses, times)):
        jobs.append(Job(module="command" if i % 2 else "python", id=f"j{i}", status=status,
                        started=start, finished=end, settings={"argv": ["true"]}))
    return jobs


@pytest.fixture
def view(qtbot):
    holder = QWidget()
    table = QTableView()
    model = RowTable([Column(t, tip) for t, tip in qpane.COLUMNS], looks=qpane.STATUS_LOOK)
    model.set_rows(qpane.rows(_jobs()))
    sorting = QueueSorting(table, model, qpane.COL_NUMBER)
    layout = QVBoxLayout(holder)
    layout.addWidget(sorting.banner)
    layout.addWidget(table)
    qtbot.addWidget(holder)
    holder.show()
    return holder, table, model, sorting


def _shown_ids(table):
    proxy = table.model()
    return [proxy.index(r, qpane.COL_JOB).data() for r in range(proxy.rowCount())]


def test_clicking_a_header_sorts_the_view_not_the_rows(view, qtbot):
    holder, table, model, sorting = view
    assert _shown_ids(table) == ["j0", "j1", "j2", "j3", "j4"] and sorting.in_run_order()
    assert not sorting.banner.isVisibleTo(holder)
    assert not table.horizontalHeader().isSortIndicatorShown()  # run order: no arrow
    with qtbot.waitSignal(sorting.sorted_changed) as changed:
        qtbot.mouseClick(table.horizontalHeader().viewport(), Qt.MouseButton.LeftButton,
                         pos=_section_point(table, qpane.COL_TIME))
    assert changed.args == [True] and table.horizontalHeader().isSortIndicatorShown()
    assert sorting.sorted_by() == "Time"
    assert sorting.caption.text() == sorted_caption("Time")
    assert sorting.banner.isVisibleTo(holder)
    # by time taken: 5 s, 30 s, 10 min, then the running job (its start) and the never-run one
    assert _shown_ids(table)[:3] == ["j1", "j0", "j3"] and _shown_ids(table)[-1] == "j2"
    assert [model.key_at(i) for i in range(model.rowCount())] == ["j0", "j1", "j2", "j3", "j4"]


def _section_point(table, column):
    header = table.horizontalHeader()
    return QPoint(header.sectionViewportPosition(column) + header.sectionSize(column) // 2,
                  header.height() // 2)


def test_run_order_puts_the_number_sort_back(view, qtbot):
    holder, table, model, sorting = view
    table.sortByColumn(qpane.COL_STATUS, Qt.SortOrder.AscendingOrder)
    assert sorting.sorted_by() == "Status"
    with qtbot.waitSignal(sorting.sorted_changed) as changed:
        qtbot.mouseClick(sorting.run_order_button, Qt.MouseButton.LeftButton)
    assert changed.args == [False] and not table.horizontalHeader().isSortIndicatorShown()
    assert _shown_ids(table) == ["j0", "j1", "j2", "j3", "j4"]
    assert not sorting.banner.isVisibleTo(holder)


def test_the_number_column_backwards_is_sorted_too(view):
    _holder, table, _model, sorting = view
    table.sortByColumn(qpane.COL_NUMBER, Qt.SortOrder.DescendingOrder)
    assert _shown_ids(table) == ["j4", "j3", "j2", "j1", "j0"]
    assert sorting.sorted_by().startswith("#") and not sorting.in_run_order()


def test_selection_is_read_and_made_in_run_order(view):
    _holder, table, model, sorting = view
    table.sortByColumn(qpane.COL_STATUS, Qt.SortOrder.AscendingOrder)
    sorting.select_rows([1, 3])
    assert sorting.selected_rows() == [1, 3]
    picked = {table.model().index(i.row(), qpane.COL_JOB).data()
              for i in table.selectionModel().selectedRows()}
    assert picked == {"j1", "j3"}


def test_a_row_changed_by_a_poll_moves_to_its_sorted_place(view):
    _holder, table, model, sorting = view
    table.sortByColumn(qpane.COL_STATUS, Qt.SortOrder.AscendingOrder)
    jobs = _jobs()
    jobs[2].status = "failed"
    model.set_rows(qpane.rows(jobs))
    shown = _shown_ids(table)
    assert shown.index("j2") == shown.index("j1") + 1  # beside the other failed job
    assert [model.key_at(i) for i in range(model.rowCount())] == ["j0", "j1", "j2", "j3", "j4"]


# -- in the Queue pane ----------------------------------------------------------------

def _pane_on(open_pane, qtbot, workspace, statuses=("success", "failed", "pending", "pending")):
    from spacrq.queue.model import Queue
    from spacrq.queue.store import save_queue
    from spacrq.ui.queue_pane import QueuePane
    queue = Queue(name="night")
    for i, status in enumerate(statuses):
        queue.add(Job(module="command", id=f"j{i}", status=status,
                      settings={"argv": ["true"]}), validate=False)
    path = workspace.queues / "night.queue.json"
    save_queue(queue, path)
    pane = open_pane(QueuePane)
    qtbot.waitUntil(lambda: pane.model.rowCount() == len(statuses) and not pane.waiting_for(),
                    timeout=10_000)
    return pane, path


def test_sorting_the_pane_never_reorders_the_queue_or_its_file(open_pane, qtbot, workspace):
    pane, path = _pane_on(open_pane, qtbot, workspace)
    before = path.read_bytes()
    qtbot.mouseClick(pane.table.horizontalHeader().viewport(), Qt.MouseButton.LeftButton,
                     pos=_section_point(pane.table, qpane.COL_STATUS))
    assert pane.sorting.banner.isVisibleTo(pane) and "Status" in pane.sorting.caption.text()
    assert _shown_ids(pane.table) == ["j1", "j2", "j3", "j0"]  # failed, pending…, succeeded
    assert [j.id for j in pane.queue.jobs] == ["j0", "j1", "j2", "j3"] and not pane.dirty
    assert path.read_bytes() == before
    pane.select_job("j2")
    assert pane.selected_ids() == ["j2"]
    assert not pane.up_button.isEnabled() and "Run order" in pane.up_button.toolTip()
    qtbot.mouseClick(pane.sorting.run_order_button, Qt.MouseButton.LeftButton)
    assert _shown_ids(pane.table) == ["j0", "j1", "j2", "j3"]
    assert pane.selected_ids() == ["j2"] and pane.up_button.isEnabled()


def test_move_acts_on_the_run_order_of_the_picked_job(open_pane, qtbot, workspace):
    pane, _path = _pane_on(open_pane, qtbot, workspace, ("pending",) * 3)
    pane.table.sortByColumn(qpane.COL_NUMBER, Qt.SortOrder.DescendingOrder)  # last first
    pane.table.selectRow(0)  # the view's first row is j2
    assert pane.selected_ids() == ["j2"]
    pane.sorting.run_order()
    pane.up_button.click()
    assert [j.id for j in pane.queue.jobs] == ["j0", "j2", "j1"]
    assert pane.selected_ids() == ["j2"]


def test_the_keyboard_sorts_and_puts_the_run_order_back(view, qtbot):
    holder, table, _model, sorting = view
    table.setFocus()
    qtbot.waitUntil(table.hasFocus)
    qtbot.keyClick(table, Qt.Key.Key_6, Qt.KeyboardModifier.AltModifier)  # the 6th column
    assert sorting.sorted_by() == "Status"
    qtbot.keyClick(table, Qt.Key.Key_6, Qt.KeyboardModifier.AltModifier)
    assert table.model().sortOrder() == Qt.SortOrder.DescendingOrder
    qtbot.keyClick(table, Qt.Key.Key_0, Qt.KeyboardModifier.ControlModifier)
    assert sorting.in_run_order() and not sorting.banner.isVisibleTo(holder)
