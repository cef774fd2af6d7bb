"""The Queue pane's logic without Qt: rows, buttons, progress, editor fields."""
from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from spacrq.queue.model import Job, Queue
from spacrq.queue.pane import (COL_AFTER, COL_LABEL, COL_LOG, COL_NUMBER, COL_STATUS, COL_TIME,
                               JobFacts, PaneState, controls, edit_refusal, job_row, parse_after,
                               parse_overrides, parse_timeout, progress, rows, status_word,
                               time_text)
from spacrq.watching import diff_rows


def _job(job_id: str, status: str = "pending", **kw) -> Job:
    return Job(module="command", settings={"argv": ["true"]}, id=job_id, label=job_id,
               status=status, **kw)


def _rows(*ids: str, statuses: dict | None = None):
    return rows([_job(i, (statuses or {}).get(i, "pending")) for i in ids])


def _queue(n: int) -> Queue:
    q = Queue(name="night")
    for _ in range(n):
        q.add(Job(module="command", settings={"argv": ["true"]}), validate=False)
    return q


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat()


# -- rows and how they change ---------------------------------------------------------

def test_identical_rows_are_the_same():
    assert diff_rows(_rows("a", "b"), _rows("a", "b")).kind == "same"


def test_a_status_change_updates_only_that_row():
    change = diff_rows(_rows("a", "b", "c"), _rows("a", "b", "c", statuses={"b": "running"}))
    assert change.kind == "update" and change.changed == (1,)


def test_jobs_added_at_the_end_are_an_insert():
    change = diff_rows(_rows("a", "b"), _rows("a", "b", "c", "d"))
    assert (change.kind, change.first, change.count, change.changed) == ("insert", 2, 2, ())


def test_a_removed_job_is_a_remove_and_renumbers_the_rows_after_it():
    change = diff_rows(_rows("a", "b", "c", "d"), _rows("a", "c", "d"))
    assert (change.kind, change.first, change.count) == ("remove", 1, 1)
    assert change.changed == (1, 2)  # their "#" moved up by one


def test_moving_a_job_up_updates_the_two_rows_that_swapped():
    change = diff_rows(_rows("a", "b", "c", "d"), _rows("a", "c", "b", "d"))
    assert change.kind == "update" and change.changed == (1, 2)


def test_rows_carry_cells_tips_look_and_sort_keys():
    q = _queue(2)
    q.jobs[1].depends_on = ["command-1"]
    q.jobs[0].status, q.jobs[0].run_status = "success", {"n_failed": 3, "n_ok": 5}
    q.jobs[1].status, q.jobs[1].error = "skipped", "skipped: command-1 is partial"
    q.jobs[1].log_path = "/somewhere/night_logs/02_command-2.log"
    first, second = rows(q.jobs)
    assert first.key == "command-1" and first.cells[COL_NUMBER] == "1"
    assert first.look == "partial" and first.cells[COL_STATUS] == "partial"
    assert "ledger records failed items" in first.tip(COL_STATUS)
    assert second.cells[COL_AFTER] == "command-1" and second.look == "skipped"
    assert "partial" in second.tip(COL_STATUS)
    assert second.cells[COL_LOG] == "02_command-2.log"
    assert second.tip(COL_LOG).endswith("02_command-2.log")
    assert second.tip(COL_LABEL) == second.value.label
    assert second.sort_key(COL_NUMBER) == 2, "the run order sorts as a number, not as text"
    assert status_word("not_run") == "not run" and status_word("success") == "succeeded"


def test_sorting_by_status_puts_what_needs_the_operator_first():
    """Not the alphabet ("failed" after "skipped"…): running, then what went wrong."""
    q = _queue(7)
    for job, status in zip(q.jobs, ("success", "pending", "not_run", "skipped", "failed",
                                    "running", "success")):
        job.status = status
    q.jobs[6].run_status = {"n_failed": 1}
    made = rows(q.jobs)
    by_status = sorted(made, key=lambda r: (r.sort_key(COL_STATUS), r.sort_key(COL_NUMBER)))
    assert [r.cells[COL_STATUS] for r in by_status] == [
        "running", "failed", "partial", "skipped", "not run", "pending", "succeeded"]


def test_unchanged_jobs_keep_their_row_objects():
    q = _queue(50)
    old = rows(q.jobs)
    q.jobs[7].status = "running"
    touched = rows(q.jobs, old, {"command-8"})
    rebuilt = rows(q.jobs, old)
    for made in (touched, rebuilt):
        assert made[7].value.status == "running" and made[7] is not old[7]
        assert all(made[i] is old[i] for i in range(50) if i != 7)


def test_time_ticks_only_while_running():
    started = time.time() - 75
    running = JobFacts(1, "a", "running", started_at=started)
    assert time_text(running, started + 75) == "1m 15s"
    assert time_text(running, started + 3700) == "1h 01m"
    done = JobFacts(1, "a", "success", started_at=started, finished_at=started + 4.2)
    assert time_text(done, started + 9999) == "4.2s"
    assert time_text(JobFacts(1, "a", "pending"), started) == "—"
    row = job_row(1, _job("a", "success", started=_iso(started), finished=_iso(started + 90)))
    assert row.cells[COL_TIME] == "" and row.sort_key(COL_TIME) == pytest.approx(90)


def test_progress_counts_finished_jobs_as_done():
    shown = rows([_job("a", "success"), _job("b", "failed"), _job("c", "skipped"),
                  _job("d", "running"), _job("e", "not_run"), _job("f")])
    found = progress(shown)
    assert (found.done, found.total) == (3, 6) and found.running
    assert found.counts["not run"] == 1 and found.counts["running"] == 1
    assert found.caption.startswith("1 running  ·  1 succeeded")


# -- the buttons ----------------------------------------------------------------------

def _on(c) -> set[str]:
    return {name for name, button in vars(c).items() if button.enabled}


def test_editing_is_refused_while_a_runner_owns_the_file():
    shown = rows([_job("a", "running"), _job("b")])
    c = controls(PaneState(runner_alive=True, runner_pid=4242, progress=progress(shown),
                           selected=(1,), picked=(shown[1].value,), on_disk=True))
    assert _on(c) == {"stop", "abort", "open", "validate", "edit", "editor", "add"}, \
        "a waiting job can still be edited in place, and a job added: the runner takes both in"
    assert "runner" in c.add.tip and "after the jobs already queued" in c.add.tip
    assert "4242" in c.remove.tip and "Stop it first" in c.resume.tip
    sentence = edit_refusal({"alive": True, "pid": 4242}, "remove a job")
    assert "4242" in sentence and "Stop it first" in sentence
    assert edit_refusal({"alive": False}) is None and edit_refusal(None) is None


def test_stop_is_offered_once():
    c = controls(PaneState(runner_alive=True, stop_asked=True, progress=progress(rows([_job("a", "running")]))))
    assert not c.stop.enabled and c.abort.enabled and "already" in c.stop.tip


def test_with_a_stop_asked_add_job_says_the_job_runs_when_the_queue_is_resumed():
    c = controls(PaneState(runner_alive=True, stop_asked=True,
                           progress=progress(rows([_job("a", "running"), _job("b")]))))
    assert c.add.enabled and "runs when the queue is resumed" in c.add.tip
    assert "takes it in" not in c.editor.tip and "resumed" in c.editor.tip


def test_idle_controls_follow_the_queue():
    pending = rows([_job("a"), _job("b"), _job("c")])
    c = controls(PaneState(progress=progress(pending), selected=(0,), picked=(pending[0].value,),
                           on_disk=True))
    assert _on(c) == {"editor", "add", "duplicate", "edit", "remove", "move_down", "validate", "open", "new",
                      "save_as", "run", "edit_options"}
    assert "top" in c.move_up.tip and "Nothing to save" in c.save.tip
    halted = rows([_job("a", "success"), _job("b", "failed"), _job("c", "not_run")])
    c = controls(PaneState(progress=progress(halted), selected=(2,), on_disk=True, dirty=True))
    assert c.resume.enabled and c.retry_failed.enabled and c.save.enabled
    assert not c.run.enabled and not c.move_down.enabled and c.move_up.enabled


def test_resume_is_offered_for_a_queue_cut_off_mid_run_and_not_for_a_fresh_one():
    crashed = rows([_job("a", "success"), _job("b", "running"), _job("c")])
    assert controls(PaneState(progress=progress(crashed), on_disk=True)).resume.enabled
    fresh = rows([_job("a"), _job("b")])
    assert not controls(PaneState(progress=progress(fresh), on_disk=True)).resume.enabled
    done = rows([_job("a", "success")])
    c = controls(PaneState(progress=progress(done), on_disk=True))
    assert not c.resume.enabled and not c.retry_failed.enabled and not c.run.enabled


def test_an_empty_unsaved_queue_can_be_saved_but_not_checked_or_run():
    c = controls(PaneState())
    assert not c.validate.enabled and not c.run.enabled and c.save.enabled
    assert not c.duplicate.enabled and c.duplicate.tip == "Select a job first."


def test_edit_is_offered_for_one_waiting_job_and_says_why_not_otherwise():
    shown = rows([_job("a", "running"), _job("b", "success"), _job("c"), _job("d", "not_run")])

    def edit(*picked, dirty=False):
        return controls(PaneState(progress=progress(shown), picked=tuple(shown[i].value
                                                                         for i in picked),
                                  selected=picked, on_disk=True, dirty=dirty)).edit
    assert edit(2).enabled and edit(3).enabled
    assert not edit(0).enabled and "running" in edit(0).tip
    assert not edit(1).enabled and "duplicate" in edit(1).tip
    assert not edit(2, 3).enabled and not edit().enabled and "one job" in edit().tip
    assert not edit(2, dirty=True).enabled and "Save" in edit(2, dirty=True).tip


def test_move_is_off_while_the_table_is_sorted_by_another_column():
    shown = rows([_job("a"), _job("b"), _job("c")])
    c = controls(PaneState(progress=progress(shown), selected=(1,), on_disk=True, sorted=True))
    assert not c.move_up.enabled and not c.move_down.enabled and "Run order" in c.move_up.tip
    assert c.remove.enabled and c.duplicate.enabled


def test_add_waits_while_the_last_job_is_checked():
    c = controls(PaneState(checking=True))
    assert not c.add.enabled and "Checking" in c.add.tip


# -- editor fields ---------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [("", None), ("90", 90), ("90s", 90), ("30m", 1800),
                                           ("2h", 7200), ("1h30m", 5400), ("1.5h", 5400)])
def test_timeouts_read_as_an_operator_writes_them(text, seconds):
    assert parse_timeout(text) == (seconds, None)


def test_a_bad_timeout_is_one_sentence_with_the_fix():
    value, problem = parse_timeout("soon")
    assert value is None and "90s, 30m, 2h" in problem


def test_overrides_need_key_equals_value():
    assert parse_overrides("a=1 'b=two words'") == (["a=1", "b=two words"], None)
    words, problem = parse_overrides("diameter 30")
    assert words == [] and "key=value" in problem
    assert "quote" in parse_overrides("a='1")[1]


def test_after_accepts_commas_and_spaces():
    assert parse_after("mask-1, measure-2 mask-1") == ["mask-1", "measure-2"]


# -- the progress bar tells the truth ------------------------------------------------

def test_a_night_with_a_failure_never_reads_as_all_done_in_green():
    night = rows([_job(f"ok{i}", "success") for i in range(5)]
                 + [_job("bad", "failed"), _job("after-bad", "skipped")])
    found = progress(night)
    assert found.bar_text == "7 / 7 ended: 5 succeeded, 1 failed, 1 skipped"
    assert found.bar_look == "failed"
    colours = {word: colour for word, _n, colour in found.bar_segments}
    assert [(w, n) for w, n, _c in found.bar_segments] == [("succeeded", 5), ("failed", 1),
                                                            ("skipped", 1)]
    assert colours["failed"] != colours["succeeded"] != colours["skipped"]


def test_the_bar_says_all_succeeded_only_when_they_did():
    clean = progress(rows([_job("a", "success"), _job("b", "success")]))
    assert clean.bar_text == "2 / 2 ended: all succeeded" and clean.bar_look == "ok"
    skipped = progress(rows([_job("a", "success"), _job("b", "skipped")]))
    assert skipped.bar_look == "warning"
    waiting = progress(rows([_job("a", "running"), _job("b")]))
    assert waiting.bar_text == "0 / 2 ended" and waiting.bar_look == "" and not waiting.bar_segments


# -- how a run ended ------------------------------------------------------------------

def test_a_crashed_runner_says_it_crashed_not_an_old_reason():
    from spacrq.queue.pane import ending
    shown = rows([_job("a", "success"), _job("b", "not_run"), _job("c", "running"), _job("d")])
    runner = {"alive": False, "state": "crashed", "current_job": "c", "pid": 99}
    said = ending(runner, progress(shown), "n2")
    assert "aborted" not in said.message and "stopped" not in said.message.split(":")[0]
    assert "crashed or was killed while c was running" in said.message
    assert "Resume adopts it (or records how it ended)" in said.message
    assert said.level == "warning" and said.notice.startswith("Queue n2 crashed")
    assert "1 succeeded, 1 running, 1 not run, 1 pending" in said.message


def test_a_crashed_runner_names_the_job_the_file_shows_running_not_its_lagging_record():
    """runner.json is written at most a few times a second: after a burst of short jobs its
    current_job still named j14 while j17 ran (5 of 8 kills)."""
    from spacrq.queue.pane import ending
    jobs = [_job("j14", "success"), _job("j17", "running"), _job("j18")]
    said = ending({"alive": False, "state": "crashed", "current_job": "j14"},
                  progress(rows(jobs)), "n", jobs)
    assert "while j17 was running" in said.message and "j14" not in said.message


def test_a_runner_that_ended_gives_its_own_reason():
    from spacrq.queue.pane import ending
    shown = rows([_job("a", "success"), _job("b", "not_run")])
    said = ending({"alive": False, "state": "aborted",
                   "stopped_reason": "aborted by request; the running job was stopped"},
                  progress(shown), "n2")
    assert said.message.startswith("The queue aborted (aborted by request; the running job "
                                   "was stopped): 1 succeeded, 1 not run.")
    finished = ending({"state": "finished"}, progress(rows([_job("a", "success")])), "n2")
    assert finished.level == "info" and "(" not in finished.message.split(":")[0]


def test_the_changed_on_disk_line_says_save_keeps_their_jobs():
    from spacrq.queue.merge import DiskNews
    from spacrq.queue.pane import changed_on_disk
    line = changed_on_disk("n6.queue.json", DiskNews(added=("fromcli",)))
    assert line.startswith("n6.queue.json changed on disk (fromcli added there):")
    assert "Save keeps those changes and adds yours" in line
    assert "overwrites" not in line and "Open reloads it" in line
