"""What a dropped path is, from its name only (never read: the GUI thread decides)."""
from __future__ import annotations

import builtins
import os
from pathlib import Path

import pytest

from spacrq.drops import QUEUE, SETTINGS, STORE, UNKNOWN, Drop, classify, kind_of


@pytest.mark.parametrize("path,kind", [
    ("/q/night.queue.json", QUEUE), ("/q/NIGHT.Queue.JSON", QUEUE),
    ("/s/plate1.csv", SETTINGS), ("/s/mask.json", SETTINGS), ("/s/Mask.JSON", SETTINGS),
    ("/w/runs/smooth-1/runs.jsonl", STORE), ("/w/runs/smooth-1/zarr.json", STORE),
    ("/w/old.jsonl", STORE), ("/w/runs/smooth-1", STORE), ("/w/runs/smooth-1/", STORE),
    ("/w/out.zarr", STORE),
    ("/w/photo.png", UNKNOWN), ("/w/notes.txt", UNKNOWN), ("/w/.hidden", UNKNOWN), ("", UNKNOWN),
])
def test_each_kind_is_told_by_its_name(path, kind):
    assert kind_of(path) == kind


def test_a_drop_sorts_its_paths_and_keeps_their_order(tmp_path):
    drop = classify(["/b.csv", "/n.queue.json", "/a.json", "/x.png", "/b.csv", "/w/store",
                     Path("/w/runs.jsonl")])
    assert drop == Drop(queues=("/n.queue.json",), settings=("/b.csv", "/a.json"),
                        stores=("/w/store", "/w/runs.jsonl"), unknown=("/x.png",))
    assert drop.only(QUEUE, SETTINGS, STORE, UNKNOWN) and not drop.only(SETTINGS)
    assert classify(["/a.csv", "/b.csv"]).only(SETTINGS)
    assert classify([]).empty and not classify([]).only(SETTINGS)


def test_nothing_is_read_or_listed(monkeypatch):
    def refuse(*_args, **_kw):
        raise AssertionError("a drop was decided by reading the disk")
    for name in ("stat", "lstat", "listdir", "scandir"):
        monkeypatch.setattr(os, name, refuse)
    monkeypatch.setattr(builtins, "open", refuse)
    assert classify(["/nowhere/a.queue.json", "/nowhere/store"]).queues == ("/nowhere/a.queue.json",)
