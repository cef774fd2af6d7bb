"""The runner prepares the next job while the one before it runs (engine ``_look_ahead``).

What was prepared ahead is used only when nothing changed since: an edit of
that job, a job that failed before it, or an input its upstream job writes
is met in that job's own turn, exactly as without the look ahead.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

from spacrq.queue import Job, Queue, load_queue, run_queue, save_queue
from spacrq.queue import jobproc
from spacrq.queue.edits import edit_job
from spacrq.queue.store import logs_dir
from waiting import wait_until  # tests/waiting.py (tests/ is on the path)


def _cmd(jid, argv, cwd, **kw):
    return Job(module="command", id=jid, settings={"argv": list(argv), "cwd": str(cwd)}, **kw)


def _queue(tmp_path, *jobs):
    queue = Queue(name="night", max_consecutive_failures=0)
    for job in jobs:
        queue.add(job)
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    return path


def _waits_for_go(tmp_path):
    """A job that runs until the test creates ``go``."""
    return ("sh", "-c", "while [ ! -e go ]; do sleep 0.02; done")


def _run_in_background(path):
    done = {}

    def run():
        done["result"] = run_queue(load_queue(path), path)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


def test_a_job_edited_while_the_one_before_it_runs_runs_as_edited(tmp_path):
    path = _queue(tmp_path, _cmd("a", _waits_for_go(tmp_path), tmp_path),
                  _cmd("b", ("touch", "old.ran"), tmp_path))
    thread, done = _run_in_background(path)
    try:
        # named in the file once it ran 20 ms: by then b was prepared ahead
        wait_until(lambda: load_queue(path).find("a").process, what="job a running")
        edit_job(path, "b", {"settings": {"argv": ["touch", "new.ran"], "cwd": str(tmp_path)}})
    finally:
        (tmp_path / "go").touch()
        thread.join(60)
    assert not thread.is_alive()
    assert [j.status for j in load_queue(path).jobs] == ["success", "success"]
    assert (tmp_path / "new.ran").exists() and not (tmp_path / "old.ran").exists()


def test_the_next_job_is_started_from_what_was_prepared_ahead(tmp_path, monkeypatch):
    seen = []
    run = jobproc.ProcessRunner.run

    def recording(self, job, spec, settings, settings_path, log_path, **kw):
        plan = kw.get("plan")
        seen.append((job.id, plan is not None and plan.fits(job, settings, log_path)))
        return run(self, job, spec, settings, settings_path, log_path, **kw)
    monkeypatch.setattr(jobproc.ProcessRunner, "run", recording)
    path = _queue(tmp_path, *[_cmd(j, ("true",), tmp_path) for j in "abc"])
    result = run_queue(load_queue(path), path)
    assert result.state == "finished"
    # the first job is prepared in its turn; each later one while the one before it ran
    assert seen == [("a", False), ("b", True), ("c", True)]


def test_a_job_prepared_ahead_is_still_skipped_when_the_job_it_runs_after_fails(tmp_path):
    path = _queue(tmp_path, _cmd("a", ("sh", "-c", "sleep 0.1; exit 3"), tmp_path),
                  _cmd("b", ("touch", "b.ran"), tmp_path, depends_on=["a"]),
                  _cmd("c", ("touch", "c.ran"), tmp_path))
    run_queue(load_queue(path), path)
    saved = load_queue(path)
    assert [j.status for j in saved.jobs] == ["failed", "skipped", "success"]
    assert not (tmp_path / "b.ran").exists() and (tmp_path / "c.ran").exists()
    assert not list(logs_dir(path).glob("*_b.log"))  # it never started, so it has no log


def test_an_input_the_job_before_writes_is_checked_in_the_jobs_own_turn(tmp_path):
    out = tmp_path / "plate1"
    path = _queue(tmp_path,
                  Job(module="command", id="mask",
                      settings={"argv": ["sh", "-c", "sleep 0.1; mkdir -p plate1/masks"],
                                "cwd": str(tmp_path), "writes": [str(out)]}),
                  Job(module="command", id="measure", depends_on=["mask"],
                      settings={"argv": ["touch", "measured"], "cwd": str(tmp_path),
                                "inputs": [str(out / "masks")]}))
    run_queue(load_queue(path), path)
    assert [j.status for j in load_queue(path).jobs] == ["success", "success"]
    assert Path(tmp_path / "measured").exists()


def test_a_settings_file_changed_while_the_job_before_runs_is_read_in_its_turn(tmp_path):
    """Settings in a file were read ahead, and a change to the file went unseen."""
    settings = tmp_path / "b.json"
    settings.write_text(json.dumps({"argv": ["sh", "-c", "echo OLD > out.txt"],
                                    "cwd": str(tmp_path)}))
    new = json.dumps({"argv": ["sh", "-c", "echo NEW > out.txt"], "cwd": str(tmp_path)})
    path = _queue(tmp_path, _cmd("a", ("sh", "-c", f"sleep 0.2; echo '{new}' > b.json"), tmp_path),
                  Job(module="command", id="b", settings=str(settings)))
    run_queue(load_queue(path), path)
    assert (tmp_path / "out.txt").read_text() == "NEW\n"


def test_an_input_the_job_before_removes_fails_the_job_in_its_turn_never_starting_it(tmp_path):
    """The checks were made ahead only: a job ran without the input removed meanwhile."""
    (tmp_path / "in.txt").write_text("data")
    path = _queue(tmp_path, _cmd("a", ("sh", "-c", "sleep 0.1; rm in.txt"), tmp_path),
                  Job(module="command", id="b", retries=2,
                      settings={"argv": ["sh", "-c", "echo ran >> b.trace"],
                                "cwd": str(tmp_path), "inputs": [str(tmp_path / "in.txt")]}))
    run_queue(load_queue(path), path)
    b = load_queue(path).find("b")
    assert (b.status, b.failure_kind, b.exit_code) == ("failed", "ConfigurationError", 2)
    assert "does not exist" in b.error and "fix:" in b.error
    assert not (tmp_path / "b.trace").exists()


def test_a_settings_file_turned_into_a_pipe_never_stalls_the_watch_of_the_job_at_hand(tmp_path):
    """Reading the next job's settings ahead blocked on a FIFO: the running job's timeout
    (and an abort) waited for it; and in the job's own turn a pipe hung the runner."""
    settings = tmp_path / "b.json"
    settings.write_text(json.dumps({"argv": ["true"]}))
    path = _queue(tmp_path, _cmd("a0", ("sh", "-c", "sleep 0.3; rm b.json; mkfifo b.json"),
                                 tmp_path),
                  _cmd("a", ("sleep", "30"), tmp_path, timeout=1),
                  Job(module="command", id="b", settings=str(settings)))
    thread, done = _run_in_background(path)
    thread.join(25)  # a's timeout is 1 s: nothing may wait on the pipe
    assert not thread.is_alive(), "the runner hung on a settings file that is a pipe"
    saved = load_queue(path)
    assert [j.status for j in saved.jobs] == ["success", "failed", "failed"]
    assert saved.find("a").failure_kind == "Timeout"
    assert "is not a regular file" in saved.find("b").error
