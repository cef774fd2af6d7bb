"""The Queue pane's poller body and decisions, without Qt."""
from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from spacrq.queue.model import Job, Queue
from spacrq.queue.store import Journal, journal_path, logs_dir, save_queue
from spacrq.queue.pane_rules import (PaneState, controls_for, edit_refusal, newest_queue,
                                     parse_after, parse_overrides, parse_timeout, queue_to_open)
from spacrq.queue.watch import QueueWatch
from spacrq.queue.watch_log import trim_log
from spacrq.queue.watch_read import parse_in_pieces
from spacrq.queue.watch_rows import JobRow, diff_rows, progress_of, rows_of, status_text, time_text


def _row(job_id: str, status: str = "pending", number: int = 1, **kw) -> JobRow:
    return JobRow(number=number, job_id=job_id, module="command", label=job_id, after="",
                  status=status, **kw)


def _rows(*ids: str) -> tuple[JobRow, ...]:
    return tuple(_row(i, number=n) for n, i in enumerate(ids, start=1))


def _queue(n: int, name: str = "night") -> Queue:
    q = Queue(name=name)
    for _ in range(n):
        q.add(Job(module="command", settings={"argv": ["true"]}), validate=False)
    return q


def _saved(tmp_path: Path, q: Queue | int = 3) -> Path:
    """``q`` (or a queue of that many jobs) saved as ``night.queue.json``; its path."""
    path = tmp_path / "night.queue.json"
    save_queue(q if isinstance(q, Queue) else _queue(q), path)
    return path


def _watching(path: Path) -> QueueWatch:
    """A watch that has already read ``path`` once."""
    watch = QueueWatch()
    watch.poll({"path": str(path)})
    return watch


def _logs(path: Path) -> Path:
    """The queue's log folder, made."""
    folder = logs_dir(path)
    folder.mkdir(exist_ok=True)
    return folder


@contextmanager
def _journal(q: Queue, path: Path):
    """The runner's journal for ``path``, closed afterwards."""
    journal = Journal(q, path)
    try:
        yield journal
    finally:
        journal.close()


def _journal_status(journal: Journal, job: Job, status: str) -> None:
    """Set ``job``'s status and journal it, as the runner does."""
    job.status = status
    journal.job(job, ("status",))


# -- diff_rows -------------------------------------------------------------------

def test_identical_rows_are_the_same():
    assert diff_rows(_rows("a", "b"), _rows("a", "b")).kind == "same"


def test_a_status_change_updates_only_that_row():
    old = _rows("a", "b", "c")
    new = (old[0], _row("b", "running", number=2), old[2])
    change = diff_rows(old, new)
    assert change.kind == "update" and change.changed == (1,)


def test_jobs_added_at_the_end_are_an_insert():
    change = diff_rows(_rows("a", "b"), _rows("a", "b", "c", "d"))
    assert (change.kind, change.first, change.count, change.changed) == ("insert", 2, 2, ())


def test_a_removed_job_is_a_remove_and_renumbers_the_rows_after_it():
    change = diff_rows(_rows("a", "b", "c", "d"), _rows("a", "c", "d"))
    assert (change.kind, change.first, change.count) == ("remove", 1, 1)
    assert change.changed == (1, 2)  # their "#" moved up by one


def test_moving_a_job_up_updates_the_two_rows_that_swapped():
    change = diff_rows(_rows("a", "b", "c", "d"), _rows("a", "c", "b", "d"))
    assert change.kind == "update" and change.changed == (1, 2)


def test_an_unrelated_reshuffle_resets():
    assert diff_rows(_rows("a", "b", "c"), _rows("x", "y")).kind == "reset"


def test_insert_in_the_middle():
    change = diff_rows(_rows("a", "c"), _rows("a", "b", "c"))
    assert (change.kind, change.first, change.count, change.changed) == ("insert", 1, 1, (2,))


# -- rows, words, times -----------------------------------------------------------

def test_rows_carry_status_error_dependencies_and_partial():
    q = _queue(2)
    q.jobs[1].depends_on = ["command-1"]
    q.jobs[0].status, q.jobs[0].run_status = "success", {"n_failed": 3, "n_ok": 5}
    q.jobs[1].status, q.jobs[1].error = "skipped", "skipped: command-1 is partial"
    rows = rows_of(q)
    assert [r.number for r in rows] == [1, 2]
    assert status_text(rows[0]) == "partial" and rows[1].after == "command-1"
    assert status_text(rows[1]) == "skipped" and "partial" in rows[1].error
    assert status_text(_row("x", "not_run")) == "not run"
    assert status_text(_row("x", "success")) == "succeeded"


def test_time_ticks_only_while_running():
    started = time.time() - 75
    running = _row("a", "running", started_at=started)
    assert time_text(running, started + 75) == "1m 15s"
    assert time_text(running, started + 3700) == "1h 01m"
    done = _row("a", "success", started_at=started, finished_at=started + 4.2)
    assert time_text(done, started + 9999) == "4.2s"
    assert time_text(_row("a"), started) == "—"


def test_progress_counts_finished_jobs_as_done():
    rows = (_row("a", "success"), _row("b", "failed"), _row("c", "skipped"),
            _row("d", "running"), _row("e", "not_run"), _row("f"))
    done, total, counts = progress_of(rows)
    assert (done, total) == (3, 6)
    assert counts["not run"] == 1 and counts["running"] == 1


# -- editor fields ---------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [("", None), ("90", 90), ("90s", 90), ("30m", 1800),
                                           ("2h", 7200), ("1h30m", 5400), ("1.5h", 5400)])
def test_timeouts_read_as_an_operator_writes_them(text, seconds):
    assert parse_timeout(text) == (seconds, None)


def test_a_bad_timeout_is_one_sentence_with_the_fix():
    value, problem = parse_timeout("soon")
    assert value is None and "90s, 30m, 2h" in problem


def test_overrides_need_key_equals_value():
    assert parse_overrides("a=1 'b=two words'") == (["a=1", "b=two words"], None)
    words, problem = parse_overrides("diameter 30")
    assert words == [] and "key=value" in problem
    assert "quote" in parse_overrides("a='1")[1]


def test_after_accepts_commas_and_spaces():
    assert parse_after("mask-1, measure-2 mask-1") == ["mask-1", "measure-2"]


# -- decisions ---------------------------------------------------------------------

def test_editing_is_refused_while_a_runner_owns_the_file():
    rows = (_row("a", "running"), _row("b"))
    c = controls_for(PaneState(runner_alive=True, rows=rows, selected=(1,), has_path=True))
    assert not any((c.add, c.remove, c.duplicate, c.move_up, c.save, c.run, c.resume,
                    c.edit_options))
    assert c.stop and c.abort and c.open
    sentence = edit_refusal({"alive": True, "pid": 4242}, "remove a job")
    assert "4242" in sentence and "Stop it first" in sentence
    assert edit_refusal({"alive": False}) is None and edit_refusal(None) is None


def test_stop_is_offered_once():
    c = controls_for(PaneState(runner_alive=True, stop_asked=True, rows=(_row("a", "running"),)))
    assert not c.stop and c.abort


def test_idle_controls_follow_the_queue():
    pending = (_row("a"), _row("b"), _row("c"))
    c = controls_for(PaneState(rows=pending, selected=(0,), has_path=True))
    assert c.run and not c.resume and not c.retry_failed
    assert c.move_down and not c.move_up and c.remove and not c.save
    halted = (_row("a", "success"), _row("b", "failed"), _row("c", "not_run"))
    c = controls_for(PaneState(rows=halted, selected=(2,), has_path=True, dirty=True))
    assert not c.run and c.resume and c.retry_failed and c.save and not c.move_down
    assert not controls_for(PaneState()).validate


def test_newest_queue_file_is_opened_first(tmp_path):
    assert newest_queue(tmp_path) is None
    old, new = tmp_path / "a.queue.json", tmp_path / "b.queue.json"
    old.write_text("{}")
    new.write_text("{}")
    (tmp_path / "notes.json").write_text("{}")
    os.utime(old, (time.time() - 100, time.time() - 100))
    assert newest_queue(tmp_path) == new


def test_log_is_bounded_in_size_and_line_length():
    text, trimmed = trim_log("x" * 10 + "\n" + "y" * 300_000 + "\nlast\n", keep=1000, line_chars=50)
    assert trimmed and len(text) < 1200
    assert text.endswith("last\n") and "skipped" in text
    short, trimmed = trim_log("one\ntwo\n")
    assert (short, trimmed) == ("one\ntwo\n", False)


# -- the poller body ---------------------------------------------------------------

def test_first_poll_reads_the_queue_then_nothing_until_it_changes(tmp_path):
    path = _saved(tmp_path)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    assert [r.job_id for r in snap.rows] == ["command-1", "command-2", "command-3"]
    assert snap.queue is not None and snap.queue.ids == ["command-1", "command-2", "command-3"]
    assert watch.poll({"path": str(path)}) is None


def test_the_queue_handed_to_the_editor_is_never_changed_by_the_watch(tmp_path):
    q = _queue(3)
    path = _saved(tmp_path, q)
    watch = QueueWatch()
    handed = watch.poll({"path": str(path)}).queue
    with _journal(q, path) as journal:
        _journal_status(journal, q.jobs[0], "success")
    snap = watch.poll({"path": str(path)})
    assert snap.rows[0].status == "success", "the journal line is shown"
    assert handed.jobs[0].status == "pending", "but the editor's queue was not touched"
    assert snap.queue is not handed


def test_journal_lines_update_only_the_rows_they_name(tmp_path):
    q = _queue(2000)
    path = _saved(tmp_path, q)
    watch = _watching(path)
    with _journal(q, path) as journal:
        job = q.jobs[1500]
        job.status, job.started = "running", "2026-01-01T00:00:00+00:00"
        journal.job(job, ("status", "started"))
        snap = watch.poll({"path": str(path)})
    assert snap.rows[1500].status == "running"
    assert diff_rows(watch_rows_before := rows_of(_queue(2000)), snap.rows).changed == (1500,)
    assert len(watch_rows_before) == 2000


def test_a_checkpoint_replacing_the_file_is_read_in_full(tmp_path):
    q = _queue(3)
    path = _saved(tmp_path, q)
    watch = _watching(path)
    with _journal(q, path) as journal:
        _journal_status(journal, q.jobs[0], "success")
        _journal_status(journal, q.jobs[1], "failed")
        journal.checkpoint()
    assert journal_path(path).stat().st_size == 0
    snap = watch.poll({"path": str(path)})
    assert [r.status for r in snap.rows] == ["success", "failed", "pending"]


def test_a_broken_file_is_one_sentence_and_its_repair_clears_it(tmp_path):
    path = tmp_path / "night.queue.json"
    path.write_text('{"spacr_queue": 1, "jobs": [')
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    assert "not valid JSON" in snap.load_error and "\n" not in snap.load_error
    assert snap.rows is None
    save_queue(_queue(1), path)
    snap = watch.poll({"path": str(path)})
    assert snap.load_error == "" and len(snap.rows) == 1


def test_a_missing_file_says_save_writes_it(tmp_path):
    snap = QueueWatch().poll({"path": str(tmp_path / "new.queue.json")})
    assert "Save writes it" in snap.load_error


def test_validation_runs_in_the_poller_and_reports_every_problem(tmp_path):
    q = _queue(2)
    q.jobs[0].module = "no_such_module"
    q.jobs[1].depends_on = ["ghost-1"]
    path = _saved(tmp_path, q)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path), "validate": (1, q.to_dict())})
    assert snap.problems_token == 1
    messages = " | ".join(p.message for p in snap.problems)
    assert "no_such_module" in messages and "ghost-1" in messages
    assert all(p.fix for p in snap.problems)
    assert watch.poll({"path": str(path), "validate": (1, q.to_dict())}) is None


def test_the_selected_jobs_log_is_tailed_incrementally(tmp_path):
    path = tmp_path / "night.queue.json"
    q = _queue(2)
    log = _logs(path) / "02_command-2.log"
    log.write_text("first line\n")
    q.jobs[1].log_path = str(log)
    save_queue(q, path)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path), "log_job": "command-2"})
    assert snap.log_restarted and snap.log_text == "first line\n" and snap.log_path == str(log)
    with open(log, "a") as handle:
        handle.write("second line\n")
    snap = watch.poll({"path": str(path), "log_job": "command-2"})
    assert snap.log_text == "second line\n" and not snap.log_restarted


def test_a_log_path_outside_the_queue_folder_is_not_read(tmp_path):
    path = tmp_path / "q" / "night.queue.json"
    path.parent.mkdir()
    secret = tmp_path / "secret.log"
    secret.write_text("do not show\n")
    q = _queue(1)
    q.jobs[0].log_path = str(secret)
    save_queue(q, path)
    snap = QueueWatch().poll({"path": str(path), "log_job": "command-1"})
    assert snap.log_path == "" and "do not show" not in snap.log_text


def test_a_log_is_found_by_its_file_name_when_the_job_has_none(tmp_path):
    path = _saved(tmp_path, 1)
    (_logs(path) / "01_command-1.log").write_text("hello\n")
    snap = QueueWatch().poll({"path": str(path), "log_job": "command-1"})
    assert snap.log_text == "hello\n"


def test_a_huge_log_hands_the_view_only_its_tail(tmp_path):
    path = _saved(tmp_path, 1)
    log = _logs(path) / "01_command-1.log"
    watch = QueueWatch()
    watch.poll({"path": str(path), "log_job": "command-1"})
    with open(log, "w") as handle:
        for i in range(400_000):  # ~ 12 MB
            handle.write(f"line {i:08d} of a very chatty job\n")
    snap = watch.poll({"path": str(path), "log_job": "command-1"})
    assert len(snap.log_text) <= 70_000 and snap.log_restarted
    assert snap.log_text.rstrip().endswith("line 00399999 of a very chatty job")
    assert "skipped" in snap.log_text.splitlines()[0], "the view says what it left out"


def test_runner_files_are_read_and_a_stop_request_is_seen(tmp_path):
    """A runner.json whose process is alive reads as alive, with the control request."""
    from spacrq.runfiles import ask, write_json

    path = _saved(tmp_path, 1)
    folder = _logs(path)
    me = _self_ref()
    write_json(folder / "runner.json", {"pid": me["pid"], "started": me["started"],
                                        "host": "here", "queue": str(path), "state": "running",
                                        "current_job": "command-1", "heartbeat_at": time.time()})
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    assert snap.runner["alive"] is True and snap.runner["current_job"] == "command-1"
    assert snap.queue is None, "the editor gets no copy while a runner owns the file"
    ask(folder, stop="after_job")
    snap = watch.poll({"path": str(path)})
    assert snap.runner["stop"] == "after_job"


def _self_ref() -> dict:
    import psutil
    me = psutil.Process()
    return {"pid": me.pid, "started": me.create_time()}


def test_queue_file_is_json_the_watch_does_not_write(tmp_path):
    path = _saved(tmp_path, 2)
    before = path.read_bytes()
    watch = QueueWatch()
    for _ in range(3):
        watch.poll({"path": str(path), "log_job": "command-1", "validate": (1, json.loads(before))})
    assert path.read_bytes() == before


def _pretend_runner_is_alive(path) -> None:
    from spacrq.runfiles import write_json
    me = _self_ref()
    write_json(_logs(path) / "runner.json", {"pid": me["pid"], "started": me["started"],
                                        "state": "running", "current_job": None})


def test_a_running_queues_checkpoint_is_merged_not_rebuilt(tmp_path, monkeypatch):
    """Lines folded into a checkpoint before the watch saw them still reach the rows,
    and a 2000-job queue is not re-made from scratch every few seconds."""
    q = _queue(50)
    path = _saved(tmp_path, q)
    _pretend_runner_is_alive(path)
    watch = QueueWatch()
    assert watch.poll({"path": str(path)}).runner["alive"]
    with _journal(q, path) as journal:
        _journal_status(journal, q.jobs[0], "success")
        watch.poll({"path": str(path)})  # seen through the journal
        _journal_status(journal, q.jobs[1], "failed")
        _journal_status(journal, q.jobs[2], "running")
        journal.checkpoint()  # folds seq 2 and 3 into the file, empties the journal
        _journal_status(journal, q.jobs[2], "success")  # seq 4, in the fresh journal

    def no_rebuild(*_a, **_k):
        raise AssertionError("the whole queue was rebuilt")
    monkeypatch.setattr(Queue, "from_dict", no_rebuild)
    snap = watch.poll({"path": str(path)})
    assert [r.status for r in snap.rows[:4]] == ["success", "failed", "success", "pending"]
    assert watch.poll({"path": str(path)}) is None


def test_missed_journal_lines_force_a_full_read(tmp_path):
    q = _queue(3)
    path = _saved(tmp_path, q)
    watch = _watching(path)
    _logs(path)
    with open(journal_path(path), "w") as handle:  # seq 1 and 2 lost, 3 arrives
        handle.write(json.dumps({"seq": 3, "job": "command-3", "set": {"status": "failed"}}) + "\n")
    q.jobs[0].status = q.jobs[1].status = "success"
    q.journal_seq = 2
    from spacrq.runfiles import write_json
    write_json(path, q.to_dict())
    snap = watch.poll({"path": str(path)})
    assert [r.status for r in snap.rows] == ["success", "success", "failed"]


def test_the_poller_refuses_to_save_over_a_running_queue(tmp_path):
    """Even a window that has not yet seen the runner cannot overwrite its file."""
    path = _saved(tmp_path, 2)
    _pretend_runner_is_alive(path)
    before = path.read_bytes()
    watch = QueueWatch()
    snap = watch.poll({"path": str(path), "save": (1, _queue(5).to_dict())})
    (result,) = snap.actions
    assert result.kind == "save" and not result.ok and not result.saved
    assert "Stop it first" in result.message
    assert path.read_bytes() == before
    snap = watch.poll({"path": str(path), "run": (2, "run", _queue(5).to_dict())})
    assert not snap.actions[0].ok and path.read_bytes() == before


def test_run_saves_checks_and_refuses_a_queue_with_errors(tmp_path):
    path = tmp_path / "night.queue.json"
    q = _queue(2)
    q.jobs[1].module = "no_such_module"
    watch = QueueWatch()
    snap = watch.poll({"path": str(path), "run": (1, "run", q.to_dict())})
    (result,) = snap.actions
    assert not result.ok and result.saved and "1 problem(s)" in result.message
    assert any("no_such_module" in p.message for p in result.problems)
    assert path.exists() and not (logs_dir(path) / "runner.json").exists()


def test_save_writes_the_document_and_says_so(tmp_path):
    path = tmp_path / "night.queue.json"
    watch = QueueWatch()
    snap = watch.poll({"path": str(path), "save": (1, _queue(3).to_dict())})
    assert snap.actions[0].ok and snap.actions[0].saved
    assert json.loads(path.read_text())["jobs"][2]["id"] == "command-3"
    again = watch.poll({"path": str(path), "save": (1, _queue(3).to_dict())})
    assert again is None or not again.actions, "a request is carried out once"


def test_with_nothing_selected_or_running_the_runners_summary_is_shown(tmp_path):
    path = _saved(tmp_path, 1)
    (_logs(path) / "runner.log").write_text("spacrq queue night: 1 job(s), 1 ok\n")
    snap = QueueWatch().poll({"path": str(path), "log_job": ""})
    assert snap.log_job == "" and snap.log_path.endswith("runner.log")
    assert "1 ok" in snap.log_text


def test_the_running_queue_is_opened_first_even_when_not_the_newest(tmp_path):
    running = _saved(tmp_path, 1)
    _pretend_runner_is_alive(running)
    newer = tmp_path / "tomorrow.queue.json"
    save_queue(_queue(1), newer)
    os.utime(running, (time.time() - 3600, time.time() - 3600))
    assert newest_queue(tmp_path) == newer
    assert queue_to_open(tmp_path) == running


def test_a_save_just_before_a_runner_starts_is_read_in_full(tmp_path):
    """The editor's save and the runner's first checkpoint carry the same journal_seq;
    the saved jobs must still replace the old ones (no checkpoint shortcut)."""
    path = _saved(tmp_path)
    watch = _watching(path)
    edited = _queue(3)
    edited.jobs[2].label = "classify plate 1, diameter 30"
    snap = watch.poll({"path": str(path), "save": (1, edited.to_dict())})
    assert snap.actions[0].ok
    _pretend_runner_is_alive(path)  # the runner starts right after the save
    snap = watch.poll({"path": str(path)})
    assert snap.rows[2].label == "classify plate 1, diameter 30"
    fewer = _queue(2)
    snap = watch.poll({"path": str(path), "save": (2, fewer.to_dict())})
    assert not snap.actions[0].ok, "refused: the runner owns the file now"


@pytest.mark.parametrize("text", [
    '{}', ' { "jobs" : [ ] } ', '{"jobs": [{"id": "a", "x": [1, {"y": null}]}, {"id": "b"}],'
    ' "name": "n", "created": "t"}', '{"spacr_queue": 1, "jobs": {"not": "a list"}}',
    '{"a": "}", "jobs": ["]", "[", "\\"]"]}', '\n{\n  "jobs": [\n    {"id": "é"}\n  ]\n}\n',
])
def test_parsing_in_pieces_reads_what_json_reads(text):
    assert parse_in_pieces(text) == json.loads(text)


@pytest.mark.parametrize("text", ['', '[]', '{"jobs": [1,]}', '{"a": 1} x', '{"a" 1}',
                                  '{"jobs": [{"id": "a"}'])
def test_parsing_in_pieces_refuses_what_json_refuses(text):
    with pytest.raises(ValueError):
        parse_in_pieces(text)


def test_a_saved_queue_parses_in_pieces_exactly(tmp_path):
    q = _queue(50)
    q.jobs[3].env = {"OMP_NUM_THREADS": "4"}
    path = _saved(tmp_path, q)
    text = path.read_text()
    assert parse_in_pieces(text) == json.loads(text)


def test_trailing_commas_are_refused_as_json_refuses_them():
    for text in ('{"a": 1,}', '{"jobs": [{"id": "a"},]}'):
        with pytest.raises(ValueError):
            parse_in_pieces(text)
