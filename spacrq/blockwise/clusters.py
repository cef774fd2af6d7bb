"""Which dask cluster a blockwise step runs on: named in its settings, checked at the door.

A step runs on dask with ``"executor": "dask"`` and one of::

    "scheduler": "tcp://head:8786"                      # a cluster someone already started
    "cluster": "local"  or  {"kind": "local", "n_workers": 4}   # a LocalCluster for this job
    "cluster": {"kind": "slurm", "cores": 8, "memory": "16GB", "walltime": "02:00:00",
                "queue": "short", "account": "lab", "jobs": 4,
                "job_extra_directives": ["--gres=gpu:1"]}      # pbs and lsf alike

Everything that can be found out before the night starts is found at
``validate`` time, each problem one sentence naming the setting and the fix:
a scheduler that does not answer within :data:`CONNECT_TIMEOUT` seconds, a
missing ``spacrq[dask]`` extra (with the command that installs it), a
setting the cluster kind does not know, a number that is not one.  Settings
end up in a batch script that Slurm, PBS or LSF hands to a shell, so text
with line breaks or control characters is refused (a ``"--mem=1G\\nrm -rf ~"``
must never become a line of that script).

The cluster is disposable: spacrq's tracking store stays the record of what
is done, so the same step rerun on another cluster (or after this one is
gone) skips every block that is done.
"""
from __future__ import annotations

import importlib.util
import json
import re
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CONNECT_TIMEOUT", "INSTALL", "KINDS", "ClusterError", "ClusterLost", "DaskTarget",
           "check_executor", "cluster_settings", "describe", "executor_for", "job_script",
           "open_target", "parse_address", "reachable"]

#: seconds validate waits for a scheduler to answer: long enough for a LAN, short for a typo
CONNECT_TIMEOUT = 2.0
INSTALL = "pip install 'spacrq[dask]'"
EXECUTORS = ("local", "serial", "dask")
KINDS = ("local", "slurm", "pbs", "lsf")
#: how long a reachability answer is reused (validate runs when a job is added and again at start)
_REMEMBER = 30.0
#: and a refusal, briefly: a job checked twice in a row waits once (start it and re-check)
_REMEMBER_NO = 5.0
_answers: dict[tuple[str, str, int], tuple[float, str | None]] = {}

_COMMON = {"kind": str}
_LOCAL = {**_COMMON, "n_workers": int, "threads_per_worker": int}
_BATCH = {**_COMMON, "cores": int, "memory": str, "walltime": str, "queue": str, "account": str,
          "jobs": int, "processes": int, "job_extra_directives": list, "interface": str}
OPTIONS = {"local": _LOCAL, "slurm": _BATCH, "pbs": _BATCH, "lsf": _BATCH}
_CLASSES = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "lsf": "LSFCluster"}
_SUBMIT = {"slurm": "sbatch", "pbs": "qsub", "lsf": "bsub"}
_EXAMPLE = {"cores": 8, "memory": "16GB", "walltime": "02:00:00", "queue": "short",
            "account": "mylab", "jobs": 4, "processes": 1, "n_workers": 4,
            "threads_per_worker": 1, "job_extra_directives": ["--gres=gpu:1"], "interface": "ib0"}
_MEMORY = re.compile(r"^\s*\d+(\.\d+)?\s*([kKMGTP]i?B|B|[kKMGTP])?\s*$")
_WALLTIME = re.compile(r"^(\d+-)?\d{1,3}(:\d{2}){1,2}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]*$")
_SCHEMES = ("tcp", "tls")
LIMITS = {"n_workers": 256, "threads_per_worker": 64, "cores": 1024, "jobs": 10_000,
          "processes": 256}


class ClusterError(RuntimeError):
    """The cluster could not be reached or started; the message is one sentence with the fix."""


class ClusterLost(ClusterError):
    """The cluster went away mid-run; the blocks done are kept, a rerun does the rest."""


@dataclass
class DaskTarget:
    """What ``run_blockwise(dask_cluster=...)`` is given: the cluster and its name for the report."""

    target: Any
    label: str
    kind: str
    extra: dict = field(default_factory=dict)


# -- reading the settings ------------------------------------------------------------------
def parse_address(address: Any) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of ``tcp://host:port`` (``host:port`` means tcp), or None."""
    if not isinstance(address, str):
        return None
    text = address.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    if scheme not in _SCHEMES:
        return None
    if rest.startswith("["):  # [::1]:8786
        host, _, port = rest[1:].partition("]")
        port = port[1:] if port.startswith(":") else ""
    else:
        host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    if any(c.isspace() or c in "/?#@" for c in host):
        return None
    return scheme, host, int(port)


def cluster_settings(value: Any) -> dict:
    """The ``cluster`` setting as a dict with its ``kind`` (a bare ``"slurm"`` means defaults)."""
    if isinstance(value, str):
        return {"kind": value.strip().lower()}
    if isinstance(value, dict):
        kind = value.get("kind")
        return {**value, "kind": kind.strip().lower() if isinstance(kind, str) else kind}
    return {}


def _given(value: Any) -> bool:
    return value not in (None, "", {})


def reachable(scheme: str, host: str, port: int, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """None when something listens at the address, else why not (remembered a little while)."""
    key = (scheme, host, port)
    now = time.monotonic()
    seen = _answers.get(key)
    if seen is not None and now - seen[0] < (_REMEMBER if seen[1] is None else _REMEMBER_NO):
        return seen[1]
    deadline = now + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            why = None if scheme != "tcp" else _greeting(sock, deadline)
    except TimeoutError:
        why = f"no answer within {timeout:g} s"
    except socket.gaierror:
        why = f"the host name {host!r} is not known"
    except OSError as exc:
        why = (exc.strerror or str(exc)).lower()
    _answers[key] = (now, why)
    return why


def _greeting(sock: socket.socket, deadline: float) -> str | None:
    """None when the peer greets like a dask server, else what it did instead.

    A dask scheduler writes its handshake (naming its python and pickle
    protocol) as soon as a connection opens; a port that merely accepts
    (a firewall, a proxy, another program) is not a scheduler.
    """
    seen = b""
    while len(seen) < 1024:
        left = deadline - time.monotonic()
        if left <= 0:
            return "something accepted the connection but sent no dask greeting"
        sock.settimeout(left)
        try:
            data = sock.recv(1024)
        except TimeoutError:
            return "something accepted the connection but sent no dask greeting"
        if not data:
            return "the connection was closed at once: it is not a dask scheduler"
        seen += data
        if b"pickle-protocol" in seen or b"python" in seen:
            return None
    return "the program answering there is not a dask scheduler"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _safe_text(value: str) -> bool:
    """Text that may become part of a batch script line: no line breaks, no control characters."""
    return not any(ord(c) < 32 or ord(c) == 127 for c in value)


def check_executor(s: dict, given: dict | None = None) -> list[tuple[str, str, str, str]]:
    """Every problem with a step's executor, scheduler and cluster: ``(setting, message, fix, severity)``.

    ``s`` is the step with its defaults filled in, ``given`` what the
    operator wrote (a scheduler left at its default is not "set").
    """
    given = s if given is None else given
    out: list[tuple[str, str, str, str]] = []

    def bad(setting: str, message: str, fix: str, severity: str = "error") -> None:
        out.append((setting, message, fix, severity))

    executor = s.get("executor") or "local"  # not text: already said by the step's checks
    scheduler, cluster = given.get("scheduler"), given.get("cluster")
    if not isinstance(executor, str) or executor not in EXECUTORS:
        bad("executor", f"executor {_show(executor)} is not local, serial or dask",
            "Use local (worker processes here), serial (in the job's process, for debugging) "
            "or dask (with 'scheduler' or 'cluster').")
        return out
    if executor != "dask":
        for key, value in (("scheduler", scheduler), ("cluster", cluster)):
            if _given(value):
                bad(key, f"{key} is set but the executor is {executor}, so it is ignored",
                    f"Set \"executor\": \"dask\" to run on it, or remove '{key}'.", "warning")
        return out
    if not _installed("distributed"):
        bad("executor", "executor 'dask' needs dask.distributed, which is not installed",
            f"Install it with {INSTALL}, or use the local executor.")
        return out
    if s.get("timeout") not in (None, ""):
        bad("timeout", "timeout is not enforced on the dask executor (dask cannot stop one "
            "block of a running task)", "Remove 'timeout', or use the local executor to have "
            "hung blocks stopped.", "warning")
    if _given(scheduler) and _given(cluster):
        bad("cluster", "both 'scheduler' and 'cluster' are set",
            "Give 'scheduler' to use a running cluster, or 'cluster' to start one for the job, "
            "not both.")
        return out
    if not _given(scheduler) and not _given(cluster):
        bad("executor", "executor 'dask' needs a cluster to run on",
            "Set 'scheduler' to a running scheduler's address (e.g. \"tcp://head:8786\") or "
            "'cluster' to \"local\" or {\"kind\": \"slurm\", ...}.")
        return out
    if _given(scheduler):
        parsed = parse_address(scheduler)
        if parsed is None:
            bad("scheduler", f"scheduler {_show(scheduler)} is not a dask scheduler address",
                "Write it as tcp://HOST:PORT, e.g. \"tcp://head:8786\" (dask scheduler prints it).")
            return out
        why = reachable(*parsed)
        if why is not None:
            address = f"{parsed[0]}://{parsed[1]}:{parsed[2]}"
            bad("scheduler", f"the dask scheduler at {address} cannot be reached ({why})",
                "Start it (dask scheduler) or correct 'scheduler' to the address it prints.")
        return out
    _check_cluster(cluster, bad)
    return out


def _check_cluster(cluster: Any, bad) -> None:
    c = cluster_settings(cluster)
    kind = c.get("kind")
    if not c:
        bad("cluster", f"cluster {_show(cluster)} is neither a kind nor a set of settings",
            "Give \"local\", or an object like {\"kind\": \"slurm\", \"cores\": 8, "
            "\"memory\": \"16GB\"}.")
        return
    if kind not in OPTIONS:
        bad("cluster", f"cluster kind {_show(kind)} is not one spacrq can start",
            f"Use one of {', '.join(KINDS)} as 'kind', or set 'scheduler' to a running cluster.")
        return
    if kind != "local" and not _installed("dask_jobqueue"):
        bad("cluster", f"a {kind} cluster needs dask-jobqueue, which is not installed",
            f"Install it with {INSTALL}.")
    known = OPTIONS[kind]
    for key, value in c.items():
        if key not in known:
            bad("cluster", f"{key!r} is not a setting of a {kind} cluster",
                f"Check the spelling; a {kind} cluster takes {', '.join(k for k in known if k != 'kind')}.")
            continue
        want = known[key]
        if want is int:
            if isinstance(value, bool) or not isinstance(value, int) or \
                    not 1 <= value <= LIMITS[key]:
                bad("cluster", f"cluster {key} {_show(value)} is not a whole number from 1 to "
                    f"{LIMITS[key]}", f"Give e.g. \"{key}\": {_EXAMPLE[key]}.")
        elif want is str and key != "kind":
            if not isinstance(value, str) or not value.strip() or not _safe_text(value):
                bad("cluster", f"cluster {key} {_show(value)} is not one line of text",
                    f"Give e.g. \"{key}\": \"{_EXAMPLE[key]}\".")
            elif key == "memory" and not _MEMORY.match(value):
                bad("cluster", f"cluster memory {_show(value)} is not an amount of memory",
                    "Give it with a unit, e.g. \"16GB\" or \"512MiB\".")
            elif key == "walltime" and not _WALLTIME.match(value.strip()):
                bad("cluster", f"cluster walltime {_show(value)} is not a time limit",
                    "Give it as HH:MM:SS (HH:MM for lsf), e.g. \"02:00:00\".")
            elif key in ("queue", "account", "interface") and not _NAME.match(value):
                bad("cluster", f"cluster {key} {_show(value)} is not a name",
                    "Give the name the batch system knows, letters, digits and ._-@+ only.")
        elif want is list and (not isinstance(value, list) or not all(
                isinstance(v, str) and v.strip() and _safe_text(v) for v in value)):
            bad("cluster", f"cluster job_extra_directives {_show(value)} is not a list of "
                "one-line options", "Give e.g. [\"--gres=gpu:1\"], one option per entry.")
    if kind != "local":
        for key in ("cores", "memory"):
            if key not in c:
                bad("cluster", f"a {kind} cluster needs '{key}' (per job)",
                    f"Add \"{key}\": {json.dumps(_EXAMPLE[key])} to the cluster settings.")


# -- naming and opening --------------------------------------------------------------------
def describe(settings: dict) -> str:
    """The cluster a (valid) step names, in a few words for the log and the report."""
    scheduler = settings.get("scheduler")
    if _given(scheduler):
        scheme, host, port = parse_address(scheduler) or ("tcp", str(scheduler), 0)
        return f"dask scheduler {scheme}://{host}:{port}"
    c = cluster_settings(settings.get("cluster"))
    kind = c.get("kind")
    if kind == "local":
        n = c.get("n_workers") or settings.get("num_workers") or 2
        return f"dask LocalCluster, {n} worker(s)"
    parts = [f"{c.get('jobs', 1)} job(s)", f"{c.get('cores', '?')} core(s)", str(c.get("memory", "?"))]
    for key in ("walltime", "queue", "account"):
        if c.get(key):
            parts.append(f"{key} {c[key]}")
    return f"dask {_CLASSES.get(kind, kind)}: " + ", ".join(parts)


def _batch_cluster(c: dict, dashboard: bool = True):
    """A dask-jobqueue cluster (not yet scaled) from checked settings."""
    import dask_jobqueue

    kind = c["kind"]
    cls = getattr(dask_jobqueue, _CLASSES[kind])
    kw: dict[str, Any] = {"cores": c["cores"], "memory": c["memory"], "processes": c.get("processes", 1),
                          "python": sys.executable, "silence_logs": "error"}
    if not dashboard:
        kw["scheduler_options"] = {"dashboard": False}
    for key in ("walltime", "queue", "interface"):
        if c.get(key):
            kw[key] = c[key]
    if c.get("account"):
        kw["project" if kind == "lsf" else "account"] = c["account"]
    if c.get("job_extra_directives"):
        kw["job_extra_directives"] = list(c["job_extra_directives"])
    return cls(**kw)


def job_script(settings: dict) -> str:
    """The batch script a slurm / pbs / lsf cluster would submit for these settings.

    For the operator to read before a night on a shared cluster (and for
    the tests, where no batch system runs); nothing is submitted.
    """
    c = cluster_settings(settings.get("cluster"))
    cluster = _batch_cluster(c, dashboard=False)
    try:
        return cluster.job_script()
    finally:
        cluster.close()


@contextmanager
def open_target(settings: dict) -> Iterator[DaskTarget]:
    """The cluster a valid dask step names, started for the job when spacrq starts it.

    A cluster spacrq started (``local``, ``slurm`` …) is closed when the
    block leaves, whatever happened; a scheduler given by address is left
    running, it is someone else's.

    :raises ClusterError: it cannot be reached or started (one sentence with the fix).
    """
    label = describe(settings)
    scheduler = settings.get("scheduler")
    if _given(scheduler):
        scheme, host, port = parse_address(scheduler)
        yield DaskTarget(f"{scheme}://{host}:{port}", label, "scheduler")
        return
    c = cluster_settings(settings.get("cluster"))
    kind = c["kind"]
    try:
        if kind == "local":
            from distributed import LocalCluster
            n = c.get("n_workers") or settings.get("num_workers") or 2
            cluster = LocalCluster(n_workers=n, threads_per_worker=c.get("threads_per_worker", 1),
                                   processes=True, dashboard_address=None, silence_logs=40)
        else:
            cluster = _batch_cluster(c)
            cluster.scale(jobs=c.get("jobs", 1))
    except ImportError:
        raise ClusterError(f"a {kind} dask cluster needs the dask extra; install it with "
                           f"{INSTALL}") from None
    except Exception as exc:  # noqa: BLE001 - the batch system's own refusal, said in one line
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:200]
        submit = f" (is {_SUBMIT[kind]} on this machine's PATH?)" if kind in _SUBMIT else ""
        raise ClusterError(f"the {label} could not be started: {reason}{submit}; check the "
                           "'cluster' settings") from None
    try:
        yield DaskTarget(cluster, label, kind, {"scheduler": getattr(cluster, "scheduler_address", "")})
    finally:
        try:
            cluster.close()
        except Exception:  # noqa: BLE001 - a cluster that fails to close is gone anyway
            pass


@contextmanager
def executor_for(settings: dict, executor: str | None = None) -> Iterator[tuple[str, Any]]:
    """``(executor, dask_cluster)`` for ``run_blockwise``, the cluster open while the block runs.

    ``executor`` overrides the step's own (``spacrq blockwise run --executor``).
    """
    chosen = executor or settings.get("executor") or "local"
    if chosen != "dask":
        yield chosen, None
        return
    with open_target(settings) as target:
        yield "dask", target
