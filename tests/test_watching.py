"""The watch protocol every pane shares (spacrq.watching), without Qt: outcomes and their codes,
the inbox, closing while a poll is in flight, table rows and the diff that keeps a table still."""
from __future__ import annotations

import threading
from dataclasses import FrozenInstanceError

import pytest

from spacrq.watching import Code, Outcome, Row, RowDiff, WatchBase, diff_rows


# -- Code and Outcome ------------------------------------------------------------------------
def test_only_done_is_ok_and_every_code_is_distinct():
    assert [c for c in Code if Outcome(1, "save", c).ok] == [Code.DONE]
    assert len({c.value for c in Code}) == len(Code)


def test_an_outcome_is_frozen_and_its_data_defaults_to_an_empty_read_only_mapping():
    first, second = Outcome(1, "save", Code.DONE), Outcome(2, "run", Code.REFUSED, "running")
    assert dict(first.data) == {} and first.message == ""
    with pytest.raises(TypeError):
        first.data["x"] = 1  # type: ignore[index]
    with pytest.raises(FrozenInstanceError):
        second.code = Code.DONE  # type: ignore[misc]
    assert Outcome(3, "run", Code.INVALID, data={"job": "a"}).data["job"] == "a"


# -- WatchBase -------------------------------------------------------------------------------
class Recorder(WatchBase):
    """A watch that notes what it was asked and when it let go."""

    def __init__(self) -> None:
        super().__init__()
        self.views: list[dict] = []
        self.released = 0
        self.polled_after_release = False

    def _poll(self, view):
        self.polled_after_release = self.polled_after_release or self.released > 0
        self.views.append(dict(view))
        return {"taken": self.take_submissions(), "outcomes": ()}

    def _release(self) -> None:
        self.released += 1


def test_submissions_come_out_once_oldest_first_with_their_arguments():
    watch = Recorder()
    assert not watch.pending()
    watch.submit(1, "save", path="a.json")
    watch.submit(2, "run")
    assert watch.pending()
    snapshot = watch.poll({"path": "a.json"})
    assert snapshot["taken"] == [(1, "save", {"path": "a.json"}), (2, "run", {})]
    assert watch.views == [{"path": "a.json"}]
    assert watch.poll({})["taken"] == [] and not watch.pending()


def test_submitting_from_many_threads_loses_nothing():
    watch = Recorder()
    threads = [threading.Thread(target=lambda n=n: [watch.submit(n * 1000 + i, "x")
                                                    for i in range(200)]) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(token for token, _a, _k in watch.take_submissions()) == sorted(
        n * 1000 + i for n in range(4) for i in range(200))


def test_close_when_idle_releases_once_and_polls_no_more():
    watch = Recorder()
    assert not watch.interrupted()
    assert watch.close(0.0) is True
    assert watch.interrupted() and watch.released == 1
    assert watch.poll({}) is None and watch.views == []
    assert watch.close(0.0) is True and watch.released == 1  # let go of once, not twice


class Stuck(Recorder):
    """A poll that only ends when the test lets it go (a share that does not answer)."""

    def __init__(self, heeds_close: bool) -> None:
        super().__init__()
        self.heeds_close = heeds_close
        self.inside, self.let_go = threading.Event(), threading.Event()

    def _poll(self, view):
        self.inside.set()
        while not self.let_go.wait(0.005):
            if self.heeds_close and self.interrupted():
                return "interrupted"
        return super()._poll(view)


def _poll_in_thread(watch) -> tuple[threading.Thread, list]:
    result: list = []
    thread = threading.Thread(target=lambda: result.append(watch.poll({})), daemon=True)
    thread.start()
    assert watch.inside.wait(5.0)
    return thread, result


def test_close_is_false_while_a_poll_is_stuck_then_true_once_it_ends():
    watch = Stuck(heeds_close=False)
    thread, _result = _poll_in_thread(watch)
    assert watch.close(0.05) is False
    assert watch.released == 0  # nothing let go of under a poll still using it
    watch.let_go.set()
    thread.join(5.0)
    assert watch.close(5.0) is True and watch.released == 1


def test_a_long_poll_that_checks_interrupted_ends_early_on_close():
    watch = Stuck(heeds_close=True)
    thread, result = _poll_in_thread(watch)
    assert watch.close(5.0) is True
    thread.join(5.0)
    assert result == ["interrupted"] and not watch.let_go.is_set()


class _PausingEvent(threading.Event):
    """An ``Event`` whose first ``clear()`` waits until the test says go."""

    def __init__(self) -> None:
        super().__init__()
        self.reached, self.go, self._first = threading.Event(), threading.Event(), True

    def clear(self) -> None:
        if self._first:
            self._first = False
            self.reached.set()
            self.go.wait(5.0)
        super().clear()


def test_a_poll_starting_just_as_close_returns_does_not_run_after_the_release():
    watch = Recorder()
    pausing = _PausingEvent()
    pausing.set()
    watch._idle = pausing
    result: list = []
    thread = threading.Thread(target=lambda: result.append(watch.poll({})), daemon=True)
    thread.start()
    assert pausing.reached.wait(5.0)  # the poll has begun, not yet marked busy
    assert watch.close(0.2) is True and watch.released == 1
    pausing.go.set()
    thread.join(5.0)
    assert result == [None] and watch.views == [] and not watch.polled_after_release


# -- Row -------------------------------------------------------------------------------------
def test_a_rows_tip_and_sort_key_fall_back_sensibly():
    row = Row("a", ("smooth", "7m 12s", "3"), tips=("the job",), sort=(None, 432.0))
    assert row.tip(0) == "the job" and row.tip(1) == "" and row.tip(9) == ""
    assert row.sort_key(0) == "smooth"   # no sort key: its text
    assert row.sort_key(1) == 432.0      # a number sorts as one
    assert row.sort_key(2) == "3" and row.sort_key(9) == ""


def test_rows_compare_by_what_is_shown_not_by_the_record_behind_them():
    assert Row("a", ("x",), value={"pid": 1}) == Row("a", ("x",), value={"pid": 2})
    assert Row("a", ("x",)) != Row("a", ("y",)) and Row("a", ("x",)) != Row("a", ("x",), look="failed")


# -- diff_rows -------------------------------------------------------------------------------
def rows(spec: str, changed: str = "") -> tuple[Row, ...]:
    """One row per letter of ``spec``; the letters in ``changed`` show other text."""
    return tuple(Row(k, (k.upper() + ("!" if k in changed else ""),)) for k in spec)


@pytest.mark.parametrize("old, new, expected", [
    (rows("abc"), rows("abc"), RowDiff("same")),
    (rows("abc"), rows("abc", "b"), RowDiff("update", (1,))),
    (rows("abc"), rows("abc", "ac"), RowDiff("update", (0, 2))),
    (rows(""), rows("ab"), RowDiff("insert", (), 0, 2)),
    (rows("ac"), rows("abc"), RowDiff("insert", (), 1, 1)),
    (rows("ab"), rows("abcd"), RowDiff("insert", (), 2, 2)),
    (rows("bc"), rows("abc", "c"), RowDiff("insert", (2,), 0, 1)),
    (rows("abc"), rows("ac"), RowDiff("remove", (), 1, 1)),
    (rows("abcd"), rows("ad", "a"), RowDiff("remove", (0,), 1, 2)),
    (rows("a"), rows(""), RowDiff("remove", (), 0, 1)),
    (rows("abcd"), rows("acbd"), RowDiff("update", (1, 2))),     # b moved down one
    (rows("abcd"), rows("dbca"), RowDiff("update", (0, 3))),     # first and last swapped
    (rows("abc"), rows("xy"), RowDiff("reset")),
    (rows("abc"), rows("bcad"), RowDiff("reset")),
], ids=["same", "one-changed", "two-changed", "into-empty", "insert-middle", "append",
        "insert-first-and-change", "remove-middle", "remove-two-and-change", "remove-last-one",
        "move", "swap", "other-keys", "reshuffle-and-grow"])
def test_diff_rows_gives_the_fewest_changes(old, new, expected):
    assert diff_rows(old, new) == expected


def test_diff_rows_changed_indices_point_at_the_new_rows():
    old, new = rows("abc"), rows("xabc", "c")
    change = diff_rows(old, new)
    assert change == RowDiff("insert", (3,), 0, 1)
    assert new[change.changed[0]].cells == ("C!",)


def test_diff_rows_takes_a_key_function():
    old = [{"id": 1, "s": "queued"}, {"id": 2, "s": "queued"}]
    new = [{"id": 1, "s": "running"}, {"id": 2, "s": "queued"}]
    assert diff_rows(old, new, key=lambda r: r["id"]) == RowDiff("update", (0,))
