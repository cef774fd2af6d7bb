"""A small demo queue for a fresh workspace: every outcome a night can have, in seconds.

It prepares a fake plate, measures it (one well fails, so the job is
PARTIAL), summarises it, then shows a job that fails on purpose and the job
after it being skipped rather than run on a missing input.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from spacrq.queue.model import Job, Queue
from spacrq.queue.store import save_queue

DEMO_FILE = "demo.queue.json"
WELLS = ("A01", "A02", "A03", "A04", "B01", "B02", "B03", "B04")


def measure_demo_plate(settings: dict, ctx: Any) -> None:
    """Measure each well of the demo plate; B03 has no image, as real plates sometimes do."""
    plate = Path(settings["inputs"][0])
    out = Path(settings["writes"][0])
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for well in WELLS:
        with ctx.ledger.item(well, stage="measure"):
            image = plate / f"{well}.txt"
            if not image.exists():
                raise FileNotFoundError(f"no image for well {well}")
            rows.append(f"{well},{len(image.read_text())}")
            time.sleep(0.1)
    (out / "measurements.csv").write_text("well,intensity\n" + "\n".join(rows) + "\n")
    ctx.ledger.stamp(out / "measurements.csv")
    print(f"measured {len(rows)} of {len(WELLS)} wells")


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def build_demo(data: Path) -> Queue:
    plate = data / "demo_plate"
    out = plate / "measurements"
    make = ("import pathlib,sys; p=pathlib.Path(sys.argv[1]); p.mkdir(parents=True, exist_ok=True); "
            "[(p/(w+'.txt')).write_text('x'*7) for w in sys.argv[2:]]; "
            "print('made', len(sys.argv)-2, 'wells in', p)")
    queue = Queue(name="demo")
    queue.add(Job(module="command", id="prepare", label="make a demo plate (one well missing)",
                  settings={"argv": _py(make) + [str(plate)] + [w for w in WELLS if w != "B03"],
                            "writes": [str(plate)]}), validate=False)
    queue.add(Job(module="python", id="measure", label="measure the plate (PARTIAL: B03)",
                  settings={"target": "spacrq.queue.demo:measure_demo_plate",
                            "inputs": [str(plate)], "writes": [str(out)]},
                  depends_on=["prepare"]), validate=False)
    queue.add(Job(module="command", id="summarise", label="summarise the measurements",
                  settings={"argv": _py("import sys; print(open(sys.argv[1]).read())")
                            + [str(out / "measurements.csv")]},
                  depends_on=["measure"]), validate=False)
    queue.add(Job(module="command", id="slow", label="a 3-second job (watch the time tick)",
                  settings={"argv": _py("import time; [print(i, flush=True) or time.sleep(1)"
                                        " for i in range(3)]")}), validate=False)
    queue.add(Job(module="command", id="fails-on-purpose", label="fails on purpose (demo)",
                  settings={"argv": _py("raise SystemExit('demo: this job fails on purpose')")}),
              validate=False)
    queue.add(Job(module="command", id="after-failure", label="skipped: runs after the failure",
                  settings={"argv": _py("print('never printed')")},
                  depends_on=["fails-on-purpose"]), validate=False)
    return queue


def seed_demo(ws: Any) -> Path:
    """Write the demo queue into the workspace's queues folder (never over an existing one)."""
    path = Path(ws.queues) / DEMO_FILE
    if not path.exists():
        save_queue(build_demo(Path(ws.data)), path)
    return path
