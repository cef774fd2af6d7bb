"""The copy in memory of a runner's state that the disk could not take (spacrq.queue.memcopy):
read by every reader of the queue, folded into the file once, never applied to another file."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spacrq.queue import Job, Queue, load_queue, memcopy, save_queue
from spacrq.queue.store import file_key, open_queue


@pytest.fixture(autouse=True)
def private_places(tmp_path, monkeypatch):
    """Each test its own place for copies (the garbage one test leaves is no other's)."""
    place = tmp_path / "memory"
    place.mkdir(mode=0o700)
    monkeypatch.setenv("SPACRQ_MEMORY_DIR", str(place))
    return place


def _night(tmp_path, n=3):
    queue = Queue(name="night", max_consecutive_failures=0)
    for i in range(n):
        queue.add(Job(module="command", id=f"j{i}", settings={"argv": ["true"]}))
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    return queue, path


def _ran(queue, done=("j0",), running=("j1",)):
    """The runner's state in memory: ``done`` ended well, ``running`` started."""
    for job in queue.jobs:
        if job.id in done or job.id in running:
            job.attempts, job.started = 1, f"2026-12-05T23:0{job.id[1]}:00+00:00"
            job.log_path = f"/logs/{job.id}.log"
        if job.id in done:
            job.status, job.exit_code = "success", 0
            job.finished = f"2026-12-05T23:0{job.id[1]}:30+00:00"
        elif job.id in running:
            job.status = "running"


def _on_disk(path):
    return [job["status"] for job in json.loads(Path(path).read_text())["jobs"]]


def test_a_state_saved_nowhere_is_read_from_memory_by_every_reader_and_folded_once(tmp_path):
    queue, path = _night(tmp_path)
    _ran(queue)
    where = memcopy.keep(queue, path, file_key(path))
    assert where and Path(where).parent == Path(os.environ["SPACRQ_MEMORY_DIR"])
    assert oct(os.stat(where).st_mode & 0o777) == "0o600"
    read = load_queue(path)  # (a reader: status, the pane)
    assert [j.status for j in read.jobs] == ["success", "running", "pending"]
    assert (read.jobs[0].exit_code, read.jobs[1].started) == (0, queue.jobs[1].started)
    assert any("read from a runner's copy of its state" in w for w in read.warnings)
    assert _on_disk(path) == ["pending"] * 3  # (reading writes nothing)
    opened = open_queue(path)  # (a command: no runner holds it, so it writes the file)
    assert [j.status for j in opened.jobs] == ["success", "running", "pending"]
    assert _on_disk(path) == ["success", "running", "pending"]
    assert not memcopy.exists(path)
    assert [j.status for j in open_queue(path).jobs] == ["success", "running", "pending"]


def test_a_copy_is_never_applied_to_a_file_written_since_by_anything_else(tmp_path):
    """A template copied over the file (the same ids, even the same ``created``): the copy of
    last night's state would mark tonight's jobs done. It is not applied, and the next
    command that writes the file removes it, saying so."""
    queue, path = _night(tmp_path)
    _ran(queue)
    memcopy.keep(queue, path, file_key(path))
    template = json.loads(path.read_text())
    path.unlink()
    path.write_text(json.dumps(template, indent=1))  # (cp template.queue.json night.queue.json)
    read = load_queue(path)
    assert [j.status for j in read.jobs] == ["pending"] * 3
    assert any("written since by something other than spacrq" in w for w in read.warnings)
    open_queue(path)
    assert not memcopy.exists(path)  # (not this file's: gone with the command that said so)
    assert _on_disk(path) == ["pending"] * 3


def test_a_copy_only_moves_a_job_forward(tmp_path):
    queue, path = _night(tmp_path)
    mine = load_queue(path)
    mine.jobs[0].status, mine.jobs[0].attempts = "success", 2  # (the file: attempt 2 ended)
    mine.jobs[1].status, mine.jobs[1].attempts = "running", 1
    mine.jobs[1].started = "2026-12-05T23:01:00+00:00"
    save_queue(mine, path)
    copy = load_queue(path)
    copy.jobs[0].status, copy.jobs[0].attempts = "running", 1  # behind: an older attempt
    copy.jobs[1].status, copy.jobs[1].started = "success", "2026-12-05T23:09:00+00:00"  # another start
    copy.jobs[2].status, copy.jobs[2].attempts = "failed", 1  # ahead
    copy.jobs[2].started = "2026-12-05T23:02:00+00:00"
    memcopy.keep(copy, path, file_key(path))
    read = load_queue(path)
    assert [(j.status, j.attempts) for j in read.jobs] == [("success", 2), ("running", 1),
                                                         ("failed", 1)]
    copy.jobs[1].started = mine.jobs[1].started  # the same attempt, further on: taken
    memcopy.keep(copy, path, file_key(path))
    assert load_queue(path).jobs[1].status == "success"


def _garbage(kind: str, target: Path, path: Path, queue: Queue) -> None:
    if kind == "bytes":
        target.write_bytes(os.urandom(3000))
    elif kind in ("list", "null", "nan"):
        target.write_text({"list": "[1, 2]", "null": "null", "nan": '{"jobs": NaN}'}[kind])
    elif kind == "types":
        memcopy.keep(queue, path, file_key(path))
        doc = json.loads(target.read_text())
        doc["jobs"][0]["set"]["status"] = "done-ish"
        target.write_text(json.dumps(doc))
    elif kind == "other file":
        memcopy.keep(queue, path, file_key(path))
        doc = json.loads(target.read_text())
        doc["identity"][1] += 1  # (another inode: another file of the same name)
        target.write_text(json.dumps(doc))
    elif kind == "deep":
        target.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "folder":
        target.mkdir()
    elif kind == "link":
        decoy = target.with_name("decoy.json")
        memcopy.keep(queue, path, file_key(path))
        os.replace(target, decoy)
        target.symlink_to(decoy)
    elif kind == "fifo":
        os.mkfifo(target)


@pytest.mark.parametrize("kind", ["bytes", "list", "null", "nan", "types", "other file", "deep",
                                  "folder", "link", "fifo"])
def test_garbage_in_the_copys_place_is_never_applied_nor_raised(tmp_path, kind):
    queue, path = _night(tmp_path)
    _ran(queue)
    target = memcopy.copy_path(path, queue.created, make=True)
    _garbage(kind, target, path, queue)
    read = load_queue(path)
    assert [j.status for j in read.jobs] == ["pending"] * 3
    assert len([w for w in read.warnings if "copy of a runner's state" in w]) == 1
    assert [j.status for j in open_queue(path).jobs] == ["pending"] * 3
    if kind == "link":
        assert target.with_name("decoy.json").exists()  # (the link went, not what it named)


def test_a_copy_is_kept_only_in_a_private_folder_of_the_users(tmp_path, monkeypatch):
    queue, path = _night(tmp_path)
    _ran(queue)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(private)
    monkeypatch.setenv("SPACRQ_MEMORY_DIR", str(link))
    assert memcopy.keep(queue, path, file_key(path)) == "" and not list(private.iterdir())
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    monkeypatch.setenv("SPACRQ_MEMORY_DIR", str(shared))
    assert memcopy.keep(queue, path, file_key(path)) == "" and not list(shared.iterdir())
    assert [j.status for j in load_queue(path).jobs] == ["pending"] * 3


def test_every_reader_finds_the_copy_whatever_its_environment_and_after_a_logout(
        tmp_path, monkeypatch):
    """A runner started by cron (no XDG_RUNTIME_DIR) kept its copy in /dev/shm; a resume from
    a desktop session looked only in $XDG_RUNTIME_DIR and ran every job again. The copy is
    kept in every place that takes it, memory and the user's own disk, and looked for in
    all of them; the one on disk outlives a logout that clears the memory ones."""
    queue, path = _night(tmp_path)
    _ran(queue)
    monkeypatch.delenv("SPACRQ_MEMORY_DIR")
    shm, runtime, state = tmp_path / "shm", tmp_path / "run", tmp_path / "state"
    shm.mkdir()
    runtime.mkdir(mode=0o700)
    monkeypatch.setattr(memcopy, "SHM", str(shm))
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)  # (cron)
    assert memcopy.keep(queue, path, file_key(path))
    kept = sorted(p.parent for p in tmp_path.rglob("queue-*.json"))
    assert kept == [shm / f"spacrq-{os.getuid()}", state / "spacrq" / "unsaved"]
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))  # (the desktop's resume)
    assert [j.status for j in load_queue(path).jobs] == ["success", "running", "pending"]
    for copy in (shm / f"spacrq-{os.getuid()}").iterdir():  # (a logout's RemoveIPC)
        copy.unlink()
    assert [j.status for j in load_queue(path).jobs] == ["success", "running", "pending"]
    open_queue(path)
    assert not list(tmp_path.rglob("queue-*.json")) and _on_disk(path)[:2] == ["success",
                                                                                "running"]


def test_a_copy_follows_its_file_when_the_folder_is_renamed_never_a_copy_of_it(tmp_path):
    """The queue's folder renamed in the morning (to a disk with room, on the same one): the
    copy was named after the old path, and every job ran again. It is found by the file's
    own identity; a copy of the file (cp -p keeps the mtime, cp -a the content) is not it."""
    queue, path = _night(tmp_path / "night" if (tmp_path / "night").mkdir() is None else None)
    _ran(queue)
    memcopy.keep(queue, path, file_key(path))
    (tmp_path / "night").rename(tmp_path / "moved")
    moved = tmp_path / "moved" / path.name
    assert [j.status for j in load_queue(moved).jobs] == ["success", "running", "pending"]
    import shutil
    template = tmp_path / "template.queue.json"
    shutil.copy2(moved, template)  # (cp -p: its mtime kept)
    (tmp_path / "moved").rename(tmp_path / "night")  # (back where it was: the copy's name)
    shutil.copy2(template, path)  # (cp -p template night.queue.json: in place, mtime kept)
    read = load_queue(path)
    assert [j.status for j in read.jobs] == ["pending"] * 3
    assert any("written since by something other than spacrq" in w for w in read.warnings)


@pytest.mark.parametrize("how", ["mv", "tar", "mv and a link in its place"])
def test_a_queue_moved_to_another_disk_is_asked_about_never_taken_for_a_copy_of_it(
        tmp_path, capsys, how):
    """The morning's fix for a full disk: the project moved to a disk with room (`mv` across
    filesystems is a copy and a removal: a new inode and ctime, the same bytes; `tar` keeps
    the mtime to the second only; a link may be left where it was). A copy of the queue made
    before the night is the same bytes too — and a chmod gives it a new ctime — so a kept
    state was taken by a template (its jobs shown done, never run) and then the moved queue
    ran every job again. Neither is guessed now: run and resume refuse until told which,
    and --kept-state takes it in."""
    import shutil
    from spacrq.cli import main
    (tmp_path / "night").mkdir()
    queue, path = _night(tmp_path / "night")
    template = tmp_path / "template.queue.json"
    shutil.copy2(path, template)  # (cp -a, before the night)
    _ran(queue)
    memcopy.keep(queue, path, file_key(path))
    shutil.copytree(tmp_path / "night", tmp_path / "elsewhere")  # (to another disk…)
    shutil.rmtree(tmp_path / "night")  # (…and gone from this one)
    template.chmod(0o640)  # (a new ctime)
    moved = tmp_path / "elsewhere" / path.name
    if how == "tar":
        os.utime(moved, (int(os.stat(moved).st_mtime), int(os.stat(moved).st_mtime)))
    elif how == "mv and a link in its place":
        (tmp_path / "night").symlink_to(tmp_path / "elsewhere")
    for name in (template, moved):
        read = load_queue(name)
        assert [j.status for j in read.jobs] == ["pending"] * 3  # (nothing guessed)
        assert read.kept_elsewhere and any("--kept-state" in w for w in read.warnings)
    for command in ("run", "resume"):
        assert main(["queue", command, str(template)]) == 2
        err = capsys.readouterr().err
        assert "refusing to start: a runner's kept state may be this queue's" in err
    assert main(["queue", "status", str(template)]) == 0  # (a look is never refused)
    opened = moved if how != "mv and a link in its place" else path  # (by its old path)
    copy = load_queue(opened).kept_elsewhere[0]
    assert main(["queue", "resume", str(opened), "--kept-state", copy]) == 0
    out = capsys.readouterr().out
    assert "took in the state of 2 job(s)" in out
    assert _on_disk(moved) == ["success", "success", "success"]  # (j0 as kept; j1 ran on)
    assert not list((tmp_path / "memory").iterdir())  # (taken in: gone)
    assert main(["queue", "run", str(template), "--no-kept-state"]) == 0  # (tonight's, all)


def test_no_home_is_no_place_on_disk_never_a_traceback(tmp_path, monkeypatch):
    """cron's bare environment (no HOME, no XDG_STATE_HOME): every command that loaded a
    queue ended in a traceback from looking for the place on the user's disk."""
    queue, path = _night(tmp_path)
    monkeypatch.delenv("SPACRQ_MEMORY_DIR")
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(memcopy, "SHM", str(tmp_path / "no-shm"))
    assert memcopy.places(make=True) == []
    assert [j.status for j in load_queue(path).jobs] == ["pending"] * 3
    assert memcopy.keep(queue, path, file_key(path)) == ""
