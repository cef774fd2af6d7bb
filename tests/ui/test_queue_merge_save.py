"""The Queue pane as a new user met it: Save keeps what others added, Add works on a running
queue, a crash says it crashed, and the bar tells how the night went."""
from __future__ import annotations

import subprocess
import sys
from types import MappingProxyType

import pytest
from PySide6.QtCore import Qt

from spacrq.queue.edits import edit_job
from spacrq.queue.model import Job, Queue
from spacrq.queue.runner import runner_state
from spacrq.queue.store import load_queue, save_queue
from spacrq.queue.watch import QueueSnapshot
from spacrq.ui.queue_pane import QueuePane

PY = sys.executable


@pytest.fixture
def make_pane(open_pane, qtbot):
    def make():
        pane = open_pane(QueuePane)
        qtbot.waitUntil(lambda: pane.path is not None and not pane.waiting_for())
        return pane
    return make


def _finished_n6(workspace) -> str:
    """The trial's queue: two jobs that ran."""
    q = Queue(name="n6", max_consecutive_failures=0)
    for job_id in ("first", "second"):
        q.add(Job(module="command", id=job_id, settings={"argv": ["true"]}, status="success",
                  exit_code=0), validate=False)
    path = workspace.queues / "n6.queue.json"
    save_queue(q, path)
    return str(path)


def _type_job(qtbot, pane, command: str) -> None:
    pane.editor.module.setCurrentText("command")
    pane.editor.main.setText(command)
    qtbot.mouseClick(pane.editor.add_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not pane.waiting_for("check_job") and not pane.waiting_for("add_job"))


def _cli_add(path: str, *args: str) -> None:
    """``spacrq queue add`` from a terminal, as the operator ran it."""
    done = subprocess.run([PY, "-m", "spacrq", "queue", "add", path, *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_save_keeps_a_job_added_from_the_command_line_meanwhile(qtbot, make_pane, workspace,
                                                                tmp_path):
    path = _finished_n6(workspace)
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.model.rowCount() == 2 and not pane.dirty)
    _type_job(qtbot, pane, "echo from-gui")
    assert pane.dirty and [r.key for r in pane.model.rows] == ["first", "second", "command-1"]
    _cli_add(path, "command", "--id", "fromcli", "--", "echo", "from-cli")
    qtbot.waitUntil(lambda: "changed on disk" in pane.message.text(), timeout=10_000)
    banner = pane.message.text()
    assert "fromcli added there" in banner and "Save keeps those changes" in banner
    assert "overwrites" not in banner
    qtbot.mouseClick(pane.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not pane.dirty, timeout=10_000)
    assert load_queue(path).ids == ["first", "second", "command-1", "fromcli"]
    assert "changed on disk" not in pane.message.text(), "the banner goes after the save"
    assert "kept fromcli added on disk" in pane.message.text()
    assert [r.key for r in pane.model.rows] == ["first", "second", "command-1", "fromcli"]
    assert load_queue(path).find("first").status == "success"
    pane.grab().save(str(tmp_path / "queue_pane_after_merged_save.png"))


def test_a_job_removed_here_and_changed_on_disk_is_named_and_save_again_keeps_ours(
        qtbot, make_pane, workspace):
    q = Queue(name="night", max_consecutive_failures=0)
    for job_id in ("a", "b", "c"):
        q.add(Job(module="command", id=job_id, settings={"argv": ["true"]}), validate=False)
    path = workspace.queues / "night.queue.json"
    save_queue(q, path)
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.model.rowCount() == 3 and not pane.dirty)
    pane.select_job("b")
    qtbot.mouseClick(pane.remove_button, Qt.MouseButton.LeftButton)
    edit_job(path, "b", {"label": "fixed from another window"})
    _cli_add(str(path), "command", "--id", "late", "--", "true")
    before = path.read_bytes()
    qtbot.mouseClick(pane.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Not saved" in pane.message.text(), timeout=10_000)
    assert "job b was removed here but changed on disk" in pane.message.text()
    assert "Open reloads" in pane.message.text() and "Save again" in pane.message.text()
    assert path.read_bytes() == before and pane.dirty, "nothing overwritten"
    qtbot.mouseClick(pane.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not pane.dirty, timeout=10_000)
    assert load_queue(path).ids == ["a", "c", "late"], "ours for b, the rest of the disk kept"


def test_add_job_on_a_running_queue_goes_to_its_runner(qtbot, make_pane, workspace):
    q = Queue(name="night", max_consecutive_failures=0)
    q.add(Job(module="command", settings={"argv": [PY, "-c", "import time; time.sleep(3)"]}))
    path = workspace.queues / "night.queue.json"
    save_queue(q, path)
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.run_button.isEnabled())
    qtbot.mouseClick(pane.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pane.runner_alive and pane.model.rowCount() == 1
                    and pane.model.rows[0].value.status == "running", timeout=10_000)
    assert pane.editor.add_button.isEnabled() and "runner" in pane.editor.add_button.toolTip()
    _type_job(qtbot, pane, "echo from-gui")
    assert "its runner takes it in" in pane.message.text(), pane.message.text()
    assert load_queue(path).ids == ["command-1", "command-2"]
    qtbot.waitUntil(lambda: pane.model.rowCount() == 2, timeout=10_000)
    qtbot.waitUntil(lambda: not (runner_state(path) or {}).get("alive"), timeout=30_000)
    qtbot.waitUntil(lambda: [r.value.status for r in pane.model.rows] == ["success", "success"],
                    timeout=10_000)


def _snapshot(pane, runner: dict) -> QueueSnapshot:
    return QueueSnapshot(path=str(pane.path), runner=MappingProxyType(runner))


def test_a_runner_killed_after_an_abort_and_resume_says_it_crashed(qtbot, make_pane, workspace):
    q = Queue(name="n2", max_consecutive_failures=0,
              stopped_reason="aborted by request; the running job was stopped")  # the old run
    q.add(Job(module="command", id="done", settings={"argv": ["true"]}, status="success"))
    q.add(Job(module="command", id="long", settings={"argv": ["true"]}, status="running"))
    save_queue(q, workspace.queues / "n2.queue.json")
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.model.rowCount() == 2 and not pane.dirty)
    assert pane.queue.stopped_reason.startswith("aborted")
    pane.show_snapshot(_snapshot(pane, {"alive": True, "pid": 4321, "state": "running",
                                        "current_job": "long"}))
    pane.show_snapshot(_snapshot(pane, {"alive": False, "pid": 4321, "state": "crashed",
                                        "current_job": "long"}))
    shown = pane.message.text()
    assert "aborted" not in shown, shown
    assert "crashed or was killed while long was running" in shown
    assert "Resume adopts it" in shown
    pane.runner = {}


def test_edits_made_while_a_save_is_written_stay_unsaved_and_the_next_save_keeps_all(
        qtbot, make_pane, workspace):
    path = _finished_n6(workspace)
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.model.rowCount() == 2 and not pane.dirty)
    _type_job(qtbot, pane, "echo one")
    _cli_add(path, "command", "--id", "fromcli", "--", "echo", "from-cli")
    pane.save()
    pane.queue.add(Job(module="command", id="late-edit", settings={"argv": ["true"]}),
                   validate=False)  # before the save's answer can arrive
    pane._edited()
    qtbot.waitUntil(lambda: not pane.waiting_for("save"), timeout=10_000)
    assert pane.dirty, "the edit made meanwhile is not saved yet"
    assert load_queue(path).ids == ["first", "second", "command-1", "fromcli"]
    pane.save()
    qtbot.waitUntil(lambda: not pane.dirty, timeout=10_000)
    assert load_queue(path).ids == ["first", "second", "command-1", "late-edit", "fromcli"]


def test_unsaved_edits_are_kept_when_a_runner_starts_from_a_terminal(qtbot, make_pane,
                                                                     workspace):
    q = Queue(name="r", max_consecutive_failures=0)
    for i in range(3):
        q.add(Job(module="command", id=f"j{i}", settings={"argv": ["sleep", "0.3"]}),
              validate=False)
    path = workspace.queues / "r.queue.json"
    save_queue(q, path)
    pane = make_pane()
    qtbot.waitUntil(lambda: pane.model.rowCount() == 3 and not pane.dirty)
    pane.queue.add(Job(module="command", id="mine", settings={"argv": ["true"]}),
                   validate=False)
    pane.queue.find("j2").label = "relabelled here"
    pane._edited()
    subprocess.run([PY, "-m", "spacrq", "queue", "run", "--detach", str(path)], check=True,
                   capture_output=True, timeout=60)
    qtbot.waitUntil(lambda: "kept as" in pane.message.text(), timeout=20_000)
    said = pane.message.text()
    assert "your new mine was added to the running queue" in said and "changed j2" in said
    (copy,) = workspace.queues.glob("r.unsaved-*.queue.json")
    assert copy.name in said and load_queue(copy).find("j2").label == "relabelled here"
    qtbot.waitUntil(lambda: not (runner_state(path) or {}).get("alive"), timeout=30_000)
    ran = load_queue(path)
    assert ran.ids == ["j0", "j1", "j2", "mine"] and ran.find("mine").status == "success"
    qtbot.waitUntil(lambda: [r.key for r in pane.model.rows] == ["j0", "j1", "j2", "mine"],
                    timeout=10_000)
