"""A night on a disk that fills up, for test_queue_room (run as root of its own namespaces).

``python fulldisk_night.py DISK OUTSIDE JOBS [--detached]``: mounts a 1 MiB
tmpfs on DISK, runs a queue there whose first job fills it and whose JOBS
next jobs run on the full disk, each job appending its id to OUTSIDE/ran (on
a disk with room) so that the test sees how often each ran, frees
the space in the morning, runs ``spacrq queue resume``, and leaves in
OUTSIDE what the test reads: both commands' output and the queue file as the
resume left it (the tmpfs goes with this process).

With ``--detached`` the night is the pane's: ``queue run --detach``, the
runner's log in the logs folder on that disk, which is full before the night
starts, and the records keep no room (``SPACRQ_QUEUE_ROOM=0``, as on a
filesystem that cannot allocate ahead): nothing the runner writes there
succeeds, so it cannot save its final state anywhere and waits.  Once every
job has run, the space is freed while it waits; its log is copied out
(``runner.log``) when it has ended.  ``--logged`` is the same night run as
cron would, ``queue run`` with its output into a log on that disk.  Both
copy OUTSIDE/ran to OUTSIDE/ran.night once the runner has ended.  ``--killed``
is the pane's night whose runner (and its keeper) is SIGKILLed while it waits
to save, before the space is freed (its log is not copied out then).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from spacrq.queue.locks import runner_holds


def _until(condition, what: str, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"fulldisk_night: {what} did not happen in {seconds:.0f} s")
        time.sleep(0.05)


def main() -> int:
    disk, outside, jobs = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    killed = "--killed" in sys.argv
    detached = killed or "--detached" in sys.argv or "--logged" in sys.argv
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=True)
    fill = disk / "fill"
    filler = ("import sys\nf = open(sys.argv[1], 'wb')\ntry:\n    while True:\n"
              "        f.write(b'x' * 4096)\n        f.flush()\nexcept OSError:\n    pass\n")
    ran = outside / "ran"
    night = [{"id": "fill", "module": "command", "settings": {"argv": [
        sys.executable, "-c", f"import sys\nopen(sys.argv[2], 'a').write('fill\\n')\n{filler}",
        str(fill), str(ran)]}}]
    night += [{"id": f"j{n}", "module": "command",
               "settings": {"argv": ["sh", "-c", f'echo j{n} >> "$0"', str(ran)]}}
              for n in range(jobs)]
    queue = disk / "night.queue.json"
    queue.write_text(json.dumps({"name": "night", "jobs": night}))
    logs = disk / "night_logs"
    spacrq = [sys.executable, "-m", "spacrq", "queue"]
    prefill = disk / "prefill"
    if detached:
        logs.mkdir()
        subprocess.run([sys.executable, "-c", filler, str(prefill)], check=True)
        env = dict(os.environ, SPACRQ_QUEUE_ROOM="0")
        if "--logged" in sys.argv:  # (the log is on the full disk from its first line)
            with open(logs / "runner.log", "wb") as log:
                cron = subprocess.Popen(spacrq + ["run", str(queue)], stdout=log,
                                        stderr=subprocess.STDOUT, env=env)
            _until(lambda: runner_holds(logs) or cron.poll() is not None, "the runner's start")
            (outside / "run.txt").write_text("")
        else:
            started = subprocess.run(spacrq + ["run", "--detach", str(queue)],
                                     capture_output=True, text=True, timeout=60, env=env)
            (outside / "run.txt").write_text(f"exit {started.returncode}\n{started.stdout}\n"
                                             f"{started.stderr}")
        began = time.monotonic()
        _until(lambda: (ran.exists() and len(ran.read_text().split()) > jobs)
               or (time.monotonic() - began > 10 and not runner_holds(logs)),  # (it died)
               "every job's run")
        if killed:  # (the OOM killer, a kill -9, a logout: while it waits to save)
            import psutil
            from spacrq.queue.locks import flock_holder
            _until(lambda: flock_holder(logs / "unsaved.lock") is not None,
                   "the runner's wait to save")
            runner = psutil.Process(flock_holder(logs / "runner.lock"))
            for process in (runner.parent(), runner):
                process.kill()
            _until(lambda: not runner_holds(logs), "the runner's end")
            shutil.copy(ran, outside / "ran.night")
            (outside / "runner.log").write_text("")
        prefill.unlink()  # the operator frees space while the runner waits
        _until(lambda: not runner_holds(logs), "the runner's end")
        if "--logged" in sys.argv:
            cron.wait(timeout=60)
            (outside / "run.txt").write_text(f"exit {cron.returncode}\n")
        if not killed:
            shutil.copy(logs / "runner.log", outside / "runner.log")
            shutil.copy(ran, outside / "ran.night")
    else:
        done = subprocess.run(spacrq + ["run", str(queue)], capture_output=True, text=True,
                              timeout=120)
        (outside / "run.txt").write_text(f"exit {done.returncode}\n{done.stdout}\n"
                                         f"{done.stderr}")
    fill.unlink(missing_ok=True)  # the operator frees space in the morning
    done = subprocess.run(spacrq + ["resume", str(queue)], capture_output=True, text=True,
                          timeout=120)
    (outside / "resume.txt").write_text(f"exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    shutil.copy(queue, outside / "night.queue.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
