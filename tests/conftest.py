"""Test-wide rules: offscreen Qt, the QApplication every Qt test runs under, and no test leaves a
child process or a thread behind."""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPACRQ_GRACE", "2")

import psutil
import pytest

# the copies in memory of a runner's state saved nowhere (spacrq.queue.memcopy) go to a private
# folder of this run's, not the machine's /dev/shm; removed when the run ends
_MEMORY = tempfile.mkdtemp(prefix="spacrq-memory-")
os.environ["SPACRQ_MEMORY_DIR"] = _MEMORY
atexit.register(shutil.rmtree, _MEMORY, True)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def qapp_cls():
    """The application pytest-qt makes, whichever test makes it first: one that notes the
    events it delivers, for the UI tests' GUI-thread I/O guard (tests/gui_io.py)."""
    from gui_io import application_class
    return application_class()


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """Fail a test that leaves a child process running (and clean it up)."""
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    leftovers = [p for p in me.children(recursive=True) if p.pid not in before]
    if not leftovers:
        return
    gone, alive = psutil.wait_procs(leftovers, timeout=5)
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    if alive:
        names = []
        for p in alive:
            try:
                names.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
            except psutil.Error:
                names.append(str(p.pid))
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=5)
        pytest.fail("test left child processes running: " + "; ".join(names))


#: Threads a library starts once and keeps for the life of the process (zarr's I/O event loop,
#: its executor's workers, dask's offload worker), not a test's: the first test to use zarr or
#: dask's distributed scheduler in this process starts them.
PROCESS_WIDE_THREADS = ("zarr_io", "asyncio_", "Dask-Offload")


@pytest.fixture(autouse=True)
def no_leftover_threads():
    """Fail a test that leaves a thread of its own running (a thread ending as the test
    ends is given a moment to)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5.0
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()
            and not t.name.startswith(PROCESS_WIDE_THREADS)]
    for thread in left:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in left if t.is_alive()]
    if alive:
        pytest.fail("test left threads running: " + ", ".join(alive))


@pytest.fixture
def workspace(tmp_path):
    """An empty, initialised workspace (no demo content)."""
    from spacrq.workspace import open_workspace
    ws, notes = open_workspace(tmp_path / "ws", demo=False)
    assert notes == []
    return ws


@pytest.fixture
def python_exe():
    return sys.executable
