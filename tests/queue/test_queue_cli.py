"""``spacrq queue …``: bad input is one sentence and exit 2, and nothing is overwritten."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from spacrq.cli import main
from spacrq.queue import load_queue
from spacrq.queue.runner import RUNNER_FILE, logs_dir
from spacrq.runfiles import write_json
from waiting import reap, wait_until  # tests/waiting.py


@pytest.fixture
def qfile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "night.queue.json"
    assert main(["queue", "add", str(path), "command", "--id", "first", "--", "echo", "hi"]) == 0
    return path


def _bad(capsys, argv, needle):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert needle in err and "Traceback" not in err
    assert err.count("\n") == 1, err  # one sentence
    return err


def test_a_settings_file_that_is_a_pipe_is_refused_at_once_by_add_and_run(qfile, tmp_path,
                                                                         capsys):
    """A FIFO in place of a settings file hung every command (even SIGTERM could not end it)."""
    os.mkfifo(tmp_path / "s.json")
    _bad(capsys, ["queue", "add", str(qfile), "python", "--settings", "s.json"],
         "is not a regular file")
    queue = load_queue(qfile)
    queue.jobs[0].settings = str(tmp_path / "s.json")
    queue.jobs[0].module = "python"
    from spacrq.queue import save_queue
    save_queue(queue, qfile)
    assert main(["queue", "run", str(qfile)]) == 2
    assert "is not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["folder", "symlink"])
def test_a_lock_file_with_something_in_its_place_is_named_as_the_culprit(qfile, tmp_path, capsys,
                                                                         kind):
    """The sentence blamed the logs folder ("Is a directory") for a folder at queue.lock."""
    lock = logs_dir(qfile) / "queue.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.unlink(missing_ok=True)
    if kind == "folder":
        lock.mkdir()
    else:
        lock.symlink_to(tmp_path / "elsewhere")
    before = qfile.read_bytes()
    err = _bad(capsys, ["queue", "add", str(qfile), "command", "--", "true"],
               f"could not open the queue's lock file {lock}")
    assert ("a folder is in its place" if kind == "folder" else "a symbolic link") in err
    assert qfile.read_bytes() == before and not (tmp_path / "elsewhere").exists()


def test_add_creates_the_file_and_records_the_job(qfile, tmp_path):
    queue = load_queue(qfile)
    job = queue.jobs[0]
    assert (job.id, job.module, job.settings) == ("first", "command", {"argv": ["echo", "hi"]})
    assert job.cwd == str(tmp_path) and queue.name == "night"
    assert main(["queue", "add", str(qfile), "command", "--after", "first", "--timeout", "5",
                 "--retries", "2", "--label", "second one", "--env", "A=1", "--",
                 "sh", "-c", "exit 0"]) == 0
    job = load_queue(qfile).jobs[1]
    assert (job.id, job.depends_on, job.timeout, job.retries, job.label, job.env) == \
        ("command-1", ["first"], 5.0, 2, "second one", {"A": "1"})


@pytest.mark.parametrize("extra,needle", [
    (["maks"], "unknown module 'maks'"),
    (["command", "--id", "../x", "--", "true"], "job ids become log file names"),
    (["command", "--id", "first", "--", "true"], "already in this queue"),
    (["command", "--after", "ghost", "--", "true"], "'ghost', which is not a job"),
    (["command", "--set", "nokey=1", "--", "true"], "has no setting 'nokey'"),
    (["command", "--set", "oops", "--", "true"], "is not key=value"),
    (["command", "--timeout", "-3", "--", "true"], "cannot be negative"),
    (["command", "--retries", "x", "--", "true"], "must be a number"),
    (["command", "--env", "NOEQUALS", "--", "true"], "is not NAME=value"),
    (["python", "--", "true"], "only for the command module"),
    (["command", "--settings", "s.csv", "--", "true"], "give one of them"),
    (["python", "--settings", "missing.csv"], "settings file not found"),
    (["command", "--", "no-such-program-xyz"], "is not on PATH"),
])
def test_add_bad_input_is_one_sentence_and_the_file_is_untouched(qfile, capsys, extra, needle):
    before = qfile.read_bytes()
    _bad(capsys, ["queue", "add", str(qfile), *extra], needle)
    assert qfile.read_bytes() == before


@pytest.mark.parametrize("extra,needle", [
    (["maks"], "unknown module 'maks'"),
    (["command", "--after", "ghost", "--", "true"], "leave the dependency out"),
    (["command", "--", "no-such-program-xyz"], "is not on PATH"),
])
def test_a_refused_add_to_a_new_queue_leaves_no_file_behind(tmp_path, capsys, extra, needle):
    """'No file is changed': a refused add made the queue's logs folder and its lock."""
    _bad(capsys, ["queue", "add", str(tmp_path / "y.queue.json"), *extra], needle)
    assert list(tmp_path.iterdir()) == []


def test_every_unreadable_job_entry_is_named_at_once(tmp_path, capsys):
    """A hand edit with three bad entries: all three, each named (by its place when it has
    no id), not one per try."""
    path = tmp_path / "hand.queue.json"
    path.write_text(json.dumps({"spacr_queue": 1, "jobs": [
        {"id": "ok", "module": "command", "settings": {"argv": ["true"]}},
        {"module": "command", "timeout": "soon"},
        {"id": "b", "module": "command", "retries": "twice"},
        ["not", "a", "job"],
    ]}))
    assert main(["queue", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "3 job entries cannot be read; fix each of them:" in err
    assert "job entry 2 has \"timeout\"" in err and "job 'b' has a \"retries\"" in err
    assert "job entry 4 is a list, not an object" in err and "Traceback" not in err


@pytest.mark.parametrize("body,extra,needle", [
    ('{"spacr_queue":1,"jobs":[{"id":"a","module":"command","settings":{"argv":["true"]}}]}',
     ["--id", "a", "--", "true"], "already in this queue"),
    ('{"spacr_queue":1,"jobs":[{"id":"a","module":"command","settings":{"argv":["true"]}}]}',
     ["--after", "zz", "--", "true"], "'zz', which is not a job"),
    ('{"spacr_queue":1,"jobs":[]}', ["--id", "b", "--after", "b", "--", "true"], "itself"),
    ("[]", ["--", "true"], "must hold an object"),
    ('{"spacr_queue": 99, "jobs": []}', ["--", "true"], "format 99"),
    ("{", ["--", "true"], "not valid JSON"),
])
def test_a_refused_add_to_an_existing_queue_changes_no_file(tmp_path, capsys, body, extra,
                                                           needle):
    path = tmp_path / "e.queue.json"
    path.write_text(body)
    _bad(capsys, ["queue", "add", str(path), "command", *extra], needle)
    assert [p.name for p in tmp_path.iterdir()] == ["e.queue.json"] and path.read_text() == body


def test_a_refused_run_with_notify_changes_no_file(tmp_path, capsys):
    path = tmp_path / "n.queue.json"
    body = json.dumps({"spacr_queue": 1, "jobs": [{"id": "a", "module": "maks"}]})
    path.write_text(body)
    for argv in (["queue", "run", "--notify", "echo", str(path)],
                 ["queue", "run", "--detach", "--notify", "echo", str(path)]):
        assert main(argv) == 2 and "refusing to start" in capsys.readouterr().err
    assert path.read_text() == body and [p.name for p in tmp_path.iterdir()] == ["n.queue.json"]


def test_a_refused_run_leaves_no_logs_folder_behind(tmp_path, capsys):
    path = tmp_path / "hand.queue.json"
    path.write_text(json.dumps({"spacr_queue": 1, "jobs": [{"id": "a", "module": "maks"}]}))
    for argv in (["queue", "run", str(path)], ["queue", "resume", str(path)],
                 ["queue", "run", str(path), "--detach"]):
        assert main(argv) == 2 and "refusing to start" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["hand.queue.json"]


def test_add_into_a_missing_folder(tmp_path, capsys):
    _bad(capsys, ["queue", "add", str(tmp_path / "no" / "q.queue.json"), "command", "--", "true"],
         "does not exist")


@pytest.mark.parametrize("action", ["validate", "plan", "run", "status", "stop", "resume",
                                    "restart-failed"])
def test_every_command_refuses_a_malformed_file_without_touching_it(tmp_path, capsys, action):
    path = tmp_path / "bad.queue.json"
    path.write_text('{"jobs": [')
    _bad(capsys, ["queue", action, str(path)], "not valid JSON")
    assert path.read_text() == '{"jobs": ['


def test_starting_a_queue_while_its_runner_is_alive_is_refused(qfile, capsys):
    me = psutil.Process()
    write_json(logs_dir(qfile) / RUNNER_FILE, {"pid": me.pid, "started": me.create_time(),
                                               "state": "running"})
    _bad(capsys, ["queue", "run", str(qfile), "--detach"], f"process {me.pid}")


def test_validate_plan_and_status(qfile, capsys):
    assert main(["queue", "validate", str(qfile)]) == 0
    assert "no problems found" in capsys.readouterr().out
    assert main(["queue", "plan", str(qfile)]) == 0
    assert "runs echo hi" in capsys.readouterr().out
    assert main(["queue", "status", str(qfile)]) == 0
    out = capsys.readouterr().out
    assert "1 pending" in out and "no runner has run it yet" in out
    assert main(["queue", "status", str(qfile), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["schema"], doc["kind"]) == (1, "queue-status")
    assert doc["counts"]["pending"] == 1 and doc["runner"] is None


def test_validate_exits_1_listing_every_error(tmp_path, capsys):
    path = tmp_path / "q.queue.json"
    path.write_text(json.dumps({"spacr_queue": 1, "jobs": [
        {"id": "a", "module": "maks"}, {"id": "b", "module": "command", "depends_on": ["z"]}]}))
    assert main(["queue", "validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "3 error(s)" in out and "argv must be" in out and "unknown module 'maks'" in out and "'z'" in out


def test_run_then_restart_failed(qfile, capsys, tmp_path):
    flag = tmp_path / "fixed"
    main(["queue", "add", str(qfile), "command", "--id", "flaky", "--", "sh", "-c",
          f"test -e {flag}"])
    main(["queue", "add", str(qfile), "command", "--id", "after", "--after", "flaky", "--", "true"])
    capsys.readouterr()
    assert main(["queue", "run", str(qfile), "--on-error", "continue",
                 "--max-consecutive-failures", "0"]) == 1
    assert "1 failed, 1 skipped" in capsys.readouterr().out
    flag.write_text("")
    assert main(["queue", "restart-failed", str(qfile)]) == 0
    out = capsys.readouterr().out
    assert "restarting 2 job(s): flaky, after" in out
    assert [j.status for j in load_queue(qfile).jobs] == ["success"] * 3
    assert load_queue(qfile).max_consecutive_failures == 0


def test_running_a_finished_queue_says_nothing_is_left_and_rewrites_nothing(qfile, capsys,
                                                                           tmp_path):
    main(["queue", "add", str(qfile), "command", "--id", "broken", "--", "false"])
    assert main(["queue", "run", str(qfile)]) == 1
    capsys.readouterr()
    report = logs_dir(qfile) / "morning-report.html"
    history = logs_dir(qfile) / "runner-history.jsonl"
    before = (report.stat().st_mtime_ns, history.read_bytes(), qfile.read_bytes())
    for argv in (["queue", "run", str(qfile)], ["queue", "resume", str(qfile)],
                 ["queue", "run", str(qfile), "--detach"]):
        assert main(argv) == 1  # the queue's state: one job failed
        out = capsys.readouterr().out
        assert f"nothing left to run in {qfile}: every job has ended (1 success, 1 failed)" in out
        assert f"'spacrq queue restart-failed {qfile}' runs the 1 failed or skipped job(s)" in out
    assert (report.stat().st_mtime_ns, history.read_bytes(), qfile.read_bytes()) == before


def test_run_refuses_an_invalid_queue_with_exit_2(tmp_path, capsys):
    path = tmp_path / "q.queue.json"
    path.write_text(json.dumps({"spacr_queue": 1, "jobs": [{"id": "a", "module": "maks"}]}))
    code = main(["queue", "run", str(path)])
    assert code == 2 and "refusing to start" in capsys.readouterr().err


def test_stop_without_a_runner_says_so(qfile, capsys):
    assert main(["queue", "stop", str(qfile), "--now"]) == 0
    assert "no runner is running this queue" in capsys.readouterr().out


def test_resume_of_a_finished_queue_runs_nothing_again(qfile, capsys, tmp_path):
    assert main(["queue", "run", str(qfile)]) == 0
    first_log = load_queue(qfile).jobs[0].log_path
    mtime = os.stat(first_log).st_mtime_ns
    assert main(["queue", "resume", str(qfile)]) == 0
    assert os.stat(first_log).st_mtime_ns == mtime


def test_run_detach_returns_at_once_and_the_runner_finishes_alone(qfile, capsys):
    import re
    from spacrq.queue.runner import runner_state
    assert main(["queue", "run", str(qfile), "--detach", "--on-error", "stop"]) == 0
    out = capsys.readouterr().out
    pid = int(re.search(r"process (\d+)", out).group(1))
    reap(pid)
    wait_until(lambda: (runner_state(qfile) or {}).get("state") == "finished", timeout=10,
               what="the runner's record to say finished")
    assert runner_state(qfile)["state"] == "finished"
    queue = load_queue(qfile)
    assert queue.jobs[0].status == "success" and queue.on_error == "stop"
    assert "hi" in Path(queue.jobs[0].log_path).read_text()


def test_an_abort_that_cannot_be_written_down_reaches_the_runner_as_a_signal(tmp_path,
                                                                           capsys):
    """On a full disk (here: a folder where the request goes) ``control.json`` cannot be
    replaced, so no request reaches the runner: a stop says what to do, in one sentence,
    and an abort is sent as the SIGTERM the runner takes as one; the job ends not_run."""
    import re
    from spacrq.queue.runner import runner_state
    path = tmp_path / "night.queue.json"
    assert main(["queue", "add", str(path), "command", "--id", "long", "--", "sleep",
                 "60"]) == 0
    assert main(["queue", "run", str(path), "--detach"]) == 0
    pid = int(re.search(r"process (\d+)", capsys.readouterr().out).group(1))
    try:
        wait_until(lambda: load_queue(path).jobs[0].status == "running", timeout=30,
                   what="the job to run")
        (logs_dir(path) / "control.json").unlink(missing_ok=True)
        (logs_dir(path) / "control.json").mkdir()
        _bad(capsys, ["queue", "stop", str(path)], "or abort now with --now, which signals")
        assert main(["queue", "stop", str(path), "--now"]) == 0
        out = capsys.readouterr().out
        assert f"so process {pid} was sent SIGTERM, which aborts the running job" in out
    except BaseException:
        with contextlib.suppress(OSError):  # (a failed test leaves no runner behind)
            os.kill(pid, signal.SIGTERM)
        raise
    finally:
        reap(pid)
    assert load_queue(path).jobs[0].status == "not_run"
    assert runner_state(path)["state"] == "aborted"


def test_run_with_notify_stores_the_argument_list_and_runs_it_once(qfile, capsys, tmp_path):
    marker = tmp_path / "told"
    assert main(["queue", "run", str(qfile), "--notify", sys.executable, "--notify=-c",
                 "--notify", "import sys; open(sys.argv[1], 'a').write('x')",
                 "--notify", str(marker)]) == 0
    assert marker.read_text() == "x"
    assert load_queue(qfile).notify_command[0] == sys.executable


def test_running_a_missing_file_creates_nothing(tmp_path, capsys):
    from spacrq.queue import QueueError
    from spacrq.queue.runner import serve
    _bad(capsys, ["queue", "run", str(tmp_path / "typo.queue.json")], "queue file not found")
    with pytest.raises(QueueError, match="queue file not found"):
        serve(tmp_path / "typo.queue.json")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["status", "run", "resume", "validate"])
def test_a_folder_where_the_journal_goes_is_one_sentence_for_every_command(qfile, capsys,
                                                                           command):
    (logs_dir(qfile) / "journal.jsonl").mkdir(parents=True)
    _bad(capsys, ["queue", command, str(qfile)], "journal")
    assert json.loads(qfile.read_text())["jobs"][0]["status"] == "pending"  # (untouched)


@pytest.mark.parametrize("action", [["status"], ["add", "command", "--", "true"], ["validate"]])
def test_a_pipe_in_place_of_the_queue_file_is_refused_not_waited_on(tmp_path, capsys, action):
    """A FIFO named like the queue file hung every command (holding the edit lock)."""
    path = tmp_path / "f.queue.json"
    os.mkfifo(path)
    _bad(capsys, ["queue", action[0], str(path), *action[1:]], "is not a regular file")
    assert [p.name for p in tmp_path.iterdir()] == ["f.queue.json"]


def test_edit_changes_a_waiting_job_and_keeps_what_it_was_not_told(qfile, tmp_path, capsys):
    assert main(["queue", "add", str(qfile), "command", "--id", "copy", "--set", "cwd=/tmp",
                 "--label", "copy", "--", "echo", "a"]) == 0
    capsys.readouterr()
    assert main(["queue", "edit", str(qfile), "copy", "--set", "env={\"A\": \"1\"}",
                 "--after", "first", "--timeout", "60", "--", "echo", "b"]) == 0
    assert "changed copy (copy)" in capsys.readouterr().out
    job = load_queue(qfile).find("copy")
    assert job.settings == {"argv": ["echo", "b"]} and job.depends_on == ["first"]
    assert job.label == "copy"  # (given by the operator: kept)
    assert main(["queue", "edit", str(qfile), "first", "--", "echo", "bye"]) == 0
    assert load_queue(qfile).find("first").label == "echo bye"  # (made from the program: made again)
    assert job.override_args == ["cwd=/tmp", 'env={"A": "1"}'] and job.timeout == 60.0
    assert main(["queue", "edit", str(qfile), "copy", "--set", "cwd=/var", "--no-after",
                 "--no-timeout", "--label", "copy B"]) == 0
    job = load_queue(qfile).find("copy")
    assert job.override_args == ['env={"A": "1"}', "cwd=/var"] and job.depends_on == []
    assert (job.timeout, job.label) == (None, "copy B")


@pytest.mark.parametrize("argv,needle", [
    (["ghost", "--label", "x"], "job 'ghost' is not in"),
    (["first"], "nothing to change"),
    (["first", "--set", "oops"], "is not key=value"),
    (["first", "--after", "first"], "cycle"),
    (["first", "--", "no-such-program-xyz"], "is not on PATH"),
    (["first", "--settings", "s.json", "--", "true"], "give one of them"),
])
def test_edit_bad_input_is_one_sentence_and_the_file_is_untouched(qfile, capsys, argv, needle):
    before = qfile.read_bytes()
    _bad(capsys, ["queue", "edit", str(qfile), *argv], needle)
    assert qfile.read_bytes() == before


def test_edit_refuses_a_job_that_ran_and_a_program_for_another_module(qfile, tmp_path, capsys,
                                                                     monkeypatch):
    assert main(["queue", "run", str(qfile)]) == 0
    capsys.readouterr()
    before = qfile.read_bytes()
    err = _bad(capsys, ["queue", "edit", str(qfile), "first", "--label", "late"], "Not changed")
    assert "success" in err or "ran" in err or "finished" in err
    assert qfile.read_bytes() == before
    (tmp_path / "mylabsteps.py").write_text("def segment(settings):\n    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = tmp_path / "m.json"
    settings.write_text(json.dumps({"target": "mylabsteps:segment"}))
    assert main(["queue", "add", str(qfile), "python", "--id", "py", "--settings",
                 str(settings)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    _bad(capsys, ["queue", "edit", str(qfile), "py", "--", "true"], "only for command jobs")


@pytest.mark.parametrize("action", [["add", "command", "--", "true"], ["edit", "first", "--label", "x"]])
def test_a_queue_file_that_is_a_link_is_refused_by_add_and_edit(qfile, tmp_path, capsys, action):
    """The link was replaced by a plain copy, and another logs folder than its target's locked."""
    link = tmp_path / "link.queue.json"
    link.symlink_to(qfile)
    before = qfile.read_bytes()
    _bad(capsys, ["queue", action[0], str(link), *action[1:]], "is a symbolic link")
    assert link.is_symlink() and qfile.read_bytes() == before


def test_garbage_in_the_runner_lock_is_never_echoed(tmp_path):
    import fcntl
    from spacrq.queue.locks import RUNNER_LOCK_FILE, RunnerLock
    from spacrq.queue.model import QueueError
    folder = tmp_path / "night_logs"
    folder.mkdir()
    lock = folder / RUNNER_LOCK_FILE
    lock.write_bytes(b"\x1b[2J\x1b]0;x\x07<b>")
    holder = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(QueueError) as exc:
            RunnerLock(folder, "night.queue.json").acquire()
    finally:
        os.close(holder)
    assert "\x1b" not in str(exc.value) and "\x07" not in str(exc.value)
    lock.write_bytes(b"")
    holder = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # (no pid written: the kernel's lock table names the holder, here this process)
        named = f"process {os.getpid()}" if os.path.exists("/proc/locks") else "another process"
        with pytest.raises(QueueError, match=f"already being run by {named};"):
            RunnerLock(folder, "night.queue.json").acquire()
    finally:
        os.close(holder)


def test_a_json_file_that_is_not_a_queue_is_never_taken_for_an_empty_one(tmp_path, capsys):
    """{"x": 1} read as an empty queue, and 'queue add' then replaced it, dropping its data."""
    other = tmp_path / "notq.queue.json"
    other.write_text('{"x": 1, "important": "data"}')
    for argv in (["status", str(other)], ["add", str(other), "command", "--", "true"],
                 ["edit", str(other), "a", "--label", "x"]):
        _bad(capsys, ["queue", *argv], "is not a queue file")
    assert other.read_text() == '{"x": 1, "important": "data"}'


def test_edit_of_a_job_a_dead_runner_left_running_says_resume_and_an_unknown_id_names_the_jobs(
        qfile, capsys):
    queue = load_queue(qfile)
    queue.jobs[0].status = "running"  # (as a runner that died leaves it)
    from spacrq.queue import save_queue
    save_queue(queue, qfile)
    err = _bad(capsys, ["queue", "edit", str(qfile), "first", "--label", "x"],
               "was left running by a runner that is gone")
    assert f"'spacrq queue resume {qfile}'" in err
    err = _bad(capsys, ["queue", "edit", str(qfile), "zz", "--label", "x"],
               "job 'zz' is not in night.queue.json (never there")
    assert "its jobs are: first" in err


def test_a_label_with_a_line_break_is_refused_by_add_and_edit(qfile, capsys):
    """A label is one line: the listings, the pane and the morning report show it."""
    before = qfile.read_bytes()
    _bad(capsys, ["queue", "add", str(qfile), "command", "--label", "mask\nplate 3", "--",
                  "true"], "holds a line break")
    _bad(capsys, ["queue", "edit", str(qfile), "first", "--label", "a\tb\x1b[2J"],
         "give a label on one line")
    assert qfile.read_bytes() == before  # nothing written
    assert main(["queue", "edit", str(qfile), "first", "--label", "mask plate 3"]) == 0
    assert load_queue(qfile).jobs[0].label == "mask plate 3"


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="the kernel's lock table is Linux's")
def test_an_abort_sent_as_a_signal_goes_only_to_the_process_holding_the_lock(tmp_path):
    """The pid written in the lock file was trusted: a file naming another spacrq process
    (while something else holds the lock) had that process killed."""
    import subprocess
    from spacrq.queue.runner import _signal_runner
    path = tmp_path / "night.queue.json"
    assert main(["queue", "add", str(path), "command", "--id", "a", "--", "true"]) == 0
    lock = logs_dir(path) / "runner.lock"
    lock.touch()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)"),
        str(lock)], stdout=subprocess.PIPE, text=True)
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # spacrq"])
    try:
        assert holder.stdout.readline() == "held\n"
        lock.write_text(f"{decoy.pid} on here\n")  # (a file's word against the kernel's)
        assert _signal_runner(path) is None  # (the holder's command is not spacrq's)
        assert decoy.poll() is None  # never signalled
    finally:
        for process in (holder, decoy):
            process.kill()
            process.wait()
        holder.stdout.close()


def test_a_fifo_where_the_runners_log_goes_is_one_sentence_not_a_hang(tmp_path, capsys):
    """``queue run --detach`` opened the log for the runner with a plain open, which waits
    for a FIFO's reader for ever (so did the pane's Run)."""
    path = tmp_path / "night.queue.json"
    assert main(["queue", "add", str(path), "command", "--id", "a", "--", "true"]) == 0
    os.mkfifo(logs_dir(path) / "runner.log")
    _bad(capsys, ["queue", "run", str(path), "--detach"], "runner.log is not a regular file")
    assert load_queue(path).jobs[0].status == "pending"
