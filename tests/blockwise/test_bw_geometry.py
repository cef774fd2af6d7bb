"""Geometry: ROIs, the block grid and its fits, conflict levels, cross-task overlaps."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from spacrq.blockwise.grid import BlockGrid
from spacrq.blockwise.roi import Roi, as_roi


def test_roi_arithmetic():
    a = Roi((0, 0), (10, 10))
    b = Roi((5, 8), (10, 10))
    assert a.intersect(b) == Roi((5, 8), (5, 2))
    assert a.intersects(b) and not a.intersects(Roi((10, 0), (3, 3)))
    assert a.contains(Roi((2, 2), (3, 3))) and not a.contains(b)
    assert a.contains((9, 9)) and not a.contains((10, 0))
    assert a.grow(2, 3) == Roi((-2, -2), (15, 15))
    assert Roi((3, 7), (10, 4)).snap_to_grid(4, "grow") == Roi((0, 4), (16, 8))
    assert Roi((3, 7), (10, 4)).snap_to_grid(4, "shrink") == Roi((4, 8), (8, 0))
    assert as_roi({"offset": [1], "shape": [2]}) == Roi((1,), (2,))
    assert Roi.from_dict(a.to_dict()) == a


def test_roi_rejects_bad_shapes():
    with pytest.raises(ValueError, match="negative"):
        Roi((0,), (-1,))
    with pytest.raises(ValueError, match="one offset per axis"):
        Roi((0, 0), (1,))


@pytest.mark.parametrize("fit, shape", [("valid", (3, 3)), ("overhang", (4, 4)), ("shrink", (4, 4))])
def test_fits(fit, shape):
    # writable region is 40 - 2*5 = 30... with total 45 it is 35: 3 whole blocks of 10 + a strip of 5
    g = BlockGrid(((0, 0), (45, 45)), ((0, 0), (20, 20)), ((5, 5), (10, 10)), fit=fit)
    assert g.shape == shape
    last_read, last_write = g.rois((shape[0] - 1, 0))
    if fit == "valid":
        assert g.total_roi.contains(last_read)
    elif fit == "overhang":
        assert not g.total_roi.contains(last_read)
        assert last_write.shape == (10, 10)
    else:
        assert g.total_roi.contains(last_read)
        assert last_write.shape == (5, 10)
        assert last_read == Roi((30, 0), (15, 20))


def test_blocks_tile_the_writable_region_once():
    g = BlockGrid(((0, 0), (45, 45)), ((0, 0), (20, 20)), ((5, 5), (10, 10)), fit="shrink")
    cover = np.zeros((45, 45), dtype=int)
    for sid in range(g.size):
        cover[g.block(sid).write_roi.to_slices()] += 1
    assert cover[5:40, 5:40].min() == 1 and cover.max() == 1
    assert g.block(g.id_of((2, 3))).coord == (2, 3)


def test_same_level_blocks_never_overlap_and_lower_levels_are_waited_for():
    g = BlockGrid(((0, 0), (100, 100)), ((0, 0), (30, 30)), ((10, 10), (10, 10)))
    levels = g.levels()
    counts = g.conflict_counts()
    for a, b in itertools.combinations(range(g.size), 2):
        ra, wa = g.rois(g.coord_of(a))
        rb, wb = g.rois(g.coord_of(b))
        conflict = ra.intersects(wb) or rb.intersects(wa)
        if conflict:
            assert levels[a] != levels[b]
            lower, higher = (a, b) if levels[a] < levels[b] else (b, a)
            assert higher in set(g.later_neighbours(lower))
    assert counts[0] == 0
    assert counts.sum() == sum(len(list(g.later_neighbours(s))) for s in range(g.size))


def test_no_conflicts_without_context_or_when_switched_off():
    assert not BlockGrid(((0,), (100,)), ((0,), (10,)), ((0,), (10,))).conflicts
    g = BlockGrid(((0,), (100,)), ((0,), (30,)), ((10,), (10,)), read_write_conflict=False)
    assert not g.conflicts and g.conflict_counts().sum() == 0


def test_upstream_counts_match_brute_force():
    up = BlockGrid(((0, 0), (60, 60)), ((0, 0), (10, 10)), ((0, 0), (10, 10)))
    down = BlockGrid(((0, 0), (60, 60)), ((0, 0), (24, 24)), ((7, 7), (10, 10)))
    counts = down.upstream_counts(up)
    for sid in range(down.size):
        read, _ = down.rois(down.coord_of(sid))
        brute = [u for u in range(up.size) if up.rois(up.coord_of(u))[1].intersects(read)]
        assert counts[sid] == len(brute)
        assert sorted(up.writers_of(read)) == brute
        for u in brute:
            assert sid in set(down.readers_of(up.rois(up.coord_of(u))[1]))


def test_too_small_volume_is_one_sentence():
    with pytest.raises(ValueError, match="too small"):
        BlockGrid(((0,), (5,)), ((0,), (10,)), ((0,), (10,)))
    with pytest.raises(ValueError, match="inside read_roi"):
        BlockGrid(((0,), (50,)), ((0,), (10,)), ((5,), (10,)))


def test_layout_hash_depends_on_geometry_only():
    a = BlockGrid(((0,), (100,)), ((0,), (10,)), ((0,), (10,)))
    b = BlockGrid(((0,), (100,)), ((0,), (10,)), ((0,), (10,)))
    c = BlockGrid(((0,), (100,)), ((0,), (20,)), ((0,), (20,)))
    assert a.layout_hash() == b.layout_hash() != c.layout_hash()
