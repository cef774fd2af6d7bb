"""A run's records kept column by column (spacrq.experiments.records), without Qt."""
from __future__ import annotations

import gc

import numpy as np

from spacrq.experiments.records import (RecordColumns, chunk_of, field_value,
                                        numeric_fields)


def _record(i: int, value) -> dict:
    return {"index": i, "saved_at": f"t{i}", "type": "value",
            "provenance": {"step_id": f"p{i}", "params": {"x": i}}, "value": value}


def test_measured_fields_are_offered_before_echoes_of_the_inputs():
    record = {"index": 3, "provenance": {"params": {"setpoint_mV": 60.0}},
              "value": {"step": 3, "setpoint_mV": 60.0, "signal": 0.4, "ok": True, "name": "x"}}
    assert numeric_fields(record) == ["value.signal", "value.step", "value.setpoint_mV"]
    assert numeric_fields({"index": 0, "value": 2.5}) == ["value"]
    assert field_value(record, "value.signal") == 0.4
    assert field_value(record, "value.ok") is None and field_value(record, "value.nope") is None


def test_a_chunk_holds_each_field_as_one_numpy_column():
    chunk = chunk_of([_record(i, {"x": i, "signal": i / 10}) for i in range(5)], first=7)
    assert (chunk.first, chunk.count, chunk.columns) == (7, 5, ("x", "signal"))
    assert chunk.index.dtype == np.float64 and list(chunk.index) == [0, 1, 2, 3, 4]
    assert isinstance(chunk.cells["signal"].numbers, np.ndarray)
    assert list(chunk.cells["x"].ints) == [True] * 5 and not chunk.cells["signal"].ints.any()
    assert chunk.step == ("p0", "p1", "p2", "p3", "p4") and chunk.saved_at[4] == "t4"
    assert chunk.fields == ("value.signal", "value.x") and chunk.swept == ("value.x",)
    xs, ys = chunk.series("value.signal")
    assert list(xs) == [0, 1, 2, 3, 4] and list(ys) == [0.0, 0.1, 0.2, 0.3, 0.4]
    plot = chunk.plot
    assert plot["fields"] == ["value.signal", "value.x"] and plot["swept"] == ["value.x"]


def test_records_of_every_shape_become_cells():
    table = RecordColumns()
    table.add(chunk_of([_record(0, {"x": 0, "signal": 1.5, "index": 99, "mode": "fast",
                                    "flag": True, "deep": {"a": [1]}}),
                        _record(1, 2.25),
                        {"index": 2, "saved_at": "t", "type": "blob", "blob": "a.npy"},
                        "not an object", _record(3, {"big": 2 ** 60})]))
    assert table.count == 4
    assert table.columns == ["index", "step", "x", "signal", "mode", "flag", "deep", "value",
                             "type", "big"]
    cells = [[table.cell(r, c) for c in table.columns] for r in range(4)]
    assert cells[0] == ["0", "p0", "0", "1.5", "fast", "True", '{"a": [1]}', "", "", ""]
    assert cells[1] == ["1", "p1", "", "", "", "", "", "2.25", "value", ""]
    assert cells[2] == ["2", "", "", "", "", "", "", "", "blob", ""]
    assert cells[3][-1] == str(2 ** 60)  # beyond a float's exactness: kept as written
    assert table.saved_at(1) == "t1" and table.step(2) == ""
    assert list(table.series("value")[1]) == [2.25]


def test_chunks_append_and_a_field_new_in_a_later_chunk_lines_up_by_row():
    table = RecordColumns()
    table.add(chunk_of([_record(i, {"signal": float(i)}) for i in range(3)]))
    added = table.add(chunk_of([_record(i, {"signal": float(i), "t": i * 2.0})
                                for i in range(3, 6)], first=3))
    assert added == ["t"] and table.count == 6
    assert [table.cell(r, "t") for r in range(6)] == ["", "", "", "6", "8", "10"]
    xs, ys = table.series("value.t")
    assert list(xs) == [3, 4, 5] and list(ys) == [6.0, 8.0, 10.0]
    assert list(table.series("value.signal")[0]) == [0, 1, 2, 3, 4, 5]
    table.clear()
    assert table.count == 0 and table.columns == ["index", "step"]


def test_a_long_table_adds_nothing_to_the_collectors_scans():
    """Numbers are kept in arrays, so a full collection does not walk 30 000 records."""
    table = RecordColumns()
    gc.collect()
    before = len(gc.get_objects())
    for start in range(0, 30_000, 3000):
        table.add(chunk_of([_record(i, {"x": i, "signal": i * 0.5}) for i in range(start, start + 3000)],
                           first=start))
    gc.collect()
    assert table.count == 30_000 and table.cell(29_999, "signal") == "14999.5"
    assert len(gc.get_objects()) - before < 200  # as read, 90 000 nested dicts would be tracked
