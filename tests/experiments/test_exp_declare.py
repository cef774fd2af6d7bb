"""Declaring and removing an experiment from the window: checked whole, nothing written on refusal."""
from __future__ import annotations

import json
import os
import sys
import threading

import pytest
from hostile import HOSTILE  # tests/hostile.py (tests/ is on the path)

from spacrq import experiments as ex
from spacrq.experiments.declarations import DeclarationError, declare, undeclare
from spacrq.procs import interpreter
from spacrq.watching import Code


def _package(tmp_path, name="labscan"):
    folder = tmp_path / "checkout" / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "__main__.py").write_text("print('hi')\n")
    return folder


def _file_bytes(workspace):
    path = ex.declarations_path(workspace.root)
    return path.read_bytes() if path.exists() else None


def test_declare_an_import_path_with_the_defaults(workspace):
    spec = declare(workspace.root, name="sweep", module="spacrq.experiments.demo_sweep")
    assert spec.python == interpreter()
    assert spec.cwd == str(workspace.root / "experiments" / "sweep")
    assert spec.run_root == str(workspace.root / "experiments" / "sweep" / "runs")
    assert os.path.isdir(spec.cwd) and os.path.isdir(spec.run_root)
    assert ex.load_experiments(workspace.root) == [spec]


def test_declare_a_package_folder_runs_it_from_its_checkout(workspace, tmp_path):
    folder = _package(tmp_path)
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    os.symlink(sys.executable, venv_python)
    runs = tmp_path / "data" / "scan-runs"
    spec = declare(workspace.root, name="scan", module=str(folder), python=str(tmp_path / "venv"),
                   run_root=str(runs))
    assert spec.module == "labscan" and spec.cwd == str(folder.parent)
    assert spec.python == str(venv_python)  # a venv folder means its bin/python
    assert spec.run_root == str(runs) and runs.is_dir()
    assert [s.name for s in ex.load_experiments(workspace.root)] == ["scan"]


@pytest.mark.parametrize("kwargs, words", [
    ({"name": "../up", "module": "lab.scan"}, "not a usable experiment name"),
    ({"name": "a b", "module": "lab.scan"}, "not a usable experiment name"),
    ({"name": "x", "module": ""}, "no module is given"),
    ({"name": "x", "module": "not a module"}, "not an import path"),
    ({"name": "x", "module": "/no/such/folder"}, "does not exist"),
    ({"name": "x", "module": "lab.scan", "python": "/no/such/python"}, "does not exist"),
    ({"name": "x", "module": "lab.scan", "cwd": "/no/such/checkout"}, "does not exist"),
])
def test_a_bad_declaration_is_one_sentence_and_writes_nothing(workspace, kwargs, words):
    declare(workspace.root, name="kept", module="lab.kept")
    before = _file_bytes(workspace)
    with pytest.raises(DeclarationError, match=words) as err:
        declare(workspace.root, **kwargs)
    assert err.value.code is Code.INVALID
    assert _file_bytes(workspace) == before
    assert not (workspace.root / "experiments" / "x").exists()


def test_a_folder_without_main_and_a_run_root_that_is_a_file_are_refused(workspace, tmp_path):
    folder = _package(tmp_path)
    (folder / "__main__.py").unlink()
    with pytest.raises(DeclarationError, match="no __main__.py"):
        declare(workspace.root, name="x", module=str(folder))
    (tmp_path / "afile").write_text("")
    with pytest.raises(DeclarationError, match="is a file"):
        declare(workspace.root, name="x", module="lab.x", run_root=str(tmp_path / "afile"))
    assert _file_bytes(workspace) is None


def test_a_taken_name_is_a_conflict(workspace):
    declare(workspace.root, name="scan", module="lab.scan")
    before = _file_bytes(workspace)
    with pytest.raises(DeclarationError, match="declared already") as err:
        declare(workspace.root, name="scan", module="lab.other")
    assert err.value.code is Code.CONFLICT and _file_bytes(workspace) == before


def test_a_broken_declarations_file_is_never_overwritten(workspace):
    path = ex.declarations_path(workspace.root)
    path.write_text("{torn")
    with pytest.raises(DeclarationError, match="fix or remove that file"):
        declare(workspace.root, name="scan", module="lab.scan")
    with pytest.raises(DeclarationError, match="fix or remove that file"):
        undeclare(workspace.root, "scan")
    assert path.read_text() == "{torn"


def test_remove_keeps_the_runs_on_disk(workspace):
    spec = declare(workspace.root, name="scan", module="lab.scan")
    declare(workspace.root, name="other", module="lab.other")
    run = ex.create_run(os.path.join(spec.run_root, "r1"), "{}")
    gone = undeclare(workspace.root, "scan")
    assert gone == spec
    assert [s.name for s in ex.load_experiments(workspace.root)] == ["other"]
    assert os.path.isfile(os.path.join(spec.run_root, "r1", "created.json")) and run
    with pytest.raises(DeclarationError, match="no experiment called 'scan'") as err:
        undeclare(workspace.root, "scan")
    assert err.value.code is Code.MISSING


def test_declarations_made_at_once_all_land(workspace):
    errors = []

    def add(i):
        try:
            declare(workspace.root, name=f"e{i}", module=f"lab.e{i}")
        except Exception as exc:  # pragma: no cover - the failure is the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    names = {e["name"] for e in json.loads(ex.declarations_path(workspace.root).read_text())
             ["experiments"]}
    assert names == {f"e{i}" for i in range(8)}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_declarations_file_is_said_and_kept(workspace, name):
    path = ex.declarations_path(workspace.root)
    path.write_bytes(HOSTILE[name])
    try:
        declare(workspace.root, name="scan", module="lab.scan")
    except DeclarationError as exc:
        assert str(path) in str(exc) and exc.code is Code.CONFLICT
        assert path.read_bytes() == HOSTILE[name]
    else:  # only a file with nothing in it may be replaced
        assert not HOSTILE[name].strip()
        assert [s.name for s in ex.load_experiments(workspace.root)] == ["scan"]
