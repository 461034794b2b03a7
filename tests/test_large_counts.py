"""Large counts: exact consistency up to float64's integer range, clear refusals beyond it."""

import numpy as np
import pandas as pd
import pytest

from hierdp.hierarchy import CountError, Hierarchy
from hierdp.mechanisms import InfTDA
from hierdp.models import Problem
from hierdp.solvers.intopt import intopt
from hierdp.solvers.projection import integer_l2


def exact_linf_optimum(x: list[int], c: int) -> int:
    """Smallest integer t with sum(max(0, x_i - t)) <= c <= sum(max(0, x_i + t)), in Python ints."""
    lo, hi = 0, max(abs(v) for v in x) + c
    while lo < hi:
        t = (lo + hi) // 2
        if sum(max(0, v - t) for v in x) <= c <= sum(max(0, v + t) for v in x):
            hi = t
        else:
            lo = t + 1
    return lo


@pytest.mark.parametrize("c", [10**12 + 7, 2**44 - 9, 10**15 + 7, 2**52 - 5])
def test_intopt_integer_groups_stay_consistent_and_optimal(c):
    xi = [c - 3, 1, 2, 0, 4]
    y = intopt(np.array(xi, dtype=float), c)
    assert int(y.sum()) == c and (y >= 0).all()
    assert max(abs(int(a) - b) for a, b in zip(y, xi, strict=False)) == exact_linf_optimum(xi, c)


@pytest.mark.parametrize("c", [10**12 + 7, 2**44 - 9])
def test_real_valued_groups_stay_consistent(c):
    x = np.array([c - 3.5, 1.25, 2.75, -0.5])
    for f in (intopt, integer_l2):
        y = f(x, c)
        assert y.sum() == c and (y >= 0).all()


def test_beyond_float64_resolution_is_refused():
    with pytest.raises(ValueError, match="2\\^52"):
        intopt(np.array([1.0, 2.0]), 2**53)
    with pytest.raises(ValueError, match="2\\^44"):
        integer_l2(np.array([2.0**45, 2.0]), 2**45)


def test_integer_violations_are_exact_at_scale():
    p = Problem.from_groups([5e9, 5e9], [0, 2], [10**10])
    assert p.violations(np.array([10**10, 5 * 10**9, 5 * 10**9])) == []
    assert p.violations(np.array([10**10, 5 * 10**9, 5 * 10**9 - 10]))  # a relative check would pass


def test_release_at_large_counts_is_consistent():
    df = pd.DataFrame({"a": ["x", "x", "y"], "b": ["p", "q", "r"], "n": [2 * 10**12 + 1, 10**12 + 3, 2 * 10**12 + 1]})
    tree = Hierarchy.from_frame(df, levels=["a", "b"], count="n", observed_domain_public=True)
    rel = InfTDA(rho=1.0).release(tree, seed=0)
    assert rel.check_consistency() == []
    assert int(rel.levels[1].values.sum()) == int(tree.counts[0])


def test_from_frame_refuses_int64_overflow():
    df = pd.DataFrame({"a": ["x", "y"], "n": [2**62, 2**62]})
    with pytest.raises(CountError, match="beyond int64"):
        Hierarchy.from_frame(df, levels=["a"], count="n")
