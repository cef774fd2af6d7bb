"""The runner prepares the next job while the one before it runs (engine ``_look_ahead``).

What was prepared ahead is used only when nothing changed since: an edit of
that job, a job that failed before it, or an input its upstream job writes
is met in that job's own turn, exactly as without the look ahead.
"""
from __future__ import annotations

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
