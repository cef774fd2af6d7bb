"""The pane's Save as a three-way merge (spacrq.queue.merge), without Qt or files."""
from __future__ import annotations

import pytest

from spacrq.queue.merge import (CHANGED_BOTH, ORDER, REMOVED_HERE, REMOVED_THERE, SETTING,
                                disk_news, merge_queues)
from spacrq.queue.model import Job, Queue


def _job(job_id: str, status: str = "pending", **kw) -> Job:
    kw.setdefault("settings", {"argv": ["echo", job_id]})
    kw.setdefault("label", job_id)
    return Job(module="command", id=job_id, status=status, **kw)


def _night(*jobs: Job, **kw) -> Queue:
    return Queue(jobs=list(jobs), name="n6", **kw)


def _finished() -> Queue:
    """The repro's queue: two jobs that ran."""
    return _night(_job("first", "success", exit_code=0), _job("second", "success", exit_code=0))


def _ids(queue: Queue) -> list[str]:
    return [job.id for job in queue.jobs]


def test_a_job_added_on_disk_is_kept_after_the_panes_own():
    base = _finished()
    ours = base.clone()
    ours.add(_job("command-1"))
    theirs = base.clone()
    theirs.add(_job("fromcli"))
    merged = merge_queues(base, ours, theirs)
    assert merged.ok and _ids(merged.queue) == ["first", "second", "command-1", "fromcli"]
    assert merged.kept == ("fromcli",)
    assert "fromcli" in merged.note() and "added on disk" in merged.note()


def test_a_job_added_on_disk_between_others_keeps_its_place():
    base = _night(_job("a"), _job("b"))
    ours = base.clone()
    ours.add(_job("mine"))
    theirs = _night(_job("a"), _job("x"), _job("b"))
    assert _ids(merge_queues(base, ours, theirs).queue) == ["a", "x", "b", "mine"]


def test_jobs_the_pane_removed_are_removed_and_jobs_removed_on_disk_stay_removed():
    base = _night(_job("a"), _job("b"), _job("c"))
    ours = base.clone()
    ours.remove("b")
    theirs = _night(_job("a"), _job("b"))  # c removed on disk
    merged = merge_queues(base, ours, theirs)
    assert merged.ok and _ids(merged.queue) == ["a"]
    assert merged.dropped == ("c",)


def test_each_side_keeps_what_only_it_changed():
    base = _night(_job("a"), _job("b", depends_on=["a"]), _job("c"))
    ours = base.clone()
    ours.find("b").depends_on = []
    ours.on_error = "stop"
    theirs = base.clone()
    theirs.jobs[2] = _job("c", label="relabelled on disk")
    theirs.notify_command = ["notify-send", "done"]
    merged = merge_queues(base, ours, theirs)
    assert merged.ok
    assert merged.queue.find("b").depends_on == [], "the pane's change"
    assert merged.queue.find("c").label == "relabelled on disk", "the disk's change"
    assert merged.taken == ("c",)
    assert merged.queue.on_error == "stop" and merged.queue.notify_command == ["notify-send",
                                                                               "done"]


def test_a_runners_statuses_on_disk_are_never_overwritten_by_the_panes_stale_ones():
    base = _night(_job("a"), _job("b"), _job("c", depends_on=["b"]))
    ours = base.clone()
    ours.remove("b")  # also changes c (it no longer runs after b)
    ours.add(_job("mine"))
    theirs = base.clone()
    theirs.jobs[0] = _job("a", "success", exit_code=0, log_path="n6_logs/01_a.log")
    theirs.stopped_reason, theirs.journal_seq = "", 7
    merged = merge_queues(base, ours, theirs)
    assert merged.ok
    a = merged.queue.find("a")
    assert (a.status, a.exit_code, a.log_path) == ("success", 0, "n6_logs/01_a.log")
    assert merged.queue.journal_seq == 7
    assert _ids(merged.queue) == ["a", "c", "mine"]


def test_a_job_changed_on_both_sides_refuses_the_save_and_names_it():
    base = _night(_job("a"), _job("b", depends_on=["a"]), _job("c"))
    ours = base.clone()
    ours.find("b").depends_on = []
    theirs = base.clone()
    theirs.jobs[1] = _job("b", depends_on=["a"], timeout=60.0)
    merged = merge_queues(base, ours, theirs)
    assert not merged.ok and merged.queue is None
    (conflict,) = merged.conflicts
    assert (conflict.what, conflict.name) == (CHANGED_BOTH, "b")
    sentence = merged.refusal("n6.queue.json")
    assert "job b was changed both here and on disk" in sentence
    assert "Open reloads" in sentence and "Save again" in sentence and "\n" not in sentence


def test_save_again_keeps_the_panes_version_of_just_what_it_was_told_about():
    base = _night(_job("a"), _job("b", depends_on=["a"]))
    ours = base.clone()
    ours.find("b").depends_on = []
    ours.add(_job("mine"))
    theirs = base.clone()
    theirs.jobs[1] = _job("b", depends_on=["a"], timeout=60.0)
    theirs.add(_job("fromcli"))
    told = merge_queues(base, ours, theirs).conflicts
    again = merge_queues(base, ours, theirs, keep_ours=told)
    assert again.ok
    b = again.queue.find("b")
    assert b.depends_on == [] and b.timeout is None, "the pane's version of b"
    assert _ids(again.queue) == ["a", "b", "mine", "fromcli"], "the rest of the disk kept"
    theirs.jobs[1] = _job("b", depends_on=["a"], timeout=90.0)  # changed once more on disk
    assert not merge_queues(base, ours, theirs, keep_ours=told).ok, \
        "a conflict that changed again since it was named is refused again"


def test_a_job_the_pane_changed_that_a_runner_ran_since_is_a_conflict():
    base = _night(_job("a"), _job("b", depends_on=["a"]))
    ours = base.clone()
    ours.find("b").depends_on = []
    theirs = base.clone()
    theirs.jobs[1] = _job("b", "success", depends_on=["a"], exit_code=0)
    (conflict,) = merge_queues(base, ours, theirs).conflicts
    assert (conflict.what, conflict.name) == (CHANGED_BOTH, "b")


@pytest.mark.parametrize("side", ["here", "there"])
def test_removed_on_one_side_and_changed_on_the_other_is_a_conflict(side):
    base = _night(_job("a"), _job("b"))
    ours, theirs = base.clone(), base.clone()
    if side == "here":
        ours.remove("b")
        theirs.jobs[1] = _job("b", label="edited on disk")
    else:
        theirs.remove("b")
        ours.jobs[1] = _job("b", label="edited here")
    (conflict,) = merge_queues(base, ours, theirs).conflicts
    assert conflict.what == (REMOVED_HERE if side == "here" else REMOVED_THERE)
    assert conflict.name == "b"
    kept = merge_queues(base, ours, theirs, keep_ours=(conflict,)).queue
    assert _ids(kept) == (["a"] if side == "here" else ["a", "b"])


def test_the_same_id_added_on_both_sides_is_two_jobs_the_panes_renamed():
    base = _night(_job("first"))
    ours = base.clone()
    ours.add(Job(module="command", id="command-1", settings={"argv": ["echo", "gui"]}))
    ours.add(Job(module="command", id="command-2", settings={"argv": ["true"]},
                 depends_on=["command-1"]))
    theirs = base.clone()
    theirs.add(Job(module="command", id="command-1", settings={"argv": ["echo", "cli"]}))
    merged = merge_queues(base, ours, theirs)
    assert merged.ok
    assert merged.queue.find("command-1").settings == {"argv": ["echo", "cli"]}
    ((mine, new),) = merged.renamed
    assert mine == "command-1" and new not in ("command-1", "command-2")
    assert merged.queue.find(new).settings == {"argv": ["echo", "gui"]}
    assert merged.queue.find("command-2").depends_on == [new], "its follower follows it"
    assert f"Your command-1 is now {new}" in merged.note()


def test_a_job_already_on_disk_as_the_pane_added_it_is_one_job():
    base = _night(_job("a"))
    ours = base.clone()
    ours.add(_job("mine"))
    theirs = ours.clone()  # the pane's earlier save, say
    theirs.jobs[1] = _job("mine", "success", exit_code=0)
    merged = merge_queues(base, ours, theirs)
    assert _ids(merged.queue) == ["a", "mine"] and merged.queue.find("mine").status == "success"


def test_settings_changed_both_ways_are_a_conflict():
    base = _night(_job("a"))
    ours, theirs = base.clone(), base.clone()
    ours.max_consecutive_failures, theirs.max_consecutive_failures = 5, 0
    (conflict,) = merge_queues(base, ours, theirs).conflicts
    assert (conflict.what, conflict.name) == (SETTING, "max_consecutive_failures")
    kept = merge_queues(base, ours, theirs, keep_ours=(conflict,)).queue
    assert kept.max_consecutive_failures == 5


def test_the_order_follows_whichever_side_reordered_and_both_is_a_conflict():
    base = _night(_job("a"), _job("b"), _job("c"))
    ours, theirs = base.clone(), base.clone()
    ours.move("c", -2)
    ours.add(_job("mine"))
    theirs.add(_job("fromcli"))
    assert _ids(merge_queues(base, ours, theirs).queue) == ["c", "a", "b", "mine", "fromcli"]
    ours2, theirs2 = base.clone(), base.clone()
    theirs2.move("a", 2)
    ours2.add(_job("mine"))
    assert _ids(merge_queues(base, ours2, theirs2).queue) == ["b", "c", "a", "mine"], \
        "only the disk reordered: its order is kept"
    theirs.move("a", 1)
    (conflict,) = merge_queues(base, ours, theirs).conflicts
    assert conflict.what == ORDER and "run order" in conflict.sentence()


def test_with_no_base_every_job_on_disk_is_kept_after_the_panes():
    ours = _night(_job("mine"))
    theirs = _night(_job("cli-1"), _job("cli-2"))
    merged = merge_queues(None, ours, theirs)
    assert _ids(merged.queue) == ["mine", "cli-1", "cli-2"]


def test_no_queue_given_is_changed():
    base = _night(_job("a"), _job("b"))
    ours, theirs = base.clone(), base.clone()
    ours.remove("a")
    theirs.add(_job("c"))
    before = [q.to_dict() for q in (base, ours, theirs)]
    merge_queues(base, ours, theirs)
    assert [q.to_dict() for q in (base, ours, theirs)] == before


def test_disk_news_says_what_changed_on_disk():
    base = _night(_job("a"), _job("b"))
    theirs = base.clone()
    theirs.remove("b")
    theirs.add(_job("fromcli"))
    theirs.jobs[0] = _job("a", "running")
    theirs.on_error = "stop"
    news = disk_news(base, theirs)
    assert (news.added, news.changed, news.removed, news.settings) == (
        ("fromcli",), ("a",), ("b",), ("on_error",))
