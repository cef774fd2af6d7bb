"""A night on a disk that fills up, for test_queue_room (run as root of its own namespaces).

``python fulldisk_night.py DISK OUTSIDE JOBS [--no-room]``: mounts a 1 MiB
tmpfs on DISK, runs a queue there whose first job fills it and whose JOBS
next jobs each append their id to OUTSIDE/ran (on a disk with room), frees
the space in the morning, runs ``spacrq queue resume``, and leaves in
OUTSIDE what the test reads: both commands' output and the queue file as the
resume left it (the tmpfs goes with this process).  With ``--no-room`` the
records keep no room (as on a filesystem that cannot allocate ahead) and the
disk is full before the night starts (so that no write there succeeds, whose
freed blocks a line could take): the runner cannot save its final state
anywhere and waits, and the space is freed once it says so, while it waits.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    disk, outside, jobs = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    no_room = "--no-room" in sys.argv
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
    prefill = disk / "prefill"
    if no_room:
        subprocess.run([sys.executable, "-c", filler, str(prefill)], check=True)
    spacrq = [sys.executable, "-m", "spacrq", "queue"]
    env = dict(os.environ, SPACRQ_QUEUE_ROOM="0") if no_room else None
    err = outside / "run.err"
    with open(err, "wb") as stderr:
        runner = subprocess.Popen(spacrq + ["run", str(queue)], stdout=subprocess.PIPE,
                                  stderr=stderr, env=env)
        if no_room:
            deadline = time.monotonic() + 120
            while b"keeps trying" not in err.read_bytes() and runner.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            prefill.unlink(missing_ok=True)  # the operator frees space while the runner waits
        out, _ = runner.communicate(timeout=120)
    (outside / "run.txt").write_text(f"exit {runner.returncode}\n{out.decode()}\n"
                                     f"{err.read_text()}")
    fill.unlink(missing_ok=True)  # (else in the morning)
    prefill.unlink(missing_ok=True)
    done = subprocess.run(spacrq + ["resume", str(queue)], capture_output=True, text=True,
                          timeout=120)
    (outside / "resume.txt").write_text(f"exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    shutil.copy(queue, outside / "night.queue.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
