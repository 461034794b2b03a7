"""TopDown releases with constraints against independent oracles.

For every level of a release that completes, its objective must equal the best objective over the
level vectors that extend to a whole tree satisfying every constraint with the coarser levels as
released (enumerated on tiny trees, a scipy MILP on larger ones): the mechanism's level problem is
a relaxation of that set (rows applied at the level, implied rows and intervals), and its answer
extended to the next levels, so the two optima coincide exactly when the release completes.
"""

from __future__ import annotations

import numpy as np
import pytest

import hierdp
from hierdp.mechanisms import ReleaseAborted
from hierdp.mechanisms.topdown import TopDownMechanism

from .oracles import (
    RecordingNoise,
    Spec,
    all_trees,
    brute_level_optimum,
    level_objective,
    milp_level_optimum,
    noisy_levels,
    released_vector,
    satisfies,
)


def tiny_instance(seed: int) -> tuple[hierdp.Hierarchy, Spec]:
    """Root -> 2-3 regions -> 1-2 leaves each (at most 6 leaves), counts 0-3; 1-2 rows, 0-2 bounds."""
    rng = np.random.default_rng(seed)
    regions = "ABC"[: rng.integers(2, 4)]
    edges, counts = [], {}
    for r in regions:
        edges.append(("R", r))
        for i in range(int(rng.integers(1, 3))):
            edges.append((r, f"{r}{i}"))
            counts[f"{r}{i}"] = int(rng.integers(0, 4))
    tree = hierdp.Hierarchy.from_edges(edges, counts=counts)
    names = [str(x) for x in tree.names]
    value = dict(zip(names, np.asarray(tree.counts).tolist(), strict=True))
    spec = Spec()
    nodes = names[1:]
    for _ in range(int(rng.integers(1, 3))):
        pick = rng.choice(len(nodes), size=int(rng.integers(2, 4)), replace=False)
        terms = {nodes[j]: int(rng.choice([1, 1, 2, -1])) for j in pick}
        act = sum(c * value[n] for n, c in terms.items())
        kind = rng.integers(0, 3)
        lo = float(act - rng.integers(0, 3)) if kind != 1 else -np.inf
        hi = float(act + rng.integers(0, 3)) if kind != 0 else np.inf
        spec.rows.append((terms, lo, hi))
    for j in rng.choice(len(nodes), size=int(rng.integers(0, 3)), replace=False):
        v = value[nodes[j]]
        spec.bounds[nodes[j]] = (float(max(0, v - rng.integers(0, 2))), float(v + rng.integers(0, 3)))
    return tree, spec


def release_with_oracle(tree, spec, objective, seed):
    noise = RecordingNoise()
    mech = TopDownMechanism(rho=0.05, noise=noise, objective=objective, constraints=spec.to_constraints())
    try:
        rel = mech.release(tree, seed=seed)
    except ReleaseAborted:
        return None, noise
    return rel, noise


@pytest.mark.parametrize("objective", ["linf", "l1", "l2"])
def test_each_level_is_optimal_under_the_rows_brute_force(objective):
    completed = 0
    for seed in range(10):
        tree, spec = tiny_instance(seed)
        c = spec.to_constraints()
        try:
            c.resolve(tree)
        except hierdp.constraints.ConstraintsInfeasible:
            continue
        rel, noise = release_with_oracle(tree, spec, objective, seed)
        if rel is None:
            continue
        completed += 1
        assert rel.check_consistency() == []
        v = released_vector(rel, tree)
        assert (v >= 0).all()
        trees = all_trees(tree, int(tree.counts[0]))
        # every row and bound holds, checked exactly on the released integers
        for terms, lo, hi in spec.rows:
            act = sum(c * int(v[tree.index_of(n)]) for n, c in terms.items())
            assert lo <= act <= hi, (seed, terms, act)
        for name, (lo, hi) in spec.bounds.items():
            assert lo <= v[tree.index_of(name)] <= hi
        for L, (child, x, groups) in noisy_levels(rel, tree, noise.draws).items():
            got = float(level_objective(v[child][None, :], x, groups, objective)[0])
            best = brute_level_optimum(tree, spec, rel, L, child, x, groups, objective, trees)
            assert best is not None
            assert got == pytest.approx(best, abs=1e-9), (seed, L, got, best)
    assert completed >= 5


def medium_instance(seed: int) -> tuple[hierdp.Hierarchy, Spec]:
    """Root -> 4 states -> 3-5 counties, counts up to 2,000; a cross-state cap, a within-state cap,
    a lower bound."""
    rng = np.random.default_rng(100 + seed)
    edges, counts = [], {}
    for s in "PQRS":
        edges.append(("US", s))
        for i in range(int(rng.integers(3, 6))):
            edges.append((s, f"{s}/{i}"))
            counts[f"{s}/{i}"] = int(rng.integers(0, 2000))
    tree = hierdp.Hierarchy.from_edges(edges, counts=counts)
    val = {str(n): int(c) for n, c in zip(tree.names, tree.counts, strict=True)}
    spec = Spec()
    spec.rows.append(({"P/0": 1, "Q/0": 1}, -np.inf, float(val["P/0"] + val["Q/0"] - 40)))
    spec.rows.append(({"R/0": 1, "R/1": 2}, -np.inf, float(val["R/0"] + 2 * val["R/1"] + 10)))
    spec.bounds["S/1"] = (float(val["S/1"] + 30), np.inf)
    return tree, spec


@pytest.mark.parametrize("objective", ["linf", "l1"])
def test_each_level_is_optimal_under_the_rows_milp(objective):
    completed = 0
    for seed in range(4):
        tree, spec = medium_instance(seed)
        noise = RecordingNoise()
        mech = TopDownMechanism(rho=0.5, noise=noise, objective=objective, constraints=spec.to_constraints())
        try:
            rel = mech.release(tree, seed=seed)
        except ReleaseAborted:
            continue
        completed += 1
        v = released_vector(rel, tree)
        for L, (child, x, groups) in noisy_levels(rel, tree, noise.draws).items():
            got = float(level_objective(v[child][None, :], x, groups, objective)[0])
            best = milp_level_optimum(tree, spec, rel, L, child, x, groups, objective)
            assert got == pytest.approx(best, abs=1e-6), (seed, L, got, best)
        for terms, lo, hi in spec.rows:
            act = sum(c * int(v[tree.index_of(n)]) for n, c in terms.items())
            assert lo <= act <= hi
    assert completed >= 3


def test_linf_under_rows_takes_the_l2_closest_of_its_optima_brute_force():
    # where the rows reach every group of a level, the release is, among the level vectors that
    # extend to a tree meeting every row and reach the level's L∞ optimum (sum of the groups'
    # largest deviations), the closest in L2 to the noisy values: all enumerated
    checked = 0
    for seed in range(34):
        tree, spec = tiny_instance(seed)
        try:
            spec.to_constraints().resolve(tree)
        except hierdp.constraints.ConstraintsInfeasible:
            continue
        rel, noise = release_with_oracle(tree, spec, "linf", seed)
        if rel is None:
            continue
        v = released_vector(rel, tree)
        trees = all_trees(tree, int(tree.counts[0]))
        level = np.asarray(tree.level)
        for L, (child, x, groups) in noisy_levels(rel, tree, noise.draws).items():
            if rel.solver_stats[L].get("constrained_groups", 0) < np.unique(groups).size:
                continue  # groups the rows did not reach keep the level solver's own optimum
            coarse = np.flatnonzero(level < L)
            ok = satisfies(trees, tree, spec) & np.all(trees[:, coarse] == v[coarse], axis=1)
            y = np.unique(trees[ok][:, child], axis=0)
            obj = level_objective(y, x, groups, "linf")
            optima = y[obj == obj.min()]
            best = float(((optima - x).astype(float) ** 2).sum(axis=1).min())
            got = float(((v[child] - x).astype(float) ** 2).sum())
            assert got == pytest.approx(best, abs=1e-9), (seed, L, got, best)
            assert rel.solver_stats[L]["constraint_tie_break"], rel.solver_stats[L]
            checked += 1
    assert checked >= 10


@pytest.mark.parametrize("solver", ["highs", "ortools", "auto"])
@pytest.mark.parametrize("base", [0, 10**9])
def test_linf_under_a_coupling_row_shares_the_deviation_closest_in_l2(solver, base):
    # two groups of two children (totals 2B + 10), every noisy value B + 5, one row a1 + b1 <= 2B + 6:
    # the L∞ optimum 4 can be split 2 + 2 or 4 + 0 between the groups; the L2-closest optimum is
    # (B+3, B+7, B+3, B+7) - enumerated here over every integer split
    from scipy import sparse

    from hierdp.constraints.levels import LevelRows
    from hierdp.mechanisms.topdown.level_solver import LevelSolver

    noisy = np.full(4, base + 5.0)
    totals = np.array([2 * base + 10, 2 * base + 10])
    rows = LevelRows(sparse.csr_matrix(np.array([[1.0, 0, 1, 0]])), np.array([-np.inf]), np.array([2.0 * base + 6]),
                     np.array(["cap"]), None, None, 1)
    pts = []
    for a1 in range(base, base + 11):
        for b1 in range(base, base + 11):
            if a1 + b1 <= 2 * base + 6:
                y = np.array([a1, 2 * base + 10 - a1, b1, 2 * base + 10 - b1], dtype=np.int64)
                d = np.abs(y - noisy)
                pts.append((d[:2].max() + d[2:].max(), float(((y - noisy) ** 2).sum())))
    opt = min(p[0] for p in pts)
    closest = min(l2 for o, l2 in pts if o == opt)
    values, stats = LevelSolver("intopt" if base else solver, objective="linf", integer=True, constraints=True,
                                constraint_solver=solver).solve(noisy, np.array([0, 2, 4]), totals, rows=rows)
    d = np.abs(values - noisy)
    assert d[:2].max() + d[2:].max() == opt == 4
    assert float(((values - noisy) ** 2).sum()) == closest == 16.0
    (outcome,) = stats["constraint_tie_break"]  # the statistics say how the optimum was chosen
    assert outcome.startswith("closest in L2 to the noisy values among the L-inf optima (")


def test_linf_under_a_binding_cap_moves_only_what_the_cap_needs():
    # one state of 12 counties, a cap 40 below the truth on two of them: the other ten counties stay
    # where the noise put them (at most the noise's own L∞ off), not the cap's deviation
    edges = [("US", "S"), ("US", "T")] + [("S", f"S/{i}") for i in range(12)] + [("T", "T/0"), ("T", "T/1")]
    counts = {**{f"S/{i}": 1_000_000 + 1_000 * i for i in range(12)}, "T/0": 5, "T/1": 7}
    tree = hierdp.Hierarchy.from_edges(edges, counts=counts)
    cap = counts["S/0"] + counts["S/1"] - 40
    c = hierdp.Constraints().add_linear({"S/0": 1, "S/1": 1}, upper=cap, name="cap")
    noise = RecordingNoise()
    rel = TopDownMechanism(rho=1.0, noise=noise, objective="linf", constraints=c).release(tree, seed=3)
    v = released_vector(rel, tree)
    assert v[tree.index_of("S/0")] + v[tree.index_of("S/1")] <= cap
    child, x, _ = noisy_levels(rel, tree, noise.draws)[2]
    free = np.isin(child, [tree.index_of(f"S/{i}") for i in range(2, 12)])
    capped = np.isin(child, [tree.index_of("S/0"), tree.index_of("S/1")])
    assert np.abs(v[child] - x)[capped].max() >= 10  # the cap binds
    # the ten free counties absorb what the state's released total leaves them; the L2-closest point
    # spreads it evenly: every free deviation is within one unit of the mean (an L∞ optimum alone
    # may put any of them anywhere up to the capped counties' deviation)
    left = int(v[tree.index_of("S")]) - int(v[child][capped].sum()) - int(x[free].sum())
    assert np.all(np.abs((v[child] - x)[free] - left / 10) < 1), ((v[child] - x)[free], left)
