"""Blockwise tasks over large volumes: a block grid, a scheduler, worker processes,
a tracking store and an honest run report.

::

    from spacrq.blockwise import Roi, Task, run_blockwise
    task = Task("smooth", total_roi=Roi((0, 0), (4096, 4096)),
                read_roi=Roi((0, 0), (288, 288)), write_roi=Roi((16, 16), (256, 256)),
                process_function="mylab.steps:smooth", num_workers=8,
                tracking_path="runs/smooth", resource_tracking=True)
    report = run_blockwise([task])
    print(report.render()); assert report.succeeded

Imports are lazy: a worker process starting up must not pay for zarr.
"""
from __future__ import annotations

import importlib

__all__ = ["Roi", "Block", "BlockGrid", "Task", "run_blockwise", "BlockwiseRun",
           "TrackingError", "LayoutMismatch"]

_WHERE = {
    "Roi": "spacrq.blockwise.roi",
    "Block": "spacrq.blockwise.grid",
    "BlockGrid": "spacrq.blockwise.grid",
    "Task": "spacrq.blockwise.task",
    "run_blockwise": "spacrq.blockwise.run",
    "BlockwiseRun": "spacrq.blockwise.run",
    "TrackingError": "spacrq.blockwise.tracking",
    "LayoutMismatch": "spacrq.blockwise.tracking",
}


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'spacrq.blockwise' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
