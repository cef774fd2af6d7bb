"""The demo night: one queue that drives all three kinds of work, in under a minute.

What a real night looks like, small enough to watch::

    prepare    make the volume                       (python)
    smooth     smooth it block by block, 2 workers   (blockwise -> Run Report pane)
    threshold  threshold the smoothed image          (blockwise -> Run Report pane)
    measure    measure eight regions of the mask;    (python, PARTIAL: B03 fails)
               one is out of focus
    sweep      the instrument sweep                  (experiment -> Experiments pane)
    fails-on-purpose                                 (failed)
    after-failure  depends on it                     (skipped, never run)

A new workspace gets it as ``queues/demo.queue.json``; ``spacrq demo`` runs
it (and, when it has run before, lines it up afresh first).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from spacrq.queue.model import Job, Queue
from spacrq.queue.store import save_queue

DEMO_FILE = "demo.queue.json"
REGIONS = ("A01", "A02", "A03", "A04", "B01", "B02", "B03", "B04")
#: the region the demo's measurement cannot use, as real plates always have one
OUT_OF_FOCUS = "B03"


def measure_demo_mask(settings: dict, ctx: Any) -> None:
    """Count the foreground of each of eight regions of the mask; B03 is out of focus.

    Each region is one item of the job's ledger, so the job ends PARTIAL (7 of
    8) rather than as a success that silently lacks a region.
    """
    import numpy as np
    import zarr
    mask = np.asarray(zarr.open_array(str(settings["mask"]), mode="r")[...])
    out = Path(settings["writes"][0])
    out.mkdir(parents=True, exist_ok=True)
    rows_, cols = 2, 4
    h, w = mask.shape[0] // rows_, mask.shape[1] // cols
    lines = []
    for n, region in enumerate(REGIONS):
        with ctx.ledger.item(region, stage="measure"):
            time.sleep(0.3)  # a real measurement reads an image per region
            if region == OUT_OF_FOCUS:
                print(f"{region}: out of focus, recorded as a failed item; the others go on",
                      flush=True)
                raise ValueError(f"region {region} is out of focus: no objects can be measured")
            r, c = divmod(n, cols)
            tile = mask[r * h:(r + 1) * h, c * w:(c + 1) * w]
            lines.append(f"{region},{int(tile.sum())},{float(tile.mean()):.4f}")
            print(f"{region}: {int(tile.sum())} foreground pixels", flush=True)
    table = out / "measurements.csv"
    table.write_text("region,foreground_px,fraction\n" + "\n".join(lines) + "\n", encoding="utf-8")
    ctx.ledger.stamp(table)
    print(f"measured {len(lines)} of {len(REGIONS)} regions into {table}", flush=True)


def _py(code: str) -> list[str]:
    from spacrq.procs import code_argv  # python, or the bundle answering -c like python
    return code_argv(code)


def build_demo(ws: Any) -> Queue:
    """The demo night's queue for workspace ``ws`` (absolute paths inside it)."""
    from spacrq.blockwise.demo import demo_steps
    from spacrq.experiments.demo import demo_job_settings
    data, runs = Path(ws.data), Path(ws.runs)
    smooth, threshold = ({k: v for k, v in step.items() if k != "upstream"}
                         for step in demo_steps(data))
    queue = Queue(name="demo")
    jobs = [
        Job(module="python", id="prepare", label="make the demo volume (512x512, noisy blobs)",
            settings={"target": "spacrq.blockwise.demo:make_demo_volume", "data": str(data),
                      "runs": str(runs), "writes": [str(data / "demo_volume.zarr")]}),
        Job(module="blockwise", id="smooth", label="smooth it block by block (2 workers)",
            settings=smooth, depends_on=["prepare"]),
        Job(module="blockwise", id="threshold", label="threshold the smoothed image",
            settings=threshold, depends_on=["smooth"]),
        Job(module="python", id="measure", label="measure 8 regions (PARTIAL: B03 out of focus)",
            settings={"target": "spacrq.queue.demo:measure_demo_mask",
                      "mask": threshold["output"], "inputs": [threshold["output"]],
                      "writes": [str(data / "demo_measurements")]},
            depends_on=["threshold"]),
        Job(module="experiment", id="sweep", label="the instrument sweep (Experiments pane)",
            settings=demo_job_settings(Path(ws.root))),
        Job(module="command", id="fails-on-purpose", label="fails on purpose (demo)",
            settings={"argv": _py("raise SystemExit('demo: this job fails on purpose')")}),
        Job(module="command", id="after-failure", label="skipped: runs after the failure",
            settings={"argv": _py("print('never printed')")}, depends_on=["fails-on-purpose"]),
    ]
    for job in jobs:
        queue.add(job, validate=False)
    return queue


def demo_path(ws: Any) -> Path:
    return Path(ws.queues) / DEMO_FILE


def seed_demo(ws: Any) -> Path:
    """Write the demo queue into the workspace's queues folder (never over an existing one)."""
    path = demo_path(ws)
    if not path.exists():
        save_queue(build_demo(ws), path)
    return path


def line_up_again(ws: Any) -> Path:
    """A demo queue ready to run: the existing one if it has work left, else a fresh one.

    Never touches a queue a runner is running (the caller checks), and never
    replaces one with jobs still to run.
    """
    from spacrq.queue.store import load_queue
    path = demo_path(ws)
    if path.exists():
        queue = load_queue(path)
        if any(job.status in ("pending", "running", "not_run") for job in queue.jobs):
            return path
    save_queue(build_demo(ws), path)
    return path
