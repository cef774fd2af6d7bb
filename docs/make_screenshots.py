"""Remake the README's pictures: the three panes during the demo night.

Opens the window offscreen on a new demo workspace, starts the demo night in
it (as ``spacrq demo`` does) and grabs each pane at the moment it has the
most to show: the Run Report while the smoothing runs, the Experiments pane
while the sweep measures, the Queue while the sweep runs and once more when
the night is over.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_screenshots.py [--out docs/img]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

SIZE = (1440, 900)
TIMEOUT = 150.0


class Shooter:
    """Watches the window's panes and grabs each picture once its moment comes."""

    def __init__(self, window, out: Path) -> None:
        self.window, self.out = window, out
        self.taken: dict[str, Path] = {}
        self.smooth_seen_at: float | None = None
        self.morning_at: float | None = None
        self.started = time.monotonic()

    def grab(self, pane: str, name: str) -> None:
        self.window.show_pane(pane)
        self.window.refresh_running()
        QApplication.processEvents()
        path = self.out / f"{name}.png"
        self.window.grab().save(str(path))
        self.taken[name] = path
        print(f"  {path}  ({pane} pane)", flush=True)

    def step(self) -> bool:
        """One look at the panes; True when every picture is taken."""
        w = self.window
        if not w.is_loaded():
            return False
        queue, report, experiments = (w.panes[t] for t in ("Queue", "Run Report", "Experiments"))
        rows = {r.job_id: r.status for r in queue.model.rows}
        smoothing = any(k.endswith("demo_smooth") and v == "running" for k, v in report._states.items())
        if smoothing and self.smooth_seen_at is None:
            self.smooth_seen_at = time.monotonic()
        if "run-report" not in self.taken and self.smooth_seen_at is not None \
                and time.monotonic() - self.smooth_seen_at > 4.0:
            self.grab("Run Report", "run-report")  # charts with a few seconds of data
        live = [r for r in experiments.runs.rows() if r.get("state") == "running"]
        if live and "experiments" not in self.taken:
            step = live[0].get("done") or 0
            if isinstance(step, int) and step >= 10:
                self.grab("Experiments", "experiments")
                self.grab("Queue", "queue")
        ended = len(rows) == 7 and all(s in ("success", "failed", "skipped") for s in rows.values())
        if ended and not queue.runner_alive and "queue" in self.taken:
            if self.morning_at is None:  # select the partial job; its log arrives by the poller
                self.morning_at = time.monotonic()
                w.show_pane("Queue")
                queue.select_job("measure")
            elif time.monotonic() - self.morning_at > 1.5:
                self.grab("Queue", "queue-morning")
                return True
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "img"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="spacrq-screens-"))
    os.environ["SPACRQ_STATE_DIR"] = str(tmp / "state")
    os.environ["SPACRQ_SETTINGS"] = str(tmp / "settings.ini")

    app = QApplication(sys.argv[:1])
    from spacrq.ui.main_window import MainWindow
    from spacrq.workspace import open_workspace
    ws, _notes = open_workspace(tmp / "spacrq-workspace", seed=False)
    window = MainWindow(ws, demo=True)
    window.resize(*SIZE)
    window.show()
    shooter = Shooter(window, out)
    result = {"code": 1}

    def tick() -> None:
        if shooter.step():
            result["code"] = 0
            window.close()
            app.quit()
        elif time.monotonic() - shooter.started > TIMEOUT:
            print(f"make_screenshots: the demo night did not get there in {TIMEOUT:.0f} s; "
                  f"taken so far: {sorted(shooter.taken)}", file=sys.stderr)
            window.close()
            app.quit()

    timer = QTimer()
    timer.timeout.connect(tick)
    timer.start(200)
    print(f"demo night in {ws.root}; pictures:", flush=True)
    app.exec()
    timer.stop()
    return result["code"]


if __name__ == "__main__":
    sys.exit(main())
