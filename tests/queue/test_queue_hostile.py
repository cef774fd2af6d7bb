"""Garbage in any queue file, journal or control file: a sentence or a skipped line, never a crash."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hostile import HOSTILE, as_lines
from spacrq.cli import main
from spacrq.queue import Job, Queue, QueueError, load_queue, run_queue, save_queue, validate_queue
from spacrq.queue.runner import runner_state
from spacrq.queue.store import journal_path, logs_dir, open_queue

GOOD_LINE = b'{"seq": 1, "job": "a", "set": {"status": "success", "exit_code": 0}}'


def _queue(tmp_path, n=2):
    queue = Queue(name="night")
    for jid in "ab"[:n]:
        queue.add(Job(module="command", id=jid, settings={"argv": ["true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    return queue, path


def _sentence(capsys, argv, needle=""):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert needle in err, err


CONTROL = dict(HOSTILE, huge=b'{"stop": "' + b"x" * 200_000 + b'"}',
               stop_list=b'{"stop": ["abort"]}', stop_word=b'{"stop": "later"}',
               stop_nan=b'{"stop": NaN}', stop_number=b'{"stop": 1}')


@pytest.mark.parametrize("name", sorted(CONTROL))
def test_a_hostile_control_file_is_nothing_asked_and_said_in_the_runners_log(
        tmp_path, capfd, name):
    queue, path = _queue(tmp_path)
    control = logs_dir(path) / "control.json"

    def runner(job, settings_path, log_path):
        control.write_bytes(CONTROL[name])  # arrives while the job runs
        return 0

    result = run_queue(queue, path, runner=runner)
    assert result.ok and [j.status for j in queue.jobs] == ["success", "success"]
    if CONTROL[name].strip():
        assert "control.json" in capfd.readouterr().err  # the reason, in the runner's log


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_journal_line_is_skipped_with_a_warning_and_never_folded(tmp_path, name):
    queue, path = _queue(tmp_path)
    journal_path(path).parent.mkdir(exist_ok=True)
    journal_path(path).write_bytes(as_lines(GOOD_LINE, HOSTILE[name]))
    loaded = open_queue(path)  # folds the journal into the file, as every command does
    assert loaded.jobs[0].status == "success"
    on_disk = json.loads(path.read_text())
    assert on_disk["jobs"][0]["status"] == "success" and on_disk["jobs"][1]["status"] == "pending"
    assert load_queue(path).jobs[1].status == "pending"
    if HOSTILE[name].strip():
        assert any("skipped" in w for w in loaded.warnings), loaded.warnings


def test_skipped_journal_lines_are_kept_aside_when_the_journal_is_folded(tmp_path):
    queue, path = _queue(tmp_path)
    journal_path(path).parent.mkdir(exist_ok=True)
    journal_path(path).write_bytes(as_lines(GOOD_LINE, b"\xff not a line"))
    opened = open_queue(path)
    assert opened.jobs[0].status == "success"
    kept = list(logs_dir(path).glob("journal.skipped-*.jsonl"))
    assert len(kept) == 1 and b"\xff not a line" in kept[0].read_bytes()
    assert any(str(kept[0]) in w for w in opened.warnings), opened.warnings
    assert not journal_path(path).exists() or journal_path(path).stat().st_size == 0


def test_a_linked_journal_is_never_emptied_nor_read_through(tmp_path, capsys):
    """``journal.jsonl`` a symbolic link to some other file: no command reads or empties it
    (folding a journal emptied the link's target: a read-only ``status`` emptied it)."""
    queue, path = _queue(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("".join(f"line {i}\n" for i in range(1000)))
    journal_path(path).parent.mkdir(exist_ok=True)
    journal_path(path).symlink_to(victim)
    for command in ("status", "validate", "run", "resume"):
        _sentence(capsys, ["queue", command, str(path)], "is a symbolic link")
    with pytest.raises(QueueError, match="move it away"):
        load_queue(path)
    assert victim.read_text().count("line") == 1000
    assert journal_path(path).is_symlink()  # left as it is, for the operator to move away


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_pipe_or_a_device_in_the_journals_place_never_hangs_a_run(tmp_path, kind):
    import os
    queue, path = _queue(tmp_path)
    journal_path(path).parent.mkdir(exist_ok=True)
    if kind == "fifo":
        os.mkfifo(journal_path(path))
    else:
        journal_path(path).symlink_to("/dev/zero")
    for command in ("run", "resume", "status"):
        proc = subprocess.run([sys.executable, "-m", "spacrq", "queue", command, str(path)],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert proc.returncode == 2 and "move it away" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert json.loads(path.read_text())["jobs"][0]["status"] == "pending"


@pytest.mark.parametrize("line", [
    {"seq": 2, "job": "b", "set": {"status": "exploded"}},
    {"seq": 2, "job": "b", "set": {"exit_code": "zero"}},
    {"seq": 2, "job": "b", "set": {"attempts": -1}},
    {"seq": 2, "job": "b", "set": {"started": 5}},
    {"seq": 2, "job": "b", "set": {"run_status": [1, 2]}},
    {"seq": 2, "job": "b", "set": {"overrides": [["x"]]}},
    {"seq": "2", "job": "b", "set": {"status": "failed"}},
    {"seq": 2, "job": ["b"], "set": {"status": "failed"}},
    {"seq": 2, "job": "b", "set": "failed"},
    {"seq": True, "job": "b", "set": {"status": "failed"}},
])
def test_a_journal_line_of_the_wrong_types_is_skipped_and_the_queue_stays_loadable(tmp_path,
                                                                                 capsys, line):
    queue, path = _queue(tmp_path)
    journal_path(path).parent.mkdir(exist_ok=True)
    journal_path(path).write_text(GOOD_LINE.decode() + "\n" + json.dumps(line) + "\n")
    assert main(["queue", "status", str(path)]) == 0
    captured = capsys.readouterr()
    assert "warning: skipped 1 line(s)" in captured.err and "Traceback" not in captured.err
    assert [j.status for j in load_queue(path).jobs] == ["success", "pending"]
    assert json.loads(path.read_text())["jobs"][1]["status"] == "pending"  # never folded


@pytest.mark.parametrize("content,needle", [
    (b'{"spacr_queue": 1, "jobs": [{"module": "command", "retries": Infinity}]}', "not valid JSON"),
    (b'{"spacr_queue": 1, "jobs": [{"module": "command", "exit_code": NaN}]}', "not valid JSON"),
    (b'{"spacr_queue": 1, "jobs": [{"module": "command", "timeout": 1e400}]}', "not valid JSON"),
    (b'{"spacr_queue": 1, "jobs": ' + b"[" * 5000 + b"]" * 5000 + b"}", "not valid JSON"),
    (b'{"spacr_queue": 1, "jobs": ' + b"[" * 100 + b"]" * 100 + b"}", "64 deep"),
    (b'{"jobs": [{"module": "command", "id": ["a"]}]}', '"id"'),
    (b'{"jobs": [{"module": "command", "label": {"x": 1}}]}', '"label"'),
    (b'{"jobs": [{"module": "command", "status": 3}]}', '"status"'),
    (b'{"jobs": [{"module": "command", "exit_code": "zero"}]}', '"exit_code"'),
    (b'{"jobs": [{"module": "command", "run_status": [1]}]}', '"run_status"'),
    (b'{"jobs": [{"module": "command", "overrides": [["a=1"]]}]}', '"overrides"'),
    (b'{"jobs": [{"module": "command", "env": {"A": [1]}}]}', '"env"'),
    (b'{"jobs": [{"module": "command", "retries": 2.5}]}', '"retries"'),
    (b'{"jobs": [{"module": "command", "depends_on": [["a"]]}]}', '"depends_on"'),
    (b'{"jobs": [], "name": ["night"]}', '"name"'),
    (b'{"jobs": [], "journal_seq": -4}', "journal_seq"),
    (b'{"jobs": [], "max_consecutive_failures": true}', "max_consecutive_failures"),
])
@pytest.mark.parametrize("command", ["status", "validate", "run", "resume"])
def test_garbage_anywhere_in_a_queue_file_is_one_sentence_and_exit_2(tmp_path, capsys,
                                                                     content, needle, command):
    path = tmp_path / "night.queue.json"
    path.write_bytes(content)
    _sentence(capsys, ["queue", command, str(path)], needle)
    assert path.read_bytes() == content


@pytest.mark.parametrize("jid, said", [("", "cannot be empty"), (" ", "white space"),
                                       ("\t", "control character"), ("a ", "white space")])
def test_an_empty_job_id_is_a_validation_error(tmp_path, capsys, jid, said):
    """An id of white space (`--id " "`) was taken: a job nobody can name."""
    path = tmp_path / "night.queue.json"
    path.write_text(json.dumps({"jobs": [{"id": jid, "module": "command",
                                          "settings": {"argv": ["true"]}}]}))
    queue = load_queue(path)
    assert queue.jobs[0].id == jid
    errors = [p for p in validate_queue(queue) if p.is_error]
    assert errors and said in errors[0].message
    assert main(["queue", "validate", str(path)]) == 1
    with pytest.raises(QueueError, match=said):
        run_queue(queue, path, runner=lambda *a: 0)
    capsys.readouterr()
    if jid:  # (`--id ""` is no id given: one is made up)
        _sentence(capsys, ["queue", "add", str(tmp_path / "new.queue.json"), "command", "--id",
                           jid, "--", "true"], said)


def test_run_detach_on_an_invalid_queue_exits_2_and_starts_nothing(tmp_path, capsys):
    path = tmp_path / "night.queue.json"
    path.write_text('{"jobs": [{"id": "a", "module": "maks"}]}')
    assert main(["queue", "run", str(path), "--detach"]) == 2
    err = capsys.readouterr().err
    assert "refusing to start" in err and "unknown module 'maks'" in err and "Traceback" not in err
    assert runner_state(path) is None and not (logs_dir(path) / "runner.log").exists()


def test_the_supervisor_ignores_a_garbled_request(tmp_path):
    """The job supervisor reads its requests with the same care (one bad line costs itself)."""
    log = tmp_path / "a.log"
    request = {"job": "a", "key": "k", "argv": ["true"], "log": str(log),
               "record": str(tmp_path / "a.exit.jsonl")}
    feed = b"\xff\xfe garbage\n[1, 2]\n" + json.dumps(request).encode() + b"\n"
    done = subprocess.run([sys.executable, "-m", "spacrq.queue.supervise"], input=feed,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[-1]["exit"] == 0 and "exit code 0" in log.read_text()
    assert Path(request["record"]).exists()


@pytest.mark.parametrize("argv", [["run"], ["run", "--detach"], ["resume"],
                                  ["add", "command", "--", "true"]])
def test_a_file_in_place_of_the_logs_folder_is_one_sentence_and_exit_2(tmp_path, capsys, argv):
    queue, path = _queue(tmp_path)
    logs_dir(path).write_text("not a folder")
    before = path.read_bytes()
    _sentence(capsys, ["queue", argv[0], str(path), *argv[1:]], str(logs_dir(path)))
    assert path.read_bytes() == before


def test_a_folder_in_place_of_the_control_file_is_nothing_asked(tmp_path):
    queue, path = _queue(tmp_path)
    (logs_dir(path) / "control.json").mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-m", "spacrq", "queue", "run", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert [j.status for j in load_queue(path).jobs] == ["success", "success"]


def test_run_resume_and_stop_refuse_a_linked_queue_file(tmp_path, capsys):
    queue, path = _queue(tmp_path)
    (tmp_path / "here").mkdir()
    link = tmp_path / "here" / "n.queue.json"
    link.symlink_to(path)
    for command in ("run", "resume", "stop"):
        _sentence(capsys, ["queue", command, str(link)], "symbolic link")
    assert [j.status for j in load_queue(path).jobs] == ["pending", "pending"]
    assert not (tmp_path / "here" / "n_logs").exists() and not logs_dir(path).exists()


def test_a_garbled_file_under_a_live_runner_can_still_be_stopped(tmp_path, capsys):
    from spacrq.queue.runner import start_runner
    from waiting import reap, wait_until
    queue = Queue(name="night")
    for jid in "abc":
        queue.add(Job(module="command", id=jid, settings={"argv": ["sleep", "0.5"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    ref = start_runner(path)
    try:
        wait_until(lambda: load_queue(path).jobs[0].status == "running", what="the first job")
        path.write_bytes(b"\xff\xfe garbled")
        assert main(["queue", "stop", str(path)]) == 0
        assert "stop after the running job" in capsys.readouterr().out
    finally:
        reap(ref.pid)
    statuses = [j.status for j in load_queue(path).jobs]
    assert statuses.count("success") < 3 and "not_run" in statuses


def test_a_key_twice_in_one_object_is_refused_before_anything_is_lost(tmp_path, capsys):
    """``"jobs"`` twice: JSON keeps the last list, so validate passed and the next save
    lost the first list's jobs, silently."""
    path = tmp_path / "night.queue.json"
    path.write_text('{"spacr_queue": 1, "jobs": [{"id": "first", "module": "command", '
                    '"settings": {"argv": ["true"]}}], "jobs": [{"id": "a", "module": '
                    '"command", "settings": {"argv": ["true"]}}]}')
    before = path.read_bytes()
    for argv in (["queue", "validate", str(path)], ["queue", "run", str(path)],
                 ["queue", "add", str(path), "command", "--", "true"],
                 ["queue", "edit", str(path), "a", "--label", "x"]):
        _sentence(capsys, argv, 'has the key "jobs" twice')
    assert path.read_bytes() == before


@pytest.mark.parametrize("field, where", [("retries", "job"), ("attempts", "job"),
                                          ("max_consecutive_failures", "queue")])
def test_a_negative_count_in_a_queue_file_is_one_sentence(tmp_path, capsys, field, where):
    queue, path = _queue(tmp_path)
    doc = json.loads(path.read_text())
    (doc["jobs"][0] if where == "job" else doc)[field] = -1
    path.write_text(json.dumps(doc))
    _sentence(capsys, ["queue", "validate", str(path)], "-1")


@pytest.mark.parametrize("action", [["add", "command", "--", "true"], ["edit", "a", "--label", "x"],
                                    ["run"], ["resume"], ["status"], ["stop"], ["restart-failed"],
                                    ["run", "--detach"]])
def test_a_garbled_file_is_refused_without_making_its_logs_folder(tmp_path, capsys, action):
    """A command refused on a garbled file leaves the folder as it found it (an edit made the
    logs folder and its lock before it read the file)."""
    path = tmp_path / "night.queue.json"
    path.write_bytes(b"\0garbage")
    argv = ["queue", action[0], *action[1:2], str(path), *action[2:]] if action[0] == "run" \
        else ["queue", action[0], str(path), *action[1:]]
    _sentence(capsys, argv, "not valid JSON")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["night.queue.json"]


def _left_running_with_log(tmp_path, log_path):
    """A night whose job j0 ran (and failed, exit 3) and whose file was then written to say
    it is still running, its log ``log_path(logs folder)``: what a hand or a script can do."""
    import os
    path = tmp_path / "night.queue.json"
    queue = Queue(name="night", max_consecutive_failures=0)
    queue.add(Job(module="command", id="j0", settings={"argv": ["sh", "-c", "exit 3"]}))
    save_queue(queue, path)
    assert main(["queue", "run", str(path)]) == 1
    doc = json.loads(path.read_text())
    job = doc["jobs"][0]
    job.update(status="running", log_path=str(log_path(logs_dir(path))))
    for key in ("finished", "exit_code", "error", "failure_kind"):
        job.pop(key, None)
    path.write_text(json.dumps(doc))
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("error: SECRET-FROM-OUTSIDE\n")
    os.symlink(secret, logs_dir(path) / "evil.log")
    os.mkfifo(logs_dir(path) / "fifo.log")
    return path


@pytest.mark.parametrize("where", ["link", "outside", "fifo", "through a linked folder"])
def test_a_jobs_log_named_anywhere_is_read_only_in_the_queues_own_folder(tmp_path, capsys,
                                                                         where):
    """A running job's log, as the file names it, was read wherever it pointed: through a
    link in the logs folder (its last line became the job's error, in the file and the
    summary), outside it (`status --follow` showed it), and a FIFO there hung `resume`
    and `status --follow` for ever, holding the queue."""
    import os
    from spacrq.queue.live import queue_lines
    names = {"link": lambda logs: logs / "evil.log",
             "outside": lambda logs: logs.parent / "outside" / "secret.txt",
             "fifo": lambda logs: logs / "fifo.log",
             "through a linked folder": lambda logs: logs / "sub" / "secret.txt"}
    path = _left_running_with_log(tmp_path, names[where])
    os.symlink(tmp_path / "outside", logs_dir(path) / "sub")
    assert not any("SECRET" in line for line in queue_lines(path))  # (status --follow)
    done = subprocess.run([sys.executable, "-m", "spacrq", "queue", "resume", str(path)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert "SECRET" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    job = json.loads(path.read_text())["jobs"][0]
    assert job["status"] == "failed" and "SECRET" not in job["error"]
