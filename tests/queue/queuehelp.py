"""Functions the queue's process tests run as ``python`` jobs (imported by the job processes)."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def measure_wells(settings, ctx):
    """Stamp a partial result: one of three wells fails (a job that exits 0 anyway)."""
    out = Path(settings["writes"][0])
    out.mkdir(parents=True, exist_ok=True)
    for well in ("A01", "A02", "A03"):
        with ctx.ledger.item(well, stage="measure"):
            if well in settings.get("bad_wells", ["A02"]):
                raise ValueError(f"no cells found in {well}")
    ctx.ledger.stamp(out / "measurements.csv")


def raise_value_error(settings):
    raise ValueError("the plate map is missing column 'well'")


def ignore_sigterm_forever(settings):
    """A job that will not stop politely: only SIGKILL ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Path(settings["writes"][0]).mkdir(parents=True, exist_ok=True)
    (Path(settings["writes"][0]) / "started").write_text(str(os.getpid()))
    print("ignoring SIGTERM", flush=True)
    while True:
        time.sleep(0.05)
