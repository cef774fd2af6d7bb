"""The workspace's declarations file: load, save, validation of every entry at once."""
from __future__ import annotations

import json
import sys

import pytest

from spacrq import experiments as ex
from spacrq.experiments import ExperimentError, ExperimentSpec


def test_missing_file_means_no_experiments(workspace):
    assert ex.load_experiments(workspace.root) == []


def test_round_trip_and_defaults(workspace):
    path = ex.declarations_path(workspace.root)
    path.write_text(json.dumps({"experiments": [{"name": "scan", "module": "lab.scan"}]}))
    (spec,) = ex.load_experiments(workspace.root)
    assert spec.python == sys.executable
    assert spec.run_root == str(workspace.root / "experiments" / "scan" / "runs")
    assert spec.cwd == str(workspace.root / "experiments" / "scan")
    other = ExperimentSpec("pl", "plesty.pol_pl", "/usr/bin/python3.12", "/opt/pl", {"STAGE": "B"},
                           "/data/pl")
    ex.declare_experiment(workspace.root, other)
    assert [s.name for s in ex.load_experiments(workspace.root)] == ["scan", "pl"]
    assert ex.find_experiment(workspace.root, "pl").env == {"STAGE": "B"}
    with pytest.raises(ExperimentError, match="declared: scan, pl"):
        ex.find_experiment(workspace.root, "nope")


def test_every_problem_is_named_at_once(workspace):
    path = ex.declarations_path(workspace.root)
    path.write_text(json.dumps({"experiments": [
        {"name": "../x", "module": "lab.scan"},
        {"name": "ok", "module": "not a module"},
        {"name": "ok2", "module": "m", "env": {"A": ["list"]}},
        "junk",
        {"name": "dup", "module": "m"}, {"name": "dup", "module": "m"}]}))
    with pytest.raises(ExperimentError) as err:
        ex.load_experiments(workspace.root)
    message = str(err.value)
    for part in ("#1", "#2", "#3", "#4", "#6"):
        assert part in message


def test_garbage_file_is_one_sentence(workspace):
    ex.declarations_path(workspace.root).write_text("{not json")
    with pytest.raises(ExperimentError, match="not valid JSON"):
        ex.load_experiments(workspace.root)


def test_save_refuses_duplicate_names(workspace):
    spec = ExperimentSpec("a", "m", sys.executable, "", {}, "")
    with pytest.raises(ExperimentError, match="declared twice"):
        ex.save_experiments(workspace.root, [spec, spec])
