"""The pieces every pane is built from: the row table (changes by diff, keeps the selection,
ticks only what ticks), the log view (follows the end unless the operator scrolled up) and the
pane base (numbered requests, outcomes routed by token, shutdown within a budget)."""
from __future__ import annotations

import threading
import time

from PySide6.QtWidgets import QAbstractItemView, QAbstractSlider, QApplication, QTableView

from spacrq.ui.log_view import LogView
from spacrq.ui.pane_base import PaneBase
from spacrq.ui.table_model import KEY_ROLE, ROW_ROLE, SORT_ROLE, Column, RowTable
from spacrq.watching import Code, Outcome, Row, WatchBase


def job(key: str, status: str = "queued", started: float | None = None) -> Row:
    return Row(key, (key, status, ""), look=status, sort=(None, None, started),
               value={"started": started})


def elapsed(row: Row, now: float) -> str:
    started = row.value["started"]
    return "" if started is None else f"{now - started:.0f}s"


COLUMNS = (Column("Job"), Column("Status", looks=True), Column("Elapsed", right=True, tick=elapsed))


class Signals:
    """Every structural signal a model sent, in order."""

    def __init__(self, model: RowTable) -> None:
        self.seen: list[tuple] = []
        model.rowsInserted.connect(lambda _p, first, last: self.seen.append(("insert", first, last)))
        model.rowsRemoved.connect(lambda _p, first, last: self.seen.append(("remove", first, last)))
        model.modelReset.connect(lambda: self.seen.append(("reset",)))
        model.layoutChanged.connect(lambda *_a: self.seen.append(("layout",)))
        model.dataChanged.connect(lambda tl, br, *_r: self.seen.append(
            ("changed", tl.row(), br.row(), tl.column(), br.column())))

    def take(self) -> list[tuple]:
        seen, self.seen = self.seen, []
        return seen


# -- RowTable --------------------------------------------------------------------------------
def test_set_rows_emits_inserts_removes_and_changed_rows_only(qapp):
    model = RowTable(COLUMNS, looks={"running": ("#fff", "#060")}, bold_looks=("running",))
    signals = Signals(model)
    model.set_rows([job("a"), job("b")])
    assert signals.take() == [("insert", 0, 1)]
    model.set_rows([job("a"), job("b", "running")])
    assert signals.take() == [("changed", 1, 1, 0, 2)]
    model.set_rows([job("a"), job("x"), job("y"), job("b", "running")])
    assert signals.take() == [("insert", 1, 2)]
    model.set_rows([job("a", "failed"), job("b", "running")])
    assert signals.take() == [("remove", 1, 2), ("changed", 0, 0, 0, 2)]
    model.set_rows([job("a", "failed"), job("b", "running")])
    assert signals.take() == []  # a poll that changed nothing costs nothing
    model.set_rows([job("b", "running"), job("a", "failed")])  # moved: two rows changed
    assert signals.take() == [("changed", 0, 1, 0, 2)]
    assert [model.key_at(i) for i in range(model.rowCount())] == ["b", "a"]
    assert model.row_of("a") == 1 and model.row_of("zzz") == -1


def test_cells_come_from_the_rows_with_their_look_key_and_sort_key(qapp):
    model = RowTable(COLUMNS, looks={"running": ("#ffffff", "#006600")})
    model.set_rows([job("a", "running", started=100.0)])
    status = model.index(0, 1)
    assert model.data(status) == "running"
    assert model.data(status, KEY_ROLE) == "a" and model.data(status, ROW_ROLE).key == "a"
    assert model.data(model.index(0, 2), SORT_ROLE) == 100.0
    from PySide6.QtCore import Qt
    assert model.data(status, Qt.ItemDataRole.BackgroundRole).color().name() == "#006600"
    assert model.data(model.index(0, 0), Qt.ItemDataRole.BackgroundRole) is None  # not a look column
    assert model.headerData(2, Qt.Orientation.Horizontal) == "Elapsed"


def test_the_selection_stays_on_its_row_across_polls(qtbot):
    model = RowTable(COLUMNS)
    view = QTableView()
    qtbot.addWidget(view)
    view.setModel(model)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    model.set_rows([job("a"), job("b"), job("c")])
    view.selectRow(1)

    def selected() -> list:
        return [model.key_at(i.row()) for i in view.selectionModel().selectedRows()]

    assert selected() == ["b"]
    model.set_rows([job("a"), job("b", "running"), job("c")])
    assert selected() == ["b"]
    model.set_rows([job("new"), job("a"), job("b", "running"), job("c")])
    assert selected() == ["b"]
    model.set_rows([job("b", "running"), job("c")])
    assert selected() == ["b"]


def test_tick_repaints_only_the_ticking_column_of_the_rows_that_tick(qapp):
    model = RowTable(COLUMNS)
    model.set_rows([job("a"), job("b", "running", started=100.0), job("c"),
                    job("d", "running", started=160.0)])
    signals = Signals(model)
    ticked = model.tick(now=200.0, ticking=lambda row: row.look == "running")
    assert ticked == [1, 3]
    assert signals.take() == [("changed", 1, 1, 2, 2), ("changed", 3, 3, 2, 2)]
    assert model.text(1, 2) == "100s" and model.text(3, 2) == "40s" and model.text(0, 2) == ""
    plain = RowTable(COLUMNS[:2])
    plain.set_rows([job("a")])
    assert plain.tick(now=1.0) == []  # no ticking column, nothing repainted


# -- LogView ---------------------------------------------------------------------------------
def _at_end(log: LogView) -> bool:
    bar = log.text.verticalScrollBar()
    return bar.value() == bar.maximum()


def test_the_log_follows_the_end_until_the_operator_scrolls_up(qtbot):
    log = LogView()
    qtbot.addWidget(log)
    log.resize(400, 200)
    log.show()
    log.restart("job-1", "/runs/job-1.log", "Log of job-1")
    assert log.title.text() == "Log of job-1" and log.title.toolTip() == "/runs/job-1.log"
    log.append("".join(f"line {n}\n" for n in range(300)))
    bar = log.text.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and _at_end(log), timeout=5000)

    bar.triggerAction(QAbstractSlider.SliderAction.SliderToMinimum)  # the operator scrolls up
    qtbot.waitUntil(lambda: not log.following(), timeout=5000)
    log.append("".join(f"more {n}\n" for n in range(50)))
    QApplication.processEvents()  # the follow-the-end queued by append runs: and does nothing
    assert bar.value() == 0 and "more 49" in log.shown_text()

    bar.triggerAction(QAbstractSlider.SliderAction.SliderToMaximum)  # and back to the end
    qtbot.waitUntil(log.following, timeout=5000)
    log.append("last\n")
    qtbot.waitUntil(lambda: _at_end(log), timeout=5000)

    log.restart("job-2", "/runs/job-2.log", "Log of job-2")  # another job: afresh, following
    assert log.shown_text() == "" and log.following() and log.key == "job-2"


# -- PaneBase --------------------------------------------------------------------------------
class EchoWatch(WatchBase):
    """Answers every action with an outcome (``stop`` is refused); can hang a poll on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.hang = threading.Event()
        self.inside = threading.Event()
        self.let_go = threading.Event()

    def _poll(self, view):
        if self.hang.is_set():
            self.inside.set()
            self.let_go.wait(10.0)  # stuck: does not look at interrupted()
        outcomes = tuple(Outcome(token, action, Code.REFUSED if action == "stop" else Code.DONE,
                                 data=args) for token, action, args in self.take_submissions())
        return {"view": dict(view), "outcomes": outcomes}


class EchoPane(PaneBase):
    def __init__(self) -> None:
        super().__init__()
        self.snapshots: list = []
        self.outcomes: list[Outcome] = []

    def show_snapshot(self, snapshot) -> None:
        self.snapshots.append(snapshot)

    def outcome_arrived(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)


def test_requests_are_numbered_and_outcomes_come_back_by_token(qtbot):
    pane = EchoPane()
    qtbot.addWidget(pane)
    watch = EchoWatch()
    pane.start_watch(watch, 5.0, path="a.json")
    qtbot.waitUntil(lambda: bool(pane.snapshots), timeout=5000)
    assert pane.snapshots[0]["view"] == {"path": "a.json"}
    save = pane.ask("save", name="night")
    stop = pane.ask("stop")
    assert (save, stop) == (1, 2) and pane.waiting_for("save") and pane.waiting_for()
    qtbot.waitUntil(lambda: len(pane.outcomes) == 2, timeout=5000)
    by_token = {o.token: o for o in pane.outcomes}
    assert by_token[save].action == "save" and by_token[save].ok
    assert dict(by_token[save].data) == {"name": "night"}
    assert by_token[stop].code is Code.REFUSED
    assert not pane.waiting_for()
    pane.set_view(path="b.json")
    qtbot.waitUntil(lambda: pane.snapshots[-1]["view"] == {"path": "b.json"}, timeout=5000)
    assert pane.view == {"path": "b.json"}
    assert pane.shutdown(1.0) is True


def test_shutdown_keeps_to_its_budget_with_a_poll_stuck_in_the_watch(qtbot):
    pane = EchoPane()
    qtbot.addWidget(pane)
    watch = EchoWatch()
    watch.hang.set()
    pane.start_watch(watch, 5.0)
    assert watch.inside.wait(5.0)
    started = time.monotonic()
    try:
        assert pane.shutdown(0.3) is False
        assert time.monotonic() - started < 0.3 + 0.2
    finally:
        watch.let_go.set()
    qtbot.waitUntil(lambda: not pane.poller.is_running(), timeout=5000)
    assert watch.close(1.0) is True


def test_a_poll_that_raises_is_said_once_and_polling_goes_on(qtbot):
    class Failing(WatchBase):
        calls = 0

        def _poll(self, view):
            Failing.calls += 1
            raise OSError("the share does not answer")

    pane = EchoPane()
    qtbot.addWidget(pane)
    said = []
    pane.notify.connect(said.append)
    pane.start_watch(Failing(), 0.01)
    qtbot.waitUntil(lambda: Failing.calls >= 3, timeout=5000)
    assert pane.shutdown(1.0)
    assert said == ["Reading failed: OSError: the share does not answer"]
