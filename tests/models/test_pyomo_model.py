"""The Pyomo translation: indexed components, user hooks, user linear constraints, the L2 window."""

import numpy as np
import pyomo.environ as pyo
import pytest

import hierdp
from hierdp.models import Problem, ProblemError
from hierdp.models.pyomo_model import (
    ModelTooLarge,
    anchor_values,
    batch_components,
    build_pyomo_model,
    model_arrays,
    values_from_model,
)


def named_level(groups: int) -> Problem:
    rng = np.random.default_rng(groups)
    sizes = rng.integers(1, 5, groups)
    off = np.r_[0, np.cumsum(sizes)]
    tot = rng.integers(0, 50, groups).astype(float)
    p = Problem.from_groups(np.repeat(tot / sizes, sizes) + rng.normal(0, 3, off[-1]), off, tot)
    return p


@pytest.mark.parametrize("objective,integer", [("linf", True), ("l1", False), ("l2", False), ("l2", True)])
def test_indexed_components_do_not_grow_with_groups(objective, integer):
    counts = []
    for g in (3, 300):
        p = named_level(g)
        p.objective, p.integer = objective, integer
        m = build_pyomo_model(p, l2_center=hierdp.solve(p, solver="highs").values if integer else None)
        comps = {ctype: len(list(m.component_objects(ctype, descend_into=True)))
                 for ctype in (pyo.Var, pyo.Constraint, pyo.Objective)}
        counts.append(comps)
        assert len(m.y) == int(p.is_free.sum())  # one indexed Var over every free node
    assert counts[0] == counts[1]
    assert counts[0][pyo.Var] <= 2  # y plus alpha or t


def test_user_hook_constraint_is_honoured():
    p = Problem.from_groups([5.0, 5.0, 0.0], [0, 3], [10])

    def at_least_four(model, problem):
        model.extra = pyo.Constraint(expr=model.y[3] >= 4)  # node 3 = third child

    p.on_pyomo_model(at_least_four)
    sol = hierdp.solve(p, solver="highs")
    assert sol.stats["path"] == "pyomo"
    assert sol.values[3] >= 4 and sol.values[1:].sum() == 10
    # without the hook the optimum is (5, 5, 0) or similar with node 3 below 4
    free = Problem.from_groups([5.0, 5.0, 0.0], [0, 3], [10])
    assert hierdp.solve(free, solver="highs").values[3] < 4


def test_named_linear_constraint_honoured_everywhere():
    parent = [-1, 0, 0, 0]
    names = ["T", "A", "B", "C"]
    for solver in ("highs", "ortools"):
        p = Problem(parent, [np.nan, 20.0, 30.0, 150.0], fixed=[200, np.nan, np.nan, np.nan],
                    objective="linf", names=names)
        p.add_linear({"A": 1, "B": 1}, lower=100)
        sol = hierdp.solve(p, solver=solver)
        assert sol.values[1] + sol.values[2] >= 100
        assert sol.values[1:].sum() == 200
    m = build_pyomo_model(p)
    assert len(m.linear) == 1 and m.linear[0].lower == 100


def test_values_from_model_and_subset():
    p = named_level(6)
    m = build_pyomo_model(p, subset=np.array([1, 3]))
    from pyomo.contrib.solver.common.factory import SolverFactory

    SolverFactory("highs").solve(m, solver_options={"mip_rel_gap": 0.0})
    v = values_from_model(m, p)
    grp = p.groups()
    in_batch = np.isin(grp, [1, 3])
    assert np.all(np.isnan(v[p.is_free & ~in_batch]))
    assert not np.any(np.isnan(v[in_batch]))
    full = hierdp.solve(p, solver="highs").values
    per = lambda vals: [np.abs(vals[grp == g] - p.target[grp == g]).max() for g in (1, 3)]
    np.testing.assert_allclose(per(v), per(full), atol=1e-9)


def test_subset_must_not_split_a_coupling_constraint():
    p = named_level(4).add_linear({4: 1, 10: 1}, lower=1)
    comps = batch_components(p)
    g4, g10 = p.groups()[[4, 10]]
    assert comps[g4] == comps[g10]
    with pytest.raises(ProblemError, match="splits"):
        model_arrays(p, subset=np.array([g4]))


def test_anchor_values():
    parent = np.array([-1, 0, 1, 2, 0, -1])
    fixed = np.array([9, np.nan, 4, np.nan, np.nan, np.nan])
    p = Problem(parent, np.ones(6), fixed=fixed)
    np.testing.assert_array_equal(anchor_values(p), [np.nan, 9, 9, 4, 9, np.nan])


def test_integer_l2_window_is_tight_and_exact():
    # the proven window (radius = group size) is far smaller than the domain [0, total]
    p = Problem.from_groups([400.2, 350.7, 249.1], [0, 3], [1000], objective="l2")
    center = hierdp.solve(Problem.from_groups([400.2, 350.7, 249.1], [0, 3], [1000], objective="l2",
                                              integer=False), solver="highs").values
    arr = model_arrays(p, l2_center=center)
    assert np.all(arr.pwl_hi - arr.pwl_lo <= 6)
    dom = model_arrays(p)
    assert np.all(dom.pwl_hi - dom.pwl_lo == 1000)
    with pytest.raises(ModelTooLarge):
        model_arrays(p, max_pwl_pieces=100)
    sol = hierdp.solve(p, solver="highs")
    np.testing.assert_array_equal(sol.values[1:], [400, 351, 249])
