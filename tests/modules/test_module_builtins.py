"""The built-in queue modules: command, python, and spaCR's when installed."""
from __future__ import annotations

import sys

from spacrq.modules import registry, resolve_module
from spacrq.modules import spacr as spacr_modules
from spacrq.modules.command import CommandFailed


def test_command_validates_program_cwd_and_inputs(tmp_path):
    spec = resolve_module("command")
    assert spec.check({"argv": ["true"], "cwd": "", "env": {}, "inputs": [], "writes": []}) == []
    problems = spec.check({"argv": "echo hi; rm -rf /", "cwd": str(tmp_path / "no"),
                           "env": [], "inputs": [str(tmp_path / "missing")], "writes": []})
    settings = {p.setting for p in problems}
    assert settings == {"argv", "cwd", "env", "inputs"}
    assert all(p.is_error and p.fix for p in problems)


def test_command_never_uses_a_shell(tmp_path):
    spec = resolve_module("command")
    target = tmp_path / "x; touch pwned"
    spec.run({"argv": [sys.executable, "-c", "import sys; open(sys.argv[1], 'w')", str(target)],
              "cwd": str(tmp_path), "env": {}}, None)
    assert target.exists() and not (tmp_path / "pwned").exists()


def test_command_failure_raises_with_the_code(tmp_path):
    spec = resolve_module("command")
    try:
        spec.run({"argv": ["sh", "-c", "exit 3"], "cwd": "", "env": {}}, None)
    except CommandFailed as exc:
        assert "exited with code 3" in str(exc)
    else:
        raise AssertionError("a failing program must fail the job")


def test_command_writes_declares_its_output_folders():
    spec = resolve_module("command")
    assert spec.output_folders({"writes": ["/data/p1"]}) == ["/data/p1"]


def test_python_module_checks_its_target_and_calls_it(tmp_path, monkeypatch):
    spec = resolve_module("python")
    assert spec.check({"target": "not a target"})[0].setting == "target"
    assert "cannot be found" in spec.check({"target": "no_such_pkg_xyz:go"})[0].message
    (tmp_path / "pyhelp_call.py").write_text(
        "def one(s):\n    return ('one', s['x'])\n"
        "def two(s, ctx):\n    return ('two', ctx)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert spec.run({"target": "pyhelp_call:one", "x": 5}, "ctx") == ("one", 5)
    assert spec.run({"target": "pyhelp_call:two"}, "ctx") == ("two", "ctx")


def test_spacr_modules_are_offered_only_when_spacr_is_installed(monkeypatch):
    monkeypatch.setattr(spacr_modules, "_cli", lambda: None)
    assert spacr_modules.module_names() == []
    assert "mask" not in registry()


def test_spacr_modules_when_installed(monkeypatch):
    class FakeModule:
        summary = "segment cells"

    class FakeCli:
        MODULES = {"mask": FakeModule(), "measure": FakeModule()}

    monkeypatch.setattr(spacr_modules, "_cli", lambda: FakeCli)
    assert spacr_modules.module_names() == ["mask", "measure"]
    assert "mask" in registry()
    spec = resolve_module("mask")
    assert spacr_modules.is_spacr(spec) == "mask" and spec.resumable
    assert spec.output_folders({"src": "/d/p1"}) == ["/d/p1", "/d/p1/measurements"]
    argv = spacr_modules.cli_argv("mask", "/s.csv", ["a=1"])
    assert argv == [sys.executable, "-m", "spacr.cli", "mask", "--settings", "/s.csv",
                    "--set", "a=1"]
