"""Every reader of an experiment's files, fed the same hostile bytes.

For each of :data:`tests.hostile.HOSTILE` and each file an experiment run
or its declaration is read from — control, journal, records, progress, the
manifest a module prints, ``experiments.json``, a ``--config`` file — no
exception escapes, whatever is said names the file, and the file is left as
it was.  Empty and whitespace-only files are not a problem anywhere: they
mean "nothing" (nothing asked, no lines, no settings).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spacrq import experiments as ex
from spacrq.cli import main
from spacrq.experiments.stepcontrol import StepControl
from spacrq.procs import ProcessRef
from spacrq.runfiles import write_json

from hostile import HOSTILE, as_lines  # tests/hostile.py (tests/ is on the path)
from .support import fake_module

BENIGN = {"empty", "whitespace"}
CASES = sorted(HOSTILE)


def _live_run(root: Path) -> Path:
    """A run in flight owned by this test's process, with one step done and one in flight."""
    run = root / "r"
    run.mkdir(parents=True)
    events = [{"event": "run_started", "ts": "2026-01-01T00:00:00+00:00", "total_steps": 3},
              {"event": "step_started", "ts": "2026-01-01T00:00:01+00:00", "step_id": "s0"},
              {"event": "step_completed", "ts": "2026-01-01T00:00:02+00:00", "step_id": "s0"},
              {"event": "step_started", "ts": "2026-01-01T00:00:03+00:00", "step_id": "s1"}]
    (run / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    write_json(run / "plan.json", {"config": {}, "steps": [{"id": f"s{i}"} for i in range(3)]})
    write_json(run / "spacrq-process.json", ProcessRef.of(os.getpid()).to_dict())
    return run


def _unchanged(path: Path, data: bytes) -> None:
    assert path.read_bytes() == data, f"{path} was changed by reading it"


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.mark.parametrize("case", CASES)
def test_control_file(tmp_path, capsys, workspace, demo_spec, case):
    spec = ex.ExperimentSpec(demo_spec.name, demo_spec.module, demo_spec.python, demo_spec.cwd,
                             demo_spec.env, str(tmp_path / "runs"))
    ex.declare_experiment(workspace.root, spec)
    run = _live_run(tmp_path / "runs")
    path, data = run / "control.json", HOSTILE[case]
    path.write_bytes(data)
    status = ex.status_of(run)
    assert status["state"] == "running" and status["asked"] == {}
    assert StepControl(run, lambda *a, **k: None, 0.1).read() == {}
    code, out, _ = _cli(capsys, "exp", "status", spec.name, "r", "--workspace", str(workspace.root))
    assert code == 0 and "r: running" in out
    if case in BENIGN:
        assert status["control_problem"] == "" and "control problem" not in out
    else:
        assert str(path) in status["control_problem"] and str(path) in out
    _unchanged(path, data)


@pytest.mark.parametrize("case", CASES)
def test_journal(tmp_path, case):
    run = _live_run(tmp_path)
    path = run / "journal.jsonl"
    good = json.dumps({"event": "report", "ts": "2026-01-01T00:00:04+00:00", "text": "ok"})
    with open(path, "ab") as handle:
        handle.write(as_lines(good.encode(), HOSTILE[case]))
    data = path.read_bytes()
    status = ex.status_of(run)
    assert status["state"] == "running" and status["completed"] == 1
    assert status["reports"] == ["ok", "ok"]
    if case in BENIGN:
        assert status["bad_lines"] == 0 and status["journal_problem"] == ""
    else:
        assert status["bad_lines"] == 1 and str(path) in status["journal_problem"]
    _unchanged(path, data)


@pytest.mark.parametrize("case", CASES)
def test_records(tmp_path, case):
    run = _live_run(tmp_path)
    path = run / "records.jsonl"
    good = json.dumps({"index": 0, "provenance": {"step_id": "s0"}, "type": "value",
                       "value": {"x": 1}})
    path.write_bytes(as_lines(good.encode(), HOSTILE[case]))
    data = path.read_bytes()
    snap = ex.RunWatch(run).refresh()
    assert snap["record_count"] == 2 and len(ex.records_of(run)) == 2
    if case in BENIGN:
        assert snap["records_problem"] == ""
    else:
        assert str(path) in snap["records_problem"]
    _unchanged(path, data)


@pytest.mark.parametrize("case", CASES)
def test_progress(tmp_path, case):
    run = _live_run(tmp_path)
    path, data = run / "progress.json", HOSTILE[case]
    path.write_bytes(data)
    snap = ex.RunWatch(run).refresh()
    assert snap["progress"]["step"] is None and ex.progress_of(run) is None
    if case in BENIGN:
        assert snap["progress"]["progress_problem"] == "" and ex.progress_problem(run) is None
    else:
        assert str(path) in snap["progress"]["progress_problem"]
        assert str(path) in ex.progress_problem(run)
    _unchanged(path, data)


@pytest.mark.parametrize("case", CASES)
def test_manifest_output(tmp_path, case):
    spec = fake_module(tmp_path, f"import sys\nsys.stdout.buffer.write({HOSTILE[case]!r})\n")
    source = Path(spec.cwd) / spec.module / "__main__.py"
    before = source.read_bytes()
    with pytest.raises(ex.ExperimentError) as caught:
        ex.read_manifest(spec)
    message = str(caught.value)
    assert f"{spec.module} --manifest printed" in message and "\n" not in message
    _unchanged(source, before)


@pytest.mark.parametrize("case", CASES)
def test_declarations_file(workspace, capsys, case):
    path = ex.declarations_path(workspace.root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(HOSTILE[case])
    code, out, err = _cli(capsys, "exp", "list", "--workspace", str(workspace.root))
    if case in BENIGN:
        assert code == 0 and "no experiments declared" in out
    else:
        assert code == 2 and str(path) in err and err.count("\n") == 1
        with pytest.raises(ex.ExperimentError, match="declarations"):
            ex.load_experiments(workspace.root)
    _unchanged(path, HOSTILE[case])


@pytest.mark.parametrize("case", CASES)
def test_config_file(workspace, demo_spec, capsys, tmp_path, case):
    ex.declare_experiment(workspace.root, demo_spec)
    path = tmp_path / "night.yaml"
    path.write_bytes(HOSTILE[case])
    code, out, err = _cli(capsys, "exp", "create", demo_spec.name, "c1", "--config", str(path),
                          "--workspace", str(workspace.root))
    if case in BENIGN:
        assert code == 0 and "created run c1" in out
    else:
        assert code == 2 and str(path) in err and err.count("\n") == 1
        assert ex.find_run(demo_spec.run_root, "c1") is None  # nothing made from garbage
    _unchanged(path, HOSTILE[case])
