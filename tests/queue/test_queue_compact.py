"""A queue run night after night: its exit record is kept to what its jobs may be asked about."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from spacrq.procs import is_alive
from spacrq.queue import Job, Queue, compact, load_queue, resume_queue, save_queue
from spacrq.queue.adopt import examine, record_lines
from spacrq.queue.runner import start_runner
from spacrq.queue.supervise import EXIT_RECORD
from waiting import gone_pid, pid_in, reap, wait_until  # tests/waiting.py (tests/ is on the path)


def _attempt(job: str, key: str, pid: int, supervisor: int, code: int | None = None,
             peak: int = 0) -> str:
    text = json.dumps({"job": job, "key": key, "pid": pid, "started": 1.7e9,
                       "supervisor": supervisor, "before": {}, "folders": []}) + "\n"
    if code is not None:
        text += json.dumps({"job": job, "key": key, "exit_code": code,
                            "finished": key, "peak_rss_bytes": peak}) + "\n"
    return text


def _job(logs: Path, jid: str, started: str, status: str = "success") -> Job:
    job = Job(module="command", id=jid, settings={"argv": ["true"]})
    job.log_path, job.started, job.status = str(logs / f"{jid}.log"), started, status
    return job


def _asked(job: Job) -> tuple:
    """What resume and the morning report read of ``job`` in the record: the state and exit
    code of its attempt, its peak memory, and the lines of that attempt and of its latest."""
    from spacrq.night.collect import _job_peak_rss
    found = examine(job)
    lines = record_lines(job)[0]
    latest = lines[-1]["key"] if lines else None
    return (found.state, found.exit_code, _job_peak_rss(job, Path(job.log_path).parent),
            [line for line in lines if line["key"] in (job.started, latest)])


def _key(night: int) -> str:
    return f"2026-{1 + night // 28:02d}-{1 + night % 28:02d}T01:00:00+00:00"


def test_a_record_grown_over_many_nights_keeps_only_what_the_queues_jobs_may_be_asked_about(
        tmp_path):
    """Three hundred nights of the same queue, garbage, and the jobs of queues long edited
    away: the record is rewritten with each job's latest attempt and the one its queue file
    names — and what resume and the morning report read of every job is the same as before."""
    logs = tmp_path / "night_logs"
    logs.mkdir()
    gone = gone_pid()
    with (logs / EXIT_RECORD).open("w") as fh:
        for night in range(300):
            fh.write(_attempt("mask", _key(night), 1000 + night, gone, 0, peak=night))
            fh.write(_attempt("segment", _key(night), 2000 + night, gone, 1))
            fh.write(_attempt(f"old{night}", _key(night), 3000, gone, 0))
            fh.write("\x00 not a record\n{\"job\": 1}\n[]\n")
        # the last night: mask ended with exit 3; segment was retried, its queue file still
        # names the first attempt (its runner died before it wrote the second), which ended
        fh.write(_attempt("mask", "2026-12-01T01:00:00+00:00", 555, gone, 3, peak=123))
        fh.write(_attempt("segment", "2026-12-01T02:00:00+00:00", 556, gone, 2))
        fh.write(_attempt("segment", "2026-12-01T03:00:00+00:00", 557, gone))  # (no end)
    mask = _job(logs, "mask", "2026-12-01T01:00:00+00:00", "running")
    segment = _job(logs, "segment", "2026-12-01T02:00:00+00:00", "running")
    fresh = _job(logs, "fresh", "")  # (never ran: nothing of it in the record)
    jobs = [mask, segment, fresh]
    before = {job.id: _asked(job) for job in jobs}
    size = (logs / EXIT_RECORD).stat().st_size
    (logs / f".{EXIT_RECORD}.k1ll3d00.tmp").write_text("{\"job\": \"mask\"")  # (a rewrite killed)

    said = compact.compact_exit_record(logs, jobs, compact_from=10_000)

    assert said.startswith(f"the exit record {logs / EXIT_RECORD} held 1805 lines (")
    assert "; kept the 5 of the attempts the queue's jobs may still be asked about (" in said
    after = {job.id: _asked(job) for job in jobs}
    assert after == before
    assert before["mask"][:3] == ("finished", 3, (123, None))
    assert before["segment"][:2] == ("finished", 2) and before["fresh"][3] == []
    lines = [json.loads(line) for line in (logs / EXIT_RECORD).read_text().splitlines()]
    assert {(line["job"], line["key"]) for line in lines} == {
        ("mask", "2026-12-01T01:00:00+00:00"), ("segment", "2026-12-01T02:00:00+00:00"),
        ("segment", "2026-12-01T03:00:00+00:00")}
    assert len(lines) == 5 and (logs / EXIT_RECORD).stat().st_size < size // 100
    assert [p.name for p in logs.iterdir()] == [EXIT_RECORD]  # (no temporary file left, nor
    # the one a rewrite killed before its rename left)
    # a record within its bound is never rewritten (nor read: one lstat says so)
    assert not compact.outgrown(logs, 3)
    assert compact.compact_exit_record(logs, jobs) == ""


def test_a_record_an_earlier_runs_supervisor_may_still_write_to_is_left_as_it_is(tmp_path):
    """An attempt with no end whose supervisor (an earlier run's keeper, still waiting for
    the job its runner left) is alive: that process appends the job's end by the record's
    name, so the record is not replaced under it — until it has ended."""
    logs = tmp_path / "night_logs"
    logs.mkdir()
    gone = gone_pid()
    keeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        text = "".join(_attempt("a", _key(n), 10 + n, gone, 0) for n in range(200))
        text += _attempt("a", _key(201), 99, keeper.pid)  # still open, its keeper alive
        (logs / EXIT_RECORD).write_text(text)
        job = _job(logs, "a", _key(201), "running")
        said = compact.compact_exit_record(logs, [job], compact_from=1000)
        assert said == (f"the exit record {logs / EXIT_RECORD} ({len(text) // 1024} KB) is "
                        f"left as it is for now: process {keeper.pid} of an earlier run may "
                        "still write to it")
        assert (logs / EXIT_RECORD).read_text() == text
    finally:
        keeper.kill()
        keeper.wait()
    said = compact.compact_exit_record(logs, [job], compact_from=1000)
    assert "held 401 lines" in said and "kept the 1 of the attempts" in said
    assert examine(job).start["pid"] == 99


def test_a_record_that_cannot_be_rewritten_is_kept_as_it_is_and_said(tmp_path, monkeypatch):
    """A full disk while the smaller record is written: the record is left whole, nothing
    half-written or temporary is left beside it, and one sentence says so."""
    logs = tmp_path / "night_logs"
    logs.mkdir()
    gone = gone_pid()
    text = "".join(_attempt("a", _key(n), 10 + n, gone, 0) for n in range(100))
    (logs / EXIT_RECORD).write_text(text)
    real = os.fsync  # (where a full disk shows, for a file written through the page cache)

    def full(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(os, "fsync", full)
    said = compact.compact_exit_record(logs, [_job(logs, "a", _key(99))], compact_from=1000)
    monkeypatch.setattr(os, "fsync", real)
    assert said == (f"the exit record {logs / EXIT_RECORD} ({len(text) // 1024} KB) could "
                    "not be rewritten smaller (No space left on device); it is left as it "
                    "is and still read whole")
    assert (logs / EXIT_RECORD).read_text() == text
    assert [p.name for p in logs.iterdir()] == [EXIT_RECORD]


def test_a_link_or_a_fifo_in_the_records_place_is_never_read_nor_replaced(tmp_path):
    logs = tmp_path / "night_logs"
    logs.mkdir()
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("".join(_attempt("a", _key(n), 10, gone_pid(), 0) for n in range(50)))
    (logs / EXIT_RECORD).symlink_to(elsewhere)
    job = _job(logs, "a", _key(49))
    assert not compact.outgrown(logs, 1, compact_from=100)
    assert compact.compact_exit_record(logs, [job], compact_from=100) == ""
    assert (logs / EXIT_RECORD).is_symlink() and len(elsewhere.read_text().splitlines()) == 100
    (logs / EXIT_RECORD).unlink()
    os.mkfifo(logs / EXIT_RECORD)  # (nothing writes to it: a read would wait for good)
    assert compact.compact_exit_record(logs, [job], compact_from=0) == ""


def _plate(tmp_path: Path) -> Job:
    return Job(module="command", id="plate", cwd=str(tmp_path), settings={"argv": [
        "sh", "-c", "echo run >> plate.runs; echo $$ > plate.pid; "
                    "while [ ! -e go ]; do sleep 0.02; done; exit 3"]})


def test_resume_in_a_long_used_queue_records_the_job_that_ended_unseen_and_keeps_it_small(
        tmp_path, monkeypatch):
    """A queue whose record holds a year of other nights: the runner is SIGKILLed mid-job,
    the job ends while no runner watches it, and resume — which rewrites the outgrown record
    first — still finds its end: it is recorded, never run a second time."""
    monkeypatch.setattr(compact, "COMPACT_FROM", 64 * 1024)
    path = tmp_path / "night.queue.json"
    queue = Queue(name="night", max_consecutive_failures=0)
    queue.add(_plate(tmp_path))
    queue.add(Job(module="command", id="next", settings={"argv": ["true"]}))
    save_queue(queue, path)
    logs = tmp_path / "night_logs"
    logs.mkdir()
    gone = gone_pid()
    old = "".join(_attempt(job, _key(n), 10 + n, gone, 0) for n in range(300)
                  for job in ("plate", "next", f"old{n}"))
    (logs / EXIT_RECORD).write_text(old)
    ref = start_runner(path)
    pid = wait_until(lambda: pid_in(tmp_path / "plate.pid"), what="the job to start")
    os.kill(ref.pid, signal.SIGKILL)
    reap(ref.pid)
    (tmp_path / "go").write_text("")
    wait_until(lambda: not is_alive(pid), what="the job to end")
    left = load_queue(path).jobs[0]
    wait_until(lambda: examine(left).state == "finished", what="its end, by the keeper")
    assert (logs / EXIT_RECORD).stat().st_size > len(old)  # (the run, at the default bound, left it whole)

    result = resume_queue(path)

    plate, after = load_queue(path).jobs
    assert plate.status == "failed" and plate.exit_code == 3  # its real outcome, recorded
    assert after.status == "success" and not result.ok
    assert (tmp_path / "plate.runs").read_text() == "run\n"  # never run a second time
    record = (logs / EXIT_RECORD).read_text()
    assert len(record) < 4096 and "old17" not in record
    assert examine(plate).exit_code == 3 and examine(after).exit_code == 0


def test_the_rewrite_holds_what_it_keeps_not_the_record(tmp_path):
    """A year of the same jobs is 10 MB of their own lines: the rewrite holds two attempts of
    each job at a time (and the chunk it reads), not every line of theirs."""
    import tracemalloc
    logs = tmp_path / "night_logs"
    logs.mkdir()
    gone = gone_pid()
    night = "".join(_attempt(f"j{j}", "{key}", 10 + j, gone, 0) for j in range(20))
    with (logs / EXIT_RECORD).open("w") as fh:
        for n in range(2000):
            fh.write(night.replace("{key}", f"2026-01-01T00:00:00.{n:06d}+00:00"))
    size = (logs / EXIT_RECORD).stat().st_size
    assert size > 10 << 20
    jobs = [_job(logs, f"j{j}", "2026-01-01T00:00:00.001999+00:00") for j in range(20)]
    tracemalloc.start()
    try:
        said = compact.compact_exit_record(logs, jobs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak / 1e6:.1f} MB held to rewrite a {size / 1e6:.0f} MB record"
    assert "kept the 40 of the attempts" in said
    assert all(examine(job).exit_code == 0 for job in jobs)


def test_a_record_of_more_open_attempts_than_spacrq_writes_is_left_and_said(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(compact, "MAX_OPEN", 10)
    logs = tmp_path / "night_logs"
    logs.mkdir()
    text = "".join(_attempt(f"x{n}", "k", 10, gone_pid()) for n in range(11))
    (logs / EXIT_RECORD).write_text(text)
    said = compact.compact_exit_record(logs, [_job(logs, "a", "")], compact_from=100,
                                       room_per_job=0)
    assert said == (f"the exit record {logs / EXIT_RECORD} ({len(text) // 1024} KB) is left "
                    "as it is: it holds more than 10 attempts that never ended, which spacrq "
                    "does not write; move it away if nothing runs")
    assert (logs / EXIT_RECORD).read_text() == text


def test_a_record_of_garbage_is_emptied_and_said_so(tmp_path):
    logs = tmp_path / "night_logs"
    logs.mkdir()
    junk = os.urandom(50_000).replace(b"{", b"(")  # (no line of it can be a record)
    (logs / EXIT_RECORD).write_bytes(junk)
    said = compact.compact_exit_record(logs, [_job(logs, "a", "k")], compact_from=100,
                                       room_per_job=0)
    assert said == (f"the exit record {logs / EXIT_RECORD} (48 KB) held nothing but lines "
                    "that are not records (none of it written by spacrq); it was emptied")
    assert (logs / EXIT_RECORD).read_bytes() == b""


def test_only_the_queues_own_logs_folder_is_kept_small_by_its_runner(tmp_path, monkeypatch):
    """A run given another logs folder (``log_dir``, the in-process API) takes no runner lock
    there that any runner of the queue takes: its record there is left as it is — and the
    queue's own folder's record is kept small by a run of the queue's own."""
    from spacrq.queue import run_queue
    monkeypatch.setattr(compact, "COMPACT_FROM", 1000)
    monkeypatch.setattr(compact, "ROOM_PER_JOB", 0)
    path = tmp_path / "night.queue.json"
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", settings={"argv": ["true"]}))
    save_queue(queue, path)
    gone = gone_pid()
    text = "".join(_attempt("a", _key(n), 10 + n, gone, 0) for n in range(50))
    for folder in (tmp_path / "elsewhere", tmp_path / "night_logs"):
        folder.mkdir()
        (folder / EXIT_RECORD).write_text(text)
    assert run_queue(load_queue(path), path, log_dir=tmp_path / "elsewhere",
                     runner=lambda job, settings, log: 0).ok
    assert (tmp_path / "elsewhere" / EXIT_RECORD).read_text() == text
    assert (tmp_path / "night_logs" / EXIT_RECORD).read_text() == text
    assert resume_queue(path, runner=lambda job, settings, log: 0).ok
    assert len((tmp_path / "night_logs" / EXIT_RECORD).read_text().splitlines()) == 2


def test_a_line_appended_while_the_record_is_rewritten_is_carried_over(tmp_path, monkeypatch):
    """Another writer appends by the record's name after it was read and before the new one
    is renamed over it (the window of the rewrite itself): that line went into the old
    record, which the rename threw away. It is carried over into the new one."""
    logs = tmp_path / "night_logs"
    logs.mkdir()
    gone = gone_pid()
    (logs / EXIT_RECORD).write_text("".join(_attempt("a", _key(n), 10 + n, gone, 0)
                                            for n in range(100)))
    late = _attempt("a", "2099-01-01T00:00:00+00:00", 4242, gone, 7)
    real = compact.write_bytes

    def appended_meanwhile(path, data, **kw):
        with open(path, "a") as fh:  # (by its name, as every writer of the record opens it)
            fh.write(late)
        return real(path, data, **kw)

    monkeypatch.setattr(compact, "write_bytes", appended_meanwhile)
    said = compact.compact_exit_record(logs, [_job(logs, "a", _key(99))], compact_from=1000)
    assert "held 200 lines" in said
    text = (logs / EXIT_RECORD).read_text()
    assert text.endswith(late) and text.count("\n") == 5  # (2 kept, a fresh line, the 2 late)
    job = _job(logs, "a", "2099-01-01T00:00:00+00:00", "running")
    assert examine(job).exit_code == 7
