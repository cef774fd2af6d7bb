"""The Queue pane, driven as an operator would, against real files and the real runner."""
from __future__ import annotations

import json
import os
import sys

import pytest
from PySide6.QtCore import Qt

from spacrq.queue.model import Job, Queue
from spacrq.queue.runner import runner_state
from spacrq.queue.store import load_queue, logs_dir, save_queue
from spacrq.queue.pane import COL_STATUS, COL_TIME, STATUS_LOOK, rows
from spacrq.ui.log_view import LOG_LINES
from spacrq.ui.queue_pane import QueuePane, table_columns
from spacrq.ui.table_model import RowTable

PY = sys.executable


@pytest.fixture
def make_pane(open_pane, qtbot):
    """A Queue pane that has found its queue (the watch chooses it) and its modules."""
    def make():
        pane = open_pane(QueuePane)
        qtbot.waitUntil(lambda: pane.path is not None and not pane.waiting_for())
        return pane
    return make


def _command(argv, **kw) -> Job:
    return Job(module="command", settings={"argv": [str(a) for a in argv]}, **kw)


def _write_queue(workspace, jobs, name="night") -> str:
    q = Queue(name=name, max_consecutive_failures=0)
    for job in jobs:
        q.add(job, validate=False)
    path = workspace.queues / f"{name}.queue.json"
    save_queue(q, path)
    return str(path)


def _statuses(pane) -> list[str]:
    return [r.value.status for r in pane.model.rows]


def _ids(pane) -> list[str]:
    return [r.key for r in pane.model.rows]


def _wait_for_runner_to_end(qtbot, pane, timeout=30_000):
    qtbot.waitUntil(lambda: runner_state(pane.path) is not None, timeout=10_000)  # it started
    qtbot.waitUntil(lambda: not runner_state(pane.path)["alive"], timeout=timeout)
    qtbot.waitUntil(lambda: not pane.runner_alive, timeout=5000)


def _add(qtbot, pane, command: str, **fields) -> None:
    """Type a job into the editor and press Enter; returns once the watch checked it."""
    pane.editor.module.setCurrentText("command")
    pane.editor.main.setText(command)
    for name, value in fields.items():
        getattr(pane.editor, name).setText(value)
    qtbot.keyClick(pane.editor.main, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not pane.waiting_for("check_job"))


# -- editing -------------------------------------------------------------------------

def test_enter_adds_a_valid_job_and_refuses_a_broken_one(qtbot, make_pane):
    pane = make_pane()
    assert pane.model.rowCount() == 0 and pane.dirty
    _add(qtbot, pane, "true", label="warm up")
    assert _ids(pane) == ["command-1"]
    assert pane.model.rows[0].value.label == "warm up"
    _add(qtbot, pane, "no-such-program-spacrq --flag", label="")
    assert pane.model.rowCount() == 1, "a job that cannot run is not added"
    assert "not on PATH" in pane.message.text() and not pane.message.isHidden()
    assert pane.problems.count() >= 1
    _add(qtbot, pane, "true", overrides="diameter")
    assert pane.model.rowCount() == 1 and "key=value" in pane.message.text()
    _add(qtbot, pane, "true", overrides="", after="command-1", timeout="2m")
    job = pane.queue.find("command-2")
    assert job.depends_on == ["command-1"] and job.timeout == 120
    assert pane.model.rows[1].value.after == "command-1"


def test_duplicate_move_and_remove_keep_dependencies_sound(qtbot, make_pane):
    pane = make_pane()
    for cmd in ("true", "echo two", "echo three"):
        _add(qtbot, pane, cmd)
    pane.queue.find("command-3").depends_on = ["command-1"]
    pane.select_job("command-2")
    qtbot.mouseClick(pane.duplicate_button, Qt.MouseButton.LeftButton)
    assert pane.queue.ids == ["command-1", "command-2", "command-3", "command-4"]
    assert pane.selected_ids() == ["command-4"]
    copy = pane.queue.find("command-4")
    assert copy.settings == {"argv": ["echo", "two"]} and copy.status == "pending"
    qtbot.mouseClick(pane.up_button, Qt.MouseButton.LeftButton)
    assert pane.queue.ids == ["command-1", "command-2", "command-4", "command-3"]
    assert pane.selected_ids() == ["command-4"]
    assert [r.value.number for r in pane.model.rows] == [1, 2, 3, 4]
    pane.select_job("command-1")
    qtbot.mouseClick(pane.remove_button, Qt.MouseButton.LeftButton)
    assert pane.queue.ids == ["command-2", "command-4", "command-3"]
    assert pane.queue.find("command-3").depends_on == []
    assert _ids(pane) == pane.queue.ids


def test_save_writes_the_file_and_a_new_pane_opens_the_newest(qtbot, make_pane, workspace):
    pane = make_pane()
    _add(qtbot, pane, "echo hello")
    pane.on_error.setCurrentIndex(pane.on_error.findData("stop"))
    pane.max_failures.setValue(5)
    assert pane.save_button.isEnabled()
    qtbot.mouseClick(pane.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not pane.dirty)
    assert not pane.save_button.isEnabled()
    saved = load_queue(pane.path)
    assert saved.ids == ["command-1"] and saved.on_error == "stop"
    assert saved.max_consecutive_failures == 5
    again = make_pane()
    assert again.path == pane.path
    qtbot.waitUntil(lambda: again.model.rowCount() == 1)
    assert again.on_error.currentData() == "stop" and again.max_failures.value() == 5
    assert not again.dirty


def test_unsaved_edits_are_not_discarded_by_one_open(qtbot, make_pane, workspace):
    other = _write_queue(workspace, [_command(["true"]), _command(["true"])], name="other")
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.model.rowCount() == 2)
    pane._new_clicked()
    qtbot.waitUntil(lambda: pane.dirty and pane.model.rowCount() == 0)
    _add(qtbot, pane, "echo mine")
    assert not pane.open_queue(other)
    assert "unsaved" in pane.message.text()
    assert pane.open_queue(other)
    qtbot.waitUntil(lambda: pane.model.rowCount() == 2 and not pane.dirty)


def test_a_file_changed_on_disk_is_shown_unless_edits_are_unsaved(qtbot, make_pane, workspace):
    path = _write_queue(workspace, [_command(["true"])])
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.model.rowCount() == 1)
    _write_queue(workspace, [_command(["true"]), _command(["echo", "by hand"])])
    qtbot.waitUntil(lambda: pane.model.rowCount() == 2 and not pane.dirty)
    assert pane.queue.find("command-2").settings == {"argv": ["echo", "by hand"]}
    qtbot.mouseClick(pane.save_button, Qt.MouseButton.LeftButton)  # nothing to save: disabled
    _add(qtbot, pane, "echo mine")
    handed = []
    pane.poller.snapshot.connect(
        lambda s: handed.append(s) if getattr(s, "queue", None) is not None else None)
    pane.save()
    qtbot.waitUntil(lambda: not pane.dirty)
    _add(qtbot, pane, "echo newer")  # edits right after a save
    qtbot.waitUntil(lambda: bool(handed), timeout=5000)  # the watch reports the pane's own save
    assert "changed on disk" not in pane.message.text() and pane.dirty
    assert pane.model.rowCount() == 4
    _write_queue(workspace, [_command(["true"])])  # someone else rewrites it
    qtbot.waitUntil(lambda: "changed on disk" in pane.message.text())
    assert pane.model.rowCount() == 4, "unsaved edits are kept"
    assert load_queue(path).ids == ["command-1"]


def test_a_file_a_power_cut_zeroed_opens_from_its_checkpoint_and_says_so(
        qtbot, make_pane, workspace):
    """XFS can leave a file renamed without an fsync full of zeros: the pane shows the
    state the journal made durable, says what happened, and the file is whole again."""
    from spacrq.queue.journal import Journal
    from spacrq.queue.lastgood import checkpoint_path
    from spacrq.queue.render import write_queue_file
    from spacrq.queue.store import read_queue_document
    path = _write_queue(workspace, [_command(["true"]), _command(["true"])])
    queue = load_queue(path)
    journal = Journal(queue, path)
    journal.checkpoint()  # what a runner does as it starts
    queue.jobs[0].status, queue.jobs[0].exit_code = "success", 0
    journal.job(queue.jobs[0], ["status", "exit_code"])
    write_queue_file(queue, path, durable=False)
    journal.close()
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:
        handle.write(b"\0" * size)
    pane = make_pane()
    qtbot.waitUntil(lambda: _statuses(pane) == ["success", "pending"])
    qtbot.waitUntil(lambda: "last checkpoint" in pane.message.text())
    assert not pane.message.isHidden()
    assert [j["status"] for j in read_queue_document(path)["jobs"]] == ["success", "pending"]
    assert not checkpoint_path(path).exists()


# -- validation --------------------------------------------------------------------------

def test_validation_panel_lists_every_problem_with_its_fix(qtbot, make_pane, workspace):
    _write_queue(workspace, [
        Job(module="no_such_module"),
        _command(["no-such-program-spacrq"]),
        _command(["true"], depends_on=["ghost-7"]),
    ])
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.model.rowCount() == 3)
    qtbot.mouseClick(pane.validate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pane.problems.count() >= 3)
    shown = pane.problems.list
    texts = [shown.item(i).text() for i in range(shown.count())]
    joined = "\n".join(texts)
    assert "no_such_module" in joined and "not on PATH" in joined and "ghost-7" in joined
    assert all("fix: " in t and not t.rstrip().endswith("fix:") for t in texts), \
        "every problem carries its fix"
    assert "error" in pane.problems.title.text()
    ghost = next(i for i, t in enumerate(texts) if "ghost-7" in t)
    shown.itemClicked.emit(shown.item(ghost))
    assert pane.selected_ids() == ["command-2"]


def test_run_refuses_a_queue_with_errors_and_says_why(qtbot, make_pane, workspace):
    _write_queue(workspace, [_command(["no-such-program-spacrq"])])
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.run_button.isEnabled())
    qtbot.mouseClick(pane.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Not started" in pane.message.text())
    assert runner_state(pane.path) is None, "no runner was started"
    assert pane.problems.count() == 1


def test_a_hand_broken_queue_file_is_one_sentence_inline(qtbot, make_pane, workspace):
    (workspace.queues / "broken.queue.json").write_text('{"spacr_queue": 1, "jobs": [{"id": 3}]}')
    pane = make_pane()
    qtbot.waitUntil(lambda: not pane.message.isHidden())
    assert "module" in pane.message.text() and "\n" not in pane.message.text()


# -- the table model -----------------------------------------------------------------------

def _rows(n, status="pending", changed=None):
    return rows([Job(module="command", id=f"job-{i}", label=f"job {i}",
                     status=(changed or {}).get(i, status)) for i in range(n)])


def _model() -> RowTable:
    return RowTable(table_columns(), looks=STATUS_LOOK, bold_looks=("running",))


def test_model_signals_only_the_rows_that_changed(qtbot):
    model = _model()
    model.set_rows(_rows(500))
    changed, resets, inserted, removed = [], [], [], []
    model.dataChanged.connect(lambda a, b, *_: changed.append((a.row(), b.row())))
    model.modelReset.connect(lambda: resets.append(1))
    model.rowsInserted.connect(lambda _p, a, b: inserted.append((a, b)))
    model.rowsRemoved.connect(lambda _p, a, b: removed.append((a, b)))

    model.set_rows(_rows(500, changed={7: "running"}))
    assert changed == [(7, 7)] and not resets
    changed.clear()
    model.set_rows(_rows(500, changed={7: "success", 8: "running", 300: "failed"}))
    assert changed == [(7, 8), (300, 300)] and not resets
    changed.clear()
    model.set_rows(_rows(500, changed={7: "success", 8: "running", 300: "failed"}))
    assert changed == [] and not resets, "an unchanged poll emits nothing"
    model.set_rows(_rows(502, changed={7: "success", 8: "running", 300: "failed"}))
    assert inserted == [(500, 501)] and changed == [] and not resets
    assert model.data(model.index(8, COL_STATUS)) == "running"
    assert model.data(model.index(300, COL_STATUS), Qt.ItemDataRole.BackgroundRole) is not None
    changed.clear()
    running = model.tick(ticking=lambda row: row.look == "running")
    assert running == [8] and changed == [(8, 8)]


def test_a_failed_jobs_error_is_its_status_tooltip(qtbot):
    model = _model()
    model.set_rows(rows([Job(module="command", id="a", status="failed",
                             error="Timeout: stopped after 2m", exit_code=-15)]))
    tip = model.data(model.index(0, COL_STATUS), Qt.ItemDataRole.ToolTipRole)
    assert "Timeout: stopped after 2m" in tip and "exit code -15" in tip
    assert model.data(model.index(0, COL_TIME)) == "—"


# -- running through the real runner ---------------------------------------------------------

def _sleeper(seconds: float) -> list[str]:
    return [PY, "-c", f"import time; print('working', flush=True); time.sleep({seconds})"]


def test_a_short_real_queue_shows_every_status(qtbot, make_pane, workspace):
    _write_queue(workspace, [
        _command(["true"]),
        _command([PY, "-c", "import sys; print('cannot find plate 9'); sys.exit(3)"]),
        _command(["true"], depends_on=["command-2"]),
        _command([PY, "-c", "print('measured 384 wells')"]),
    ])
    pane = make_pane()
    notes: list[str] = []
    pane.notify.connect(notes.append)
    qtbot.waitUntil(lambda: pane.run_button.isEnabled())
    qtbot.mouseClick(pane.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pane.runner_alive or _statuses(pane)[-1] != "pending", timeout=10_000)
    _wait_for_runner_to_end(qtbot, pane)
    qtbot.waitUntil(lambda: _statuses(pane) == ["success", "failed", "skipped", "success"],
                    timeout=10_000)
    model = pane.model
    assert [model.data(model.index(i, COL_STATUS)) for i in range(4)] == [
        "succeeded", "failed", "skipped", "succeeded"]
    skipped_tip = model.data(model.index(2, COL_STATUS), Qt.ItemDataRole.ToolTipRole)
    assert "command-2" in skipped_tip
    failed_tip = model.data(model.index(1, COL_STATUS), Qt.ItemDataRole.ToolTipRole)
    assert "exit code 3" in failed_tip
    assert pane.progress.text() == "4 / 4 ended: 2 succeeded, 1 failed, 1 skipped"
    assert pane.progress.look() == "failed", "a night with a failure is not a green bar"
    assert model.data(model.index(0, COL_TIME)).endswith("s")
    # nothing selected, nothing running: the runner's summary of the night is shown
    qtbot.waitUntil(lambda: "1 failed, 1 skipped" in pane.log.shown_text(), timeout=10_000)
    assert "summary" in pane.log.title.text()
    pane.select_job("command-2")
    qtbot.waitUntil(lambda: "cannot find plate 9" in pane.log.shown_text())
    assert pane.retry_button.isEnabled() and not pane.run_button.isEnabled()
    qtbot.waitUntil(lambda: any("Queue night" in n for n in notes))


def test_stop_lets_the_running_job_finish_and_starts_no_other(qtbot, make_pane, workspace):
    _write_queue(workspace, [_command(_sleeper(3)), _command(["true"])])
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.run_button.isEnabled())
    qtbot.mouseClick(pane.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _statuses(pane)[0] == "running", timeout=10_000)
    assert pane.stop_button.isEnabled() and not pane.remove_button.isEnabled()
    qtbot.mouseClick(pane.stop_button, Qt.MouseButton.LeftButton)
    assert not pane.stop_button.isEnabled(), "Stop is asked once"
    _wait_for_runner_to_end(qtbot, pane)
    qtbot.waitUntil(lambda: _statuses(pane) == ["success", "not_run"], timeout=10_000)
    assert pane.resume_button.isEnabled()
    first_run = runner_state(pane.path)["pid"]
    first_finished = pane.model.rows[0].value.finished_at
    qtbot.mouseClick(pane.resume_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: (runner_state(pane.path) or {}).get("pid") != first_run, timeout=10_000)
    _wait_for_runner_to_end(qtbot, pane)
    qtbot.waitUntil(lambda: _statuses(pane) == ["success", "success"], timeout=10_000)
    assert pane.model.rows[0].value.finished_at == first_finished, \
        "the finished job was not run again"


def test_abort_stops_the_running_job_now_after_one_question(qtbot, make_pane, workspace,
                                                             monkeypatch):
    _write_queue(workspace, [_command(_sleeper(120)), _command(["true"])])
    pane = make_pane()
    asked = []
    monkeypatch.setattr(pane, "_ask_abort", lambda: asked.append(1) or True)
    qtbot.waitUntil(lambda: pane.run_button.isEnabled())
    qtbot.mouseClick(pane.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _statuses(pane)[0] == "running", timeout=10_000)
    qtbot.waitUntil(lambda: "working" in pane.log.shown_text(), timeout=10_000)
    qtbot.mouseClick(pane.abort_button, Qt.MouseButton.LeftButton)
    assert asked == [1]
    _wait_for_runner_to_end(qtbot, pane, timeout=20_000)
    qtbot.waitUntil(lambda: _statuses(pane) == ["not_run", "not_run"], timeout=10_000)


def test_reopening_shows_a_running_queue_live_and_can_stop_it(qtbot, make_pane, workspace,
                                                              monkeypatch):
    _write_queue(workspace, [_command(_sleeper(120)), _command(["true"])])
    first = make_pane()
    qtbot.waitUntil(lambda: first.run_button.isEnabled())
    qtbot.mouseClick(first.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _statuses(first)[0] == "running", timeout=10_000)
    first.shutdown()
    first.close()

    pane = make_pane()
    qtbot.waitUntil(lambda: pane.runner_alive and _statuses(pane)[0] == "running", timeout=10_000)
    assert pane.stop_button.isEnabled() and pane.abort_button.isEnabled()
    assert not pane.run_button.isEnabled() and not pane.remove_button.isEnabled()
    assert pane.editor.isEnabled(), "a job can be added to a running queue"
    assert "command-1" in pane.runner_label.text()
    before = json.loads(pane.path.read_text())
    pane.remove_selected()
    assert "Stop it first" in pane.message.text()
    assert not pane.save(), "Save is refused at once"
    assert json.loads(pane.path.read_text()) == before, "nothing saved over the runner's file"
    shown = pane.model.data(pane.model.index(0, COL_TIME))
    qtbot.waitUntil(lambda: pane.model.data(pane.model.index(0, COL_TIME)) != shown, timeout=5000)
    monkeypatch.setattr(pane, "_ask_abort", lambda: True)
    qtbot.mouseClick(pane.abort_button, Qt.MouseButton.LeftButton)
    _wait_for_runner_to_end(qtbot, pane, timeout=20_000)
    qtbot.waitUntil(lambda: _statuses(pane) == ["not_run", "not_run"], timeout=10_000)
    assert pane.editor.isEnabled() and pane.resume_button.isEnabled()


def test_a_job_writing_a_huge_log_keeps_the_pane_live_and_bounded(qtbot, make_pane, workspace):
    chatty = [PY, "-c", "import sys\nw = sys.stdout.write\nfor i in range(2_500_000): "
                        "w(f'line {i:08d} of a chatty job\\n')\nprint('the end')"]
    _write_queue(workspace, [_command(chatty), _command(["true"])])
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.run_button.isEnabled())
    qtbot.mouseClick(pane.run_button, Qt.MouseButton.LeftButton)
    # nothing is selected, so text in the log view means the running job is followed live
    qtbot.waitUntil(lambda: "of a chatty job" in pane.log.shown_text(), timeout=20_000)
    _wait_for_runner_to_end(qtbot, pane, timeout=90_000)
    qtbot.waitUntil(lambda: _statuses(pane) == ["success", "success"], timeout=10_000)
    log_file = next(logs_dir(pane.path).glob("01_*.log"))
    assert log_file.stat().st_size > 60_000_000
    pane.select_job("command-1")
    qtbot.waitUntil(lambda: "line 02499999 of a chatty job\nthe end" in pane.log.shown_text(),
                    timeout=10_000)
    assert pane.log.text.document().blockCount() <= LOG_LINES + 1
    assert len(pane.log.shown_text()) < 200_000


# -- nothing slow on the GUI thread, and a shutdown within its budget ------------------------

def test_adding_a_job_with_a_settings_file_reads_nothing_on_the_gui_thread(
        qtbot, make_pane, tmp_path, gui_thread_does_no_io):
    """The settings file is read, its paths looked at and the module imported by the watch."""
    settings = tmp_path / "copy.csv"
    settings.write_text('Key,Value\nargv,"[""true""]"\n')
    pane = make_pane()
    assert gui_thread_does_no_io.active, "the GUI-thread I/O guard watches this test"
    pane.editor.module.setCurrentText("command")
    pane.editor.settings.setText(str(settings))
    qtbot.keyClick(pane.editor.settings, Qt.Key.Key_Return)
    assert pane.model.rowCount() == 0 and "Checking" in pane.message.text()
    assert not pane.editor.add_button.isEnabled(), "Add waits for the check"
    assert pane.editor.isEnabled(), "the fields stay live: the next job can be typed"
    qtbot.waitUntil(lambda: pane.model.rowCount() == 1)
    assert pane.queue.jobs[0].settings == str(settings)
    settings.write_text("no header here\n")
    qtbot.keyClick(pane.editor.settings, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "Job not added" in pane.message.text())
    assert "Key,Value" in pane.message.text() and pane.model.rowCount() == 1
    assert gui_thread_does_no_io.flags == []


def test_the_editor_describes_a_module_from_what_the_watch_found(qtbot, make_pane):
    pane = make_pane()
    qtbot.waitUntil(lambda: "settings: argv" in pane.editor.about.text())
    pane.editor.module.setCurrentText("python")
    assert "checking" in pane.editor.about.text()
    qtbot.waitUntil(lambda: "settings:" in pane.editor.about.text()
                    and "checking" not in pane.editor.about.text())
    pane.editor.module.setCurrentText("command")
    assert "settings: argv" in pane.editor.about.text(), "a module is described once"


def test_the_pane_shuts_down_within_its_budget_in_the_middle_of_a_heavy_check(
        qtbot, make_pane, monkeypatch):
    import threading
    import time

    import spacrq.queue.validate as validate_module

    real = validate_module.validate_job
    checking = threading.Event()

    def slow(*args, **kwargs):  # each job's check takes a while (a cluster to reach)
        checking.set()
        time.sleep(0.002)
        return real(*args, **kwargs)
    monkeypatch.setattr(validate_module, "validate_job", slow)
    pane = make_pane()
    big = Queue(name="big")
    for i in range(1000):
        big.jobs.append(_command(["true"], id=f"j{i}"))
    pane.ask("validate", document=big.to_dict())
    qtbot.waitUntil(checking.is_set)
    started = time.monotonic()
    assert pane.shutdown(1.0), "the poller and the watch both stopped"
    assert time.monotonic() - started < 1.0
    assert not pane.poller.is_running()


def test_a_runner_whose_record_still_describes_the_run_before_it_is_shown_running(
        qtbot, make_pane, workspace):
    """A resume on a full disk: the runner holds the queue, but runner.json still says the
    run before it crashed. The pane said "crashed … Resume picks up" (and Resume would be
    refused); it shows the runner that runs, and why its record says otherwise."""
    from waiting import gone_pid, runner_lock_held  # (tests/ is on the path)
    import time
    path = _write_queue(workspace, [_command(["true"])])
    logs = logs_dir(path)
    logs.mkdir(exist_ok=True)
    (logs / "runner.json").write_text(json.dumps({
        "pid": gone_pid(), "started": time.time() - 3600, "queue": path, "state": "crashed",
        "current_job": None}))
    with runner_lock_held(logs) as holder:
        pane = make_pane()
        qtbot.waitUntil(lambda: pane.runner_alive, timeout=10_000)
        assert pane.runner_label.text() == (f"Runner: running (between jobs) — process "
                                            f"{holder.pid} — its state file is out of date "
                                            "(hover for why)")
        assert pane.runner_label.toolTip().startswith(f"its record {logs / 'runner.json'} "
                                                      "still describes an earlier run (crashed)")
        assert not pane.run_button.isEnabled()
