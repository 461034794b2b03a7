"""Fast paths against the general solvers on many random TopDown groups (the issue's "must show").

* IntOpt's per-group L-inf objective equals the HiGHS MIP optimum and the CP-SAT optimum;
* the continuous projection equals the HiGHS QP to 1e-6 (the QP is strictly convex: same point);
* the integer L2 rounding equals the HiGHS integer L2 MIP (exact PWL epigraph) in objective, and
  CP-SAT's exact integer L2 (integer targets);
* the integer L-inf optimum is the ceiling of the LP optimum for integer targets, per group.
"""

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem

G = 500


def random_level(seed: int, groups: int = G, integer_targets: bool = False):
    """``groups`` groups, b in [1, 12], parent totals in [0, 40] with zeros, negative noisy entries."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 13, groups)
    offsets = np.r_[0, np.cumsum(sizes)]
    totals = rng.integers(0, 41, groups).astype(float)
    totals[rng.random(groups) < 0.1] = 0.0
    x = np.repeat(totals / sizes, sizes) + rng.normal(0, 4, offsets[-1])
    if integer_targets:
        x = np.rint(x)
    assert (x < 0).any() and (totals == 0).any()
    return x, offsets, totals


def per_group(p: Problem, values: np.ndarray, offsets: np.ndarray, kind: str) -> np.ndarray:
    """Per-group objective (children are nodes G.. in from_groups layout)."""
    g = offsets.size - 1
    dev = values[g:] - p.target[g:]
    gid = np.repeat(np.arange(g), np.diff(offsets))
    if kind == "linf":
        out = np.zeros(g)
        np.maximum.at(out, gid, np.abs(dev))
        return out
    return np.bincount(gid, weights=dev ** 2, minlength=g)


@pytest.fixture(scope="module")
def linf_level():
    x, off, tot = random_level(11)
    return Problem.from_groups(x, off, tot, objective="linf"), off


def test_intopt_equals_highs_mip_per_group(linf_level):
    p, off = linf_level
    a = hierdp.solve(p, solver="intopt")
    b = hierdp.solve(p, solver="highs")
    np.testing.assert_allclose(per_group(p, a.values, off, "linf"), per_group(p, b.values, off, "linf"),
                               atol=1e-9)


def test_intopt_equals_cpsat_per_group(linf_level):
    p, off = linf_level
    a = hierdp.solve(p, solver="intopt")
    c = hierdp.solve(p, solver="ortools")
    assert c.stats["backend"] == "cp-sat"
    np.testing.assert_allclose(per_group(p, a.values, off, "linf"), per_group(p, c.values, off, "linf"),
                               atol=1e-9)


def test_projection_equals_highs_qp():
    x, off, tot = random_level(12)
    p = Problem.from_groups(x, off, tot, objective="l2", integer=False)
    a = hierdp.solve(p, solver="projection")
    b = hierdp.solve(p, solver="highs")
    np.testing.assert_allclose(a.values, b.values, atol=1e-6)


def test_integer_l2_rounding_equals_highs_pwl_mip():
    x, off, tot = random_level(13, groups=200)
    p = Problem.from_groups(x, off, tot, objective="l2", integer=True)
    a = hierdp.solve(p, solver="projection")
    b = hierdp.solve(p, solver="highs")
    np.testing.assert_allclose(per_group(p, a.values, off, "l2"), per_group(p, b.values, off, "l2"), atol=1e-7)


def test_integer_l2_rounding_equals_cpsat_for_integer_targets():
    x, off, tot = random_level(15, groups=200, integer_targets=True)
    p = Problem.from_groups(x, off, tot, objective="l2", integer=True)
    a = hierdp.solve(p, solver="projection")
    c = hierdp.solve(p, solver="ortools")
    np.testing.assert_allclose(per_group(p, a.values, off, "l2"), per_group(p, c.values, off, "l2"), atol=1e-9)


def test_integer_linf_is_ceiling_of_lp_for_integer_targets():
    x, off, tot = random_level(14, groups=300, integer_targets=True)
    p_int = Problem.from_groups(x, off, tot, objective="linf", integer=True)
    p_lp = Problem.from_groups(x, off, tot, objective="linf", integer=False)
    mip = per_group(p_int, hierdp.solve(p_int, solver="ortools").values, off, "linf")
    lp = per_group(p_lp, hierdp.solve(p_lp, solver="highs").values, off, "linf")
    np.testing.assert_allclose(mip, np.ceil(lp - 1e-7), atol=1e-9)
