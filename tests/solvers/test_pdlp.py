"""The ``pdlp`` plug-in (PDLP, OR-Tools' first-order QP method): registered, refuses what it cannot do,
and its answers match an exact continuous optimum within its stated tolerance (oracle: scipy's
SLSQP on a formulation written here, and the ``twopass`` closed form)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

import hierdp
from hierdp.models import Problem
from hierdp.solvers import UnsupportedProblem, get


def test_listed_with_capabilities_and_limits():
    assert "pdlp" in hierdp.solvers.names()
    text = hierdp.solvers.limits_text()
    assert "pdlp: OR-Tools PDLP" in text and "1e-06 relative on continuous answers" in text
    cap = get("pdlp").capabilities
    assert cap.continuous and not cap.integer and cap.objectives == {"l2"}


def test_refuses_integer_and_other_objectives():
    p = Problem.from_groups([1.2, 2.2], [0, 2], [3], objective="l2", integer=True)
    assert "integer problems not supported" in get("pdlp").unsupported(p)
    with pytest.raises(UnsupportedProblem):
        hierdp.solve(p, solver="pdlp")
    q = Problem.from_groups([1.2, 2.2], [0, 2], [3], objective="l1", integer=False)
    assert any("objective" in w for w in get("pdlp").unsupported(q))


def _slsqp(p: Problem) -> float:
    """Continuous weighted L2 with consistency, fixed nodes, bounds and rows (written here)."""
    n = p.n
    free = np.isnan(p.fixed)
    x0 = np.where(free, np.nan_to_num(p.target), p.fixed)
    term = free & ~np.isnan(p.target)
    cons = [{"type": "eq", "fun": lambda y, i=i: y[i] - p.fixed[i]} for i in np.flatnonzero(~free)]
    for i in range(n):
        kids = np.flatnonzero(p.parent == i)
        if kids.size:
            cons.append({"type": "eq", "fun": lambda y, i=i, kids=kids: y[kids].sum() - y[i]})
    if p.n_constraints:
        rows = p.constraints
        a = rows.matrix.toarray()
        for r in range(len(rows)):
            if np.isfinite(rows.lower[r]):
                cons.append({"type": "ineq", "fun": lambda y, r=r: a[r] @ y - rows.lower[r]})
            if np.isfinite(rows.upper[r]):
                cons.append({"type": "ineq", "fun": lambda y, r=r: rows.upper[r] - a[r] @ y})
    lo = np.maximum(p.lower, 0.0) if p.nonnegative else p.lower
    bounds = [(None if not np.isfinite(a_) else a_, None if not np.isfinite(b_) else b_) for a_, b_ in
              zip(lo, p.upper, strict=True)]
    res = minimize(lambda y: float(np.sum(p.weights[term] * (y[term] - p.target[term]) ** 2)), x0, bounds=bounds,
                   constraints=cons, method="SLSQP", options={"ftol": 1e-14, "maxiter": 1000})
    return float(res.fun)


def test_matches_an_exact_continuous_optimum():
    rng = np.random.default_rng(0)
    for trial in range(12):
        parent = np.array([-1, 0, 0, 1, 1, 2, 2])
        leaves = rng.integers(0, 20, 4).astype(float)
        z = np.r_[leaves.sum(), leaves[:2].sum(), leaves[2:].sum(), leaves]
        target = z + rng.normal(0, 3, 7)
        fixed = np.full(7, np.nan)
        fixed[0] = z[0]
        p = Problem(parent, target, fixed=fixed, objective="l2", integer=False,
                    weights=rng.choice([1.0, 2.0, 0.5], 7), upper=np.where(rng.random(7) < 0.3, z + 1, np.inf))
        if trial % 2:
            p.add_linear({3: 1, 5: 1}, upper=z[3] + z[5] - 1)
        sol = hierdp.solve(p, solver="pdlp")
        assert sol.bound is not None and sol.bound <= sol.objective + 1e-6 * max(1.0, sol.objective)
        assert sol.objective == pytest.approx(_slsqp(p), rel=1e-5, abs=1e-5)


def test_free_sign_tree_equals_the_two_pass_closed_form_and_cross_checks():
    rng = np.random.default_rng(1)
    parent = np.r_[-1, np.zeros(4, np.int64), np.repeat(np.arange(1, 5), 3)]
    p = Problem(parent, rng.normal(0, 10, parent.size), objective="l2", integer=False, nonnegative=False,
                weights=rng.uniform(0.5, 2, parent.size))
    sol = hierdp.solve(p, solver="pdlp", cross_check="twopass", cross_check_tolerance=1e-6)
    assert sol.stats["cross_check"]["solver"] == "twopass"


def test_time_limit_is_a_stop_not_an_answer():
    rng = np.random.default_rng(2)
    n = 20_000
    parent = np.r_[-1, np.zeros(n - 1, np.int64)]
    p = Problem(parent, rng.normal(50, 20, n), fixed=np.r_[float(50 * (n - 1)), np.full(n - 1, np.nan)],
                objective="l2", integer=False)
    try:
        sol = hierdp.solve(p, solver="pdlp", time_limit=1e-3, tolerance=1e-12)
    except hierdp.solvers.SolverFailed as exc:
        assert exc.termination in ("time_limit", "iteration_limit")
    else:  # fast enough to finish: then it is a verified optimum
        assert sol.termination == "optimal"
