"""Constraint sets in the spatial consistency step (paper 002): the constrained consistency solve
against an independent KKT oracle and HiGHS, rectangles named as the release names them, the grid
check before any noise against a linear program over the cells, releases of the mechanisms with a
consistency step, and the refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.sparse import csr_matrix

import hierdp
from hierdp.constraints import ConstraintError, Constraints, ConstraintsInfeasible
from hierdp.hierarchy.spatial import SpatialDomain, SpatialGrid
from hierdp.mechanisms import MechanismParameterError, ReleaseAborted
from hierdp.mechanisms.spatial import AG, HTF, KdTree, QuadTree
from hierdp.mechanisms.spatial.consistency import constrained_tree
from hierdp.mechanisms.spatial.constraints import SpatialConstraints, TreeConstraints, rectangle_of


# ---------------------------------------------------------------------------------- an independent oracle
def kkt_optimum(parent, y, var, fixed, A, lo, hi):
    """min sum_measured (x - y)^2 / var over real x with every parent the sum of its children, the
    fixed nodes fixed and lo <= A x <= hi, by enumerating which side of each row is active and
    solving each equality-constrained QP as one dense KKT system (numpy only)."""
    n = len(parent)
    eq_rows, eq_rhs = [], []
    for v in range(n):
        kids = [c for c in range(n) if parent[c] == v]
        if kids:
            row = np.zeros(n)
            row[v] = -1
            row[kids] = 1
            eq_rows.append(row)
            eq_rhs.append(0.0)
    for v in range(n):
        if not np.isnan(fixed[v]):
            row = np.zeros(n)
            row[v] = 1
            eq_rows.append(row)
            eq_rhs.append(fixed[v])
    w = np.where(np.isnan(y) | ~np.isnan(fixed), 0.0, 1.0 / var)  # fixed nodes have no term
    t = np.nan_to_num(y)
    best = None
    for sides in itertools.product((None, "lo", "hi"), repeat=A.shape[0]):
        rows, rhs = list(eq_rows), list(eq_rhs)
        for j, s in enumerate(sides):
            if s is None:
                continue
            b = lo[j] if s == "lo" else hi[j]
            if not np.isfinite(b):
                break
            rows.append(A[j])
            rhs.append(b)
        else:
            E = np.array(rows)
            kkt = np.block([[2 * np.diag(w), E.T], [E, np.zeros((E.shape[0], E.shape[0]))]])
            sol = np.linalg.lstsq(kkt, np.concatenate([2 * w * t, rhs]), rcond=None)[0]
            x = sol[:n]
            if np.abs(E @ x - np.array(rhs)).max() > 1e-7 or np.any(A @ x < lo - 1e-7) or np.any(A @ x > hi + 1e-7):
                continue
            obj = float((w * (x - t) ** 2).sum())
            if best is None or obj < best[0] - 1e-9:
                best = (obj, x)
    return best


def _random_tree(rng, n):
    parent = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    return np.array(parent)


def test_the_constrained_consistency_solve_equals_the_kkt_oracle_and_highs():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(60):
        n = int(rng.integers(5, 11))
        parent = _random_tree(rng, n)
        has = np.zeros(n, bool)
        has[parent[parent >= 0]] = True
        y = rng.normal(20, 8, n)
        if rng.random() < 0.3:
            y[0] = np.nan  # an unmeasured root (AG)
        var = rng.uniform(0.5, 4.0, n)
        fixed = np.full(n, np.nan)
        leaves = np.flatnonzero(~has)
        if rng.random() < 0.5:
            fixed[leaves[0]] = 0.0  # a structural zero
        m = int(rng.integers(1, 4))
        A = np.zeros((m, n))
        for j in range(m):
            idx = rng.choice(np.arange(1, n), size=min(3, n - 1), replace=False)
            A[j, idx] = rng.choice([1.0, 2.0, -1.0], size=idx.size)
        act0 = A @ np.nan_to_num(y)
        lo = np.where(rng.random(m) < 0.5, act0 + rng.uniform(1, 10, m), -np.inf)
        hi = np.where(np.isfinite(lo), np.where(rng.random(m) < 0.3, lo, np.inf), act0 - rng.uniform(1, 10, m))
        best = kkt_optimum(parent, y, var, fixed, A, lo, hi)
        if best is None:
            continue
        tc = TreeConstraints(fixed, csr_matrix(A), lo, hi, np.array([f"r{j}" for j in range(m)], dtype=object), {})
        x, sol = constrained_tree(parent, y, var, tc)
        assert sol.objective == pytest.approx(best[0], rel=1e-9, abs=1e-9)
        assert np.abs(x - best[1]).max() < 1e-6 * max(1.0, np.abs(best[1]).max())
        act = A @ x
        assert np.all(act >= lo - 1e-9 * np.maximum(1, np.abs(act))) and np.all(act <= hi + 1e-9 * np.maximum(1, np.abs(act)))
        assert np.all(x[~np.isnan(fixed)] == fixed[~np.isnan(fixed)])
        _, sol2 = constrained_tree(parent, y, var, tc, solver="highs")
        assert sol2.objective == pytest.approx(best[0], rel=1e-7, abs=1e-7)
        checked += 1
    assert checked >= 40


def test_rows_the_unconstrained_optimum_satisfies_change_nothing():
    rng = np.random.default_rng(1)
    parent = _random_tree(rng, 9)
    y, var = rng.normal(10, 3, 9), np.ones(9)
    loose = TreeConstraints(np.full(9, np.nan), csr_matrix(np.ones((1, 9))), np.array([-1e9]), np.array([1e9]),
                            np.array(["loose"], dtype=object), {})
    x, sol = constrained_tree(parent, y, var, loose)
    x0, _ = constrained_tree(parent, y, var, TreeConstraints(np.full(9, np.nan), None, np.zeros(0), np.zeros(0),
                                                             np.zeros(0, dtype=object), {}))
    assert np.array_equal(x, x0) and sol.stats["row_solves"] == 0


# ---------------------------------------------------------------------------------- names
def test_rectangles_are_named_as_the_release_names_them():
    d = SpatialDomain(-10.0, 10.0, 0.0, 5.0, rows=5, cols=20)  # cells 1 x 1, x from -10, y from 0
    label = "test"
    assert rectangle_of((2, 3), d, label) == (2, 3, 3, 4)
    assert rectangle_of(hierdp.constraints.ByLevels((("r0", 1), ("r1", 3), ("c0", 0), ("c1", 20))), d, label) == \
        (1, 3, 0, 20)
    box = Constraints().add_zero({"x_min": -9.5, "x_max": -6.0, "y_min": 0.0, "y_max": 2.2}).entries[0]
    # whole cells inside: columns of x in [-9, -6] -> 1..3, rows of y in [0, 2] -> 0..1
    assert rectangle_of(box.node, d, label) == (0, 2, 1, 4)
    for bad, match in [((5, 0), "not a non-empty rectangle"), ((0, -1), "not a non-empty rectangle"),
                       ({"r0": 2, "r1": 2, "c0": 0, "c1": 1}, "not a non-empty rectangle"),
                       ({"x_min": 0.2, "x_max": 0.8, "y_min": 0, "y_max": 1}, "holds no whole cell"),
                       ({"r0": 0.5, "r1": 2, "c0": 0, "c1": 1}, "integers"),
                       ("IL/COOK", "not a cell of the grid")]:
        ref = Constraints().add_zero(bad).entries[0].node
        with pytest.raises(ConstraintError, match=match):
            rectangle_of(ref, d, label)


# ---------------------------------------------------------------------------------- before any noise
def _cell_lp_feasible(rows_n: int, cols_n: int, spec) -> bool:
    """The set as a linear program over every cell of the grid (scipy), written from the spec."""
    n = rows_n * cols_n
    A, lo, hi = [], [], []
    bounds = [(None, None)] * n
    for kind, rects, coefs, b_lo, b_hi in spec:
        row = np.zeros(n)
        for (r0, r1, c0, c1), c in zip(rects, coefs, strict=True):
            for r in range(r0, r1):
                for col in range(c0, c1):
                    if kind == "zero":
                        bounds[r * cols_n + col] = (0, 0)
                    row[r * cols_n + col] += c
        if kind != "zero":
            A.append(row)
            lo.append(b_lo)
            hi.append(b_hi)
    if not A:
        return True
    A = np.array(A)
    A_ub = np.vstack([A, -A])
    b_ub = np.concatenate([np.where(np.isfinite(hi), hi, 1e12), -np.where(np.isfinite(lo), lo, -1e12)])
    return linprog(np.zeros(n), A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs").status == 0


def test_the_grid_check_refuses_exactly_the_sets_no_cell_values_satisfy():
    rng = np.random.default_rng(4)
    d = SpatialDomain.cells(4, 4)
    verdicts = {True: 0, False: 0}
    for _ in range(80):
        c, spec = Constraints(), []
        for i in range(int(rng.integers(1, 5))):
            r0, c0 = (int(v) for v in rng.integers(0, 3, 2))
            r1, c1 = r0 + int(rng.integers(1, 4 - r0 + 1)), c0 + int(rng.integers(1, 4 - c0 + 1))
            rect = {"r0": r0, "r1": r1, "c0": c0, "c1": c1}
            kind = rng.choice(["zero", "bounds", "invariant", "linear"])
            if kind == "zero":
                c.add_zero(rect, name=f"e{i}")
                spec.append(("zero", [(r0, r1, c0, c1)], [1], 0, 0))
            elif kind == "bounds":
                lo = float(rng.integers(-2, 6))
                c.add_bounds(rect, lower=lo, upper=lo + float(rng.integers(0, 4)), name=f"e{i}")
                spec.append(("bounds", [(r0, r1, c0, c1)], [1], lo, c[f"e{i}"].upper))
            elif kind == "invariant":
                v = float(rng.integers(0, 5))
                c.add_invariant(rect, v, name=f"e{i}")
                spec.append(("invariant", [(r0, r1, c0, c1)], [1], v, v))
            else:
                c.add_linear([(rect, 1), ((3, 3), -1)], upper=float(rng.integers(-3, 3)), name=f"e{i}")
                spec.append(("linear", [(r0, r1, c0, c1), (3, 3, 3, 3)], [1, -1], -np.inf, c[f"e{i}"].upper))
        # the (3, 3) cell of a linear row: one cell, [3, 4) x [3, 4)
        spec = [(k, [(a, b if b > a else a + 1, e, f if f > e else e + 1) for a, b, e, f in rs], cs, lo, hi)
                for k, rs, cs, lo, hi in spec]
        truth = _cell_lp_feasible(4, 4, spec)
        try:
            SpatialConstraints.bind(c, d)
            got = True
        except ConstraintsInfeasible as exc:
            got = False
            assert exc.entries  # an irreducible subset is named
        assert got == truth, c.entries
        verdicts[truth] += 1
    assert verdicts[True] >= 20 and verdicts[False] >= 5


# ---------------------------------------------------------------------------------- releases
def _grid():
    rng = np.random.default_rng(0)
    counts = rng.poisson(20, size=(32, 32))
    counts[:8, :8] = 0  # a lake
    return SpatialGrid.from_counts(counts)


def _set(grid):
    return (Constraints().add_zero({"r0": 0, "r1": 8, "c0": 0, "c1": 8}, name="lake")
            .add_bounds({"r0": 16, "r1": 32, "c0": 16, "c1": 32}, upper=5000, name="cap")
            .add_linear([({"r0": 0, "r1": 16, "c0": 16, "c1": 32}, 1), ({"r0": 16, "r1": 32, "c0": 0, "c1": 16}, -1)],
                        lower=0, name="north-east at least south-west")
            .add_invariant({"r0": 0, "r1": 32, "c0": 0, "c1": 32}, int(grid.counts.sum()), name="total"))


def _sum(rel, r0, r1, c0, c1) -> float:
    """The released count of a rectangle that is a union of leaves, by a loop over the leaves."""
    total = 0.0
    for (a, b, c, d), v in zip(rel.rects.tolist(), rel.values.tolist(), strict=True):
        if a >= r0 and b <= r1 and c >= c0 and d <= c1:
            total += v
    return total


@pytest.mark.parametrize("make", [lambda **k: QuadTree(1.0, height=4, **k), lambda **k: AG(1.0, **k)],
                         ids=["quadtree", "ag"])
def test_rows_hold_with_the_noise_and_ledger_of_the_release_without_them(make):
    grid = _grid()
    c = _set(grid)
    g1, g2 = np.random.default_rng(7), np.random.default_rng(7)
    rel = make(constraints=c).release(grid, rng=g1)
    base = make().release(grid, rng=g2)
    assert g1.bit_generator.state == g2.bit_generator.state  # the same draws, no more
    assert [(s.label, s.budget, s.details.get("scale")) for s in rel.accounting.spends] == \
        [(s.label, s.budget, s.details.get("scale")) for s in base.accounting.spends]
    assert rel.accounting.guarantees == base.accounting.guarantees
    assert rel.check_consistency() == []
    tol = 1e-6
    assert all(v == 0 for (a, b, cc, d), v in zip(rel.tree.rects.tolist(), rel.tree.values.tolist(), strict=True)
               if b <= 8 and d <= 8)
    assert _sum(rel, 16, 32, 16, 32) <= 5000 + tol
    assert _sum(rel, 0, 16, 16, 32) - _sum(rel, 16, 32, 0, 16) >= -tol
    assert rel.tree.values[0] == int(grid.counts.sum())
    d = rel.accounting.details["constraints"]
    assert d["sha256"] == c.digest() and d["relaxations"] == [] and d["feasibility_checked"]
    assert {"sha256", "entries", "kinds", "records", "on_infeasible", "relaxations", "resolve_s"} <= set(d)
    assert sum(n.startswith("post-processed under public constraints (4 entries") for n in rel.accounting.notes) == 1
    assert rel.params["constraints"] == c.digest()


def test_htf_consistency_over_its_own_tree_and_zeros_for_water():
    rng = np.random.default_rng(0)
    counts = rng.poisson(20, size=(32, 32))
    counts[:16, :16] = 0  # a lake HTF's private splits partly align with
    grid = SpatialGrid.from_counts(counts)
    c = Constraints().add_zero({"x_min": 0, "x_max": 16, "y_min": 0, "y_max": 16}, name="lake")
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    rel = HTF(1.0, consistency="gls", eps_prt_per_level=0.01, constraints=c).release(grid, rng=g1)
    plain = HTF(1.0, consistency="gls", eps_prt_per_level=0.01).release(grid, rng=g2)
    assert g1.bit_generator.state == g2.bit_generator.state
    for r in (rel, plain):
        assert r.check_consistency() == [] and r.solver == "twopass" and r.tree is not None
        assert r.details["leaf_heights"].size == r.n_leaves
    rects, values = rel.tree.rects.tolist(), rel.tree.values.tolist()
    inside = [i for i, (a, b, cc, d) in enumerate(rects) if b <= 16 and d <= 16]
    assert inside and all(values[i] == 0 for i in inside)
    # the statement: nodes zeroed, and the lake's cells in leaves that also hold land
    top = [i for i in inside if rel.tree.parent[i] not in inside]
    covered = sum((rects[i][1] - rects[i][0]) * (rects[i][3] - rects[i][2]) for i in top)
    stated = rel.accounting.details["constraints"]
    assert stated["zeroed_nodes"] == len(inside) and stated["zero_cells_in_shared_nodes"] == 256 - covered
    # the paper's release (no consistency) is unchanged: leaves as drawn, no tree
    paper = HTF(1.0, eps_prt_per_level=0.01).release(grid, seed=3)
    assert paper.tree is None and paper.solver is None


def test_a_rectangle_that_is_not_a_union_of_public_nodes_is_refused_before_any_noise():
    grid = _grid()
    c = Constraints().add_bounds({"r0": 0, "r1": 3, "c0": 0, "c1": 32}, upper=10, name="strip")
    g = np.random.default_rng(0)
    state = g.bit_generator.state
    with pytest.raises(ConstraintError, match="not a union of nodes"):
        QuadTree(1.0, height=3, constraints=c).release(grid, rng=g)
    assert g.bit_generator.state == state


def test_on_a_private_partition_it_stops_the_release_with_the_budget_spent():
    grid = _grid()
    c = Constraints().add_bounds({"r0": 0, "r1": 3, "c0": 0, "c1": 32}, upper=10, name="strip")
    with pytest.raises(ReleaseAborted) as info:
        KdTree(1.0, height=4, constraints=c).release(grid, seed=0)
    assert isinstance(info.value.cause, ConstraintError) and "'strip'" in str(info.value)
    assert info.value.spends  # the medians were drawn


def test_infeasible_sets_and_bad_options_are_refused_before_any_noise():
    grid = _grid()
    lake = {"r0": 0, "r1": 8, "c0": 0, "c1": 8}
    bad = Constraints().add_zero(lake, name="lake").add_bounds({"r0": 2, "r1": 4, "c0": 2, "c1": 4}, lower=1,
                                                               name="people in the lake")
    g = np.random.default_rng(0)
    state = g.bit_generator.state
    with pytest.raises(ConstraintsInfeasible) as info:
        QuadTree(1.0, height=3, constraints=bad).release(grid, rng=g)
    assert set(info.value.entries) == {"lake", "people in the lake"} and g.bit_generator.state == state
    with pytest.raises(MechanismParameterError, match="consistency='gls'"):
        QuadTree(1.0, consistency=None, constraints=Constraints().add_zero(lake))
    with pytest.raises(MechanismParameterError, match="consistency='gls'"):
        HTF(1.0, constraints=Constraints().add_zero(lake))
    with pytest.raises(ConstraintError, match="histogram cells"):
        QuadTree(1.0, height=3, constraints=Constraints().add_zero(lake, cells=[1])).release(grid, seed=0)
