"""Process control: detached starts, identity by start time, SIGTERM → grace → SIGKILL."""
from __future__ import annotations

import sys
import time

import pytest

from spacrq.procs import ProcessRef, is_alive, spawn_detached, stop_group
from waiting import wait_until  # tests/waiting.py (tests/ is on the path)


def test_spawn_detached_runs_in_its_own_session_and_logs(tmp_path):
    log = tmp_path / "out.log"
    proc = spawn_detached([sys.executable, "-c", "import os; print('sid', os.getsid(0))"], log_path=log)
    assert proc.wait(timeout=20) == 0
    text = log.read_text()
    assert f"sid {proc.pid}" in text  # the child leads its own session


def test_spawn_refuses_a_shell_string():
    with pytest.raises(TypeError, match="never a shell string"):
        spawn_detached("echo hi; rm -rf /")


def test_process_ref_tells_a_reused_pid_from_the_original(tmp_path):
    proc = spawn_detached([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ref = ProcessRef.of(proc.pid)
        assert ref.alive()
        assert not ProcessRef(proc.pid, ref.started - 1000).alive()  # same pid, other process
        assert ProcessRef.from_dict(ref.to_dict()) == ref
        assert ProcessRef.from_dict({"pid": "x"}) is None
    finally:
        assert stop_group(proc.pid, grace=2, popen=proc) == "terminated"
    assert not ref.alive()


def test_stop_group_escalates_to_kill_for_a_process_ignoring_sigterm(tmp_path):
    ready = tmp_path / "ready"
    code = (
        "import signal, time, pathlib, subprocess, sys\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        f"pathlib.Path({str(ready)!r}).write_text(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    proc = spawn_detached([sys.executable, "-c", code])
    wait_until(lambda: ready.exists() and ready.read_text())
    grandchild = int(ready.read_text())
    started = time.monotonic()
    assert stop_group(proc.pid, grace=0.5, popen=proc) == "killed"
    assert time.monotonic() - started < 8
    assert not is_alive(proc.pid)
    wait_until(lambda: not is_alive(grandchild))  # the whole group went


def test_stop_group_on_a_finished_process_says_gone():
    proc = spawn_detached([sys.executable, "-c", "pass"])
    proc.wait(timeout=20)
    assert stop_group(proc.pid, grace=1, popen=proc) == "gone"
    assert not is_alive(None) and not is_alive(-5)


def test_stop_group_never_signals_the_group_of_a_pid_that_leads_none(tmp_path):
    """A recorded pid that now names a process which leads no group (a reused pid, e.g. one
    of an operator's shell pipeline) is stopped alone: its group is not the job's."""
    import os
    import signal
    import subprocess
    import psutil
    group = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"], start_new_session=True)
    try:
        kids = wait_until(lambda: len(psutil.Process(group.pid).children()) == 2
                          and psutil.Process(group.pid).children(), what="two children")
        victim, bystander = kids
        assert os.getpgid(victim.pid) == group.pid != victim.pid
        assert stop_group(victim.pid, 2.0, started=victim.create_time()) == "terminated"
        assert not is_alive(victim.pid) and bystander.is_running()
        assert group.poll() is None  # the leader (and its group) were left alone
    finally:
        os.killpg(group.pid, signal.SIGKILL)
        group.wait()


@pytest.mark.parametrize("given", ["inf", "nan", "-inf", "1e400", "-5", "0", "1e300", "soon",
                                   "tomorrow"])
def test_a_stand_in_boot_time_that_no_clock_can_show_is_ignored(monkeypatch, given):
    """``SPACRQ_BOOTED_AT`` of garbage (an infinite or huge time overflowed where a
    resumed job's log dates the restart) or in the future falls back to the machine's own
    boot time."""
    from datetime import datetime, timezone

    import psutil

    import time

    from spacrq.procs import booted_at
    if given == "tomorrow":  # (a restart still to come: a job that ran would run again)
        given = str(time.time() + 86400)
    monkeypatch.setenv("SPACRQ_BOOTED_AT", given)
    assert booted_at() == float(psutil.boot_time())
    datetime.fromtimestamp(booted_at(), timezone.utc)  # (a moment that can be told)
    monkeypatch.setenv("SPACRQ_BOOTED_AT", "1796300000.5")
    assert booted_at() == 1796300000.5
