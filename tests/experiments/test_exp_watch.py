"""The Experiments pane's watch (spacrq.experiments.watch): the poll, the actions, closing."""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from spacrq.experiments.asking import ManifestAsker
from spacrq.experiments.declarations import ExperimentSpec, declare_experiment
from spacrq.experiments.errors import PROCESS_FILE
from spacrq.experiments.runs import create_run
from spacrq.experiments.watch import ExperimentsWatch, Snapshot
from spacrq.procs import ProcessRef
from spacrq.runfiles import write_json
from spacrq.watching import Code
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _event(name, ts, **fields):
    return json.dumps({"event": name, "ts": ts, **fields}) + "\n"


def _iso(epoch):
    from datetime import datetime, timezone
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat()


@pytest.fixture
def declared(workspace):
    run_root = workspace.experiments / "sweep" / "runs"
    spec = ExperimentSpec("sweep", "spacrq.experiments.demo_sweep", sys.executable, str(ROOT), {},
                          str(run_root))
    declare_experiment(workspace.root, spec)
    run_root.mkdir(parents=True)
    return spec, run_root


def _started(run_root: Path, run_id: str, steps: int, done: int, *, alive: bool,
             extra: str = "") -> Path:
    run_dir = run_root / run_id
    run_dir.mkdir()
    write_json(run_dir / "plan.json", {"config": {}, "steps": [{"id": f"s{i}", "op": "m",
                                                                  "params": {}} for i in range(steps)]})
    t0 = time.time() - 100
    lines = [_event("run_started", _iso(t0), total_steps=steps)]
    for i in range(done):
        lines.append(_event("step_started", _iso(t0 + 2 * i), step_id=f"s{i}", index=i))
        lines.append(_event("step_completed", _iso(t0 + 2 * i + 1.5), step_id=f"s{i}", index=i))
    (run_dir / "journal.jsonl").write_text("".join(lines) + extra)
    ref = ProcessRef.of(os.getpid()) if alive else ProcessRef(2 ** 22 + 17, 1.0)
    write_json(run_dir / PROCESS_FILE, {**ref.to_dict(), "launched": t0 - 1})
    return run_dir



def _outcomes(watch, view, count, timeout=20.0):
    """Poll until ``count`` outcomes came (slow actions answer in a later poll)."""
    got = []

    def enough():
        got.extend(watch.poll(view).outcomes)
        return len(got) >= count

    wait_until(enough, timeout, f"{count} outcomes")
    return got


def test_poll_lists_every_run_with_its_state_newest_first(declared, workspace):
    spec, run_root = declared
    create_run(run_root / "a_created", "{}\n", experiment="sweep")
    _started(run_root, "b_running", 10, 4, alive=True)
    _started(run_root, "c_interrupted", 10, 4, alive=False)
    _started(run_root, "d_done", 2, 2, alive=False, extra=_event("run_completed", _iso(time.time())))
    paused = _started(run_root, "e_paused", 10, 1, alive=True,
                      extra=_event("run_paused", _iso(time.time())))
    stopping = _started(run_root, "f_stopping", 10, 1, alive=True)
    write_json(stopping / "control.json", {"stop": "cancel"})
    watch = ExperimentsWatch(workspace.root)
    watch.FIRST_READ_BUDGET = 60.0  # every history in one poll, however busy the machine
    snap = watch.poll({"experiment": "sweep"})
    assert isinstance(snap, Snapshot) and snap.outcomes == ()
    assert snap.experiments[0]["name"] == "sweep" and snap.declaration_error == ""
    states = {run.run_id: run.state for run in snap.runs}
    # newest first by start (a run never started: by its creation, just now)
    assert [r.run_id for r in snap.runs] == ["a_created", "f_stopping", "e_paused", "d_done",
                                             "c_interrupted", "b_running"]
    assert [row.key for row in snap.rows] == [r.run_id for r in snap.runs]
    assert states == {"a_created": "created", "b_running": "running",
                      "c_interrupted": "interrupted", "d_done": "completed",
                      "e_paused": "paused", "f_stopping": "stopping"}
    running = snap.run("b_running")
    assert (running.done, running.total) == (4, 10)
    assert running.eta is not None and 0 < running.eta <= 1.5 * 6
    assert paused.exists()
    assert watch.close(1.0)


def test_runs_are_listed_by_when_they_started_not_by_their_names(declared, workspace):
    """Runs named by hand ('zz-first', 'aa-second') were listed by name, not by start."""
    spec, run_root = declared
    first = _started(run_root, "zz-first", 2, 2, alive=False)
    second = _started(run_root, "aa-second", 2, 2, alive=False)
    for run_dir, t0 in ((first, time.time() - 500), (second, time.time() - 100)):
        (run_dir / "journal.jsonl").write_text(
            _event("run_started", _iso(t0), total_steps=2)
            + _event("run_completed", _iso(t0 + 5)))
    watch = ExperimentsWatch(workspace.root)
    watch.FIRST_READ_BUDGET = 60.0
    snap = watch.poll({"experiment": "sweep"})
    assert [r.run_id for r in snap.runs] == ["aa-second", "zz-first"]
    assert [row.key for row in snap.rows] == ["aa-second", "zz-first"]
    assert watch.close(1.0)


def test_refresh_reads_only_what_the_journal_gained(declared, workspace):
    spec, run_root = declared
    run_dir = _started(run_root, "r", 1000, 500, alive=True)
    watch = ExperimentsWatch(workspace.root)
    watch.poll({"experiment": "sweep"})
    size = (run_dir / "journal.jsonl").stat().st_size
    assert watch.journal_read("r") == size
    with open(run_dir / "journal.jsonl", "a") as f:
        f.write(_event("step_started", _iso(time.time()), step_id="s500", index=500))
        f.write('{"event": "step_completed", "ts": "torn')  # a write in progress
    snap = watch.poll({"experiment": "sweep"})
    run = snap.runs[0]
    assert run.step == "s500" and run.done == 500
    assert watch.journal_read("r") == (run_dir / "journal.jsonl").stat().st_size  # once, not again


def test_the_looked_at_run_gets_new_records_log_notes_and_config(declared, workspace):
    spec, run_root = declared
    run_dir = _started(run_root, "r", 10, 2, alive=True)
    with open(run_dir / "records.jsonl", "w") as f:
        for i in range(2):
            f.write(json.dumps({"index": i, "value": {"signal": i * 1.5}}) + "\n")
    (run_dir / "config.yaml").write_text('{"points": 10}\n')
    log = run_dir / "job-logs" / "r_1.log"
    log.parent.mkdir()
    log.write_text("step 1\n")
    watch = ExperimentsWatch(workspace.root)
    first = watch.poll({"experiment": "sweep", "run": "r"}).detail
    assert first.records.reset and list(first.records.index) == [0, 1]
    assert first.log == "step 1\n" and first.config_changed and first.config == {"points": 10}
    assert first.notes_changed and first.notes == () and first.report is None
    with open(run_dir / "records.jsonl", "a") as f:
        f.write(json.dumps({"index": 2, "value": {"signal": 3.0}}) + "\n")
    with open(log, "a") as f:
        f.write("step 2\n")
    watch.submit(1, "note", experiment="sweep", run_id="r", text="helium topped up")
    second = watch.poll({"experiment": "sweep", "run": "r"})
    detail = second.detail
    assert not detail.records.reset and list(detail.records.index) == [2]
    assert detail.records.first == 2
    assert detail.log == "step 2\n" and not detail.config_changed
    assert [n["text"] for n in detail.notes] == ["helium topped up"]
    assert detail.notes[0]["by"] and detail.notes[0]["at"]
    (noted,) = second.outcomes
    assert (noted.token, noted.action, noted.code) == (1, "note", Code.DONE)


def test_actions_answer_with_a_code_and_a_sentence(declared, workspace):
    spec, run_root = declared
    watch = ExperimentsWatch(workspace.root)
    watch.submit(1, "create", experiment="sweep", run_id="tonight", config={"points": 5})
    (created,) = _outcomes(watch, {"experiment": "sweep"}, 1)
    assert created.token == 1 and created.ok and created.data["select"] == "tonight"
    assert json.loads((run_root / "tonight" / "config.yaml").read_text()) == {"points": 5}
    watch.submit(2, "rename", experiment="sweep", run_id="tonight", new_id="../escape")
    watch.submit(3, "rename", experiment="sweep", run_id="tonight", new_id="tomorrow")
    watch.submit(4, "note", experiment="sweep", run_id="tomorrow", text="   ")
    watch.submit(5, "explode", experiment="sweep", run_id="tomorrow")
    watch.submit(6, "pause", experiment="gone", run_id="tomorrow")
    snap = watch.poll({"experiment": "sweep"})
    bad_name, renamed, empty_note, unknown, undeclared = snap.outcomes
    assert [o.token for o in snap.outcomes] == [2, 3, 4, 5, 6]
    assert not bad_name.ok and "not a path" in bad_name.message
    assert renamed.code is Code.DONE and renamed.data["select"] == "tomorrow"
    assert not empty_note.ok and "cannot be empty" in empty_note.message
    assert unknown.code is Code.INVALID
    assert undeclared.code is Code.MISSING and "no longer declared" in undeclared.message
    assert [r.run_id for r in snap.runs] == ["tomorrow"]
    _started(run_root, "begun", 3, 1, alive=False)
    watch.submit(7, "reconfigure", experiment="sweep", run_id="begun", config={"points": 9})
    (refused,) = watch.poll({"experiment": "sweep"}).outcomes
    assert not refused.ok and "duplicate the run instead" in refused.message
    assert watch.close(5)


def test_declare_and_undeclare_answer_with_their_codes(workspace, tmp_path):
    watch = ExperimentsWatch(workspace.root)
    watch.submit(1, "declare", name="scan", module="spacrq.experiments.demo_sweep")
    watch.submit(2, "declare", name="scan", module="spacrq.experiments.demo_sweep")
    watch.submit(3, "declare", name="bad", module="not a module!")
    snap = watch.poll({"experiment": "scan"})
    declared, again, bad = snap.outcomes
    assert declared.code is Code.DONE and declared.data["experiment"] == "scan"
    assert again.code is Code.CONFLICT and bad.code is Code.INVALID
    assert [s["name"] for s in snap.experiments] == ["scan"] and snap.experiment == "scan"
    watch.submit(4, "undeclare", name="scan")
    watch.submit(5, "undeclare", name="scan")
    snap = watch.poll({"experiment": "scan"})
    removed, missing = snap.outcomes
    assert removed.code is Code.DONE and missing.code is Code.MISSING
    assert snap.experiments == () and snap.experiment is None
    assert watch.close(1.0)


def test_a_broken_declarations_file_is_said_not_raised(workspace):
    path = workspace.experiments / "experiments.json"
    path.write_text("{not json")
    snap = ExperimentsWatch(workspace.root).poll({"experiment": "sweep"})
    assert snap.experiments == () and "not valid JSON" in snap.declaration_error


def test_the_manifest_is_asked_beside_the_poll_and_failures_come_with_codes(declared, workspace,
                                                                          tmp_path):
    junk = tmp_path / "junkmod.py"
    junk.write_text("print('hello, not a manifest')\n")
    declare_experiment(workspace.root, ExperimentSpec("junk", "junkmod", sys.executable,
                                                      str(tmp_path), {}, str(tmp_path / "runs")))
    watch = ExperimentsWatch(workspace.root)
    watch.poll({})
    watch.submit(1, "manifest", experiment="sweep")
    watch.submit(2, "manifest", experiment="junk")
    watch.submit(3, "manifest", experiment="nobody")
    watch.submit(4, "probe", module="spacrq.experiments.demo_sweep", python=None, cwd=None)
    watch.submit(5, "probe", module="", python=None, cwd=None)
    got = {o.token: o for o in _outcomes(watch, {}, 5)}
    assert got[1].code is Code.DONE and "detector" in got[1].data["manifest"]["schema"]
    assert got[1].data["environment"] == []
    assert got[2].code is Code.INVALID and "printed no manifest" in got[2].message
    assert got[3].code is Code.MISSING
    assert got[4].code is Code.DONE and got[4].data["manifest"]["schema"]
    assert got[5].code is Code.INVALID
    assert watch.close(1.0)


def test_a_module_that_hangs_times_out_with_its_code(workspace, tmp_path):
    (tmp_path / "hangs.py").write_text("import time\ntime.sleep(120)\n")
    asker = ManifestAsker(timeout=0.5)
    asker.ask(7, "manifest", ExperimentSpec("hangs", "hangs", sys.executable, str(tmp_path), {},
                                            str(tmp_path / "runs")))
    (answer,) = wait_until(asker.answers, 20, "the timeout's answer")
    assert (answer.token, answer.code) == (7, Code.TIMED_OUT) and "did not answer" in answer.message


def test_close_kills_a_module_still_being_asked(workspace, tmp_path):
    (tmp_path / "hangs.py").write_text("import time\ntime.sleep(120)\n")
    declare_experiment(workspace.root, ExperimentSpec("hangs", "hangs", sys.executable,
                                                      str(tmp_path), {}, str(tmp_path / "runs")))
    watch = ExperimentsWatch(workspace.root, manifest_timeout=120)
    watch.poll({})
    watch.submit(1, "manifest", experiment="hangs")
    watch.poll({"experiment": "hangs"})
    assert watch.busy()
    assert watch.close(1.0)
    wait_until(lambda: not watch.busy(), 10, "the question's thread to end once its child is killed")
    assert watch.poll({}) is None  # closed: nothing more is read


def test_close_returns_within_its_timeout_in_the_middle_of_a_heavy_poll(declared, workspace):
    spec, run_root = declared
    for i in range(2):  # histories of seconds of reading each
        _started(run_root, f"r{i:02d}", 40000, 40000, alive=False)
    watch = ExperimentsWatch(workspace.root)
    watch.FIRST_READ_BUDGET, watch.CHUNK = 600.0, 4096  # one poll would read every history
    reading = threading.Event()
    polled: list = []
    feed = watch._catch_up

    def catch_up(run_watch, deadline):
        reading.set()
        return feed(run_watch, deadline)

    watch._catch_up = catch_up
    thread = threading.Thread(target=lambda: polled.append(watch.poll({"experiment": "sweep"})))
    thread.start()
    assert reading.wait(10)
    assert watch.close(1.0)  # the poll saw it was closing and returned
    thread.join(5)
    assert not thread.is_alive()
    (snap,) = polled
    assert any(run.state == "reading" for run in snap.runs)  # it stopped before reading them all


def test_runs_not_yet_read_show_as_reading_and_are_read_over_the_next_polls(declared, workspace):
    spec, run_root = declared
    for i in range(3):
        _started(run_root, f"r{i}", 10, 2, alive=False)
    watch = ExperimentsWatch(workspace.root)
    watch.FIRST_READ_BUDGET = 0.0  # every poll reads one new run, however fast
    seen = []
    for _ in range(3):
        snap = watch.poll({"experiment": "sweep"})
        seen.append([run.state for run in snap.runs])
    assert seen == [["interrupted", "reading", "reading"],
                    ["interrupted", "interrupted", "reading"],
                    ["interrupted"] * 3]
    assert not snap.more


def test_a_long_history_reaches_the_window_in_chunks(declared, workspace):
    spec, run_root = declared
    run_dir = _started(run_root, "long", 400, 300, alive=False)
    with open(run_dir / "records.jsonl", "w") as f:
        for i in range(300):
            f.write(json.dumps({"index": i, "value": {"signal": i / 10}}) + "\n")
    watch = ExperimentsWatch(workspace.root)
    watch.FIRST_READ_BUDGET, watch.CHUNK = 0.0, 4096
    states, indices, resets, firsts = [], [], [], []
    for _ in range(200):
        snap = watch.poll({"experiment": "sweep", "run": "long"})
        states.append(snap.runs[0].state)
        if snap.detail:
            indices += [int(i) for i in snap.detail.records.index]
            resets.append(snap.detail.records.reset)
            firsts.append(snap.detail.records.first)
        if not snap.more:
            break
    assert states[0] == "reading" and states[-1] == "interrupted"
    assert snap.runs[0].done == 300
    assert indices == list(range(300)) and resets.count(True) == 1 and len(resets) > 2
    assert firsts == sorted(firsts) and firsts[0] == 0


def test_the_records_of_a_long_run_come_several_chunks_a_poll_when_time_allows(declared, workspace):
    spec, run_root = declared
    run_dir = _started(run_root, "long", 400, 300, alive=False)
    with open(run_dir / "records.jsonl", "w") as f:
        for i in range(300):
            f.write(json.dumps({"index": i, "value": {"signal": i / 10}}) + "\n")
    capped = ExperimentsWatch(workspace.root)
    capped.CHUNK, capped.FIRST_READ_BUDGET, capped.RECORDS_PER_POLL = 1024, 60.0, 3000
    snap = capped.poll({"experiment": "sweep", "run": "long"})
    first = [int(i) for i in snap.detail.records.index]
    assert 3000 // 60 < len(first) < 300 and first == list(range(len(first)))  # a few chunks, not all
    assert snap.more and snap.detail.more_records
    watch = ExperimentsWatch(workspace.root)
    watch.CHUNK, watch.FIRST_READ_BUDGET = 1024, 60.0
    snap = watch.poll({"experiment": "sweep", "run": "long"})
    assert [int(i) for i in snap.detail.records.index] == list(range(300))
    assert snap.detail.records.reset and not snap.more
    with open(run_dir / "records.jsonl.new", "w") as f:  # the file replaced: read again from its start
        f.write(json.dumps({"index": 0, "value": {"signal": 7}}) + "\n")
    os.replace(run_dir / "records.jsonl.new", run_dir / "records.jsonl")
    records = watch.poll({"experiment": "sweep", "run": "long"}).detail.records
    assert records.reset and records.first == 0 and records.count == 1
    assert list(records.cells["signal"].numbers) == [7.0]


def test_only_the_looked_at_run_has_its_records_read(declared, workspace):
    spec, run_root = declared
    for name in ("a", "b"):
        run_dir = _started(run_root, name, 10, 3, alive=False)
        with open(run_dir / "records.jsonl", "w") as f:
            f.write(json.dumps({"index": 0, "value": {"signal": 1}}) + "\n")
    (run_root / "a" / "records.jsonl").chmod(0)  # unreadable: reading it would fail the poll
    watch = ExperimentsWatch(workspace.root)
    snap = watch.poll({"experiment": "sweep", "run": "b"})
    assert snap.detail.run_id == "b" and snap.detail.records.count == 1
    assert {run.run_id for run in snap.runs} == {"a", "b"}
    assert watch.poll({"experiment": "sweep"}).detail is None


def test_a_pipe_in_place_of_a_runs_journal_never_holds_up_the_poll(declared, workspace):
    """Ordering the runs reads each journal's first line: a pipe there must not be waited on."""
    spec, run_root = declared
    _started(run_root, "ok", 2, 2, alive=False)
    odd = run_root / "odd"
    create_run(odd, "{}\n", experiment="sweep")  # (a run: its created.json says so)
    os.mkfifo(odd / "journal.jsonl")
    watch = ExperimentsWatch(workspace.root)
    watch.FIRST_READ_BUDGET = 60.0
    done = []
    thread = threading.Thread(target=lambda: done.append(watch.poll({"experiment": "sweep"})),
                              daemon=True)
    thread.start()
    thread.join(20)
    try:
        assert done, "the poll waited on a pipe"
        assert {r.run_id for r in done[0].runs} == {"ok", "odd"}
    finally:
        if thread.is_alive():  # (only when it failed: let the blocked open go)
            with open(odd / "journal.jsonl", "wb"):
                pass
            thread.join(5)
        assert watch.close(1.0)
