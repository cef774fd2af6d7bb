"""A queue file a power cut left empty or full of zero bytes is read from the last
checkpoint and the journal (XFS, F2FS and network file systems do not write a renamed
file's data before the rename, as ext4 and btrfs do)."""
from __future__ import annotations

import os
import signal

import pytest

from spacrq import cli
from spacrq.queue import Job, Queue, QueueError, load_queue, open_queue, resume_queue, save_queue
from spacrq.queue.journal import Journal
from spacrq.queue.lastgood import checkpoint_path
from spacrq.queue.layout import journal_path
from spacrq.queue.render import write_queue_file
from spacrq.queue.runner import runner_state, start_runner
from spacrq.queue.store import read_queue_document
from waiting import reap, wait_until  # tests/waiting.py (tests/ is on the path)


def _queue(tmp_path, n=3):
    queue = Queue(name="night", max_consecutive_failures=0)
    for i in range(n):
        queue.add(Job(module="command", id=f"j{i}", settings={"argv": ["true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    return queue, path


def _power_cut(path):
    """What XFS can leave of a file renamed into place without an fsync: its size, zeros."""
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.write(b"\0" * size)


def _runs_then_cut(tmp_path):
    """A runner's checkpoint, then the first job's end journalled and the file replaced
    without an fsync (as a small queue's runner does), then the power cut."""
    queue, path = _queue(tmp_path)
    journal = Journal(queue, path)
    journal.checkpoint()
    queue.jobs[0].status, queue.jobs[0].exit_code = "success", 0
    journal.job(queue.jobs[0], ["status", "exit_code"])
    queue.jobs[1].status = "running"
    journal.job(queue.jobs[1], ["status"])
    write_queue_file(queue, path, durable=False)
    journal.close()
    _power_cut(path)
    return path


def test_a_file_a_power_cut_zeroed_is_read_from_its_checkpoint_and_journal(tmp_path):
    path = _runs_then_cut(tmp_path)
    queue = load_queue(path)
    assert [j.status for j in queue.jobs] == ["success", "running", "pending"]
    assert queue.recovered_from == str(checkpoint_path(path))
    assert any("last checkpoint" in w and "power cut" in w for w in queue.warnings)
    with pytest.raises(QueueError):  # the file itself is still the zeros: load_queue only reads
        read_queue_document(path)


def test_the_first_command_after_the_cut_writes_the_file_again(tmp_path):
    path = _runs_then_cut(tmp_path)
    queue = open_queue(path)
    assert any("written again" in w for w in queue.warnings)
    document = read_queue_document(path)  # the file alone is the truth again (jq, spaCR)
    assert [j["status"] for j in document["jobs"]] == ["success", "running", "pending"]
    assert not checkpoint_path(path).exists()
    assert journal_path(path).stat().st_size == 0  # folded in


def test_status_reads_a_zeroed_file_through_its_checkpoint(tmp_path, capsys):
    path = _runs_then_cut(tmp_path)
    assert cli.main(["queue", "status", str(path)]) == 0
    captured = capsys.readouterr()
    assert "j0" in captured.out and "last checkpoint" in captured.err + captured.out


def test_a_checkpoint_the_journal_does_not_follow_on_from_is_not_trusted(tmp_path):
    queue, path = _queue(tmp_path)
    journal = Journal(queue, path)
    journal.checkpoint()  # the checkpoint has journal_seq 0 ...
    journal.seq = 7  # ... and the journal's first transition is seq 8: 1 to 7 are missing
    queue.jobs[0].status = "success"
    journal.job(queue.jobs[0], ["status"])
    write_queue_file(queue, path, durable=False)
    journal.close()
    _power_cut(path)
    with pytest.raises(QueueError, match="transitions between them are missing") as caught:
        load_queue(path)
    assert "copy the checkpoint over the file" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_without_a_journal_a_checkpoint_never_stands_in(tmp_path):
    """A checkpoint without its run's journal may be of an earlier run: the file's own
    problem is said, as it is."""
    path = _runs_then_cut(tmp_path)
    journal_path(path).unlink()
    with pytest.raises(QueueError, match="line 1"):
        load_queue(path)


def test_a_checkpoint_that_is_a_link_is_never_followed(tmp_path):
    path = _runs_then_cut(tmp_path)
    other_queue, other = _queue(tmp_path / "other")
    checkpoint_path(path).unlink()
    checkpoint_path(path).symlink_to(other)
    with pytest.raises(QueueError):
        load_queue(path)


def test_a_file_damaged_in_place_is_not_its_own_checkpoint(tmp_path):
    queue, path = _queue(tmp_path)
    journal = Journal(queue, path)
    journal.checkpoint()  # the checkpoint is the file itself (one inode, two names)
    journal.close()
    _power_cut(path)  # written in place: both names show the zeros
    with pytest.raises(QueueError):
        load_queue(path)


def test_a_run_keeps_a_checkpoint_while_it_runs_and_none_once_it_ended(tmp_path):
    queue = Queue(name="night", max_consecutive_failures=0)
    checkpoint = checkpoint_path(tmp_path / "night.queue.json")
    queue.add(Job(module="command", id="look", settings={"argv": ["test", "-f", str(checkpoint)]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    assert cli.main(["queue", "run", str(path)]) == 0
    assert load_queue(path).jobs[0].status == "success"  # the checkpoint was there as it ran
    assert not checkpoint.exists()  # and not once the run ended cleanly


def _counted(jid, tmp_path, gate=False):
    script = f"echo {jid} >> runs; " + ("while [ ! -e go ]; do sleep 0.02; done" if gate else "")
    return Job(module="command", id=jid, cwd=str(tmp_path), settings={"argv": ["sh", "-c", script]})


def test_resume_after_a_kill_and_a_zeroed_file_runs_each_job_once(tmp_path):
    """The runner dies mid-queue and its last file replace never reached the disk: resume
    goes on from the checkpoint and the journal, and no job that ran runs again."""
    queue = Queue(name="night", max_consecutive_failures=0)
    for job in (_counted("a", tmp_path), _counted("b", tmp_path),
                _counted("c", tmp_path, gate=True), _counted("d", tmp_path)):
        queue.add(job)
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    ref = start_runner(path)
    try:
        wait_until(lambda: (runner_state(path) or {}).get("pid") == ref.pid, what="the runner")
        wait_until(lambda: "c" in (tmp_path / "runs").read_text().split()
                   if (tmp_path / "runs").exists() else False, what="the third job")
        wait_until(lambda: [j.status for j in load_queue(path).jobs][:3]
                   == ["success", "success", "running"], what="the file to show it running")
        os.kill(ref.pid, signal.SIGKILL)
        reap(ref.pid)
    finally:
        (tmp_path / "go").write_text("")
    _power_cut(path)
    result = resume_queue(path)
    assert result.ok
    assert [j.status for j in load_queue(path).jobs] == ["success"] * 4
    assert (tmp_path / "runs").read_text().split() == ["a", "b", "c", "d"]  # each once
    assert [j["status"] for j in read_queue_document(path)["jobs"]] == ["success"] * 4
    assert not checkpoint_path(path).exists()


def test_adding_a_job_to_a_zeroed_file_keeps_every_job_it_had(tmp_path):
    path = _runs_then_cut(tmp_path)
    assert cli.main(["queue", "add", str(path), "command", "--id", "late", "--set", "argv=[\"true\"]"]) == 0
    document = read_queue_document(path)
    assert [(j["id"], j["status"]) for j in document["jobs"]] == [
        ("j0", "success"), ("j1", "running"), ("j2", "pending"), ("late", "pending")]
    assert not checkpoint_path(path).exists()


def test_no_checkpoint_is_made_or_removed_through_a_linked_logs_folder(tmp_path):
    from spacrq.queue.lastgood import drop_checkpoint, keep_checkpoint
    queue, path = _queue(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "last-checkpoint.json").write_text("theirs")
    logs = tmp_path / "night_logs"
    if logs.exists():
        logs.rmdir()
    logs.symlink_to(elsewhere)
    assert "cannot be opened as a folder" in keep_checkpoint(path)
    drop_checkpoint(path)
    assert [p.name for p in elsewhere.iterdir()] == ["last-checkpoint.json"]
    assert (elsewhere / "last-checkpoint.json").read_text() == "theirs"


def _gate(jid, tmp_path, gate):
    script = f"echo {jid} >> runs; while [ ! -e {gate} ]; do sleep 0.02; done"
    return Job(module="command", id=jid, cwd=str(tmp_path), settings={"argv": ["sh", "-c", script]})


def test_jobs_added_and_edited_while_it_runs_survive_a_kill_and_a_zeroed_file(tmp_path):
    """The journal holds transitions, not jobs: the runner's write that takes an added or
    edited job in is a checkpoint, so the change outlives a power cut of the next replace."""
    queue = Queue(name="night", max_consecutive_failures=0)
    queue.add(_gate("first", tmp_path, "go1"))
    queue.add(_counted("waiting", tmp_path))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    ref = start_runner(path)
    try:
        wait_until(lambda: (tmp_path / "runs").exists(), what="the first job")
        assert cli.main(["queue", "add", str(path), "command", "--id", "late",
                         "--set", 'argv=["sh", "-c", "echo late >> runs"]',
                         "--cwd", str(tmp_path)]) == 0
        assert cli.main(["queue", "add", str(path), "command", "--id", "tail", "--cwd",
                         str(tmp_path), "--set", 'argv=["sh", "-c", "echo tail >> runs; '
                         'while [ ! -e go2 ]; do sleep 0.02; done"]']) == 0
        assert cli.main(["queue", "edit", str(path), "waiting", "--label", "EDITED"]) == 0
        (tmp_path / "go1").write_text("")
        wait_until(lambda: "tail" in (tmp_path / "runs").read_text().split(), what="tail")
        wait_until(lambda: [j.status for j in load_queue(path).jobs][-1] == "running",
                   what="the file to show tail running")
        os.kill(ref.pid, signal.SIGKILL)
        reap(ref.pid)
    finally:
        (tmp_path / "go1").write_text("")
        (tmp_path / "go2").write_text("")
    _power_cut(path)
    assert resume_queue(path).ok
    after = load_queue(path)
    assert [(j.id, j.status) for j in after.jobs] == [
        ("first", "success"), ("waiting", "success"), ("late", "success"), ("tail", "success")]
    assert after.find("waiting").label == "EDITED"
    assert (tmp_path / "runs").read_text().split() == ["first", "waiting", "late", "tail"]


def test_a_checkpoint_of_another_queue_never_stands_in_and_the_journal_is_kept(tmp_path):
    path = _runs_then_cut(tmp_path)
    _, other = _queue(tmp_path / "other")
    other_doc = read_queue_document(other)
    other_doc["created"] = "2020-01-01T00:00:00+00:00"
    import json
    checkpoint_path(path).unlink()
    checkpoint_path(path).write_text(json.dumps(other_doc))
    journal = journal_path(path).read_bytes()
    with pytest.raises(QueueError, match="another queue's") as caught:
        open_queue(path)
    assert str(checkpoint_path(path)) in str(caught.value)
    assert journal_path(path).read_bytes() == journal  # never emptied


def test_a_checkpoint_that_is_not_a_queue_is_named_as_what_cannot_stand_in(tmp_path):
    path = _runs_then_cut(tmp_path)
    checkpoint_path(path).unlink()
    checkpoint_path(path).write_text('{"a": 1}')
    with pytest.raises(QueueError, match="cannot stand in for it: it is not a queue") as caught:
        load_queue(path)
    assert "write {" not in str(caught.value)  # (no advice to empty the file)


def test_a_journal_whose_start_is_damaged_never_vouches_for_a_checkpoint(tmp_path):
    path = _runs_then_cut(tmp_path)
    good = journal_path(path).read_bytes()
    journal_path(path).write_bytes(b"x" * 70_000 + b"\n" + good)
    with pytest.raises(QueueError, match="first lines of the journal .* are damaged"):
        load_queue(path)


def test_a_journal_of_zeros_a_power_cut_left_is_no_transition(tmp_path):
    """The checkpoint emptied the journal; the next lines never reached the disk."""
    path = _runs_then_cut(tmp_path)
    journal_path(path).write_bytes(b"\0" * 400)
    queue = load_queue(path)
    assert [j.status for j in queue.jobs] == ["pending"] * 3  # the checkpoint, as it was


def test_a_checkpoint_behind_a_linked_logs_folder_is_not_read(tmp_path):
    path = _runs_then_cut(tmp_path)
    logs = tmp_path / "night_logs"
    logs.rename(tmp_path / "moved")
    logs.symlink_to(tmp_path / "moved")
    with pytest.raises(QueueError, match="not valid JSON"):
        load_queue(path)


def test_an_edit_of_a_zeroed_file_says_so_and_leaves_no_stale_checkpoint(tmp_path, capsys):
    path = _runs_then_cut(tmp_path)
    assert cli.main(["queue", "edit", str(path), "j2", "--label", "EDITED"]) == 0
    err = capsys.readouterr().err
    assert "last checkpoint" in err and "written again" in err
    assert not checkpoint_path(path).exists()
    assert read_queue_document(path)["jobs"][2]["label"] == "EDITED"


def test_a_durable_write_after_a_crash_supersedes_the_checkpoint_it_left(tmp_path):
    queue, path = _queue(tmp_path)
    journal = Journal(queue, path)
    journal.checkpoint()
    journal.close()  # a runner that died with its file whole
    assert checkpoint_path(path).exists()
    assert cli.main(["queue", "edit", str(path), "j1", "--label", "EDITED"]) == 0
    assert not checkpoint_path(path).exists()  # it would undo the edit after a later cut


def test_a_checkpoint_that_cannot_be_kept_is_said_in_the_summary(tmp_path):
    queue, path = _queue(tmp_path, n=1)
    (tmp_path / "night_logs" / "last-checkpoint.json").mkdir(parents=True)
    from spacrq.queue import run_queue
    result = run_queue(load_queue(path), path)
    assert result.ok
    assert any("last checkpoint could not be kept" in n for n in result.notes), result.notes


def test_a_job_added_to_a_large_running_queue_is_in_its_checkpoint_at_once(tmp_path, monkeypatch):
    """A large queue's runner writes its file only at checkpoints: the add's own durable
    write becomes the checkpoint, so a file damaged afterwards never loses the job."""
    monkeypatch.setenv("SPACRQ_QUEUE_DIRECT_MAX_JOBS", "0")  # journal mode, as above 500 jobs
    queue = Queue(name="night", max_consecutive_failures=0)
    queue.add(_gate("first", tmp_path, "go1"))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    ref = start_runner(path)
    try:
        wait_until(lambda: (tmp_path / "runs").exists(), what="the first job")
        assert cli.main(["queue", "add", str(path), "command", "--id", "late", "--cwd",
                         str(tmp_path), "--set", 'argv=["sh", "-c", "echo late >> runs; '
                         'while [ ! -e go2 ]; do sleep 0.02; done"]']) == 0
        assert checkpoint_path(path).stat().st_ino == path.stat().st_ino  # the add's file
        (tmp_path / "go1").write_text("")
        wait_until(lambda: "late" in (tmp_path / "runs").read_text().split(), what="late")
        os.kill(ref.pid, signal.SIGKILL)
        reap(ref.pid)
    finally:
        (tmp_path / "go1").write_text("")
        (tmp_path / "go2").write_text("")
    zeros = tmp_path / "zeros"  # damaged (not by a power cut: the add fsync'd it), replaced
    zeros.write_bytes(b"\0" * path.stat().st_size)
    os.replace(zeros, path)
    assert resume_queue(path).ok
    assert [(j.id, j.status) for j in load_queue(path).jobs] == [("first", "success"),
                                                                 ("late", "success")]
    assert (tmp_path / "runs").read_text().split() == ["first", "late"]


def test_a_damaged_journal_start_is_named_as_why_the_checkpoint_cannot_stand_in(tmp_path):
    path = _runs_then_cut(tmp_path)
    journal_path(path).write_bytes(b"garbage\n" + journal_path(path).read_bytes())
    with pytest.raises(QueueError, match="first lines of the journal .* are damaged"):
        load_queue(path)
