"""HTF's split objective (eq. 5): exact values, Theorem 1's sensitivity, the level-batched probe,
and the integer grid it is noised on.

Oracles: a brute-force double loop in exact Fractions over every cell (written here from eq. 5-6),
the paper's worked example (Fig. 2b), and enumeration of every neighbouring dataset of small grids."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from hierdp.mechanisms.spatial.htf import LevelProbe, cell_offsets
from hierdp.mechanisms.spatial.objective import gridded_objective, split_cost_terms_all, split_objective_all
from hierdp.hierarchy.spatial import prefix_sums_2d


def brute_objective(block, axis, k):
    """Eq. (5): sum over part 1 (first k rows, or columns) of |c - mu1| plus part 2's, in Fractions."""
    b = np.asarray(block).tolist()
    if axis == 1:
        b = [list(col) for col in zip(*b, strict=False)]
    p1 = [c for row in b[:k] for c in row]
    p2 = [c for row in b[k:] for c in row]
    m1, m2 = Fraction(sum(p1), len(p1)), Fraction(sum(p2), len(p2))
    return sum(abs(c - m1) for c in p1) + sum(abs(c - m2) for c in p2)


def exact_all(block, axis):
    a, b, n1, n2 = split_cost_terms_all(block, axis)
    return [Fraction(int(x), int(y)) + Fraction(int(z), int(w)) for x, y, z, w in zip(a, n1, b, n2, strict=False)]


def test_all_splits_equal_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(300):
        u, v = (int(s) for s in rng.integers(1, 8, 2))
        block = rng.poisson(rng.uniform(0, 6), (u, v))
        if rng.random() < 0.3:
            block[rng.random((u, v)) < 0.5] = 0  # sparse blocks: many equal values
        for axis in (0, 1):
            length = block.shape[axis]
            assert exact_all(block, axis) == [brute_objective(block, axis, k) for k in range(1, length)]
            np.testing.assert_allclose(split_objective_all(block, axis),
                                       [float(brute_objective(block, axis, k)) for k in range(1, length)], rtol=1e-12)


def test_paper_figure_2b():
    # node B1: rows top to bottom [0,0],[3,3],[3,3]; the paper indexes rows from the bottom (y up),
    # so row 0 here is the bottom row [3,3]. Cutting off the top row costs 0 (k* = 2), the bottom 6,
    # no division 8.
    block = np.array([[3, 3], [3, 3], [0, 0]])
    assert exact_all(block, 0) == [6, 0]
    mean = Fraction(12, 6)
    assert sum(abs(c - mean) for c in block.ravel().tolist()) == 8


def test_sensitivity_theorem_1_by_enumerating_neighbours():
    """Adding or removing one point in any cell moves every o_k by at most 2(1 - 1/n_side) < 2, and
    the bound is attained (so sensitivity 2 cannot be lowered to a constant below it)."""
    rng = np.random.default_rng(1)
    worst_ratio = 0.0
    for _ in range(120):
        u, v = (int(s) for s in rng.integers(2, 5, 2))
        block = rng.integers(0, 4, (u, v))
        for axis in (0, 1):
            base = exact_all(block, axis)
            width = block.shape[1 - axis]
            for i in range(u):
                for j in range(v):
                    for delta in (1, -1):
                        if block[i, j] + delta < 0:
                            continue
                        nb = block.copy()
                        nb[i, j] += delta
                        moved = exact_all(nb, axis)
                        line = i if axis == 0 else j
                        for k, (a, b) in enumerate(zip(base, moved, strict=False), start=1):
                            n_side = (k if line < k else block.shape[axis] - k) * width
                            bound = 2 * (1 - Fraction(1, n_side))
                            assert abs(a - b) <= bound <= 2
                            worst_ratio = max(worst_ratio, float(abs(a - b) / bound) if bound else 0.0)
    assert worst_ratio == 1.0


def test_gridded_objective_is_the_exact_floor_and_has_sensitivity_2_grid_plus_1():
    rng = np.random.default_rng(2)
    bits = 7
    for _ in range(150):
        u, v = (int(s) for s in rng.integers(2, 5, 2))
        block = rng.integers(0, 5, (u, v))
        a, b, n1, n2 = split_cost_terms_all(block, 0)
        g = gridded_objective(a, b, n1, n2, bits)
        for x, y, z, w, got in zip(a, n1, b, n2, g, strict=False):
            want = (int(x) * 2 ** bits) // int(y) + (int(z) * 2 ** bits) // int(w)
            assert int(got) == want
            scaled = (Fraction(int(x), int(y)) + Fraction(int(z), int(w))) * 2 ** bits
            assert scaled - 2 < got <= scaled
        for i in range(u):
            for j in range(v):
                nb = block.copy()
                nb[i, j] += 1
                g2 = gridded_objective(*split_cost_terms_all(nb, 0), bits)
                assert np.all(np.abs(g2 - g) <= 2 * 2 ** bits + 1)


def test_level_probe_equals_the_per_node_objective():
    """The batched probe over a level of random nodes equals eq. (5) node by node."""
    rng = np.random.default_rng(3)
    counts = rng.poisson(2.0, (20, 30))
    prefix = prefix_sums_2d(counts)
    rects = np.array([[0, 7, 0, 12], [0, 7, 12, 30], [7, 20, 0, 5], [7, 20, 5, 30], [3, 4, 0, 9]])
    # cells of the first four nodes (a partition), node after node; the fifth overlaps but is a node too
    cells = np.concatenate([(np.arange(r0, r1)[:, None] * 30 + np.arange(c0, c1)[None, :]).ravel()
                            for r0, r1, c0, c1 in rects])
    area = (rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])
    starts = np.concatenate([[0], np.cumsum(area)[:-1]])
    node = np.repeat(np.arange(len(rects)), area)
    for split_rows in (np.array([True, False, True, False, False]), np.array([False, True, True, True, False])):
        origin = np.where(split_rows, rects[:, 0], rects[:, 2])
        pos = cell_offsets(cells, 30, split_rows, origin, node)
        cnt = counts.ravel()[cells]
        totals = np.add.reduceat(cnt, starts)
        probe = LevelProbe(cnt, pos, node, starts, prefix, rects, split_rows, totals, 20)
        length = np.where(split_rows, rects[:, 1] - rects[:, 0], rects[:, 3] - rects[:, 2])
        for _ in range(5):
            k = np.array([int(rng.integers(1, L)) for L in length])
            a, b, n1, n2 = probe.terms(k)
            for j, (r0, r1, c0, c1) in enumerate(rects):
                want = brute_objective(counts[r0:r1, c0:c1], 0 if split_rows[j] else 1, int(k[j]))
                assert Fraction(int(a[j]), int(n1[j])) + Fraction(int(b[j]), int(n2[j])) == want


def test_bad_blocks_are_refused():
    with pytest.raises(ValueError, match="integer"):
        split_cost_terms_all(np.array([[0.5, 1.0]]), 1)
    with pytest.raises(ValueError, match="non-negative"):
        split_cost_terms_all(np.array([[1, -1], [0, 0]]), 0)
    assert split_cost_terms_all(np.array([[1, 2, 3]]), 0)[0].size == 0  # one row: no row split
