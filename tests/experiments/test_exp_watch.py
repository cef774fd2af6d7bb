"""The Experiments pane's poller body and decisions, without Qt."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from spacrq.experiments.declarations import ExperimentSpec, declare_experiment
from spacrq.experiments.errors import PROCESS_FILE
from spacrq.experiments.runs import create_run
from spacrq.experiments.watch import (
    BADGES,
    ExperimentsWatch,
    ManifestAsker,
    badge,
    buttons_for,
    eta_seconds,
    field_value,
    format_duration,
    numeric_fields,
    run_row,
)
from spacrq.procs import ProcessRef
from spacrq.runfiles import write_json

ROOT = Path(__file__).resolve().parents[2]


# -- decisions -----------------------------------------------------------------

def test_every_state_has_its_own_badge_text_and_colour():
    states = ("created", "running", "paused", "stopping", "canceled", "aborted",
              "interrupted", "completed", "failed")
    assert set(states) <= set(BADGES)
    assert badge("stopping")[0] == "stopping after this step"
    assert len({badge(s)[1] for s in ("running", "paused", "completed", "aborted")}) == 4
    assert badge("something_new") == ("something_new", "#7f8c8d")


@pytest.mark.parametrize("state, enabled", [
    (None, set()),
    ("created", {"run", "duplicate", "rename", "reconfigure", "note"}),
    ("running", {"pause", "stop", "abort", "duplicate", "note"}),
    ("paused", {"pause", "stop", "abort", "duplicate", "note"}),
    ("completed", {"duplicate", "note"}),
    ("canceled", {"resume", "duplicate", "note"}),
    ("aborted", {"resume", "duplicate", "note"}),
    ("interrupted", {"resume", "duplicate", "note"}),
    ("failed", {"resume", "duplicate", "note"}),
])
def test_buttons_follow_the_state(state, enabled):
    decided = buttons_for(state)
    assert {k for k, v in decided.items() if v is True} == enabled


def test_pause_is_one_toggle_that_reads_continue_once_a_pause_is_asked():
    assert buttons_for("running")["pause_label"] == "Pause"
    assert buttons_for("running", pause_asked=True)["pause_label"] == "Continue"
    assert buttons_for("paused")["pause_label"] == "Continue"


def test_a_stop_cannot_be_asked_twice_but_abort_stays_until_asked():
    stopping = buttons_for("stopping", stop_asked="cancel")
    assert not stopping["stop"] and not stopping["pause"] and stopping["abort"]
    assert not buttons_for("stopping", stop_asked="abort")["abort"]


def test_eta_is_mean_step_times_steps_left_less_the_step_in_flight():
    assert eta_seconds(None, 10) is None  # nothing measured: no promise
    assert eta_seconds(2.0, 0) == 0.0
    assert eta_seconds(2.0, 10) == 20.0
    assert eta_seconds(2.0, 10, in_flight_for=1.5) == 18.5
    assert eta_seconds(2.0, 1, in_flight_for=30.0) == 0.0  # a slow step never makes it negative


def test_durations_read_as_an_operator_writes_them():
    assert format_duration(None) == ""
    assert format_duration(12.4) == "12 s"
    assert format_duration(200) == "3 min 20 s"
    assert format_duration(3900) == "1 h 05 min"


def test_measured_fields_are_offered_before_echoes_of_the_inputs():
    record = {"index": 3, "provenance": {"params": {"setpoint_mV": 60.0}},
              "value": {"step": 3, "setpoint_mV": 60.0, "signal": 0.4, "ok": True, "name": "x"}}
    assert numeric_fields(record) == ["value.signal", "value.step", "value.setpoint_mV"]
    assert numeric_fields({"index": 0, "value": 2.5}) == ["value"]
    assert field_value(record, "value.signal") == 0.4
    assert field_value(record, "value.ok") is None and field_value(record, "value.nope") is None


def test_a_row_says_progress_eta_and_what_was_asked():
    now = 1000.0
    status = {"run_id": "r1", "state": "stopping", "asked": {"stop": "cancel", "paused": False},
              "started_at": 900.0, "ended_at": None, "in_flight": {"step_id": "s5", "started": 999.0},
              "failed": 1, "last_failure": {"error": "RuntimeError('timeout')"}, "reports": ["hi"]}
    progress = {"completed": 4, "total": 10, "step_s": 2.0, "step": {"done": 1, "total": 3}}
    row = run_row(status, progress, now)
    assert row["badge"] == "stopping after this step" and row["stop_asked"] == "cancel"
    assert (row["done"], row["total"]) == (4, 10)
    assert row["eta"] == pytest.approx(2.0 * 6 - 1.0)
    assert row["error"] == "RuntimeError('timeout')" and row["failed_attempts"] == 1
    assert run_row({**status, "state": "completed"}, progress, now)["eta"] is None


# -- the poll over real run directories -------------------------------------------

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
    snap = watch.poll({"experiment": "sweep"})
    assert snap["experiments"][0]["name"] == "sweep" and snap["declaration_error"] == ""
    states = {row["run_id"]: row["state"] for row in snap["rows"]}
    assert [r["run_id"] for r in snap["rows"]] == sorted(states, reverse=True)
    assert states == {"a_created": "created", "b_running": "running",
                      "c_interrupted": "interrupted", "d_done": "completed",
                      "e_paused": "paused", "f_stopping": "stopping"}
    running = next(r for r in snap["rows"] if r["run_id"] == "b_running")
    assert (running["done"], running["total"]) == (4, 10)
    assert running["eta"] is not None and 0 < running["eta"] <= 1.5 * 6
    assert paused.exists()


def test_refresh_reads_only_what_the_journal_gained(declared, workspace):
    spec, run_root = declared
    run_dir = _started(run_root, "r", 1000, 500, alive=True)
    watch = ExperimentsWatch(workspace.root)
    watch.poll({"experiment": "sweep"})
    tail = watch._watches[run_dir].journal_tail
    size = (run_dir / "journal.jsonl").stat().st_size
    assert tail.offset == size
    with open(run_dir / "journal.jsonl", "a") as f:
        f.write(_event("step_started", _iso(time.time()), step_id="s500", index=500))
        f.write('{"event": "step_completed", "ts": "torn')  # a write in progress
    snap = watch.poll({"experiment": "sweep"})
    row = snap["rows"][0]
    assert row["step"] == "s500" and row["done"] == 500
    assert tail.offset == (run_dir / "journal.jsonl").stat().st_size  # read once, not again


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
    first = watch.poll({"experiment": "sweep", "run": "r"})["detail"]
    assert first["records_reset"] and [r["index"] for r in first["records"]] == [0, 1]
    assert first["log"] == "step 1\n" and first["config"] == {"points": 10}
    assert first["notes"] == [] and first["report"] is None
    with open(run_dir / "records.jsonl", "a") as f:
        f.write(json.dumps({"index": 2, "value": {"signal": 3.0}}) + "\n")
    with open(log, "a") as f:
        f.write("step 2\n")
    watch.submit("note", experiment="sweep", run_id="r", text="helium topped up")
    second = watch.poll({"experiment": "sweep", "run": "r"})
    detail = second["detail"]
    assert not detail["records_reset"] and [r["index"] for r in detail["records"]] == [2]
    assert detail["log"] == "step 2\n" and "config" not in detail
    assert [n["text"] for n in detail["notes"]] == ["helium topped up"]
    assert detail["notes"][0]["by"] and detail["notes"][0]["at"]
    assert second["messages"][0]["ok"]


def test_requests_are_carried_out_on_the_poll_and_refusals_say_the_fix(declared, workspace):
    spec, run_root = declared
    watch = ExperimentsWatch(workspace.root)
    watch.submit("create", experiment="sweep", run_id="tonight", config={"points": 5})
    deadline = time.monotonic() + 10
    messages = []
    while not messages and time.monotonic() < deadline:
        messages = watch.poll({"experiment": "sweep"})["messages"]
    assert messages[0]["ok"] and messages[0]["select"] == "tonight"
    assert json.loads((run_root / "tonight" / "config.yaml").read_text()) == {"points": 5}
    watch.submit("rename", experiment="sweep", run_id="tonight", new_id="../escape")
    watch.submit("rename", experiment="sweep", run_id="tonight", new_id="tomorrow")
    watch.submit("note", experiment="sweep", run_id="tomorrow", text="   ")
    watch.submit("explode", experiment="sweep", run_id="tomorrow")
    snap = watch.poll({"experiment": "sweep"})
    bad_name, renamed, empty_note, unknown = snap["messages"]
    assert not bad_name["ok"] and "not a path" in bad_name["text"]
    assert renamed["ok"] and renamed["select"] == "tomorrow"
    assert not empty_note["ok"] and "cannot be empty" in empty_note["text"]
    assert not unknown["ok"]
    assert [r["run_id"] for r in snap["rows"]] == ["tomorrow"]
    _started(run_root, "begun", 3, 1, alive=False)
    watch.submit("reconfigure", experiment="sweep", run_id="begun", config={"points": 9})
    refused = watch.poll({"experiment": "sweep"})["messages"][0]
    assert not refused["ok"] and "duplicate the run instead" in refused["text"]
    assert watch.close(5)


def test_a_broken_declarations_file_is_said_not_raised(workspace):
    path = workspace.experiments / "experiments.json"
    path.write_text("{not json")
    snap = ExperimentsWatch(workspace.root).poll({"experiment": "sweep"})
    assert snap["experiments"] == [] and "not valid JSON" in snap["declaration_error"]


def test_manifest_is_asked_once_per_request_and_failures_are_sentences(declared, workspace, tmp_path):
    asker = ManifestAsker(workspace.root)
    answer = asker.poll({"experiment": "sweep", "ask": 1})
    groups = answer["manifest"]["schema"]
    assert answer["error"] == "" and "detector" in groups
    assert asker.poll({"experiment": "sweep", "ask": 1}) is None  # already answered
    junk = tmp_path / "junkmod.py"
    junk.write_text("print('hello, not a manifest')\n")
    declare_experiment(workspace.root, ExperimentSpec("junk", "junkmod", sys.executable,
                                                      str(tmp_path), {}, str(tmp_path / "runs")))
    failed = asker.poll({"experiment": "junk", "ask": 2})
    assert failed["manifest"] is None and "printed no manifest" in failed["error"]


def test_runs_not_yet_read_show_as_reading_and_are_read_over_the_next_polls(declared, workspace):
    spec, run_root = declared
    for i in range(3):
        _started(run_root, f"r{i}", 10, 2, alive=False)
    watch = ExperimentsWatch(workspace.root)
    watch.FIRST_READ_BUDGET = 0.0  # every poll reads one new run, however fast
    seen = []
    for _ in range(3):
        snap = watch.poll({"experiment": "sweep"})
        seen.append([row["state"] for row in snap["rows"]])
    assert seen == [["interrupted", "reading", "reading"],
                    ["interrupted", "interrupted", "reading"],
                    ["interrupted"] * 3]
    assert not snap["more"]
    assert not any(v for k, v in buttons_for("reading").items() if k != "pause_label")


def test_a_required_variable_the_run_would_lack_is_found_before_the_start():
    from spacrq.experiments.watch import environment_check
    manifest = {"environment": [{"name": "HWP_ADDRESS", "description": "stage", "required": True},
                                {"name": "SPEED", "required": False}, {"bad": 1}]}
    found = environment_check(manifest, {"SPEED": "3"})
    assert found == [{"name": "HWP_ADDRESS", "description": "stage", "required": True, "set": False},
                     {"name": "SPEED", "description": "", "required": False, "set": True}]


def test_a_long_history_reaches_the_window_in_chunks(declared, workspace):
    spec, run_root = declared
    run_dir = _started(run_root, "long", 400, 300, alive=False)
    with open(run_dir / "records.jsonl", "w") as f:
        for i in range(300):
            f.write(json.dumps({"index": i, "value": {"signal": i / 10}}) + "\n")
    watch = ExperimentsWatch(workspace.root)
    watch.FIRST_READ_BUDGET, watch.CHUNK = 0.0, 4096
    states, indices, resets = [], [], []
    for _ in range(200):
        snap = watch.poll({"experiment": "sweep", "run": "long"})
        states.append(snap["rows"][0]["state"])
        if snap["detail"]:
            indices += [r["index"] for r in snap["detail"]["records"]]
            resets.append(snap["detail"]["records_reset"])
        if not snap["more"]:
            break
    assert states[0] == "reading" and states[-1] == "interrupted"
    assert snap["rows"][0]["done"] == 300
    assert indices == list(range(300)) and resets.count(True) == 1 and len(resets) > 2


def test_pace_rests_only_after_a_full_slice_of_work():
    from spacrq.experiments.watch import Pace
    busy = Pace(work=0.0, rest=0.001)
    busy.breathe()
    busy.breathe()
    assert busy.rests == 2  # every slice used up: the window gets the lock each time
    quick = Pace(work=60.0, rest=0.001)
    quick.breathe()
    assert quick.rests == 0  # a short poll never waits


def test_reading_a_long_history_rests_between_chunks_and_a_quiet_poll_does_not(declared, workspace):
    spec, run_root = declared
    _started(run_root, "long", 400, 300, alive=False)
    watch = ExperimentsWatch(workspace.root)
    watch.CHUNK, watch.FIRST_READ_BUDGET = 4096, 60.0
    watch.PACE = (0.0, 0.0005)  # any work at all uses up a slice
    snap = watch.poll({"experiment": "sweep"})
    journal = (run_root / "long" / "journal.jsonl").stat().st_size
    assert snap["rows"][0]["done"] == 300 and not snap["more"]
    assert watch.rests >= journal // 4096  # one rest per chunk at least
    watch.PACE = (60.0, 0.0005)  # nothing new to read: finished within one slice
    before = watch.rests
    watch.poll({"experiment": "sweep"})
    assert watch.rests == before


def test_the_records_of_a_long_run_come_several_chunks_a_poll_when_time_allows(declared, workspace):
    spec, run_root = declared
    run_dir = _started(run_root, "long", 400, 300, alive=False)
    with open(run_dir / "records.jsonl", "w") as f:
        for i in range(300):
            f.write(json.dumps({"index": i, "value": {"signal": i / 10}}) + "\n")
    capped = ExperimentsWatch(workspace.root)
    capped.CHUNK, capped.FIRST_READ_BUDGET, capped.RECORDS_PER_POLL = 1024, 60.0, 3000
    snap = capped.poll({"experiment": "sweep", "run": "long"})
    first = [r["index"] for r in snap["detail"]["records"]]
    assert 3000 // 60 < len(first) < 300 and first == list(range(len(first)))  # a few chunks, not all
    assert snap["more"] and snap["detail"]["more_records"]
    watch = ExperimentsWatch(workspace.root)
    watch.CHUNK, watch.FIRST_READ_BUDGET = 1024, 60.0
    snap = watch.poll({"experiment": "sweep", "run": "long"})
    assert [r["index"] for r in snap["detail"]["records"]] == list(range(300))
    assert snap["detail"]["records_reset"] and not snap["more"]
    with open(run_dir / "records.jsonl.new", "w") as f:  # the file replaced: read again from its start
        f.write(json.dumps({"index": 0, "value": {"signal": 7}}) + "\n")
    os.replace(run_dir / "records.jsonl.new", run_dir / "records.jsonl")
    snap = watch.poll({"experiment": "sweep", "run": "long"})
    assert snap["detail"]["records"] == [{"index": 0, "step": None, "signal": 7}]
    assert snap["detail"]["records_reset"]



def test_records_reach_the_window_as_flat_rows_the_collector_never_walks(declared, workspace):
    import gc

    spec, run_root = declared
    run_dir = _started(run_root, "long", 10, 3, alive=False)
    with open(run_dir / "records.jsonl", "w") as f:
        for i in range(6000):
            f.write(json.dumps({"index": i, "saved_at": f"t{i}", "type": "value",
                                "provenance": {"step_id": f"s{i}", "params": {"x": i}},
                                "value": {"x": i, "signal": i / 10}}) + "\n")
    watch = ExperimentsWatch(workspace.root)
    watch.FIRST_READ_BUDGET, watch.RECORDS_PER_POLL, watch.PACE = 60.0, 10 ** 9, (60.0, 0.0)
    gc.collect()
    before = [stat["collections"] for stat in gc.get_stats()]
    detail = watch.poll({"experiment": "sweep", "run": "long"})["detail"]
    older = sum(after["collections"] - b for after, b in zip(gc.get_stats()[1:], before[1:]))
    assert detail["records"][5] == {"x": 5, "signal": 0.5, "index": 5, "step": "s5"}
    assert detail["committed"][5] == "t5" and detail["columns"] == ["x", "signal"]
    assert detail["plot"]["series"]["value.signal"][1][:2] == [0.0, 0.1]
    assert not any(gc.is_tracked(row) for row in detail["records"])
    # 18 000 nested dicts read and none promoted: the older generations were never collected
    assert older == 0 and gc.isenabled()
