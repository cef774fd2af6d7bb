"""Status replayed from the journal by spacrq: states, torn lines, dead processes, control."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from spacrq import experiments as ex
from spacrq.procs import ProcessRef
from spacrq.runfiles import write_json

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def ev(name, second, **fields):
    return {"event": name, "ts": (T0 + timedelta(seconds=second)).isoformat(), **fields}


def write_journal(run, events, mode="w"):
    run.mkdir(parents=True, exist_ok=True)
    with open(run / "journal.jsonl", mode) as handle:
        for e in events:
            handle.write(json.dumps(e) + "\n")


def steps(n, start=0, t=1.0):
    out = []
    for i in range(start, start + n):
        out += [ev("step_started", t * i + 1, step_id=f"s{i}", index=i, op="point"),
                ev("step_completed", t * i + 1.5, step_id=f"s{i}", index=i, recorded=True)]
    return out


def started(total=5, **extra):
    return ev("run_started", 0, run_id="r", total_steps=total,
              provenance={"experiment": "Scan", "versions": {"plesty-lib": "0.6.0"}}, **extra)


def owned(run):
    """Record this test's process as the run's: the fold, not the owner, is under test."""
    write_json(run / "spacrq-process.json", ProcessRef.of(os.getpid()).to_dict())


def dead_ref():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    ref = ProcessRef.of(proc.pid)
    proc.wait()
    return ref


def test_no_journal_is_not_started_or_created(tmp_path):
    assert ex.status_of(tmp_path / "r")["state"] == "not_started"
    ex.create_run(tmp_path / "r", "{}")
    status = ex.status_of(tmp_path / "r")
    assert status["state"] == "created" and not status["resumable"]


def test_lifecycle_states_and_counts(tmp_path):
    run = tmp_path / "r"
    write_journal(run, [started()] + steps(2) + [ev("run_paused", 3)])
    owned(run)
    status = ex.status_of(run)
    assert status["state"] == "paused" and status["completed"] == 2
    assert status["provenance"]["versions"] == {"plesty-lib": "0.6.0"}
    write_journal(run, [ev("run_resumed", 4), ev("report", 4.5, text="helium top-up")]
                  + steps(3, start=2) + [ev("run_completed", 9)], mode="a")
    status = ex.status_of(run)
    assert status["state"] == "completed" and status["completed"] == 5
    assert status["reports"] == ["helium top-up"]
    assert status["started"] == T0.isoformat()
    assert status["ended"] == (T0 + timedelta(seconds=9)).isoformat()
    assert not status["resumable"]
    assert ex.reports_in(status, {"reports": ["later"]}) == ["helium top-up", "later"]


@pytest.mark.parametrize("terminal,state", [
    (ev("run_canceled", 5, reason="lunch"), "canceled"),
    (ev("run_aborted", 5, reason="", by="operator"), "aborted"),
    (ev("run_aborted", 5, by="spacrq"), "aborted"),
    (ev("run_aborted", 5, error="RuntimeError('stage stuck')"), "failed"),
])
def test_every_unfinished_end_is_resumable(tmp_path, terminal, state):
    run = tmp_path / "r"
    write_journal(run, [started()] + steps(2) + [terminal])
    status = ex.status_of(run)
    assert status["state"] == state and status["resumable"]


def test_a_resume_after_an_end_reads_running_again(tmp_path):
    run = tmp_path / "r"
    write_journal(run, [started()] + steps(2) + [ev("run_canceled", 5), started(resumed=True)])
    owned(run)
    status = ex.status_of(run)
    assert status["state"] == "running" and status["ended"] is None and status["starts"] == 2


def test_torn_last_line_is_left_for_the_next_refresh(tmp_path):
    run = tmp_path / "r"
    write_journal(run, [started()] + steps(1))
    line = json.dumps(ev("step_started", 2, step_id="s1", index=1))
    with open(run / "journal.jsonl", "a") as handle:
        handle.write(line[:17])
    owned(run)
    watch = ex.RunWatch(run)
    first = watch.status()
    assert first["state"] == "running" and first["in_flight"] is None
    assert first["bad_lines"] == 0
    with open(run / "journal.jsonl", "a") as handle:
        handle.write(line[17:] + "\n")
    assert watch.status()["in_flight"]["step_id"] == "s1"


def test_refresh_reads_only_new_bytes(tmp_path):
    run = tmp_path / "r"
    write_journal(run, [started(total=200)] + steps(100))
    watch = ex.RunWatch(run)
    watch.refresh()
    size = (run / "journal.jsonl").stat().st_size
    assert watch.journal_tail.offset == size
    extra = steps(1, start=100)
    write_journal(run, extra, mode="a")
    before = watch.bytes_read
    snap = watch.refresh()
    assert watch.bytes_read - before == sum(len(json.dumps(e)) + 1 for e in extra)
    assert snap["status"]["completed"] == 101


def test_replaced_journal_starts_the_replay_over(tmp_path):
    run = tmp_path / "r"
    write_journal(run, [started()] + steps(3))
    watch = ex.RunWatch(run)
    assert watch.status()["completed"] == 3
    os.unlink(run / "journal.jsonl")
    write_journal(run, [started()] + steps(1))
    assert watch.status()["completed"] == 1


def test_running_journal_with_a_dead_process_reads_interrupted(tmp_path):
    run = tmp_path / "r"
    write_journal(run, [started()] + steps(2) + [ev("step_started", 3, step_id="s2", index=2)])
    write_json(run / "spacrq-process.json", {**dead_ref().to_dict(), "launched": 1.0})
    status = ex.status_of(run)
    assert status["state"] == "interrupted" and status["resumable"] and status["alive"] is False
    assert ex.resumable(tmp_path) == "r"


def test_live_process_and_a_stop_request_read_stopping(tmp_path):
    run = tmp_path / "r"
    write_journal(run, [started()] + steps(1))
    write_json(run / "spacrq-process.json", ProcessRef.of(os.getpid()).to_dict())
    assert ex.status_of(run)["state"] == "running"
    ex.cancel(run, "end of shift")
    status = ex.status_of(run)
    assert status["state"] == "stopping" and status["asked"]["stop"] == "cancel"
    assert not status["resumable"]


def test_garbled_control_file_reads_as_nothing_asked_and_is_repaired(tmp_path):
    run = tmp_path / "r"
    write_journal(run, [started()] + steps(1))
    write_json(run / "spacrq-process.json", ProcessRef.of(os.getpid()).to_dict())
    (run / "control.json").write_text('{"stop": "canc')
    status = ex.status_of(run)
    assert status["state"] == "running" and status["control_problem"]
    assert ex.asked(run) == {}
    assert ex.pause(run)["paused"] is True
    assert ex.asked(run)["paused"] is True and ex.status_of(run)["control_problem"] == ""
    ex.clear(run)
    assert ex.asked(run) == {}


def test_resumable_picks_the_newest_unfinished_run(tmp_path):
    write_journal(tmp_path / "s_1", [started()] + steps(5) + [ev("run_completed", 9)])
    write_journal(tmp_path / "s_2", [started()] + steps(1) + [ev("run_canceled", 3)])
    write_journal(tmp_path / "s_3", [started()] + steps(5) + [ev("run_completed", 9)])
    assert ex.resumable(tmp_path) == "s_2"
    assert ex.resumable(tmp_path / "none") is None


def test_records_are_read_incrementally_and_flattened(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    lines = [{"index": i, "provenance": {"step_id": f"s{i}"}, "type": "value",
              "value": {"x": i, "y": 2 * i}} for i in range(5)]
    (run / "records.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"ind')
    tail = ex.RecordsTail(run)
    new, restarted = tail.refresh()
    assert len(new) == 5 and not restarted
    assert ex.record_row(new[2]) == {"index": 2, "step_id": "s2", "x": 2, "y": 4}
    assert ex.records_of(run, limit=2) == lines[-2:]
    with open(run / "records.jsonl", "a") as handle:
        handle.write('ex": 5, "type": "value", "value": 7}\n')
    new, _ = tail.refresh()
    assert new == [{"index": 5, "type": "value", "value": 7}]
    assert ex.record_row(new[0])["value"] == 7


def test_progress_estimates_and_the_step_in_flight(tmp_path):
    run = tmp_path / "r"
    write_journal(run, [started(total=10)] + steps(4, t=2.0)
                  + [ev("step_started", 9, step_id="s4", index=4)])
    write_json(run / "plan.json", {"config": {}, "steps": [{"id": f"s{i}", "op": "p"}
                                                          for i in range(10)]})
    write_json(run / "spacrq-process.json", ProcessRef.of(os.getpid()).to_dict())
    write_json(run / "progress.json", {"step_id": "s4", "done": 2, "total": 4, "detail": "reading"})
    snap = ex.RunWatch(run).refresh()
    progress = snap["progress"]
    assert progress["total"] == 10 and progress["completed"] == 4
    assert progress["fraction"] == pytest.approx(0.4)
    assert progress["step_s"] == pytest.approx(0.5)
    assert progress["eta_s"] == pytest.approx(3.0)
    assert progress["step"]["detail"] == "reading"
    assert ex.progress_of(run)["done"] == 2
    assert [s["id"] for s in ex.steps_of(run)][:2] == ["s0", "s1"]
    (run / "plan.json").write_text("{broken")
    assert ex.steps_of(run) == []
