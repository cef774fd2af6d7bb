"""The runner's decisions, driven in-process through an injected ``runner``."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from spacrq.ledger import Ledger, read_run_status
from spacrq.modules import BUILTIN_MODULES
from spacrq.queue import (Job, Queue, QueueError, classify_failure, load_queue, resume_queue,
                          run_queue, save_queue)
from spacrq.queue.engine import CANCELLED
from spacrq.queue.jobproc import JobCancelled, JobTimeout


def _cmd(jid, **kw):
    kw.setdefault("settings", {"argv": ["true"]})
    return Job(module="command", id=jid, **kw)


def _queue(tmp_path, *jobs, **kw):
    queue = Queue(name="night", **kw)
    for job in jobs:
        queue.add(job)
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    return queue, path


class Script:
    """An injected runner: exit codes (or exceptions) per job id, and the order it ran them."""

    def __init__(self, outcomes=None, log_lines=None, on_run=None):
        self.outcomes = outcomes or {}
        self.log_lines = log_lines or {}
        self.ran: list[str] = []
        self.on_run = on_run

    def __call__(self, job, settings_path, log_path):
        self.ran.append(job.id)
        assert Path(settings_path).is_file()
        Path(log_path).write_text("\n".join(self.log_lines.get(job.id, ["working"])) + "\n")
        if self.on_run:
            self.on_run(job)
        outcome = self.outcomes.get(job.id, 0)
        if isinstance(outcome, list):
            outcome = outcome.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def test_jobs_run_one_at_a_time_top_to_bottom(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"), _cmd("c"))
    script = Script()
    result = run_queue(queue, path, runner=script)
    assert script.ran == ["a", "b", "c"] and result.ok
    assert [j.status for j in load_queue(path).jobs] == ["success"] * 3


def test_every_transition_is_on_disk_before_the_next_job(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"))
    seen = {}

    def look(job):
        seen[job.id] = [j.status for j in load_queue(path).jobs]

    run_queue(queue, path, runner=Script(on_run=look))
    assert seen == {"a": ["running", "pending"], "b": ["success", "running"]}


def _statuses_in_file_alone(path):
    """The jobs' statuses as the file alone says them (what spaCR or jq would read)."""
    from spacrq.queue.store import read_queue_document
    return {j["id"]: j["status"] for j in read_queue_document(path)["jobs"]}


def test_a_small_queue_that_grows_past_the_bound_goes_on_in_journal_mode(tmp_path,
                                                                        monkeypatch, capsys):
    """File mode's rewrite at every transition costs the file's size: a queue that grows
    past the bound while it runs (jobs added) has its file written at checkpoints from
    then on, says so in the runner's log, and loses nothing: the journal has the rest."""
    from spacrq.queue.edits import add_job
    monkeypatch.setenv("SPACRQ_QUEUE_DIRECT_MAX_JOBS", "3")
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"))
    alone, loaded = {}, {}

    def look(job):
        alone[job.id] = _statuses_in_file_alone(path)
        loaded[job.id] = {j.id: j.status for j in load_queue(path).jobs}
        if job.id == "a":
            add_job(path, _cmd("c"))
            add_job(path, _cmd("d"))

    result = run_queue(queue, path, runner=Script(on_run=look))
    assert result.ok and [j.status for j in load_queue(path).jobs] == ["success"] * 4
    assert alone["a"] == {"a": "running", "b": "pending"}  # (2 jobs: the file is current)
    assert alone["b"]["b"] == "running"  # (the write that took c and d in)
    assert alone["c"]["c"] == "pending" and loaded["c"]["c"] == "running"  # journal only
    assert _statuses_in_file_alone(path) == {"a": "success", "b": "success",
                                             "c": "success", "d": "success"}
    assert "the queue file holds 4 jobs (more than 3), so from now on it is written at " \
           "checkpoints" in capsys.readouterr().err


def test_a_queue_whose_file_is_past_the_byte_bound_runs_in_journal_mode(tmp_path,
                                                                        monkeypatch, capsys):
    """Few jobs with large settings make a large file: past the byte bound the file is
    written at checkpoints only, from the start."""
    monkeypatch.setenv("SPACRQ_QUEUE_DIRECT_MAX_BYTES", "2000")
    queue, path = _queue(tmp_path, _cmd("a", settings={"argv": ["true", "x" * 3000]}),
                         _cmd("b"))
    alone = {}

    def look(job):
        alone[job.id] = _statuses_in_file_alone(path)

    result = run_queue(queue, path, runner=Script(on_run=look))
    assert result.ok and _statuses_in_file_alone(path) == {"a": "success", "b": "success"}
    assert alone["a"] == {"a": "pending", "b": "pending"}
    assert alone["b"]["b"] == "pending"
    assert "KB (more than 1 KB), so from now on it is written at checkpoints" \
        in capsys.readouterr().err


def test_dependents_of_a_failure_are_skipped_transitively_naming_the_blocker(tmp_path):
    queue, path = _queue(tmp_path, _cmd("mask"), _cmd("measure", depends_on=["mask"]),
                         _cmd("classify", depends_on=["measure"]), _cmd("other"))
    script = Script({"mask": 1}, {"mask": ["Traceback (most recent call last):",
                                           "FileNotFoundError: /share/plate1 is gone"]})
    result = run_queue(queue, path, runner=script)
    assert script.ran == ["mask", "other"]
    statuses = {j.id: j.status for j in load_queue(path).jobs}
    assert statuses == {"mask": "failed", "measure": "skipped", "classify": "skipped",
                        "other": "success"}
    assert "mask" in queue.find("measure").error and "measure" in queue.find("classify").error
    assert queue.find("mask").failure_kind == "FileNotFoundError"
    text = result.summary()
    assert "FileNotFoundError x1" in text and "Skipped" in text and not result.ok


def test_on_error_stop_leaves_the_rest_not_run(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"), _cmd("c"))
    result = run_queue(queue, path, runner=Script({"a": 1}), on_error="stop")
    assert [j.status for j in load_queue(path).jobs] == ["failed", "not_run", "not_run"]
    assert "on_error is 'stop'" in result.stopped_reason
    assert load_queue(path).on_error == "stop"


def test_max_consecutive_failures_stops_a_systematic_problem(tmp_path):
    queue, path = _queue(tmp_path, *[_cmd(f"j{i}") for i in range(6)])
    result = run_queue(queue, path, runner=Script({f"j{i}": 1 for i in range(6)}),
                       max_consecutive_failures=3)
    assert [j.status for j in queue.jobs] == ["failed"] * 3 + ["not_run"] * 3
    assert "3 jobs failed in a row" in result.stopped_reason
    assert "3 jobs failed in a row" in load_queue(path).stopped_reason


def test_failures_at_the_end_of_the_queue_stop_nothing_and_do_not_say_they_did(tmp_path):
    """The last jobs failing in a row (or the last one failing with on_error 'stop') leave
    nothing to stop: the queue finished, with its failures, rather than 'stopped so the
    night is not spent repeating it' (which a new user read as work left undone)."""
    queue, path = _queue(tmp_path, *[_cmd(f"j{i}") for i in range(3)])
    result = run_queue(queue, path, runner=Script({f"j{i}": 1 for i in range(3)}),
                       max_consecutive_failures=3)
    assert [j.status for j in queue.jobs] == ["failed"] * 3
    assert result.stopped_reason == "" and result.state == "finished" and not result.ok
    (tmp_path / "last").mkdir()
    queue, path = _queue(tmp_path / "last", _cmd("a"), _cmd("b"))
    result = run_queue(queue, path, runner=Script({"b": 1}), on_error="stop")
    assert [j.status for j in queue.jobs] == ["success", "failed"]
    assert result.stopped_reason == "" and result.state == "finished"


def test_a_success_resets_the_consecutive_count(tmp_path):
    queue, path = _queue(tmp_path, *[_cmd(f"j{i}") for i in range(5)])
    run_queue(queue, path, runner=Script({"j0": 1, "j1": 1, "j3": 1, "j4": 1}),
              max_consecutive_failures=3)
    assert [j.status for j in queue.jobs] == ["failed", "failed", "success", "failed", "failed"]


def test_identical_failures_are_grouped_in_the_summary(tmp_path):
    queue, path = _queue(tmp_path, *[_cmd(f"p{i}") for i in range(3)], _cmd("odd"))
    lines = {f"p{i}": ["OSError: share /lab is not mounted"] for i in range(3)}
    lines["odd"] = ["KeyError: 'well'"]
    result = run_queue(queue, path, runner=Script({k: 1 for k in [*lines]}, lines),
                       max_consecutive_failures=0)
    text = result.summary()
    assert "OSError x3" in text and "share /lab is not mounted (p0, p1, p2)" in text
    assert "KeyError x1" in text


def test_refuses_to_start_with_every_problem_listed(tmp_path):
    queue = Queue(jobs=[Job(module="maks", id="a"), _cmd("b", depends_on=["ghost"])])
    with pytest.raises(QueueError) as err:
        run_queue(queue, tmp_path / "x.queue.json", runner=Script())
    assert "unknown module 'maks'" in str(err.value) and "'ghost'" in str(err.value)
    assert not (tmp_path / "x.queue.json").exists()


def test_stop_flag_stops_after_the_running_job(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"))
    result = run_queue(queue, path, runner=Script(), stop_flag=lambda: True)
    assert [j.status for j in queue.jobs] == ["success", "not_run"]
    assert result.state == "stopped"


def test_control_file_stop_and_abort(tmp_path):
    from spacrq.queue.runner import request_stop
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"), _cmd("c"))
    run_queue(queue, path, runner=Script(on_run=lambda job: request_stop(path)))
    assert [j.status for j in load_queue(path).jobs] == ["success", "not_run", "not_run"]

    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"))
    result = run_queue(queue, path, runner=Script({"a": JobCancelled("terminated")}))
    assert [j.status for j in load_queue(path).jobs] == ["not_run", "not_run"]
    assert queue.find("a").error == CANCELLED and result.state == "aborted"


def test_the_summary_tells_an_aborted_job_a_job_never_reached_and_a_late_one_apart(tmp_path):
    """'Not run … the queue halted before reaching them' was said of a job that ran and was
    aborted, and of a job added after the stop that the table showed as pending."""
    from spacrq.queue.runner import request_stop
    from spacrq.queue.store import edit_queue
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"))
    result = run_queue(queue, path, runner=Script({"a": JobCancelled("terminated")}))
    text = result.summary()
    assert "Not run (1; stopped while it ran, on request; it runs again when the queue is " \
           "resumed): a" in text
    assert "Not run (1; the queue halted before reaching them): b" in text

    def add_late_and_stop(job):
        edit_queue(path, lambda q: q.add(_cmd("late")))
        request_stop(path)
    queue, path = _queue(tmp_path, _cmd("x"), _cmd("y"))
    result = run_queue(queue, path, runner=Script(on_run=add_late_and_stop))
    assert {j.id: j.status for j in load_queue(path).jobs} == {"x": "success", "y": "not_run",
                                                              "late": "pending"}
    text = result.summary()
    assert "Not run (1; the queue halted before reaching them): y" in text
    assert "Not run (1; waiting: added after the queue stopped, they run when it is " \
           "resumed): late" in text


def test_timeout_fails_as_timeout(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a"))
    result = run_queue(queue, path, runner=Script({"a": JobTimeout("still running after 5s")}))
    assert queue.find("a").status == "failed" and queue.find("a").failure_kind == "Timeout"
    assert "Timeout x1" in result.summary()


def test_retries_are_bounded_and_counted(tmp_path):
    queue, path = _queue(tmp_path, _cmd("flaky", retries=2), _cmd("hopeless", retries=1))
    script = Script({"flaky": [1, 1, 0], "hopeless": [1, 1, 0]})
    run_queue(queue, path, runner=script)
    assert script.ran == ["flaky"] * 3 + ["hopeless"] * 2
    back = {j.id: j for j in load_queue(path).jobs}
    assert (back["flaky"].status, back["flaky"].attempts) == ("success", 3)
    assert (back["hopeless"].status, back["hopeless"].attempts) == ("failed", 2)


def test_a_retry_waits_its_delay_and_a_stop_meanwhile_ends_the_retries(tmp_path):
    from spacrq.queue.runner import request_stop
    queue, path = _queue(tmp_path, _cmd("flaky", retries=2, retry_delay=0.3))
    times = []
    script = Script({"flaky": [1, 1, 0]}, on_run=lambda job: times.append(time.monotonic()))
    run_queue(queue, path, runner=script)
    job = load_queue(path).jobs[0]
    assert (job.status, job.attempts, job.retry_delay) == ("success", 3, 0.3)
    assert all(b - a >= 0.3 for a, b in zip(times, times[1:]))  # (a floor, not a timing)

    (tmp_path / "stopped").mkdir()
    queue, path = _queue(tmp_path / "stopped", _cmd("flaky", retries=5, retry_delay=30))
    import threading
    later = threading.Timer(0.3, request_stop, [path])  # asked while the retry waits
    script = Script({"flaky": 1}, on_run=lambda job: later.start())
    try:
        result = run_queue(queue, path, runner=script)
    finally:
        later.cancel()
        later.join()
    job = load_queue(path).jobs[0]
    assert script.ran == ["flaky"] and job.status == "failed" and not result.ok
    log = Path(job.log_path).read_text()
    assert "retrying in 30s (5 retries left)" in log
    assert "not retried: a stop was asked while it waited" in log


def test_a_retry_delay_is_kept_in_the_file_and_refused_when_it_is_not_a_duration(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a", retries=1, retry_delay=90))
    assert json.loads(path.read_text())["jobs"][0]["retry_delay"] == 90
    for bad in (-1, "soon", float("inf"), True):
        data = json.loads(path.read_text())
        data["jobs"][0]["retry_delay"] = bad
        with pytest.raises(QueueError, match='"retry_delay"'):
            Queue.from_dict(json.loads(json.dumps(data).replace("Infinity", "1e999")))


def test_a_job_its_module_refused_is_not_retried(tmp_path):
    """Exit 2 (bad settings or arguments) would be refused the same way again: retrying it
    spent the retries and the night's time, and read like a transient failure."""
    queue, path = _queue(tmp_path, _cmd("refused", retries=3))
    script = Script({"refused": 2}, log_lines={"refused": ["error: points = 1 is below its "
                                                          "minimum 2"]})
    run_queue(queue, path, runner=script)
    job = load_queue(path).jobs[0]
    assert script.ran == ["refused"] and job.attempts == 1
    assert (job.status, job.failure_kind) == ("failed", "ConfigurationError")


def test_partial_results_are_detected_from_fresh_stamps_only(tmp_path):
    out = tmp_path / "plate1"
    out.mkdir()
    old = Ledger("earlier night")
    old.failed("B07", ValueError("old failure"))
    old.stamp(out / "measurements.csv")  # a stamp from before this job: must not count

    def stamp(job):
        if job.id == "measure":
            ledger = Ledger("measure")
            ledger.succeeded("A01")
            ledger.failed("A02", ValueError("no cells"))
            ledger.stamp(out / "measurements.csv")
        if job.id == "clean":
            ledger = Ledger("clean")
            ledger.succeeded("A01")
            ledger.stamp(out / "clean.csv")

    settings = {"argv": ["true"], "writes": [str(out)]}
    queue, path = _queue(tmp_path, _cmd("measure", settings=settings),
                         _cmd("clean", settings=settings))
    result = run_queue(queue, path, runner=Script(on_run=stamp))
    measure, clean = queue.jobs
    assert measure.status == "success" and measure.is_partial
    assert (measure.run_status["n_attempted"], measure.run_status["n_failed"]) == (2, 1)
    assert not clean.is_partial and clean.run_status["status"] == "complete"
    assert [j.id for j in result.partial] == ["measure"] and not result.ok
    assert "PARTIAL" in result.summary() and "1 of 2 items" in result.summary()
    assert load_queue(path).jobs[0].is_partial


def test_the_queue_ledger_is_stamped_beside_the_queue_file(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"))
    run_queue(queue, path, runner=Script({"b": 1}, {"b": ["RuntimeError: gpu lost"]}))
    stamps = read_run_status(f"{path}.run_status.json")
    assert len(stamps) == 1 and stamps[0]["status"] == "partial"
    assert (stamps[0]["n_attempted"], stamps[0]["n_failed"]) == (2, 1)
    assert stamps[0]["failures"][0]["exc_type"] == "RuntimeError"


def test_progress_reports_every_transition_and_survives_a_broken_callback(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b", depends_on=["a"]))
    events = []

    def on_progress(p):
        events.append((p.event, p.job_id))
        raise RuntimeError("a buggy window")

    run_queue(queue, path, runner=Script({"a": 1}), on_progress=on_progress)
    assert events == [("queue_started", ""), ("job_started", "a"), ("job_finished", "a"),
                      ("job_skipped", "b"), ("queue_finished", "")]


def test_inline_settings_are_materialised_beside_the_logs(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a", settings={"argv": ["echo", "x"]},
                                        overrides=['argv=["echo", "y"]']))
    run_queue(queue, path, runner=Script())
    materialised = json.loads((tmp_path / "night_logs" / "a.settings.json").read_text())
    assert materialised["argv"] == ["echo", "y"]
    assert queue.jobs[0].log_path.endswith("night_logs/01_a.log")


def test_cwd_and_environment_are_recorded_on_the_job(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a", cwd=str(tmp_path), env={"K": "v"}))
    run_queue(queue, path, runner=Script())
    job = load_queue(path).jobs[0]
    assert job.ran_with["cwd"] == str(tmp_path) and job.ran_with["python"] == sys.executable
    assert job.env == {"K": "v"}


def test_a_runner_whose_working_folder_is_removed_under_it_runs_the_rest(tmp_path,
                                                                         monkeypatch):
    """A job (or a tidy-up) that removes the folder the runner was started in must not end
    the night: the next jobs still start, and say where they ran."""
    here = tmp_path / "started-here"
    here.mkdir()
    monkeypatch.chdir(here)
    queue, path = _queue(tmp_path, _cmd("a", settings={"argv": ["rmdir", str(here)]}),
                         _cmd("b", settings={"argv": ["true"]}))
    result = run_queue(queue, path)
    assert not here.exists()
    assert [(j.id, j.status) for j in load_queue(path).jobs] == [("a", "success"),
                                                                 ("b", "success")], result
    assert load_queue(path).jobs[1].ran_with["cwd"] == str(here)


def test_a_settings_problem_found_only_at_start_fails_the_job_not_the_queue(tmp_path):
    inp = tmp_path / "later"
    queue, path = _queue(tmp_path, _cmd("up", settings={"argv": ["true"], "writes": [str(tmp_path)]}),
                         _cmd("down", depends_on=["up"],
                              settings={"argv": ["true"], "inputs": [str(inp)]}))
    script = Script()
    run_queue(queue, path, runner=script)
    assert script.ran == ["up"]
    assert queue.find("down").status == "failed"
    assert queue.find("down").failure_kind == "ConfigurationError"
    assert "does not exist" in queue.find("down").error


def test_resume_reruns_left_running_and_not_run_but_never_finished_jobs(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"), _cmd("c"), _cmd("d"))
    for job, status in zip(queue.jobs, ["success", "running", "not_run", "failed"]):
        job.status = status
    save_queue(queue, path)
    script = Script()
    resume_queue(path, runner=script)
    assert script.ran == ["b", "c"]
    assert [j.status for j in load_queue(path).jobs] == ["success", "success", "success", "failed"]


def test_retry_failed_reruns_failed_jobs_and_their_skipped_dependents(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b", depends_on=["a"]), _cmd("c"))
    run_queue(queue, path, runner=Script({"a": 1}))
    assert [j.status for j in queue.jobs] == ["failed", "skipped", "success"]
    script = Script()
    result = resume_queue(path, retry_failed=True, runner=script)
    assert script.ran == ["a", "b"] and result.ok


def test_resume_asks_a_resumable_module_to_continue(tmp_path, monkeypatch):
    monkeypatch.setitem(BUILTIN_MODULES, "segment", "queue_engine_helpers:SEGMENT")
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "queue_engine_helpers.py").write_text(
        "from spacrq.modules import ModuleSpec\n"
        "SEGMENT = ModuleSpec(name='segment', run=lambda s, c: None,"
        " defaults={'resume': False, 'diameter': 30}, resumable=True)\n")
    queue, path = _queue(tmp_path, Job(module="segment", id="s", overrides=["diameter=40"]))
    queue.jobs[0].status = "running"
    save_queue(queue, path)
    resume_queue(path, runner=Script())
    assert load_queue(path).jobs[0].overrides == ["diameter=40", "resume=True"]
    settings = json.loads((tmp_path / "night_logs" / "s.settings.json").read_text())
    assert settings["resume"] is True and settings["diameter"] == 40


def test_notify_command_runs_once_when_the_queue_ends(tmp_path):
    marker = tmp_path / "notified"
    queue, path = _queue(tmp_path, _cmd("a"), _cmd("b"),
                         notify_command=[sys.executable, "-c",
                                         "import os,sys; open(sys.argv[1],'a').write("
                                         "os.environ['SPACRQ_QUEUE_SUMMARY']+'\\n')", str(marker)])
    run_queue(queue, path, runner=Script({"b": 1}))
    lines = marker.read_text().splitlines()
    assert lines == ["night: 1 ok (0 partial), 1 failed, 0 skipped, 0 not run"]


@pytest.mark.parametrize("code,lines,kind,message", [
    (1, ["Traceback (most recent call last):", "  File x", "ValueError: bad well"],
     "ValueError", "bad well"),
    (1, ["...", "error: KeyError: 'well'"], "KeyError", "'well'"),
    (2, ["error: settings file not found: /x.csv; check the path"], "ConfigurationError",
     "settings file not found: /x.csv; check the path"),
    (2, [], "ConfigurationError", "bad settings or arguments (exit code 2)"),
    (3, ["rsync: connection refused"], "JobFailure", "rsync: connection refused"),
    (-9, [], "Killed", "killed by signal 9"),
])
def test_classify_failure_reads_the_log_tail(tmp_path, code, lines, kind, message):
    log = tmp_path / "x.log"
    log.write_text("\n".join(["# spacrq job x", *lines, "# finished"]) + "\n")
    assert classify_failure(code, log) == (kind, message)


def test_classify_failure_reads_only_the_end_of_a_huge_log(tmp_path):
    log = tmp_path / "big.log"
    with open(log, "w") as fh:
        fh.write(("x" * 1000 + "\n") * 20000)
        fh.write("MemoryError: out of memory\n")
    assert classify_failure(1, log) == ("MemoryError", "out of memory")


def test_an_unsafe_id_never_names_a_file_even_when_forced(tmp_path):
    queue = Queue(jobs=[_cmd("../escape"), _cmd("fine")])
    path = tmp_path / "night.queue.json"
    script = Script()
    run_queue(queue, path, runner=script, force=True)
    assert script.ran == ["fine"] and queue.jobs[0].status == "failed"
    assert not (tmp_path / "escape.settings.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "night.queue.json", "night.queue.json.run_status.json", "night_logs"]


@pytest.mark.parametrize("mode,per_job", [("journal", 1), ("file", 1)])
def test_persistence_cost_per_job_is_constant(tmp_path, monkeypatch, mode, per_job):
    """A fixed number of fsyncs per job in either mode, and few whole-file rewrites in journal mode."""
    from spacrq.queue import store
    counts = {}
    for n in (20, 400):
        queue = Queue(name="night", max_consecutive_failures=0)
        for i in range(n):
            queue.add(_cmd(f"j{i}"), validate=False)
        path = tmp_path / f"q{n}.queue.json"
        save_queue(queue, path)
        fsyncs, rewrites = [0], [0]
        real_fsync, real_checkpoint = os.fsync, store.Journal.checkpoint
        monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.__setitem__(0, fsyncs[0] + 1),
                                                     real_fsync(fd))[1])
        monkeypatch.setattr(store.Journal, "checkpoint",
                            lambda self, parts=None: (rewrites.__setitem__(0, rewrites[0] + 1),
                                                      real_checkpoint(self, parts))[1])
        run_queue(queue, path, runner=Script(), persistence=mode)
        monkeypatch.undo()
        counts[n] = (fsyncs[0], rewrites[0])
        assert [j.status for j in load_queue(path).jobs] == ["success"] * n
    (f20, r20), (f400, r400) = counts[20], counts[400]
    assert (f400 - f20) <= (400 - 20) * per_job * 1.05  # group commit: one write per job
    if mode == "journal":
        assert r20 <= 3 and r400 <= 4  # whole-file rewrites: start, end, at most one checkpoint


def test_a_notify_command_that_cannot_start_is_a_note_not_a_crash(tmp_path):
    queue, path = _queue(tmp_path, _cmd("a"), notify_command=[str(tmp_path / "no-such-notifier")])
    result = run_queue(queue, path, runner=Script())
    assert result.ok and any("notify command could not start" in n for n in result.notes)
    assert "notify command could not start" in result.summary()


def test_jobs_that_fail_the_same_way_on_their_own_logs_are_one_group():
    """"could not open its log …/03_c.log" is one problem for fifteen jobs (a read-only
    logs folder), not fifteen: each job's own log path does not split the group."""
    from spacrq.queue.summary import QueueResult

    queue = Queue(name="night")
    for i in range(3):
        job = _cmd(f"j{i}")
        job.status, job.failure_kind = "failed", "NotStarted"
        job.log_path = f"/lab/night_logs/0{i + 1}_j{i}.log"
        job.error = (f"could not open its log {job.log_path} (Permission denied) (exit code "
                     f"127; log {job.log_path})")
        queue.jobs.append(job)
    groups = QueueResult(queue=queue).grouped_failures()
    assert list(groups) == ["NotStarted"]
    [(message, jobs)] = groups["NotStarted"].items()
    assert message == "could not open its log /lab/night_logs/… (Permission denied)"
    assert [j.id for j in jobs] == ["j0", "j1", "j2"]
