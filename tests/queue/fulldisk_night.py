"""A night on a disk that fills up, for test_queue_room (run as root of its own namespaces).

``python fulldisk_night.py DISK OUTSIDE JOBS``: mounts a 1 MiB tmpfs on DISK,
runs a queue there whose first job fills it and whose JOBS next jobs each
append their id to OUTSIDE/ran (on a disk with room), frees the space, runs
``spacrq queue resume``, and leaves in OUTSIDE what the test reads: both
commands' output and the queue file as the resume left it (the tmpfs goes
with this process).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path


def main() -> int:
    disk, outside, jobs = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=True)
    fill = disk / "fill"
    filler = ("import sys\nf = open(sys.argv[1], 'wb')\ntry:\n    while True:\n"
              "        f.write(b'x' * 65536)\n        f.flush()\nexcept OSError:\n    pass\n")
    night = [{"id": "fill", "module": "command",
              "settings": {"argv": [sys.executable, "-c", filler, str(fill)]}}]
    night += [{"id": f"j{n}", "module": "command",
               "settings": {"argv": ["sh", "-c", f'echo j{n} >> "$0"', str(outside / "ran")]}}
              for n in range(jobs)]
    queue = disk / "night.queue.json"
    queue.write_text(json.dumps({"name": "night", "jobs": night}))
    spacrq = [sys.executable, "-m", "spacrq", "queue"]
    for step, more in (("run", []), ("resume", [])):
        done = subprocess.run(spacrq + [step, str(queue)] + more, capture_output=True,
                              text=True, timeout=120)
        (outside / f"{step}.txt").write_text(f"exit {done.returncode}\n{done.stdout}\n"
                                             f"{done.stderr}")
        if step == "run":
            fill.unlink(missing_ok=True)  # the operator frees space in the morning
    shutil.copy(queue, outside / "night.queue.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
