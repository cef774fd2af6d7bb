"""Start-up: time from launch to the window's first paint, against a bare PySide6 window.

Each run is a fresh process (the interpreter, the imports and the platform
plugin are what the operator waits for), timed from just before it is
started to the moment its window first paints, which the process prints
(``SPACRQ_STARTUP_PROBE=exit`` in spacrq; the same event filter in the bare
window).  Three kinds, interleaved so a busy machine slows all of them alike:

* bare      — ``QApplication`` + an empty ``QMainWindow``, nothing else;
* existing  — ``spacrq gui`` on a workspace opened (and seeded) before;
* new       — ``spacrq gui`` on a folder that does not exist yet.

Target: the median of each spacrq kind is at most 1.5x the bare window's.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bench_startup.py [--runs 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.5

BARE = r"""
import time, sys
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QMainWindow
app = QApplication(sys.argv[:1])
window = QMainWindow()
window.resize(1280, 820)
window.setWindowTitle("bare")
class Probe(QObject):
    done = False
    def eventFilter(self, watched, event):
        if event.type() == QEvent.Type.Paint and not self.done:
            self.done = True
            print(f"spacrq-first-paint {time.time():.6f}", flush=True)
            QTimer.singleShot(0, app.quit)
        return False
probe = Probe()
window.installEventFilter(probe)
window.show()
app.exec()
"""


def first_paint(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from starting ``argv`` to its first paint."""
    started = time.time()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    for line in out.stdout.splitlines():
        if line.startswith("spacrq-first-paint "):
            return float(line.split()[1]) - started
    raise RuntimeError(f"{argv} never painted (exit {out.returncode}): {out.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="spacrq-bench-startup-") as tmp:
        root = Path(tmp)
        env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"),
                   SPACRQ_STATE_DIR=str(root / "state"), SPACRQ_SETTINGS=str(root / "settings.ini"),
                   SPACRQ_STARTUP_PROBE="exit")
        existing = root / "existing"
        from spacrq.workspace import open_workspace
        open_workspace(existing)  # made and seeded once, as on a workstation's second day
        spacrq = [sys.executable, "-m", "spacrq", "gui", "--workspace"]
        times: dict[str, list[float]] = {"bare": [], "existing": [], "new": []}
        first_paint([sys.executable, "-c", BARE], env)  # warm the disk cache for all kinds
        first_paint(spacrq + [str(existing)], env)
        for n in range(args.runs):
            times["bare"].append(first_paint([sys.executable, "-c", BARE], env))
            times["existing"].append(first_paint(spacrq + [str(existing)], env))
            times["new"].append(first_paint(spacrq + [str(root / f"new{n}")], env))
    bare = statistics.median(times["bare"])
    print(f"time to first paint, median of {args.runs} runs each (offscreen: "
          f"{env['QT_QPA_PLATFORM']}), interleaved")
    print(f"{'window':<22}{'median':>10}{'min':>10}{'max':>10}{'x bare':>10}")
    ok = True
    for kind, label in (("bare", "bare PySide6 window"), ("existing", "spacrq, existing ws"),
                        ("new", "spacrq, new ws")):
        values = times[kind]
        median = statistics.median(values)
        ratio = median / bare
        within = kind == "bare" or ratio <= TARGET
        ok &= within
        print(f"{label:<22}{median * 1000:>8.0f}ms{min(values) * 1000:>8.0f}ms"
              f"{max(values) * 1000:>8.0f}ms{ratio:>9.2f}x{'' if within else '  OVER'}")
    print(f"target: spacrq <= {TARGET}x the bare window — {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
