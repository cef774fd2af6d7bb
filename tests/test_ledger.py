"""Run-status stamps in spaCR's format: written here, read there, and the other way round."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from spacrq.ledger import Ledger, RunStatusUnreadable, read_run_status, sidecar_path

DATA = Path(__file__).parent / "queue" / "data"


def test_a_real_spacr_stamp_is_read():
    stamps = read_run_status(DATA / "spacr_measurements.csv")
    assert len(stamps) == 1
    assert (stamps[0]["n_attempted"], stamps[0]["n_failed"], stamps[0]["status"]) == (3, 1, "partial")
    assert stamps[0]["failures"][0]["item"] == "A02"


def test_our_stamp_has_exactly_spacr_fields(tmp_path):
    theirs = json.loads((DATA / "spacr_measurements.run_status.json").read_text())[0]
    ledger = Ledger("measure_crop")
    for well in ("A01", "A02", "A03"):
        with ledger.item(well, stage="measure"):
            if well == "A02":
                raise ValueError("no cells found in A02")
    path = ledger.stamp(tmp_path / "measurements.csv")
    assert path == tmp_path / "measurements.run_status.json"
    ours = json.loads(path.read_text())[0]
    assert list(ours) == list(theirs)
    assert list(ours["failures"][0]) == list(theirs["failures"][0])
    assert (ours["status"], ours["n_attempted"], ours["n_succeeded"], ours["n_failed"]) == \
        ("partial", 3, 2, 1)
    assert ours["success_by_stage"] == {"measure": 2}


def test_stamps_accumulate_one_record_per_run(tmp_path):
    for _ in range(3):
        ledger = Ledger("x")
        ledger.succeeded("a")
        ledger.stamp(tmp_path / "out.csv")
    assert [s["status"] for s in read_run_status(tmp_path / "out.csv")] == ["complete"] * 3


def test_sqlite_artifacts_carry_their_stamps_in_a_table(tmp_path):
    db = tmp_path / "measurements.db"
    ledger = Ledger("measure")
    ledger.failed("A01", RuntimeError("gpu lost"))
    ledger.stamp(db)
    ledger.stamp(db)
    stamps = read_run_status(db)
    assert len(stamps) == 2 and stamps[0]["failures"][0]["exc_type"] == "RuntimeError"


def test_a_torn_stamp_is_unreadable_not_complete(tmp_path):
    (tmp_path / "out.run_status.json").write_text('[{"status": "comp')
    with pytest.raises(RunStatusUnreadable, match="did not finish"):
        read_run_status(tmp_path / "out.csv")


def test_never_stamped_is_no_information(tmp_path):
    assert read_run_status(tmp_path / "nothing.csv") == []
    assert read_run_status(tmp_path / "nothing.db") == []
    assert sidecar_path(tmp_path / "a.b.csv").name == "a.b.run_status.json"


def test_empty_ledger_status_is_empty():
    assert Ledger().status == "empty" and Ledger().to_dict()["failure_rate"] == 0.0
