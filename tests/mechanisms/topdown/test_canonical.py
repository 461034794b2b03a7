"""The tie-break among a TopDown level's optima (hierdp.mechanisms.topdown.canonical).

Oracle: enumeration. On tiny groups every integer point with the parent's total is listed; the
optimal ones are those of the least L∞ / L1 / L2 distance to the noisy values (children without a
measurement have no term); the expected answer is, among them, the closest in L2 to the noisy values
(0 for unmeasured children), ties to the point whose earlier children are larger. Whichever optimum
a solver returned, the tie-break must give that one - in one call with other groups or alone.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hierdp.mechanisms.topdown.canonical import canonical_optimum, water_fill


def _objective(x, y, measured, objective):
    d = np.abs(x - np.where(measured, y, 0))[measured]
    if not d.size:
        return 0
    return {"linf": d.max(), "l1": d.sum(), "l2": (d * d).sum()}[objective]


def _optima(y, P, objective):
    measured = np.isfinite(y)
    points = [np.array(x) for x in itertools.product(range(P + 1), repeat=y.size) if sum(x) == P]
    values = [_objective(x, y, measured, objective) for x in points]
    return [x for x, v in zip(points, values, strict=True) if v == min(values)]


def _expected(optima, y):
    anchor = np.where(np.isfinite(y), y, 0)
    return min(optima, key=lambda x: (int(((x - anchor) ** 2).sum()), tuple(-x)))


@pytest.mark.parametrize("objective", ["linf", "l1", "l2"])
def test_every_optimum_a_solver_may_return_maps_to_one_canonical_point(objective):
    rng = np.random.default_rng({"linf": 1, "l1": 2, "l2": 3}[objective])
    groups = []
    for _ in range(400):
        n = int(rng.integers(1, 5))
        y = rng.integers(-3, 7, n).astype(float)
        if rng.random() < 0.3:
            y[rng.integers(0, n)] = np.nan  # a child without a measurement (per-node plans)
        P = int(rng.integers(0, 9))
        groups.append((y, P, _optima(y, P, objective)))
    for y, P, optima in groups:  # alone, from every optimum
        want = _expected(optima, y)
        for x0 in optima:
            got, kept = canonical_optimum(x0, y, np.array([0, y.size]), np.array([P]), objective)
            assert kept == 0 and np.array_equal(got, want), (y, P, x0, got, want)
    # all groups in one call, each starting from a random optimum: the same answers
    ys = np.concatenate([g[0] for g in groups])
    offsets = np.concatenate([[0], np.cumsum([g[0].size for g in groups])])
    starts = np.concatenate([g[2][rng.integers(len(g[2]))] for g in groups])
    got, kept = canonical_optimum(starts, ys, offsets, np.array([g[1] for g in groups]), objective)
    assert kept == 0
    assert np.array_equal(got, np.concatenate([_expected(g[2], g[0]) for g in groups]))


def test_water_filling_is_the_l2_closest_point_of_the_box():
    rng = np.random.default_rng(0)
    for _ in range(1500):
        n = int(rng.integers(1, 5))
        a = rng.integers(-4, 8, n)
        lo = rng.integers(0, 4, n)
        hi = lo + rng.integers(0, 5, n)
        P = int(rng.integers(lo.sum(), hi.sum() + 1))
        box = [np.array(x) for x in itertools.product(*[range(int(l), int(h) + 1) for l, h in zip(lo, hi, strict=True)])
               if sum(x) == P]
        want = min(box, key=lambda x: (int(((x - a) ** 2).sum()), tuple(-x)))
        assert np.array_equal(water_fill(a, lo, hi, np.array([0, n]), np.array([P])), want)


def test_large_magnitudes_stay_exact_and_a_worse_point_is_never_returned():
    # counts near 2^50: the int64 arithmetic is exact (an L2 objective of squares beyond 2^62 is
    # compared in Python integers)
    big = 2 ** 50
    y = np.array([big + 3, big - 8, 5.0])
    P = 2 * big
    x0 = np.array([big + 3, big - 8, 5], dtype=np.int64)  # the L1 optimum's point: sum = P
    got, kept = canonical_optimum(x0, y, np.array([0, 3]), np.array([P]), "l1")
    assert kept == 0 and got.sum() == P and _objective(got, y, np.isfinite(y), "l1") == 0
    # non-integer noisy values (continuous noise): nothing is moved, every group is reported
    got, kept = canonical_optimum(np.array([1, 1]), np.array([0.5, 1.5]), np.array([0, 2]), np.array([2]), "l2")
    assert kept == 1 and np.array_equal(got, [1, 1])
