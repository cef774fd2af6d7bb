"""A job's peak memory, as its supervisor writes it down: the job's own figure, or an honest bound.

Linux folds into a process's ``ru_maxrss``, at its exec, the peak of the
memory it was started from: a job the supervisor starts by vfork is given
the supervisor's own peak when it stays smaller.  Those jobs must be told
as "at most", never with the supervisor's figure as their own.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from spacrq.night.collect import gather
from spacrq.night.html import render
from spacrq.queue.engine import run_queue
from spacrq.queue.model import Job, Queue
from spacrq.queue.store import load_queue, save_queue
from spacrq.queue.supervise import exit_record_path, legacy_record_path
from spacrq.runfiles import read_jsonl

#: a job that holds 200 MB resident (every page written) before it ends
BIG = 200 * 10**6


def _allocating(size: int) -> list[str]:
    """A job holding ``size`` bytes resident; it prints its own high-water mark (KiB) last."""
    return [sys.executable, "-c",
            f"b = bytearray({size}); b[::4096] = b'x' * len(b[::4096]); "
            "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"]


def _own_peak(job) -> int:
    """The high-water mark the job printed about itself, in bytes."""
    text = Path(job.log_path).read_text()
    lines = [ln for ln in text.splitlines() if ln.strip().isdigit()]
    return int(lines[-1]) * 1024


def _ends(path) -> dict:
    """Each job's end line of its exit record."""
    out = {}
    for job in load_queue(path).jobs:
        lines = [r for r in read_jsonl(exit_record_path(job.log_path))
                 if "exit_code" in r and r.get("job") == job.id]
        out[job.id] = lines[-1]
    return out


def _night(tmp_path):
    queue = Queue(name="memory")
    queue.add(Job(module="command", id="nap", settings={"argv": ["/bin/sleep", "0.1"]}),
              validate=False)
    queue.add(Job(module="command", id="false", settings={"argv": ["false"]}), validate=False)
    queue.add(Job(module="command", id="big", settings={"argv": _allocating(BIG)}),
              validate=False)
    # above the supervisor's own memory (~15 MB), below what its starter (this test's
    # interpreter, the runner in a real night) folded into the supervisor's getrusage
    queue.add(Job(module="command", id="mid", settings={"argv": _allocating(30 * 10**6)}),
              validate=False)
    path = tmp_path / "memory.queue.json"
    save_queue(queue, path)
    run_queue(queue, path)
    return path


def test_a_job_smaller_than_its_supervisor_is_told_at_most_and_a_big_one_exactly(tmp_path):
    path = _night(tmp_path)
    ends = _ends(path)
    for small in ("nap", "false"):  # posix_spawn (a path) and Popen (a name on PATH) alike
        end = ends[small]
        assert end["peak_rss_bytes"] is None, end  # not the supervisor's figure as the job's
        bound = end["peak_rss_at_most_bytes"]
        assert 1 << 20 < bound < 150 << 20, end
    big = ends["big"]
    assert "peak_rss_at_most_bytes" not in big
    assert abs(big["peak_rss_bytes"] - BIG) < 0.1 * BIG, big
    jobs = {job.id: job for job in load_queue(path).jobs}
    for exact in ("big", "mid"):  # the kernel's figure is the job's own
        own = _own_peak(jobs[exact])
        assert abs(ends[exact]["peak_rss_bytes"] - own) < 0.1 * own, (ends[exact], own)

    facts = {f.job.id: f for f in gather(path, with_machine=False).jobs}
    assert facts["nap"].peak_rss_bytes is None
    assert facts["nap"].peak_rss_at_most_bytes == ends["nap"]["peak_rss_at_most_bytes"]
    assert facts["big"].peak_rss_bytes == big["peak_rss_bytes"]
    assert facts["big"].peak_rss_at_most_bytes is None
    page = render(gather(path, with_machine=False), written_at="2026-12-01T07:00:00+00:00")
    label = r"(?:<br>[^<]*<span[^>]*>[^<]*</span>)?"  # a job's label, when it has one
    rows = {job: re.search(rf"<td>{job}{label}</td>.*?</tr>", page).group(0)
            for job in ("nap", "false", "big")}
    assert "≤ " in rows["nap"] and "≤ " in rows["false"], rows
    assert f"{big['peak_rss_bytes'] / 2**20:.1f} MiB" in rows["big"] and "≤" not in rows["big"]
    assert "known only to have peaked at most" in page


def test_the_kernel_folds_the_starters_peak_into_a_small_child(tmp_path):
    """The mechanism the bound guards against, seen on this machine's kernel."""
    code = ("import os, subprocess; b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096]); "
            "p = subprocess.Popen(['true']); print(os.wait4(p.pid, 0)[2].ru_maxrss)")
    kib = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, timeout=60).stdout)
    assert kib > 150 << 10  # `true` "peaked" at the starter's 200 MB


def test_an_old_exit_record_with_only_a_figure_is_read_as_written(tmp_path):
    """A record an older supervisor wrote (no bound field; spacrq 0.1's, one per job beside
    its log) keeps its figure in the report."""
    from spacrq.night.collect import _job_peak_rss
    log = tmp_path / "01_a.log"
    log.write_text("")
    job = Job(module="command", id="a", settings={"argv": ["true"]})
    job.log_path, job.started = str(log), "2026-12-01T01:00:00+00:00"
    record = legacy_record_path(str(log))
    with open(record, "w") as fh:
        fh.write('{"key":"2026-12-01T00:00:00+00:00","exit_code":0,"peak_rss_bytes":999999}\n')
        fh.write(f'{{"key":"2026-12-01T01:00:00+00:00","pid":{os.getpid()},"started":1}}\n')
        fh.write('{"key":"2026-12-01T01:00:00+00:00","exit_code":0,"peak_rss_bytes":5000000}\n')
    assert _job_peak_rss(job, tmp_path) == (5000000, None)
    with open(record, "a") as fh:  # a later attempt of the job, below its supervisor
        fh.write('{"key":"2026-12-01T02:00:00+00:00","exit_code":0,"peak_rss_bytes":null,'
                 '"peak_rss_at_most_bytes":15000000}\n')
    job.started = "2026-12-01T02:00:00+00:00"
    assert _job_peak_rss(job, tmp_path) == (None, 15000000)


def test_a_figure_not_clearly_above_the_supervisor_is_never_told_as_the_jobs(monkeypatch):
    """Where the supervisor's own high-water mark cannot be read, a figure within its
    getrusage peak stays "at most"; one clearly above it is the job's own."""
    import resource

    from spacrq.queue import supervise
    monkeypatch.setattr(supervise, "_own_hwm_kib", lambda: 0)
    monkeypatch.setattr(supervise, "_own_seen_kib", 0)
    mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert supervise._peak_of(mine) == {"peak_rss_bytes": None,
                                        "peak_rss_at_most_bytes": mine * 1024}
    assert supervise._peak_of(mine + supervise.SLACK_KIB // 2)["peak_rss_bytes"] is None
    assert supervise._peak_of(mine + 64 * 1024) == {"peak_rss_bytes": (mine + 64 * 1024) * 1024}
    assert supervise._peak_of(0) == {"peak_rss_bytes": None}


def test_each_jobs_figure_comes_from_its_own_lines_of_the_queues_record(tmp_path):
    """One exit record for the queue: a job's figure is its attempt's, else its own latest,
    never another job's (however close its lines, however alike its attempt's key)."""
    from spacrq.night.collect import _job_peak_rss
    key = "2026-12-01T01:00:00+00:00"
    lines = [{"job": "b", "key": key, "exit_code": 0, "peak_rss_bytes": 777},
             {"job": "a", "key": "2026-12-01T00:00:00+00:00", "exit_code": 0,
              "peak_rss_bytes": 111},
             {"job": "c", "key": "x", "exit_code": 0, "peak_rss_bytes": 999}]
    Path(exit_record_path(str(tmp_path / "01_a.log"))).write_text(
        "".join(json.dumps(line) + "\n" for line in lines))
    jobs = {}
    for i, jid in enumerate("abd"):
        job = Job(module="command", id=jid, settings={"argv": ["true"]})
        job.log_path, job.started = str(tmp_path / f"0{i + 1}_{jid}.log"), key
        jobs[jid] = job
    assert _job_peak_rss(jobs["b"], tmp_path) == (777, None)  # its attempt's
    assert _job_peak_rss(jobs["a"], tmp_path) == (111, None)  # its own latest (no line of this attempt)
    assert _job_peak_rss(jobs["d"], tmp_path) == (None, None)  # no line of its own: nobody else's figure


def test_the_report_reads_a_jobs_figure_only_in_the_queues_own_folder(tmp_path):
    """The file names a job's log, and the exit record beside it was read wherever that was
    (another folder's ``exits.jsonl``): only the queue's own logs folder is read now."""
    from spacrq.night.collect import _job_peak_rss
    elsewhere, logs = tmp_path / "elsewhere", tmp_path / "night_logs"
    elsewhere.mkdir()
    logs.mkdir()
    key = "2026-12-01T01:00:00+00:00"
    Path(exit_record_path(str(elsewhere / "01_a.log"))).write_text(json.dumps(
        {"job": "a", "key": key, "exit_code": 0, "peak_rss_bytes": 4242}) + "\n")
    job = Job(module="command", id="a", settings={"argv": ["true"]})
    job.log_path, job.started = str(elsewhere / "01_a.log"), key
    assert _job_peak_rss(job, logs) == (None, None)
    assert _job_peak_rss(job, elsewhere) == (4242, None)
