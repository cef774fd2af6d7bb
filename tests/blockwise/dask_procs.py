"""A real dask cluster on loopback for the tests: ``dask scheduler`` and ``dask worker`` processes.

Each process gets its own session (so a SIGKILL of one worker is a worker
lost, as when a node dies) and everything is killed when the cluster is
closed; ports are chosen free.  Workers run without a nanny, so a killed
worker stays dead instead of being restarted behind the test's back.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DaskProcs:
    """A scheduler and ``n`` workers, each a process of its own, on 127.0.0.1."""

    def __init__(self, logs: Path, workers: int = 2, threads: int = 1) -> None:
        self.logs = Path(logs)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.threads = threads
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.scheduler = self._start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port",
                                                   str(self.port), "--no-dashboard"])
        self.workers: list[subprocess.Popen] = []
        try:
            self._wait_listening()
            for i in range(workers):
                self.add_worker(f"w{i}")
            self.wait_for_workers(workers)
        except BaseException:
            self.close()
            raise

    def _start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 (handed to the child, closed after)
        try:
            return subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=log,
                                    stderr=subprocess.STDOUT, env=self.env, cwd=self.logs,
                                    start_new_session=True)
        finally:
            log.close()

    def add_worker(self, name: str) -> subprocess.Popen:
        proc = self._start(name, ["worker", self.address, "--nthreads", str(self.threads),
                                  "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                                  "--name", name, "--death-timeout", "30"])
        self.workers.append(proc)
        return proc

    def _wait_listening(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.scheduler.poll() is not None:
                raise RuntimeError(f"dask scheduler exited: {self.log('scheduler')}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"dask scheduler did not listen: {self.log('scheduler')}")

    def wait_for_workers(self, n: int, timeout: float = 45.0) -> None:
        from distributed import Client
        with Client(self.address, timeout="20s") as client:
            client.wait_for_workers(n, timeout=timeout)

    def worker_addresses(self) -> set[str]:
        from distributed import Client
        with Client(self.address, timeout="20s") as client:
            return set(client.scheduler_info()["workers"])

    def log(self, name: str) -> str:
        try:
            return (self.logs / f"{name}.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def close(self) -> None:
        for proc in [*self.workers, self.scheduler]:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for proc in [*self.workers, self.scheduler]:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignored
                pass
