"""A run lost with its runner (its outcome unknown, the job run again) is kept and told.

The queue file keeps it (``lost_runs``), the morning report counts it beside
the job's attempts and draws it on the timeline, and the Queue pane's tooltip
says the job ran again after it; an operator restarting the job forgets it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from spacrq.queue import Job, Queue, load_queue, resume_queue, save_queue
from spacrq.queue.journal import transition_problem
from spacrq.queue.model import QueueError
from spacrq.queue.pane import job_row, status_tip
from spacrq.queue.resume import prepare_resume

LOST_START = "2026-11-30T01:00:00+00:00"


def _left_running(tmp_path):
    """A queue as a runner leaves it when it and the job's supervisor died mid-job."""
    queue = Queue(name="night", max_consecutive_failures=0)
    queue.add(Job(module="command", id="a", cwd=str(tmp_path),
                  settings={"argv": ["sh", "-c", "echo run >> a.runs"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    queue = load_queue(path)
    job = queue.jobs[0]
    job.status, job.started, job.attempts = "running", LOST_START, 1
    job.log_path = str(tmp_path / "night_logs" / "01_a.log")
    save_queue(queue, path)
    return path


def test_the_run_lost_with_its_runner_is_kept_counted_and_drawn(tmp_path):
    path = _left_running(tmp_path)
    result = resume_queue(path)
    assert result.ok and (tmp_path / "a.runs").read_text() == "run\n"
    job = load_queue(path).jobs[0]
    assert job.status == "success" and job.attempts == 1
    assert [r["started"] for r in job.lost_runs] == [LOST_START]
    assert "runner died before it started the job" in job.lost_runs[0]["why"]
    report = Path(result.report_path).read_text()
    assert ">1 + 1 lost<" in report and "its outcome is unknown, so the job ran again" in report
    assert "a (lost)" in report  # its bar on the timeline
    assert "1 job(s) ran again from their start after a run lost with its runner (a)" in report
    assert "1 run(s) lost with their runner" in status_tip(job_row(1, job).value)
    assert f"a: a run lost with its runner (started {LOST_START})" in result.summary()


def test_queue_status_says_the_job_ran_again_after_a_lost_run(tmp_path, capsys):
    from spacrq import cli
    path = _left_running(tmp_path)
    resume_queue(path)
    capsys.readouterr()
    assert cli.main(["queue", "status", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"ran again from its start after a run lost with its runner (started {LOST_START})" in out


def test_a_restart_by_the_operator_forgets_the_lost_runs(tmp_path):
    path = _left_running(tmp_path)
    resume_queue(path)
    queue = load_queue(path)
    queue.jobs[0].status = "failed"  # (as if it had failed: restart-failed runs it afresh)
    prepare_resume(queue, retry_failed=True)
    assert queue.jobs[0].lost_runs == [] and queue.jobs[0].status == "pending"


@pytest.mark.parametrize("bad", ["yesterday", [1], [{"why": "x"}], [{"started": 5}], {"a": 1},
                                 [{"started": LOST_START}] * 1001, [{"started": "x" * 5000}]])
def test_a_garbled_lost_runs_is_one_sentence_and_a_journal_line_of_it_is_skipped(bad):
    with pytest.raises(QueueError, match='"lost_runs".*delete it if in doubt'):
        Job.from_dict({"module": "command", "id": "a", "lost_runs": bad})
    problem = transition_problem({"seq": 3, "job": "a", "set": {"lost_runs": bad}})
    assert "lost_runs" in problem
    assert transition_problem({"seq": 3, "job": "a",
                               "set": {"lost_runs": [{"started": LOST_START, "why": ""}]}}) == ""



def test_status_and_summary_name_three_lost_runs_at_most(tmp_path, capsys):
    from spacrq import cli
    path = _left_running(tmp_path)
    queue = load_queue(path)
    queue.jobs[0].lost_runs = [{"started": f"2026-11-{d:02d}T01:00:00+00:00", "why": "x"}
                               for d in range(1, 11)]
    save_queue(queue, path)
    result = resume_queue(path)
    capsys.readouterr()
    assert cli.main(["queue", "status", str(path)]) == 0
    out = capsys.readouterr().out
    assert "11 runs lost with its runner" in out and "and 8 earlier" in out
    assert "2026-11-01T" not in out and "2026-11-10T01:00:00+00:00" in out
    assert "11 runs lost with its runner" in result.summary()
