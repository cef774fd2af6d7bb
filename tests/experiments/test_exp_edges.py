"""The edges of issue 8 for experiments: garbled control, waits that end, dead foreign runs,
garbage journal lines, strict manifests, garbage declarations and configs, and links."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from spacrq import experiments as ex
from spacrq.cli import main
from spacrq.experiments import owner
from spacrq.experiments.pane import controls, run_row
from spacrq.experiments.replay import JournalReplay
from spacrq.procs import ProcessRef
from spacrq.runfiles import read_jsonl, write_json

from .support import fake_module, until

NOW = "2026-01-01T00:00:00+00:00"


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def journal(run: Path, *events: dict) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    with open(run / "journal.jsonl", "a") as handle:
        for e in events:
            handle.write(json.dumps(e) + "\n")
    return run


def started(**extra):
    return {"event": "run_started", "ts": extra.pop("ts", NOW), "run_id": "r", "total_steps": 3,
            **extra}


@pytest.fixture(autouse=True)
def fresh_process_table():
    owner.forget_scan()
    yield
    owner.forget_scan()


@pytest.fixture
def declared(workspace, demo_spec):
    ex.declare_experiment(workspace.root, demo_spec)
    return workspace, demo_spec, ["--workspace", str(workspace.root)]


# -- a garbled control file never stops a live run ------------------------------

def test_live_run_carries_on_over_a_garbled_control_file(declared, capsys):
    ws, spec, w = declared
    code, _, err = cli(capsys, "exp", "run", spec.name, "g1", "--set", "points=40",
                       "--set", "dwell=0.05", *w)
    assert code == 0, err
    run = Path(spec.run_root) / "g1"
    until(lambda: ex.status_of(run)["completed"] >= 2)
    for garbage in (b'{"stop": "abort\xff\xfe"}', bytes(range(256)), b"null", b'["stop"]',
                    b'{"stop": "abort", "pad": "' + b"x" * (1 << 20) + b'"}'):
        (run / "control.json").write_bytes(garbage)
        done = ex.status_of(run)["completed"]
        until(lambda done=done: ex.status_of(run)["completed"] > done)  # read at a boundary
        code, out, _ = cli(capsys, "exp", "status", spec.name, "g1", *w)
        assert code == 0 and "g1: running" in out
        assert f"control problem: {run / 'control.json'}" in out
    code, _, err = cli(capsys, "exp", "pause", spec.name, "g1", "--wait", *w)
    assert code == 0, err  # the garbled file was replaced by the request, and honoured
    assert ex.status_of(run)["control_problem"] == "" and ex.asked(run)["paused"] is True
    assert cli(capsys, "exp", "stop", spec.name, "g1", "--wait", *w)[0] == 0
    events = [e["event"] for e in read_jsonl(run / "journal.jsonl")]
    assert "run_aborted" not in events and events[-1] == "run_canceled"


# -- every wait has an end --------------------------------------------------------

QUITTER = """
import json, sys
if "--manifest" in sys.argv:
    print(json.dumps({"module": "quitter", "title": "Quits", "schema": {"default": [
        {"name": "points", "dtype": "int", "default": 3, "min_value": 1}]}}))
    sys.exit(0)
sys.stderr.write("no driver for the stage\\n")
sys.exit(1)
"""


def test_run_wait_ends_when_the_module_exits_before_its_run_starts(workspace, tmp_path, capsys):
    spec = fake_module(tmp_path, QUITTER, name="quitter")
    ex.declare_experiment(workspace.root, spec)
    code, out, err = cli(capsys, "exp", "run", "quitter", "q1", "--set", "points=1", "--wait",
                         "--workspace", str(workspace.root))
    assert code == 1
    # what the module said is the reason, and its log is named once
    assert "never started: the module exited before its run started, saying: no driver for " \
        "the stage (its log: " in err and err.count("job-logs") == 1
    assert "q1: created" in out


DIES_RUNNING = """
import json, os, sys, time
from datetime import datetime, timezone
if "--manifest" in sys.argv:
    print(json.dumps({"module": "dier", "schema": {}}))
    sys.exit(0)
root = sys.argv[sys.argv.index("--run-root") + 1]
rid = sys.argv[sys.argv.index("--resume") + 1] if "--resume" in sys.argv else \\
    sys.argv[sys.argv.index("--run-id") + 1]
with open(os.path.join(root, rid, "journal.jsonl"), "a") as j:
    j.write(json.dumps({"event": "run_started", "ts": datetime.now(timezone.utc).isoformat()})
            + "\\n")
    j.write(json.dumps({"event": "run_paused", "ts": datetime.now(timezone.utc).isoformat()})
            + "\\n")
os._exit(9)
"""


def test_resume_wait_ends_when_the_process_dies_with_the_journal_saying_paused(
        workspace, tmp_path, capsys):
    spec = fake_module(tmp_path, DIES_RUNNING, name="dier")
    ex.declare_experiment(workspace.root, spec)
    w = ["--workspace", str(workspace.root)]
    code, out, err = cli(capsys, "exp", "run", "dier", "d1", "--wait", *w)
    assert code == 1 and "d1: interrupted" in out and "exited while its journal says" in err
    # a foreign "paused" run (no process file) whose owner is gone is interrupted, not paused
    os.unlink(Path(spec.run_root) / "d1" / "spacrq-process.json")
    assert ex.status_of(Path(spec.run_root) / "d1")["state"] == "interrupted"


CANCELS_THEN_WONT_RESUME = """
import json, os, sys
from datetime import datetime, timezone
if "--manifest" in sys.argv or "--dry-run" in sys.argv:
    print(json.dumps({"module": "stubborn"}))
    sys.exit(0)
if "--resume" in sys.argv:
    sys.stderr.write("the stage is gone\\n")
    sys.exit(1)
root = sys.argv[sys.argv.index("--run-root") + 1]
run = os.path.join(root, sys.argv[sys.argv.index("--run-id") + 1])
now = datetime.now(timezone.utc).isoformat()
json.dump({"config": {}, "steps": [{"id": "s0"}]}, open(os.path.join(run, "plan.json"), "w"))
with open(os.path.join(run, "journal.jsonl"), "a") as j:
    j.write(json.dumps({"event": "run_started", "ts": now}) + "\\n")
    j.write(json.dumps({"event": "run_canceled", "ts": now, "reason": "lunch"}) + "\\n")
sys.exit(3)
"""


def test_resume_wait_ends_when_the_resumed_module_exits_before_it_starts(
        workspace, tmp_path, capsys):
    spec = fake_module(tmp_path, CANCELS_THEN_WONT_RESUME, name="stubborn")
    ex.declare_experiment(workspace.root, spec)
    w = ["--workspace", str(workspace.root)]
    code, out, _ = cli(capsys, "exp", "run", "stubborn", "s1", "--wait", *w)
    assert code == 1 and "s1: canceled" in out
    code, out, err = cli(capsys, "exp", "resume", "stubborn", "s1", "--wait", *w)
    assert code == 1 and "exited before its resumed run started, saying: the stage is gone " \
        "(its log: " in err and err.count("job-logs") == 1


def test_wait_for_a_paused_run_ends_when_its_process_is_gone(tmp_path):
    run = journal(tmp_path / "r", started(), {"event": "run_paused", "ts": NOW})
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        write_json(run / "spacrq-process.json", {**ProcessRef.of(proc.pid).to_dict(),
                                                 "launched": 1.0})
        assert ex.status_of(run)["state"] == "paused"
    finally:
        proc.kill()
        proc.wait()
    status = ex.wait_for(run, ("completed",), timeout=float("inf"), poll=0.01)
    assert status["waited"] == "gone" and status["state"] == "interrupted"


# -- a dead run spacrq did not start reads interrupted ----------------------------

def test_foreign_run_without_a_process_reads_interrupted(tmp_path):
    run = journal(tmp_path / "runs" / "r", started(provenance={"host": socket.gethostname()}))
    status = ex.status_of(run)
    assert status["state"] == "interrupted" and status["resumable"]
    assert "no process on this machine" in status["problem"]


def test_foreign_run_whose_command_line_names_it_is_running_until_killed(tmp_path):
    root = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                             "--run-root", str(root), "--run-id", "r"])
    try:
        run = journal(root / "r", started(ts=_iso_now()))
        status = ex.status_of(run)
        assert status["state"] == "running" and status["pid"] == proc.pid
        assert "command line names it" in status["owner"]
    finally:
        proc.kill()
        proc.wait()
    owner.forget_scan()
    assert ex.status_of(run)["state"] == "interrupted"


def test_a_run_spacrq_started_then_resumed_elsewhere_reads_running(tmp_path):
    root = tmp_path / "runs"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                             "--run-root", str(root), "--resume", "r"])
    try:
        run = journal(root / "r", started(ts=_iso_now()))
        write_json(run / "spacrq-process.json", {**ProcessRef(gone.pid, 1.0).to_dict(),
                                                 "launched": 1.0})
        status = ex.status_of(run)
        assert status["state"] == "running" and status["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()
    owner.forget_scan()
    status = ex.status_of(run)
    assert status["state"] == "interrupted" and f"pid {gone.pid}" in status["problem"]


def test_journaled_pid_decides_and_a_reused_pid_does_not_count(tmp_path):
    run = journal(tmp_path / "r", started(ts=_iso_now(), pid=os.getpid()))
    status = ex.status_of(run)
    assert status["state"] == "running" and "journaled when the run started" in status["owner"]
    # a run journaled long before this process existed: the pid was reused, its owner is gone
    old = journal(tmp_path / "old", started(ts="2001-01-01T00:00:00+00:00", pid=os.getpid()))
    assert ex.status_of(old)["state"] == "interrupted"


def test_owner_on_another_machine_reads_not_responding_with_the_journal_age(tmp_path):
    run = journal(tmp_path / "r", started(provenance={"host": "bench-7"}))
    past = 1_000_000_000
    os.utime(run / "journal.jsonl", (past, past))
    status = ex.status_of(run)
    assert status["state"] == "not_responding" and not status["resumable"]
    assert "bench-7" in status["problem"] and "journal last changed" in status["problem"]
    assert status["silent_s"] > 3600 * 24 * 365
    assert run_row(status, {"completed": 0}).badge.startswith("not responding (silent")
    allowed = controls("not_responding")
    assert allowed.stop.enabled and allowed.abort.enabled and not allowed.resume.enabled
    with pytest.raises(ex.ExperimentError, match="not responding"):
        ex.resume_run(ex.ExperimentSpec("x", "m", sys.executable, str(tmp_path), {},
                                        str(tmp_path)), "r")


def test_a_process_naming_only_the_run_root_cannot_decide(tmp_path):
    root = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                             "--run-root", str(root)])
    try:
        run = journal(root / "named_itself", started(ts=_iso_now()))
        status = ex.status_of(run)
        assert status["state"] == "not_responding" and status["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_plesty_run_started_outside_spacrq_reads_interrupted_once_killed(plesty_spec, tmp_path):
    root = Path(plesty_spec.run_root)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"points": 200, "dwell": 0.05}))
    proc = subprocess.Popen([plesty_spec.python, "-m", "plscan", "--run-root", str(root),
                             "--run-id", "own", "--config", str(cfg)], cwd=plesty_spec.cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    run = root / "own"
    try:
        until(lambda: ex.status_of(run)["completed"] >= 2, timeout=60)
        assert not (run / "spacrq-process.json").exists()
        assert ex.status_of(run)["state"] == "running"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    owner.forget_scan()
    status = ex.status_of(run)
    assert status["state"] == "interrupted" and status["resumable"]


def _iso_now(plus: float = 0.0) -> str:
    from datetime import datetime, timedelta, timezone
    return (datetime.now(timezone.utc) + timedelta(seconds=plus)).isoformat()


# -- journal lines are checked before they are folded -------------------------------

def test_garbage_step_completed_lines_are_not_counted(tmp_path):
    run = tmp_path / "r"
    events = [started(total_steps=15)]
    for i in range(15):
        events += [{"event": "step_started", "ts": NOW, "step_id": f"s{i}"},
                   {"event": "step_completed", "ts": NOW, "step_id": f"s{i}"}]
    events += [{"event": "step_completed", "ts": NOW, "step_id": "zzz"},     # never started
               {"event": "step_started", "ts": NOW, "step_id": "yyy"},       # not in the plan
               {"event": "step_completed", "ts": NOW, "step_id": "yyy"},
               {"event": "step_completed", "ts": NOW, "step_id": "s3"},      # twice
               {"event": "step_completed", "ts": NOW, "step_id": ["s1"]},    # a list
               {"event": "step_completed", "ts": NOW, "step_id": 16},        # a number
               {"event": "step_completed", "ts": {"t": 1}, "step_id": "s4"},  # a ts that is no time
               {"event": "step_started", "ts": NOW, "step_id": None},
               {"event": "run_started", "ts": NOW, "total_steps": "15"},
               {"event": "report", "ts": NOW, "text": {"helium": 1}},
               {"event": "run_canceled", "ts": NOW, "reason": ["x"]}]
    journal(run, *events)
    write_json(run / "plan.json", {"config": {}, "steps": [{"id": f"s{i}"} for i in range(15)]})
    write_json(run / "spacrq-process.json", ProcessRef.of(os.getpid()).to_dict())
    status = ex.status_of(run)
    assert status["completed"] == 15 and status["total"] == 15
    assert status["state"] == "running" and status["reports"] == []
    assert status["bad_lines"] == 7 and "skipped" in status["journal_problem"]
    replay = JournalReplay()  # the fold alone: only steps that were started count
    replay.feed(events)
    assert replay.completed == 16 and replay.total_steps == 15
    os.unlink(run / "plan.json")  # no plan to tell "yyy" from a real step: never above the total
    assert ex.status_of(run)["completed"] == 15


# -- manifests are checked as plesty-lib checks them ---------------------------------

@pytest.mark.parametrize("manifest,needle", [
    ({"title": "no module", "schema": {}}, "a manifest needs the module it runs"),
    ({"module": "m", "fields": 5}, "'fields' must be a list of field declarations"),
    ({"module": "m", "schema": []}, "'schema' must be a mapping of group to parameters"),
    ({"module": "m", "schema": {"g": {"name": "x"}}}, "schema group 'g' must be a list"),
    ({"module": "m", "schema": {"g": [5]}}, "a parameter must be a mapping"),
    ({"module": "m", "schema": {"g": [{"name": "x"}, {"name": "x"}]}}, "g.x is declared twice"),
    ({"module": "m", "schema": {"g": [{"name": "x", "dtype": 5}]}}, "'dtype' that is not text"),
    ({"module": "m", "schema": {"g": [{"name": "x", "min_value": "low"}]}}, "not a number"),
    ({"module": "m", "schema": {"g": [{"name": "x", "min_value": 5, "max_value": 1}]}},
     "min_value above its max_value"),
    ({"module": "m", "environment": [{"description": "?"}]}, "environment entry has no 'name'"),
    ({"module": "m", "options": "fast"}, "'options' must be a list"),
])
def test_manifests_plesty_lib_refuses_are_refused(tmp_path, manifest, needle):
    spec = fake_module(tmp_path, f"print({json.dumps(json.dumps(manifest))})\n")
    with pytest.raises(ex.ExperimentError) as caught:
        ex.read_manifest(spec)
    message = str(caught.value)
    assert needle in message and "plesty-lib refuses" in message and "\n" not in message


def test_fields_list_is_a_schema_and_set_is_always_checked(workspace, tmp_path, capsys):
    spec = fake_module(tmp_path, "print('{\"module\": \"flat\", \"fields\": [{\"name\": "
                                 "\"points\", \"dtype\": \"int\", \"min_value\": 1}]}')\n",
                       name="flat")
    assert ex.fields_of(ex.read_manifest(spec))[0][0] == "points"
    bare = fake_module(tmp_path, "print('{\"module\": \"bare\"}')\n", name="bare")
    for s in (spec, bare):
        ex.declare_experiment(workspace.root, s)
    w = ["--workspace", str(workspace.root)]
    code, _, err = cli(capsys, "exp", "create", "flat", "c", "--set", "points=0", *w)
    assert code == 2 and "points = 0 is below its minimum 1" in err
    code, _, err = cli(capsys, "exp", "create", "flat", "c", "--set", "points=many", *w)
    assert code == 2 and "must be a whole number" in err
    code, _, err = cli(capsys, "exp", "create", "bare", "c", "--set", "points=3", *w)
    assert code == 2 and "declares no settings" in err
    assert cli(capsys, "exp", "create", "flat", "c", "--set", "points=3", *w)[0] == 0


# -- declarations and --config files ---------------------------------------------------

def test_non_utf8_declarations_and_config_are_one_sentence(declared, capsys, tmp_path):
    ws, spec, w = declared
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(b"points: 3\ndwell: \xff\n")
    code, _, err = cli(capsys, "exp", "run", spec.name, "x", "--config", str(cfg), *w)
    assert code == 2 and str(cfg) in err and err.count("\n") == 1
    cfg.write_text("points: 2\ndwell: 0\n")  # YAML still reads
    assert cli(capsys, "exp", "create", spec.name, "y", "--config", str(cfg), *w)[0] == 0
    assert ex.run_config_of(Path(spec.run_root) / "y") == {"points": 2, "dwell": 0}
    path = ex.declarations_path(ws.root)
    path.write_bytes(b'{"experiments": [{"name": "caf\xe9"}]}')
    code, _, err = cli(capsys, "exp", "list", *w)
    assert code == 2 and str(path) in err and err.count("\n") == 1


# -- links ----------------------------------------------------------------------------

def test_a_symlinked_notes_file_is_refused_and_its_target_untouched(tmp_path):
    run = journal(tmp_path / "runs" / "r", started())
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    os.symlink(target, run / "notes.txt")
    with pytest.raises(ex.ExperimentError, match="symbolic link"):
        ex.add_note(run, "hello", by="ada")
    assert target.read_text() == "keep me\n"


def test_a_symlinked_run_folder_is_refused_by_every_command(declared, capsys, tmp_path):
    ws, spec, w = declared
    elsewhere = journal(tmp_path / "elsewhere" / "real", started())
    write_json(elsewhere / "spacrq-process.json", ProcessRef.of(os.getpid()).to_dict())
    Path(spec.run_root).mkdir(parents=True, exist_ok=True)
    os.symlink(elsewhere, Path(spec.run_root) / "linked")
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    for argv in (["note", spec.name, "linked", "hi"], ["pause", spec.name, "linked"],
                 ["stop", spec.name, "linked"], ["abort", spec.name, "linked"],
                 ["continue", spec.name, "linked"], ["resume", spec.name, "linked"],
                 ["status", spec.name, "linked"], ["run", spec.name, "linked"],
                 ["create", spec.name, "linked"]):
        code, _, err = cli(capsys, "exp", *argv, *w)
        assert code == 2 and "is a symbolic link" in err and err.count("\n") == 1, argv
    code, out, _ = cli(capsys, "exp", "list", spec.name, *w)
    assert code == 0 and "linked  refused:" in out and "symbolic link" in out
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before


def test_control_and_progress_writes_replace_a_link_never_its_target(tmp_path):
    from spacrq.experiments.demo_sweep import InstrumentSweep
    run = journal(tmp_path / "r", started())
    target = tmp_path / "precious.json"
    target.write_text('{"keep": true}\n')
    os.symlink(target, run / "control.json")
    ex.pause(run)
    assert target.read_text() == '{"keep": true}\n' and not (run / "control.json").is_symlink()
    sweep = InstrumentSweep()
    sweep.run_dir = run
    os.symlink(target, run / "progress.json")
    sweep.progress(1, 2)
    assert target.read_text() == '{"keep": true}\n' and not (run / "progress.json").is_symlink()


def test_a_run_started_into_a_linked_log_folder_is_refused(demo_spec, tmp_path):
    run = Path(demo_spec.run_root) / "r"
    ex.create_run(run, None)
    (tmp_path / "logs-elsewhere").mkdir()
    os.symlink(tmp_path / "logs-elsewhere", run / "job-logs")
    with pytest.raises(ex.ExperimentError, match="symbolic link"):
        ex.start_run(demo_spec, "r")
    assert list((tmp_path / "logs-elsewhere").iterdir()) == []


@pytest.mark.parametrize("run_id", ["../x", "a/b", "..", "", "a\0b", "a\\b", "/etc"])
def test_run_ids_never_escape_the_run_root(tmp_path, run_id):
    with pytest.raises(ex.ExperimentError):
        ex.run_dir_of(tmp_path, run_id)


def test_queue_job_config_file_garbage_is_said_at_the_door(tmp_path):
    from spacrq.modules.experiment import validate
    cfg = tmp_path / "night.json"
    cfg.write_bytes(b'{"points": NaN}')
    problems = validate({"module": "spacrq.experiments.demo_sweep", "config_file": str(cfg),
                         "run_root": str(tmp_path / "runs")})
    assert [p.setting for p in problems] == ["config_file"] and str(cfg) in problems[0].message


@pytest.mark.parametrize("verb,key,value", [("stop", "stop", "cancel"), ("pause", "paused", True)])
def test_requests_replace_a_garbled_control_file(declared, capsys, verb, key, value):
    ws, spec, w = declared
    run = journal(Path(spec.run_root) / "g", started(ts=_iso_now()))
    write_json(run / "spacrq-process.json", ProcessRef.of(os.getpid()).to_dict())
    (run / "control.json").write_bytes(bytes(range(256)))
    code, _, err = cli(capsys, "exp", verb, spec.name, "g", *w)
    assert code == 0, err
    assert ex.asked(run)[key] == value and ex.status_of(run)["control_problem"] == ""
