"""Several writers, several files: no change is lost, and two queue files never share state."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spacrq.cli import main
from spacrq.queue import Job, Queue, load_queue, save_queue
from spacrq.queue.locks import RunnerLock
from spacrq.queue.runner import runner_state, start_runner
from spacrq.queue.store import logs_dir
from spacrq.queue.watch import save_document
from spacrq.runfiles import write_json
from waiting import reap, wait_until  # tests/waiting.py (tests/ is on the path)

ADDER = """
import sys
from spacrq.cli import main
path, tag = sys.argv[1], sys.argv[2]
for i in range(100):
    assert main(["queue", "add", path, "command", "--id", f"{tag}-{i}", "--", "true"]) == 0
"""



def test_two_processes_adding_a_hundred_jobs_each_leave_two_hundred(tmp_path):
    path = tmp_path / "night.queue.json"
    adders = [subprocess.Popen([sys.executable, "-c", ADDER, str(path), tag], cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
              for tag in ("alice", "bob")]
    for adder in adders:
        _, err = adder.communicate(timeout=120)
        assert adder.returncode == 0, err.decode()
    ids = load_queue(path).ids
    assert len(ids) == 200 and len(set(ids)) == 200


REMOVER = """
import os, sys, time
lock, stop = sys.argv[1], sys.argv[2]
while not os.path.exists(stop):
    try:
        os.unlink(lock)
    except FileNotFoundError:
        pass
"""


def test_adds_land_while_somebody_keeps_removing_the_lock_file(tmp_path):
    """A lock file can be removed while it is held (a cleaning script): 90 adds that all said
    'added' left 85 jobs.  The logs folder is locked too, and that cannot be taken away."""
    path = tmp_path / "night.queue.json"
    assert main(["queue", "add", str(path), "command", "--id", "seed", "--", "true"]) == 0
    stop = tmp_path / "stop"
    remover = subprocess.Popen([sys.executable, "-c", REMOVER,
                                str(logs_dir(path) / "queue.lock"), str(stop)])
    try:
        adders = [subprocess.Popen([sys.executable, "-c", ADDER.replace("range(100)", "range(40)"),
                                    str(path), tag], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE) for tag in ("a", "b", "c")]
        for adder in adders:
            _, err = adder.communicate(timeout=120)
            assert adder.returncode == 0, err.decode()
    finally:
        stop.write_text("")
        remover.wait(timeout=30)
    ids = load_queue(path).ids
    assert len(ids) == 121 and len(set(ids)) == 121


def test_a_job_added_to_a_running_queue_is_taken_in_and_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "night.queue.json"
    assert main(["queue", "add", str(path), "command", "--id", "wait", "--", "sh", "-c",
                 "touch started; while [ ! -e go ]; do sleep 0.02; done"]) == 0
    ref = start_runner(path)
    try:
        wait_until(lambda: (tmp_path / "started").exists(), what="the first job")
        assert main(["queue", "add", str(path), "command", "--id", "late", "--",
                     "touch", "late.ran"]) == 0
        assert "its runner takes the job in" in capsys.readouterr().out
        assert [j.status for j in load_queue(path).jobs] == ["running", "pending"]
    finally:
        (tmp_path / "go").write_text("")
        reap(ref.pid)
    assert [j.status for j in load_queue(path).jobs] == ["success", "success"]
    assert (tmp_path / "late.ran").exists()


def test_the_panes_save_is_refused_while_a_runner_holds_the_queue(tmp_path):
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", settings={"argv": ["true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    before = path.read_bytes()
    lock = RunnerLock(logs_dir(path)).acquire()  # a runner that has not written runner.json yet
    try:
        result = save_document(path, 1, queue.to_dict())
    finally:
        lock.release()
    # (the kernel's lock names the runner even before its record does)
    assert not result.ok and f"runner process {os.getpid()} owns the file" in result.message
    assert path.read_bytes() == before
    assert save_document(path, 2, queue.to_dict()).ok


def test_two_queue_files_with_one_stem_never_share_state(tmp_path):
    def make(name, script):
        queue = Queue(name="night")
        queue.add(Job(module="command", id="a", cwd=str(tmp_path),
                      settings={"argv": ["sh", "-c", script]}))
        path = tmp_path / name
        save_queue(queue, path)
        return path

    night = make("night.queue.json", "touch n.started; while [ ! -e go ]; do sleep 0.02; done")
    backup = make("night.backup.queue.json", "touch b.ran")
    assert logs_dir(night) != logs_dir(backup)
    ref = start_runner(night)
    try:
        wait_until(lambda: (tmp_path / "n.started").exists(), what="the night queue's job")
        assert load_queue(backup).jobs[0].status == "pending"  # not the other file's "running"
        assert runner_state(backup) is None
        other = start_runner(backup)  # not "already being run"
        reap(other.pid)
        assert load_queue(backup).jobs[0].status == "success"
        assert load_queue(night).jobs[0].status == "running"
    finally:
        (tmp_path / "go").write_text("")
        reap(ref.pid)
    assert load_queue(night).jobs[0].status == "success"
    assert (logs_dir(night) / "01_a.log").exists() and (logs_dir(backup) / "01_a.log").exists()


@pytest.mark.parametrize("name,folder", [
    ("night.queue.json", "night_logs"), ("night.backup.queue.json", "night.backup_logs"),
    ("night.json", "night.json.logs"), ("night", "night.logs"), (".queue.json", ".queue.json.logs"),
])
def test_each_file_name_has_a_logs_folder_of_its_own(tmp_path, name, folder):
    assert logs_dir(tmp_path / name) == tmp_path / folder


def test_the_old_shared_folder_is_read_only_for_the_file_it_names(tmp_path):
    """Queues run before the per-file layout kept their journal in ``<stem>_logs``."""
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", settings={"argv": ["true"]}))
    backup, night = tmp_path / "night.backup.queue.json", tmp_path / "night.queue.json"
    save_queue(queue, backup)
    save_queue(queue, night)
    old = tmp_path / "night_logs"  # shared by both in the old layout; the journal is backup's
    write_json(old / "runner.json", {"pid": 1, "queue": str(backup), "state": "finished"})
    (old / "journal.jsonl").write_text(json.dumps(
        {"seq": 1, "job": "a", "set": {"status": "success", "exit_code": 0}}) + "\n")
    assert load_queue(backup).jobs[0].status == "success"
    assert runner_state(backup)["state"] == "finished"
    read = load_queue(night)
    assert read.jobs[0].status == "pending"  # night_logs is night's folder now…
    assert runner_state(night) is None  # …but what the old layout left there is backup's
    assert any("was not applied: it names no queue" in w for w in read.warnings)  # (said)
    from spacrq.queue.store import open_queue
    open_queue(night)  # (folds nothing of it, and never empties what may be backup's state)
    assert [p.name for p in old.glob("journal*.jsonl") if p.stat().st_size] != []
    assert load_queue(night).jobs[0].status == "pending"


def test_a_journal_that_names_its_queue_is_read_wherever_its_runner_was_told_it_ran(tmp_path):
    """This layout's journal begins with the queue it belongs to: a runner's record naming
    another path (the queue's folder renamed, or the share mounted elsewhere, after a crash)
    no longer keeps it from being read; another queue copied over the file still does."""
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", settings={"argv": ["true"]}))
    night = tmp_path / "night.queue.json"
    save_queue(queue, night)
    logs = logs_dir(night)
    logs.mkdir()
    write_json(logs / "runner.json", {"pid": 1, "queue": "/mnt/old/night.queue.json",
                                      "state": "running"})
    (logs / "journal.jsonl").write_text(
        json.dumps({"queue": queue.created, "name": "night"}) + "\n" + json.dumps(
            {"seq": 1, "job": "a", "set": {"status": "success", "exit_code": 0}}) + "\n")
    assert load_queue(night).jobs[0].status == "success"
    other = Queue(name="night", created="2020-01-01T00:00:00+00:00")
    other.add(Job(module="command", id="a", settings={"argv": ["true"]}))
    night.write_text(json.dumps(other.to_dict()))  # (another queue copied over the file)
    read = load_queue(night)
    assert read.jobs[0].status == "pending" and read.journal_seq == 0
    assert any("written for another queue" in w for w in read.warnings)


def test_a_look_at_the_runner_lock_never_makes_a_starting_runner_refuse(tmp_path):
    """``runner_holds`` (queue status, the pane's poll) takes the lock shared for a moment; a
    runner starting in that moment refused: 'already being run by process another process'."""
    import fcntl
    import threading

    from spacrq.queue.locks import RUNNER_LOCK_FILE
    from spacrq.queue.model import QueueError
    folder = tmp_path / "night_logs"
    folder.mkdir()
    look = os.open(folder / RUNNER_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(look, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a look, caught in the middle
    timer = threading.Timer(0.05, lambda: os.close(look))
    timer.start()
    try:
        lock = RunnerLock(folder, "night.queue.json").acquire()
    finally:
        timer.join()
    lock.release()
    holder = os.open(folder / RUNNER_LOCK_FILE, os.O_RDWR)
    try:  # a runner that really holds it is still refused
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(QueueError, match="already being run"):
            RunnerLock(folder, "night.queue.json").acquire()
    finally:
        os.close(holder)


def test_a_queue_file_with_two_names_is_refused_by_every_runner(tmp_path, capsys):
    """A hard link gives one file two names, each with its own logs folder and locks: two
    runners started at once, one per name, both ran every job. Now neither starts; the
    checkpoint a crashed runner keeps of the file (a link in its logs folder) is no name."""
    from spacrq.queue import QueueError
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", cwd=str(tmp_path),
                  settings={"argv": ["sh", "-c", "echo a >> runs"]}))
    night, other = tmp_path / "night.queue.json", tmp_path / "other.queue.json"
    save_queue(queue, night)
    os.link(night, other)
    for name in (night, other):
        for command in (["queue", "run", str(name)], ["queue", "run", "--detach", str(name)],
                        ["queue", "resume", str(name)]):
            assert main(command) == 2
            err = capsys.readouterr().err
            assert "has 1 other name(s) (a hard link to the same file)" in err and \
                err.count("\n") == 1
        with pytest.raises(QueueError, match="other name"):
            start_runner(name)
    assert not (tmp_path / "runs").exists()
    other.unlink()
    logs_dir(night).mkdir(exist_ok=True)
    os.link(night, logs_dir(night) / "last-checkpoint.json")  # (what a crashed runner left)
    assert main(["queue", "run", str(night)]) == 0
    assert (tmp_path / "runs").read_text() == "a\n"
