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


def test_keeping_the_panes_version_of_a_job_that_ran_adds_it_as_a_new_waiting_job():
    base = _night(_job("a", settings={"argv": ["echo", "OLD"]}))
    ours = base.clone()
    ours.find("a").settings = {"argv": ["echo", "NEW"]}
    theirs = base.clone()
    theirs.jobs[0] = _job("a", "success", settings={"argv": ["echo", "OLD"]}, exit_code=0,
                          log_path="logs/01_a.log")
    refused = merge_queues(base, ours, theirs)
    (conflict,) = refused.conflicts
    assert conflict.what == CHANGED_BOTH and conflict.ran
    assert "job a was changed here but ran meanwhile" in refused.refusal("q.queue.json")
    merged = merge_queues(base, ours, theirs, keep_ours=refused.conflicts)
    assert merged.ok and _ids(merged.queue) == ["a", "a-2"]
    ran, new = merged.queue.jobs
    assert (ran.status, ran.settings, ran.exit_code) == ("success", {"argv": ["echo", "OLD"]}, 0)
    assert (new.status, new.settings, new.exit_code, new.log_path) == \
        ("pending", {"argv": ["echo", "NEW"]}, None, "")
    assert "a ran meanwhile with its old settings" in merged.note() and "a-2" in merged.note()


def test_duplicate_ids_refuse_the_save_naming_them_and_the_fix():
    first = _job("a", settings={"argv": ["echo", "FIRST"]})
    second = _job("a", settings={"argv": ["echo", "SECOND"]})
    base = _night(first, second)
    ours = _night(first, second, _job("b"))
    merged = merge_queues(base, ours, base.clone())
    assert not merged.ok and merged.queue is None and not merged.conflicts
    said = merged.refusal("q.queue.json")
    assert "the job id a is used by more than one job" in said and "rename one" in said
    assert not merge_queues(None, _night(_job("b")), base.clone()).ok, "twice on disk only"


def test_a_follower_of_a_job_removed_on_disk_refuses_the_save_naming_both():
    base = _night(_job("a"), _job("b"))
    ours = base.clone()
    ours.add(_job("c", depends_on=["b"]))
    theirs = _night(_job("a"))
    merged = merge_queues(base, ours, theirs)
    assert not merged.ok
    assert "c runs after b, which was removed on disk" in merged.refusal("q.queue.json")


def test_a_job_added_on_disk_after_a_job_the_pane_removed_refuses_the_save():
    base = _night(_job("a"), _job("b"))
    ours = base.clone()
    ours.remove("b")
    theirs = base.clone()
    theirs.add(_job("d", depends_on=["b"]))
    merged = merge_queues(base, ours, theirs)
    assert not merged.ok and "d runs after b, which was removed here" in merged.refusal("q")


def test_minting_fresh_ids_for_many_clashes_tries_each_id_about_once():
    from spacrq.queue.merge import FreshIds
    n = 5000
    fresh = FreshIds({f"command-{i}" for i in range(1, n + 1)})
    made = [fresh.mint(Job(module="command", id=f"command-{i}")) for i in range(1, n + 1)]
    assert len(set(made)) == n and not set(made) & {f"command-{i}" for i in range(1, n + 1)}
    assert fresh.probes <= 2 * n + 1, "linear: never the taken ids probed once per rename"


def test_many_clashing_ids_merge_into_two_jobs_each():
    n = 1000
    base = _night()
    ours, theirs = base.clone(), base.clone()
    for i in range(1, n + 1):
        ours.add(Job(module="command", id=f"command-{i}", settings={"argv": ["echo", "gui"]}))
        theirs.add(Job(module="command", id=f"command-{i}", settings={"argv": ["echo", "cli"]}))
    merged = merge_queues(base, ours, theirs)
    assert merged.ok and len(set(_ids(merged.queue))) == 2 * n
    assert merged.note().count(" is now ") == 5 and f"{n - 5} more of yours" in merged.note()


def test_the_refusal_names_the_first_few_conflicts_and_counts_the_rest():
    base = _night(*(_job(f"j{i}") for i in range(200)))
    ours, theirs = base.clone(), base.clone()
    for i in range(200):
        ours.jobs[i].label = "here"
        theirs.jobs[i].label = "there"
    said = merge_queues(base, ours, theirs).refusal("q.queue.json")
    assert "j4 was changed" in said and "j5 was changed" not in said
    assert "and 195 more" in said and len(said) < 600


def test_a_clashing_name_of_the_operators_own_keeps_the_name():
    base = _night()
    ours, theirs = base.clone(), base.clone()
    ours.add(Job(module="command", id="nightly", settings={"argv": ["echo", "gui"]}))
    theirs.add(Job(module="command", id="nightly", settings={"argv": ["echo", "cli"]}))
    merged = merge_queues(base, ours, theirs)
    assert merged.renamed == (("nightly", "nightly-2"),)
    assert "the file gained a job of its own under that id" in merged.note()


def test_the_same_job_added_identically_on_both_sides_says_it_is_there_once():
    base = _night(_job("a"))
    ours, theirs = base.clone(), base.clone()
    ours.add(_job("experiment-1"))
    theirs.add(_job("experiment-1"))
    merged = merge_queues(base, ours, theirs)
    assert _ids(merged.queue) == ["a", "experiment-1"]
    assert "experiment-1 was on disk already exactly as you added" in merged.note()


def test_a_clashing_id_ending_in_a_number_counts_on_from_it():
    base = _night()
    ours, theirs = base.clone(), base.clone()
    ours.add(Job(module="command", id="run-2", settings={"argv": ["echo", "gui"]}))
    theirs.add(Job(module="command", id="run-2", settings={"argv": ["echo", "cli"]}))
    assert merge_queues(base, ours, theirs).renamed == (("run-2", "run-3"),)
