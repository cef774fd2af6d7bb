"""A one-node Slurm for the tests: munged, slurmctld and slurmd in the foreground, as root.

Everything lives in one temporary folder (its own munge key and socket,
state, spool and free ports), so the machine's own configuration is never
read or touched.  Jobs run under ``slurmstepd``, which Slurm detaches from
its parent, so :meth:`close` cancels every job, waits for them to go, and
kills whatever process still names this folder before stopping the daemons.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel")


def available() -> bool:
    return os.geteuid() == 0 and all(shutil.which(b) for b in BINARIES)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


CONF = """ClusterName=spacrqtest
SlurmctldHost={node}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={root}/munge.socket
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SchedulerParameters=sched_min_interval=100000
NodeName={node} CPUs={cpus} RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class SlurmProcs:
    """munged + slurmctld + slurmd; ``env`` is what sbatch and friends need to find them."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="spq-slurm-"))
        (self.root / "state").mkdir()
        (self.root / "spool").mkdir()
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        node = socket.gethostname().split(".")[0]
        conf = self.root / "slurm.conf"
        conf.write_text(CONF.format(node=node, root=self.root, ctld_port=_free_port(),
                                    d_port=_free_port(), cpus=os.cpu_count() or 2))
        self.env = {**os.environ, "SLURM_CONF": str(conf)}
        self.procs: list[subprocess.Popen] = []
        try:
            self._start("munged", ["munged", "-F", "-f", f"--socket={self.root}/munge.socket",
                                   f"--key-file={key}", f"--log-file={self.root}/munged.log",
                                   f"--pid-file={self.root}/munged.pid",
                                   f"--seed-file={self.root}/munged.seed"])
            self._wait(lambda: (self.root / "munge.socket").exists(), "munged")
            self._start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(conf)])
            self._start("slurmd", ["slurmd", "-D", "-f", str(conf)])
            self._wait(self._idle, "the node to be idle")
        except BaseException:
            self.close()
            raise

    def _start(self, name: str, argv: list[str]) -> None:
        with open(self.root / f"{name}.out", "ab") as out:
            self.procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                               env=self.env, cwd=self.root,
                                               start_new_session=True))

    def _wait(self, predicate, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"a slurm daemon exited while waiting for {what}: "
                                   + self.logs())
            if predicate():
                return
            time.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}: " + self.logs())

    def run(self, *argv: str) -> str:
        done = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=20)
        return done.stdout

    def _idle(self) -> bool:
        try:
            return "idle" in self.run("sinfo", "-h", "-o", "%t")
        except (subprocess.SubprocessError, OSError):
            return False

    def jobs(self) -> list[str]:
        try:
            return self.run("squeue", "-h", "-o", "%i").split()
        except (subprocess.SubprocessError, OSError):
            return []

    def logs(self) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "munged.out", "slurmd.out"):
            try:
                parts.append(f"{name}: " + (self.root / name).read_text(errors="replace")[-800:])
            except OSError:
                pass
        return "\n".join(parts)

    def _strays(self) -> list[psutil.Process]:
        """Job processes (slurmstepd, the job script, its workers) that belong to this Slurm."""
        mine = str(self.root)
        found = []
        for p in psutil.process_iter(["cmdline", "environ"]):
            try:
                cmd = " ".join(p.info["cmdline"] or [])
                env = p.info["environ"] or {}
            except psutil.Error:
                continue
            if p.pid == os.getpid():
                continue
            if mine in cmd or env.get("SLURM_CONF", "").startswith(mine):
                found.append(p)
        return found

    def close(self) -> None:
        if any(p.poll() is None for p in self.procs):
            ids = self.jobs()
            if ids:
                try:
                    self.run("scancel", *ids)
                except (subprocess.SubprocessError, OSError):
                    pass
            deadline = time.monotonic() + 15
            while self.jobs() and time.monotonic() < deadline:
                time.sleep(0.1)
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
        strays = self._strays()  # slurmstepd and job processes are no child of ours
        for p in strays:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(strays, timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)
