"""The per-job fast path keeps every promise: a job starts only after its "running" is on
disk, the file written in pieces is the file written whole, the runner's kept-open lock is
still the lock, and a job started the quick way gets what a Popen'd job got."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spacrq.procs import module_argv
from spacrq.queue import Job, Queue, QueueError, save_queue
from spacrq.queue.jobproc import Supervisor
from spacrq.queue.locks import EditLock, HeldEditLock
from spacrq.queue.persist import QueueWriter
from spacrq.queue.render import render_queue
from spacrq.queue.replacing import KEEP, QuickReplacer
from spacrq.queue.store import logs_dir
from spacrq.runfiles import read_jsonl

TOUCH = shutil.which("touch") or "/usr/bin/touch"


def _request(tmp_path: Path, name: str, argv: list[str], **extra) -> dict:
    return {"job": name, "key": f"k-{name}", "argv": argv, "log": str(tmp_path / f"{name}.log"),
            "record": str(tmp_path / f"{name}.exit.jsonl"), "grace": 1, **extra}


def _feed(messages: list[dict]) -> list[dict]:
    """Everything the supervisor answers to ``messages`` (then its stdin closes)."""
    data = b"".join(json.dumps(m).encode() + b"\n" for m in messages)
    done = subprocess.run(module_argv("spacrq.queue.supervise"), input=data,
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_job_sent_ahead_never_starts_without_go(tmp_path):
    """The runner died (stdin closed) before its "running" was on disk: the job never ran."""
    marker = tmp_path / "ran"
    request = _request(tmp_path, "a", [TOUCH, str(marker)], hold=True, header="# header\n")
    assert _feed([request]) == []
    assert not marker.exists()
    assert not Path(request["record"]).exists()  # nothing to adopt, nothing to record
    assert "not started" in Path(request["log"]).read_text()


def test_a_job_sent_ahead_starts_at_go_and_a_taken_back_one_gives_way(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    held = _request(tmp_path, "a", [TOUCH, str(first)], hold=True)
    dropped = _request(tmp_path, "b", [TOUCH, str(tmp_path / "never")], hold=True)
    after = _request(tmp_path, "c", [TOUCH, str(second)], hold=True)
    answers = _feed([held, {"go": held["key"]}, dropped, after, {"go": after["key"]}])
    assert first.exists() and second.exists() and not (tmp_path / "never").exists()
    assert [a["exit"] for a in answers if "exit" in a] == [0, 0]
    assert "exit code 0" in Path(after["log"]).read_text()
    ends = [r for r in read_jsonl(held["record"]) if "exit_code" in r]
    assert [r["exit_code"] for r in ends] == [0]


def test_a_short_job_is_told_in_one_answer_and_a_long_one_is_named_while_it_runs(tmp_path):
    """Waking the runner for a job already gone costs a short job more than its start; a
    job still running after a moment is named (its pid) before it ends; either way its
    start is in its exit record from the moment it runs, for a runner that died."""
    sleep = shutil.which("sleep") or "/bin/sleep"
    short = _request(tmp_path, "short", [TOUCH, str(tmp_path / "t")])
    long = _request(tmp_path, "long", [sleep, "0.5"])
    answers = _feed([short, long])
    assert [sorted(a) for a in answers] == [["exit", "finished", "pid", "started"],
                                            ["pid", "started"],
                                            ["exit", "finished", "pid", "started"]]
    assert answers[1]["pid"] == answers[2]["pid"] != answers[0]["pid"]
    for request, answer in ((short, answers[0]), (long, answers[2])):
        starts = [r for r in read_jsonl(request["record"]) if "pid" in r]
        assert [(r["key"], r["pid"]) for r in starts] == [(request["key"], answer["pid"])]


def test_the_environment_sent_as_changes_is_the_jobs_environment(tmp_path):
    """Only the changes travel after the first job; what a job sees is still all of it."""
    supervisor = Supervisor()
    sh = shutil.which("sh") or "/bin/sh"
    base = dict(os.environ, SPACRQ_T_KEEP="keep", SPACRQ_T_GONE="gone")
    seen = []
    try:
        for i, env in enumerate([base, {**{k: v for k, v in base.items() if k != "SPACRQ_T_GONE"},
                                        "SPACRQ_T_NEW": "new"}]):
            out = tmp_path / f"env{i}"
            script = (f'echo "$SPACRQ_T_KEEP ${{SPACRQ_T_GONE-unset}} '
                      f'${{SPACRQ_T_NEW-unset}}" > {out}')
            request = _request(tmp_path, f"e{i}", [sh, "-c", script], env=env)
            answer = supervisor.start(request)
            assert (answer if "exit" in answer else supervisor.wait(30.0))["exit"] == 0
            seen.append(out.read_text().split())
    finally:
        supervisor.close()
    assert seen == [["keep", "gone", "unset"], ["keep", "unset", "new"]]


def test_a_job_sees_the_runners_environment_as_it_is_now_and_its_own_on_top(tmp_path,
                                                                           monkeypatch):
    """The runner's environment travels once and again only when it changed; a job's own
    variables travel with each job and are gone for the next."""
    from spacrq.queue.jobproc import ProcessRunner
    from spacrq.queue.model import now_iso
    from spacrq.queue.validate import Modules
    sh = shutil.which("sh") or "/bin/sh"
    runner = ProcessRunner(grace=0.5, supervisor=Supervisor())
    seen = []
    try:
        for i, (outer, own) in enumerate([("one", {"SPACRQ_T_OWN": "mine"}), ("one", {}),
                                          ("two", {})]):
            monkeypatch.setenv("SPACRQ_T_OUTER", outer)
            out = tmp_path / f"env{i}"
            job = Job(module="command", id=f"e{i}", env=own, settings={"argv": [
                sh, "-c", f'echo "$SPACRQ_T_OUTER ${{SPACRQ_T_OWN-unset}} $SPACRQ_JOB_ID" > {out}']})
            job.started = now_iso()
            code = runner.run(job, Modules().spec("command"), job.settings, "",
                              str(tmp_path / f"e{i}.log"))
            assert code == 0
            seen.append(out.read_text().split())
    finally:
        runner.supervisor.close()
    assert seen == [["one", "mine", "e0"], ["one", "unset", "e1"], ["two", "unset", "e2"]]


def test_a_job_started_the_quick_way_is_alone_in_its_session_with_no_stdin(tmp_path):
    probe = ("import os, sys; print(os.getpgid(0) == os.getpid(), os.getsid(0) == os.getpid(), "
             "sys.stdin.read() == '')")
    request = _request(tmp_path, "p", [sys.executable, "-c", probe], header="# the header\n")
    grep = shutil.which("grep") or "/bin/grep"
    signals = _request(tmp_path, "s", [grep, "SigIgn", "/proc/self/status"])
    answers = _feed([request, signals])
    assert [a["exit"] for a in answers if "exit" in a] == [0, 0]
    log = Path(request["log"]).read_text()
    assert log.startswith("# the header\n") and "True True True" in log
    ignored = int(Path(signals["log"]).read_text().split()[1], 16)
    assert not ignored & (1 << (13 - 1))  # SIGPIPE back to its default, as Popen does


def test_the_file_written_in_pieces_is_the_file_written_whole(tmp_path):
    queue = Queue(name="pieces")
    for i in range(6):
        queue.add(Job(module="command", id=f"j{i}", settings={"argv": ["true"]}), validate=False)
    path = tmp_path / "pieces.queue.json"
    save_queue(queue, path)
    writer = QueueWriter(queue, path, mode="file")
    try:
        writer.start()
        for i, job in enumerate(queue.jobs):
            job.status, job.error = "success", f"done {i}"
            writer.touch(job, ["status", "error"])
            if i == 3:
                queue.jobs.insert(0, queue.jobs.pop())  # the list itself changed
            writer.commit()
            assert path.read_bytes() == render_queue(queue)
    finally:
        writer.close()


def test_the_quick_replace_keeps_the_mode_clears_a_leftover_and_never_follows_a_link(tmp_path):
    path = tmp_path / "q.queue.json"
    path.write_text("old")
    os.chmod(path, 0o640)
    outside = tmp_path / "outside"
    outside.write_text("untouched")
    replacer = QuickReplacer(path)
    replacer.temp.symlink_to(outside)  # a link, or a crash's leftover, where the temp goes
    try:
        replacer.write(b"new")
        replacer.write(b"newer")
    finally:
        replacer.close()
    assert path.read_bytes() == b"newer" and (path.stat().st_mode & 0o777) == 0o640
    assert outside.read_text() == "untouched" and not replacer.temp.exists()


def test_a_temporary_file_made_ahead_is_never_written_through_a_link_put_in_its_place(tmp_path):
    """The next replace's file is made while a job runs; if its name is taken meanwhile (a
    link, a leftover), the replace makes a file of its own; nothing is left open."""
    path = tmp_path / "q.queue.json"
    path.write_text("old")
    outside = tmp_path / "outside"
    outside.write_text("untouched")
    open_before = len(os.listdir("/proc/self/fd"))
    replacer = QuickReplacer(path)
    try:
        replacer.prepare()
        replacer.write(b"one")
        replacer.prepare()
        replacer.temp.unlink()
        replacer.temp.symlink_to(outside)
        replacer.write(b"two")
        replacer.prepare()
        assert path.read_bytes() == b"two" and not path.is_symlink()
    finally:
        replacer.close()
    assert outside.read_text() == "untouched" and not replacer.temp.exists()
    assert len(os.listdir("/proc/self/fd")) == open_before


def _replaced_still_open(path: Path) -> int:
    """How many descriptors of this process are on a replaced (removed) ``path``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target == f"{path} (deleted)"
    return count


@pytest.mark.parametrize("burst", [5, KEEP + 3])
def test_a_full_disk_is_tried_again_once_the_old_files_kept_open_are_let_go_of(
        tmp_path, monkeypatch, burst):
    """The replaced files a burst of short jobs keeps open hold their blocks: on a disk
    that is full, the replace lets go of them, waits until they are closed (a burst past
    KEEP has its old files closed by the replacer's thread, slowly here), and tries
    again, so the runner's own leftovers never fail its saves."""
    import errno
    import time as _time
    from spacrq.queue import background
    path = tmp_path / "q.queue.json"
    path.write_text("old")
    replacer = QuickReplacer(path)
    real_write, real_close = os.write, background._close

    def write(fd, data):  # (the disk is full while any replaced file is still open)
        if _replaced_still_open(path):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    def slow_close(fd):  # (freeing a file takes a while)
        _time.sleep(0.02)
        real_close(fd)

    monkeypatch.setattr(background, "_close", slow_close)
    try:
        for i in range(burst):
            replacer.write(b"%d" % i)
        monkeypatch.setattr(os, "write", write)
        replacer.write(b"after")
        monkeypatch.setattr(os, "write", real_write)
        assert path.read_bytes() == b"after" and len(replacer._held) == 2  # (it, and the last)
    finally:
        replacer.close()
    assert _replaced_still_open(path) == 0


def test_the_old_files_of_a_long_burst_are_closed_by_the_replacers_thread(tmp_path,
                                                                          monkeypatch):
    """Closing a replaced file frees it, which takes long (0.6 ms here): past KEEP, the
    old files let go of (a batch at a time) are closed by the replacer's own thread, never
    by the runner's; closing the replacer waits for it, and leaves nothing open behind."""
    import threading
    path = tmp_path / "q.queue.json"
    real_close = os.close
    closes: list[str] = []  # the thread that closed each replaced file

    def close(fd):
        try:
            replaced = os.readlink(f"/proc/self/fd/{fd}") == f"{path} (deleted)"
        except OSError:
            replaced = False
        if replaced:
            closes.append(threading.current_thread().name)
        real_close(fd)

    open_before = len(os.listdir("/proc/self/fd"))
    threads_before = set(threading.enumerate())
    monkeypatch.setattr(os, "close", close)
    replacer = QuickReplacer(path)
    try:
        for i in range(KEEP + 20):
            replacer.prepare()
            replacer.write(b"%d" % i)
            assert len(replacer._held) <= KEEP
        assert threading.current_thread().name not in closes  # (the burst: none by the runner)
        held = len(replacer._held)  # (the file now at the path, and the replaced ones kept)
    finally:
        replacer.close()
    monkeypatch.undo()
    assert path.read_bytes() == b"%d" % (KEEP + 19)
    assert closes.count("spacrq-queue-file-closer") == KEEP + 20 - held >= 20
    assert set(threading.enumerate()) <= threads_before  # (the thread ended with it)
    assert len(os.listdir("/proc/self/fd")) == open_before and _replaced_still_open(path) == 0


def test_the_runners_kept_open_lock_is_the_lock_after_its_file_was_replaced(tmp_path):
    folder = logs_dir(tmp_path / "q.queue.json")
    held = HeldEditLock(folder)
    try:
        with held:
            pass
        (folder / "queue.lock").unlink()  # somebody cleaned the folder
        with held, pytest.raises(QueueError, match="locked"), EditLock(folder, wait=0.05):
            pass
    finally:
        held.close()
