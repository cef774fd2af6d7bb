"""The blockwise queue module, the ``spacrq blockwise run`` command and the demo."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import zarr

from spacrq.blockwise import ops
from spacrq.cli import main as cli_main
from spacrq.modules import resolve_module


def _volume(path, shape=(48, 40)):
    rng = np.random.default_rng(0)
    data = rng.random(shape).astype(np.float32)
    arr = zarr.create_array(str(path), shape=shape, chunks=(16, 16), dtype="float32")
    arr[...] = data
    return data


class Ctx(SimpleNamespace):
    def log(self, message):
        self.lines.append(message)

    def stop_requested(self):
        return False


def _ctx(tmp_path):
    return Ctx(workdir=str(tmp_path), ledger=None, lines=[])


def test_module_is_registered_and_validates(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = resolve_module("blockwise")
    assert module.name == "blockwise" and module.resumable
    problems = module.check({"input": "missing.zarr", "output": "out.zarr", "block_shape": [8, 8],
                             "operation": "blur"})
    by_setting = {p.setting: p for p in problems}
    assert "does not exist" in by_setting["input"].message
    assert "gaussian" in by_setting["operation"].fix
    zarr.create_group(str(tmp_path / "group.zarr"))
    problems = module.check({"input": "group.zarr", "output": "o.zarr", "block_shape": [8, 8]})
    assert "not an array" in problems[0].message
    _volume(tmp_path / "in.zarr")
    assert module.check({"input": "in.zarr", "output": "o.zarr", "block_shape": [16, 16]}) == []
    bad = module.check({"input": "in.zarr", "output": "in.zarr", "block_shape": [16, 16, 3],
                        "operation": "downsample"})
    assert {p.setting for p in bad} >= {"output", "block_shape"}
    assert module.output_folders({"output": "o.zarr"}) == [str(tmp_path / "o.zarr")]


@pytest.mark.parametrize("operation, expected", [
    ("gaussian", lambda d: ops.gaussian(d, 1.0)),
    ("threshold", lambda d: ops.threshold(d, 0.5)),
    ("downsample", ops.downsample),
])
def test_module_runs_builtin_operations_seamlessly(tmp_path, operation, expected):
    data = _volume(tmp_path / "in.zarr")
    settings = {"input": "in.zarr", "output": "out.zarr", "block_shape": [16, 16],
                "operation": operation, "sigma": 1.0, "num_workers": 2, "executor": "serial",
                "tracking": "track"}
    counts = resolve_module("blockwise").run(settings, _ctx(tmp_path))
    out = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")
    scale = 2 if operation == "downsample" else 1
    assert out.chunks == (16 // scale, 16 // scale)
    np.testing.assert_allclose(out[...], expected(data), rtol=1e-5, atol=1e-6)
    assert counts["done"] == 9 and counts["failed"] == 0


def test_resumed_job_skips_done_blocks_and_failure_fails_the_job(tmp_path, monkeypatch):
    _volume(tmp_path / "in.zarr")
    module = resolve_module("blockwise")
    settings = {"input": "in.zarr", "output": "out.zarr", "block_shape": [16, 16],
                "function": "bw_funcs:explode", "tracking": "track", "num_workers": 1,
                "max_retries": 0}
    with pytest.raises(RuntimeError, match="9 block.s. failed.*always fails"):
        module.run(settings, _ctx(tmp_path))
    assert not zarr.open_group(str(tmp_path / "track"), mode="r")["done"][...].any()
    settings.update(function="bw_funcs:invert", num_workers=2)
    counts = module.run(settings, _ctx(tmp_path))
    assert counts["done"] == 9 and counts["skipped"] == 0
    data = zarr.open_array(str(tmp_path / "in.zarr"), mode="r")[...]
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"), mode="r")[...], -data)
    again = module.run(settings, _ctx(tmp_path))
    assert again["skipped"] == 9 and again["done"] == 0


def test_tracking_defaults_to_the_workspace_runs_folder(workspace):
    _volume(workspace.data / "in.zarr")
    settings = {"input": str(workspace.data / "in.zarr"), "output": str(workspace.data / "sm.zarr"),
                "block_shape": [24, 20], "executor": "serial"}
    resolve_module("blockwise").run(settings, _ctx(workspace.root))
    assert (workspace.runs / "sm" / "runs.jsonl").is_file()


def _spec(tmp_path, steps):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"tasks": steps}))
    return str(path)


def test_cli_exit_codes(tmp_path, capsys):
    _volume(tmp_path / "in.zarr")
    good = _spec(tmp_path, [
        {"task_id": "smooth", "input": "in.zarr", "output": "sm.zarr", "block_shape": [16, 16],
         "operation": "gaussian", "sigma": 1.0},
        {"task_id": "mask", "input": "sm.zarr", "output": "mask.zarr", "block_shape": [16, 16],
         "operation": "threshold", "upstream": ["smooth"]}])
    assert cli_main(["blockwise", "run", good]) == 0
    out = capsys.readouterr().out
    assert "Resource Utilization" in out and "mask: 9 done" in out
    assert cli_main(["blockwise", "run", good, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["succeeded"] and doc["outcome"]["mask"]["skipped"] == 9

    assert cli_main(["blockwise", "run", str(tmp_path / "nope.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = _spec(tmp_path, [{"input": "missing.zarr", "output": "x.zarr", "block_shape": [4, 4]}])
    assert cli_main(["blockwise", "run", bad]) == 2
    err = capsys.readouterr().err
    assert "missing.zarr" in err and "Traceback" not in err and err.count("\n") == 1

    failing = _spec(tmp_path, [{"task_id": "f", "input": "in.zarr", "output": "f.zarr",
                                "block_shape": [16, 16], "function": "no_such_mod:fn",
                                "max_retries": 0, "num_workers": 1}])
    assert cli_main(["blockwise", "run", failing, "--executor", "serial"]) == 1
    assert "9 block(s) failed" in capsys.readouterr().err


def test_a_step_chained_behind_a_downsample_is_refused_before_anything_runs(tmp_path, capsys):
    _volume(tmp_path / "in.zarr")
    spec = _spec(tmp_path, [
        {"task_id": "half", "input": "in.zarr", "output": "half.zarr", "block_shape": [16, 16],
         "operation": "downsample"},
        {"task_id": "mask", "input": "half.zarr", "output": "mask.zarr", "block_shape": [8, 8],
         "operation": "threshold", "upstream": ["half"]}])
    assert cli_main(["blockwise", "run", spec]) == 2
    err = capsys.readouterr().err
    assert "'half' downsamples" in err and "queue 'after'" in err and "Traceback" not in err
    assert not (tmp_path / "half.zarr").exists()  # refused at the door: nothing ran


def test_cli_refuses_a_mismatched_store(tmp_path, capsys):
    _volume(tmp_path / "in.zarr")
    step = {"task_id": "s", "input": "in.zarr", "output": "o.zarr", "block_shape": [16, 16],
            "operation": "threshold", "executor": "serial"}
    assert cli_main(["blockwise", "run", _spec(tmp_path, [step])]) == 0
    step.update(block_shape=[8, 8], output="o2.zarr", tracking="o.zarr.tracking")
    assert cli_main(["blockwise", "run", _spec(tmp_path, [step])]) == 2
    assert "different block layout" in capsys.readouterr().err


def test_demo_seeds_the_demo_nights_spec_and_its_first_job_makes_the_volume(workspace, monkeypatch):
    """Seeding runs nothing (the demo queue does); the spec it leaves runs as it stands."""
    from spacrq.blockwise import demo
    path = demo.seed_demo(workspace)
    steps = json.loads(path.read_text())["tasks"]
    assert [t["task_id"] for t in steps] == ["demo_smooth", "demo_threshold"]
    assert not list(workspace.runs.iterdir())
    demo.make_demo_volume({"data": str(workspace.data), "runs": str(workspace.runs)})
    monkeypatch.setattr(demo, "PACE_SECONDS", 0.0)
    for step in steps:
        step["executor"] = "serial"  # in this process, so the pace above applies
    path.write_text(json.dumps({"tasks": steps}))
    assert cli_main(["blockwise", "run", str(path)]) == 0
    mask = zarr.open_array(str(workspace.data / "demo_mask.zarr"), mode="r")[...]
    assert 0 < mask.sum() < mask.size


def test_the_queue_ledger_hears_about_failed_blocks(tmp_path):
    from spacrq.ledger import Ledger
    _volume(tmp_path / "in.zarr")
    ctx = _ctx(tmp_path)
    ctx.ledger = Ledger("blockwise")
    settings = {"input": "in.zarr", "output": "out.zarr", "block_shape": [16, 16],
                "function": "bw_funcs:explode", "executor": "serial", "max_retries": 0,
                "tracking": "track"}
    with pytest.raises(RuntimeError):
        resolve_module("blockwise").run(settings, ctx)
    assert ctx.ledger.n_failed == 9 and ctx.ledger.n_succeeded == 0
    assert ctx.ledger.stamped and ctx.ledger.stamped[0].parent == tmp_path
