"""The Experiments pane's decisions (spacrq.experiments.pane), without Qt."""
from __future__ import annotations

import pytest

from spacrq.experiments.pane import (
    BADGES,
    RunRow,
    announcement,
    badge,
    clock_text,
    controls,
    eta_seconds,
    form_heading,
    progress_text,
    reading_row,
    rows,
    run_row,
    running_line,
    tooltip,
)


def test_every_state_has_its_own_badge_text_and_colour():
    states = ("created", "running", "paused", "stopping", "canceled", "aborted",
              "interrupted", "completed", "failed")
    assert set(states) <= set(BADGES)
    assert badge("stopping")[0] == "stopping after this step"
    assert len({badge(s)[1] for s in ("running", "paused", "completed", "aborted")}) == 4
    assert badge("something_new") == ("something_new", "#7f8c8d")


@pytest.mark.parametrize("state, enabled", [
    (None, set()),
    ("reading", set()),
    ("created", {"run", "duplicate", "rename", "reconfigure", "note"}),
    ("running", {"pause", "stop", "abort", "duplicate", "note"}),
    ("paused", {"pause", "stop", "abort", "duplicate", "note"}),
    ("stopping", {"pause", "stop", "abort", "duplicate", "note"}),
    ("not_responding", {"stop", "abort", "duplicate", "note"}),
    ("completed", {"duplicate", "note"}),
    ("canceled", {"resume", "duplicate", "note"}),
    ("aborted", {"resume", "duplicate", "note"}),
    ("interrupted", {"resume", "duplicate", "note"}),
    ("failed", {"resume", "duplicate", "note"}),
])
def test_controls_follow_the_state(state, enabled):
    assert controls(state).enabled() == enabled


def test_a_disabled_button_says_why_and_an_enabled_one_says_nothing():
    decided = controls("completed")
    assert decided.duplicate.enabled and decided.duplicate.tip == ""
    assert not decided.resume.enabled and "cannot be resumed" in decided.resume.tip
    assert "duplicate it instead" in decided.reconfigure.tip
    assert controls(None).run.tip == "Select a run first"


def test_pause_is_one_toggle_that_reads_continue_once_a_pause_is_asked():
    assert controls("running").pause_label == "Pause"
    assert controls("running", pause_asked=True).pause_label == "Continue"
    assert controls("paused").pause_label == "Continue"


def test_a_stop_cannot_be_asked_twice_but_abort_stays_until_asked():
    stopping = controls("stopping", stop_asked="cancel")
    assert not stopping.stop.enabled and not stopping.pause.enabled and stopping.abort.enabled
    assert not controls("stopping", stop_asked="abort").abort.enabled


def test_a_run_row_decides_its_own_controls():
    run = RunRow("r", "stopping", "stopping after this step", "#ca6f1e", stop_asked="cancel")
    assert run.controls() == controls("stopping", stop_asked="cancel")


def test_eta_is_mean_step_times_steps_left_less_the_step_in_flight():
    assert eta_seconds(None, 10) is None  # nothing measured: no promise
    assert eta_seconds(2.0, 0) == 0.0
    assert eta_seconds(2.0, 10) == 20.0
    assert eta_seconds(2.0, 10, in_flight_for=1.5) == 18.5
    assert eta_seconds(2.0, 1, in_flight_for=30.0) == 0.0  # a slow step never makes it negative


def test_a_row_says_progress_eta_and_what_was_asked():
    now = 1000.0
    status = {"run_id": "r1", "state": "stopping", "asked": {"stop": "cancel", "paused": False},
              "started_at": 900.0, "ended_at": None, "in_flight": {"step_id": "s5", "started": 999.0},
              "failed": 1, "last_failure": {"error": "RuntimeError('timeout')"}, "reports": ["hi"]}
    progress = {"completed": 4, "total": 10, "step_s": 2.0, "step": {"done": 1, "total": 3}}
    run = run_row(status, progress, now)
    assert run.badge == "stopping after this step" and run.stop_asked == "cancel"
    assert (run.done, run.total) == (4, 10)
    assert run.eta == pytest.approx(2.0 * 6 - 1.0)
    assert run.error == "RuntimeError('timeout')" and run.failed_attempts == 1
    assert run_row({**status, "state": "completed"}, progress, now).eta is None


def test_progress_reads_in_the_one_duration_format():
    run = RunRow("r", "running", "running", "#2471a3", done=2, total=10, eta=200.0,
                 step_progress={"done": 1, "total": 3, "detail": "reading"})
    assert progress_text(run) == "2 / 10 steps · ETA 3m 20s · step 1/3 reading"
    assert progress_text(RunRow("r", "completed", "completed", "#1e8449", done=10, total=10,
                                eta=5.0)) == "10 / 10 steps"
    assert progress_text(reading_row("r")) == ""


def test_table_rows_carry_text_cells_a_tip_and_the_state_as_their_look():
    status = {"run_id": "b", "state": "failed", "error": "boom", "started_at": 1.0,
              "ended_at": 2.0}
    run = run_row(status, {"completed": 3, "total": 4})
    (row,) = rows([run])
    assert row.key == "b" and row.look == "failed" and row.value is run
    assert row.cells[:3] == ("b", "failed", "3 / 4 steps")  # the table paints the bar
    assert row.cells[3] and row.cells[4]  # start and end as the operator reads them
    assert row.tip(2) == tooltip(run) and "last error: boom" in tooltip(run)
    assert row.sort_key(2) == 3


def test_a_run_reaching_an_outcome_is_announced_once():
    done = RunRow("r", "completed", "completed", "#1e8449", done=24, total=24)
    assert announcement("sweep", "running", done) == ("sweep run r completed after 24 of 24 steps",
                                                      True)
    assert announcement("sweep", "completed", done) is None  # no change
    assert announcement("sweep", None, done) is None  # first seen: nothing happened
    assert announcement("sweep", "reading", done) is None
    failed = RunRow("r", "failed", "failed", "#922b21")
    assert announcement("sweep", "running", failed) == ("sweep run r failed", False)


def test_the_status_line_names_running_and_paused_runs():
    runs = [("r1", "paused"), ("r2", "running"), ("r3", "completed"), ("r4", "paused")]
    assert running_line("sweep", runs) == ("experiment sweep run r2",
                                           "experiment sweep runs r1, r4 paused")
    assert running_line(None, [("r1", "paused")]) == ("experiment run r1 paused",)
    assert running_line("sweep", [("r3", "completed")]) == ()


def test_the_form_says_whose_configuration_it_holds():
    created = RunRow("tonight", "created", "created", "#7f8c8d")
    done = RunRow("demo", "completed", "completed", "#1e8449")
    assert form_heading("sweep", done, shows_run=True).startswith(
        "The configuration run demo ran with.")
    assert "Reconfigure gives it" in form_heading("sweep", created, shows_run=True)
    assert form_heading("sweep", None, shows_run=False) == \
        "A new run of sweep: the module's defaults."
    assert form_heading("sweep", done, shows_run=False, has_config=False) == \
        "A new run of sweep: the module's defaults (run demo has no configuration file of its own)."
    assert "(changed here since)" in form_heading("sweep", done, shows_run=True, edited=True)


def test_start_and_end_times_carry_their_date():
    import time
    epoch = time.mktime((2026, 11, 30, 23, 5, 9, 0, 0, -1))
    assert clock_text(epoch, year=2026) == time.strftime("%d %b 23:05", time.localtime(epoch))
    assert clock_text(epoch, year=2027) == "2026-11-30 23:05" and clock_text(None) == ""
    run = RunRow("r", "completed", "completed", "#1e8449", started=epoch, ended=epoch + 60)
    assert "started 2026-11-30 23:05:09, ended 2026-11-30 23:06:09" in tooltip(run)


def test_a_run_whose_module_exited_before_it_started_reads_never_started():
    status = {"run_id": "x", "state": "created", "start_failed": "no stage",
              "problem": "it never started: …"}
    run = run_row(status, {})
    assert run.state == "created" and run.badge == "never started"
    assert run.controls().run.enabled and run.controls().reconfigure.enabled
