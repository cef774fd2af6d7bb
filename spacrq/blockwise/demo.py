"""The demo a fresh workspace starts with: a small volume, a spec, one finished run.

``seed_demo(ws)`` writes ``data/demo_volume.zarr`` (a 256×256 float32 image of
noisy blobs), ``data/blockwise_demo.json`` (smooth it, then threshold the
smoothed image) and runs the spec once with two worker processes and resource
tracking — in a couple of seconds — so the Run Report pane opens on a finished
run with per-block and per-worker figures, and the operator has a spec to copy.
"""
from __future__ import annotations

import json

import numpy as np

__all__ = ["seed_demo", "DEMO_SPEC"]

DEMO_SPEC = "blockwise_demo.json"


def seed_demo(ws) -> None:
    import zarr

    from spacrq.blockwise import spec
    from spacrq.blockwise.run import run_blockwise

    data = ws.data
    data.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:256, 0:256]
    image = rng.normal(0.0, 0.15, (256, 256)).astype(np.float32)
    for cy, cx, r in rng.uniform([20, 20, 6], [236, 236, 18], size=(14, 3)):
        image += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r)).astype(np.float32)
    source = data / "demo_volume.zarr"
    if not source.exists():
        arr = zarr.create_array(str(source), shape=image.shape, chunks=(64, 64), dtype="float32")
        arr[...] = image
    steps = [
        {"task_id": "demo_smooth", "input": "demo_volume.zarr", "output": "demo_smooth.zarr",
         "block_shape": [32, 32], "operation": "gaussian", "sigma": 1.5, "num_workers": 2,
         "resource_tracking": True},
        {"task_id": "demo_threshold", "input": "demo_smooth.zarr", "output": "demo_mask.zarr",
         "block_shape": [32, 32], "operation": "threshold", "level": 0.5, "num_workers": 2,
         "resource_tracking": True, "upstream": ["demo_smooth"]},
    ]
    (data / DEMO_SPEC).write_text(json.dumps({"tasks": steps}, indent=2) + "\n", encoding="utf-8")
    tasks = spec.build_tasks(steps, data)
    run_blockwise(tasks, executor="local", log_dir=ws.runs)
