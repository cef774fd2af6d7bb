"""A disk that fills up in the night: the records a resume trusts keep room for their lines."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spacrq.queue import Job, Queue, save_queue
from spacrq.queue.journal import Journal
from spacrq.queue.room import (EXIT_RECORD_ROOM, JOURNAL_ROOM, give_back_room, keep_room,
                               kept_bytes, room_for)
from spacrq.queue.store import journal_path

linux = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="room is allocated ahead with Linux's fallocate")


def _night(tmp_path: Path, jobs: int) -> tuple[Queue, Path]:
    """A saved queue of ``jobs`` no-op command jobs, j0, j1, …"""
    queue = Queue(name="night")
    for n in range(jobs):
        queue.add(Job(module="command", id=f"j{n}", settings={"argv": ["true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    return queue, path


def test_room_grows_with_the_queue_within_its_bounds():
    per_job, least, most = JOURNAL_ROOM
    assert room_for(0) == least and room_for(10) == least
    assert room_for(1000) == 1000 * per_job
    assert room_for(10**7) == most
    assert room_for(2000, EXIT_RECORD_ROOM) == 2000 * EXIT_RECORD_ROOM[0]


@linux
def test_room_is_kept_past_the_end_unseen_and_given_back(tmp_path):
    fd = os.open(tmp_path / "record.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, b'{"a": 1}\n')
        assert keep_room(fd, 256 * 1024) == ""
        assert os.fstat(fd).st_size == 9  # no reader sees the room
        assert kept_bytes(fd) >= 256 * 1024 - 4096
        os.write(fd, b'{"b": 2}\n')  # an append lands in it
        assert os.fstat(fd).st_size == 18
        give_back_room(fd, 256 * 1024)
        assert kept_bytes(fd) < 8192 and os.fstat(fd).st_size == 18
    finally:
        os.close(fd)
    assert (tmp_path / "record.jsonl").read_bytes() == b'{"a": 1}\n{"b": 2}\n'


def test_where_no_room_can_be_kept_the_reason_is_said_never_raised():
    read, write = os.pipe()
    try:
        reason = keep_room(write, 4096)
        assert reason and isinstance(reason, str)
        give_back_room(write, 4096)  # (nothing to give back: no error either)
    finally:
        os.close(read)
        os.close(write)
    assert keep_room(987654, 4096)  # a closed descriptor: a reason too


@linux
def test_the_journal_keeps_room_while_it_is_written_and_gives_it_back(tmp_path):
    queue, path = _night(tmp_path, 300)
    room = room_for(len(queue.jobs))
    journal = Journal(queue, path, room=room)
    try:
        assert journal.room_problem == ""
        fd = os.open(journal_path(path), os.O_RDONLY)
        try:
            assert kept_bytes(fd) >= room - 4096
            journal.job(queue.jobs[0], ["status"])
            journal.checkpoint()  # emptied: the room is kept again
            assert os.fstat(fd).st_size == 0 and kept_bytes(fd) >= room - 4096
            journal.job(queue.jobs[1], ["status"])
        finally:
            os.close(fd)
    finally:
        journal.close()
    fd = os.open(journal_path(path), os.O_RDONLY)
    try:
        assert kept_bytes(fd) < 8192  # given back once the run is over
    finally:
        os.close(fd)
    assert b'"j1"' in journal_path(path).read_bytes()


def _namespaces_work() -> str:
    """'' when this machine lets a test mount a tmpfs of its own, else why not."""
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return "needs Linux's unshare to mount a small disk of its own"
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt 2>&1 || "
                            "mount -t tmpfs -o size=64k tmpfs /tmp 2>&1"],
                           capture_output=True, text=True)
    return "" if probe.returncode == 0 else \
        f"cannot mount a tmpfs in a namespace here ({probe.stdout.strip() or probe.stderr})"


def _night_on_a_full_disk(tmp_path, *more: str) -> tuple[str, str, list[str], dict]:
    why_not = _namespaces_work()
    if why_not:
        pytest.skip(why_not)
    disk, outside = tmp_path / "disk", tmp_path / "outside"
    disk.mkdir()
    outside.mkdir()
    driver = Path(__file__).with_name("fulldisk_night.py")
    subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable,
                    str(driver), str(disk), str(outside), "14", *more], check=True, timeout=300)
    return ((outside / "run.txt").read_text(), (outside / "resume.txt").read_text(),
            (outside / "ran").read_text().split(),
            json.loads((outside / "night.queue.json").read_text()))


def test_a_night_on_a_disk_that_fills_up_runs_no_job_twice(tmp_path):
    """A job fills the queue's disk; the 14 jobs after it run, their ends saved nowhere but in
    the room the journal and the exit record kept. In the morning space is freed and the
    queue resumed: nothing runs again, and the file shows every job's end."""
    run, resume, ran, on_disk = _night_on_a_full_disk(tmp_path)
    assert "No space left on device" in run, run  # the disk did fill up
    assert sorted(ran) == sorted(["fill"] + [f"j{n}" for n in range(14)]), (ran, resume)  # each once
    assert "every transition since is in its journal" in run, run
    assert "nothing left to run" in resume, resume
    assert [job["status"] for job in on_disk["jobs"]] == ["success"] * 15  # the file alone


@pytest.mark.parametrize("how", ["--detached", "--logged"])
def test_a_runner_logging_to_a_disk_full_from_the_start_runs_the_night_and_waits_to_save(
        tmp_path, how):
    """The pane's night (``--detached``) and cron's (``--logged``: ``queue run`` with its
    output into a log) on a disk full before it starts, where the records keep no room (a
    filesystem that cannot allocate ahead). The runner's own log is on that disk, so every
    line it writes is refused: the cron runner died of the first (an OSError from print)
    before any job ran. Now every job runs, their ends only in the runner's memory, so it
    waits; space is freed meanwhile, it saves, its log says how many lines it could not
    write, and the resume runs nothing again."""
    run, resume, ran, on_disk = _night_on_a_full_disk(tmp_path, how)
    outside = tmp_path / "outside"
    log = (outside / "runner.log").read_text()
    every = sorted(["fill"] + [f"j{n}" for n in range(14)])
    assert sorted((outside / "ran.night").read_text().split()) == every, (run, log)
    assert run.startswith("exit 0"), run
    assert " line(s) of this log could not be written, from " in log, log
    assert "the final state was saved after " in log, log
    assert sorted(ran) == every and "nothing left to run" in resume, resume
    assert [job["status"] for job in on_disk["jobs"]] == ["success"] * 15


def test_a_runner_killed_while_it_waits_to_save_leaves_nothing_to_run_again(tmp_path):
    """The same night on a disk full from the start, its runner and keeper SIGKILLed while
    they wait to save: the ends of all 15 jobs were in the runner's memory only, and the
    resume ran every one again. The runner's copy in memory outlives it: the resume reads
    it, runs nothing, and the file shows every job's end."""
    run, resume, ran, on_disk = _night_on_a_full_disk(tmp_path, "--killed")
    every = sorted(["fill"] + [f"j{n}" for n in range(14)])
    assert sorted((tmp_path / "outside" / "ran.night").read_text().split()) == every, run
    assert "read from a runner's copy of its state" in resume, resume
    assert sorted(ran) == every and "nothing left to run" in resume, resume
    assert [job["status"] for job in on_disk["jobs"]] == ["success"] * 15


@linux
def test_a_run_leaves_room_past_the_exit_record_and_none_past_the_journal(tmp_path):
    """The exit record's room is kept for the next night's lines (never cut back: a keeper
    of an earlier run may be appending); the journal's is given back; neither file's size
    counts it, so a reader sees only lines."""
    from spacrq.queue import run_queue
    from spacrq.queue.supervise import EXIT_RECORD
    queue, path = _night(tmp_path, 3)
    assert run_queue(queue, path).ok
    record = path.parent / "night_logs" / EXIT_RECORD
    lines = record.read_bytes()
    assert len([line for line in lines.splitlines() if line.strip()]) == 6  # start, end × 3
    fd = os.open(record, os.O_RDONLY)
    try:
        assert kept_bytes(fd) >= room_for(3, EXIT_RECORD_ROOM) - 4096
        assert os.fstat(fd).st_size == len(lines)
    finally:
        os.close(fd)
    fd = os.open(journal_path(path), os.O_RDONLY)
    try:
        assert kept_bytes(fd) < 8192
    finally:
        os.close(fd)


def test_a_line_the_room_could_not_hold_whole_is_no_line_and_never_swallows_the_next(
        tmp_path, monkeypatch):
    """The room ran out inside a line: ``os.write`` took part of it. That was taken for a
    written line (the summary then said nothing was lost, and resume ran the job again).
    Now it is a failed append; and a journal opened after it starts on a fresh line, so the
    line after the torn one is read."""
    from spacrq.queue.store import load_queue
    queue, path = _night(tmp_path, 2)
    journal = Journal(queue, path)
    real_write, calls = os.write, []

    def room_runs_out(fd, data):  # 20 bytes fit, then the disk is full
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(data[:20]))

    monkeypatch.setattr(os, "write", room_runs_out)
    queue.jobs[0].status = "success"
    with pytest.raises(OSError):
        journal.job(queue.jobs[0], ["status"])
    monkeypatch.undo()
    journal.close()
    torn = journal_path(path).read_bytes()
    assert not torn.endswith(b"\n")  # (part of the line is there)
    again = Journal(queue, path)
    queue.jobs[1].status = "success"
    again.job(queue.jobs[1], ["status"])
    again.close()
    loaded = load_queue(path)
    assert [j.status for j in loaded.jobs] == ["pending", "success"]  # b's line was read
    assert loaded.journal_skipped == 1  # (the torn one, said)


def test_room_counts_each_jobs_attempts_and_the_length_of_its_paths():
    """A night of failing jobs with retries, or of long lab paths, writes several times
    what its job count says: its room used to run out mid-night."""
    def jobs(n, **kw):
        return [Job(module="command", id=f"j{k}", settings={"argv": ["true"]}, **kw)
                for k in range(n)]
    plain = room_for(jobs(400))
    assert room_for(jobs(400, retries=2)) >= 3 * plain - 4096
    deep = "/data/" + "plate-scans/" * 30
    assert room_for(jobs(400, cwd=deep)) > 2 * plain
    assert room_for(jobs(400), folder=deep) > 2 * plain
    assert room_for(jobs(10**5, retries=5)) == JOURNAL_ROOM[2]  # (bounded)
    assert room_for(jobs(3)) == JOURNAL_ROOM[1]


@linux
def test_the_journal_keeps_its_room_again_once_half_of_it_was_written(tmp_path):
    queue, path = _night(tmp_path, 1)
    room = 32 * 1024
    journal = Journal(queue, path, room=room)
    fd = os.open(journal_path(path), os.O_RDONLY)
    try:
        for n in range(400):  # (about 40 KB of lines: more than the room)
            queue.jobs[0].error = f"attempt {n} " + "x" * 60
            journal.job(queue.jobs[0], ["error"])
            assert kept_bytes(fd) >= room // 2 - 4096, n
        assert os.fstat(fd).st_size > room
    finally:
        os.close(fd)
        journal.close()


@linux
def test_the_exit_records_room_is_kept_again_as_the_night_goes_on(tmp_path):
    from spacrq.queue import run_queue
    from spacrq.queue.supervise import EXIT_RECORD
    queue, path = _night(tmp_path, 100)
    assert run_queue(queue, path).ok
    record = path.parent / "night_logs" / EXIT_RECORD
    assert record.stat().st_size > 25_000  # (a third of the room written…)
    fd = os.open(record, os.O_RDONLY)
    try:  # (…and the room still nearly whole: kept again every few attempts)
        assert kept_bytes(fd) >= room_for(queue.jobs, EXIT_RECORD_ROOM, str(record.parent)) \
            - 16 * 1024
    finally:
        os.close(fd)


def test_on_a_nearly_full_disk_what_room_fits_is_kept_and_said(tmp_path):
    """All of a request or none: 256 KB wanted on a disk with 100 KB free kept nothing. Now
    what fits is kept — half of what is free, so the queue file can still be replaced."""
    why_not = _namespaces_work()
    if why_not:
        pytest.skip(why_not)
    disk = tmp_path / "disk"
    disk.mkdir()
    script = (
        "import os, subprocess, sys\n"
        "from spacrq.queue.room import keep_room, kept_bytes\n"
        f"disk = {str(disk)!r}\n"
        "subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', disk], check=True)\n"
        "with open(disk + '/fill', 'wb') as f:\n"
        "    f.write(b'x' * (1024 * 1024 - 100 * 1024))\n"
        "fd = os.open(disk + '/record', os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
        "print(keep_room(fd, 256 * 1024))\n"
        "print(kept_bytes(fd))\n")
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable,
                           "-c", script], capture_output=True, text=True, timeout=60)
    said, kept = done.stdout.splitlines()
    assert said == "only 48 of the 256 KB wanted (the disk is nearly full)"  # (half of 100)
    assert int(kept) >= 48 * 1024


@pytest.mark.parametrize("output", ["/dev/full", "closed pipe"])
def test_a_runner_whose_output_cannot_be_written_runs_its_night(tmp_path, output):
    """``queue run`` writing into a device that refuses every write (/dev/full) raised from
    print and was recorded crashed; one whose pipe's reader went away (``| logger``, the
    logger restarted) died silently with exit 0. The night goes on whatever becomes of its
    output."""
    from spacrq.queue.runner import runner_state
    from spacrq.queue.store import load_queue
    queue, path = _night(tmp_path, 3)
    argv = [sys.executable, "-m", "spacrq", "queue", "run", str(path)]
    if output == "/dev/full":
        with open("/dev/full", "wb") as full:
            code = subprocess.run(argv, stdout=full, stderr=full, timeout=120).returncode
    else:
        read, write = os.pipe()
        os.close(read)  # (nobody reads: every write is EPIPE)
        try:
            code = subprocess.run(argv, stdout=write, stderr=write, timeout=120).returncode
        finally:
            os.close(write)
    assert code == 0
    assert [j.status for j in load_queue(path).jobs] == ["success"] * 3
    assert runner_state(path)["state"] == "finished"
