"""Jobs and queues: ids, editing, the file format spaCR shares."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import spacrq.queue as q
from spacrq.fmt import duration
from spacrq.queue import Job, Queue, QueueError, load_queue, save_queue

DATA = Path(__file__).parent / "data"
SPACR_KEYS = ["id", "module", "label", "settings", "overrides", "depends_on", "status", "started",
              "finished", "exit_code", "error", "log_path", "run_status"]


def test_public_api_keeps_the_seed_names():
    for name in ("Job", "Queue", "Problem", "QueueError", "load_queue", "save_queue",
                 "validate_job", "validate_queue", "plan", "run_queue", "resume_queue",
                 "QueueResult", "Progress", "fmt_duration", "classify_failure", "STATUS_PENDING",
                 "STATUS_RUNNING", "STATUS_SUCCESS", "STATUS_FAILED", "STATUS_SKIPPED",
                 "STATUS_NOT_RUN"):
        assert hasattr(q, name), name
    from spacrq.problems import Problem
    assert q.Problem is Problem


def test_ids_are_minted_module_dash_n_and_never_reused():
    queue = Queue()
    a = queue.add(Job(module="command", settings={"argv": ["true"]}))
    b = queue.add(Job(module="command", settings={"argv": ["true"]}))
    assert (a.id, b.id) == ("command-1", "command-2")
    queue.remove("command-1")
    assert queue.add(Job(module="command", settings={"argv": ["true"]})).id == "command-1"


@pytest.mark.parametrize("bad", ["../etc", "a/b", "a\\b", "..", ".hidden", "x\ny"])
def test_ids_that_would_escape_the_logs_folder_are_refused(bad):
    queue = Queue()
    with pytest.raises(QueueError, match="job ids become log file names"):
        queue.add(Job(module="command", settings={"argv": ["true"]}, id=bad))
    assert queue.jobs == []


def test_duplicate_id_is_refused_with_the_fix():
    queue = Queue()
    queue.add(Job(module="command", settings={"argv": ["true"]}, id="a"))
    with pytest.raises(QueueError, match="already in this queue"):
        queue.add(Job(module="command", settings={"argv": ["true"]}, id="a"))


def test_copy_is_a_fresh_never_run_job():
    job = Job(module="command", settings={"argv": ["true"]}, id="a", label="x", status="failed",
              exit_code=1, error="boom", attempts=2, log_path="/l", overrides=["k=1"], timeout=5)
    clone = job.copy()
    assert (clone.id, clone.status, clone.exit_code, clone.error, clone.attempts, clone.log_path) \
        == ("", "pending", None, "", 0, "")
    assert clone.overrides == ["k=1"] and clone.timeout == 5
    assert job.copy(id="b").id == "b"


def test_remove_drops_dangling_dependencies_and_move_clamps():
    queue = Queue()
    for jid in "abc":
        queue.add(Job(module="command", settings={"argv": ["true"]}, id=jid,
                      depends_on=["a"] if jid == "c" else []))
    assert queue.remove("a") and queue.find("c").depends_on == []
    assert not queue.remove("zzz")
    assert queue.move("c", -5) == 0 and queue.ids == ["c", "b"]
    assert queue.move("c", +9) == 1 and queue.ids == ["b", "c"]
    assert queue.move("nope", 1) == -1


@pytest.mark.parametrize("seconds,text", [(None, "—"), (42.14, "42.1s"), (432, "7m 12s"),
                                          (7 * 3600 + 41 * 60, "7h 41m")])
def test_a_duration_reads_like_an_overnight_summary(seconds, text):
    assert duration(seconds) == text


def test_a_queue_file_written_by_spacr_loads_unchanged():
    queue = load_queue(DATA / "spacr_overnight.queue.json")
    assert queue.name == "overnight" and queue.ids == ["mask-1", "measure-1", "mask-2"]
    mask = queue.find("mask-1")
    assert mask.status == "success" and mask.is_partial and mask.duration_s > 2500
    assert queue.find("measure-1").overrides == ["save_png=False"]
    assert queue.find("measure-1").depends_on == ["mask-1"]
    assert queue.find("mask-2").label == "plate 2 mask"


def test_our_file_keeps_every_spacr_field_in_spacr_order(tmp_path):
    original = json.loads((DATA / "spacr_overnight.queue.json").read_text())
    queue = load_queue(DATA / "spacr_overnight.queue.json")
    save_queue(queue, tmp_path / "x.queue.json")
    ours = json.loads((tmp_path / "x.queue.json").read_text())
    assert ours["spacr_queue"] == 1 and ours["name"] == original["name"]
    for theirs, mine in zip(original["jobs"], ours["jobs"]):
        assert list(mine)[:len(SPACR_KEYS)] == SPACR_KEYS
        assert {k: mine[k] for k in SPACR_KEYS} == theirs


def test_round_trip_keeps_spacrq_fields(tmp_path):
    queue = Queue(name="n", on_error="stop", max_consecutive_failures=0, notify_command=["true"])
    queue.add(Job(module="command", settings={"argv": ["true"]}, timeout=3.5, retries=2,
                  env={"A": "1"}, cwd=str(tmp_path)))
    save_queue(queue, tmp_path / "n.queue.json")
    back = load_queue(tmp_path / "n.queue.json")
    job = back.jobs[0]
    assert (job.timeout, job.retries, job.env, job.cwd) == (3.5, 2, {"A": "1"}, str(tmp_path))
    assert (back.on_error, back.max_consecutive_failures, back.notify_command) == ("stop", 0, ["true"])


def test_overrides_as_a_mapping_are_normalised():
    assert Job(module="x", overrides={"a": 1, "b": "c"}).override_args == ["a=1", "b=c"]


@pytest.mark.parametrize("argv, label", [
    (["sleep", "2"], "sleep 2"),  # not "command sleep 2"
    (["echo", "a b"], "echo 'a b'"),
    (["python", "-c", "print('last')"], "python -c \"print('last')\""),  # as a person types it
    (["sh", "-c", "echo $HOME; it's"], "sh -c 'echo $HOME; it'\"'\"'s'"),  # still exact
    (["a", "b", "c", "d", "e"], "a b c d …"),
])
def test_a_command_jobs_default_label_is_its_program_as_typed(argv, label):
    assert Job(module="command", settings={"argv": argv}).default_label() == label
