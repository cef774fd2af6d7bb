"""Edit… a waiting job: the dialog asks the pane's watch, and shows what the answer's code says."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from dropping import drop_files  # tests/dropping.py
from waiting import reap  # tests/waiting.py
from PySide6.QtCore import Qt

from spacrq.queue import Job, Queue, load_queue, save_queue
from spacrq.queue.edits import EditError, edit_job
from spacrq.ui.pane_base import PaneBase
from spacrq.ui.queue_job_edit import JobEditing, read_settings_text
from spacrq.watching import Code, Outcome, WatchBase


class EditWatch(WatchBase):
    """A watch that carries out "edit" as the Queue's does: edit_job, answered by its code."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def _poll(self, view):
        outcomes = []
        for token, action, args in self.take_submissions():
            try:
                job = edit_job(self.path, args["job_id"], args["changes"])
                outcomes.append(Outcome(token, action, Code.DONE, f"Changed {job.id}."))
            except EditError as exc:
                outcomes.append(Outcome(token, action, exc.code, str(exc)))
        return {"outcomes": tuple(outcomes)} if outcomes else None


class EditPane(PaneBase):
    def __init__(self, path):
        super().__init__()
        self.edits = JobEditing(self, self.ask)
        self.seen = []
        self.edits.edited.connect(lambda job_id, text: self.seen.append((job_id, text)))
        self.start_watch(EditWatch(path), 0.05)

    def outcome_arrived(self, outcome):
        self.edits.outcome_arrived(outcome)

    def show_snapshot(self, snapshot):
        pass


@pytest.fixture
def queue_file(tmp_path):
    queue = Queue(name="night")
    for jid in ("a", "b"):
        queue.add(Job(module="command", id=jid, settings={"argv": ["true"]}))
    queue.jobs[0].status = "running"
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    return path


@pytest.fixture
def pane(qtbot, queue_file):
    widget = EditPane(queue_file)
    qtbot.addWidget(widget)
    yield widget
    assert widget.shutdown(2.0)


def _job(path, job_id):
    return load_queue(path).find(job_id)


def test_a_pending_job_is_changed_in_the_file(pane, qtbot, queue_file):
    dialog = pane.edits.open(_job(queue_file, "b"), ["a"])
    assert dialog.save_button.isEnabled()
    dialog.timeout.setText("2m")
    dialog.label.setText("second")
    with qtbot.waitSignal(dialog.edited, timeout=10000):
        qtbot.keyClick(dialog.label, Qt.Key.Key_Return)  # Enter saves
    job = _job(queue_file, "b")
    assert job.timeout == 120.0 and job.label == "second"
    assert pane.seen == [("b", "Changed b.")]
    qtbot.waitUntil(lambda: pane.edits.dialog is None)


def test_a_running_job_cannot_be_saved_and_the_dialog_says_why(pane, queue_file):
    dialog = pane.edits.open(_job(queue_file, "a"))
    assert not dialog.save_button.isEnabled()
    assert "running" in dialog.message.text() and dialog.message.isVisibleTo(dialog)
    dialog.close()


def test_a_job_that_started_meanwhile_is_refused_and_nothing_is_left_to_save(pane, qtbot,
                                                                             queue_file):
    dialog = pane.edits.open(_job(queue_file, "b"))
    queue = load_queue(queue_file)
    queue.find("b").status = "running"  # the runner got there first
    save_queue(queue, queue_file)
    before = queue_file.read_bytes()
    dialog.label.setText("too late")
    dialog.save_button.click()
    qtbot.waitUntil(lambda: dialog.token is None, timeout=10000)
    assert not dialog.save_button.isEnabled() and "running" in dialog.message.text()
    assert queue_file.read_bytes() == before and dialog.isVisible()
    dialog.close()


def test_a_bad_value_keeps_the_dialog_open_with_the_fix(pane, qtbot, queue_file):
    before = queue_file.read_bytes()
    dialog = pane.edits.open(_job(queue_file, "b"))
    dialog.overrides.setText("no_such_setting=1")
    dialog.save_button.click()
    qtbot.waitUntil(lambda: dialog.token is None, timeout=10000)
    assert dialog.isVisible() and dialog.save_button.isEnabled()
    assert "no_such_setting" in dialog.message.text()
    assert queue_file.read_bytes() == before
    dialog.close()


def test_a_typing_mistake_is_caught_before_asking(pane, queue_file):
    dialog = pane.edits.open(_job(queue_file, "b"))
    dialog.timeout.setText("soon")
    dialog.save_button.click()
    assert dialog.token is None and "timeout" in dialog.message.text()
    dialog.close()


def test_only_what_changed_is_sent(pane, queue_file):
    dialog = pane.edits.open(_job(queue_file, "b"))
    assert dialog.changes() == ({}, None)
    dialog.settings.setPlainText('{"argv": ["sleep", "1"]}')
    assert dialog.changes() == ({"settings": {"argv": ["sleep", "1"]}}, None)
    dialog.close()


def test_a_settings_file_dropped_on_the_dialog_fills_its_settings(pane, qtbot, queue_file,
                                                                   tmp_path):
    dialog = pane.edits.open(_job(queue_file, "b"))
    assert drop_files(dialog.settings, [tmp_path / "plate1.csv"])
    assert dialog.settings.toPlainText() == str(tmp_path / "plate1.csv")
    assert drop_files(dialog.label, [tmp_path / "a.csv", tmp_path / "b.csv"])
    assert dialog.settings.toPlainText() == str(tmp_path / "plate1.csv")  # one file, not two
    assert "one settings file" in dialog.message.text()
    dialog.close()


@pytest.mark.parametrize("text,value", [
    ("", ""), ("  /data/p1.csv ", "/data/p1.csv"), ('{"argv": ["true"]}', {"argv": ["true"]}),
])
def test_the_settings_field_reads_a_path_or_an_object(text, value):
    assert read_settings_text(text) == (value, None)


@pytest.mark.parametrize("text", ['{"argv": NaN}', "[1, 2]", "{", "a\nb"])
def test_settings_that_are_neither_say_so(text):
    value, problem = read_settings_text(text)
    assert value is None and problem


# -- in the Queue pane ----------------------------------------------------------------

def _queue_pane(open_pane, qtbot, workspace, jobs):
    from spacrq.ui.queue_pane import QueuePane
    queue = Queue(name="night", max_consecutive_failures=0)
    for job in jobs:
        queue.add(job, validate=False)
    path = workspace.queues / "night.queue.json"
    save_queue(queue, path)
    pane = open_pane(QueuePane)
    qtbot.waitUntil(lambda: pane.model.rowCount() == len(jobs) and not pane.waiting_for(),
                    timeout=10_000)
    return pane, path


def _cmd(jid, argv=("true",), **kw):
    return Job(module="command", id=jid, settings={"argv": list(argv)}, **kw)


def test_edit_in_the_pane_changes_a_pending_job_in_its_file(open_pane, qtbot, workspace):
    pane, path = _queue_pane(open_pane, qtbot, workspace, [_cmd("a"), _cmd("b")])
    pane.select_job("b")
    assert pane.edit_button.isEnabled()
    pane.edit_button.click()
    dialog = pane.job_edits.dialog
    dialog.after.setText("a")
    dialog.timeout.setText("90s")
    with qtbot.waitSignal(dialog.edited, timeout=10_000):
        dialog.save_button.click()
    saved = load_queue(path).find("b")
    assert saved.depends_on == ["a"] and saved.timeout == 90.0
    qtbot.waitUntil(lambda: pane.model.rows[1].cells[4] == "a", timeout=10_000)  # the After cell
    assert "Changed b" in pane.message.text()


def test_f2_on_the_table_edits_the_selected_job_when_edit_may(open_pane, qtbot, workspace):
    pane, _path = _queue_pane(open_pane, qtbot, workspace,
                              [_cmd("a", status="success"), _cmd("b")])
    window = pane.window()
    window.show()  # (a shortcut answers in the active window only)
    with qtbot.waitActive(window, timeout=5_000):
        window.activateWindow()
    pane.table.setFocus()
    pane.select_job("a")  # a job that ran: Edit… is off, so F2 opens nothing
    qtbot.keyClick(pane.table, Qt.Key.Key_F2)
    assert pane.job_edits.dialog is None
    pane.select_job("b")
    qtbot.keyClick(pane.table, Qt.Key.Key_F2)
    qtbot.waitUntil(lambda: pane.job_edits.dialog is not None, timeout=5_000)
    dialog = pane.job_edits.dialog
    assert dialog.windowTitle() == "Edit job b"
    dialog.reject()
    window.hide()


def test_edit_is_refused_on_a_running_job_and_the_tip_says_why(open_pane, qtbot, workspace):
    pane, _path = _queue_pane(open_pane, qtbot, workspace,
                              [_cmd("a", status="running"), _cmd("b", status="success")])
    pane.select_job("a")
    assert not pane.edit_button.isEnabled() and "running" in pane.edit_button.toolTip()
    pane.select_job("b")
    assert not pane.edit_button.isEnabled() and "duplicate" in pane.edit_button.toolTip().lower()


def test_an_edit_of_a_running_queue_is_honoured_by_its_runner(open_pane, qtbot, workspace,
                                                               tmp_path):
    from spacrq.queue.runner import runner_state, start_runner
    wait = _cmd("wait", ("sh", "-c", "touch started; while [ ! -e go ]; do sleep 0.02; done"),
                cwd=str(tmp_path))
    pane, path = _queue_pane(open_pane, qtbot, workspace,
                             [wait, _cmd("next", ("touch", "old.ran"), cwd=str(tmp_path))])
    ref = start_runner(path)
    try:
        qtbot.waitUntil(lambda: (tmp_path / "started").exists() and pane.runner_alive,
                        timeout=20_000)
        pane.select_job("next")
        qtbot.waitUntil(pane.edit_button.isEnabled, timeout=10_000)
        pane.edit_button.click()
        dialog = pane.job_edits.dialog
        dialog.settings.setPlainText('{"argv": ["touch", "new.ran"]}')
        with qtbot.waitSignal(dialog.edited, timeout=10_000):
            dialog.save_button.click()
    finally:
        (tmp_path / "go").write_text("")
        reap(ref.pid)
    assert not runner_state(path)["alive"]
    assert (tmp_path / "new.ran").exists() and not (tmp_path / "old.ran").exists()
    assert [j.status for j in load_queue(path).jobs] == ["success", "success"]
