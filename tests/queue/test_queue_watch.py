"""The Queue pane's watch (its poller body and actions), without Qt."""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from spacrq.queue.model import Job, Queue
from spacrq.queue.store import Journal, journal_path, logs_dir, save_queue
from spacrq.queue.watch import QueueWatch, newest_queue, queue_to_open, trim_log
from spacrq.watching import Code, diff_rows
from waiting import wait_until  # tests/waiting.py (tests/ is on the path)


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


def _asked(watch: QueueWatch, view: dict, token: int, action: str, **args):
    """Submit one action and poll: ``(snapshot, its outcome)``."""
    watch.submit(token, action, **args)
    snap = watch.poll(view)
    (outcome,) = snap.outcomes
    assert outcome.token == token and outcome.action == action
    return snap, outcome


def _statuses(rows) -> list[str]:
    return [r.value.status for r in rows]


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
    assert [r.key for r in snap.rows] == ["command-1", "command-2", "command-3"]
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
    assert snap.rows[0].value.status == "success", "the journal line is shown"
    assert handed.jobs[0].status == "pending", "but the editor's queue was not touched"
    assert snap.queue is not handed


def test_journal_lines_update_only_the_rows_they_name(tmp_path):
    q = _queue(2000)
    path = _saved(tmp_path, q)
    watch = QueueWatch()
    before = watch.poll({"path": str(path)})
    with _journal(q, path) as journal:
        job = q.jobs[1500]
        job.status, job.started = "running", "2026-01-01T00:00:00+00:00"
        journal.job(job, ("status", "started"))
        snap = watch.poll({"path": str(path)})
    assert snap.rows[1500].value.status == "running"
    assert diff_rows(before.rows, snap.rows).changed == (1500,)
    assert all(new is old for i, (new, old) in enumerate(zip(snap.rows, before.rows))
               if i != 1500), "the rows of unchanged jobs are the very same objects"


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
    assert _statuses(snap.rows) == ["success", "failed", "pending"]


def test_a_broken_file_is_one_sentence_and_its_repair_clears_it(tmp_path):
    path = tmp_path / "night.queue.json"
    path.write_text('{"spacr_queue": 1, "jobs": [')
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    assert "not valid JSON" in snap.load_error and "\n" not in snap.load_error
    assert snap.load_code is Code.INVALID and snap.on_disk is True
    assert snap.rows is None
    save_queue(_queue(1), path)
    snap = watch.poll({"path": str(path)})
    assert snap.load_error == "" and len(snap.rows) == 1


def test_a_missing_file_says_save_writes_it(tmp_path):
    snap = QueueWatch().poll({"path": str(tmp_path / "new.queue.json")})
    assert "Save writes it" in snap.load_error
    assert snap.load_code is Code.MISSING and snap.on_disk is False


def test_validation_runs_in_the_poller_and_reports_every_problem(tmp_path):
    q = _queue(2)
    q.jobs[0].module = "no_such_module"
    q.jobs[1].depends_on = ["ghost-1"]
    path = _saved(tmp_path, q)
    watch = QueueWatch()
    view = {"path": str(path)}
    watch.poll(view)
    _snap, outcome = _asked(watch, view, 1, "validate", document=q.to_dict())
    assert outcome.code is Code.DONE
    messages = " | ".join(p.message for p in outcome.data["problems"])
    assert "no_such_module" in messages and "ghost-1" in messages
    assert all(p.fix for p in outcome.data["problems"])
    assert watch.poll(view) is None, "an action is carried out once"


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
    for token in range(3):
        watch.submit(token, "validate", document=json.loads(before))
        watch.poll({"path": str(path), "log_job": "command-1"})
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
    assert _statuses(snap.rows[:4]) == ["success", "failed", "success", "pending"]
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
    assert _statuses(snap.rows) == ["success", "success", "failed"]


def test_the_poller_refuses_to_save_over_a_running_queue(tmp_path):
    """Even a window that has not yet seen the runner cannot overwrite its file."""
    path = _saved(tmp_path, 2)
    _pretend_runner_is_alive(path)
    before = path.read_bytes()
    watch = QueueWatch()
    view = {"path": str(path)}
    _snap, result = _asked(watch, view, 1, "save", path=str(path), document=_queue(5).to_dict())
    assert result.code is Code.REFUSED and not result.data["saved"]
    assert "Stop it first" in result.message
    assert path.read_bytes() == before
    _snap, result = _asked(watch, view, 2, "run", how="run", document=_queue(5).to_dict())
    assert result.code is Code.REFUSED and path.read_bytes() == before


def test_run_saves_checks_and_refuses_a_queue_with_errors(tmp_path):
    path = tmp_path / "night.queue.json"
    q = _queue(2)
    q.jobs[1].module = "no_such_module"
    watch = QueueWatch()
    _snap, result = _asked(watch, {"path": str(path)}, 1, "run", how="run", document=q.to_dict())
    assert result.code is Code.INVALID and result.data["saved"]
    assert "1 problem(s)" in result.message
    assert any("no_such_module" in p.message for p in result.data["problems"])
    assert path.exists() and not (logs_dir(path) / "runner.json").exists()


def test_save_writes_the_document_and_says_so(tmp_path):
    path = tmp_path / "night.queue.json"
    watch = QueueWatch()
    view = {"path": str(path)}
    _snap, result = _asked(watch, view, 1, "save", document=_queue(3).to_dict())
    assert result.code is Code.DONE and result.data["saved"]
    assert json.loads(path.read_text())["jobs"][2]["id"] == "command-3"
    again = watch.poll(view)
    assert again is None or not again.outcomes, "a request is carried out once"


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
    view = {"path": str(path)}
    _snap, result = _asked(watch, view, 1, "save", document=edited.to_dict())
    assert result.ok
    _pretend_runner_is_alive(path)  # the runner starts right after the save
    snap = watch.poll({"path": str(path)})
    assert snap.rows[2].value.label == "classify plate 1, diameter 30"
    fewer = _queue(2)
    _snap, result = _asked(watch, view, 2, "save", document=fewer.to_dict())
    assert result.code is Code.REFUSED, "refused: the runner owns the file now"


# -- the protocol: every action answers with a code -----------------------------------

def test_the_first_poll_lists_the_modules_a_job_may_name(tmp_path):
    watch = QueueWatch()
    snap = watch.poll({"path": ""})
    assert {"command", "python"} <= set(snap.modules)
    assert watch.poll({"path": ""}) is None, "listed once"


def test_the_queue_to_show_first_is_chosen_by_the_watch(tmp_path):
    watch = QueueWatch()
    watch.poll({})
    _snap, chosen = _asked(watch, {}, 1, "choose_queue", folder=str(tmp_path))
    assert chosen.code is Code.DONE and not chosen.data["exists"]
    assert chosen.data["path"].endswith(".queue.json") and not Path(chosen.data["path"]).exists()
    path = _saved(tmp_path, 1)
    _snap, chosen = _asked(watch, {}, 2, "choose_queue", folder=str(tmp_path))
    assert chosen.data == {"path": str(path), "exists": True}
    _snap, named = _asked(watch, {}, 3, "new_name", folder=str(tmp_path))
    assert named.ok and named.data["path"] != str(path)


def test_open_answers_missing_for_a_file_that_is_not_there(tmp_path):
    watch = QueueWatch()
    watch.poll({})
    _snap, answer = _asked(watch, {}, 1, "open", path=str(tmp_path / "gone.queue.json"))
    assert answer.code is Code.MISSING and "not found" in answer.message
    path = _saved(tmp_path, 1)
    _snap, answer = _asked(watch, {}, 2, "open", path=str(path))
    assert answer.code is Code.DONE and answer.data["path"] == str(path)


def test_a_job_to_add_is_checked_by_the_watch(tmp_path):
    path = _saved(tmp_path, 1)
    q = _queue(1)
    watch = _watching(path)
    view = {"path": str(path)}
    bad = Job(module="command", id="command-2", settings={"argv": ["no-such-program-spacrq"]})
    _snap, answer = _asked(watch, view, 1, "check_job", job=bad.to_dict(), document=q.to_dict())
    assert answer.code is Code.INVALID and "not on PATH" in answer.message
    assert answer.data["job"]["id"] == "command-2" and answer.data["problems"]
    settings = tmp_path / "settings.csv"
    settings.write_text("Key,Value\nargv,\"[\"\"true\"\"]\"\n")
    good = Job(module="command", id="command-2", settings=str(settings), depends_on=["command-1"])
    _snap, answer = _asked(watch, view, 2, "check_job", job=good.to_dict(), document=q.to_dict())
    assert answer.code is Code.DONE and answer.message == ""
    ghost = Job(module="command", id="c3", settings={"argv": ["true"]}, depends_on=["ghost"])
    _snap, answer = _asked(watch, view, 3, "check_job", job=ghost.to_dict(), document=q.to_dict())
    assert answer.code is Code.INVALID and "ghost" in answer.message


def test_a_module_is_described_by_the_watch(tmp_path):
    watch = QueueWatch()
    watch.poll({})
    _snap, answer = _asked(watch, {}, 1, "describe", module="command")
    assert answer.code is Code.DONE and "argv" in answer.data["info"].keys
    _snap, answer = _asked(watch, {}, 2, "describe", module="no_such_module")
    assert answer.code is Code.MISSING


def test_settings_files_are_read_by_the_watch(tmp_path):
    good = tmp_path / "a.json"
    good.write_text('{"diameter": 30}')
    bad = tmp_path / "b.json"
    bad.write_text('{"diameter": NaN}')
    watch = QueueWatch()
    watch.poll({})
    _snap, answer = _asked(watch, {}, 1, "read_settings", paths=[str(good)])
    assert answer.code is Code.DONE
    assert answer.data["settings"] == ({"path": str(good), "settings": {"diameter": 30}},)
    _snap, answer = _asked(watch, {}, 2, "read_settings", paths=[str(good), str(bad)])
    assert answer.code is Code.INVALID and str(bad) in answer.message


def test_stop_writes_the_request_and_an_unknown_action_is_invalid(tmp_path):
    path = _saved(tmp_path, 1)
    watch = _watching(path)
    view = {"path": str(path)}
    _snap, answer = _asked(watch, view, 1, "stop", now=False)
    assert answer.code is Code.DONE and answer.data["how"] == "after_job"
    assert json.loads((logs_dir(path) / "control.json").read_text())["stop"] == "after_job"
    _snap, answer = _asked(watch, view, 2, "fly")
    assert answer.code is Code.INVALID


def test_the_panes_abort_reaches_a_runner_whose_request_file_cannot_be_written(tmp_path):
    """A full disk (here: a folder where the request goes): the pane's Stop says it was not
    sent and that Abort still reaches the runner; Abort is sent as a signal, and the job
    ends not_run."""
    import signal
    from spacrq.queue.runner import start_runner
    from spacrq.queue.store import load_queue
    from waiting import reap
    path = tmp_path / "night.queue.json"
    queue = Queue(name="night")
    queue.add(Job(module="command", id="long", settings={"argv": ["sleep", "60"]}))
    save_queue(queue, path)
    ref = start_runner(path)
    try:
        wait_until(lambda: load_queue(path).jobs[0].status == "running", timeout=30,
                   what="the job to run")
        (logs_dir(path) / "control.json").unlink(missing_ok=True)
        (logs_dir(path) / "control.json").mkdir()
        watch, view = _watching(path), {"path": str(path)}
        _snap, answer = _asked(watch, view, 1, "stop", now=False)
        assert answer.code is Code.FAILED and answer.message.startswith("Stop not sent: ")
        assert answer.message.endswith("; Abort still reaches the runner (as a signal)")
        _snap, answer = _asked(watch, view, 2, "stop", now=True)
        assert answer.code is Code.DONE and answer.data["how"] == "abort"
        assert answer.message.startswith(f"Abort sent as a signal to process {ref.pid} ")
    except BaseException:
        try:
            os.kill(ref.pid, signal.SIGTERM)  # (a failed test leaves no runner behind)
        except OSError:
            pass
        raise
    finally:
        reap(ref.pid)
    assert load_queue(path).jobs[0].status == "not_run"


def test_an_action_that_raises_is_a_failed_outcome_and_the_watch_goes_on(tmp_path, monkeypatch):
    import spacrq.queue.watch as watch_module

    def broken(*_a, **_k):
        raise OSError("the disk is gone")
    monkeypatch.setattr(watch_module, "queue_to_open", broken)
    watch = QueueWatch()
    watch.poll({})
    _snap, answer = _asked(watch, {}, 1, "choose_queue", folder=str(tmp_path))
    assert answer.code is Code.FAILED and "the disk is gone" in answer.message
    _snap, answer = _asked(watch, {}, 2, "new_name", folder=str(tmp_path))
    assert answer.ok


def test_close_returns_within_its_timeout_in_the_middle_of_a_long_check(tmp_path, monkeypatch):
    """A window closing while 1000 jobs are checked is not held until the check ends."""
    import spacrq.queue.validate as validate_module

    real = validate_module.validate_job
    checking = threading.Event()

    def slow(*args, **kwargs):  # a job whose check takes a while (a cluster to reach)
        checking.set()
        time.sleep(0.002)
        return real(*args, **kwargs)
    monkeypatch.setattr(validate_module, "validate_job", slow)
    watch = QueueWatch()
    watch.poll({})
    watch.submit(1, "validate", document=_queue(1000).to_dict())
    results = []
    poller = threading.Thread(target=lambda: results.append(watch.poll({})), daemon=True)
    poller.start()
    assert checking.wait(30), "the check started"
    started = time.monotonic()
    assert watch.close(1.0), "idle within the timeout"
    assert time.monotonic() - started < 1.0
    poller.join(1.0)
    assert not poller.is_alive() and results == [None], "an interrupted poll hands nothing over"
    assert watch.interrupted() and watch.poll({}) is None


def test_a_watch_closed_mid_read_keeps_nothing_half_read(tmp_path, monkeypatch):
    path = _saved(tmp_path, 2000)
    watch = QueueWatch()
    import spacrq.queue.pane as pane_module
    real = pane_module.job_row
    closing = []

    def close_midway(number, job):
        if number == 300 and not closing:
            closing.append(threading.Thread(target=watch.close, args=(5.0,), daemon=True))
            closing[0].start()
            wait_until(watch.interrupted, what="the close to begin")
        return real(number, job)
    monkeypatch.setattr(pane_module, "job_row", close_midway)
    assert watch.poll({"path": str(path)}) is None
    closing[0].join(5.0)
    assert not closing[0].is_alive()


def test_an_edit_is_made_by_the_watch_and_answered_with_the_edits_code(tmp_path):
    q = _queue(2)
    q.jobs[0].status = "success"
    path = _saved(tmp_path, q)
    watch = _watching(path)
    view = {"path": str(path)}
    snap, answer = _asked(watch, view, 1, "edit", job_id="command-2",
                          changes={"label": "measure plate 2"})
    assert answer.code is Code.DONE and answer.data["job"]["label"] == "measure plate 2"
    snap = watch.poll(view)
    assert snap.rows[1].value.label == "measure plate 2", "the edited file is read again"
    _snap, answer = _asked(watch, view, 2, "edit", job_id="command-1", changes={"label": "x"})
    assert answer.code is Code.REFUSED and answer.message
    _snap, answer = _asked(watch, view, 3, "edit", job_id="ghost", changes={"label": "x"})
    assert answer.code is Code.MISSING


def test_journal_lines_after_the_hand_over_are_applied_to_a_clone_not_re_read(tmp_path,
                                                                              monkeypatch):
    q = _queue(50)
    path = _saved(tmp_path, q)
    watch = QueueWatch()
    handed = watch.poll({"path": str(path)}).queue
    monkeypatch.setattr(Queue, "from_dict", lambda *_a, **_k: pytest.fail("the file was re-read"))
    with _journal(q, path) as journal:
        _journal_status(journal, q.jobs[3], "running")
    snap = watch.poll({"path": str(path)})
    assert snap.rows[3].value.status == "running"
    assert handed.jobs[3].status == "pending", "the editor's queue is untouched"


def test_run_checks_the_queue_the_watch_already_read(tmp_path, monkeypatch):
    import spacrq.queue.watch as watch_module

    path = _saved(tmp_path, 3)
    watch = _watching(path)
    monkeypatch.setattr(watch_module, "load_queue", lambda *_a: pytest.fail("the file was re-read"))
    monkeypatch.setattr(watch_module, "start_runner", lambda *_a, **_k: type("Ref", (), {"pid": 7})())
    _snap, answer = _asked(watch, {"path": str(path)}, 1, "run", how="run")
    assert answer.code is Code.DONE and answer.data["pid"] == 7 and not answer.data["saved"]


# -- Save merges onto the file as it is now --------------------------------------------

def _finished_n6(tmp_path: Path) -> Path:
    q = Queue(name="n6")
    for job_id in ("first", "second"):
        q.add(Job(module="command", id=job_id, settings={"argv": ["true"]}, status="success",
                  exit_code=0), validate=False)
    path = tmp_path / "n6.queue.json"
    save_queue(q, path)
    return path


def test_save_keeps_a_job_added_from_the_command_line_meanwhile(tmp_path):
    from spacrq.queue.edits import add_job
    from spacrq.queue.store import load_queue
    path = _finished_n6(tmp_path)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    mine, base = snap.queue, snap.base
    mine.add(Job(module="command", id="command-1", settings={"argv": ["echo", "from-gui"]}))
    add_job(path, Job(module="command", id="fromcli", settings={"argv": ["echo", "from-cli"]}))
    view = {"path": str(path), "base": base}
    news = watch.poll(view)
    assert news.news.added == ("fromcli",), "the watch says what changed on disk"
    _snap, outcome = _asked(watch, view, 1, "save", document=mine.to_dict(), base=base)
    assert outcome.ok and "kept fromcli added on disk" in outcome.message
    assert load_queue(path).ids == ["first", "second", "command-1", "fromcli"]
    assert outcome.data["queue"].ids == ["first", "second", "command-1", "fromcli"]
    assert outcome.data["base"] is not outcome.data["queue"]
    assert [j.status for j in load_queue(path).jobs][:2] == ["success", "success"]


def test_a_save_that_conflicts_writes_nothing_and_save_again_keeps_ours(tmp_path):
    from spacrq.queue.edits import edit_job
    from spacrq.queue.store import load_queue
    q = _queue(3)
    path = _saved(tmp_path, q)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    mine, base = snap.queue, snap.base
    mine.remove("command-2")
    edit_job(path, "command-2", {"label": "fixed on disk"})
    before = path.read_bytes()
    view = {"path": str(path), "base": base}
    _snap, refused = _asked(watch, view, 1, "save", document=mine.to_dict(), base=base)
    assert refused.code is Code.CONFLICT and not refused.data["saved"]
    assert "job command-2 was removed here but changed on disk" in refused.message
    assert path.read_bytes() == before, "nothing written"
    _snap, again = _asked(watch, view, 2, "save", document=mine.to_dict(), base=base,
                          keep_ours=refused.data["conflicts"])
    assert again.ok and load_queue(path).ids == ["command-1", "command-3"]


def test_run_with_unsaved_edits_merges_too(tmp_path):
    from spacrq.queue.store import edit_queue, load_queue
    path = _finished_n6(tmp_path)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    mine, base = snap.queue, snap.base
    mine.jobs[0].label = "relabelled"
    edit_queue(path, lambda q: q.add(Job(module="command", id="fromcli",  # cannot run: no start
                                         settings={"argv": ["no-such-program-spacrq"]})))
    watch.submit(1, "run", document=mine.to_dict(), base=base)
    outcome = watch.poll({"path": str(path)}).outcomes[0]
    assert outcome.code is Code.INVALID and outcome.data["saved"]
    assert outcome.data["queue"].ids == ["first", "second", "fromcli"]
    saved = load_queue(path)
    assert saved.ids == ["first", "second", "fromcli"] and saved.jobs[0].label == "relabelled"


def test_save_refuses_a_symlink_in_place_of_the_queue_file(tmp_path):
    real = _saved(tmp_path, 2)
    link = tmp_path / "linked.queue.json"
    link.symlink_to(real)
    before = real.read_bytes()
    watch = QueueWatch()
    view = {"path": str(link)}
    snap = watch.poll(view)
    mine = snap.queue if snap and snap.queue is not None else _queue(2)
    mine.add(Job(module="command", settings={"argv": ["true"]}))
    _snap, result = _asked(watch, view, 1, "save", document=mine.to_dict(), base=None)
    assert result.code is Code.REFUSED and not result.data["saved"]
    assert "linked.queue.json is a symbolic link" in result.message and "real file" in result.message
    assert link.is_symlink() and real.read_bytes() == before, "neither the link nor its target"


@pytest.mark.parametrize("stop", ["after_job", "abort"])
def test_adding_to_a_running_queue_asked_to_stop_says_it_runs_when_resumed(tmp_path, stop):
    from spacrq.queue.locks import RunnerLock
    from spacrq.runfiles import write_json
    path = _saved(tmp_path, 2)
    watch = _watching(path)
    write_json(logs_dir(path) / "control.json", {"stop": stop})
    runner = RunnerLock(logs_dir(path)).acquire()  # as a live runner holds it
    try:
        _snap, result = _asked(watch, {"path": str(path)}, 1, "add_job",
                               job={"module": "command", "settings": {"argv": ["true"]}})
    finally:
        runner.release()
    assert result.ok and result.data["held"]
    assert "runs when the queue is resumed" in result.message
    assert "takes it in" not in result.message


def test_unsaved_edits_when_a_runner_starts_are_added_or_kept_as_a_copy(tmp_path):
    from spacrq.queue.locks import RunnerLock
    from spacrq.queue.store import load_queue
    path = _saved(tmp_path, 3)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    mine, base = snap.queue, snap.base
    mine.add(Job(module="command", id="typed", settings={"argv": ["echo", "typed"]}))
    mine.find("command-2").label = "changed here"
    mine.remove("command-3")
    runner = RunnerLock(logs_dir(path)).acquire()  # the runner started from a terminal
    try:
        _snap, kept = _asked(watch, {"path": str(path)}, 1, "keep_unsaved",
                             document=mine.to_dict(), base=base)
    finally:
        runner.release()
    assert kept.ok and kept.data["kept"] and kept.data["added"] == ("typed",)
    assert load_queue(path).ids == ["command-1", "command-2", "command-3", "typed"]
    copy = Path(kept.data["copy"])
    assert copy.parent == tmp_path and copy.name.startswith("night.unsaved-")
    assert copy.name.endswith(".queue.json")
    aside = load_queue(copy)
    assert aside.ids == ["command-1", "command-2", "typed"]
    assert aside.find("command-2").label == "changed here"
    said = kept.message
    assert "your new typed was added to the running queue" in said
    assert "changed command-2" in said and "removed command-3" in said and copy.name in said


def test_only_new_jobs_unsaved_when_a_runner_starts_write_no_copy(tmp_path):
    from spacrq.queue.store import load_queue
    path = _saved(tmp_path, 1)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    mine, base = snap.queue, snap.base
    mine.add(Job(module="command", id="typed", settings={"argv": ["true"]}))
    mine.add(Job(module="command", id="then", settings={"argv": ["true"]}, depends_on=["typed"]))
    _snap, kept = _asked(watch, {"path": str(path)}, 1, "keep_unsaved",
                         document=mine.to_dict(), base=base)
    assert kept.ok and kept.data["copy"] == "" and kept.data["added"] == ("typed", "then")
    assert load_queue(path).find("then").depends_on == ["typed"]
    assert list(tmp_path.glob("*.unsaved-*")) == []


def test_save_again_over_a_job_that_ran_never_marks_the_new_settings_as_run(tmp_path):
    """The hostile repro: a: echo OLD ran from a terminal while the pane changed it."""
    import subprocess
    import sys
    from spacrq.queue.store import load_queue
    q = Queue(name="night")
    q.add(Job(module="command", id="a", settings={"argv": ["echo", "OLD"]}), validate=False)
    path = _saved(tmp_path, q)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    mine, base = snap.queue, snap.base
    mine.find("a").settings = {"argv": ["echo", "NEW"]}
    subprocess.run([sys.executable, "-m", "spacrq", "queue", "run", str(path)], check=True,
                   capture_output=True, timeout=60)
    view = {"path": str(path), "base": base}
    _snap, refused = _asked(watch, view, 1, "save", document=mine.to_dict(), base=base)
    assert refused.code is Code.CONFLICT and "job a was changed here but ran" in refused.message
    _snap, again = _asked(watch, view, 2, "save", document=mine.to_dict(), base=base,
                          keep_ours=refused.data["conflicts"])
    assert again.ok
    saved = load_queue(path)
    assert [(j.id, j.status, j.settings["argv"]) for j in saved.jobs] == \
        [("a", "success", ["echo", "OLD"]), ("a-2", "pending", ["echo", "NEW"])]


def test_save_refuses_duplicate_ids_and_writes_nothing(tmp_path):
    q = Queue(name="night", jobs=[Job(module="command", id="a", settings={"argv": ["echo", w]})
                                  for w in ("FIRST", "SECOND")])
    path = _saved(tmp_path, q)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    mine, base = snap.queue, snap.base
    mine.jobs.append(Job(module="command", id="b", settings={"argv": ["true"]}))
    before = path.read_bytes()
    _snap, refused = _asked(watch, {"path": str(path)}, 1, "save", document=mine.to_dict(),
                            base=base)
    assert refused.code is Code.CONFLICT and not refused.data["saved"]
    assert "the job id a is used by more than one job" in refused.message
    assert path.read_bytes() == before


def test_a_new_job_whose_id_the_running_file_took_is_added_under_a_fresh_id(tmp_path):
    from spacrq.queue.edits import add_job
    from spacrq.queue.store import load_queue
    path = _saved(tmp_path, 1)
    watch = QueueWatch()
    snap = watch.poll({"path": str(path)})
    mine, base = snap.queue, snap.base
    mine.add(Job(module="command", id="command-2", settings={"argv": ["echo", "gui"]}))
    mine.add(Job(module="command", id="then", settings={"argv": ["true"]},
                 depends_on=["command-2"]))
    add_job(path, Job(module="command", id="command-2", settings={"argv": ["echo", "cli"]}))
    _snap, kept = _asked(watch, {"path": str(path)}, 1, "keep_unsaved",
                         document=mine.to_dict(), base=base)
    saved = load_queue(path)
    assert kept.ok and saved.ids == ["command-1", "command-2", "command-3", "then"]
    assert saved.find("command-3").settings == {"argv": ["echo", "gui"]}
    assert saved.find("then").depends_on == ["command-3"], "its follower follows it"


def test_a_runners_state_kept_in_memory_is_shown_as_soon_as_it_is_there(tmp_path):
    """A runner whose disk takes nothing keeps its state in memory (spacrq.queue.memcopy):
    the file does not change, so the pane showed the jobs as they were when the disk
    filled; it reads the queue again whenever that copy changes."""
    from spacrq.queue import memcopy
    from spacrq.queue.store import file_key, load_queue
    path = _saved(tmp_path)
    watch = _watching(path)
    mine = load_queue(path)
    mine.jobs[0].status, mine.jobs[0].attempts = "success", 1
    mine.jobs[1].status, mine.jobs[1].attempts = "running", 1
    mine.jobs[1].started = "2026-12-05T23:00:00+00:00"
    memcopy.keep(mine, path, file_key(path))
    snap = watch.poll({"path": str(path)})
    assert _statuses(snap.rows) == ["success", "running", "pending"]
    assert watch.poll({"path": str(path)}) is None  # (nothing changed since)
    mine.jobs[1].status = "success"
    memcopy.keep(mine, path, file_key(path))
    assert _statuses(watch.poll({"path": str(path)}).rows) == ["success", "success", "pending"]


@pytest.mark.parametrize("where", ["beside the queue", "a link in the logs folder",
                                   "the runner's log a link", "the logs folder a link",
                                   "the logs folder a link, the runner's log"])
def test_the_pane_reads_logs_only_in_the_queues_logs_folder_never_through_a_link(tmp_path,
                                                                                where):
    """A queue kept in a home folder showed any file there named as a job's log, and a link
    in the logs folder (a job's log, or the runner's) was read through to what it names."""
    path = tmp_path / "night.queue.json"
    secret = tmp_path / "notes.txt"
    secret.write_text("SECRET-OUTSIDE\n")
    q = _queue(1)
    if where.startswith("the logs folder a link"):
        outside = tmp_path / "outside"
        outside.mkdir()
        for name in ("01_command-1.log", "runner.log"):
            (outside / name).write_text("SECRET-OUTSIDE\n")
        logs_dir(path).symlink_to(outside)
        q.jobs[0].log_path = str(logs_dir(path) / "01_command-1.log")
        save_queue(q, path)
        job = "" if where.endswith("runner's log") else "command-1"
        snap = QueueWatch().poll({"path": str(path), "log_job": job})
        assert "SECRET" not in snap.log_text
        return
    logs = _logs(path)
    if where == "beside the queue":
        q.jobs[0].log_path = str(secret)
    elif where == "a link in the logs folder":
        (logs / "01_command-1.log").symlink_to(secret)
        q.jobs[0].log_path = str(logs / "01_command-1.log")
    else:
        (logs / "runner.log").symlink_to(secret)
    save_queue(q, path)
    job = "" if where == "the runner's log a link" else "command-1"
    snap = QueueWatch().poll({"path": str(path), "log_job": job})
    assert "SECRET" not in snap.log_text
