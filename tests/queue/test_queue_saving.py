"""Saving is never fatal, and an in-process runner that raises is a failed job, not a crash."""
from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest

from spacrq.queue import Job, Queue, load_queue, run_queue, save_queue
from spacrq.queue import store
from spacrq.queue.engine import INTERRUPTED
from spacrq.queue.store import logs_dir
from spacrq.runfiles import read_jsonl


def _cmd(jid, **kw):
    kw.setdefault("settings", {"argv": ["true"]})
    return Job(module="command", id=jid, **kw)


def _queue(tmp_path, n=3, **kw):
    queue = Queue(name="night", max_consecutive_failures=0, **kw)
    for i in range(n):
        queue.add(_cmd(f"j{i}"))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    return queue, path


def _fsync_failing(monkeypatch, when):
    """``os.fsync`` raising EIO wherever ``when(fd, failed so far)`` says; the descriptors
    it failed on."""
    real_fsync, failed = os.fsync, []

    def fsync(fd):
        if when(fd, failed):
            failed.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return failed


def _refuse_replace(monkeypatch, refused, code=errno.ENOSPC):
    """``os.replace`` onto a target for which ``refused(target)`` is true fails with ``code``
    (the step every replace of a file takes, durable or not)."""
    real = os.replace

    def replace(source, target, *args, **kw):
        if refused(Path(target)):
            raise OSError(code, os.strerror(code))
        return real(source, target, *args, **kw)

    monkeypatch.setattr(os, "replace", replace)


def _refuse_journal_lines(monkeypatch, path, refused=lambda: True):
    """Appends to ``path``'s journal fail with ENOSPC while ``refused()`` is true."""
    real_write, journal = os.write, str(store.journal_path(path))

    def write(fd, data):
        if refused():
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                target = ""
            if target == journal:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)


def ok_runner(hook=None):
    def run(job, settings_path, log_path):
        Path(log_path).write_text("working\n")
        if hook:
            hook(job)
        return 0
    return run


def test_a_folder_in_the_files_place_never_ends_the_night(tmp_path, capfd):
    marker = tmp_path / "notified"
    queue, path = _queue(tmp_path, notify_command=[
        sys.executable, "-c", "import os,sys; open(sys.argv[1],'w').write("
        "os.environ['SPACRQ_QUEUE_SUMMARY'] + '|' + os.environ['SPACRQ_QUEUE_SAVE_FAILED'])",
        str(tmp_path / "notified")])

    def replace_by_folder(job):
        if job.id == "j0":
            os.unlink(path)
            os.mkdir(path)

    result = run_queue(queue, path, runner=ok_runner(replace_by_folder))
    assert [j.status for j in queue.jobs] == ["success"] * 3  # the rest of the night ran
    assert "saving failed" in result.summary() and result.save_problem
    rescue = logs_dir(path) / "night.queue.json.unsaved.json"
    assert str(rescue) in result.save_problem
    assert [j["status"] for j in json.loads(rescue.read_text())["jobs"]] == ["success"] * 3
    summary, failed = marker.read_text().split("|")
    assert "saving failed" in summary and failed == "1"
    assert "could not write" in capfd.readouterr().err  # said in the runner's log


def test_fsyncs_that_fail_behind_the_runner_never_keep_the_last_save_from_the_file(tmp_path,
                                                                                  monkeypatch):
    """The journal's fsync runs on its own thread; when those fail (EIO), every failure is
    a save problem said like any other, and the file itself is still written at the end,
    durably, with every job's end: what a reader of the file alone sees is the truth."""
    import threading
    queue, path = _queue(tmp_path, n=4)
    failed = _fsync_failing(monkeypatch, lambda fd, failed: threading.current_thread().name
                            == "spacrq-journal-fsync")
    result = run_queue(queue, path, runner=ok_runner(), persistence="file")
    monkeypatch.undo()
    assert failed and result.ok and not result.save_problem
    assert any("Input/output error" in n for n in result.notes)
    on_disk = json.loads(path.read_text())  # (the file alone, no journal replayed)
    assert [j["status"] for j in on_disk["jobs"]] == ["success"] * 4


def test_queue_run_exits_1_when_the_file_could_not_be_saved_though_every_job_ran(tmp_path,
                                                                                capsys):
    """A morning script checks the exit code: a file that does not show what ran (here a
    folder was put in its place) is not a clean night, whatever the jobs did."""
    from spacrq.cli import main
    path = tmp_path / "night.queue.json"
    queue = Queue(name="night")
    queue.add(Job(module="command", id="swap", settings={"argv": [
        "sh", "-c", f"rm {path} && mkdir {path}"]}))
    queue.add(Job(module="command", id="after", settings={"argv": ["true"]}))
    save_queue(queue, path)
    assert main(["queue", "run", str(path)]) == 1
    out = capsys.readouterr()
    assert "saving failed" in out.out + out.err and "Traceback" not in out.err


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EIO])
def test_a_failing_disk_for_a_while_loses_nothing_once_it_clears(tmp_path, monkeypatch, capfd,
                                                                 code):
    """A full disk, a read-only remount (tests run as root, so chmod cannot make one), a
    permission change, an I/O error: each for two jobs, then the disk is fine again."""
    queue, path = _queue(tmp_path, n=4)
    full = {"on": False}
    reason = os.strerror(code)
    _refuse_replace(monkeypatch, lambda target: full["on"] and target == path, code)

    def disk(job):
        full["on"] = job.id in ("j1", "j2")

    result = run_queue(queue, path, runner=ok_runner(disk))
    assert result.ok and not result.save_problem
    assert [j.status for j in load_queue(path).jobs] == ["success"] * 4
    assert any(reason in n and "saved since" in n for n in result.notes)
    err = capfd.readouterr().err
    assert reason in err and "saved" in err


@pytest.mark.parametrize("persistence", ["file", "journal"])
def test_a_disk_full_to_the_end_leaves_the_final_state_in_the_journal(tmp_path, monkeypatch,
                                                                     persistence):
    """The file cannot be replaced from the second job to the end of the night (its journal,
    whose room was kept, still takes lines): the summary says every transition is in the
    journal — no rescue copy, which could not be written either — and the first command
    that opens the queue once there is room writes the file with every job's end."""
    queue, path = _queue(tmp_path, n=4)
    full = {"on": False}
    _refuse_replace(monkeypatch, lambda target: full["on"] and target.parent == path.parent)
    result = run_queue(queue, path, persistence=persistence, runner=ok_runner(
        lambda job: full.update(on=True)))
    monkeypatch.undo()
    assert [j.status for j in queue.jobs] == ["success"] * 4
    assert f"every transition since is in its journal {store.journal_path(path)}" \
        in result.save_problem and "nothing is lost" in result.save_problem
    assert not (logs_dir(path) / "night.queue.json.unsaved.json").exists()
    assert [j["status"] for j in json.loads(path.read_text())["jobs"]] != ["success"] * 4
    assert [j.status for j in store.open_queue(path).jobs] == ["success"] * 4
    assert [j["status"] for j in json.loads(path.read_text())["jobs"]] == ["success"] * 4


def test_a_journal_that_cannot_be_appended_falls_back_to_the_file(tmp_path, monkeypatch):
    queue, path = _queue(tmp_path, n=3)
    _refuse_journal_lines(monkeypatch, path)
    result = run_queue(queue, path, runner=ok_runner(), persistence="journal")
    monkeypatch.undo()
    assert result.ok and not result.save_problem
    assert [j.status for j in load_queue(path).jobs] == ["success"] * 3


def test_a_job_log_that_cannot_be_written_fails_that_job_only(tmp_path):
    queue, path = _queue(tmp_path, n=2)
    (logs_dir(path) / "01_j0.log").mkdir(parents=True)  # a folder where the log goes
    result = run_queue(queue, path)
    first, second = queue.jobs
    assert first.status == "failed" and "could not open its log" in first.error
    assert second.status == "success" and not result.ok


def test_an_exit_record_that_cannot_be_written_is_said_once_in_the_jobs_log(tmp_path, capfd):
    """A link (or a folder, a FIFO) where the queue's exit record goes: the jobs still run,
    each one's log says once — not at each line — that a runner dying meanwhile would
    leave its outcome unknown, the runner's log says it once for all of them, nothing is
    written through the link; the record put right, the next job is recorded again."""
    from spacrq.queue.direct import DirectStarter
    from spacrq.queue.supervise import EXIT_RECORD
    queue, path = _queue(tmp_path, n=3)
    logs = logs_dir(path)
    logs.mkdir()
    outside = tmp_path / "outside"
    outside.write_text("")
    (logs / EXIT_RECORD).symlink_to(outside)
    queue.jobs[1].settings = {"argv": ["sh", "-c", f"rm {logs / EXIT_RECORD}"]}
    result = run_queue(queue, path, supervisor=DirectStarter(keeper=os.getppid()))
    assert result.ok and [j.status for j in load_queue(path).jobs] == ["success"] * 3
    assert outside.read_text() == ""
    for job in load_queue(path).jobs[:2]:
        assert Path(job.log_path).read_text().count("its exit record") == 1
    assert "its exit record" not in Path(load_queue(path).jobs[2].log_path).read_text()
    err = capfd.readouterr().err
    assert err.count(EXIT_RECORD) == 1, err
    lines = read_jsonl(logs / EXIT_RECORD)  # the third job's, once the link was gone
    assert {ln.get("job") for ln in lines} == {queue.jobs[2].id}
    assert [ln["exit_code"] for ln in lines if "exit_code" in ln] == [0]


def test_a_stamp_that_cannot_be_written_is_a_note(tmp_path):
    queue, path = _queue(tmp_path, n=1)
    Path(f"{path}.run_status.json").mkdir()
    result = run_queue(queue, path, runner=ok_runner())
    assert result.ok and any("could not stamp" in n for n in result.notes)


def test_a_runner_callable_that_raises_fails_that_job_and_the_queue_goes_on(tmp_path):
    queue, path = _queue(tmp_path, n=2)

    def runner(job, settings_path, log_path):
        if job.id == "j0":
            raise ValueError("the plate map is missing column 'well'")
        return 0

    result = run_queue(queue, path, runner=runner)
    first, second = load_queue(path).jobs
    assert first.status == "failed" and first.exit_code == 1
    assert first.failure_kind == "ValueError" and "missing column" in first.error
    log = Path(first.log_path).read_text()
    assert "Traceback" in log and "ValueError: the plate map" in log
    assert second.status == "success" and not result.ok


def test_ctrl_c_in_process_fails_the_job_leaves_the_rest_not_run_and_saves(tmp_path):
    queue, path = _queue(tmp_path, n=3)

    def runner(job, settings_path, log_path):
        if job.id == "j1":
            raise KeyboardInterrupt
        return 0

    with pytest.raises(KeyboardInterrupt):
        run_queue(queue, path, runner=runner)
    on_disk = load_queue(path)
    assert [j.status for j in on_disk.jobs] == ["success", "failed", "not_run"]
    assert on_disk.jobs[1].error == INTERRUPTED
    assert on_disk.stopped_reason.startswith(INTERRUPTED)


def test_a_file_where_the_logs_folder_goes_is_one_sentence_before_anything_runs(tmp_path):
    from spacrq.queue import QueueError
    queue, path = _queue(tmp_path, n=1)
    logs_dir(path).write_text("not a folder")
    with pytest.raises(QueueError, match="could not create the logs folder"):
        run_queue(queue, path, runner=ok_runner())
    assert load_queue(path).jobs[0].status == "pending"


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_journal_removed_or_replaced_mid_run_loses_nothing(tmp_path, how):
    """Somebody cleans the logs folder while a large queue runs: the transitions written
    to the old journal since the last checkpoint are in the runner's memory; the file is
    written in full at the next commit and a new journal started, and the summary says so."""
    from spacrq.queue.persist import QueueWriter
    from spacrq.queue.store import journal_path

    queue, path = _queue(tmp_path, n=4)
    writer = QueueWriter(queue, path, mode="journal")
    try:
        writer.start()
        for job in queue.jobs[:2]:
            job.status = "success"
            writer.touch(job, ["status"])
            writer.commit()
        assert [j.status for j in load_queue(path).jobs][:2] == ["success", "success"]
        journal = journal_path(path)
        journal.unlink()
        if how == "replaced":
            journal.write_text("")
        writer.prepare()  # (the runner's look once a job was sent)
        queue.jobs[2].status = "success"
        writer.touch(queue.jobs[2], ["status"])
        writer.commit()
        on_disk = json.loads(path.read_text())  # the file alone, no journal folded in
        assert [j["status"] for j in on_disk["jobs"]] == ["success"] * 3 + ["pending"]
        assert any("removed or replaced" in note for note in writer.notes)
        queue.jobs[3].status = "success"
        writer.touch(queue.jobs[3], ["status"])  # the new journal takes the next line
        assert [j.status for j in load_queue(path).jobs] == ["success"] * 4
    finally:
        writer.close()


def test_a_journal_that_cannot_be_started_again_falls_back_to_the_file(tmp_path, monkeypatch):
    """The journal was removed and a new one cannot be made (a full disk): the note says
    what happens instead — the whole file at every transition — and nothing is lost."""
    from spacrq.queue import persist
    from spacrq.queue.store import journal_path

    queue, path = _queue(tmp_path, n=2)
    writer = persist.QueueWriter(queue, path, mode="journal")
    try:
        writer.start()
        journal_path(path).unlink()

        def no_space(*args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr(persist, "Journal", no_space)
        writer.prepare()
        assert writer.journal is None
        assert "written in full at every transition instead" in writer.notes[-1]
        queue.jobs[0].status = "success"
        writer.touch(queue.jobs[0], ["status"])
        writer.commit()
        assert [j["status"] for j in json.loads(path.read_text())["jobs"]] == ["success",
                                                                                "pending"]
    finally:
        writer.close()


def test_a_run_removes_what_a_killed_runner_left_half_written_and_nothing_else(tmp_path):
    """Temporary files of killed writes stayed for ever beside the queue and its logs."""
    import os
    import time
    from spacrq.queue import Job, Queue, load_queue, run_queue, save_queue
    queue = Queue(name="night", max_consecutive_failures=0)
    queue.add(Job(module="command", id="a", settings={"argv": ["true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    logs = tmp_path / "night_logs"
    logs.mkdir()
    left = [tmp_path / ".night.queue.json.k1llx9ab.tmp", tmp_path / ".night.queue.json.runner.tmp",
            logs / ".runner.json.q2w3e4r5.tmp", logs / ".morning-report.html.a1b2c3d4.tmp"]
    for file in left:
        file.write_text("{half")
    old = time.time() - 3600
    for file in left[2:]:
        os.utime(file, (old, old))
    fresh = logs / ".morning-report.html.z9y8x7w6.tmp"  # (a night-report being written now)
    fresh.write_text("<html")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    link = tmp_path / ".night.queue.json.l1nk0000.tmp"
    link.symlink_to(outside)
    other = tmp_path / ".other.queue.json.k1llx9ab.tmp"  # another queue's: not this one's
    other.write_text("{half")
    keep = [tmp_path / ".night.queue.json.b.queue.json.zzzz9999.tmp",  # queue 'night.queue.json.b'
            tmp_path / ".night.queue.json.run_status.json.abcd1234.tmp",  # the ledger's
            tmp_path / ".night.queue.json.mine.tmp"]  # named so by hand
    for file in keep:
        file.write_text("mine")
    run_queue(load_queue(path), path)
    assert [f for f in left if f.exists()] == []
    assert fresh.exists() and other.exists() and link.is_symlink() and outside.read_text() == "keep"
    assert all(f.read_text() == "mine" for f in keep)


def test_a_linked_logs_folder_is_refused_before_anything_is_written_through_it(tmp_path,
                                                                              capsys):
    """spacrq never writes through a symbolic link: a queue whose logs folder is one is
    refused in one sentence by the runner, ``queue run`` (detached or not) and ``queue
    add``, and nothing lands (or is tidied away) where the link points."""
    import os
    import time
    from spacrq.cli import main
    from spacrq.queue import Job, Queue, QueueError, load_queue, run_queue, save_queue
    from spacrq.queue.runner import start_runner
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    old_temp = elsewhere / ".runner.json.keepme00.tmp"
    old_temp.write_text("x")
    old = time.time() - 7200
    os.utime(old_temp, (old, old))
    (tmp_path / "night_logs").symlink_to(elsewhere)
    queue = Queue(name="night", max_consecutive_failures=0)
    queue.add(Job(module="command", id="a", settings={"argv": ["true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    with pytest.raises(QueueError, match="is a symbolic link; spacrq does not write through"):
        run_queue(load_queue(path), path)
    with pytest.raises(QueueError, match="replace it with a real folder"):
        start_runner(path)
    for argv in (["queue", "run", str(path)], ["queue", "run", "--detach", str(path)],
                 ["queue", "add", str(path), "command", "--", "true"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "symbolic link" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in elsewhere.iterdir()) == [old_temp.name]
    assert load_queue(path).jobs[0].status == "pending"


def test_an_fsync_that_fails_as_a_job_starts_is_a_save_problem_and_saved_again(tmp_path,
                                                                              monkeypatch):
    """The journal's fsync is made as each job starts (see QueueWriter.commit); one that
    fails (EIO) is said like any failed save, the run goes on, and the file is written
    durably at the next chance, so nothing is lost."""
    queue, path = _queue(tmp_path, n=3)
    journal = str(store.journal_path(path))

    def first_of_the_journal(fd, failed):
        try:
            return not failed and os.readlink(f"/proc/self/fd/{fd}") == journal
        except OSError:
            return False

    failed = _fsync_failing(monkeypatch, first_of_the_journal)
    result = run_queue(queue, path, runner=ok_runner(), persistence="file")
    monkeypatch.undo()
    assert failed and result.ok and not result.save_problem
    assert any("Input/output error" in n and "saved since" in n for n in result.notes)
    assert [j.status for j in load_queue(path).jobs] == ["success"] * 3


@pytest.mark.parametrize("earlier, named", [
    ("crashed", "gone"), ("finished", "gone"), ("running", "gone"),
    # (a run's last state names a process that may live on a moment, or another's now: a
    # "running" record naming a live process with its start time is that runner's own)
    ("crashed", "alive"), ("finished", "alive"), ("stopped", "alive")])
def test_a_runner_that_could_not_replace_an_earlier_runs_record_is_reported_running(
        tmp_path, capsys, earlier, named):
    """A resume on a full disk: the runner holds the queue but its runner.json could not be
    written, so the file still holds the run before it — "crashed", "finished", or "running"
    under a process long gone. Status said that run's state (a crash, while a runner ran);
    the kernel's lock says who runs the queue, and the record's own state is not believed."""
    from waiting import gone_pid, runner_lock_held  # (tests/ is on the path)
    from spacrq import cli
    from spacrq.queue.runner import runner_state
    queue, path = _queue(tmp_path, n=1)
    logs = logs_dir(path)
    logs.mkdir(exist_ok=True)
    # (the earlier runner's pid: gone, or still alive — it let its lock go with its last
    # write and has not exited yet, or the pid is another process's now)
    pid = gone_pid() if named == "gone" else os.getpid()
    (logs / "runner.json").write_text(json.dumps({
        "pid": pid, "queue": str(path), "state": earlier,
        "current_job": None, "started_at": "2026-12-01T01:00:00+00:00"}))
    with runner_lock_held(logs) as holder:
        state = runner_state(path)
        assert (state["state"], state["alive"], state["pid"]) == ("running", True, holder.pid)
        assert f"still describes an earlier run ({earlier})" in state["problem"]
        assert cli.main(["queue", "status", str(path)]) == 0
        said = capsys.readouterr().out.splitlines()[0]
        assert f"; runner running (process {holder.pid}, alive); its record " in said
        assert said.endswith(f"still describes an earlier run ({earlier}): it could not be "
                             "rewritten yet (a full disk?); it is rewritten at the runner's "
                             "next heartbeat")
        (logs / "runner.json").write_text("")  # (an empty record: said as such)
        assert runner_state(path)["problem"].startswith(
            f"its record {logs / 'runner.json'} cannot be read (it is empty or missing)")


def test_a_record_that_keeps_failing_is_said_once_and_its_return_with_the_count(
        tmp_path, capfd, monkeypatch):
    """A full disk fails the exit record's writes at every job (three a job): the runner's
    log said the same line each time, drowning everything else in it. Now once, and when a
    write succeeds again, how many failed meanwhile; another file, or another reason, is
    said on its own."""
    from spacrq.queue import supervise
    monkeypatch.setattr(supervise, "_FAILING", {})  # (this process's own, left as it was)
    record = tmp_path / "gone" / "exits.jsonl"  # (its folder removed: every open fails)
    log = tmp_path / "gone" / "01_a.log"
    for n in range(5):
        supervise._record(str(record), {"job": "a", "key": str(n)}, False)
    supervise._note(str(log), "# a line\n")
    for n in range(2, 40):  # (every job's log: one line for them all)
        supervise._note(str(log.with_name(f"{n:02d}_a.log")), "# a line\n")
    err = capfd.readouterr().err
    assert err.count(f"could not write {record}") == 1
    assert err.count("could not write") == 2
    assert f"could not write {log}: " in err and f"nor any other job log in {log.parent}" in err
    record.parent.mkdir()
    supervise._record(str(record), {"job": "a", "key": "5"}, False)
    supervise._record(str(record), {"job": "a", "key": "6"}, False)
    err = capfd.readouterr().err
    assert err.count(f"{record} is written again; 5 write(s) failed since ") == 1
    assert "No such file or directory" in err and err.count("\n") == 1
    supervise._note(str(log.with_name("40_a.log")), "# a line\n")
    assert f"the job logs in {log.parent} are written again; 39 write(s) failed since " \
        in capfd.readouterr().err
    assert [line["key"] for line in read_jsonl(record)] == ["5", "6"]
    record.unlink()
    record.mkdir()  # (another reason: said again)
    supervise._record(str(record), {"job": "a", "key": "7"}, False)
    assert f"could not write {record}: [Errno 21] Is a directory" in capfd.readouterr().err


def _nowhere_to_save(monkeypatch, path, full):
    """A disk where no room could be kept: while ``full["on"]``, neither the queue file nor
    a rescue copy can be replaced and the journal takes no line (the jobs' own files and
    control.json still can: the jobs go on, and an abort reaches the runner)."""
    import threading
    from spacrq.queue import engine
    monkeypatch.setattr(engine, "SAVE_RETRY_SECONDS", (0.01, 0.02))
    real_replace = os.replace
    files = {path, logs_dir(path) / f"{path.name}.unsaved.json"}

    def replace(source, target, *args, **kw):
        if full["on"] and Path(target) in files \
                and threading.current_thread().name != full.get("through"):
            full["tries"] = full.get("tries", 0) + 1
            if full.get("hook"):
                full["hook"](full["tries"])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(source, target, *args, **kw)

    monkeypatch.setattr(os, "replace", replace)
    _refuse_journal_lines(monkeypatch, path, lambda: full["on"])


def test_a_final_state_that_can_be_saved_nowhere_is_tried_again_until_it_can(
        tmp_path, monkeypatch, capfd):
    """The detached runner's way: it does not exit with the night's ends in memory only (a
    resume would run them all again) but keeps trying, and once the disk has room the file
    shows every job's end, and the runner says how many tries it took."""
    queue, path = _queue(tmp_path, n=4)
    full = {"on": False}
    full["hook"] = lambda tries: full.update(on=tries < 12)  # room again after 12 failed tries
    _nowhere_to_save(monkeypatch, path, full)
    result = run_queue(queue, path, wait_to_save=True, runner=ok_runner(
        lambda job: full.update(on=True) if job.id == "j1" else None))
    monkeypatch.undo()
    assert [j.status for j in queue.jobs] == ["success"] * 4, [j.error for j in queue.jobs]
    assert not result.save_problem and full["tries"] >= 12
    assert [j["status"] for j in json.loads(path.read_text())["jobs"]] == ["success"] * 4
    err = capfd.readouterr().err
    assert "the runner keeps trying" in err and "the final state was saved after " in err
    assert any("everything was saved since" in n for n in result.notes)


def test_a_runner_waiting_to_save_gives_up_when_asked_to_abort_from_then_on(
        tmp_path, monkeypatch, capfd):
    """An abort asked while it waits (the operator gave up on the disk) ends the wait: the
    summary says the state is in it only. An abort asked before — the night was aborted —
    does not: the ends recorded so far are still worth saving."""
    from spacrq.runfiles import ask
    queue, path = _queue(tmp_path, n=3)
    ask(logs_dir(path), stop="abort")  # (asked before the queue ends: the night is aborted)
    full = {"on": True}
    full["hook"] = lambda tries: ask(logs_dir(path), stop="abort") if tries == 8 else None
    from spacrq.queue.control import Control
    control = Control(logs_dir(path))
    _nowhere_to_save(monkeypatch, path, full)
    result = run_queue(queue, path, wait_to_save=True, runner=ok_runner(), control=control)
    monkeypatch.undo()
    assert full["tries"] >= 8 and result.save_problem  # waited, past the first abort
    assert "the final state is only in this summary" in result.save_problem
    assert "asked to abort, so the final state was not saved" in capfd.readouterr().err


def test_a_signalled_runner_does_not_wait_to_save(tmp_path, monkeypatch, capfd):
    """A shutdown's SIGTERM: no time to wait; the runner ends at once, saying where it stands."""
    from spacrq.queue.control import ABORT, Control
    queue, path = _queue(tmp_path, n=2)
    control = Control(logs_dir(path))
    full = {"on": True}
    _nowhere_to_save(monkeypatch, path, full)

    def signalled(job):
        control.signalled = ABORT

    result = run_queue(queue, path, wait_to_save=True, control=control,
                       runner=ok_runner(signalled))
    monkeypatch.undo()
    assert result.save_problem and "only in this summary" in result.save_problem
    assert "keeps trying" not in capfd.readouterr().err


@pytest.mark.parametrize("code, fix", [(errno.ENOSPC, "free some space on its disk"),
                                       (errno.EROFS, "its disk is mounted read-only"),
                                       (errno.EACCES, "check that the folder exists and is")])
def test_an_add_the_disk_refuses_says_what_to_do_about_it(tmp_path, monkeypatch, capsys,
                                                          code, fix):
    """A full disk said "check that the folder exists and is writable": it does, and is."""
    from spacrq.cli import main
    path = tmp_path / "night.queue.json"
    assert main(["queue", "add", str(path), "command", "--id", "a", "--", "true"]) == 0
    _refuse_replace(monkeypatch, lambda target: target == path, code)
    assert main(["queue", "add", str(path), "command", "--id", "b", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert f"({os.strerror(code)}); nothing was changed: {fix}" in err and err.count("\n") == 1


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="the kernel's lock table is Linux's")
def test_a_runner_that_could_not_write_its_pid_anywhere_is_still_named(tmp_path, capsys):
    """A runner started on a full disk writes neither its record nor its pid into its lock
    file: status said "process unknown", and an abort could not be sent as a signal. The
    kernel's lock table names the holder."""
    from spacrq.cli import main
    from spacrq.queue.runner import runner_state
    from waiting import runner_lock_held  # (tests/ is on the path)
    queue, path = _queue(tmp_path, n=1)
    logs = logs_dir(path)
    logs.mkdir(exist_ok=True)
    with runner_lock_held(logs) as holder:
        (logs / "runner.lock").write_bytes(b"")  # (what the full disk left: the lock, no pid)
        state = runner_state(path)
        assert (state["state"], state["alive"], state["pid"]) == ("running", True, holder.pid)
        assert main(["queue", "status", str(path)]) == 0
        assert f"runner running (process {holder.pid}, alive)" in capsys.readouterr().out


def test_a_file_never_written_by_its_runner_is_with_its_journal_the_state(tmp_path,
                                                                          monkeypatch):
    """A disk that filled before the night: the runner's very first write of the file failed,
    its journal took every line. The file as it was read and the journal hold it all; the
    runner took it for state saved nowhere, waited, and warned of reruns that never came."""
    queue, path = _queue(tmp_path, n=3)
    _refuse_replace(monkeypatch, lambda target: target == path)
    result = run_queue(queue, path, runner=ok_runner(), loaded_key=store.file_key(path))
    monkeypatch.undo()
    assert "every transition since is in its journal" in result.save_problem
    assert [j.status for j in store.open_queue(path).jobs] == ["success"] * 3


def _operator_while_saved_nowhere(monkeypatch, queue, path, act):
    """Run ``queue``, its disk refusing the file and the journal from the end of its first
    job until ``act()`` — another process's edit or add, whose writes get through — was
    done during the runner's wait to save; the run's result."""
    import threading
    full, waiting, done = {"on": False}, threading.Event(), threading.Event()

    def operator():
        waiting.wait(60)
        try:
            act()
        finally:
            done.set()

    def tried(tries):
        if tries == 4:
            waiting.set()
        if done.is_set() and tries >= 8:
            full["on"] = False  # (room again)

    full["hook"], full["through"] = tried, "operator"
    _nowhere_to_save(monkeypatch, path, full)
    other = threading.Thread(target=operator, name="operator")
    other.start()
    try:
        result = run_queue(queue, path, wait_to_save=True, runner=ok_runner(
            lambda job: full.update(on=True) if job.id == "j0" else None))
    finally:
        waiting.set()
        other.join()
    monkeypatch.undo()
    return result


def test_a_job_added_while_the_runner_waits_to_save_runs_once_the_state_is_saved(
        tmp_path, monkeypatch, capfd):
    """The take-in of a job added during the wait wrote nothing: the runner said "saved;
    nothing was lost", ran the new job, and a disk full again then lost every end. Now the
    state is written first; the new job runs after."""
    from spacrq.queue.store import edit_queue
    queue, path = _queue(tmp_path, n=2)
    result = _operator_while_saved_nowhere(  # (another process's `queue add`)
        monkeypatch, queue, path, lambda: edit_queue(path, lambda q: q.add(_cmd("late"))))
    assert [j.id for j in queue.jobs] == ["j0", "j1", "late"] and result.ok
    assert [j["status"] for j in json.loads(path.read_text())["jobs"]] == ["success"] * 3
    assert "nothing was lost; the 1 job(s) added meanwhile run now" in capfd.readouterr().err


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="the kernel's lock table is Linux's")
def test_a_second_runner_is_refused_naming_a_holder_that_wrote_no_pid(tmp_path):
    from spacrq.queue import QueueError
    from spacrq.queue.locks import RunnerLock
    from waiting import runner_lock_held  # (tests/ is on the path)
    _, path = _queue(tmp_path, n=1)
    logs = logs_dir(path)
    logs.mkdir(exist_ok=True)
    with runner_lock_held(logs) as holder:
        (logs / "runner.lock").write_bytes(b"")  # (a full disk: the lock, no pid)
        with pytest.raises(QueueError, match=f"already being run by process {holder.pid};"):
            RunnerLock(logs, path).acquire()



def test_an_edit_while_the_runners_state_is_saved_nowhere_is_refused_not_lost(
        tmp_path, monkeypatch, capfd):
    """While the disk refuses the runner's file and journal, the file still shows as waiting
    a job that already ran: an edit of it was accepted ("changed") and then never applied.
    Now it is refused in a sentence while the runner holds a state saved nowhere; adding a
    job still works, and once the state is saved the flag is down again."""
    from spacrq.queue.edits import EditRefused, add_job, edit_job
    from spacrq.queue.locks import runner_unsaved
    queue, path = _queue(tmp_path, n=3)
    seen: dict = {}

    def edit_then_add():
        seen["flag"] = runner_unsaved(logs_dir(path))
        try:
            edit_job(path, "j1", {"label": "too late"})
        except EditRefused as exc:
            seen["refused"] = str(exc)
        seen["added"] = add_job(path, _cmd("late"))[0].id == "late"

    result = _operator_while_saved_nowhere(monkeypatch, queue, path, edit_then_add)
    assert seen["flag"] is True and seen["added"] is True
    assert "could not save its state lately" in seen["refused"], seen
    assert seen["refused"].startswith("Not changed: ") and seen["refused"].count(". ") == 0
    saved = json.loads(path.read_text())["jobs"]
    assert [(j["id"], j["status"]) for j in saved] == [
        ("j0", "success"), ("j1", "success"), ("j2", "success"), ("late", "success")]
    assert saved[1]["label"] != "too late" and result.ok
    assert not runner_unsaved(logs_dir(path))  # (lowered once saved, and gone with the run)
    assert "was not applied" not in capfd.readouterr().err


def test_an_edit_that_reached_a_job_already_run_is_said_not_dropped(tmp_path, monkeypatch,
                                                                    capfd):
    """Where neither the flag can be held (its file could not be made) nor a copy of the state
    kept in memory (no private folder there), an edit made to the file while it lagged
    behind the runner still lands in the file; the runner keeps the job as it ran — and
    says so in its log and the morning summary, never silently."""
    from spacrq.queue import locks, memcopy
    from spacrq.queue.edits import edit_job
    monkeypatch.setattr(locks.UnsavedFlag, "set", lambda self, unsaved: None)
    monkeypatch.setattr(memcopy, "keep", lambda queue, path, seen: "")
    queue, path = _queue(tmp_path, n=3)
    seen: dict = {}

    def edit():
        seen["job"] = edit_job(path, "j1", {"label": "too late"})

    result = _operator_while_saved_nowhere(monkeypatch, queue, path, edit)
    assert seen["job"].label == "too late"  # (accepted: the file showed j1 waiting)
    saved = json.loads(path.read_text())["jobs"]
    assert (saved[1]["status"], saved[1]["label"]) == ("success", queue.jobs[1].label)
    assert saved[1]["label"] != "too late"
    note = [n for n in result.notes if "job j1 was edited" in n]
    assert note and "the edit was not applied: duplicate the job" in note[0]
    assert "job j1 was edited" in capfd.readouterr().err


def test_a_runner_killed_while_its_state_is_saved_nowhere_leaves_it_in_memory(
        tmp_path, monkeypatch, capfd):
    """A disk that takes nothing — not the file, not the journal, not a rescue copy — and a
    runner that ends while it waits (an abort here; the OOM killer or a kill -9 alike): every
    job that ended since ran again on resume. Its state is kept in memory meanwhile, every
    reader sees it, and the resume runs nothing again."""
    from spacrq.queue.control import Control
    from spacrq.queue.memcopy import exists
    from spacrq.queue.resume import resume_queue
    from spacrq.runfiles import ask
    queue, path = _queue(tmp_path, n=3)
    full = {"on": False}
    full["hook"] = lambda tries: ask(logs_dir(path), stop="abort") if tries == 8 else None
    _nowhere_to_save(monkeypatch, path, full)
    ran: list[str] = []
    result = run_queue(queue, path, wait_to_save=True, control=Control(logs_dir(path)),
                       loaded_key=store.file_key(path), runner=ok_runner(
                           lambda job: ran.append(job.id) or (full.update(on=True)
                                                              if job.id == "j0" else None)))
    monkeypatch.undo()
    assert ran == ["j0", "j1", "j2"] and "the final state is kept as " in result.save_problem
    assert [j["status"] for j in json.loads(path.read_text())["jobs"]][1:] == ["pending"] * 2
    assert "so the final state was not saved on disk: it is kept as " in capfd.readouterr().err
    assert [j.status for j in load_queue(path).jobs] == ["success"] * 3  # (status, the pane)
    again = resume_queue(path, runner=ok_runner(lambda job: ran.append(job.id)))
    assert ran == ["j0", "j1", "j2"] and again.ok
    assert [j["status"] for j in json.loads(path.read_text())["jobs"]] == ["success"] * 3
    assert not exists(path)  # (in the file now)
