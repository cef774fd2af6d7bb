"""Editing a waiting job in place: checked like Add, refused when it ran, taken in by a runner."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from spacrq.queue import Job, Queue, load_queue, run_queue, save_queue
from spacrq.queue.edits import (EditInvalid, EditMissing, EditRefused, edit_job, take_edits)
from spacrq.queue.persist import QueueWriter
from spacrq.queue.runner import start_runner
from spacrq.queue.store import edit_lock, edit_queue, logs_dir
from spacrq.watching import Code
from waiting import reap, wait_until  # tests/waiting.py (tests/ is on the path)


def _cmd(jid, argv=("true",), **kw):
    return Job(module="command", id=jid, settings={"argv": list(argv)}, **kw)


def _queue(tmp_path, *jobs, statuses=()):
    queue = Queue(name="night", max_consecutive_failures=0)
    for job in jobs or (_cmd("a"), _cmd("b"), _cmd("c")):
        queue.add(job)
    for job, status in zip(queue.jobs, statuses):
        job.status = status
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    return path


def test_a_pending_job_takes_every_edited_field_and_keeps_its_place(tmp_path):
    path = _queue(tmp_path)
    job = edit_job(path, "c", {"settings": {"argv": ["echo", "hi"]}, "overrides": ["cwd=/tmp"],
                               "after": ["a", "b"], "timeout": 90, "label": "say hi"})
    assert job.id == "c"
    saved = load_queue(path)
    assert saved.ids == ["a", "b", "c"]
    c = saved.find("c")
    assert c.settings == {"argv": ["echo", "hi"]} and c.override_args == ["cwd=/tmp"]
    assert c.depends_on == ["a", "b"] and c.timeout == 90.0 and c.label == "say hi"
    assert saved.find("a").settings == {"argv": ["true"]}  # the others untouched


def test_keys_left_out_keep_their_values_and_an_empty_label_is_made_up(tmp_path):
    path = _queue(tmp_path, _cmd("a"), _cmd("b", timeout=30.0, label="mine"))
    edit_job(path, "b", {"label": ""})
    b = load_queue(path).find("b")
    assert b.timeout == 30.0 and b.settings == {"argv": ["true"]}
    assert b.label == b.default_label() and b.label


def test_a_not_run_job_can_be_edited(tmp_path):
    path = _queue(tmp_path, statuses=("success", "not_run"))
    edit_job(path, "b", {"timeout": 5})
    assert load_queue(path).find("b").timeout == 5.0


@pytest.mark.parametrize("status", ["running", "success", "failed", "skipped"])
def test_a_running_or_finished_job_is_refused_and_nothing_is_written(tmp_path, status):
    path = _queue(tmp_path, statuses=(status,))
    before = path.read_bytes()
    with pytest.raises(EditRefused) as caught:
        edit_job(path, "a", {"label": "x"})
    assert caught.value.code is Code.REFUSED
    # (running with no runner: one that died left it; resume, not duplicate, is the way on)
    fix = "queue resume" if status == "running" else "duplicate"
    assert "Not changed" in str(caught.value) and fix in str(caught.value)
    assert path.read_bytes() == before


def test_an_unknown_job_or_file_is_missing(tmp_path):
    path = _queue(tmp_path)
    with pytest.raises(EditMissing) as caught:
        edit_job(path, "nope", {"label": "x"})
    assert caught.value.code is Code.MISSING
    with pytest.raises(EditMissing):
        edit_job(tmp_path / "gone.queue.json", "a", {"label": "x"})


@pytest.mark.parametrize("changes", [
    {"after": ["c"]},                      # a later job: it would always be skipped
    {"after": ["nobody"]},                 # not a job of this queue
    {"after": ["b"]},                      # itself
    {"overrides": ["no_such_setting=1"]},  # the module has no such setting
    {"overrides": ["novalue"]},            # not key=value
    {"settings": str(Path("/no/such/settings.csv"))},
    {"timeout": -3}, {"timeout": float("nan")}, {"timeout": "soon"},
    {"settings": 7}, {"label": 3}, {"module": "python"},
])
def test_a_bad_value_is_invalid_and_nothing_is_written(tmp_path, changes):
    path = _queue(tmp_path)
    before = path.read_bytes()
    with pytest.raises(EditInvalid) as caught:
        edit_job(path, "b", changes)
    assert caught.value.code is Code.INVALID and str(caught.value).startswith("Not changed: ")
    assert path.read_bytes() == before


def test_after_never_makes_a_cycle(tmp_path):
    # a hand-written file where a depends on b (a forward dependency); b after a closes a loop
    path = _queue(tmp_path, _cmd("a", depends_on=[]), _cmd("b"))
    doc = json.loads(path.read_text())
    doc["jobs"][0]["depends_on"] = ["b"]
    path.write_text(json.dumps(doc))
    with pytest.raises(EditInvalid, match="cycle"):
        edit_job(path, "b", {"after": ["a"]})
    assert load_queue(path).find("b").depends_on == []


def test_an_input_an_earlier_job_writes_is_a_warning_passed_back(tmp_path):
    out = tmp_path / "out"
    path = _queue(tmp_path, Job(module="command", id="a",
                                settings={"argv": ["true"], "writes": [str(out)]}), _cmd("b"))
    warnings: list[str] = []
    edit_job(path, "b", {"settings": {"argv": ["true"], "inputs": [str(out / "masks")]},
                         "after": ["a"]}, warnings=warnings)
    assert len(warnings) == 1 and "earlier job" in warnings[0]
    assert load_queue(path).find("b").depends_on == ["a"]


def test_an_edit_waits_for_the_lock_and_an_add_made_meanwhile_is_kept(tmp_path):
    path = _queue(tmp_path)
    errors: list[BaseException] = []

    def edit():
        try:
            edit_job(path, "b", {"label": "edited"})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with edit_lock(path):  # another writer is in the middle of an add
        editor = threading.Thread(target=edit)
        editor.start()
        queue = load_queue(path)
        queue.add(_cmd("late"))
        save_queue(queue, path)
    editor.join(30)
    assert not editor.is_alive() and not errors
    saved = load_queue(path)
    assert saved.ids == ["a", "b", "c", "late"] and saved.find("b").label == "edited"


EDITOR = """
import sys
from pathlib import Path
from spacrq.queue.edits import edit_job
path = sys.argv[1]
Path(sys.argv[2]).write_text("go")
i = 0
while True:
    i += 1
    edit_job(path, "b", {"label": f"edit {i}", "overrides": [f'argv=["echo", "{i}"]']})
"""


def test_a_sigkilled_edit_leaves_the_old_file_or_the_new_one_never_half(tmp_path):
    path = _queue(tmp_path, *[_cmd(f"j{i}") for i in range(60)], _cmd("b"))
    started = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", EDITOR, str(path), str(started)])
    try:
        wait_until(lambda: started.exists(), what="the editing process")
        wait_until(lambda: load_queue(path).find("b").label.startswith("edit "),
                   what="a first edit")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    saved = load_queue(path)  # parses: whole
    b = saved.find("b")
    n = b.label.split()[-1]
    assert len(saved.jobs) == 61 and b.override_args == [f'argv=["echo", "{n}"]']


# -- a runner picks an edit up -------------------------------------------------------

def _argv_ran(tmp_path, job_id):
    return json.loads((logs_dir(tmp_path / "night.queue.json")
                       / f"{job_id}.settings.json").read_text())["argv"]


@pytest.mark.parametrize("mode", ["file", "journal"])
def test_a_waiting_job_edited_while_the_queue_runs_runs_as_edited(tmp_path, mode):
    path = _queue(tmp_path, _cmd("a"), _cmd("b", ("echo", "old")), _cmd("c", ("echo", "old")))
    outcomes = {}

    def runner(job, settings_path, log_path):
        Path(log_path).write_text("working\n")
        if job.id == "a":
            edit_job(path, "c", {"settings": {"argv": ["echo", "new"]}, "label": "new c"})
            try:
                edit_job(path, "a", {"label": "too late"})
            except EditRefused as exc:
                outcomes["a"] = exc.code
        return 0

    queue = load_queue(path)
    run_queue(queue, path, runner=runner, persistence=mode)
    assert outcomes == {"a": Code.REFUSED}
    assert _argv_ran(tmp_path, "b") == ["echo", "old"]
    assert _argv_ran(tmp_path, "c") == ["echo", "new"]
    saved = load_queue(path)
    assert [j.status for j in saved.jobs] == ["success"] * 3
    assert saved.find("c").label == "new c" and saved.find("a").label != "too late"


def test_an_edit_before_the_runner_claims_a_job_reaches_it_and_after_is_refused(tmp_path):
    path = _queue(tmp_path)
    queue = load_queue(path)
    writer = QueueWriter(queue, path, durable=False, mode="file")
    try:
        writer.start()
        edit_job(path, "b", {"label": "in time"})
        writer.claim(queue.find("b"))
        assert queue.find("b").label == "in time"  # taken into the runner's memory
        with pytest.raises(EditRefused):
            edit_job(path, "b", {"label": "too late"})  # the journal says it is running
        assert load_queue(path).find("b").status == "running"
    finally:
        writer.close()


def test_take_edits_leaves_jobs_the_runner_ran_alone():
    mine = Queue(jobs=[_cmd("a", status="success"), _cmd("b"), _cmd("c", status="running")])
    theirs = Queue(jobs=[_cmd("a", ("x",)), _cmd("b", ("y",)), _cmd("c", ("z",))])
    changed = take_edits(mine, theirs)
    assert [j.id for j in changed] == ["b"]
    assert [j.settings["argv"] for j in mine.jobs] == [["true"], ["y"], ["true"]]



def test_the_detached_runner_runs_the_edited_job(tmp_path):
    path = _queue(tmp_path, _cmd("wait", ("sh", "-c", "touch started; while [ ! -e go ]; do "
                                          "sleep 0.02; done"), cwd=str(tmp_path)),
                  _cmd("next", ("touch", "old.ran"), cwd=str(tmp_path)))
    ref = start_runner(path)
    try:
        wait_until(lambda: (tmp_path / "started").exists(), what="the first job")
        edit_job(path, "next", {"settings": {"argv": ["touch", "new.ran"]}})
    finally:
        (tmp_path / "go").write_text("")
        reap(ref.pid)
    assert (tmp_path / "new.ran").exists() and not (tmp_path / "old.ran").exists()
    saved = load_queue(path)
    assert [j.status for j in saved.jobs] == ["success", "success"]
    assert saved.find("next").settings == {"argv": ["touch", "new.ran"]}


@pytest.mark.parametrize("writes", [False, True],
                         ids=["its-checks-before-its-claim", "its-checks-after-its-claim"])
def test_an_edit_never_waits_for_the_runner_checking_a_job(tmp_path, monkeypatch, writes):
    """Checking a job may wait (its inputs or program on a share that hangs); the edit lock
    is not held meanwhile, so an add goes through at once.  A job prepared while the one
    before it ran is checked before its claim, which then keeps the lock only from there
    to its start; one that is not (here: it has output folders, looked at in its turn) is
    claimed, the lock let go of, then checked."""
    from spacrq.modules import ModuleSpec
    from spacrq.queue.locks import EditLock

    b = Job(module="command", id="b", settings={"argv": ["true"], "writes": [str(
        tmp_path / "out")]}) if writes else _cmd("b", cwd=str(tmp_path))
    path = _queue(tmp_path, _cmd("a", ("sleep", "0.3")), b)
    checking, release = threading.Event(), threading.Event()
    real = ModuleSpec.check

    def slow_check(self, settings):
        # (only the runner's checks in b's turn: the queue's validation before it ran, too)
        if not checking.is_set() and settings.get("argv") == ["true"] \
                and any(logs_dir(path).glob("*_a.log")):
            checking.set()
            release.wait(30)
        return real(self, settings)

    monkeypatch.setattr(ModuleSpec, "check", slow_check)
    ran = threading.Thread(target=run_queue, args=(load_queue(path), path))
    ran.start()
    try:
        assert checking.wait(30)
        with EditLock(logs_dir(path), wait=2.0):  # refused after 2 s if the runner held it
            pass
        edit_queue(path, lambda queue: queue.add(_cmd("c")))  # `queue add` takes the same lock
    finally:
        release.set()
        ran.join(60)
    assert not ran.is_alive()
    assert [(j.id, j.status) for j in load_queue(path).jobs] == [
        ("a", "success"), ("b", "success"), ("c", "success")]


# -- adding to the file, as 'queue add' does -------------------------------------------

def test_add_job_adds_to_the_file_under_its_lock_and_says_a_runner_takes_it(tmp_path):
    from spacrq.queue.edits import add_job
    from spacrq.queue.locks import RunnerLock
    path = _queue(tmp_path)
    added, held = add_job(path, Job(module="command", settings={"argv": ["true"]}))
    assert not held and added.id == "command-1"
    assert load_queue(path).ids == ["a", "b", "c", "command-1"]
    runner = RunnerLock(logs_dir(path)).acquire()  # as a live runner holds it
    try:
        again, held = add_job(path, Job(module="command", settings={"argv": ["true"]}))
    finally:
        runner.release()
    assert held and load_queue(path).ids[-1] == again.id == "command-2"


def test_add_job_refuses_a_job_that_cannot_run_and_writes_nothing(tmp_path):
    from spacrq.queue.edits import add_job
    path = _queue(tmp_path)
    before = path.read_bytes()
    with pytest.raises(EditInvalid, match="Not added"):
        add_job(path, Job(module="command", settings={"argv": ["no-such-program-spacrq"]}))
    assert path.read_bytes() == before


def test_an_id_two_jobs_share_is_never_edited(tmp_path):
    """Duplicate ids (a hand-edited file): edit changed the first of them and said so."""
    import json
    path = _queue(tmp_path)
    doc = json.loads(path.read_text())
    doc["jobs"].append(dict(doc["jobs"][0], label="the other"))
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    with pytest.raises(EditInvalid, match="share the id"):
        edit_job(path, doc["jobs"][0]["id"], {"label": "x"})
    assert path.read_bytes() == before
