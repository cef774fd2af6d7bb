"""The real process paths: job processes, the detached runner, its lock, stop, abort, crash."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from spacrq.procs import is_alive
from spacrq.queue import Job, Queue, QueueError, load_queue, run_queue, save_queue
from spacrq.queue.engine import CANCELLED
from spacrq.queue.runner import (logs_dir, request_stop, runner_state, serve, start_runner)
from spacrq.runfiles import read_jsonl
from waiting import pid_in, reap, wait_until  # tests/waiting.py (tests/ is on the path)



HELPERS = str(Path(__file__).resolve().parent)  # queuehelp.py: the functions python jobs run


def job_env() -> dict:
    """Environment a python job needs to import ``queuehelp``."""
    return {"PYTHONPATH": os.pathsep.join([HELPERS, os.environ.get("PYTHONPATH", "")])}


def _py(jid, target, **settings):
    settings = {"target": f"queuehelp:{target}", **settings}
    return Job(module="python", id=jid, settings=settings, env=job_env())


def _sh(jid, script, **kw):
    return Job(module="command", id=jid, settings={"argv": ["sh", "-c", script]}, **kw)


def _save(tmp_path, *jobs, name="night"):
    queue = Queue(name=name)
    for job in jobs:
        queue.add(job)
    path = tmp_path / f"{name}.queue.json"
    save_queue(queue, path)
    return queue, path


@pytest.fixture(autouse=True)
def helpers_importable(monkeypatch):
    """Runners started here validate ``queuehelp:…`` targets, so they must find the module."""
    monkeypatch.setenv("PYTHONPATH", job_env()["PYTHONPATH"])
    monkeypatch.syspath_prepend(HELPERS)



def test_python_jobs_run_through_spacrq_run_with_partial_and_failure(tmp_path):
    out = tmp_path / "plate1"
    queue, path = _save(tmp_path, _py("measure", "measure_wells", writes=[str(out)]),
                        _py("broken", "raise_value_error"),
                        _sh("shell", "echo to stdout; echo to stderr >&2"))
    result = run_queue(queue, path)
    measure, broken, shell = queue.jobs
    assert measure.status == "success" and measure.is_partial
    assert measure.run_status["n_failed"] == 1 and measure.run_status["n_attempted"] == 3
    assert broken.status == "failed" and broken.failure_kind == "ValueError"
    assert "the plate map is missing column 'well'" in broken.error and broken.exit_code == 1
    log = Path(shell.log_path).read_text()
    assert "to stdout" in log and "to stderr" in log
    assert [j.id for j in result.partial] == ["measure"]


def test_a_job_that_never_ends_is_stopped_at_its_timeout(tmp_path):
    queue, path = _save(tmp_path, _sh("forever", "sleep 60", timeout=0.5), _sh("next", "true"))
    t0 = time.monotonic()
    run_queue(queue, path)
    assert time.monotonic() - t0 < 20
    assert queue.jobs[0].status == "failed" and queue.jobs[0].failure_kind == "Timeout"
    assert queue.jobs[1].status == "success"
    assert "timeout" in Path(queue.jobs[0].log_path).read_text()
    # the code it really ended with (sh -c 'sleep 60' dies of the SIGTERM), not a made-up -1
    assert queue.jobs[0].exit_code == -15 and "(exit code -15;" in queue.jobs[0].error


def test_a_second_runner_on_the_same_file_is_refused_naming_the_first(tmp_path):
    queue, path = _save(tmp_path, _sh("wait", "touch started; while [ ! -e go ]; do sleep 0.05;"
                                              " done", cwd=str(tmp_path)))
    ref = start_runner(path)
    try:
        wait_until(lambda: (tmp_path / "started").exists(), what="the job to start")
        state = runner_state(path)
        assert state["alive"] and state["state"] == "running" and state["pid"] == ref.pid
        with pytest.raises(QueueError, match=f"already being run by process {ref.pid}"):
            serve(path, echo=False)
        with pytest.raises(QueueError, match=f"process {ref.pid}"):
            start_runner(path)
        assert load_queue(path).jobs[0].status == "running"
    finally:
        (tmp_path / "go").write_text("")
        reap(ref.pid, 30)
    state = runner_state(path)
    assert state["state"] == "finished" and not state["alive"]
    assert load_queue(path).jobs[0].status == "success"


def test_stop_finishes_the_running_job_and_leaves_the_rest_not_run(tmp_path):
    queue, path = _save(tmp_path, _sh("a", "touch started; while [ ! -e go ]; do sleep 0.05; done",
                                      cwd=str(tmp_path)), _sh("b", "true"), _sh("c", "true"))
    ref = start_runner(path)
    try:
        wait_until(lambda: (tmp_path / "started").exists(), what="the job to start")
        request_stop(path)
        (tmp_path / "go").write_text("")
    finally:
        reap(ref.pid, 30)
    assert [j.status for j in load_queue(path).jobs] == ["success", "not_run", "not_run"]
    assert runner_state(path)["state"] == "stopped"


def test_an_aborted_job_run_again_says_in_its_log_where_the_new_run_begins(tmp_path):
    """The log of a job aborted and resumed read as two 'attempt 1' runs with nothing
    between them: the second run now begins with a line saying what happened."""
    from spacrq.queue import resume_queue
    queue, path = _save(tmp_path, _sh("slow", f"echo $$ >> {tmp_path}/pids; "
                                              f"while [ ! -e {tmp_path}/go ]; do sleep 0.02; done"))
    ref = start_runner(path)
    try:
        wait_until(lambda: pid_in(tmp_path / "pids"), what="the job to start")
        request_stop(path, now=True)
    finally:
        reap(ref.pid, 30)
    first = load_queue(path).jobs[0]
    assert first.status == "not_run" and first.started
    (tmp_path / "go").write_text("")
    assert resume_queue(path).ok
    log = Path(load_queue(path).jobs[0].log_path).read_text()
    note = f"# spacrq: the job runs again from its start (its run of {first.started} did not finish)"
    assert log.count("# spacrq job slow") == 2 and note in log
    assert log.index("aborted by the operator") < log.index(note) < log.rindex("# spacrq job slow")


def test_abort_kills_a_job_that_ignores_sigterm_after_the_grace(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACRQ_GRACE", "0.5")
    out = tmp_path / "out"
    queue, path = _save(tmp_path, _py("stubborn", "ignore_sigterm_forever", writes=[str(out)]),
                        _sh("after", "true"))
    ref = start_runner(path)
    try:
        job_pid = wait_until(lambda: pid_in(out / "started"), what="the job to start")
        request_stop(path, now=True)
    finally:
        reap(ref.pid, 30)
    jobs = load_queue(path).jobs
    assert [j.status for j in jobs] == ["not_run", "not_run"]
    assert jobs[0].error == CANCELLED
    assert not is_alive(job_pid)
    assert runner_state(path)["state"] == "aborted"
    assert "were killed" in Path(jobs[0].log_path).read_text()


@pytest.mark.parametrize("starter", ["direct", "supervisor"])
@pytest.mark.parametrize("asked", ["abort", "timeout"])
def test_a_job_that_ended_by_itself_as_it_was_to_be_stopped_keeps_its_own_end(tmp_path, starter,
                                                                               asked, monkeypatch):
    """An abort (or the job's timeout) that comes the moment after the job ended by itself
    finds nothing to stop: the job is recorded as it ended (here, a success), never as
    stopped — resume would run it again — and an abort then stops the queue after it."""
    import psutil

    from spacrq.queue.control import ABORT, Control
    from spacrq.queue.direct import DirectStarter
    from spacrq.queue.jobproc import Supervisor

    pid_file = tmp_path / "job.pid"

    def job_ended() -> bool:
        try:
            return psutil.Process(pid_in(pid_file)).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    class LateAbort(Control):
        """The operator's abort, arriving just after the job ended."""
        asked = False

        def abort_requested(self) -> bool:
            wait_until(lambda: pid_file.exists() and pid_in(pid_file) and job_ended(),
                       what="the job to end by itself")
            self.asked = True
            return True

        def request(self):
            return ABORT if self.asked else None

    if asked == "abort":
        first = _sh("first", f"echo $$ > {pid_file}; sleep 0.2")
        control = LateAbort(None)
    else:  # (its timeout falls due as it ends)
        first = _sh("first", f"echo $$ > {pid_file}; sleep 0.2", timeout=0.05)
        control = None
    queue, path = _save(tmp_path, first, _sh("second", "true"))
    supervisor = DirectStarter(keeper=os.getppid()) if starter == "direct" else Supervisor()
    if asked == "timeout":  # (its timeout is looked at once it was named: named as it ends)
        from spacrq.queue import jobproc
        real = jobproc.ProcessRunner._named

        def named_late(self, job, attempt, ref):
            wait_until(lambda: pid_file.exists() and pid_in(pid_file) and job_ended(),
                       what="the job to end by itself")
            return real(self, job, attempt, ref)
        monkeypatch.setattr(jobproc.ProcessRunner, "_named", named_late)
    result = run_queue(queue, path, supervisor=supervisor, control=control)
    jobs = load_queue(path).jobs
    assert (jobs[0].status, jobs[0].exit_code) == ("success", 0), jobs[0].error
    if asked == "abort":
        assert jobs[1].status == "not_run" and "aborted" in result.stopped_reason
    else:
        assert jobs[1].status == "success"


@pytest.mark.parametrize("ended", [True, False])
def test_a_runner_whose_last_record_could_not_be_written_is_not_called_crashed(tmp_path, ended):
    """A full disk can stop the runner's last write of runner.json (it still says
    "running"); its history's "ended" line says how it ended, so status does not tell the
    operator to resume a night that finished.  With no such line it crashed."""
    queue, path = _save(tmp_path, _sh("a", "true"))
    gone = subprocess.Popen(["true"])
    gone.wait()
    logs = logs_dir(path)
    logs.mkdir(exist_ok=True)
    (logs / "runner.json").write_text(json.dumps({"state": "running", "pid": gone.pid,
                                                  "queue": str(path)}))
    lines = [{"event": "started", "pid": gone.pid, "at": "2026-12-01T22:00:00+00:00"}]
    if ended:
        lines.append({"event": "ended", "pid": gone.pid, "at": "2026-12-02T03:00:00+00:00",
                      "state": "finished"})
    (logs / "runner-history.jsonl").write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    state = runner_state(path)
    assert state["state"] == ("finished" if ended else "crashed")
    assert ("could not be written" in state.get("problem", "")) == ended


def test_a_folder_in_the_runner_historys_place_is_no_history_not_a_traceback(tmp_path):
    from spacrq.queue.runner import runner_history
    queue, path = _save(tmp_path, _sh("a", "true"))
    gone = subprocess.Popen(["true"])
    gone.wait()
    logs = logs_dir(path)
    (logs / "runner-history.jsonl").mkdir(parents=True)
    (logs / "runner.json").write_text(json.dumps({"state": "running", "pid": gone.pid,
                                                  "queue": str(path)}))
    assert runner_history(path) == []
    assert runner_state(path)["state"] == "crashed"


def test_runner_killed_mid_job_then_resumed_adopts_the_running_job(tmp_path):
    queue, path = _save(tmp_path, _sh("first", "echo run >> first.runs", cwd=str(tmp_path)),
                        _sh("long", "echo run >> long.runs; echo $$ > long.pid; "
                                    "while [ ! -e go ]; do sleep 0.05; done", cwd=str(tmp_path)),
                        _sh("last", "true"))
    ref = start_runner(path)
    orphan = wait_until(lambda: pid_in(tmp_path / "long.pid"), what="the long job to start")
    os.kill(ref.pid, signal.SIGKILL)
    reap(ref.pid, 30)
    crashed = load_queue(path)  # the file always parses, and tells the truth
    assert [j.status for j in crashed.jobs] == ["success", "running", "pending"]
    assert runner_state(path)["state"] == "crashed"
    assert is_alive(orphan)  # the job outlived its runner…
    again = start_runner(path, resume=True)
    try:
        wait_until(lambda: (runner_state(path) or {}).get("pid") == again.pid
                 and runner_state(path).get("current_job") == "long", what="the adoption")
        assert is_alive(orphan)  # …and the resumed runner adopted it instead of stopping it
    finally:
        (tmp_path / "go").write_text("")
        reap(again.pid, 30)
    assert [j.status for j in load_queue(path).jobs] == ["success"] * 3
    assert (tmp_path / "first.runs").read_text() == "run\n"  # finished jobs are not rerun
    assert (tmp_path / "long.runs").read_text() == "run\n"  # nor is the adopted one
    assert "adopted" in Path(load_queue(path).jobs[1].log_path).read_text()


def test_runner_terminated_by_the_system_aborts_its_job_safely(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACRQ_GRACE", "0.5")
    queue, path = _save(tmp_path, _sh("a", "touch started; exec sleep 60", cwd=str(tmp_path)))
    ref = start_runner(path)
    wait_until(lambda: (tmp_path / "started").exists(), what="the job to start")
    os.kill(ref.pid, signal.SIGTERM)
    reap(ref.pid, 30)
    assert load_queue(path).jobs[0].status == "not_run"
    assert runner_state(path)["state"] == "aborted"


def test_runner_log_and_state_live_in_the_logs_folder(tmp_path):
    queue, path = _save(tmp_path, _sh("a", "true"))
    ref = start_runner(path)
    reap(ref.pid, 30)
    names = {p.name for p in logs_dir(path).iterdir()}
    assert {"runner.json", "runner.lock", "queue.lock", "runner.log", "01_a.log",
            "exits.jsonl"} <= names
    assert runner_state(path)["state"] == "finished"
    assert "1 ok" in (logs_dir(path) / "runner.log").read_text()


def test_start_runner_on_a_missing_file_is_one_sentence(tmp_path):
    with pytest.raises(QueueError, match="queue file not found"):
        start_runner(tmp_path / "typo.queue.json")
    assert list(tmp_path.iterdir()) == []


def test_processes_a_job_leaves_behind_are_stopped_before_the_next_job(tmp_path):
    queue, path = _save(tmp_path, _sh("leaky", "sleep 30 & echo $! > bg.pid", cwd=str(tmp_path)),
                        _sh("next", "true"))
    run_queue(queue, path)
    background = int((tmp_path / "bg.pid").read_text())
    assert not is_alive(background)
    assert [j.status for j in queue.jobs] == ["success", "success"]
    assert "left processes running" in Path(queue.jobs[0].log_path).read_text()


def test_ctrl_c_before_the_job_was_named_still_stops_it(tmp_path):
    """The supervisor names a job a moment after it starts; an interrupt in that moment
    still finds the job (from its next answer) and stops it, never leaving it running."""
    from spacrq.queue.jobproc import ProcessRunner, Supervisor
    from spacrq.queue.model import now_iso
    from spacrq.queue.validate import Modules

    def interrupt():
        raise KeyboardInterrupt

    job = Job(module="command", id="s", settings={"argv": ["sleep", "30"]})
    job.started = now_iso()
    runner = ProcessRunner(grace=0.5, supervisor=Supervisor(), meanwhile=interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run(job, Modules().spec("command"), job.settings, "",
                       str(tmp_path / "s.log"))
        start = next(r for r in read_jsonl(tmp_path / "exits.jsonl") if "pid" in r)
        wait_until(lambda: not is_alive(start["pid"]), what="the job to be stopped", timeout=5)
    finally:
        runner.supervisor.close()


def test_the_runners_record_names_a_job_that_started_right_after_another(tmp_path,
                                                                        monkeypatch):
    """A start too soon after the last write is not written at once (runner.json is written
    at most four times a second); once the job ran a moment, the record names it — not only
    at the next heartbeat, which here never comes."""
    import threading

    from spacrq.queue import jobproc
    monkeypatch.setattr(jobproc, "HEARTBEAT_SECONDS", 3600.0)
    queue = Queue(name="night")
    queue.add(Job(module="command", id="first", settings={"argv": ["true"]}))
    queue.add(Job(module="command", id="long", settings={
        "argv": ["sh", "-c", "while [ ! -e go ]; do sleep 0.02; done"], "cwd": str(tmp_path)}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    ran = threading.Thread(target=serve, args=(path,), kwargs={"echo": False})
    ran.start()
    try:
        wait_until(lambda: (runner_state(path) or {}).get("current_job") == "long",
                   what="runner.json naming the long job")
    finally:
        (tmp_path / "go").write_text("")
        ran.join(60)
    assert not ran.is_alive()
    assert [j.status for j in load_queue(path).jobs] == ["success", "success"]
