"""Property test: random forests, targets and extra constraints through the general solvers.

Each problem is built around a known feasible point ``z`` (non-negative integer leaf counts summed
up the tree); fixed nodes, bounds and a user linear constraint are chosen so that ``z`` satisfies
them. Then every solution must satisfy consistency, non-negativity, integrality when asked, fixed
nodes unchanged, bounds and the user constraint, and its objective can be no worse than ``z``'s.
HiGHS and CP-SAT (integer problems, when it accepts them) must agree on the optimum.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hierdp
from hierdp.models import Problem
from hierdp.solvers import UnsupportedProblem, get


@st.composite
def problems(draw):
    n = draw(st.integers(2, 9))
    parent = [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    if n > 3 and draw(st.booleans()):  # a second tree: a forest
        parent[n - 1] = -1
    parent = np.array(parent)
    has_kids = np.bincount(parent[parent >= 0], minlength=n) > 0
    z = np.zeros(n)
    leaves = np.flatnonzero(~has_kids)
    z[leaves] = draw(st.lists(st.integers(0, 8), min_size=leaves.size, max_size=leaves.size))
    # sum leaves up, highest index first: every child index is larger than its parent's
    for i in range(n - 1, -1, -1):
        if has_kids[i]:
            z[i] = z[parent == i].sum()
    objective = draw(st.sampled_from(["linf", "l1", "l2"]))
    integer = draw(st.booleans())
    seed = draw(st.integers(0, 2 ** 31))
    rng = np.random.default_rng(seed)
    target = z + rng.normal(0, 2, n)
    if objective in ("l1", "l2"):
        target = np.round(target * 4) / 4  # a grid, so CP-SAT can take l1/l2 exactly
    target[rng.random(n) < 0.15] = np.nan
    fixed = np.full(n, np.nan)
    fixed[parent < 0] = z[parent < 0]
    extra_fixed = rng.random(n) < 0.2
    fixed[extra_fixed] = z[extra_fixed]
    lower = np.where(rng.random(n) < 0.3, z - rng.integers(0, 3, n), -np.inf)
    upper = np.where(rng.random(n) < 0.3, z + rng.integers(0, 3, n), np.inf)
    p = Problem(parent, target, fixed=fixed, objective=objective, integer=integer, lower=lower, upper=upper,
                names=[f"n{i}" for i in range(n)])
    if n >= 3 and draw(st.booleans()):
        a, b = rng.choice(n, 2, replace=False)
        ca, cb = rng.choice([1, 2, -1], 2)
        act = ca * z[a] + cb * z[b]
        slack = float(rng.integers(0, 3))
        if rng.random() < 0.5:
            p.add_linear({f"n{a}": float(ca), f"n{b}": float(cb)}, lower=act - slack, name="user")
        else:
            p.add_linear({f"n{a}": float(ca), f"n{b}": float(cb)}, lower=act - slack, upper=act + slack, name="user")
    return p, z


def check(p: Problem, values: np.ndarray, z: np.ndarray) -> None:
    assert p.violations(values) == []
    assert np.all(values >= -1e-9)
    assert np.all(values[p.is_fixed] == p.fixed[p.is_fixed])
    if p.integer:
        assert np.all(values == np.round(values))
    for c in p.linear:
        assert c.lower - 1e-6 <= c.activity(values) <= c.upper + 1e-6
    assert p.objective_value(values) <= p.objective_value(z) + 1e-6


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_general_solvers_honour_every_constraint(case):
    p, z = case
    sol = hierdp.solve(p, solver="highs")
    check(p, sol.values, z)
    if p.integer:
        try:
            other = hierdp.solve(p, solver="ortools")
        except UnsupportedProblem as exc:
            assert get("ortools").unsupported(p), exc  # refused for a stated reason
            return
        check(p, other.values, z)
        assert abs(other.objective - sol.objective) <= 1e-6 * max(1.0, sol.objective)
