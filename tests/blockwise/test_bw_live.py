"""Live progress of blockwise runs on a terminal, and ``spacrq report STORE --follow``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import zarr
from ptyrun import run_on_pty

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _spec(tmp_path: Path, task_id: str = "watched") -> Path:
    data = np.random.default_rng(0).random((64, 64)).astype(np.float32)
    arr = zarr.create_array(str(tmp_path / "in.zarr"), shape=data.shape, chunks=(8, 8),
                            dtype="float32")
    arr[...] = data
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"tasks": [{
        "task_id": task_id, "input": "in.zarr", "output": "out.zarr", "block_shape": [8, 8],
        "function": "live_funcs:sleepy", "num_workers": 2, "tracking": "track"}]}))
    return spec


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SPACRQ_NO_LIVE")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT)])
    env["TERM"] = "xterm"
    return env


def _on_pty(argv, cwd) -> tuple[int, str]:
    return run_on_pty(argv, env=_env(), cwd=cwd)


def test_a_run_on_a_terminal_shows_blocks_done_and_the_panel_after(tmp_path):
    spec = _spec(tmp_path)
    code, out = _on_pty([sys.executable, "-m", "spacrq", "blockwise", "run", str(spec)], tmp_path)
    assert code == 0, out
    text = out
    assert "of 64 blocks done" in text and "blocks/s" in text and "workers busy" in text
    assert "\x1b[" in text                      # drawn in place
    assert "64 done, 0 skipped, 0 failed" in text  # and the summary after it


def test_a_run_into_a_pipe_prints_only_the_summary(tmp_path):
    spec = _spec(tmp_path)
    done = subprocess.run([sys.executable, "-m", "spacrq", "blockwise", "run", str(spec)],
                          capture_output=True, env=_env(), cwd=tmp_path, timeout=120)
    assert done.returncode == 0
    assert b"\x1b" not in done.stdout and b"blocks/s" not in done.stdout
    assert b"64 done, 0 skipped, 0 failed" in done.stdout


def test_follow_shows_a_live_store_until_the_run_ends_then_its_report(tmp_path):
    spec = _spec(tmp_path)
    run = subprocess.Popen([sys.executable, "-m", "spacrq", "blockwise", "run", str(spec)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
                           cwd=tmp_path)
    try:
        deadline_ok = False
        for _ in range(400):  # until the run has published its first snapshot
            if (tmp_path / "track" / "progress.json").is_file():
                deadline_ok = True
                break
            try:
                run.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
        assert deadline_ok
        follow = subprocess.run([sys.executable, "-m", "spacrq", "report",
                                 str(tmp_path / "track"), "--follow"],
                                capture_output=True, text=True, env=_env(), timeout=120)
    finally:
        run.wait(timeout=120)
    assert follow.returncode == 0, follow.stderr
    lines = follow.stdout.splitlines()
    assert any("of 64 blocks done" in line for line in lines)
    assert "\x1b" not in follow.stdout
    assert "64 blocks" in follow.stdout.split("blocks done")[-1] or "64" in lines[-1]


def test_follow_refuses_what_is_not_a_store(tmp_path, capsys):
    from spacrq.cli import main
    (tmp_path / "x").mkdir()
    assert main(["report", str(tmp_path / "x"), "--follow"]) == 2
    assert "--follow needs the tracking store" in capsys.readouterr().err
