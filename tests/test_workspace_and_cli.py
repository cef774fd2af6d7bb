"""The workspace layout, the module registry and the top-level command."""
from __future__ import annotations

import os
import subprocess
import sys
import types

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


def test_a_command_started_in_a_removed_folder_is_one_sentence_and_exit_2(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    queue = tmp_path / "night.queue.json"
    # (a child process: this one's working folder must stay where it is)
    proc = subprocess.run([sys.executable, "-c", (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "from spacrq.cli import main; sys.exit(main(['queue', 'run', 'night.queue.json']))"),
        str(gone)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "the folder this command was started in was removed" in proc.stderr
    assert not queue.exists()


def test_python_dash_m_spacrq_version():
    out = subprocess.run([sys.executable, "-m", "spacrq", "--version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("spacrq ")


def test_the_command_line_does_not_import_numpy_until_a_command_needs_it():
    """Every ``spacrq`` command registers every group; a scientist's ``spacrq queue add``
    in a loop must not pay for numpy and the zarr readers only ``report`` and
    ``night-report`` use (they did: 0.44 s for ``--help``, 0.30 s without)."""
    probe = ("import sys\nfrom spacrq import cli\ncli.build_parser()\n"
             "print(sorted(m for m in ('numpy', 'zarr', 'spacrq.night.collect', "
             "'spacrq.blockwise.report') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    # …and the commands that need them still have them
    from spacrq import night
    assert callable(night.gather) and callable(night.render)
    args = cli.build_parser().parse_args(["report", "x"])
    assert args.handler.__module__ == "spacrq.blockwise.report_cli"


def test_a_new_workspace_is_seeded_with_the_demo_night(tmp_path):
    ws, notes = workspace.open_workspace(tmp_path / "demo", demo=True)
    assert notes == []
    from spacrq.queue import load_queue, validate_queue
    queue = load_queue(ws.queues / "demo.queue.json")
    assert [(j.id, j.module) for j in queue.jobs] == [
        ("prepare", "python"), ("smooth", "blockwise"), ("threshold", "blockwise"),
        ("measure", "python"), ("sweep", "experiment"), ("fails-on-purpose", "command"),
        ("after-failure", "command")]
    assert not [p for p in validate_queue(queue) if p.is_error]
    assert (ws.experiments / "experiments.json").is_file()
    assert (ws.data / "blockwise_demo.json").is_file()
    assert not ws.demo_pending()


def test_the_window_opens_first_and_seeds_after(tmp_path):
    ws, notes = workspace.open_workspace(tmp_path / "w", seed=False)
    assert notes == [] and ws.demo_pending()
    assert list(ws.queues.iterdir()) == []
    assert workspace.seed_demo(ws) == []
    assert not ws.demo_pending() and (ws.queues / "demo.queue.json").is_file()
    again, _ = workspace.open_workspace(ws.root)
    assert not again.demo_pending()


def test_a_missing_workspace_folder_is_made_with_its_parents(tmp_path):
    ws, _ = workspace.open_workspace(tmp_path / "new" / "deeper" / "ws", demo=False)
    assert ws.is_initialised() and ws.queues.is_dir()


def test_a_folder_of_other_things_is_not_made_a_workspace(tmp_path):
    folder = tmp_path / "Documents"
    folder.mkdir()
    (folder / "thesis.tex").write_text("")
    with pytest.raises(workspace.WorkspaceError, match="not a spacrq workspace"):
        workspace.open_workspace(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["thesis.tex"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert workspace.open_workspace(empty, demo=False)[0].is_initialised()


def test_a_file_in_place_of_the_workspace_is_refused(tmp_path):
    (tmp_path / "ws").write_text("")
    with pytest.raises(workspace.WorkspaceError, match="is a file, not a folder"):
        workspace.open_workspace(tmp_path / "ws")


def test_a_read_only_workspace_is_refused_with_the_fix(tmp_path):
    ws, _ = workspace.open_workspace(tmp_path / "ws", demo=False)
    os.chmod(ws.root, 0o555)
    try:
        with pytest.raises(workspace.WorkspaceError, match="read-only.*chmod u\\+w"):
            workspace.open_workspace(ws.root)
    finally:
        os.chmod(ws.root, 0o755)


def test_spacrq_demo_without_a_display_runs_the_night_and_prints_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["QT_QPA_PLATFORM"] = "offscreen"
    root = tmp_path / "demo"
    out = subprocess.run([sys.executable, "-m", "spacrq", "demo", "--workspace", str(root)],
                         capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "5 ok (1 partial), 1 failed, 1 skipped, 0 not run" in text
    assert "Resource Utilization" in text and "demo_smooth" in text and "demo_threshold" in text
    assert f"spacrq gui --workspace {root}" in text
    from spacrq import experiments as ex
    from spacrq.queue import load_queue
    status = {j.id: (j.status, j.is_partial) for j in load_queue(root / "queues" / "demo.queue.json").jobs}
    assert status == {"prepare": ("success", False), "smooth": ("success", False),
                      "threshold": ("success", False), "measure": ("success", True),
                      "sweep": ("success", False), "fails-on-purpose": ("failed", False),
                      "after-failure": ("skipped", False)}
    for task in ("demo_smooth", "demo_threshold"):
        assert (root / "runs" / task / "runs.jsonl").is_file()
    (spec,) = ex.load_experiments(root)
    (run,) = ex.runs_of(spec.run_root)
    assert ex.RunWatch(run).status()["state"] == "completed"


def test_spacrq_demo_on_a_folder_that_cannot_be_a_workspace_is_exit_2(tmp_path, capsys):
    (tmp_path / "x").write_text("")
    assert cli.main(["demo", "--headless", "--workspace", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spacrq: ") and err.count("\n") == 1


def test_opening_the_window_without_a_display_is_one_sentence_not_a_crash(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["SPACRQ_WORKSPACE"] = str(tmp_path / "ws")
    out = subprocess.run([sys.executable, "-m", "spacrq"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 2
    assert out.stderr.startswith("spacrq: there is no display") and "Traceback" not in out.stderr


def test_spacrq_demo_with_a_display_opens_the_window_and_starts_the_night(monkeypatch):
    asked = []
    monkeypatch.setattr(cli, "_has_display", lambda: True)
    fake = types.ModuleType("spacrq.ui.app")  # the window itself is tested in tests/ui
    fake.main = lambda argv: asked.append(argv) or 0
    monkeypatch.setitem(sys.modules, "spacrq.ui.app", fake)
    assert cli.main(["demo", "--workspace", "/somewhere"]) == 0
    assert asked == [["--workspace", "/somewhere", "--demo"]]


def test_spacrq_with_only_a_workspace_opens_the_window_on_it(monkeypatch, tmp_path):
    """Bare `spacrq` opens the window, so an operator types `spacrq --workspace A` too: it
    was refused as an unknown command named after the folder."""
    opened = []
    monkeypatch.setattr("spacrq.ui.app.main", lambda argv: opened.append(argv) or 0)
    for argv in (["--workspace", str(tmp_path)], [f"--workspace={tmp_path}"]):
        assert cli.main(argv) == 0
    assert opened == [["--workspace", str(tmp_path)]] * 2
