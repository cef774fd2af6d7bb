"""A night that survives a reboot: marked queues are resumed when the machine comes back.

After a power cut at 2 a.m. a queue's runner is gone and its jobs wait for
someone to press Resume in the morning.  An operator who wants the night to
go on marks the queue ("resume after a reboot"); spacrq installs one per-user
autostart (a systemd user unit where systemd runs, else an XDG autostart
entry) that runs ``spacrq autostart run``, which resumes — exactly as
``spacrq queue resume FILE --detach`` does — every marked queue whose runner
died with the machine, and notifies that it did.

The marks are a per-user list (``$XDG_STATE_HOME/spacrq/resume-after-reboot.json``),
not a field of the queue file: the autostart must find every marked queue
at boot without scanning disks for workspaces, the queue file stays exactly
spaCR's format plus the queue's own fields, and marking a queue never races
its runner rewriting the file.

Only a queue whose runner was *running* when it vanished, on this host, is
resumed: a queue that finished, was stopped or aborted by someone, or is run
by another machine from a shared folder is left alone.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping

from spacrq.desktop import DesktopError, desktop_exec
from spacrq.procs import booted_at, module_argv
from spacrq.runfiles import RunFileError, append_text, read_json, refuse_link, write_json, write_text

__all__ = ["AutostartError", "Resumed", "mark", "unmark", "marked", "install", "remove",
           "installed", "resume_marked", "autostart_argv", "unit_text", "entry_text",
           "UNIT_NAME", "ENTRY_NAME"]

UNIT_NAME = "spacrq-resume.service"
ENTRY_NAME = "spacrq-resume.desktop"
MARKS_FILE = "resume-after-reboot.json"
LOG_FILE = "autostart.log"


class AutostartError(Exception):
    """Something the operator must fix; the message is one sentence naming the fix."""


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME", "")
    if not home:
        raise AutostartError("HOME is not set, and the autostart lives in the home folder; "
                             "set HOME to your home folder and try again")
    return Path(home)


def _xdg(env: Mapping[str, str], name: str, fallback: str) -> Path:
    value = env.get(name, "")
    return Path(value) if value and os.path.isabs(value) else _home(env) / fallback


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    return _xdg(os.environ if env is None else env, "XDG_STATE_HOME", ".local/state") / "spacrq"


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    return _xdg(os.environ if env is None else env, "XDG_CONFIG_HOME", ".config")


def unit_path(env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / "systemd" / "user" / UNIT_NAME


def entry_path(env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / "autostart" / ENTRY_NAME


# ---- the marks -------------------------------------------------------------------------------

def _marks_path(env: Mapping[str, str] | None = None) -> Path:
    return state_dir(env) / MARKS_FILE


def marked(env: Mapping[str, str] | None = None) -> list[Path]:
    """The queues marked "resume after a reboot", in the order they were marked."""
    path = _marks_path(env)
    try:
        doc = read_json(path, default={"queues": []}, expect=dict)
    except RunFileError as exc:
        raise AutostartError(f"{exc}; delete it and mark the queues again") from None
    queues = doc.get("queues")
    if not isinstance(queues, list) or not all(isinstance(q, str) for q in queues):
        raise AutostartError(f"{path} must hold a list of queue files under 'queues'; "
                             "delete it and mark the queues again")
    return [Path(q) for q in queues]


def _write_marks(queues: list[Path], env: Mapping[str, str] | None) -> None:
    write_json(_marks_path(env), {"queues": [str(q) for q in queues]}, indent=2)


@contextmanager
def _marks_lock(env: Mapping[str, str] | None):
    """Hold the marks' lock: two ``autostart add`` at once must each keep their mark.

    Marking reads the list, adds one and replaces the file; without the lock
    the second writer would replace the first one's list and drop its mark.
    """
    lock = _marks_path(env).with_suffix(".lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        raise AutostartError(f"could not lock {lock}: {exc.strerror or exc}; check that the "
                             "folder is yours and writable") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def mark(queue_file: str | os.PathLike, env: Mapping[str, str] | None = None) -> Path:
    """Mark ``queue_file`` to be resumed after a reboot; returns its absolute path."""
    path = Path(queue_file).expanduser().resolve()
    if not path.is_file():
        raise AutostartError(f"there is no queue file {path}; give the path of a *.queue.json")
    from spacrq.queue.store import load_queue
    from spacrq.queue.model import QueueError
    try:
        load_queue(path)
    except (QueueError, RunFileError) as exc:
        raise AutostartError(f"{path} is not a queue spacrq can resume ({exc})") from None
    with _marks_lock(env):
        queues = marked(env)
        if path not in queues:
            _write_marks([*queues, path], env)
    return path


def unmark(queue_file: str | os.PathLike, env: Mapping[str, str] | None = None) -> bool:
    """Forget the mark of ``queue_file``; False when it was not marked."""
    path = Path(queue_file).expanduser().resolve()
    with _marks_lock(env):
        queues = marked(env)
        if path not in queues:
            return False
        _write_marks([q for q in queues if q != path], env)
    return True


# ---- the autostart files ---------------------------------------------------------------------

#: seconds the autostart waits for marked queue files to appear (a lab share mounted late at boot)
BOOT_WAIT = 120


def autostart_argv() -> list[str]:
    """Exactly the command the autostart runs."""
    return module_argv("spacrq", "autostart", "run", "--wait", str(BOOT_WAIT))


def _systemd_quote(arg: str) -> str:
    """One ExecStart argument: specifiers (%) and variables ($) are never expanded."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in arg):
        # a line break would end ExecStart= and start a directive of its own choosing
        raise AutostartError(f"the program path {arg!r} holds a line break or control character, "
                             "which a systemd unit cannot hold; install spacrq in a folder "
                             "whose path has none")
    text = arg.replace("%", "%%").replace("$", "$$")
    if text and not any(c in text for c in " \t\"'\\;"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unit_text(argv: list[str] | None = None) -> str:
    argv = autostart_argv() if argv is None else argv
    return ("[Unit]\n"
            "Description=spacrq: resume the queues marked to resume after a reboot\n"
            "\n"
            "[Service]\n"
            "Type=oneshot\n"
            f"ExecStart={' '.join(_systemd_quote(a) for a in argv)}\n"
            # the runners it starts live on after it exits: never stop them with the unit
            "RemainAfterExit=yes\n"
            "KillMode=process\n"
            f"TimeoutStartSec={BOOT_WAIT + 180}\n\n"
            "[Install]\n"
            "WantedBy=default.target\n")


def entry_text(argv: list[str] | None = None) -> str:
    argv = autostart_argv() if argv is None else argv
    return ("[Desktop Entry]\n"
            "Type=Application\n"
            "Name=spacrq: resume after a reboot\n"
            "Comment=Resume the spacrq queues marked to resume after a reboot\n"
            f"Exec={desktop_exec(argv)}\n"
            "Icon=spacrq\n"
            "Terminal=false\n"
            "NoDisplay=true\n"
            "X-GNOME-Autostart-enabled=true\n")


def has_systemd() -> bool:
    """systemd runs this machine (PID 1) and ``systemctl`` is there to enable a user unit."""
    return os.path.isdir("/run/systemd/system") and shutil.which("systemctl") is not None


def _systemctl(*args: str) -> str:
    """Run ``systemctl --user ARGS``; a note when it did not work (never fatal)."""
    try:
        proc = subprocess.run(["systemctl", "--user", *args], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"systemctl --user {' '.join(args)} did not run ({exc})"
    if proc.returncode:
        return (f"systemctl --user {' '.join(args)} failed: "
                f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:] or ['no output']}")
    return ""


def installed(env: Mapping[str, str] | None = None) -> list[Path]:
    """The autostart files spacrq has put in place (unit and/or entry)."""
    return [p for p in (unit_path(env), entry_path(env)) if p.is_file()]


def install(env: Mapping[str, str] | None = None, *, use_systemd: bool | None = None) -> tuple[Path, list[str]]:
    """Put the autostart in place; returns its file and notes for the operator."""
    systemd = has_systemd() if use_systemd is None else use_systemd
    notes: list[str] = []
    target = unit_path(env) if systemd else entry_path(env)
    refuse_link(target, "autostart file", "remove the link, and spacrq writes a file of its own there")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        text = unit_text() if systemd else entry_text()
    except DesktopError as exc:
        raise AutostartError(str(exc)) from None
    write_text(target, text)
    if systemd:
        for args in (("daemon-reload",), ("enable", UNIT_NAME)):
            note = _systemctl(*args)
            if note:
                notes.append(note)
        notes.append("a user unit starts when you log in; to resume at boot before anyone logs "
                     "in, run: loginctl enable-linger $USER")
    return target, notes


def remove(env: Mapping[str, str] | None = None) -> list[Path]:
    """Take the autostart away (both kinds, whichever are there); returns what was removed."""
    removed = []
    unit = unit_path(env)
    if unit.is_file() and has_systemd():
        _systemctl("disable", UNIT_NAME)
    for path in (unit, entry_path(env)):
        if path.is_file() or path.is_symlink():
            path.unlink()
            removed.append(path)
    return removed


# ---- what the autostart runs -----------------------------------------------------------------

@dataclass(frozen=True)
class Resumed:
    """What ``spacrq autostart run`` did with one marked queue."""

    queue: Path
    action: str   # "resumed", "left" (nothing to resume), "refused" (could not resume)
    reason: str
    pid: int = 0


def _log(line: str, env: Mapping[str, str] | None) -> None:
    try:
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        path = state_dir(env) / LOG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        append_text(path, f"{stamp} {line}\n")
    except (OSError, RunFileError, AutostartError):
        pass  # the log is a courtesy; the resume itself is what matters


def _notify_resumed(path: Path, pid: int) -> str:
    """Tell the operator, through the queue's own notify command (or notify-send when it has none)."""
    from spacrq.queue.ending import notify
    from spacrq.queue.store import load_queue
    from spacrq.queue.summary import QueueResult
    try:
        queue = load_queue(path)
    except Exception as exc:  # noqa: BLE001 — a notification never stops a resume
        return f"not notified: {exc}"
    if not queue.notify_command:
        sender = shutil.which("notify-send")
        if not sender:
            return ""
        queue.notify_command = [sender, "spacrq", f"{queue.name}: resumed after a reboot (process {pid})"]
    return notify(queue, QueueResult(queue=queue, path=str(path), state="resumed"))


def _interrupted(path: Path) -> str:
    """Why ``path`` should not be resumed; ``""`` when its runner died while running, here."""
    from spacrq.queue.runner import runner_state
    state = runner_state(path)
    if state is None:
        return "it never ran"
    if state.get("alive"):
        return f"its runner (process {state.get('pid')}) is running"
    if state.get("state") != "crashed":
        return f"its last run ended as {state.get('state') or 'unknown'}, not cut off"
    host = state.get("host")
    if host and host != socket.gethostname():
        return f"it was run by {host}, not this machine"
    started = state.get("started")
    booted = booted_at()
    if isinstance(started, (int, float)) and booted is not None and started > booted + 1:
        return ("its runner died on this boot, not with the machine (it started after the "
                f"machine did): find out why from its log, then resume it with "
                f"'spacrq queue resume {path}'")
    return ""


def _wait_for_files(paths: list[Path], seconds: float) -> None:
    """At boot a network share may mount after the autostart starts: give it ``seconds``."""
    deadline = time.monotonic() + max(0.0, seconds)
    while any(not p.is_file() for p in paths) and time.monotonic() < deadline:
        time.sleep(1.0)


def resume_marked(env: Mapping[str, str] | None = None, *, notify: bool = True,
                  wait: float = 0.0) -> list[Resumed]:
    """Resume every marked queue whose runner died with the machine (``spacrq autostart run``)."""
    from spacrq.queue.model import QueueError
    from spacrq.queue.runner import start_runner
    outcomes: list[Resumed] = []
    try:
        queues = marked(env)
    except AutostartError as exc:  # unattended at login: nobody reads stderr, so say it here
        _log(f"refused: {exc}", env)
        if notify and shutil.which("notify-send"):
            try:
                subprocess.run([shutil.which("notify-send"), "spacrq",
                                f"no queue was resumed after the reboot: {exc}"],
                               timeout=10, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except (OSError, subprocess.SubprocessError):
                pass
        raise
    _wait_for_files(queues, wait)
    for path in queues:
        if not path.is_file():
            outcomes.append(Resumed(path, "refused", "the queue file is gone; unmark it with "
                                    f"'spacrq autostart drop {path}'"))
            continue
        why_not = _interrupted(path)
        if why_not:
            outcomes.append(Resumed(path, "left", why_not))
            continue
        try:
            ref = start_runner(path, resume=True)
        except (QueueError, RunFileError, OSError) as exc:
            outcomes.append(Resumed(path, "refused", str(exc)))
            continue
        note = _notify_resumed(path, ref.pid) if notify else ""
        outcomes.append(Resumed(path, "resumed", note or "its runner died with the machine", ref.pid))
    for outcome in outcomes:
        _log(f"{outcome.action} {outcome.queue}: {outcome.reason}"
             + (f" (runner {outcome.pid})" if outcome.pid else ""), env)
    return outcomes
