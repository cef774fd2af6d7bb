"""The runner's keeper (spacrq.queue.keeper) and the runner's own job starts (spacrq.queue.direct).

A kept runner starts its jobs as its own children; what must outlive it — a
job's end — is recorded by the keeper, its parent and subreaper.  These
tests kill stand-in runners at the moments that matter (mid-job, and after
the job's end was seen but before it was reaped) and read what the keeper
wrote; and run whole queues through the direct starts.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from spacrq.queue import Job, Queue, load_queue, resume_queue, run_queue, save_queue
from spacrq.queue import keeper
from spacrq.queue.direct import DirectStarter
from spacrq.queue.jobproc import Supervisor
from spacrq.queue.runner import runner_state, start_runner
from spacrq.queue.supervise import EXIT_RECORD, exit_record_path
from spacrq.runfiles import read_jsonl
from waiting import pid_in, reap, wait_until  # tests/waiting.py (tests/ is on the path)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="subreapers are Linux's")


def _fake_runner(logs: Path, job_argv: list[str], then: str) -> str:
    """A stand-in runner: starts one job in a session of its own, writes its start to the
    queue's exit record as a kept runner does, then ``then`` (Python, with ``pid`` bound)."""
    record = str(logs / EXIT_RECORD)
    return textwrap.dedent(f"""
        import json, os, signal, time
        open({str(logs / "01_job.log")!r}, "a").close()
        pid = os.posix_spawn({job_argv[0]!r}, {job_argv!r}, dict(os.environ), setsid=True)
        with open({record!r}, "a") as out:
            out.write(json.dumps({{"key": "k1", "job": "job", "log": "01_job.log", "pid": pid,
                                  "started": time.time(),
                                  "supervisor": int(os.environ["{keeper.KEEPER_ENV}"])}}) + "\\n")
        {then}
    """)


def _keep(tmp_path: Path, code: str, **kwargs) -> subprocess.Popen:
    logs = tmp_path / "night_logs"
    logs.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "spacrq.queue.keeper", "--logs", str(logs),
                             "--", sys.executable, "-c", code], **kwargs)


def _ends(tmp_path: Path) -> list[dict]:
    return [ln for ln in read_jsonl(tmp_path / "night_logs" / EXIT_RECORD)
            if "exit_code" in ln]


def test_the_exit_record_name_is_the_supervisors():
    assert keeper.EXIT_RECORD == EXIT_RECORD
    assert exit_record_path("/q/night_logs/01_a.log") == f"/q/night_logs/{EXIT_RECORD}"


def test_open_starts_are_this_keepers_starts_with_no_end(tmp_path):
    lines = [{"job": "a", "key": "a", "pid": 11, "supervisor": 7},
             {"job": "b", "key": "b", "pid": 12, "supervisor": 7},
             {"job": "c", "key": "c", "pid": 13, "supervisor": 8},  # another keeper's
             {"job": "d", "key": "d0", "pid": 14, "supervisor": 7},
             {"job": "b", "key": "b", "exit_code": 0},
             {"job": "d", "key": "d0", "exit_code": 1},
             {"job": "d", "key": "d1", "pid": 15, "supervisor": 7},  # a retry still open
             {"job": "f", "key": "f", "starting": 100.0, "supervisor": 7},  # died before the pid
             {"job": "g", "key": "g", "starting": 100.0, "supervisor": 7},
             {"job": "g", "key": "g", "pid": 16, "supervisor": 7, "started": 100.1},
             # another job's end with the same attempt key ends nothing of "a"
             {"job": "z", "key": "a", "exit_code": 0}]
    (tmp_path / EXIT_RECORD).write_text(
        "[" * 100_000 + "\n"  # a line nested beyond reason costs only itself
        + "".join(json.dumps(line) + "\n" for line in lines) + '{"torn": ')
    found, unnamed = keeper.open_starts(str(tmp_path), 7, since=0.0)
    assert sorted(found) == [11, 15, 16]
    assert found[15][1]["key"] == "d1" and found[11][0] == str(tmp_path / EXIT_RECORD)
    assert [line["key"] for _, line in unnamed] == ["f"]
    assert keeper.open_starts(str(tmp_path), 7, since=time.time() + 60) == ({}, [])  # older
    assert keeper.open_starts(str(tmp_path / "missing"), 7, since=0.0) == ({}, [])
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / EXIT_RECORD).symlink_to(tmp_path / EXIT_RECORD)  # never read through a link
    assert keeper.open_starts(str(linked), 7, since=0.0) == ({}, [])


def test_open_starts_reads_garbage_pids_and_codes_as_nothing_and_the_first_start_stands(
        tmp_path):
    """What anyone can append to the record: pids that would reach a system call as -1
    (every process), 0 (the group), an overflow or a bool; ends whose exit code is not an
    int; a later start naming another process.  None of them starts, ends or renames an
    attempt — the keeper reads the record as resume does."""
    lines = [{"job": "a", "key": "a", "pid": 11, "supervisor": 7},
             {"job": "a", "key": "a", "pid": os.getpid(), "supervisor": 7},  # forged later start
             {"job": "a", "key": "a", "exit_code": "0"}, {"job": "a", "key": "a", "exit_code": None},
             {"job": "a", "key": "a", "exit_code": True},
             {"job": "b", "key": "b", "pid": -1, "supervisor": 7},
             {"job": "c", "key": "c", "pid": 0, "supervisor": 7},
             {"job": "d", "key": "d", "pid": 2 ** 70, "supervisor": 7},
             {"job": "e", "key": "e", "pid": True, "supervisor": 7},
             {"job": "f", "key": "f", "starting": 100.0, "supervisor": 7},
             {"job": "f", "key": "f", "starting": 300.0, "supervisor": 7},  # the first stands
             {"job": "g", "key": "g", "pid": 12, "supervisor": 7},
             {"job": "g", "key": "g", "exit_code": 0}]
    (tmp_path / EXIT_RECORD).write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    found, unnamed = keeper.open_starts(str(tmp_path), 7, since=0.0)
    assert sorted(found) == [11] and found[11][1]["pid"] == 11
    assert [(line["key"], line["starting"]) for _, line in unnamed] == [("f", 100.0)]
    for pid in (-1, 0, 2 ** 70, True, "12", None):
        assert not keeper.valid_pid(pid) and not keeper._ours(pid)  # never a system call


def test_whatever_follows_a_start_in_the_record_never_hides_it_from_the_keeper(
        tmp_path, monkeypatch):
    """The record is read whole, not its end: a 2 MB line, a flood of another writer's
    lines (several MB) and a start line of half a megabyte (a job whose output folder
    held thousands of run-status files) leave every open start found; a line over
    LINE_MAX is skipped unread, the lines after it still read."""
    big_before = {f"/data/out/{i:05d}.run_status.json": [i, 1.0] for i in range(12_000)}
    start = {"job": "a", "key": "a", "pid": 11, "supervisor": 7, "before": big_before}
    assert len(json.dumps(start)) > 300_000
    flood = json.dumps({"job": "x", "key": "x", "pid": 99, "supervisor": 1}) + "\n"
    (tmp_path / EXIT_RECORD).write_text(
        "\n" + json.dumps(start) + "\n" + "y" * 2_000_000 + "\n" + flood * 100_000
        + json.dumps({"job": "b", "key": "b", "pid": 12, "supervisor": 7}))  # the newest: no \n
    assert (tmp_path / EXIT_RECORD).stat().st_size > 7_000_000  # (many reads, far past a tail)
    found, _ = keeper.open_starts(str(tmp_path), 7, since=0.0)
    assert sorted(found) == [11, 12]
    monkeypatch.setattr(keeper, "LINE_MAX", 200_000)  # now the start itself is too long
    monkeypatch.setattr(keeper, "_CHUNK", 4096)  # (lines cut across many reads)
    found, _ = keeper.open_starts(str(tmp_path), 7, since=0.0)
    assert sorted(found) == [12]


def test_garbage_after_a_jobs_start_never_blinds_or_crashes_the_keeper(tmp_path):
    """The runner's start line, then hostile lines for the same attempt (a bad pid, a
    forged start naming the test's own process, ends with non-int codes), then the runner
    SIGKILLed: the keeper survives, records the job's real end, and resume's reading of
    the record finds the same start and that end."""
    logs = tmp_path / "night_logs"
    record = logs / EXIT_RECORD
    garbage = [{"key": "k1", "job": "job", "supervisor": 0, "pid": -1},
               {"key": "k1", "job": "job", "pid": 2 ** 70},
               {"key": "k1", "job": "job", "pid": os.getpid(), "started": 1.0},
               {"key": "k1", "job": "job", "exit_code": "0"},
               {"key": "k1", "job": "job", "exit_code": None}]
    then = textwrap.dedent(f"""
        import json as _j
        with open({str(record)!r}, "a") as out:
            for line in {garbage!r}:
                line.setdefault("supervisor", int(os.environ["{keeper.KEEPER_ENV}"]))
                out.write(_j.dumps(line) + "\\n")
        os.kill(os.getpid(), signal.SIGKILL)
    """).replace("\n", "\n        ")
    job = ["/bin/sh", "-c", "sleep 0.3; exit 4"]
    proc = _keep(tmp_path, _fake_runner(logs, job, then), stderr=subprocess.PIPE)
    assert proc.wait(timeout=30) == 128 + signal.SIGKILL
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert "Traceback" not in err
    ends = [ln for ln in _ends(tmp_path) if ln.get("recorded_by") == "keeper"]
    assert len(ends) == 1 and ends[0]["exit_code"] == 4
    from spacrq.queue import adopt
    from spacrq.queue.model import Job
    job_ = Job(id="job", module="command", settings={})
    job_.log_path, job_.started = str(logs / "01_job.log"), "k1"
    seen = adopt.examine(job_)
    assert seen.state == adopt.FINISHED and seen.exit_code == 4
    assert seen.start["pid"] != os.getpid()  # the runner's start, not the forged one


def test_the_keeper_writes_only_to_a_log_its_line_names_in_the_records_folder(tmp_path):
    record = str(tmp_path / EXIT_RECORD)
    assert keeper.log_of(record, {"log": "01_a.log"}) == str(tmp_path / "01_a.log")
    for bad in ("../x.log", "/etc/x.log", "sub/01_a.log", ".hidden.log", "01_a.txt", "",
                None, 5, "a\0.log", "..", "a\\b.log"):
        assert keeper.log_of(record, {"log": bad}) == "", bad
    assert keeper.log_of(record, {}) == ""


def test_a_job_is_named_from_its_starting_line_only_by_its_session_and_its_start(tmp_path):
    unnamed = [("r1", {"key": "old", "starting": 100.0}), ("r2", {"key": "new", "starting": 200.0})]
    assert keeper._match(unnamed, 42, (42, 200.05))[1]["key"] == "new"
    assert keeper._match(unnamed, 42, (42, 100.2))[1]["key"] == "old"
    assert keeper._match(unnamed, 42, (41, 200.05)) is None  # not a session leader: a leftover
    assert keeper._match(unnamed, 42, (42, 150.0)) is None  # started long after: not that job
    assert keeper._match(unnamed, 42, None) is None
    me = keeper._identity(os.getpid())
    assert me is not None and me[0] == os.getsid(0)
    assert abs(me[1] - psutil.Process().create_time()) < 1.0


def test_a_job_whose_runner_died_mid_job_is_recorded_by_the_keeper(tmp_path):
    """The runner is SIGKILLed while its job runs: the job becomes the keeper's child, and
    its real end (exit code 3) is written, durably, to its record and noted in its log."""
    job = ["/bin/sh", "-c", "sleep 0.3; exit 3"]
    proc = _keep(tmp_path, _fake_runner(tmp_path / "night_logs", job,
                                        "os.kill(os.getpid(), signal.SIGKILL)"))
    assert proc.wait(timeout=30) == 128 + signal.SIGKILL  # the runner's end, as a shell says it
    ends = _ends(tmp_path)
    assert len(ends) == 1 and ends[0]["exit_code"] == 3 and ends[0]["key"] == "k1"
    assert ends[0]["recorded_by"] == "keeper" and ends[0]["peak_rss_bytes"] is None
    log = (tmp_path / "night_logs" / "01_job.log").read_text()
    assert "with exit code 3" in log and "its runner had died" in log


def test_a_job_seen_ended_but_not_reaped_when_its_runner_died_is_recorded(tmp_path):
    """The narrowest moment: the runner saw the end (``waitid(WNOWAIT)``) and died before it
    wrote it down or reaped it.  The zombie is the keeper's, and so is its end."""
    then = ("os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)\n"
            "        os.kill(os.getpid(), signal.SIGKILL)")
    proc = _keep(tmp_path, _fake_runner(tmp_path / "night_logs", ["/bin/sh", "-c", "exit 5"],
                                        then))
    assert proc.wait(timeout=30) == 128 + signal.SIGKILL
    assert [e["exit_code"] for e in _ends(tmp_path)] == [5]


def test_a_job_reaped_by_a_living_runner_is_not_recorded_twice(tmp_path):
    """A runner that reaped and recorded its job itself leaves the keeper nothing to write."""
    then = textwrap.dedent("""\
        os.waitpid(pid, 0)
                with open(os.environ["RECORD"], "a") as out:
                    out.write(json.dumps({"key": "k1", "job": "job", "exit_code": 0}) + "\\n")
                raise SystemExit(4)""")
    env = dict(os.environ, RECORD=str(tmp_path / "night_logs" / EXIT_RECORD))
    proc = _keep(tmp_path, _fake_runner(tmp_path / "night_logs", ["/bin/true"], then), env=env)
    assert proc.wait(timeout=30) == 4  # the runner's own exit code
    assert [e.get("recorded_by") for e in _ends(tmp_path)] == [None]


def test_the_keeper_passes_sigterm_on_to_its_runner(tmp_path):
    ready = tmp_path / "ready"
    code = (f"import signal, time, pathlib\n"
            f"signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(SystemExit(7)))\n"
            f"pathlib.Path({str(ready)!r}).write_text('')\n"
            f"time.sleep(60)\n")
    proc = _keep(tmp_path, code)
    wait_until(ready.exists, what="the runner to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 7  # the runner decided how to end, and the keeper says so


def test_start_runner_names_the_runner_and_its_keeper(tmp_path):
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", settings={"argv": ["sh", "-c", "sleep 0.3"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    ref = start_runner(path)
    try:
        state = wait_until(lambda: (s := runner_state(path)) and s.get("state") != "starting"
                           and s, what="the runner's record")
        assert state["pid"] == ref.pid  # the runner itself, not its keeper
        assert state["keeper"] == psutil.Process(ref.pid).ppid() != ref.pid
    finally:
        reap(ref.pid)
    job = load_queue(path).jobs[0]
    start = next(ln for ln in read_jsonl(exit_record_path(job.log_path)) if "pid" in ln)
    assert job.status == "success" and start["supervisor"] == state["keeper"]


def _direct_queue(tmp_path: Path) -> Path:
    queue = Queue(name="night", max_consecutive_failures=0)
    queue.add(Job(module="command", id="ok", settings={"argv": ["/bin/sh", "-c", "echo hi"]}))
    queue.add(Job(module="command", id="bad", settings={"argv": ["/bin/sh", "-c", "exit 3"]}))
    broken = tmp_path / "broken.sh"  # there and executable, but its interpreter is not
    broken.write_text("#!/no/such/interpreter\n")
    broken.chmod(0o755)
    queue.add(Job(module="command", id="gone", settings={"argv": [str(broken)]}))
    queue.add(Job(module="command", id="leaves", cwd=str(tmp_path), settings={
        "argv": ["/bin/sh", "-c", "sleep 60 & echo $! > left.pid"]}))
    queue.add(Job(module="command", id="slow", timeout=0.5,
                  settings={"argv": ["/bin/sh", "-c", "exec sleep 60"]}))
    queue.add(Job(module="command", id="last", settings={"argv": ["/bin/true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    return path


def test_jobs_started_directly_end_as_under_a_supervisor(tmp_path, monkeypatch):
    """Every way a job ends, through the runner's own starts: its status and exit code, its
    start and end in its exit record (naming the keeper), what it left in its group stopped
    before the next job, a timeout stopped, and a program that is not there said so."""
    monkeypatch.setenv("SPACRQ_GRACE", "0.5")
    path = _direct_queue(tmp_path)
    starter = DirectStarter(keeper=os.getppid())  # (this process stands in for a kept runner)
    run_queue(load_queue(path), path, supervisor=starter)
    jobs = {j.id: j for j in load_queue(path).jobs}
    assert {i: (j.status, j.exit_code) for i, j in jobs.items() if i != "gone"} == {
        "ok": ("success", 0), "bad": ("failed", 3), "leaves": ("success", 0),
        "slow": ("failed", jobs["slow"].exit_code), "last": ("success", 0)}
    assert jobs["gone"].status == "failed" and "broken.sh" in (jobs["gone"].error or "")
    assert jobs["slow"].failure_kind == "Timeout"
    for jid in ("ok", "bad", "leaves", "last"):
        lines = [ln for ln in read_jsonl(exit_record_path(jobs[jid].log_path))
                 if ln.get("job") == jid]  # (the queue's record: every job's lines)
        start = [ln for ln in lines if "pid" in ln and "exit_code" not in ln]
        end = [ln for ln in lines if "exit_code" in ln]
        assert start and start[0]["supervisor"] == os.getppid(), jid
        assert [e["exit_code"] for e in end] == [jobs[jid].exit_code], jid
        assert "peak_rss_bytes" in end[0]
    left = pid_in(tmp_path / "left.pid")
    assert left and wait_until(lambda: not psutil.pid_exists(left), what="the leftover's end")
    assert "left processes running in its group" in Path(jobs["leaves"].log_path).read_text()
    assert "hi" in Path(jobs["ok"].log_path).read_text()
    assert "# finished" in Path(jobs["bad"].log_path).read_text()


def test_a_runner_whose_keeper_is_gone_starts_its_jobs_under_a_supervisor(tmp_path):
    """No keeper (its parent is not the one named): the jobs go through a supervisor
    process, which outlives the runner, instead."""
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", settings={"argv": ["/bin/true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    fallback = Supervisor()
    result = run_queue(load_queue(path), path,
                       supervisor=DirectStarter(keeper=os.getppid() + 10 ** 6, fallback=fallback))
    assert result.ok
    start = next(ln for ln in read_jsonl(exit_record_path(load_queue(path).jobs[0].log_path))
                 if "pid" in ln)
    assert start["supervisor"] not in (os.getpid(), os.getppid())  # the supervisor's pid


def test_a_foreground_run_is_kept_and_a_killed_runners_job_is_recorded_not_rerun(tmp_path):
    """``spacrq queue run`` in a terminal: the command's process becomes the keeper.  Its
    runner SIGKILLed mid-job, the job's end is recorded by the keeper, the command exits
    137 as a killed one would, and resume records the job without running it again."""
    queue = Queue(name="night")
    queue.add(Job(module="command", id="plate", cwd=str(tmp_path), settings={"argv": [
        "sh", "-c", "echo run >> plate.runs; echo $$ > plate.pid; "
                    "while [ ! -e go ]; do sleep 0.02; done"]}))
    queue.add(Job(module="command", id="next", settings={"argv": ["true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    proc = subprocess.Popen([sys.executable, "-m", "spacrq", "queue", "run", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        job = wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")
        state = runner_state(path)
        assert state["keeper"] == proc.pid != state["pid"]
        os.kill(state["pid"], signal.SIGKILL)
        reap(state["pid"])
        (tmp_path / "go").write_text("")
        assert proc.wait(timeout=30) == 128 + signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not psutil.pid_exists(job)
    plate = load_queue(path).jobs[0]
    ends = [ln for ln in read_jsonl(exit_record_path(plate.log_path))
            if "exit_code" in ln and ln.get("job") == "plate"]
    assert [(e["exit_code"], e["recorded_by"]) for e in ends] == [(0, "keeper")]
    result = resume_queue(path)
    assert result.ok and [j.status for j in load_queue(path).jobs] == ["success"] * 2
    assert (tmp_path / "plate.runs").read_text() == "run\n"


def test_each_transitions_fsync_overlaps_the_start_of_the_job_it_covers(tmp_path, monkeypatch):
    """The journal's lines for a job's start (and the last job's end) are written before
    the job starts — a runner killed at the start loses nothing — and fsync'd while it
    runs: the fsync that covers them comes after the start, not as a wait before it; one
    runs at a time, so it is over by the time the job after it has started and begins its
    own, however slow the disk."""
    from spacrq.queue import journal as journal_mod, supervise as supervise_mod
    queue = Queue(name="night")
    for i in range(4):
        queue.add(Job(module="command", id=f"j{i}", settings={"argv": ["/bin/true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    events: list[tuple[str, int]] = []  # ("start:ID", journal bytes written) / ("fsync", bytes)
    waits: list[int] = []  # where in events the runner's own thread made a journal fsync
    journal_file = tmp_path / "night_logs" / "journal.jsonl"
    real_spawn, real_fsync = supervise_mod._spawn, os.fsync

    def spawn(argv, log_fd, cwd, env):
        job = env["SPACRQ_JOB_ID"]
        text = journal_file.read_text()
        assert any(json.loads(ln).get("job") == job and
                   json.loads(ln).get("set", {}).get("status") == "running"
                   for ln in text.splitlines() if ln.strip()), "started before journalled"
        events.append((f"start:{job}", len(text.encode())))
        return real_spawn(argv, log_fd, cwd, env)

    def fsync(fd):
        try:
            ours = os.path.samefile(f"/proc/self/fd/{fd}", journal_file)
        except OSError:
            ours = False
        if not ours:
            return real_fsync(fd)
        size = os.fstat(fd).st_size
        if threading.current_thread() is threading.main_thread():
            waits.append(len(events))  # (an fsync the runner itself waited for)
        events.append(("fsync", size))
        time.sleep(0.02)  # (a slow disk: the next fsync must still wait for it to be over)
        real_fsync(fd)
        events.append(("synced", size))

    monkeypatch.setattr(supervise_mod, "_spawn", spawn)
    monkeypatch.setattr(journal_mod.os, "fsync", fsync)
    result = run_queue(load_queue(path), path, persistence="file",
                       supervisor=DirectStarter(keeper=os.getppid()))
    assert result.ok
    starts = [i for i, (what, _) in enumerate(events) if what.startswith("start:")]
    assert [events[i][0] for i in starts] == [f"start:j{i}" for i in range(4)]
    for n, at in enumerate(starts):
        written = events[at][1]
        # not waited for before the start: no fsync of the runner's own thread since the job
        # before started (the fsync thread, scheduled late, may begin one that happens to
        # cover these lines too: the runner does not wait for it)
        since = starts[n - 1] if n else 0
        assert not [w for w in waits if since <= w < at], events
        upto = starts[n + 2] if n + 2 < len(starts) else len(events)
        assert any(what == "synced" and size >= written  # durable by the job after's start
                   for what, size in events[at + 1:upto]), events
    syncs = [what for what, _ in events if what in ("fsync", "synced")]
    assert syncs == ["fsync", "synced"] * (len(syncs) // 2), events  # one at a time


def test_the_runner_under_a_keeper_still_hears_ctrl_c(tmp_path):
    """The keeper ignores SIGINT (the runner's group gets it and the runner decides), but an
    ignored signal stays ignored through exec: the runner never heard Ctrl-C."""
    code = ("import signal, sys\n"
            "sys.exit(0 if signal.getsignal(signal.SIGINT) is signal.default_int_handler "
            "else 5)\n")
    assert _keep(tmp_path, code).wait(timeout=30) == 0


def test_a_sigint_sent_to_the_keeper_reaches_its_runner(tmp_path):
    """``kill -INT`` of the keeper — the process an operator sees — reached nobody (a
    terminal's Ctrl-C reaches the whole group; a kill does not)."""
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGINT, lambda *_: sys.exit(3))\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    proc = _keep(tmp_path, code, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 3  # (the runner's exit code, passed on)
    finally:
        if proc.poll() is None:
            proc.terminate()  # (passed on to the runner too: nothing is left behind)
        proc.wait(timeout=30)
        proc.stdout.close()


def test_a_job_its_runner_never_named_is_named_and_recorded_by_the_keeper(tmp_path):
    """The runner died between starting the job and writing down its pid: its "starting"
    line and the job's own session and start time let the keeper name it (so resume adopts
    it) and record its end."""
    logs = tmp_path / "night_logs"
    record = str(logs / EXIT_RECORD)
    code = textwrap.dedent(f"""
        import json, os, signal, time
        open({str(logs / "01_job.log")!r}, "a").close()
        with open({record!r}, "a") as out:
            out.write(json.dumps({{"key": "k1", "job": "job", "log": "01_job.log", "starting": time.time(),
                                  "supervisor": int(os.environ["{keeper.KEEPER_ENV}"])}}) + "\\n")
        os.posix_spawn("/bin/sh", ["/bin/sh", "-c", "sleep 0.5; exit 4"], dict(os.environ),
                       setsid=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = _keep(tmp_path, code)
    named = wait_until(lambda: next((ln for ln in read_jsonl(record) if "pid" in ln), None),
                       what="the keeper to name the job")
    assert named["named_by"] == "keeper" and psutil.Process(named["pid"]).is_running()
    assert proc.wait(timeout=30) == 128 + signal.SIGKILL
    assert [(e["exit_code"], e["pid"]) for e in _ends(tmp_path)] == [(4, named["pid"])]


def test_a_process_whose_main_thread_ended_while_another_runs_is_dying(tmp_path):
    """A runner killed with a second thread is, for a moment, such a process — it cannot be
    waited for yet, and its jobs are already the keeper's — and a live one is not."""
    code = ("import ctypes, threading, time, os\n"
            "threading.Thread(target=lambda: (time.sleep(30), os._exit(0))).start()\n"
            "time.sleep(0.1)\n"
            "ctypes.CDLL(None).pthread_exit(None)\n")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        assert not keeper._dying(os.getpid())
        wait_until(lambda: keeper._dying(proc.pid), what="its main thread to end")
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.parametrize("named", [True, False], ids=["its-pid-written", "only-its-starting"])
def test_a_job_that_ended_as_its_runner_died_thread_by_thread_is_recorded(tmp_path, named):
    """A runner with a second thread (numpy's) that is killed hands its jobs to the keeper
    before it can itself be waited for: a job that had ended is written down then — by
    its pid, or by its "starting" line when its runner died before writing the pid —
    never taken for a leftover and forgotten (resume would run it again)."""
    logs = tmp_path / "night_logs"
    record = str(logs / EXIT_RECORD)
    pid_line = ('out.write(json.dumps({"key": "k1", "job": "job", "log": "01_job.log", "pid": pid, "started": '
                'time.time(), "supervisor": keeper}) + "\\n")') if named else "pass"
    code = textwrap.dedent(f"""
        import ctypes, json, os, threading, time
        keeper = int(os.environ["{keeper.KEEPER_ENV}"])
        open({str(logs / "01_job.log")!r}, "a").close()
        with open({record!r}, "a") as out:
            out.write(json.dumps({{"key": "k1", "job": "job", "log": "01_job.log", "starting": time.time(),
                                  "supervisor": keeper}}) + "\\n")
            pid = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", "exit 4"], dict(os.environ),
                                 setsid=True)
            {pid_line}

        def end_of_the_runner():  # once the job ended (a zombie no runner thread will reap)
            while open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                time.sleep(0.01)
            os._exit(0)
        threading.Thread(target=end_of_the_runner).start()
        ctypes.CDLL(None).pthread_exit(None)  # the main thread ends first, as it may when killed
    """)
    proc = _keep(tmp_path, code)
    assert proc.wait(timeout=30) == 0
    assert [(e["exit_code"], e["recorded_by"]) for e in _ends(tmp_path)] == [(4, "keeper")]


def test_a_job_that_does_not_lead_its_session_yet_when_its_runner_dies_is_named(tmp_path):
    """A job started with a working folder changes folder before it leads its own session;
    a runner killed in between leaves a job the keeper cannot name at once.  The keeper
    waits for it to lead its session, names it and records its end, instead of ending and
    leaving it to run unrecorded (resume would run it again)."""
    logs = tmp_path / "night_logs"
    record = str(logs / EXIT_RECORD)
    job = "import os, time; time.sleep(0.5); os.setsid(); time.sleep(0.5); os._exit(4)"
    code = textwrap.dedent(f"""
        import json, os, signal, sys, time
        open({str(logs / "01_job.log")!r}, "a").close()
        with open({record!r}, "a") as out:
            out.write(json.dumps({{"key": "k1", "job": "job", "log": "01_job.log", "starting": time.time(),
                                  "supervisor": int(os.environ["{keeper.KEEPER_ENV}"])}}) + "\\n")
        os.posix_spawn(sys.executable, [sys.executable, "-c", {job!r}], dict(os.environ))
        os.kill(os.getpid(), signal.SIGKILL)  # (before the job leads its session)
    """)
    proc = _keep(tmp_path, code)
    assert proc.wait(timeout=60) == 128 + signal.SIGKILL
    lines = read_jsonl(record)
    assert [ln.get("named_by") for ln in lines if "pid" in ln and "exit_code" not in ln] == [
        "keeper"]
    assert [(e["exit_code"], e["recorded_by"]) for e in _ends(tmp_path)] == [(4, "keeper")]


def test_what_a_dead_runners_job_left_in_its_group_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACRQ_GRACE", "0.5")
    left = tmp_path / "left.pid"
    job = ["/bin/sh", "-c", f"sleep 60 & echo $! > {left}; sleep 0.3"]
    proc = _keep(tmp_path, _fake_runner(tmp_path / "night_logs", job,
                                        "os.kill(os.getpid(), signal.SIGKILL)"))
    assert proc.wait(timeout=30) == 128 + signal.SIGKILL
    assert not psutil.pid_exists(pid_in(left))
    assert "they were terminated by the runner's keeper" in \
        (tmp_path / "night_logs" / "01_job.log").read_text()


def test_the_keeper_does_not_wait_for_a_daemon_a_job_left(tmp_path):
    """A daemon started along the way is the keeper's orphan, not a job: once the runner
    ended and no job is left, the keeper ends (a foreground run returns at once)."""
    stray = tmp_path / "stray.pid"
    code = (f"import os\n"
            f"pid = os.posix_spawn('/bin/sleep', ['sleep', '30'], dict(os.environ), setsid=True)\n"
            f"open({str(stray)!r}, 'w').write(str(pid))\n")
    proc = _keep(tmp_path, code)
    try:
        assert proc.wait(timeout=10) == 0
        assert psutil.Process(pid_in(stray)).is_running()  # left alone, as init would
    finally:
        if pid_in(stray):
            os.kill(pid_in(stray), signal.SIGKILL)


@pytest.mark.parametrize("fifo", ["record", "log"])
def test_an_exit_record_or_log_that_is_a_fifo_never_hangs_the_run(tmp_path, capfd, fifo):
    """A FIFO planted in a job's exit record or log blocked the runner's open for good (and
    SIGTERM could not end it): now it is refused — the record is not written (said), the
    log makes the job fail in a sentence — and the run goes on."""
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", settings={"argv": ["/bin/true"]}))
    queue.add(Job(module="command", id="b", settings={"argv": ["/bin/true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    (tmp_path / "night_logs").mkdir()
    os.mkfifo(tmp_path / "night_logs" / (EXIT_RECORD if fifo == "record" else "01_a.log"))
    run_queue(load_queue(path), path, supervisor=DirectStarter(keeper=os.getppid()))
    a, b = load_queue(path).jobs
    assert b.status == "success"
    if fifo == "log":
        assert a.status == "failed" and "could not open its log" in (a.error or "")
    else:
        assert a.status == "success" and "its exit record" in capfd.readouterr().err


def test_an_end_line_beside_a_job_still_running_is_not_its_end(tmp_path):
    """Only a reaped job has an end: one written while its process runs (by the job itself)
    must not make resume record it finished and start the next job beside it."""
    from spacrq.procs import ProcessRef
    from spacrq.queue.adopt import RUNNING, examine
    log = tmp_path / "01_a.log"
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True,  # (as a job runs)
                               env=dict(os.environ, SPACRQ_JOB_ID="a", SPACRQ_JOB_LOG=str(log)))
    try:
        ref = ProcessRef.of(sleeper.pid)
        Path(exit_record_path(str(log))).write_text(
            json.dumps({"job": "a", "key": "k", "pid": ref.pid, "started": ref.started}) + "\n"
            + json.dumps({"job": "a", "key": "k", "exit_code": 0}) + "\n")
        job = Job(module="command", id="a", settings={"argv": ["true"]})
        job.log_path, job.started = str(log), "k"
        assert examine(job).state == RUNNING
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_full_disk_when_the_runner_takes_its_lock_is_no_traceback(tmp_path, monkeypatch):
    """The holder's name written into runner.lock is only for a second runner's refusal: a
    full disk there (ENOSPC) escaped as a traceback before any job ran."""
    import errno
    from spacrq.queue import locks
    real = os.pwrite

    def pwrite(fd, data, offset):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(locks.RUNNER_LOCK_FILE):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(locks.os, "pwrite", pwrite)
    lock = locks.RunnerLock(tmp_path / "night_logs").acquire()
    try:
        assert locks.runner_holds(tmp_path / "night_logs")  # held all the same
    finally:
        lock.release()
