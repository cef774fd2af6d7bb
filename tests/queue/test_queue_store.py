"""Queue files: every load error is one sentence; transitions are journalled and replayed."""
from __future__ import annotations

import json

import pytest

from spacrq.queue import Job, Queue, QueueError, load_queue, save_queue
from spacrq.queue.store import Journal, journal_path, logs_dir


def _write(tmp_path, text, name="n.queue.json"):
    path = tmp_path / name
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return path


@pytest.mark.parametrize("content,needle", [
    ("", "is empty"),
    ("{\"spacr_queue\": 1, \"jobs\": [", "not valid JSON (line 1"),
    ("[1, 2]", "must hold an object"),
    ('{"spacr_queue": 7, "jobs": []}', "format 7"),
    ('{"spacr_queue": "x", "jobs": []}', "format number"),
    ('{"jobs": {"a": 1}}', '"jobs" must be a list'),
    ('{"jobs": [5]}', "not an object"),
    ('{"jobs": [{"settings": "x"}]}', 'has no "module"'),
    ('{"jobs": [{"module": "command", "status": "done"}]}', "has status 'done'"),
    ('{"jobs": [{"module": "command", "depends_on": {"a": 1}}]}', '"depends_on"'),
    ('{"jobs": [{"module": "command", "timeout": "soon"}]}', '"timeout"'),
    ('{"jobs": [{"module": "command", "retries": "many"}]}', '"retries"'),
    ('{"jobs": [{"module": "command", "env": ["A=1"]}]}', '"env"'),
    ('{"jobs": [{"module": "command", "settings": 5}]}', '"settings"'),
    ('{"jobs": [], "on_error": "panic"}', '"on_error"'),
    ('{"jobs": [], "max_consecutive_failures": "lots"}', "max_consecutive_failures"),
    (b"\xff\xfe\x00garbage", "not a text file"),
])
def test_every_malformed_file_is_one_sentence(tmp_path, content, needle):
    path = _write(tmp_path, content)
    with pytest.raises(QueueError) as err:
        load_queue(path)
    message = str(err.value)
    assert needle in message
    assert "\n" not in message and "Traceback" not in message


def test_missing_file_and_folder_are_one_sentence(tmp_path):
    with pytest.raises(QueueError, match="queue file not found"):
        load_queue(tmp_path / "nope.queue.json")
    with pytest.raises(QueueError, match="is a folder"):
        load_queue(tmp_path)


def test_hand_edited_file_without_bookkeeping_loads(tmp_path):
    path = _write(tmp_path, '{"jobs": [{"module": "command", "settings": {"argv": ["true"]}},'
                            ' {"module": "command", "depends_on": "command-1"}]}')
    queue = load_queue(path)
    assert queue.ids == ["command-1", "command-2"]
    assert queue.jobs[1].depends_on == ["command-1"] and queue.jobs[0].status == "pending"


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path):
    queue = Queue(name="n")
    queue.add(Job(module="command", settings={"argv": ["true"]}), validate=False)
    path = save_queue(queue, tmp_path / "n.queue.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.queue.json"]
    assert json.loads(path.read_text())["spacr_queue"] == 1


def test_save_into_a_missing_folder_is_one_sentence(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(QueueError, match="could not write"):
        save_queue(Queue(), blocker / "n.queue.json")


def test_logs_dir_is_stem_up_to_the_first_dot(tmp_path):
    assert logs_dir(tmp_path / "night.queue.json") == tmp_path / "night_logs"


def _journalled(tmp_path, n=3):
    path = tmp_path / "n.queue.json"
    queue = Queue(name="n")
    for _ in range(n):
        queue.add(Job(module="command", settings={"argv": ["true"]}), validate=False)
    save_queue(queue, path)
    return queue, path


def test_transitions_are_journalled_and_replayed_by_load(tmp_path):
    queue, path = _journalled(tmp_path)
    journal = Journal(queue, path)
    queue.jobs[0].status, queue.jobs[0].exit_code = "success", 0
    journal.job(queue.jobs[0], ["status", "exit_code"])
    queue.jobs[1].status = "running"
    journal.job(queue.jobs[1], ["status"])
    journal.close()
    on_disk = json.loads(path.read_text())
    assert [j["status"] for j in on_disk["jobs"]] == ["pending"] * 3  # not rewritten per job
    assert [j.status for j in load_queue(path).jobs] == ["success", "running", "pending"]


def test_checkpoint_folds_the_journal_into_the_file(tmp_path):
    queue, path = _journalled(tmp_path)
    journal = Journal(queue, path)
    queue.jobs[2].status = "failed"
    journal.job(queue.jobs[2], ["status"])
    journal.checkpoint()
    journal.close()
    assert journal_path(path).stat().st_size == 0
    assert json.loads(path.read_text())["jobs"][2]["status"] == "failed"
    assert load_queue(path).jobs[2].status == "failed"


def test_a_torn_last_journal_line_is_ignored(tmp_path):
    queue, path = _journalled(tmp_path)
    journal = Journal(queue, path)
    queue.jobs[0].status = "success"
    journal.job(queue.jobs[0], ["status"])
    journal.close()
    with open(journal_path(path), "a") as fh:
        fh.write('{"seq": 99, "job": "command-2", "set": {"status": "fai')
    assert [j.status for j in load_queue(path).jobs] == ["success", "pending", "pending"]


def test_lines_already_in_the_file_are_not_replayed_again(tmp_path):
    queue, path = _journalled(tmp_path)
    journal = Journal(queue, path)
    queue.jobs[0].status = "failed"
    journal.job(queue.jobs[0], ["status"])
    journal.close()
    edited = load_queue(path)
    edited.jobs[0].reset()  # the operator resets the job in the window and saves
    save_queue(edited, path)
    assert load_queue(path).jobs[0].status == "pending"


def test_a_journal_line_for_an_unknown_job_or_field_is_ignored(tmp_path):
    queue, path = _journalled(tmp_path)
    journal_path(path).parent.mkdir(parents=True, exist_ok=True)
    journal_path(path).write_text('{"seq": 1, "job": "ghost", "set": {"status": "failed"}}\n'
                                  '{"seq": 2, "job": "command-1", "set": {"module": "rm"}}\n')
    back = load_queue(path)
    assert back.jobs[0].module == "command" and back.jobs[0].status == "pending"


def test_a_command_that_opens_a_queue_after_a_crash_folds_the_journal_in(tmp_path):
    """A large queue journals between checkpoints; after its runner died the file is behind."""
    from spacrq.queue.store import open_queue
    queue, path = _journalled(tmp_path)
    journal = Journal(queue, path)
    queue.jobs[0].status, queue.jobs[0].exit_code = "success", 0
    journal.job(queue.jobs[0], ["status", "exit_code"])
    journal.close()  # ...and the runner is gone
    assert json.loads(path.read_text())["jobs"][0]["status"] == "pending"
    assert open_queue(path).jobs[0].status == "success"
    assert json.loads(path.read_text())["jobs"][0]["status"] == "success"  # the file alone
    assert journal_path(path).stat().st_size == 0


def test_a_journal_is_not_folded_while_its_runner_holds_the_queue(tmp_path):
    from spacrq.queue.locks import RunnerLock
    from spacrq.queue.store import open_queue
    queue, path = _journalled(tmp_path)
    journal = Journal(queue, path)
    queue.jobs[0].status = "running"
    journal.job(queue.jobs[0], ["status"])
    lock = RunnerLock(logs_dir(path)).acquire()
    try:
        assert open_queue(path).jobs[0].status == "running"
        assert journal_path(path).stat().st_size > 0  # the live journal is the runner's
    finally:
        lock.release()
        journal.close()
