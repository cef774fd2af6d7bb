"""The Run Report pane used as a hostile operator would: odd paths, odd numbers, bursts, a damaged
store, a pipe where a chunk belongs.  Each ends in one sentence in the pane, never an exception,
never a pane that stops answering, and closing stays within its second."""
from __future__ import annotations

import os
import time

import zarr

from fake_run import FakeRun
from spacrq.ui.report_pane import RunReportPane
from spacrq.watching import Code

WAIT = 10_000


def _store(workspace, name="s", blocks=3):
    run = FakeRun(workspace.runs / name, task_id=name)
    run.complete(blocks)
    run.finish()
    return run, str((workspace.runs / name).resolve())


class Recording(RunReportPane):
    """The pane, noting every outcome it is given (and whether it had shut down by then)."""

    def __init__(self, workspace, parent=None) -> None:
        self.answers = []
        self.after_shutdown = []
        self.closed = False
        super().__init__(workspace, parent)

    def outcome_arrived(self, outcome) -> None:
        (self.after_shutdown if self.closed else self.answers).append(outcome)
        super().outcome_arrived(outcome)

    def charts_note_text(self) -> str:
        """What the charts tab says in place of charts."""
        return self.charts._empty.text()

    def shutdown(self, budget=1.0) -> bool:
        self.closed = True
        return super().shutdown(budget)


def _answered(pane, token):
    found = [o for o in pane.answers if o.token == token]
    return found[0] if found else None


def test_drilling_into_something_that_is_not_a_number_says_so_in_the_pane(workspace, open_pane,
                                                                            qtbot):
    _, key = _store(workspace)
    pane = open_pane(Recording)
    pane.select(key)
    qtbot.waitUntil(lambda: pane.worker_model.rowCount() == 2, timeout=WAIT)
    pane.show_worker("x")  # raised ValueError in the pane before the watch saw it
    pane.show_block("the third")
    qtbot.waitUntil(lambda: not pane.waiting_for(), timeout=WAIT)
    codes = [o.code for o in pane.answers if o.action in ("worker", "block")]
    assert codes == [Code.INVALID, Code.INVALID]
    assert "not 'the third'" in pane.drill_note.text() and pane.drill_note.isVisibleTo(pane)
    assert "reading the tracking store" not in pane.drill_heading.text()
    pane.show_worker("1")  # a number written as text is that worker
    qtbot.waitUntil(lambda: pane.worker_blocks_model.rowCount() > 0, timeout=WAIT)


def test_a_damaged_store_is_one_sentence_and_the_pane_keeps_answering(workspace, open_pane, qtbot):
    _, good = _store(workspace, "good")
    run, bad = _store(workspace, "bad")
    g = zarr.open_group(str(workspace.runs / "bad"), mode="a")
    del g["done"]
    g.create_array("done", shape=(7, 3), dtype=bool, fill_value=True)  # 21 where the grid has 20
    pane = open_pane(Recording)
    qtbot.waitUntil(lambda: pane.runs_proxy.rowCount() == 2, timeout=WAIT)
    pane.select(bad)
    qtbot.waitUntil(lambda: "delete the store" in pane.problems.text(), timeout=WAIT)
    assert pane.problems.isVisibleTo(pane)
    assert "could not be read" not in pane.problems.text()  # no poll failed: the store said why
    token = pane.ask("block", block_id=3)
    qtbot.waitUntil(lambda: _answered(pane, token) is not None, timeout=WAIT)
    assert _answered(pane, token).code is Code.FAILED
    pane.select(good)
    qtbot.waitUntil(lambda: pane.worker_model.rowCount() == 2, timeout=WAIT)


def test_opening_paths_that_are_no_store_says_why_under_the_runs_list(workspace, open_pane, qtbot,
                                                                       tmp_path):
    _, key = _store(workspace)
    (tmp_path / "notes.txt").write_text("not a store")
    pane = open_pane(Recording)
    tokens = [pane.open_store(p) for p in (
        tmp_path / "notes.txt", tmp_path / "missing", "x" * 5000, "",
        workspace.runs / "s" / ".." / "s")]
    qtbot.waitUntil(lambda: all(_answered(pane, t) for t in tokens), timeout=WAIT)
    codes = [_answered(pane, t).code for t in tokens]
    assert codes == [Code.INVALID, Code.MISSING, Code.INVALID, Code.INVALID, Code.DONE]
    assert _answered(pane, tokens[-1]).data["key"] == key
    shown = pane.open_problems.text().splitlines()
    assert len(shown) == 3 and shown[-1].startswith("No path was given")


def test_a_pipe_in_place_of_a_chunk_never_holds_the_pane_or_its_closing(workspace, qtbot):
    _, key = _store(workspace)
    chunk = next(p for p in (workspace.runs / "s" / "wall_seconds").rglob("*")
                 if p.is_file() and p.name != "zarr.json")
    chunk.unlink()
    os.mkfifo(chunk)
    pane = Recording(workspace)
    qtbot.addWidget(pane)
    try:
        pane.select(key)
        qtbot.waitUntil(lambda: "not a regular file" in pane.charts_note_text(), timeout=WAIT)
        started = time.monotonic()
        assert pane.shutdown(), "the watch did not close: a poll is stuck reading the pipe"
        assert time.monotonic() - started < 1.0
    finally:
        pane.shutdown()
        _unblock(chunk)


def _unblock(fifo) -> None:
    """Let a reader stuck opening ``fifo`` go, so a failing test leaves no thread behind."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    os.close(fd)


def test_hundreds_of_actions_in_a_burst_are_each_answered_and_none_after_shutdown(
        workspace, open_pane, qtbot):
    _, key = _store(workspace)
    pane = open_pane(Recording)
    tokens = []
    odd = ["abc", -1, 2.5, None, 10**40, [1], float("nan")]
    for i in range(300):
        which = i % 5
        if which == 0:
            tokens.append(pane.ask("select", key=key, run_index=odd[i % len(odd)]))
        elif which == 1:
            tokens.append(pane.ask("block", block_id=odd[i % len(odd)]))
        elif which == 2:
            tokens.append(pane.ask("worker", worker_id=i))
        elif which == 3:
            tokens.append(pane.ask("open", path=f"/nowhere/{i}"))
        else:
            tokens.append(pane.ask("no such action", anything=i))
    qtbot.waitUntil(lambda: not pane.waiting_for(), timeout=WAIT)
    answered = [o.token for o in pane.answers]
    assert set(tokens) <= set(answered) and len(answered) == len(set(answered))  # each once
    assert pane.shutdown()
    late = [pane.ask("open", path=str(workspace.runs / "s")) for _ in range(50)]
    assert not pane.watch.pending()  # nothing submitted to a closed watch
    assert not pane.waiting_for()  # and nothing waited for
    qtbot.wait(50)  # any signal still queued for the GUI thread is delivered now
    assert pane.after_shutdown == [] and all(_answered(pane, t) is None for t in late)
