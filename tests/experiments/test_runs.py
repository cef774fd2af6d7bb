"""Run directories: ids, creation, renaming, reconfiguring, duplicates, logs, reports, notes."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from spacrq import experiments as ex
from spacrq.experiments import ExperimentError


@pytest.mark.parametrize("bad", ["", "   ", "a/b", "a\\b", "..", ".", "../up", "x..y", "with space",
                                 "colon:", "tab\tx", "naïve"])
def test_check_run_id_refuses_what_is_not_one_folder_name(bad):
    with pytest.raises(ExperimentError) as err:
        ex.check_run_id(bad)
    assert "\n" not in str(err.value)


def test_check_run_id_trims_and_keeps_good_names():
    assert ex.check_run_id("  scan_20260101-090000 ") == "scan_20260101-090000"
    assert ex.check_run_id("A.b-c_1") == "A.b-c_1"


def test_run_dir_never_escapes_its_root(tmp_path):
    with pytest.raises(ExperimentError):
        ex.find_run(tmp_path, "../etc")
    with pytest.raises(ExperimentError):
        ex.create_run(tmp_path / "..", None)


def test_runs_of_lists_started_and_created_runs_newest_first(tmp_path):
    ex.create_run(tmp_path / "s_20260101-000000", "{}")
    (tmp_path / "s_20260102-000000").mkdir()
    (tmp_path / "s_20260102-000000" / "journal.jsonl").write_text("")
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "loose.txt").write_text("x")
    names = [p.name for p in ex.runs_of(tmp_path)]
    assert names == ["s_20260102-000000", "s_20260101-000000"]
    assert ex.latest(tmp_path).name == "s_20260102-000000"
    assert ex.find_run(tmp_path, None).name == "s_20260102-000000"
    assert ex.find_run(tmp_path, "s_20260101-000000") is not None
    assert ex.find_run(tmp_path, "missing") is None
    assert ex.runs_of(tmp_path / "nothing") == []
    assert ex.latest(tmp_path / "nothing") is None


def test_create_run_records_what_it_will_run_with_and_refuses_a_second(tmp_path):
    run = tmp_path / "r1"
    doc = ex.create_run(run, ex.config_text_of({"points": 3}), experiment="sweep", config="a.yaml")
    assert doc["experiment"] == "sweep" and doc["run_id"] == "r1"
    assert ex.created_of(run)["config"] == "a.yaml"
    assert ex.run_config_of(run) == {"points": 3}
    assert not ex.has_started(run)
    with pytest.raises(ExperimentError, match="already exists"):
        ex.create_run(run, None)
    assert ex.created_of(tmp_path / "none") == {}


def test_rename_moves_the_run_and_its_duplicates_follow(tmp_path):
    run = tmp_path / "r1"
    ex.create_run(run, ex.config_text_of({"points": 3}), experiment="sweep")
    copy = ex.duplicate_run(run, "r1-copy")
    assert ex.created_of(copy)["copy_of"] == "r1"
    moved = ex.rename_run(run, "r2")
    assert moved.name == "r2" and not run.exists()
    assert ex.created_of(moved)["run_id"] == "r2"
    assert ex.run_config_of(moved) == {"points": 3}
    assert ex.created_of(copy)["copy_of"] == "r2"
    with pytest.raises(ExperimentError, match="already exists"):
        ex.rename_run(moved, "r1-copy")
    with pytest.raises(ExperimentError):
        ex.rename_run(moved, "../escape")


def _start(run):
    (run / "plan.json").write_text(json.dumps({"config": {"points": 3}, "steps": [], "hash": "x"}))


def test_configuration_is_frozen_once_the_plan_exists(tmp_path):
    run = tmp_path / "r1"
    ex.create_run(run, ex.config_text_of({"points": 3}))
    ex.reconfigure_run(run, ex.config_text_of({"points": 5}), "b.yaml")
    assert ex.run_config_of(run) == {"points": 5}
    assert ex.created_of(run)["config"] == "b.yaml"
    _start(run)
    assert ex.has_started(run)
    with pytest.raises(ExperimentError, match="duplicate the run instead"):
        ex.reconfigure_run(run, ex.config_text_of({"points": 9}), "c.yaml")
    with pytest.raises(ExperimentError, match="duplicate the run instead"):
        ex.rename_run(run, "other")
    assert ex.run_config_of(run) == {"points": 5}


def test_duplicate_of_a_run_started_directly_takes_the_plan_configuration(tmp_path):
    run = tmp_path / "direct"
    run.mkdir()
    _start(run)
    (run / "journal.jsonl").write_text("")
    copy = ex.duplicate_run(run, "again")
    assert ex.run_config_of(copy) == {"points": 3}
    assert not ex.has_started(copy)


def test_report_and_kept_logs(tmp_path):
    run = tmp_path / "r1"
    ex.create_run(run, None)
    assert ex.report_of(run) is None
    (run / "report.html").write_text("<html></html>")
    report = ex.report_of(run)
    assert report["name"] == "report.html" and report["bytes"] == 13
    assert ex.kept_log(run) is None
    log_a = tmp_path / "job_20260101-000000.log"
    log_b = tmp_path / "job_20260102-000000.log"
    log_a.write_text("first")
    log_b.write_text("second")
    ex.keep_log(run, log_b)
    ex.keep_log(run, log_a)
    assert ex.kept_log(run).read_text() == "second"


def test_notes_round_trip_with_blank_lines_and_a_forged_mark(tmp_path):
    run = tmp_path / "r1"
    ex.create_run(run, None)
    assert ex.notes_of(run) == []
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    ex.add_note(run, "helium top-up\n\nrealigned", by="ada", when=when)
    ex.add_note(run, "--- 2026-01-01T00:00:00+00:00 by mallory\nnot a new note", by="bob")
    notes = ex.notes_of(run)
    assert len(notes) == 2
    assert notes[0] == {"at": "2026-01-02T03:04:05+00:00", "by": "ada",
                        "text": "helium top-up\n\nrealigned"}
    assert notes[1]["by"] == "bob"
    assert notes[1]["text"].startswith("--- 2026-01-01T00:00:00+00:00 by mallory")
    with pytest.raises(ExperimentError, match="empty"):
        ex.add_note(run, "  \n ", by="ada")
    with pytest.raises(ExperimentError):
        ex.add_note(tmp_path / "gone", "x", by="ada")
