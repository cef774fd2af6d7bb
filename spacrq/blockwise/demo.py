"""The blockwise part of the demo night: the volume it starts from and the smoothing it does.

The demo queue (:mod:`spacrq.queue.demo`) makes the volume in its first job
(:func:`make_demo_volume`), smooths it block by block with
:func:`paced_smooth` and thresholds the result, both as ``blockwise`` jobs
whose tracking stores land in the workspace's ``runs/`` where the Run Report
pane looks.  Nothing here runs when a workspace is made: seeding only writes
``data/blockwise_demo.json``, the same two steps as a spec the operator can
copy for ``spacrq blockwise run``.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

__all__ = ["seed_demo", "DEMO_SPEC", "demo_steps", "make_demo_volume", "paced_smooth"]

DEMO_SPEC = "blockwise_demo.json"
SHAPE = (512, 512)
BLOCK = [64, 64]
#: seconds each smoothing block takes beyond its arithmetic: what a real filter on a real
#: volume costs, so the operator can watch the per-worker charts fill (64 blocks, 2 workers)
PACE_SECONDS = 0.2


def demo_steps(data: Path) -> list[dict[str, Any]]:
    """The two blockwise steps of the demo night, with absolute paths under ``data``."""
    data = Path(data)
    return [
        {"task_id": "demo_smooth", "input": str(data / "demo_volume.zarr"),
         "output": str(data / "demo_smooth.zarr"), "block_shape": list(BLOCK), "context": 5,
         "function": "spacrq.blockwise.demo:paced_smooth", "num_workers": 2,
         "resource_tracking": True},
        {"task_id": "demo_threshold", "input": str(data / "demo_smooth.zarr"),
         "output": str(data / "demo_mask.zarr"), "block_shape": list(BLOCK),
         "operation": "threshold", "level": 0.5, "num_workers": 2, "resource_tracking": True,
         "upstream": ["demo_smooth"]},
    ]


def _demo_image(shape=SHAPE):
    import numpy as np
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:shape[0], 0:shape[1]]
    image = rng.normal(0.0, 0.15, shape).astype(np.float32)
    for cy, cx, r in rng.uniform([20, 20, 6], [shape[0] - 20, shape[1] - 20, 18], size=(40, 3)):
        image += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r)).astype(np.float32)
    return image


def make_demo_volume(settings: dict) -> str:
    """The demo night's first job: a noisy image of blobs, and a clean slate for the rest.

    The previous demo night's outputs and their tracking stores are removed
    (only the demo's own names, inside the workspace), so every demo night
    smooths every block again instead of skipping the ones done last time.
    """
    import zarr
    data = Path(settings["data"])
    runs = Path(settings["runs"])
    for step in demo_steps(data):
        for old in (Path(step["output"]), runs / step["task_id"]):
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
    source = data / "demo_volume.zarr"
    if not source.exists():
        image = _demo_image()
        arr = zarr.create_array(str(source), shape=image.shape, chunks=tuple(BLOCK), dtype="float32")
        arr[...] = image
    print(f"demo volume {source}: {SHAPE[0]}x{SHAPE[1]} float32 in {BLOCK[0]}x{BLOCK[1]} blocks",
          flush=True)
    return str(source)


def paced_smooth(data, block):
    """Gaussian smoothing (sigma 1.5) of one block, paced like a heavier filter."""
    from spacrq.blockwise.ops import gaussian
    time.sleep(PACE_SECONDS)
    return gaussian(data, 1.5)


def seed_demo(ws) -> Path:
    """Write ``data/blockwise_demo.json``: the demo night's blockwise steps as a spec to copy."""
    from spacrq.runfiles import write_json
    data = Path(ws.data)
    data.mkdir(parents=True, exist_ok=True)
    path = data / DEMO_SPEC
    if not path.exists():
        write_json(path, {"tasks": demo_steps(data)})
    return path
