"""The manifest's environment: which variables a run reads, and a run refused for a missing one."""
from __future__ import annotations

import json

import pytest

from spacrq import experiments as ex
from spacrq.experiments.environment import environment_check, missing_required
from spacrq.experiments.launch import missing_environment

from .support import fake_module

MANIFEST = {"module": "m", "environment": [
    {"name": "STAGE_ADDRESS", "description": "ZMQ address of the stage"},
    {"name": "OPTIONAL_GAIN", "description": "gain", "required": False},
    {"name": "EMPTY_ONE", "required": True}, "junk", {"description": "no name"}]}


def test_each_variable_with_required_and_set():
    env = {"STAGE_ADDRESS": "tcp://x", "EMPTY_ONE": ""}
    assert environment_check(MANIFEST, env) == [
        {"name": "STAGE_ADDRESS", "description": "ZMQ address of the stage", "required": True,
         "set": True},
        {"name": "OPTIONAL_GAIN", "description": "gain", "required": False, "set": False},
        {"name": "EMPTY_ONE", "description": "", "required": True, "set": False}]
    assert missing_required(MANIFEST, env) == ["EMPTY_ONE"]
    assert missing_required({"module": "m"}, {}) == []
    assert missing_required({"module": "m", "environment": "garbage"}, {}) == []


def test_the_run_environment_counts_the_dotenv_and_the_declaration(tmp_path):
    spec = fake_module(tmp_path, "pass\n")
    (tmp_path / "fakemod-checkout" / ".env").write_text("STAGE_ADDRESS=tcp://stage\n")
    spec = ex.ExperimentSpec(spec.name, spec.module, spec.python, spec.cwd, {"EMPTY_ONE": "1"},
                             spec.run_root)
    assert missing_environment(spec, MANIFEST, {}) == []
    bare = ex.ExperimentSpec(spec.name, spec.module, spec.python, spec.cwd, {}, spec.run_root)
    assert missing_environment(bare, MANIFEST, {}) == ["EMPTY_ONE"]


NEEDS_STAGE = """
import json, os, sys
if "--manifest" in sys.argv:
    print(json.dumps({"module": "needy", "title": "Needy scan", "schema": {},
                      "environment": [{"name": "H6_STAGE", "description": "the stage"}]}))
    sys.exit(0)
open(os.path.join(os.getcwd(), "ran"), "w").close()
"""


def test_a_run_missing_a_required_variable_is_refused_at_the_door(tmp_path, monkeypatch):
    monkeypatch.delenv("H6_STAGE", raising=False)
    spec = fake_module(tmp_path, NEEDS_STAGE, name="needy")
    with pytest.raises(ex.ExperimentError, match="Needy scan needs H6_STAGE set") as err:
        ex.start_run(spec, "r1", {})
    assert "declaration ('env')" in str(err.value)
    assert ex.runs_of(spec.run_root) == []  # refused before anything was written
    run = ex.create_run(f"{spec.run_root}/r2", "{}")
    assert run
    with pytest.raises(ex.ExperimentError, match="needs H6_STAGE"):
        ex.start_run(spec, "r2")
    assert not (tmp_path / "needy-checkout" / "ran").exists()
    # given in the declaration, the run starts
    given = ex.ExperimentSpec(spec.name, spec.module, spec.python, spec.cwd, {"H6_STAGE": "a"},
                              spec.run_root)
    launched = ex.start_run(given, "r2")
    assert launched.wait(30) == 0
    assert (tmp_path / "needy-checkout" / "ran").exists()


def test_a_manifest_given_by_the_caller_is_not_asked_again(tmp_path, monkeypatch):
    monkeypatch.delenv("H6_STAGE", raising=False)
    spec = fake_module(tmp_path, "import sys; sys.exit(3)\n", name="silent")
    manifest = json.loads(json.dumps(MANIFEST))
    manifest["environment"] = [{"name": "H6_STAGE"}]
    with pytest.raises(ex.ExperimentError, match="needs H6_STAGE"):
        ex.start_run(spec, "r1", {}, manifest=manifest)
