"""The shared run-file protocol: atomic writes, durable appends, incremental tails, control."""
from __future__ import annotations

import json
import threading

import pytest
from hypothesis import given, settings, strategies as st

from spacrq import runfiles
from spacrq.runfiles import JsonlTail, RunFileError, TextTail


def test_write_json_replaces_whole_document_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "doc.json"
    runfiles.write_json(target, {"a": 1})
    runfiles.write_json(target, {"a": 2, "b": [1, 2]})
    assert json.loads(target.read_text()) == {"a": 2, "b": [1, 2]}
    assert [p.name for p in target.parent.iterdir()] == ["doc.json"]


def test_write_failure_keeps_previous_document(tmp_path, monkeypatch):
    target = tmp_path / "doc.json"
    runfiles.write_json(target, {"keep": True})

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(runfiles.os, "replace", boom)
    with pytest.raises(OSError):
        runfiles.write_json(target, {"keep": False})
    assert json.loads(target.read_text()) == {"keep": True}
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_read_json_missing_empty_and_garbled(tmp_path):
    assert runfiles.read_json(tmp_path / "nope.json", default=7) == 7
    (tmp_path / "empty.json").write_text("  \n")
    assert runfiles.read_json(tmp_path / "empty.json", default={}) == {}
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(RunFileError, match="bad.json is not valid JSON"):
        runfiles.read_json(tmp_path / "bad.json")


def test_tail_reads_only_new_lines_and_holds_back_a_torn_one(tmp_path):
    path = tmp_path / "j.jsonl"
    tail = JsonlTail(path)
    assert tail.read() == []
    runfiles.append_jsonl(path, {"n": 1})
    runfiles.append_jsonl(path, {"n": 2})
    assert tail.read() == [{"n": 1}, {"n": 2}]
    assert tail.read() == []
    with open(path, "a") as f:
        f.write('{"n": 3')  # a writer mid-line
    assert tail.read() == []
    offset = tail.offset
    with open(path, "a") as f:
        f.write('}\n{"n": 4}\n')
    assert tail.read() == [{"n": 3}, {"n": 4}]
    assert tail.offset > offset


def test_tail_skips_garbage_lines_and_counts_them(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text('{"n": 1}\nnot json\n\n{"n": 2}\n')
    tail = JsonlTail(path)
    assert tail.read() == [{"n": 1}, {"n": 2}]
    assert tail.bad_lines == 1


def test_tail_restarts_when_the_file_is_replaced_or_shrinks(tmp_path):
    path = tmp_path / "j.jsonl"
    runfiles.append_jsonl(path, {"n": 1})
    runfiles.append_jsonl(path, {"n": 2})
    tail = JsonlTail(path)
    assert len(tail.read()) == 2
    runfiles.write_text(path, '{"n": 9}\n')
    assert tail.read() == [{"n": 9}]
    assert tail.restarted


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "j.jsonl"

    def writer(k):
        for i in range(200):
            runfiles.append_jsonl(path, {"w": k, "i": i, "pad": "x" * 300}, durable=False)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records = runfiles.read_jsonl(path)
    assert len(records) == 800
    for k in range(4):
        assert [r["i"] for r in records if r["w"] == k] == list(range(200))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=5),  # (integers past 64 bits read as doubles)
                                st.integers(min_value=-2**63, max_value=2**64 - 1),
                                max_size=3), max_size=20),
       st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
def test_tail_over_arbitrary_write_splits_sees_every_record_once(tmp_path_factory, records, cuts):
    path = tmp_path_factory.mktemp("t") / "j.jsonl"
    blob = "".join(json.dumps(r) + "\n" for r in records).encode()
    tail = JsonlTail(path)
    seen = []
    pos = 0
    i = 0
    path.write_bytes(b"")
    while pos < len(blob):
        step = cuts[i % len(cuts)]
        with open(path, "ab") as f:
            f.write(blob[pos:pos + step])
        pos += step
        i += 1
        seen.extend(tail.read())
    seen.extend(tail.read())
    assert seen == records


def test_control_merge_read_clear(tmp_path):
    assert runfiles.asked(tmp_path) == {}
    runfiles.ask(tmp_path, paused=True)
    doc = runfiles.ask(tmp_path, stop="cancel", reason="coffee")
    assert doc["paused"] is True and doc["stop"] == "cancel" and doc["reason"] == "coffee"
    assert runfiles.asked(tmp_path)["stop"] == "cancel"
    runfiles.clear(tmp_path)
    assert runfiles.asked(tmp_path) == {}
    runfiles.clear(tmp_path)  # clearing twice is fine


def test_garbled_control_reads_as_nothing_asked_with_the_reason(tmp_path):
    (tmp_path / "control.json").write_text('{"stop": "ab')
    assert runfiles.asked(tmp_path) == {}
    assert "control.json" in runfiles.control_problem(tmp_path)
    # asking again repairs it
    assert runfiles.ask(tmp_path, stop="abort")["stop"] == "abort"
    assert runfiles.asked(tmp_path)["stop"] == "abort"


def test_progress_snapshot_round_trip(tmp_path):
    path = tmp_path / "progress.json"
    assert runfiles.read_progress(path) is None
    runfiles.write_progress(path, {"done": 3, "total": 10})
    doc = runfiles.read_progress(path)
    assert doc["done"] == 3 and doc["total"] == 10 and doc["written_at"] > 0
    path.write_text("garbage")
    assert runfiles.read_progress(path) is None


def test_text_tail_bounds_what_it_reads_from_a_huge_log(tmp_path):
    path = tmp_path / "job.log"
    with open(path, "wb") as f:
        f.write(b"x" * 5_000_000 + b"\nlast line\n")
    tail = TextTail(path, max_initial=4096)
    text, restarted = tail.read()
    assert text.endswith("last line\n") and len(text) <= 4096 and restarted
    with open(path, "ab") as f:
        f.write(b"more\n")
    text, restarted = tail.read()
    assert text == "more\n" and not restarted
    with open(path, "ab") as f:
        f.write(b"y" * 1_000_000)
    text, restarted = tail.read()
    assert restarted and "bytes of log skipped" in text and len(text) < 300_000


def test_an_append_after_a_torn_line_starts_on_a_fresh_line(tmp_path):
    path = tmp_path / "j.jsonl"
    runfiles.append_jsonl(path, {"n": 1})
    with open(path, "a") as f:
        f.write('{"n": 2, "torn')  # the writer died mid-line
    runfiles.append_jsonl(path, {"n": 3})
    tail = JsonlTail(path)
    assert tail.read() == [{"n": 1}, {"n": 3}]
    assert tail.bad_lines == 1
