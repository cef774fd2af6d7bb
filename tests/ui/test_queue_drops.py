"""Files dropped on the Queue pane: a queue file opens, settings files fill the editor or add jobs."""
from __future__ import annotations

import json

import pytest
from dropping import drop_files, file_drag  # tests/dropping.py
from PySide6.QtCore import QMimeData

from spacrq.queue.model import Job, Queue
from spacrq.queue.store import save_queue
from spacrq.ui.drops import QUEUE_HINT
from spacrq.ui.queue_pane import QueuePane

WAIT = 10_000


@pytest.fixture
def pane(open_pane, qtbot):
    pane = open_pane(QueuePane)
    qtbot.waitUntil(lambda: pane.path is not None and not pane.waiting_for(), timeout=WAIT)
    pane.editor.module.setCurrentText("command")
    pane.editor.main.clear()
    return pane


def _queue_file(folder, name="other", ids=("a", "b")):
    queue = Queue(name=name)
    for jid in ids:
        queue.add(Job(module="command", id=jid, settings={"argv": ["true"]}), validate=False)
    path = folder / f"{name}.queue.json"
    save_queue(queue, path)
    return path


def _settings(folder, name, argv=("true",)):
    path = folder / name
    path.write_text(json.dumps({"argv": list(argv)}))
    return path


def test_a_dropped_queue_file_opens_it(pane, qtbot, tmp_path):
    path = _queue_file(tmp_path)
    assert drop_files(pane.table, [path])
    qtbot.waitUntil(lambda: pane.path == path and pane.model.rowCount() == 2, timeout=WAIT)
    assert [r.key for r in pane.model.rows] == ["a", "b"]


def test_one_settings_file_dropped_on_the_editor_fills_its_settings(pane, qtbot, tmp_path):
    path = tmp_path / "plate1.csv"
    path.write_text("Key,Value\nargv,\"[\"\"echo\"\", \"\"hi\"\"]\"\ncwd,/tmp\n")
    assert drop_files(pane.editor.settings, [path])
    qtbot.waitUntil(lambda: pane.editor.settings.text() == str(path), timeout=WAIT)
    assert "Settings from plate1.csv: 2 value(s) (argv, cwd)" in pane.message.text()
    assert pane.model.rowCount() == 0  # filled, not added


def test_a_broken_settings_file_is_one_sentence_and_fills_nothing(pane, qtbot, tmp_path):
    path = tmp_path / "broken.csv"
    path.write_text("name;value\nx;1\n")
    pane.editor.settings.setText("kept.csv")
    assert drop_files(pane.editor, [path])
    qtbot.waitUntil(lambda: "Settings not used" in pane.message.text(), timeout=WAIT)
    assert "broken.csv" in pane.message.text() and "Key,Value" in pane.message.text()
    assert pane.editor.settings.text() == "kept.csv"


def test_several_settings_files_add_one_job_each_with_the_editors_module(pane, qtbot, tmp_path):
    files = [_settings(tmp_path, f"well-{i}.json") for i in range(3)]
    pane.editor.settings.setText("kept.csv")
    assert drop_files(pane.table, files)
    qtbot.waitUntil(lambda: pane.model.rowCount() == 3 and not pane.drops.busy, timeout=WAIT)
    assert [j.settings for j in pane.queue.jobs] == [str(f) for f in files]
    assert {j.module for j in pane.queue.jobs} == {"command"}
    assert "Added 3 jobs, one per settings file" in pane.message.text()
    assert pane.editor.settings.text() == "kept.csv"


def test_a_settings_file_that_cannot_run_is_not_added_and_the_rest_are(pane, qtbot, tmp_path):
    good = _settings(tmp_path, "good.json")
    bad = _settings(tmp_path, "bad.json", ("no-such-program-spacrq",))
    assert drop_files(pane.editor, [good, bad])
    qtbot.waitUntil(lambda: not pane.drops.busy and "Added 1 of 2" in pane.message.text(),
                    timeout=WAIT)
    assert [j.settings for j in pane.queue.jobs] == [str(good)]
    assert "bad.json was not added" in pane.message.text()


def test_a_drop_of_something_else_says_what_can_be_dropped(pane, tmp_path):
    assert drop_files(pane.table, [tmp_path / "photo.png"])
    assert QUEUE_HINT in pane.message.text() and "photo.png" in pane.message.text()
    assert drop_files(pane.table, [tmp_path / "a.queue.json", tmp_path / "b.queue.json"])
    assert "one queue file at a time" in pane.message.text()
    assert pane.model.rowCount() == 0


def test_text_dragged_onto_a_field_is_the_fields_own_business(pane):
    mime = QMimeData()
    mime.setText("n_jobs=4")
    drop_files(pane.editor.overrides, [], mime=mime)
    assert "Not used" not in pane.message.text()
    assert file_drag(["/x.csv"]).hasUrls()
