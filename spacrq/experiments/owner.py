"""Who is running a run: the process behind a journal whose last word is "running".

A journal says what the run did, not whether anybody is still doing it.  For a
run spacrq started, ``spacrq-process.json`` names the process (pid and start
time) and settles it.  A run started elsewhere — plesty's own console, a
terminal, a script — leaves no such file, so the owner is looked for the way
an operator would look for it with ``ps``:

1. the ``pid`` the run journaled in its ``run_started`` line (spacrq's
   authoring base writes one; plesty-lib writes none, and no pid file either),
   checked against the process's start time so a reused pid is not taken for it;
2. a process whose command line names the run (its folder, or its id with the
   run root it runs under: ``--run-id ID`` / ``--resume ID`` and ``--run-root``),
   or that holds a file of the run folder open.

Only a process started before the run journaled its start can be its owner.
The answer is ``alive``, ``gone``, or ``unknown`` — the run journaled another
machine as its host, or the only candidate names the run root but not the run
(a run that named itself) — and an unknown owner is shown as *not responding*
with the age of the journal's last line, never as "running".

The process table is read at most once every :data:`SCAN_TTL` seconds for all
runs together, so a pane watching twenty runs started elsewhere costs one scan.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import psutil

__all__ = ["Owner", "owner_of", "SCAN_TTL", "forget_scan"]

#: Seconds a reading of the process table is reused.
SCAN_TTL = 2.0
#: Seconds of clock slack between a process's start time and the run's journaled start.
_SLACK = 2.0
_RUN_ID_FLAGS = ("--run-id", "--resume", "-r")


@dataclass(frozen=True)
class Owner:
    """What is known of the process running a run: ``verdict`` is alive, gone or unknown."""

    verdict: str
    pid: int | None = None
    how: str = ""


@dataclass(frozen=True)
class _Proc:
    """A process of one scan; what is worked out about it is kept for the scan's lifetime,
    so twenty runs asking about the same process table resolve each path once."""

    pid: int
    started: float
    cmdline: tuple[str, ...]
    _memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def cwd(self) -> str | None:
        """Its working folder, read the first time a relative path needs it."""
        if "\0cwd" not in self._memo:
            try:
                self._memo["\0cwd"] = psutil.Process(self.pid).cwd()
            except (psutil.Error, OSError):
                self._memo["\0cwd"] = None
        return self._memo["\0cwd"]

    def where(self, path: str) -> str | None:
        """``path`` of its command line as an absolute, resolved path (None: cannot say)."""
        if path not in self._memo:
            absolute = os.path.isabs(os.path.expanduser(path))
            self._memo[path] = _resolved(path, None if absolute else self.cwd)
        return self._memo[path]

    def paths(self) -> frozenset[str]:
        """The resolved paths its command line names (the arguments holding a ``/``)."""
        if "\0paths" not in self._memo:
            self._memo["\0paths"] = frozenset(
                where for arg in self.cmdline[1:] if not arg.startswith("-") and os.sep in arg
                for where in (self.where(arg),) if where is not None)
        return self._memo["\0paths"]

    def words(self) -> frozenset[str]:
        """Its command line's arguments that are not options (a bare run id among them)."""
        if "\0words" not in self._memo:
            self._memo["\0words"] = frozenset(a for a in self.cmdline[1:] if not a.startswith("-"))
        return self._memo["\0words"]

    def flag(self, names: tuple[str, ...]) -> str | None:
        """The value of the last of ``names`` on its command line (see :func:`_flag`)."""
        key = ("\0flag", names)
        if key not in self._memo:
            self._memo[key] = _flag(self.cmdline, names)
        return self._memo[key]

    def open_paths(self) -> tuple[str, ...]:
        """The files it holds open (read once per scan)."""
        if "\0open" not in self._memo:
            try:
                files = tuple(f.path for f in psutil.Process(self.pid).open_files())
            except (psutil.Error, OSError):
                files = ()
            self._memo["\0open"] = files
        return self._memo["\0open"]


_lock = threading.Lock()
_scan: tuple[float, list[_Proc]] | None = None
_verdicts: dict[tuple[str, float | None], tuple[float, "Owner"]] = {}


def forget_scan() -> None:
    """Drop the cached process table and verdicts (the next question reads afresh)."""
    global _scan
    with _lock:
        _scan = None
        _verdicts.clear()


def _processes() -> list[_Proc]:
    global _scan
    now = time.monotonic()
    with _lock:
        if _scan is not None and now - _scan[0] < SCAN_TTL:
            return _scan[1]
    me = os.getpid()
    found: list[_Proc] = []
    for proc in psutil.process_iter(["pid", "create_time", "cmdline"]):
        info = proc.info
        cmdline = info.get("cmdline") or []
        if info["pid"] == me or not cmdline:
            continue
        found.append(_Proc(info["pid"], float(info.get("create_time") or 0.0),
                           tuple(str(a) for a in cmdline)))
    with _lock:
        _scan = (time.monotonic(), found)
    return found


def _resolved(path: str, cwd: str | None) -> str | None:
    p = os.path.expanduser(path)
    if not os.path.isabs(p):
        if cwd is None:
            return None
        p = os.path.join(cwd, p)
    try:
        return os.path.realpath(p)
    except (OSError, ValueError):
        return None


def _flag(cmdline: tuple[str, ...], names: tuple[str, ...]) -> str | None:
    """The value of the last of ``names`` on a command line (``--x V`` or ``--x=V``)."""
    value = None
    for i, arg in enumerate(cmdline):
        for name in names:
            if arg == name and i + 1 < len(cmdline):
                value = cmdline[i + 1]
            elif name.startswith("--") and arg.startswith(name + "="):
                value = arg[len(name) + 1:]
    return value


def _names_run(proc: _Proc, run_dir: str, root: str) -> str:
    """``"run"`` when the command line names this run, ``"root"`` when only its run root
    (``run_dir`` and ``root`` resolved paths)."""
    name = os.path.basename(run_dir)
    if run_dir in proc.paths() or (name in proc.words() and proc.where(name) == run_dir):
        return "run"
    run_root = proc.flag(("--run-root",))
    rid = proc.flag(_RUN_ID_FLAGS)
    if rid != name and (run_root is None or rid is not None):
        return ""  # names neither this run nor only a run root: nothing to resolve
    under = proc.where(run_root if run_root is not None else "runs")
    if rid == name and (run_root is None or under in (root, None)):
        return "run"  # without --run-root the module's own default root applies
    if run_root is not None and under == root and rid is None:
        return "root"
    return ""


def _holds_open(proc: _Proc, run_dir: str) -> bool:
    prefix = run_dir + os.sep
    return any(path.startswith(prefix) for path in proc.open_paths())


def _journaled_pid(start: Mapping[str, Any], start_at: float | None) -> Owner | None:
    pid = start.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None
    try:
        proc = psutil.Process(pid)
        alive = proc.status() != psutil.STATUS_ZOMBIE and (
            start_at is None or proc.create_time() <= start_at + _SLACK)
    except (psutil.Error, OSError):
        alive = False
    if alive:
        return Owner("alive", pid, f"pid {pid}, journaled when the run started")
    return Owner("gone", pid, f"pid {pid}, journaled when the run started, is gone")


def owner_of(run_dir: str | os.PathLike, start: Mapping[str, Any] | None,
             start_at: float | None) -> Owner:
    """The owner of a run that spacrq did not start, found without a pid file.

    :param start: the run's last ``run_started`` event (``pid``, ``provenance.host``).
    :param start_at: when it was journaled (epoch seconds), if known.
    """
    key = (os.fspath(run_dir), start_at)
    now = time.monotonic()
    with _lock:
        cached = _verdicts.get(key)
    if cached is not None and now - cached[0] < SCAN_TTL:
        return cached[1]
    owner = _decide(os.path.realpath(run_dir), start or {}, start_at)
    with _lock:
        if len(_verdicts) > 1000:
            _verdicts.clear()
        _verdicts[key] = (now, owner)
    return owner


def _decide(here: str, start: Mapping[str, Any], start_at: float | None) -> Owner:
    provenance = start.get("provenance")
    host = provenance.get("host") if isinstance(provenance, Mapping) else None
    if isinstance(host, str) and host and host != socket.gethostname():
        return Owner("unknown", None, f"it runs on {host}, whose processes this machine "
                                      "cannot see")
    journaled = _journaled_pid(start, start_at)
    if journaled is not None:
        return journaled
    root = os.path.dirname(here)
    maybe: _Proc | None = None
    others: list[_Proc] = []
    for proc in _processes():
        if start_at is not None and proc.started > start_at + _SLACK:
            continue  # started after the run did: not the process that started it
        named = _names_run(proc, here, root)
        if named == "run":
            if psutil.pid_exists(proc.pid):
                return Owner("alive", proc.pid, f"pid {proc.pid}, whose command line names it")
        elif named == "root":
            maybe = maybe or proc
        else:
            others.append(proc)
    for proc in others:
        if proc.cmdline and "python" in os.path.basename(proc.cmdline[0]) and \
                _holds_open(proc, here):
            return Owner("alive", proc.pid, f"pid {proc.pid}, which holds its files open")
    if maybe is not None and psutil.pid_exists(maybe.pid):
        return Owner("unknown", maybe.pid, f"pid {maybe.pid} runs experiments into the same "
                                           "folder but does not say which run")
    return Owner("gone", None, "no process on this machine names it or holds its files")
