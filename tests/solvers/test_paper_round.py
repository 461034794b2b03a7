"""The ``paper_round`` plug-in: paper 000's TDA_l2 rounding as a named heuristic of the registry.

Oracle: the rule written plainly per group (round half to even, then add 1 to the largest entries or
remove 1 from the smallest non-zero ones, ties by position), on the exact continuous projection
computed here by bisection on the threshold."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hierdp
from hierdp.models import Problem
from hierdp.solvers import UnsupportedProblem, choose, get, solve_groups


def _projection(x: np.ndarray, c: float) -> np.ndarray:
    """argmin ||y - x||² over y >= 0, sum y = c: y = max(x - t, 0), t found by bisection (to 1e-13)."""
    lo, hi = x.min() - c - 1.0, x.max() + 1.0
    for _ in range(200):
        t = (lo + hi) / 2
        if np.maximum(x - t, 0).sum() > c:
            lo = t
        else:
            hi = t
    return np.maximum(x - (lo + hi) / 2, 0)


def _paper_rule(p: np.ndarray, c: int) -> np.ndarray:
    y = np.rint(p).astype(int)
    while (d := c - y.sum()) != 0:
        if d > 0:
            for i in sorted(range(len(y)), key=lambda i: (-y[i], i))[:d]:
                y[i] += 1
        else:
            for i in sorted([i for i in range(len(y)) if y[i] > 0], key=lambda i: (y[i], i))[:-d]:
                y[i] -= 1
    return y


@settings(max_examples=40, deadline=None)
@given(groups=st.lists(st.tuples(st.lists(st.floats(-10, 40), min_size=1, max_size=6), st.integers(0, 50)),
                       min_size=1, max_size=5))
def test_paper_round_applies_the_paper_rule_to_the_projection(groups):
    sizes = [len(v) for v, _ in groups]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    totals = np.array([c for _, c in groups])
    x = np.concatenate([np.array(v) for v, _ in groups])
    got = solve_groups(x, offsets, totals, solver="paper_round", objective="l2", integer=True)
    assert got.solver == "paper_round" and got.stats["exact"] is False
    for g in range(len(groups)):
        seg = slice(offsets[g], offsets[g + 1])
        proj = _projection(x[seg], float(totals[g]))
        # skip groups where the projection sits within 1e-9 of a rounding tie (x.5): the plug-in's
        # projection and the bisection above may fall on different sides of it
        if np.any(np.abs(proj - np.floor(proj) - 0.5) < 1e-9):
            continue
        assert np.array_equal(got.values[seg], _paper_rule(proj, int(totals[g])))


def test_the_problem_path_gives_the_same_answer():
    x = np.array([3.2, 7.9, 0.4, 5.5, 1.1])
    p = Problem.from_groups(x, [0, 2, 5], [9.0, 6.0], objective="l2", integer=True)
    a = hierdp.solve(p, solver="paper_round")
    b = solve_groups(x, np.array([0, 2, 5]), np.array([9, 6]), solver="paper_round", objective="l2")
    assert np.array_equal(a.values[2:], b.values) and a.stats["exact"] is False


def test_auto_never_picks_the_heuristic_and_it_says_what_it_is():
    rng = np.random.default_rng(0)
    for _ in range(20):
        k = int(rng.integers(1, 6))
        p = Problem.from_groups(rng.normal(5, 3, 2 * k), [0, k, 2 * k], [10.0, 4.0], objective="l2", integer=True)
        assert choose(p).name == "projection"
    assert "NOT the integer L2 optimum" in get("paper_round").capabilities.description


def test_it_refuses_what_it_cannot_do():
    with pytest.raises(UnsupportedProblem):
        solve_groups(np.array([1.0, 2.0]), np.array([0, 2]), np.array([3]), solver="paper_round", objective="linf")
    with pytest.raises(UnsupportedProblem):  # the continuous step must solve continuous L2
        solve_groups(np.array([1.0, 2.0]), np.array([0, 2]), np.array([3]), solver="paper_round", objective="l2",
                     continuous_solver="intopt")
