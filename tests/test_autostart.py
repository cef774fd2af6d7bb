"""A night that survives a reboot: marked queues resumed by the per-user autostart."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import sys
from pathlib import Path

import psutil
import pytest

from hostile import HOSTILE
from spacrq import autostart as au
from spacrq.cli import main as cli_main
from spacrq.procs import module_argv
from spacrq.queue.model import Job, Queue
from spacrq.queue.runner import runner_state, start_runner
from spacrq.queue.store import load_queue, logs_dir, save_queue
from spacrq.runfiles import write_json
from waiting import wait_until  # tests/waiting.py (tests/ is on the path)

DEADLINE = 60.0


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh home: marks, autostart files and the log land under it."""
    home = tmp_path / "home"
    home.mkdir()
    for name in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    return home


def make_queue(folder: Path, *jobs: Job, notify: list[str] | None = None) -> Path:
    queue = Queue(name="night", notify_command=list(notify or []))
    for job in jobs:
        queue.add(job, validate=False)
    path = folder / "night.queue.json"
    save_queue(queue, path)
    return path


def py(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


# ---- the marks -------------------------------------------------------------------------------

def test_marks_are_kept_per_user_in_order(home, tmp_path):
    a = make_queue(tmp_path, Job(module="command", id="a", settings={"argv": py("pass")}))
    other = tmp_path / "b"
    other.mkdir()
    b = make_queue(other, Job(module="command", id="b", settings={"argv": py("pass")}))
    assert au.mark(a) == a.resolve()
    au.mark(b)
    au.mark(a)  # twice is once
    assert au.marked() == [a.resolve(), b.resolve()]
    assert (home / ".local" / "state" / "spacrq" / au.MARKS_FILE).is_file()
    assert au.unmark(a) and not au.unmark(a)
    assert au.marked() == [b.resolve()]


def test_only_a_queue_can_be_marked(home, tmp_path):
    with pytest.raises(au.AutostartError, match="no queue file"):
        au.mark(tmp_path / "missing.queue.json")
    bad = tmp_path / "bad.queue.json"
    bad.write_text("{not json")
    with pytest.raises(au.AutostartError, match="not a queue spacrq can resume"):
        au.mark(bad)
    assert au.marked() == []


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_garbled_marks_file_is_one_sentence(home, name, capsys):
    path = home / ".local" / "state" / "spacrq" / au.MARKS_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(HOSTILE[name])
    if not HOSTILE[name].strip():  # an empty file marks nothing, like a missing one
        assert au.marked() == [] and path.read_bytes() == HOSTILE[name]
        return
    with pytest.raises(au.AutostartError) as info:
        au.marked()
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert cli_main(["autostart", "run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert path.read_bytes() == HOSTILE[name]


# ---- the autostart files ---------------------------------------------------------------------

def test_the_autostart_runs_exactly_spacrq_autostart_run():
    assert au.autostart_argv() == module_argv("spacrq", "autostart", "run", "--wait", "120")
    assert f"ExecStart={sys.executable} -m spacrq autostart run --wait 120\n" in au.unit_text()
    assert f"Exec={sys.executable} -m spacrq autostart run --wait 120\n" in au.entry_text()


def test_the_unit_never_stops_the_runners_it_started():
    """A oneshot unit that ends takes its processes with it unless told otherwise."""
    text = au.unit_text()
    assert "RemainAfterExit=yes\n" in text and "KillMode=process\n" in text
    timeout = int(text.split("TimeoutStartSec=")[1].split()[0])
    assert timeout > au.BOOT_WAIT  # waiting for a late share is not cut short


def test_unit_quotes_what_systemd_would_expand():
    text = au.unit_text(["/opt/my lab/spacrq", "50%", "$HOME"])
    assert 'ExecStart="/opt/my lab/spacrq" 50%% $$HOME\n' in text


def verify_unit(path: Path) -> subprocess.CompletedProcess | None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return None
    return subprocess.run([tool, "verify", str(path)], capture_output=True, text=True, timeout=60)


def test_unit_and_entry_are_valid(tmp_path):
    unit = tmp_path / au.UNIT_NAME
    unit.write_text(au.unit_text())
    checked = verify_unit(unit)
    if checked is not None:  # systemd-analyze is there: it must accept the unit without a word
        assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr
        broken = tmp_path / "broken.service"
        broken.write_text(au.unit_text().replace("Type=oneshot", "Type=nonsense"))
        assert "nonsense" in verify_unit(broken).stderr  # the check does check
    entry = tmp_path / au.ENTRY_NAME
    entry.write_text(au.entry_text(["/opt/my lab/spacrq", "autostart", "run"]))
    tool = shutil.which("desktop-file-validate")
    if tool is None:
        pytest.fail("desktop-file-validate is missing: apt-get install -y desktop-file-utils")
    proc = subprocess.run([tool, str(entry)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_install_and_remove_the_xdg_entry(home):
    target, notes = au.install(use_systemd=False)
    assert target == home / ".config" / "autostart" / au.ENTRY_NAME
    assert target.read_text() == au.entry_text() and notes == []
    assert au.installed() == [target]
    assert au.remove() == [target] and au.installed() == []


def test_install_the_user_unit_where_systemd_runs(home, monkeypatch):
    calls = []
    monkeypatch.setattr(au, "_systemctl", lambda *args: calls.append(args) or "")
    target, notes = au.install(use_systemd=True)
    assert target == home / ".config" / "systemd" / "user" / au.UNIT_NAME
    assert target.read_text() == au.unit_text()
    assert calls == [("daemon-reload",), ("enable", au.UNIT_NAME)]
    assert any("enable-linger" in note for note in notes)
    monkeypatch.setattr(au, "has_systemd", lambda: True)
    assert au.remove() == [target] and calls[-1] == ("disable", au.UNIT_NAME)


def test_install_never_writes_through_a_link(home, tmp_path, monkeypatch, capsys):
    folder = home / ".config" / "autostart"
    folder.mkdir(parents=True)
    elsewhere = tmp_path / "other.desktop"
    elsewhere.write_text("keep me")
    (folder / au.ENTRY_NAME).symlink_to(elsewhere)
    monkeypatch.setattr(au, "has_systemd", lambda: False)
    assert cli_main(["autostart", "install"]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert elsewhere.read_text() == "keep me"


# ---- what the autostart runs -----------------------------------------------------------------

def kill_as_a_reboot_would(path: Path) -> None:
    """SIGKILL the runner and everything it started, at once, with no chance to write anything."""
    state = runner_state(path)
    runner = psutil.Process(state["pid"])
    doomed = [runner, *runner.children(recursive=True)]
    if state.get("keeper"):  # the runner's keeper dies with the machine too, first
        doomed.insert(0, psutil.Process(state["keeper"]))
    job = (load_queue(path).find("long").process or {}).get("pid")
    if job:
        try:
            doomed.append(psutil.Process(job))
        except psutil.NoSuchProcess:
            pass
    for proc in doomed:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(doomed, timeout=10)


def test_a_marked_queue_is_resumed_after_its_runner_died_with_the_machine(home, tmp_path):
    """The reboot test: kill the runner as a power cut would, run exactly what the autostart runs."""
    marker = tmp_path / "long-started-once"
    told = tmp_path / "notified.jsonl"
    long_job = ("import os, sys, time\n"
                "first = not os.path.exists(sys.argv[1])\n"
                "open(sys.argv[1], 'a').close()\n"
                "time.sleep(120 if first else 0)\n")
    tell = ("import json, os, sys\n"
            "open(sys.argv[1], 'a').write(json.dumps({k: os.environ.get(k) for k in "
            "('SPACRQ_QUEUE_STATE', 'SPACRQ_QUEUE_SUMMARY')}) + '\\n')\n")
    path = make_queue(tmp_path,
                      Job(module="command", id="first", settings={"argv": py("print('ok')")}),
                      Job(module="command", id="long", settings={"argv": py(long_job, str(marker))}),
                      Job(module="command", id="after", settings={"argv": py("print('after')")},
                          depends_on=["long"]),
                      notify=py(tell, str(told)))
    assert cli_main(["autostart", "add", str(path)]) == 0
    assert au.installed()  # marking a queue puts the autostart in place
    start_runner(path)
    wait_until(lambda: marker.exists() and load_queue(path).find("long").status == "running",
             timeout=DEADLINE, what="the long job to start")
    kill_as_a_reboot_would(path)
    assert runner_state(path)["state"] == "crashed"

    # the same boot: the runner died, but not with the machine — left for the operator
    same = subprocess.run(au.autostart_argv(), capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HOME=str(home)))
    assert same.returncode == 0 and "died on this boot, not with the machine" in same.stdout
    assert runner_state(path)["state"] == "crashed"
    # the machine started again after the runner did (as after a reboot)
    proc = subprocess.run(au.autostart_argv(), capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HOME=str(home), SPACRQ_BOOTED_AT=str(time.time())))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("resumed as process ")
    wait_until(lambda: (runner_state(path) or {}).get("state") == "finished",
             timeout=DEADLINE, what="the resumed queue to finish")
    wait_until(lambda: not runner_state(path)["alive"], DEADLINE, what="the resumed runner to exit")
    queue = load_queue(path)
    assert [j.status for j in queue.jobs] == ["success", "success", "success"]
    assert queue.find("first").attempts == 1  # nothing finished is redone
    states = [json.loads(line)["SPACRQ_QUEUE_STATE"] for line in told.read_text().splitlines()]
    assert states == ["resumed", "finished"]
    log = home / ".local" / "state" / "spacrq" / au.LOG_FILE
    assert f"resumed {path.resolve()}" in log.read_text()
    # the machine comes up again: nothing is left to resume, nothing runs twice
    again = au.resume_marked(notify=False)
    assert [o.action for o in again] == ["left"] and "finished" in again[0].reason


def test_queues_that_did_not_die_with_the_machine_are_left(home, tmp_path):
    finished = tmp_path / "done"
    finished.mkdir()
    done = make_queue(finished, Job(module="command", id="a", settings={"argv": py("pass")}))
    assert subprocess.run(module_argv("spacrq", "queue", "run", str(done)), capture_output=True,
                          timeout=120).returncode == 0
    other = tmp_path / "other-host"
    other.mkdir()
    elsewhere = make_queue(other, Job(module="command", id="a", settings={"argv": py("pass")}))
    write_json(logs_dir(elsewhere) / "runner.json",
               {"pid": 999999, "started": 1.0, "host": "another-machine", "state": "running"})
    never = tmp_path / "never"
    never.mkdir()
    fresh = make_queue(never, Job(module="command", id="a", settings={"argv": py("pass")}))
    gone = tmp_path / "gone"
    gone.mkdir()
    vanished = make_queue(gone, Job(module="command", id="a", settings={"argv": py("pass")}))
    for queue in (done, elsewhere, fresh, vanished):
        au.mark(queue)
    vanished.unlink()
    outcomes = {o.queue: o for o in au.resume_marked(notify=False)}
    assert outcomes[done.resolve()].action == "left"
    assert "another-machine" in outcomes[elsewhere.resolve()].reason
    assert outcomes[fresh.resolve()].reason == "it never ran"
    assert outcomes[vanished.resolve()].action == "refused"
    assert all(not (runner_state(q) or {}).get("alive") for q in (done, elsewhere, fresh))
    assert cli_main(["autostart", "run", "--no-notify"]) == 1  # a refused queue is worth an exit 1


def test_autostart_commands_answer_bad_input_in_a_sentence(home, tmp_path, capsys):
    assert cli_main(["autostart", "run"]) == 0
    assert "no queue is marked" in capsys.readouterr().out
    assert cli_main(["autostart", "add", str(tmp_path / "nope.queue.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no queue file" in err
    assert cli_main(["autostart"]) == 2
    assert cli_main(["autostart", "list"]) == 0
    assert "not installed" in capsys.readouterr().out


def test_without_home_the_autostart_says_so(monkeypatch, capsys):
    for name in ("HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert cli_main(["autostart", "run"]) == 2
    assert "HOME is not set" in capsys.readouterr().err


def test_the_autostart_waits_for_a_share_mounted_late(home, tmp_path, monkeypatch):
    path = make_queue(tmp_path, Job(module="command", id="a", settings={"argv": py("pass")}))
    au.mark(path)
    hidden = path.with_suffix(".away")
    path.rename(hidden)
    naps = []

    def nap(seconds):  # the share mounts during the first nap
        naps.append(seconds)
        if hidden.exists():
            hidden.rename(path)

    monkeypatch.setattr(au.time, "sleep", nap)
    outcomes = au.resume_marked(notify=False, wait=60)
    assert naps and [o.reason for o in outcomes] == ["it never ran"]  # found, not "gone"
    path.rename(hidden)
    assert [o.action for o in au.resume_marked(notify=False)] == ["refused"]  # no wait: gone


def test_damaged_marks_are_said_where_an_unattended_start_can_be_read(home, monkeypatch):
    """`autostart run` at login with a damaged marks file said it on stderr alone: nobody
    sees that at login, and the night silently did not resume."""
    marks = au._marks_path()
    marks.parent.mkdir(parents=True, exist_ok=True)
    marks.write_text("garbage")
    with pytest.raises(au.AutostartError):
        au.resume_marked(notify=False)
    log = (au.state_dir() / au.LOG_FILE).read_text()
    assert "refused:" in log and "delete it and mark the queues again" in log
