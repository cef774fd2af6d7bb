"""The runner dies: the file told the truth all along, and nothing finished runs again."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from spacrq.procs import is_alive
from spacrq.queue import Job, Queue, load_queue, resume_queue, save_queue
from spacrq.queue.adopt import examine
from spacrq.queue.model import now_iso
from spacrq.queue.runner import request_stop, runner_state, start_runner
from spacrq.queue.store import read_queue_document
from spacrq.queue.supervise import exit_record_path
from spacrq.runfiles import read_jsonl
from waiting import pid_in, reap, wait_until  # tests/waiting.py (tests/ is on the path)



def _traced(jid, tmp_path, seconds=0.25):
    """A job that writes when it starts and when it ends, to a trace the test reads."""
    script = (f"echo start:{jid} >> trace; sleep {seconds}; echo end:{jid} >> trace")
    return Job(module="command", id=jid, settings={"argv": ["sh", "-c", script]},
               cwd=str(tmp_path))


def _queue(tmp_path, jobs, name="night"):
    queue = Queue(name=name, max_consecutive_failures=0)
    for job in jobs:
        queue.add(job)
    path = tmp_path / f"{name}.queue.json"
    save_queue(queue, path)
    return path


def _trace(tmp_path):
    try:
        return (tmp_path / "trace").read_text().split()
    except FileNotFoundError:
        return []


def _running_by_trace(lines):
    started = [ln[6:] for ln in lines if ln.startswith("start:")]
    ended = {ln[4:] for ln in lines if ln.startswith("end:")}
    return {j for j in started if j not in ended}



class Sampler(threading.Thread):
    """Reads the queue file (and the trace) as fast as it can while the queue runs."""

    def __init__(self, path, tmp_path):
        super().__init__(daemon=True)
        self.path, self.tmp_path = path, tmp_path
        self.done = threading.Event()
        self.samples = 0
        self.problems: list[str] = []

    def run(self):
        while not self.done.is_set():
            before = _running_by_trace(_trace(self.tmp_path))
            try:
                doc = read_queue_document(self.path)
            except Exception as exc:  # noqa: BLE001 — a file that does not parse is the bug
                self.problems.append(f"unparseable: {exc}")
                continue
            after = _running_by_trace(_trace(self.tmp_path))
            status = {j["id"]: j.get("status") for j in doc["jobs"]}
            for jid in before & after:  # running for the whole read: the file must say so
                if status.get(jid) != "running":
                    self.problems.append(f"{jid} runs but the file says {status.get(jid)}")
            self.samples += 1
            time.sleep(0.003)


#: When to kill the runner: each a condition the test waits for, aimed at the windows that
#: matter — before any job, mid-job, the instant a job ended (before its runner saw it), and
#: the instant the last job ended (the runner finishing).
MOMENTS = {
    "before_the_first_job": lambda lines: True,
    "during_the_second_job": lambda lines: "start:j1" in lines,
    "just_after_a_job_ended": lambda lines: "end:j2" in lines,
    "during_the_fourth_job": lambda lines: "start:j3" in lines,
    "as_the_last_job_ends": lambda lines: "end:j4" in lines,
}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_sigkill_at_any_moment_loses_nothing_and_reruns_nothing(tmp_path, moment):
    names = [f"j{i}" for i in range(5)]
    path = _queue(tmp_path, [_traced(n, tmp_path, 0.15) for n in names])
    sampler = Sampler(path, tmp_path)
    ref = start_runner(path)
    sampler.start()
    try:
        wait_until(lambda: (runner_state(path) or {}).get("pid") == ref.pid, what="the runner")
        wait_until(lambda: MOMENTS[moment](_trace(tmp_path)), what=moment)
        os.kill(ref.pid, signal.SIGKILL)
        reap(ref.pid)
        killed = load_queue(path)
        assert all(j.status in ("pending", "running", "success") for j in killed.jobs)
        result = resume_queue(path)
    finally:
        sampler.done.set()
        sampler.join()
    assert not sampler.problems, sampler.problems[:3]
    assert sampler.samples > 10
    assert result.ok and [j.status for j in load_queue(path).jobs] == ["success"] * 5
    starts = [ln for ln in _trace(tmp_path) if ln.startswith("start:")]
    assert sorted(starts) == sorted(f"start:{n}" for n in names)  # each job started once


def test_the_file_names_the_running_jobs_process_while_it_runs(tmp_path):
    """A small queue's file alone shows what the journal holds: a job that runs has its
    ``process`` (pid) in the file, not only in the journal (a ``jq`` reader saw null)."""
    job = Job(module="command", id="plate", cwd=str(tmp_path), settings={"argv": [
        "sh", "-c", "echo $$ > plate.pid; while [ ! -e go ]; do sleep 0.02; done"]})
    path = _queue(tmp_path, [job])
    ref = start_runner(path)
    try:
        pid = wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")

        def named():
            entry = read_queue_document(path)["jobs"][0]
            return entry["status"] == "running" and (entry.get("process") or {}).get("pid")
        assert wait_until(named, what="the file to name the job's process") == pid
    finally:
        (tmp_path / "go").write_text("")
        reap(ref.pid)
    assert read_queue_document(path)["jobs"][0]["process"] is None  # ended: no process


def test_a_job_that_ends_while_its_runner_is_dead_is_recorded_not_rerun(tmp_path, capsys):
    job = Job(module="command", id="plate", cwd=str(tmp_path), settings={"argv": [
        "sh", "-c", "echo run >> plate.runs; echo $$ > plate.pid; "
                    "while [ ! -e go ]; do sleep 0.02; done; exit 3"]})
    path = _queue(tmp_path, [job, Job(module="command", id="next", settings={"argv": ["true"]})])
    ref = start_runner(path)
    pid = wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")
    os.kill(ref.pid, signal.SIGKILL)
    reap(ref.pid)
    (tmp_path / "go").write_text("")
    wait_until(lambda: not is_alive(pid), what="the job to end")
    left = load_queue(path).jobs[0]
    wait_until(lambda: examine(left).state == "finished", what="the supervisor's record")
    from spacrq import cli  # what the operator reads before resuming: the truth, and the step
    assert cli.main(["queue", "status", str(path)]) == 0
    said = capsys.readouterr().out
    assert "with exit code 3 while no runner watched it" in said
    assert f"'spacrq queue resume {path}' records that, without running it again" in said
    result = resume_queue(path)
    plate, after = load_queue(path).jobs
    assert plate.status == "failed" and plate.exit_code == 3  # its real outcome, recorded
    assert after.status == "success" and not result.ok
    assert (tmp_path / "plate.runs").read_text() == "run\n"  # never run a second time
    assert "which is not run again" in Path(plate.log_path).read_text()


def test_status_says_a_stop_is_asked_and_what_a_job_left_running_will_become(tmp_path, capsys):
    from spacrq import cli
    job = Job(module="command", id="plate", cwd=str(tmp_path), settings={"argv": [
        "sh", "-c", "echo $$ > plate.pid; while [ ! -e go ]; do sleep 0.02; done"]})
    path = _queue(tmp_path, [job, Job(module="command", id="next", settings={"argv": ["true"]})])
    ref = start_runner(path)
    try:
        pid = wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")
        request_stop(path)
        assert cli.main(["queue", "status", str(path)]) == 0
        assert "a stop is asked: it stops after the running job" in capsys.readouterr().out
        os.kill(ref.pid, signal.SIGKILL)
        reap(ref.pid)
        assert cli.main(["queue", "status", str(path)]) == 0
        said = capsys.readouterr().out
        assert f"still running (process {pid}) with no runner watching it" in said
        assert "adopts it" in said and "a stop is asked" not in said
    finally:
        (tmp_path / "go").write_text("")
        wait_until(lambda: not is_alive(pid), what="the job to end")


def test_an_adopted_job_is_stopped_at_its_timeout_and_recorded_with_its_real_end(tmp_path):
    job = Job(module="command", id="plate", cwd=str(tmp_path), timeout=1.5, settings={"argv": [
        "sh", "-c", "echo $$ > plate.pid; while [ ! -e go ]; do sleep 0.02; done"]})
    path = _queue(tmp_path, [job])
    ref = start_runner(path)
    pid = wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")
    os.kill(ref.pid, signal.SIGKILL)
    reap(ref.pid)
    try:
        result = resume_queue(path)
    finally:
        (tmp_path / "go").write_text("")
    plate = load_queue(path).jobs[0]
    assert not result.ok and not is_alive(pid)
    assert (plate.status, plate.failure_kind, plate.exit_code) == ("failed", "Timeout", -15)
    assert "# timeout: still running after 1.5s" in Path(plate.log_path).read_text()


def test_a_dead_runners_journal_is_never_applied_to_another_queue_copied_over_the_file(
        tmp_path):
    """The journal's transitions belong to the queue that wrote them: a different queue
    copied over the file (same job ids) showed its jobs 'success' and never ran them."""
    path = _queue(tmp_path, [_traced(f"j{i}", tmp_path, 0.3) for i in range(3)], name="q")
    ref = start_runner(path)
    wait_until(lambda: "end:j1" in _trace(tmp_path), what="two jobs to end")
    os.kill(ref.pid, signal.SIGKILL)
    reap(ref.pid)
    other = Queue(name="q", max_consecutive_failures=0)
    for i in range(3):
        other.add(Job(module="command", id=f"j{i}", cwd=str(tmp_path), settings={
            "argv": ["sh", "-c", f"echo new:j{i} >> trace"]}))
    save_queue(other, tmp_path / "other.queue.json")
    path.write_bytes((tmp_path / "other.queue.json").read_bytes())  # cp other.queue.json q.queue.json
    before = load_queue(path)
    assert [j.status for j in before.jobs] == ["pending"] * 3
    assert any("written for another queue" in w for w in before.warnings)
    assert resume_queue(path).ok
    assert [ln for ln in _trace(tmp_path) if ln.startswith("new:")] == ["new:j0", "new:j1", "new:j2"]


def test_a_live_runner_is_seen_and_stopped_whatever_its_record_holds(tmp_path, capsys):
    """Garbage in runner.json made status say 'no runner has run it yet' and stop say
    'nothing to stop' while a job ran; a folder as control.json made stop a traceback."""
    from spacrq import cli
    from spacrq.queue.runner import RUNNER_FILE, logs_dir
    job = Job(module="command", id="plate", cwd=str(tmp_path), settings={"argv": [
        "sh", "-c", "echo $$ > plate.pid; while [ ! -e go ]; do sleep 0.02; done"]})
    path = _queue(tmp_path, [job, Job(module="command", id="next", settings={"argv": ["true"]})])
    ref = start_runner(path)
    try:
        wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")
        wait_until(lambda: (runner_state(path) or {}).get("pid") == ref.pid, what="its record")
        def garbled():  # (written again should its heartbeat rewrite it in between)
            (logs_dir(path) / RUNNER_FILE).write_text("{{{")
            now = runner_state(path)
            return now if now and now.get("problem") else None
        state = wait_until(garbled, what="the record read as garbage")
        assert state["alive"] and state["pid"] == ref.pid and "cannot be read" in state["problem"]
        (logs_dir(path) / RUNNER_FILE).write_text("{{{")
        assert cli.main(["queue", "status", str(path)]) == 0
        assert f"runner running (process {ref.pid}, alive)" in capsys.readouterr().out
        (logs_dir(path) / "control.json").mkdir()
        assert cli.main(["queue", "stop", str(path)]) == 2
        err = capsys.readouterr().err
        assert "could not ask the runner to stop" in err and "Traceback" not in err
        (logs_dir(path) / "control.json").rmdir()
        assert cli.main(["queue", "stop", str(path)]) == 0
        assert f"asked process {ref.pid} to stop after the running job" in capsys.readouterr().out
    finally:
        (tmp_path / "go").write_text("")
        reap(ref.pid)
    assert [j.status for j in load_queue(path).jobs] == ["success", "not_run"]


def test_a_job_whose_outcome_is_unknown_runs_again_and_its_log_says_why(tmp_path):
    path = _queue(tmp_path, [Job(module="command", id="a", cwd=str(tmp_path),
                                 settings={"argv": ["sh", "-c", "echo run >> a.runs"]})])
    queue = load_queue(path)
    queue.jobs[0].status, queue.jobs[0].started = "running", "2026-11-30T01:00:00+00:00"
    queue.jobs[0].log_path = str(tmp_path / "night_logs" / "01_a.log")
    save_queue(queue, path)  # as a runner leaves it when it dies before the job started
    result = resume_queue(path)
    assert result.ok and (tmp_path / "a.runs").read_text() == "run\n"
    assert "outcome of attempt 0 is unknown" in Path(load_queue(path).jobs[0].log_path).read_text()


def test_an_adopted_job_is_aborted_on_request(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACRQ_GRACE", "0.5")
    path = _queue(tmp_path, [
        Job(module="command", id="long", cwd=str(tmp_path),
            settings={"argv": ["sh", "-c", "echo $$ > long.pid; exec sleep 60"]}),
        Job(module="command", id="after", settings={"argv": ["true"]})])
    ref = start_runner(path)
    pid = wait_until(lambda: pid_in(tmp_path / "long.pid"), what="the job to start")
    os.kill(ref.pid, signal.SIGKILL)
    reap(ref.pid)
    again = start_runner(path, resume=True)
    try:
        wait_until(lambda: (runner_state(path) or {}).get("pid") == again.pid
                 and runner_state(path).get("current_job") == "long", what="the adoption")
        request_stop(path, now=True)
    finally:
        reap(again.pid)
    assert not is_alive(pid)
    assert [j.status for j in load_queue(path).jobs] == ["not_run", "not_run"]
    assert runner_state(path)["state"] == "aborted"
    records = read_jsonl(exit_record_path(load_queue(path).jobs[0].log_path))
    assert any("exit_code" in r for r in records)  # the supervisor saw it end


def test_a_job_not_yet_named_to_its_runner_is_adopted_when_the_runner_dies(tmp_path,
                                                                          monkeypatch):
    """The supervisor names a job to the runner only once it has run a moment (a job that
    ends sooner is told by its end); the runner killed before that learns nothing, and the
    job is still adopted, never rerun: its start is in its exit record from the first
    instant.  The moment is stretched here, so the kill surely falls inside it."""
    monkeypatch.setenv("SPACRQ_QUEUE_ANNOUNCE_AFTER", "60")
    path = _queue(tmp_path, [_traced("j0", tmp_path, 1.0), _traced("j1", tmp_path, 0.01)])
    ref = start_runner(path)
    wait_until(lambda: "start:j0" in _trace(tmp_path), what="the job to start")
    job = load_queue(path).jobs[0]
    assert job.status == "running" and job.process is None  # the runner was never told
    assert examine(job).state == "running"  # …but the record tells the next runner
    os.kill(ref.pid, signal.SIGKILL)
    reap(ref.pid)
    monkeypatch.delenv("SPACRQ_QUEUE_ANNOUNCE_AFTER")
    result = resume_queue(path)
    assert result.ok and [j.status for j in load_queue(path).jobs] == ["success"] * 2
    assert [ln for ln in _trace(tmp_path) if ln.startswith("start:")] == ["start:j0",
                                                                          "start:j1"]
    assert "adopted" in Path(load_queue(path).jobs[0].log_path).read_text()


def test_a_runner_not_yet_told_of_its_job_still_stops_it_on_abort(tmp_path, monkeypatch):
    """Abort reaches a job the supervisor has not named yet: its start record names it."""
    monkeypatch.setenv("SPACRQ_QUEUE_ANNOUNCE_AFTER", "60")
    monkeypatch.setenv("SPACRQ_GRACE", "0.5")
    path = _queue(tmp_path, [Job(module="command", id="long", cwd=str(tmp_path), settings={
        "argv": ["sh", "-c", "echo $$ > long.pid; exec sleep 60"]})])
    ref = start_runner(path)
    try:
        pid = wait_until(lambda: pid_in(tmp_path / "long.pid"), what="the job to start")
        request_stop(path, now=True)
    finally:
        reap(ref.pid)
    assert not is_alive(pid)
    assert [j.status for j in load_queue(path).jobs] == ["not_run"]


@pytest.mark.parametrize("trial", range(3))
def test_sigkill_the_instant_a_job_was_reaped_records_it_and_never_reruns_it(tmp_path, trial):
    """A job that succeeded is told to the runner before its exit record is written (the
    two writes overlap).  Here the runner is killed the instant the job was reaped — by a
    watcher the job leaves in a session of its own — so it dies around that answer:
    before it heard it, or after, before or after its own commit.  Whatever the instant,
    resume records the job once and never starts it again."""
    script = ("runner=$(ps -o ppid= -p $PPID | tr -d ' '); "
              "setsid sh -c \"while kill -0 $$ 2>/dev/null; do :; done; kill -9 $runner\" & "
              "echo start:j0 >> trace")
    path = _queue(tmp_path, [Job(module="command", id="j0", cwd=str(tmp_path),
                                 settings={"argv": ["sh", "-c", script]}),
                             _traced("j1", tmp_path, 0.01)])
    ref = start_runner(path)
    reap(ref.pid)  # killed by the watcher
    assert not is_alive(ref.pid)
    job = load_queue(path).jobs[0]
    wait_until(lambda: job.status == "success" or examine(job).state == "finished",
               what="the supervisor's record")
    result = resume_queue(path)
    assert result.ok and [j.status for j in load_queue(path).jobs] == ["success"] * 2
    assert [ln for ln in _trace(tmp_path) if ln.startswith("start:")].count("start:j0") == 1


def _supervisor_of(runner_pid: int) -> int | None:
    """The runner's job supervisor, once it runs."""
    try:
        children = psutil.Process(runner_pid).children()
    except psutil.NoSuchProcess:
        return None
    return next((c.pid for c in children if "spacrq.queue.supervise" in " ".join(c.cmdline())),
                None)


def test_a_supervisor_killed_before_it_named_its_job_leaves_nothing_running(tmp_path,
                                                                           monkeypatch):
    """The job's supervisor dies while the job runs and before the runner knew its pid: the
    runner finds the job by its exit record and stops it (jobs never overlap, nothing
    runs unwatched), records that the outcome is unknown, and the next job runs under a
    supervisor of its own."""
    monkeypatch.setenv("SPACRQ_QUEUE_ANNOUNCE_AFTER", "60")
    monkeypatch.setenv("SPACRQ_GRACE", "0.5")
    monkeypatch.setenv("SPACRQ_QUEUE_KEEPER", "0")  # a runner with no keeper: a supervisor
    path = _queue(tmp_path, [
        Job(module="command", id="long", cwd=str(tmp_path),
            settings={"argv": ["sh", "-c", "echo $$ > long.pid; exec sleep 60"]}),
        _traced("next", tmp_path, 0.01)])
    ref = start_runner(path)
    try:
        pid = wait_until(lambda: pid_in(tmp_path / "long.pid"), what="the job to start")
        os.kill(wait_until(lambda: _supervisor_of(ref.pid), what="the supervisor"),
                signal.SIGKILL)
    finally:
        reap(ref.pid)
    assert not is_alive(pid)  # stopped, not left running beside the next job
    long, nxt = load_queue(path).jobs
    assert long.status == "failed" and long.failure_kind == "SupervisorLost"
    log = Path(long.log_path).read_text()
    assert "unknown" in log and "nothing runs unwatched" in log
    assert nxt.status == "success" and _trace(tmp_path) == ["start:next", "end:next"]


def test_jobs_after_a_supervisor_died_run_under_a_new_one(tmp_path):
    """A supervisor that died between jobs (the OOM killer, a stray kill): the next job was
    never started by it, so it is started under a new supervisor, its log says so, and
    every job of the queue succeeds — none is failed for a death it never saw."""
    from spacrq.queue import run_queue
    from spacrq.queue.jobproc import Supervisor

    path = _queue(tmp_path, [_traced(f"j{i}", tmp_path, 0.01) for i in range(3)])
    supervisor = Supervisor()
    supervisor.warm()
    first = supervisor.popen.pid
    killed = []

    def kill_it_after_the_first(event):  # the supervisor dies before the second job
        if event.event == "job_finished" and event.job_id == "j0":
            os.kill(first, signal.SIGKILL)
            wait_until(lambda: psutil.Process(first).status() == psutil.STATUS_ZOMBIE,
                       what="the supervisor's death")
            # …and, as seen right after its pipe closed, not yet known dead to poll():
            # the dead pipe is the first sign the runner gets
            supervisor.popen.poll = lambda: None
            killed.append(first)

    result = run_queue(load_queue(path), path, on_progress=kill_it_after_the_first,
                       supervisor=supervisor)
    assert killed and result.ok
    assert [j.status for j in load_queue(path).jobs] == ["success"] * 3
    starts = [ln for ln in _trace(tmp_path) if ln.startswith("start:")]
    assert starts == ["start:j0", "start:j1", "start:j2"]  # each once
    assert "new supervisor" in Path(load_queue(path).jobs[1].log_path).read_text()


@pytest.mark.parametrize("record", [b"\x00\xff garbage\n", b"[" * 100_000 + b"\n",
                                    "folder", "link", "fifo"])
def test_an_unreadable_exit_record_is_named_as_the_reason_not_a_runner_that_never_started(
        tmp_path, record):
    """Garbage, a line nested beyond reason, a folder, a link (to a record that would say
    the job finished) or a FIFO in the record's place: the job's outcome is unknown, the
    record named as why — and examining never hangs on the FIFO or reads through the link."""
    log = tmp_path / "01_a.log"
    log.write_text("# spacrq job a\n")
    where = Path(exit_record_path(str(log)))
    job = Job(module="command", id="a", settings={"argv": ["true"]})
    job.log_path, job.started, job.status = str(log), "2026-12-01T01:00:00+00:00", "running"
    if record == "folder":
        where.mkdir()
    elif record == "link":
        target = tmp_path / "elsewhere.jsonl"
        target.write_text(json.dumps({"job": "a", "key": job.started, "exit_code": 0,
                                      "finished": "2026-12-01T01:01:00+00:00"}) + "\n")
        where.symlink_to(target)
    elif record == "fifo":
        os.mkfifo(where)
    else:
        where.write_bytes(record)
    found = examine(job)
    assert found.state == "unknown" and f"its exit record {where} cannot be read" in found.why


@pytest.mark.parametrize("flood", ["lines", "huge_line", "big_lines", "attempts"])
def test_a_flood_in_the_exit_record_never_hides_a_jobs_attempt_and_what_is_kept_is_bounded(
        tmp_path, monkeypatch, flood):
    """Whatever else the exit record holds — 40 MB of other lines after the job's start and
    end, one line of 20 MB, lines of megabytes of nested junk, more attempts before it than
    are kept (a record a queue run every night grew) — resume still finds the job's attempt
    (it read only the record's last 32 MB, so the job ran again), keeps only the first
    line of each kind of an attempt and only the fields it reads, never parses a line too
    long to be a record (megabytes of nested junk cost gigabytes), and says how many lines
    were skipped."""
    from spacrq.queue import adopt
    monkeypatch.setattr(adopt, "MAX_ATTEMPTS", 1000)
    log = tmp_path / "night_logs" / "40_a.log"
    log.parent.mkdir()
    log.write_text("# spacrq job a\n")
    job = Job(module="command", id="a", settings={"argv": ["true"]})
    job.log_path, job.started, job.status = str(log), "2026-12-01T01:00:00+00:00", "running"
    mine = (json.dumps({"job": "a", "key": job.started, "pid": 4242, "supervisor": 1}) + "\n"
            + json.dumps({"job": "a", "key": job.started, "exit_code": 3,
                          "finished": "2026-12-01T01:05:00+00:00"}) + "\n"
            + json.dumps({"job": "a", "key": job.started, "exit_code": 0}) + "\n")
    record = Path(exit_record_path(str(log)))
    with record.open("w") as fh:
        if flood == "attempts":  # more attempts than are kept, each a start and an end
            for n in range(3000):
                fh.write(json.dumps({"job": f"j{n}", "key": "k", "pid": 5, "supervisor": 1})
                         + "\n" + json.dumps({"job": f"j{n}", "key": "k", "exit_code": 0})
                         + "\n")
        fh.write(mine)
        if flood == "lines":  # 40 MB of lines of the job's attempt and others', and garbage
            block = "".join(json.dumps({"job": "a", "key": job.started, "pid": 77,
                                        "pad": "x" * 200}) + "\n\x00garbage\n"
                            for _ in range(2000))
            for _ in range(40 * (1 << 20) // len(block)):
                fh.write(block)
        elif flood == "huge_line":
            fh.write("[" + "1," * (10 << 20) + "1]\n")
        elif flood == "big_lines":  # attempts' first lines, junk in a field read and not
            junk = "[" + ",".join(["[]"] * 400_000) + "]"  # (1.2 MB: a line over 1 MB)
            for n in range(5):
                fh.write(f'{{"job": "b", "key": "k{n}", "pid": 5, "before": {junk}}}\n'
                         f'{{"job": "c", "key": "k{n}", "pid": 5, "junk": [[], []]}}\n')
    found = examine(job)
    assert (found.state, found.exit_code, found.start["pid"]) == ("finished", 3, 4242)
    lines, unreadable, _ = adopt.record_lines(job)
    assert len(lines) == 2  # its start and its end, the first of each kind
    kept = adopt._READ[str(record)][1]
    if flood == "lines":
        assert sum(map(len, kept.values())) == 2
        assert "line(s) of it are not records and were skipped" in unreadable
    elif flood == "huge_line":
        assert sum(map(len, kept.values())) == 2 and unreadable == ""  # (skipped unread)
    elif flood == "big_lines":
        assert "b" not in kept and "5 line(s) of it are not records" in unreadable
        assert [sorted(line) for line in kept["c"]] == [["job", "key", "pid"]] * 5
    else:  # the latest attempts kept: the job's, and the 999 before it
        assert len(kept) == 1000 and "a" in kept and "j2000" not in kept
        assert "more than 1000 attempts: the 2001 oldest were not kept" in unreadable


def test_garbage_in_the_exit_record_is_said_in_the_log_of_the_job_it_was_read_for(tmp_path):
    """Lines of the record that are not records are skipped — and the job's log says how
    many, and where (they were skipped silently)."""
    path = _queue(tmp_path, [Job(module="command", id="plate", settings={"argv": ["true"]})])
    queue = load_queue(path)
    plate = queue.jobs[0]
    plate.status, plate.started, plate.attempts = "running", now_iso(), 1
    plate.log_path = str(tmp_path / "night_logs" / "01_plate.log")
    (tmp_path / "night_logs").mkdir(exist_ok=True)
    record = Path(exit_record_path(plate.log_path))
    record.write_text("\x00\xff\n[1, 2]\n" + json.dumps(
        {"key": plate.started, "job": "plate", "exit_code": 0,
         "finished": plate.started}) + "\n{torn\n")
    save_queue(queue, path)
    assert resume_queue(path).ok
    plate = load_queue(path).jobs[0]
    assert plate.status == "success" and plate.attempts == 1
    assert (f"its exit record {record}: 3 line(s) of it are not records and were skipped"
            in Path(plate.log_path).read_text())


def _gated(jid, tmp_path, tail="", **fields):
    """A job that counts its runs in ``<jid>.runs``, writes its pid, waits for ``go``, then
    runs ``tail`` (its exit status is the job's)."""
    script = (f"echo run >> {jid}.runs; echo $$ > {jid}.pid; "
              f"while [ ! -e go ]; do sleep 0.02; done; {tail or 'true'}")
    return Job(module="command", id=jid, cwd=str(tmp_path), settings={"argv": ["sh", "-c", script]},
               **fields)


def _resume_releasing_once_adopted(path, log, tmp_path):
    """``resume_queue(path)``, letting the gated job end (``go``) once its log says resume
    adopted it; the job is let go whatever happens."""
    def release():
        wait_until(lambda: "adopted at" in log.read_text(), what="the adoption")
        (tmp_path / "go").write_text("")
    helper = threading.Thread(target=release)
    helper.start()
    try:
        return resume_queue(path)
    finally:
        (tmp_path / "go").write_text("")
        helper.join()


def _runs(tmp_path, jid):
    try:
        return (tmp_path / f"{jid}.runs").read_text().count("run")
    except FileNotFoundError:
        return 0


def _runner_and_keeper_killed_mid_job(tmp_path):
    """A queue whose runner and keeper were both SIGKILLed while its gated first job runs
    (and ends with exit 3 once let go): ``(path, the job's pid, the runner's record)``."""
    path = _queue(tmp_path, [_gated("plate", tmp_path, "exit 3"),
                             Job(module="command", id="next", settings={"argv": ["true"]})])
    ref = start_runner(path)
    job = wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")
    state = runner_state(path)
    for pid in (state["pid"], state["keeper"]):
        os.kill(pid, signal.SIGKILL)
    reap(ref.pid)
    reap(state["keeper"])
    return path, job, state


def test_an_adopted_job_whose_keeper_died_too_is_never_run_a_second_time(tmp_path):
    """Runner and keeper both SIGKILLed mid-job: nothing can learn the job's exit status
    (only a parent can), but resume watched it run to its end; it is failed with an
    unknown outcome and a sentence saying so, never started again (it was: twice)."""
    path, job, state = _runner_and_keeper_killed_mid_job(tmp_path)
    log = Path(load_queue(path).jobs[0].log_path)
    from spacrq.queue.adopt import unwatched
    assert "its keeper is gone too" in unwatched(load_queue(path).jobs[0], str(path))

    result = _resume_releasing_once_adopted(path, log, tmp_path)
    plate, after = load_queue(path).jobs
    assert not psutil.pid_exists(job) or psutil.Process(job).status() == psutil.STATUS_ZOMBIE
    assert _runs(tmp_path, "plate") == 1  # never run a second time
    assert (plate.status, plate.failure_kind, plate.exit_code) == ("failed", "OutcomeUnknown",
                                                                    None)
    assert "exit status is unknown" in plate.error and "restart-failed" in plate.error
    assert "it is not run again" in log.read_text()
    assert after.status == "success" and not result.ok


def test_a_job_that_ended_after_its_runner_and_keeper_both_died_is_never_run_again(tmp_path):
    """Runner and keeper both SIGKILLed mid-job, and the job runs to its end before resume
    looks: nothing learnt its exit status, but it ran — as for one still running when
    resume came (adopted, then failed as of unknown outcome), it is never started again
    (it was: rerun, its log saying the runner had died before starting it)."""
    path, job, state = _runner_and_keeper_killed_mid_job(tmp_path)
    (tmp_path / "go").write_text("")
    wait_until(lambda: not is_alive(job), what="the job to end")
    from spacrq.queue.adopt import unwatched
    left = load_queue(path).jobs[0]
    said = unwatched(left, str(path))
    assert "exit status is unknown" in said and "never runs it again" in said
    assert f"its runner and its supervisor (process {state['keeper']}) were gone" in said
    result = resume_queue(path)
    plate, after = load_queue(path).jobs
    assert _runs(tmp_path, "plate") == 1  # never run a second time
    assert (plate.status, plate.failure_kind, plate.exit_code) == ("failed", "OutcomeUnknown",
                                                                    None)
    assert "ran while no runner watched it" in plate.error and "restart-failed" in plate.error
    log = Path(plate.log_path).read_text()
    assert "it is not run again" in log and "before it started" not in log
    assert after.status == "success" and not result.ok and plate.lost_runs == []


def test_a_job_the_machine_restarted_under_runs_again_and_says_so(tmp_path, monkeypatch):
    """Its process written down, gone, no end recorded — and the machine started after the
    attempt began: the restart ended it (its runner and keeper with it), so it runs again,
    and its log and lost run name the restart."""
    import subprocess
    path = _queue(tmp_path, [Job(module="command", id="plate", cwd=str(tmp_path),
                                 settings={"argv": ["sh", "-c", "echo run >> plate.runs"]})])
    gone = subprocess.Popen(["true"])
    gone.wait()
    queue = load_queue(path)
    plate = queue.jobs[0]
    plate.status, plate.started, plate.attempts = "running", now_iso(), 1
    plate.log_path = str(tmp_path / "night_logs" / "01_plate.log")
    (tmp_path / "night_logs").mkdir(exist_ok=True)
    Path(exit_record_path(plate.log_path)).write_text(json.dumps(
        {"key": plate.started, "job": "plate", "supervisor": gone.pid, "pid": gone.pid,
         "started": time.time()}) + "\n")
    save_queue(queue, path)
    monkeypatch.setenv("SPACRQ_BOOTED_AT", str(time.time()))  # (it restarted since)
    assert "machine restarted" in examine(load_queue(path).jobs[0]).why
    result = resume_queue(path)
    plate = load_queue(path).jobs[0]
    assert result.ok and plate.status == "success" and _runs(tmp_path, "plate") == 1
    assert "machine restarted" in plate.lost_runs[0]["why"]
    assert "machine restarted" in Path(plate.log_path).read_text()


def test_a_running_job_whose_exit_record_was_emptied_is_adopted_by_the_queue_files_pid(
        tmp_path):
    """The runner SIGKILLed mid-job and the exit record emptied meanwhile: the queue file
    still names the job's process, which is the job — resume adopts it, never stops it
    and runs it again (it did)."""
    path = _queue(tmp_path, [_gated("plate", tmp_path, "echo end >> plate.runs")])
    ref = start_runner(path)
    job = wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")
    wait_until(lambda: (load_queue(path).jobs[0].process or {}).get("pid") == job,
               what="the queue file to name the job's process")
    os.kill(ref.pid, signal.SIGKILL)
    reap(ref.pid)
    record = Path(exit_record_path(load_queue(path).jobs[0].log_path))
    record.write_bytes(b"")  # (emptied: nothing of the job's start is left in it)
    log = Path(load_queue(path).jobs[0].log_path)

    _resume_releasing_once_adopted(path, log, tmp_path)
    plate = load_queue(path).jobs[0]
    assert (tmp_path / "plate.runs").read_text() == "run\nend\n"  # ran once, to its end
    # (its keeper found no start of it in the record to write its end beside: the end of a
    # job it adopted with nothing to learn its exit status from)
    assert (plate.status, plate.failure_kind, plate.lost_runs) == ("failed", "OutcomeUnknown",
                                                                   [])


def test_a_running_job_nothing_named_by_pid_is_found_and_adopted_not_run_twice(tmp_path,
                                                                              monkeypatch):
    """No pid of the job anywhere (the record lost, the queue file never told): before
    running it again resume looks for it among the running processes — it leads its
    session, its environment names it, its output goes to its log — and adopts it, and
    follows it by its pid from then on (it looked through every process 20 times a second
    while the job ran)."""
    import subprocess

    from spacrq.queue import adopt
    looks = []
    real = adopt.find_job_process
    monkeypatch.setattr(adopt, "find_job_process", lambda *a: looks.append(1) or real(*a))
    path = _queue(tmp_path, [Job(module="command", id="plate", cwd=str(tmp_path),
                                 settings={"argv": ["sh", "-c", "echo run >> plate.runs"]})])
    queue = load_queue(path)
    plate = queue.jobs[0]
    plate.status, plate.started, plate.attempts = "running", now_iso(), 1
    plate.log_path = str(tmp_path / "night_logs" / "01_plate.log")
    (tmp_path / "night_logs").mkdir(exist_ok=True)
    Path(plate.log_path).write_text("")
    save_queue(queue, path)
    env = dict(os.environ, SPACRQ_JOB_ID="plate", SPACRQ_JOB_LOG=plate.log_path)
    with open(plate.log_path, "ab") as out:  # (a job's output goes to its log)
        lookalike = subprocess.Popen(["sleep", "30"], start_new_session=True, stdout=out,
                                     env=dict(env, SPACRQ_JOB_ID="other"))
        daemon = subprocess.Popen(["sleep", "30"], start_new_session=True, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        job = subprocess.Popen(["sh", "-c", "echo run >> plate.runs; "
                                "while [ ! -e go ]; do sleep 0.02; done"], cwd=tmp_path,
                               start_new_session=True, env=env, stdout=out, stderr=out)
    try:
        wait_until(lambda: _runs(tmp_path, "plate") == 1, what="the job to start")
        found = examine(load_queue(path).jobs[0])
        assert found.state == "running" and found.start["pid"] == job.pid
        log = Path(plate.log_path)

        looks.clear()
        _resume_releasing_once_adopted(path, log, tmp_path)
        assert len(looks) <= 2  # (once to adopt it, once more when it ended, at most)
        # the others untouched: another job's, and a daemon of this one (created before it
        # here, its output elsewhere)
        assert job.wait(30) == 0 and lookalike.poll() is None and daemon.poll() is None
    finally:
        for proc in (job, lookalike, daemon):
            proc.kill()
            proc.wait()
    plate = load_queue(path).jobs[0]
    assert _runs(tmp_path, "plate") == 1
    assert (plate.status, plate.failure_kind) == ("failed", "OutcomeUnknown")


@pytest.mark.parametrize("daemon", [False, True])
def test_a_job_its_runner_and_keeper_died_starting_is_never_run_again_nor_a_daemon_adopted(
        tmp_path, daemon):
    """Runner and keeper killed between the "starting" line and the job's pid: nothing can
    tell whether the job ran (it was run again: twice, when it had).  It is failed as of
    unknown outcome.  A process the job left in a session of its own, with its
    environment, created well after the attempt began, is not taken for the job (it was
    adopted, waited on, and stopped)."""
    import datetime as dt
    import subprocess
    path = _queue(tmp_path, [Job(module="command", id="plate", cwd=str(tmp_path),
                                 settings={"argv": ["sh", "-c", "echo run >> plate.runs"]})])
    began = time.time() - (30.0 if daemon else 0.0)
    queue = load_queue(path)
    plate = queue.jobs[0]
    plate.status, plate.attempts = "running", 1
    plate.started = dt.datetime.fromtimestamp(began, dt.timezone.utc).isoformat()
    plate.log_path = str(tmp_path / "night_logs" / "01_plate.log")
    (tmp_path / "night_logs").mkdir(exist_ok=True)
    Path(exit_record_path(plate.log_path)).write_text(json.dumps(
        {"key": plate.started, "job": "plate", "supervisor": 1, "starting": began}) + "\n")
    save_queue(queue, path)
    env = dict(os.environ, SPACRQ_JOB_ID="plate", SPACRQ_JOB_LOG=plate.log_path)
    left = subprocess.Popen(["sleep", "60"], start_new_session=True, env=env) if daemon else None
    try:
        found = examine(load_queue(path).jobs[0])
        assert found.state == "unseen" and "it may have run" in found.why
        result = resume_queue(path)
        assert left is None or left.poll() is None  # untouched
    finally:
        if left is not None:
            left.kill()
            left.wait()
    plate = load_queue(path).jobs[0]
    assert not result.ok and _runs(tmp_path, "plate") == 0
    assert (plate.status, plate.failure_kind, plate.lost_runs) == ("failed", "OutcomeUnknown", [])


def test_a_job_time_written_without_its_offset_is_read_as_local_time(tmp_path, capsys):
    """A hand-edited ``started`` with no UTC offset: ``queue status`` and ``resume`` read it
    as this machine's local time (both died: naive and aware times do not subtract)."""
    from spacrq import cli
    path = _queue(tmp_path, [Job(module="command", id="plate", settings={"argv": ["true"]})])
    doc = json.loads(path.read_text())
    doc["jobs"][0].update(status="running", started="2026-12-03T12:53:15.927427",
                          log_path=str(tmp_path / "night_logs" / "01_plate.log"))
    path.write_text(json.dumps(doc))
    assert cli.main(["queue", "status", str(path)]) == 0
    assert "plate" in capsys.readouterr().out
    assert resume_queue(path).ok and load_queue(path).jobs[0].status == "success"


def test_a_failed_attempt_a_dead_runner_left_is_retried_as_it_would_have_been(tmp_path):
    """A job with retries whose runner died during its failing first attempt: resume records
    that attempt and makes the next one (the retries were lost)."""
    path = _queue(tmp_path, [_gated("plate", tmp_path, '[ "$(wc -l < plate.runs)" -ge 2 ]',
                                    retries=2)])
    ref = start_runner(path)
    wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")
    os.kill(ref.pid, signal.SIGKILL)
    reap(ref.pid)
    (tmp_path / "go").write_text("")
    left = load_queue(path).jobs[0]
    wait_until(lambda: examine(left).state == "finished", what="the keeper's record")
    from spacrq.queue.adopt import unwatched
    assert "makes the next attempt (2 retries left)" in unwatched(left, str(path))
    result = resume_queue(path)
    plate = load_queue(path).jobs[0]
    assert result.ok and (plate.status, plate.attempts, plate.exit_code) == ("success", 2, 0)
    assert _runs(tmp_path, "plate") == 2
    text = Path(plate.log_path).read_text()
    assert "recorded as attempt 1's outcome" in text and "# attempt 1 failed" in text


def test_a_runner_that_died_waiting_to_retry_leaves_the_retry_to_resume(tmp_path):
    path = _queue(tmp_path, [Job(module="command", id="plate", cwd=str(tmp_path), retries=1,
                                 retry_delay=0.5, settings={"argv": [
                                     "sh", "-c", 'echo run >> plate.runs; '
                                                 '[ "$(wc -l < plate.runs)" -ge 2 ]']})])
    ref = start_runner(path)
    log = lambda: Path(load_queue(path).jobs[0].log_path or tmp_path / "none")  # noqa: E731
    wait_until(lambda: log().is_file() and "retrying in 0.5s" in log().read_text(),
               what="the runner to wait before its retry")
    os.kill(ref.pid, signal.SIGKILL)
    reap(ref.pid)
    result = resume_queue(path)
    plate = load_queue(path).jobs[0]
    assert result.ok and (plate.status, plate.attempts) == ("success", 2)
    assert _runs(tmp_path, "plate") == 2


def test_a_failed_attempt_with_no_retry_left_stays_failed_when_recorded(tmp_path):
    path = _queue(tmp_path, [_gated("plate", tmp_path, "exit 4", retries=1)])
    ref = start_runner(path)
    wait_until(lambda: _runs(tmp_path, "plate") == 1 and pid_in(tmp_path / "plate.pid"),
               what="the job to start")
    (tmp_path / "go").write_text("")
    wait_until(lambda: _runs(tmp_path, "plate") == 2, what="its retry")
    os.kill(ref.pid, signal.SIGKILL)  # during its second (last) attempt, or just after
    reap(ref.pid)
    result = resume_queue(path)
    plate = load_queue(path).jobs[0]
    assert not result.ok and (plate.status, plate.attempts, plate.exit_code) == ("failed", 2, 4)
    assert _runs(tmp_path, "plate") == 2


def test_a_recorded_pid_now_held_by_a_process_outside_its_own_session_is_not_adopted(tmp_path):
    """The pid in a job's exit record, reused within a second by a process that does not
    lead its session (every job does, for its whole life), is not the job: not adopted."""
    import json
    import subprocess
    path = _queue(tmp_path, [Job(module="command", id="plate", settings={"argv": ["true"]})])
    other = subprocess.Popen(["sleep", "30"])  # (in this test's session: it leads none)
    try:
        queue = load_queue(path)
        plate = queue.jobs[0]
        plate.status, plate.started = "running", now_iso()
        plate.log_path = str(tmp_path / "night_logs" / "01_plate.log")
        (tmp_path / "night_logs").mkdir(exist_ok=True)
        Path(plate.log_path).write_text("")
        start = {"key": plate.started, "job": "plate", "supervisor": 0, "pid": other.pid,
                 "started": psutil.Process(other.pid).create_time()}
        Path(exit_record_path(plate.log_path)).write_text(json.dumps(start) + "\n")
        record = examine(plate)  # (the job's own process is gone: it ran, its end unseen)
        assert record.state == "unseen", record
    finally:
        other.kill()
        other.wait()


def test_a_logs_folder_replaced_by_a_link_mid_run_is_never_written_through(tmp_path):
    """The logs folder moved away and a symbolic link put in its place while a job runs:
    nothing more is written through the link (no new journal, log, runner record, report
    or rescue copy); the queue stops after that job, its file holding the whole state;
    with the folder put back, resume runs the rest and never the finished job again."""
    path = _queue(tmp_path, [_gated("plate", tmp_path),
                             Job(module="command", id="two", settings={"argv": ["true"]}),
                             Job(module="command", id="three", settings={"argv": ["true"]})])
    ref = start_runner(path)
    wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")
    logs, moved, elsewhere = tmp_path / "night_logs", tmp_path / "moved", tmp_path / "elsewhere"
    logs.rename(moved)
    elsewhere.mkdir()
    logs.symlink_to(elsewhere)
    (tmp_path / "go").write_text("")
    reap(ref.pid)
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    queue = load_queue(path)
    assert [j.status for j in queue.jobs] == ["success", "not_run", "not_run"]
    assert "symbolic link" in queue.stopped_reason and "resume" in queue.stopped_reason
    logs.unlink()
    logs.symlink_to(moved)  # the usual way: the folder moved, linked back; its record says
    state = runner_state(path)  # "running" (the runner could not write how it ended there)
    assert state["state"] == "ended" and not state["alive"], state  # not "crashed"
    assert "symbolic link" in state["problem"] and "could not write down" in state["problem"]
    logs.unlink()
    elsewhere.rmdir()
    moved.rename(logs)
    result = resume_queue(path)
    assert result.ok and [j.status for j in load_queue(path).jobs] == ["success"] * 3
    assert _runs(tmp_path, "plate") == 1


@pytest.mark.parametrize("forged", ["queue_file", "exit_record"])
def test_a_forged_pid_never_makes_resume_adopt_or_stop_another_process(tmp_path, forged):
    """A queue file (or exit record) naming some other process — pid and start time read from
    /proc, a session of its own — is not the job: resume neither adopts nor stops it.  (The
    job's process, as named, is gone: it ran and nothing saw it end — it is failed with an
    unknown outcome, not run again.)"""
    import json
    import subprocess
    path = _queue(tmp_path, [Job(module="command", id="plate", settings={"argv": ["true"]})])
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        started = psutil.Process(other.pid).create_time()
        doc = json.loads(path.read_text())
        entry = doc["jobs"][0]
        entry.update(status="running", started=now_iso(),
                     log_path=str(tmp_path / "night_logs" / "01_plate.log"))
        if forged == "queue_file":
            entry["process"] = {"pid": other.pid, "started": started}
        else:
            (tmp_path / "night_logs").mkdir(exist_ok=True)
            Path(exit_record_path(entry["log_path"])).write_text(json.dumps(
                {"key": entry["started"], "job": "plate", "supervisor": 0, "pid": other.pid,
                 "started": started}) + "\n")
        path.write_text(json.dumps(doc))
        result = resume_queue(path)
        assert other.poll() is None  # untouched
        plate = load_queue(path).jobs[0]
        assert not result.ok and (plate.status, plate.failure_kind) == ("failed",
                                                                        "OutcomeUnknown")
    finally:
        other.kill()
        other.wait()


def test_resume_never_writes_to_a_log_path_outside_the_logs_folder(tmp_path):
    import json
    path = _queue(tmp_path, [Job(module="command", id="plate", settings={"argv": ["true"]})])
    victim = tmp_path / "elsewhere" / "victim.log"
    victim.parent.mkdir()
    victim.write_text("mine\n")
    doc = json.loads(path.read_text())
    doc["jobs"][0].update(status="running", started="2026-12-02T01:00:00+00:00",
                          log_path=str(victim))
    path.write_text(json.dumps(doc))
    result = resume_queue(path)
    assert victim.read_text() == "mine\n"
    plate = load_queue(path).jobs[0]
    assert result.ok and plate.status == "success"
    assert Path(plate.log_path).parent == tmp_path / "night_logs"
    assert "is not in the queue's logs folder" in plate.lost_runs[-1]["why"]


def test_a_dead_jobs_record_naming_a_reused_supervisor_pid_is_not_waited_on(tmp_path):
    """An exit record's ``supervisor`` pid (kept without a start time), reused by some other
    process: the job, dead with no end written, is of unknown outcome — resume waited for
    the unrelated process as if it were writing the job's end."""
    import json
    import subprocess
    other = subprocess.Popen(["sleep", "30"])
    try:
        log = tmp_path / "night_logs" / "01_plate.log"
        log.parent.mkdir()
        job = Job(module="command", id="plate", settings={"argv": ["true"]})
        job.log_path, job.started = str(log), now_iso()
        gone = subprocess.Popen(["true"])
        gone.wait()
        Path(exit_record_path(str(log))).write_text(json.dumps(
            {"key": job.started, "job": "plate", "supervisor": other.pid, "pid": gone.pid,
             "started": time.time()}) + "\n")
        assert examine(job).state == "unseen"  # (not "running": its end is not awaited)
        from spacrq.queue.adopt import unwatched
        assert "never runs it again" in unwatched(job, "night.queue.json")
    finally:
        other.kill()
        other.wait()


def test_a_runner_killed_waiting_to_retry_has_written_down_the_attempt_it_saw_end(tmp_path):
    """The failed attempt's end is in its exit record, with its real time, before the retry
    delay begins: a runner killed in the delay left it to its keeper, which dated it at the
    runner's death and wrote it a second time in the log."""
    path = _queue(tmp_path, [Job(module="command", id="plate", cwd=str(tmp_path), retries=1,
                                 retry_delay=30, settings={"argv": ["sh", "-c", "exit 1"]})])
    ref = start_runner(path)
    log = lambda: Path(load_queue(path).jobs[0].log_path or tmp_path / "none")  # noqa: E731
    try:
        wait_until(lambda: log().is_file() and "retrying in 30s" in log().read_text(),
                   what="the runner to wait before its retry")
        ends = [ln for ln in read_jsonl(exit_record_path(str(log()))) if "exit_code" in ln]
        assert [(e["exit_code"], e.get("recorded_by")) for e in ends] == [(1, None)]
        keeper = runner_state(path)["keeper"]
    finally:
        os.kill(ref.pid, signal.SIGKILL)
        reap(ref.pid)
    reap(keeper)  # (it records what its runner left, then ends: here, nothing)
    assert log().read_text().count("# finished") == 1
    ends = [ln for ln in read_jsonl(exit_record_path(str(log()))) if "exit_code" in ln]
    assert len(ends) == 1


@pytest.mark.parametrize("mode", ["file", "journal"])
def test_a_queue_moved_after_its_runner_died_adopts_its_job_and_reruns_nothing(
        tmp_path, monkeypatch, mode):
    """The runner and its keeper SIGKILLed mid-job, then the queue's folder renamed (or the
    share mounted elsewhere) before the resume. The journal was ignored (its runner's record
    named the old path), so every job that ended since the last checkpoint ran again, and the
    running job's log was "not in the queue's logs folder": it ran again too, unsaid. Now the
    journal is read, the job's log and exit record are found where the folder is now, and
    the job still running is adopted."""
    from spacrq.queue.locks import flock_holder
    monkeypatch.setenv("SPACRQ_QUEUE_DIRECT_MAX_JOBS", "1000" if mode == "file" else "0")
    night, runs, go = tmp_path / "night", tmp_path / "runs", tmp_path / "go"
    night.mkdir()
    jobs = [Job(module="command", id=f"j{i}", settings={"argv": [
        "sh", "-c", f'echo j{i} >> "$0"', str(runs)]}) for i in range(3)]
    jobs.append(Job(module="command", id="plate", settings={"argv": [
        "sh", "-c", 'echo plate >> "$0"; echo $$ > "$0.pid"; while [ ! -e "$1" ]; do '
                    'sleep 0.02; done', str(runs), str(go)]}))
    jobs.append(Job(module="command", id="next", settings={"argv": [
        "sh", "-c", 'echo next >> "$0"', str(runs)]}))
    path = _queue(night, jobs)
    ref = start_runner(path)
    pid = wait_until(lambda: pid_in(tmp_path / "runs.pid"), what="the job to start")
    keeper = psutil.Process(ref.pid).parent()
    assert flock_holder(night / "night_logs" / "runner.lock") == ref.pid
    for process in (keeper.pid, ref.pid):
        os.kill(process, signal.SIGKILL)
    reap(ref.pid)
    moved = tmp_path / "moved"
    night.rename(moved)  # (the job runs on: its folder moved with it)
    path = moved / path.name
    assert [j.status for j in load_queue(path).jobs] == ["success"] * 3 + ["running", "pending"]
    again = start_runner(path, resume=True)
    try:
        log = Path(wait_until(lambda: load_queue(path).jobs[3].log_path.startswith(str(moved))
                              and load_queue(path).jobs[3].log_path, what="the job's log found"))
        wait_until(lambda: "adopted at" in log.read_text(), what="the job to be adopted")
    finally:
        go.write_text("")
        reap(again.pid)
        if is_alive(pid):  # (a failed test leaves no job behind, adopted or not)
            os.killpg(pid, signal.SIGKILL)
    assert not is_alive(pid)
    assert runs.read_text().split() == ["j0", "j1", "j2", "plate", "next"]  # each once
    after = load_queue(path).jobs
    assert [j.status for j in after] == ["success"] * 3 + ["failed", "success"]
    # (with its keeper killed too, nothing alive could learn its exit status: failed as of
    # unknown outcome, never run again, as any adopted job whose keeper died)
    assert after[3].failure_kind == "OutcomeUnknown" and "is not run again" in log.read_text()
    assert f"the queue's logs folder was {night / 'night_logs'} when this attempt" \
        in log.read_text()


def test_a_supervisor_that_cannot_be_started_fails_each_job_with_the_reason(tmp_path,
                                                                           monkeypatch):
    """No process or descriptor to be had (``ulimit -n`` reached): every job failed as
    "AssertionError", its log a double traceback, the real cause nowhere. Now each says it
    in a sentence, nothing is left to look for, and nothing ran."""
    import errno
    import subprocess
    from spacrq.queue import jobproc, run_queue
    real = subprocess.Popen

    def popen(argv, *args, **kw):
        if "spacrq.queue.supervise" in argv:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real(argv, *args, **kw)

    monkeypatch.setattr(jobproc.subprocess, "Popen", popen)
    path = _queue(tmp_path, [_traced(f"j{i}", tmp_path, 0.01) for i in range(2)])
    supervisor = jobproc.Supervisor()
    supervisor.warm()  # (quietly: the first job says it)
    result = run_queue(load_queue(path), path, supervisor=supervisor)
    jobs = load_queue(path).jobs
    assert not result.ok and [j.status for j in jobs] == ["failed", "failed"]
    for job in jobs:
        assert "its supervisor process could not be started (Too many open files)" in job.error
        assert "AssertionError" not in job.error
    assert _trace(tmp_path) == []  # (nothing ran)
