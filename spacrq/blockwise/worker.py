"""A block worker: a separate OS process that runs blocks the scheduler hands it.

Started by the local executor as ``python -m spacrq.blockwise.worker IN OUT``
where IN and OUT are pipe descriptors; stdout and stderr go to the worker's
own log file.  The conversation is a handful of pickled tuples:

    scheduler → worker   ("setup", {...})   ("run", [spatial ids], sent at)   ("stop",)
    worker → scheduler   ("ready", seconds) ("part", [results])
                     ("done", [results], batch seconds)  ("bye", final_wait)

Each result carries the seconds the block spent *queued* in the worker: its
batch waiting in the pipe while the worker ran the batch ahead of it (batches
go two deep), the blocks ahead of it in its own batch, and its result held
until the batch (or part) was sent back.  What is left of the round trip once
queued and wall are taken out is spacrq's own cost: the worker's bookkeeping
just before the block (measuring, the slot), the pipe and the scheduler.

Blocks arrive in batches so that a fast block costs a few microseconds of
messaging, not a round trip each.  Before each block the worker writes the
block's id and start time into its *slot* (16 bytes of a shared file): if the
worker dies or hangs, the scheduler reads the slot to know exactly which
block was running — only that block is charged a failure; the rest of the
batch is simply handed out again.

A block function that raises costs that block, never the worker: the
traceback goes to the log, the first line back to the scheduler.
"""
from __future__ import annotations

import mmap
import os
import pickle
import struct
import sys
import time

__all__ = ["SLOT_FORMAT", "SLOT_SIZE", "read_slot", "main"]

SLOT_FORMAT = "<qd"
SLOT_SIZE = struct.calcsize(SLOT_FORMAT)
IDLE = -1
#: a batch running longer than this sends the results it has so far
PART_SECONDS = 0.05


def read_slot(path) -> tuple[int, float]:
    """``(spatial id running or -1, its start epoch time)`` from a worker's slot file."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(SLOT_SIZE)
    except OSError:
        return IDLE, 0.0
    if len(raw) < SLOT_SIZE:
        return IDLE, 0.0
    return struct.unpack(SLOT_FORMAT, raw)


def load_function(spec):
    """A process function from ``package.module:function`` or its pickle."""
    if isinstance(spec, str):
        from spacrq.modules import load_target
        return load_target(spec)
    return pickle.loads(spec)


def _load_main_script(path: str) -> None:
    """Make ``__main__.fn`` pickles resolvable: run the scheduler's script as
    ``__mp_main__`` (its ``if __name__ == "__main__":`` part does not run)."""
    import runpy
    import types
    module = types.ModuleType("__mp_main__")
    module.__dict__.update(runpy.run_path(path, run_name="__mp_main__"))
    sys.modules["__mp_main__"] = module
    sys.modules["__main__"] = module


class Channel:
    """One end of a pipe speaking multiprocessing's Connection wire format
    (4-byte big-endian length, then a pickle), so the scheduler reads it with
    ``multiprocessing.connection`` while the worker does not pay for importing it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = os.read(self.fd, n)
            if not chunk:
                raise EOFError("the scheduler closed the pipe")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv(self):
        (size,) = struct.unpack("!i", self._read(4))
        if size == -1:
            (size,) = struct.unpack("!Q", self._read(8))
        return pickle.loads(self._read(size))

    def send(self, obj) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        n = len(data)
        header = struct.pack("!i", n) if n <= 0x7FFFFFFF else struct.pack("!iQ", -1, n)
        view = memoryview(header + data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]


def _traceback() -> None:
    import traceback
    traceback.print_exc()


def _log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{stamp} {message}", flush=True)


def _sent_now(results: list, now: float) -> list:
    """The results with their queued time completed: each waited from its end until ``now``."""
    return [(*r[:8], r[8] + now, r[9]) for r in results]


def serve(conn_in: Channel, conn_out: Channel, started: float) -> int:
    kind, setup = conn_in.recv()
    if kind != "setup":
        return 2
    for entry in reversed(setup.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    worker_id = setup["worker_id"]
    task_id = setup["task_id"]
    _log(f"worker {worker_id} of task {task_id!r} starting (pid {os.getpid()})")
    try:
        if setup.get("main_path"):
            _load_main_script(setup["main_path"])
        from spacrq.blockwise.grid import BlockGrid
        grid = BlockGrid(**setup["grid"])
        function = load_function(setup["function"])
    except Exception as exc:
        _traceback()
        conn_out.send(("setup_failed", f"{type(exc).__name__}: {exc}"))
        return 1
    tracking = bool(setup.get("resource_tracking"))
    meter = None
    if tracking:
        from spacrq.blockwise.measure import BlockMeter
        meter = BlockMeter()
    # the scheduler hands the slot over open; a name is opened only without following links
    slot_fd = setup.get("slot_fd")
    if not isinstance(slot_fd, int):
        slot_fd = os.open(setup["slot"], os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    slot = mmap.mmap(slot_fd, SLOT_SIZE)
    os.close(slot_fd)
    pack = struct.Struct(SLOT_FORMAT).pack_into
    pack(slot, 0, IDLE, time.time())
    conn_out.send(("ready", time.perf_counter() - started))
    _log("ready")
    perf = time.perf_counter
    cpu_now = time.process_time
    last_end = perf()
    while True:
        free_at = time.time()  # from now on a batch waiting in the pipe waits for nothing
        message = conn_in.recv()
        if message[0] == "stop":
            final_wait = perf() - last_end
            pack(slot, 0, IDLE, time.time())
            conn_out.send(("bye", final_wait))
            _log(f"stopping after a final wait of {final_wait:.3f} s")
            break
        results = []
        batch_started = reported = perf()
        # seconds the batch sat in the pipe behind the previous one (none if the worker was free)
        in_pipe = max(0.0, free_at - message[2]) if len(message) > 2 else 0.0
        arrived = batch_started - in_pipe
        for spatial_id in message[1]:
            block = grid.block(spatial_id, task_id)
            pack(slot, 0, spatial_id, time.time())
            error = None
            if meter is not None:
                meter.start()
                t0 = meter._t0
            else:
                t0 = perf()
                c0 = cpu_now()
            try:
                outcome = function(block)
                if outcome is False:
                    error = "the process function returned False"
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                _log(f"block {spatial_id} failed:")
                _traceback()
                sys.stderr.flush()
            if meter is not None:
                wall, cpu, peak, read, write = meter.stop()
            else:
                wall = perf() - t0
                cpu = cpu_now() - c0
                peak = read = write = -1
            idle = t0 - last_end
            # the worker's own bookkeeping before this block (or its wait for this very batch):
            # spacrq's cost, not a wait behind other blocks, so it stays out of queued
            own = t0 - max(last_end, arrived)
            last_end = t0 + wall
            # queued: arrival to start less its own gap now, the end to sending back by _sent_now
            results.append((spatial_id, error, wall, cpu, peak, read, write, idle,
                            t0 - arrived - own - last_end, own))
            if last_end - reported > PART_SECONDS:
                conn_out.send(("part", _sent_now(results, perf())))  # long batch: let the scheduler move on
                results = []
                reported = last_end
        pack(slot, 0, IDLE, time.time())
        conn_out.send(("done", _sent_now(results, perf()), perf() - batch_started))
    slot.close()
    return 0


def main(argv=None) -> int:
    started = time.perf_counter()
    argv = sys.argv[1:] if argv is None else argv
    conn_in = Channel(int(argv[0]))
    conn_out = Channel(int(argv[1]))
    try:
        return serve(conn_in, conn_out, started)
    except (EOFError, BrokenPipeError):
        _log("the scheduler went away; exiting")
        return 3
    except KeyboardInterrupt:
        _log("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
