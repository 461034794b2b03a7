"""The forest kernels of ``hierdp._segments`` (the one home of range gathers and children CSRs)
against plain Python loops over random forests and runs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hierdp._segments import children_csr, depth_by_doubling, gather_ranges


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 6)), max_size=30))
def test_gather_ranges_is_the_concatenation_of_the_runs(runs) -> None:
    starts = np.array([s for s, _ in runs], np.int64)
    lengths = np.array([n for _, n in runs], np.int64)
    idx, offsets = gather_ranges(starts, lengths)
    want = [i for s, n in runs for i in range(s, s + n)]
    assert idx.tolist() == want and idx.dtype == np.int64
    assert offsets.tolist() == [0, *np.cumsum([n for _, n in runs]).tolist()]
    for g, (s, n) in enumerate(runs):
        assert idx[offsets[g]:offsets[g + 1]].tolist() == list(range(s, s + n))


def _forest(draw_parent: list[int]) -> np.ndarray:
    # node i's parent is an earlier node or -1 (a root): always acyclic
    return np.array([-1 if p < 0 or i == 0 else p % i for i, p in enumerate(draw_parent)], np.int64)


@settings(max_examples=60)
@given(st.lists(st.integers(-3, 40), min_size=1, max_size=40))
def test_children_csr_and_depths_against_loops(raw) -> None:
    parent = _forest(raw)
    ptr, child = children_csr(parent)
    for u in range(parent.size):
        assert child[ptr[u]:ptr[u + 1]].tolist() == [i for i in range(parent.size) if parent[i] == u]
    depth = []
    for i in range(parent.size):
        d, j = 0, i
        while parent[j] >= 0:
            j, d = parent[j], d + 1
        depth.append(d)
    assert depth_by_doubling(parent).tolist() == depth


def test_children_csr_between_two_levels() -> None:
    # parents of a level's nodes index the level above: 3 parents, the middle one childless
    ptr, child = children_csr(np.array([0, 0, 2, 2, 2]), 3)
    assert ptr.tolist() == [0, 2, 2, 5] and child.tolist() == [0, 1, 2, 3, 4]
