"""The workspace layout, the module registry and the top-level command."""
from __future__ import annotations

import subprocess
import sys

import pytest

from spacrq import cli, workspace
from spacrq.modules import ModuleError, ModuleSpec, load_target, registry, resolve_module


def test_new_workspace_is_laid_out_and_marked(tmp_path):
    ws, notes = workspace.open_workspace(tmp_path / "w", demo=False)
    assert notes == []
    for folder in (ws.queues, ws.runs, ws.data, ws.experiments):
        assert folder.is_dir()
    assert ws.is_initialised()


def test_workspace_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACRQ_WORKSPACE", str(tmp_path / "envws"))
    assert workspace.default_path() == tmp_path / "envws"


def test_a_broken_demo_seeder_is_a_note_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setattr(workspace, "DEMO_SEEDERS", ("spacrq_no_such_module_xyz",))
    ws, notes = workspace.open_workspace(tmp_path / "w", demo=True)
    assert ws.is_initialised()
    assert len(notes) == 1 and "spacrq_no_such_module_xyz" in notes[0]


def test_registry_lists_builtins_and_resolves_lazily():
    names = registry()
    for builtin in ("command", "python", "blockwise", "experiment"):
        assert builtin in names
    assert resolve_module("no-such-module") is None


def test_resolve_refuses_a_target_that_is_not_a_module_spec():
    with pytest.raises(ModuleError, match="not a spacrq ModuleSpec"):
        resolve_module("fake", {"fake": "os:sep"})
    with pytest.raises(ModuleError, match="cannot import"):
        load_target("no_such_pkg_xyz.mod:thing")
    with pytest.raises(ModuleError, match="package.module:name"):
        load_target("no-colon")


def test_module_spec_check_turns_a_crashing_validator_into_a_problem():
    def bad(settings):
        raise KeyError("src")

    spec = ModuleSpec(name="m", run=lambda s, c: None, validate=bad)
    problems = spec.check({})
    assert len(problems) == 1 and problems[0].is_error and "settings check failed" in problems[0].message


def test_cli_bad_input_is_one_sentence_and_exit_2(capsys):
    assert cli.main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spacrq: ") and "--help" in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_python_dash_m_spacrq_version():
    out = subprocess.run([sys.executable, "-m", "spacrq", "--version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("spacrq ")


def test_the_demo_workspace_holds_a_queue_a_finished_blockwise_run_and_an_experiment(tmp_path):
    ws, notes = workspace.open_workspace(tmp_path / "demo", demo=True)
    assert notes == []
    assert list(ws.queues.glob("*.queue.json"))
    stores = [p for p in ws.runs.iterdir() if (p / "runs.jsonl").is_file()]
    assert stores, "the demo's blockwise run must be where the Run Report pane looks"
    assert (ws.experiments / "experiments.json").is_file()


def test_opening_the_window_without_a_display_is_one_sentence_not_a_crash(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["SPACRQ_WORKSPACE"] = str(tmp_path / "ws")
    out = subprocess.run([sys.executable, "-m", "spacrq"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 2
    assert out.stderr.startswith("spacrq: there is no display") and "Traceback" not in out.stderr
