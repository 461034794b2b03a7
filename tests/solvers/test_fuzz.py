"""Differential fuzz suite: every plug-in against independent oracles (issue 15, item 7).

Families (seeded numpy, so every instance is reproducible from its seed):

* ``tiny``: forests of 2-6 nodes, fixed nodes, bounds, weights, NaN targets, integer or continuous,
  sometimes a user row and query terms; oracle: enumeration of every integer point (integer) or
  scipy (continuous) - :mod:`exact_oracles`;
* ``level``: TopDown levels (the fast paths' shape), integer or continuous, real or integer
  targets, zero totals; oracle: the tree dynamic program or scipy;
* ``medium``: random trees and TopDown levels of 10-30 nodes (integer, non-negative, bounds,
  weights, NaN targets); oracle: an exact tree dynamic program;
* ``large``: a ``tiny``/``medium`` integer instance translated by a consistent integer point of
  magnitude 1e6, 1e9 or 2^40 (same optimum, translated: the oracle is the small instance's);
* ``deep``: caterpillars of depth 100-300 (a spine with a leaf per level, some spine nodes fixed);
  oracle: the tree dynamic program.

For every instance and plug-in: a refused problem is refused by ``unsupported()`` with a reason,
and ``solve`` raises :class:`UnsupportedProblem`; an accepted one returns a feasible point whose
objective equals the oracle's (integer: 1e-7 relative; continuous: 1e-6), the input arrays are
unchanged, and (every few instances) a second solve returns the same values.

Profiles: the quick profile runs in the default suite (about 20 s on 2 cores); the long profile
(``pytest -m fuzz tests/solvers/test_fuzz.py -s``) runs 25 times more instances per family and
prints instances and failures per solver x objective.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import SolverFailed, UnsupportedProblem, get

from exact_oracles import continuous_optimum, enumerate_optimum, feasible, objective_at, tree_dp_optimum

SOLVERS = ("intopt", "projection", "costtable", "highs", "ortools", "auto")
#: the cost-table DP is exponential in depth until its rewrite lands (reproducer r2, another issue)
MAX_DEPTH = {"costtable": 4}
QUICK = {"tiny": 24, "level": 15, "medium": 10, "large": 9, "deep": 2}
LONG_FACTOR = 25


# ---------------------------------------------------------------------------------- instances
def _forest(rng: np.random.Generator, n: int) -> np.ndarray:
    parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
    if n > 3 and rng.random() < 0.3:
        parent[n - 1] = -1  # a second tree
    return parent


def _feasible_point(rng: np.random.Generator, parent: np.ndarray, top: int) -> np.ndarray:
    """Non-negative integer leaf counts summed up the tree (children have larger indices)."""
    n = parent.size
    has_kids = np.bincount(parent[parent >= 0], minlength=n) > 0
    z = np.zeros(n)
    z[~has_kids] = rng.integers(0, top + 1, int((~has_kids).sum()))
    for i in range(n - 1, -1, -1):
        if has_kids[i]:
            z[i] = z[parent == i].sum()
    return z


def tiny(seed: int) -> tuple[Problem, dict]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    parent = _forest(rng, n)
    z = _feasible_point(rng, parent, 4)
    objective = ["linf", "l1", "l2"][seed % 3]
    integer = rng.random() < 0.7
    target = z + rng.normal(0, 1.5, n)
    if rng.random() < 0.4:
        target = np.round(target * 4) / 4  # grid targets: CP-SAT takes integer l1/l2 exactly
    target[rng.random(n) < 0.15] = np.nan
    fixed = np.full(n, np.nan)
    roots = np.flatnonzero(parent < 0)
    keep = roots[rng.random(roots.size) < 0.7]  # some free roots
    fixed[keep] = z[keep]
    extra = rng.random(n) < 0.2
    fixed[extra] = z[extra]
    r = rng.integers(0, 3, n)
    lower = np.maximum(z - r, 0.0)
    upper = z + rng.integers(0, 3, n)
    weights = np.where(rng.random(n) < 0.3, rng.choice([0.5, 2.0, 1.5], n), 1.0)
    if objective == "linf" and rng.random() < 0.5:
        weights = np.ones(n)
    p = Problem(parent, target, fixed=fixed, objective=objective, integer=integer, lower=lower, upper=upper,
                weights=weights)
    if n >= 3 and rng.random() < 0.25:
        a, b = rng.choice(n, 2, replace=False)
        act = z[a] + z[b]
        p.add_linear({int(a): 1.0, int(b): 1.0}, lower=act - 1, upper=act + 1, name="pair")
    if n >= 3 and rng.random() < 0.2:
        rows = np.zeros((2, n))
        rows[0, rng.choice(n, 2, replace=False)] = 1.0
        rows[1, rng.choice(n, 2, replace=False)] = [1.0, -1.0]
        p.add_query_terms(rows, rows @ z + np.round(rng.normal(0, 1, 2)), name="q")
    return p, {"family": "tiny", "z": z, "lo": 0, "hi": int(np.nanmax(upper))}


def medium(seed: int) -> tuple[Problem, dict]:
    rng = np.random.default_rng(10_000 + seed)
    objective = ["linf", "l1", "l2"][seed % 3]
    if seed % 2:  # a TopDown level
        g = int(rng.integers(2, 6))
        sizes = rng.integers(1, 7, g)
        offsets = np.r_[0, np.cumsum(sizes)]
        totals = rng.integers(0, 15, g).astype(float)
        x = np.repeat(totals / sizes, sizes) + rng.normal(0, 2, offsets[-1])
        p = Problem.from_groups(x, offsets, totals, objective=objective)
        return p, {"family": "medium", "vmax": int(totals.max())}
    n = int(rng.integers(10, 30))
    parent = _forest(rng, n)
    parent[parent < 0] = -1
    z = _feasible_point(rng, parent, 3)
    target = z + rng.normal(0, 1.5, n)
    target[rng.random(n) < 0.15] = np.nan
    fixed = np.full(n, np.nan)
    fixed[parent < 0] = z[parent < 0]
    extra = rng.random(n) < 0.1
    fixed[extra] = z[extra]
    upper = np.where(rng.random(n) < 0.2, z + rng.integers(0, 3, n), np.inf)
    weights = np.ones(n) if objective == "linf" else np.where(rng.random(n) < 0.3, 2.0, 1.0)
    p = Problem(parent, target, fixed=fixed, objective=objective, upper=upper, weights=weights)
    return p, {"family": "medium", "vmax": int(z[parent < 0].sum())}


def level(seed: int) -> tuple[Problem, dict]:
    """A TopDown level: the shape the fast paths (intopt, projection) solve."""
    rng = np.random.default_rng(40_000 + seed)
    objective = ["linf", "l2", "l1"][seed % 3]
    integer = rng.random() < 0.75
    g = int(rng.integers(1, 6))
    sizes = rng.integers(1, 6, g)
    offsets = np.r_[0, np.cumsum(sizes)]
    totals = rng.integers(0, 12, g).astype(float)
    totals[rng.random(g) < 0.2] = 0.0
    x = np.repeat(totals / sizes, sizes) + rng.normal(0, 2.5, offsets[-1])
    if rng.random() < 0.3:
        x = np.rint(x)
    p = Problem.from_groups(x, offsets, totals, objective=objective, integer=integer)
    return p, {"family": "level", "vmax": int(totals.max())}


def large(seed: int) -> tuple[Problem, dict]:
    """A small integer instance translated by a consistent integer point of large magnitude."""
    # family, objective (the makers pick it from their seed) and scale vary independently: with
    # the same index for all three, every L2 instance was lost (tiny 0 -> linf, medium 1 -> l1,
    # level 2 -> l1)
    inner = seed // 3
    small, meta = (tiny, medium, level)[seed % 3](inner)
    if not small.integer or small.n_query_terms:
        small, meta = medium(inner + 3 * (seed % 3 + 1) * 1000)  # same objective, another instance
    rng = np.random.default_rng(20_000 + seed)
    scale = [1e6, 1e9, 2.0 ** 40][(seed + inner) % 3]
    parent = small.parent
    n = small.n
    has_kids = np.bincount(parent[parent >= 0], minlength=n) > 0
    big = np.zeros(n)
    big[~has_kids] = np.floor(scale * rng.uniform(0.5, 1.0, int((~has_kids).sum())))
    for i in range(n - 1, -1, -1):
        if has_kids[i]:
            big[i] = big[parent == i].sum()
    lo = np.maximum(small.lower, 0.0) + big
    p = Problem(parent, small.target + big, fixed=small.fixed + big, objective=small.objective, integer=True,
                lower=lo, upper=small.upper + big, weights=small.weights)
    if small.n_constraints:
        c = small.constraints
        p.add_constraints(c.matrix, c.lower + c.matrix @ big, c.upper + c.matrix @ big, name="pair")
    # the oracle's instance is the large one translated back exactly: float64 rounds the large
    # targets (to 2^-10 near 2^42), so the small targets are replaced by (x + big) - big, which is
    # exact (Sterbenz); the two instances are then the same problem
    exact_target = p.target - big
    if not np.array_equal(exact_target, small.target, equal_nan=True):
        back = Problem(parent, exact_target, fixed=small.fixed, objective=small.objective, integer=True,
                       lower=small.lower, upper=small.upper, weights=small.weights)
        if small.n_constraints:
            c = small.constraints
            back.add_constraints(c.matrix, c.lower, c.upper, name="pair")
        small = back
    return p, {"family": "large", "small": small, "small_meta": meta, "shift": big}


def deep(seed: int) -> tuple[Problem, dict]:
    rng = np.random.default_rng(30_000 + seed)
    # quick-profile seeds stay near depth 100 (HiGHS takes seconds on a 600-node MIP)
    depth = int(rng.integers(100, 121 if seed < QUICK["deep"] else 301))
    spine = np.arange(depth + 1)
    parent = np.r_[-1, spine[:-1], spine[:-1]]  # spine node i+1 and leaf node depth+1+i under spine i
    n = parent.size
    z = _feasible_point(rng, parent, 1)
    objective = ["linf", "l2", "l1"][seed % 3]  # quick seeds 0, 1: the faster objectives for HiGHS
    target = z + rng.normal(0, 1.0, n)
    fixed = np.full(n, np.nan)
    fixed[0] = z[0]
    cut = rng.choice(np.arange(1, depth), 2, replace=False)
    fixed[cut] = z[cut]  # fixed spine nodes split the groups
    p = Problem(parent, target, fixed=fixed, objective=objective)
    return p, {"family": "deep", "vmax": int(z[0])}


FAMILIES = {"tiny": tiny, "level": level, "medium": medium, "large": large, "deep": deep}


# ---------------------------------------------------------------------------------- oracle
def oracle(p: Problem, meta: dict) -> float | None:
    fam = meta["family"]
    if fam == "large":
        return oracle(meta["small"], meta["small_meta"])
    if not p.integer:
        return continuous_optimum(p)
    if fam == "tiny":
        return enumerate_optimum(p, meta["lo"], meta["hi"])
    return tree_dp_optimum(p, meta["vmax"])


def snapshot(p: Problem) -> tuple:
    return tuple(a.copy() for a in (p.parent, p.target, p.fixed, p.weights, p.lower, p.upper))


def check_one(name: str, p: Problem, meta: dict, best: float | None, seed: int, tally: Counter) -> None:
    key = (name, p.objective)
    if name in MAX_DEPTH and int(p.depth().max()) > MAX_DEPTH[name]:
        return
    if name == "auto" and p.objective == "l2" and p.integer and int(p.depth().max()) > MAX_DEPTH["costtable"]:
        return  # auto asks costtable.unsupported(), which compiles the DP: the same r2 defect
    s = None if name == "auto" else get(name)
    why = [] if s is None else s.unsupported(p)
    if name == "auto":
        try:
            hierdp.solvers.choose(p)
        except UnsupportedProblem as exc:
            why = [str(exc)]
    before = snapshot(p)
    if why:
        with pytest.raises(UnsupportedProblem):
            hierdp.solve(p, solver=name)
        assert all(isinstance(w, str) and w for w in why)
        tally[(*key, "refused")] += 1
        return
    try:
        sol = hierdp.solve(p, solver=name, time_limit=120)
    except SolverFailed as exc:  # only "infeasible" is a right answer here, and only if the oracle agrees
        assert exc.termination == "infeasible" and best is None, f"{name} failed on seed {seed}: {exc}"
        tally[(*key, "ok")] += 1
        return
    assert best is not None, f"{name} solved a problem the oracle finds infeasible (seed {seed})"
    v = np.asarray(sol.values, dtype=float)
    tol = 1e-7 if p.integer else 1e-6
    assert feasible(p, v, 1e-9 if p.integer else 1e-6), f"{name}: infeasible answer (seed {seed})"
    got = objective_at(p, v)
    if meta["family"] == "large":  # translate back: the small instance's objective at y - shift
        got = objective_at(meta["small"], v - meta["shift"])
    assert got == pytest.approx(best, rel=tol, abs=tol), f"{name}: objective {got} vs oracle {best} (seed {seed})"
    for a, b in zip(before, snapshot(p), strict=False):
        np.testing.assert_array_equal(a, b)
    if seed % 5 == 0:
        again = hierdp.solve(p, solver=name, time_limit=120)
        np.testing.assert_array_equal(np.asarray(again.values), np.asarray(sol.values))
    tally[(*key, "ok")] += 1


def run(family: str, seeds: range, tally: Counter) -> None:
    make = FAMILIES[family]
    for seed in seeds:
        p, meta = make(seed)
        best = oracle(p, meta)
        for name in SOLVERS:
            try:
                check_one(name, p, meta, best, seed, tally)
            except AssertionError:
                tally[(name, p.objective, "FAILED")] += 1
                raise


@pytest.mark.parametrize("family", list(QUICK))
def test_quick_profile(family):
    run(family, range(QUICK[family]), Counter())


#: seeds the long profile failed on once, kept in the default run: large 200 = an integer L∞ tree
#: around 5e12 whose correct answer the verification LP called "not optimal" (it ran in the
#: original variables and could not resolve units; now recentred on the answer); large 180 = a
#: tree whose certificate LP had no constant in its consistency rows (a dtype error, since fixed)
REGRESSIONS = {"large": [180, 200]}


@pytest.mark.parametrize("family, seed", [(f, s) for f, seeds in REGRESSIONS.items() for s in seeds])
def test_seeds_that_once_failed(family, seed):
    run(family, range(seed, seed + 1), Counter())


@pytest.mark.fuzz
@pytest.mark.parametrize("family", list(QUICK))
def test_long_profile(family, capsys):
    tally: Counter = Counter()
    failures = []
    for seed in range(QUICK[family], QUICK[family] * (LONG_FACTOR + 1)):
        try:
            run(family, range(seed, seed + 1), tally)
        except AssertionError as exc:  # keep going: the report counts every failure
            failures.append(str(exc).splitlines()[0])
        except Exception as exc:  # a crash is a failure too, with its seed
            failures.append(f"seed {seed}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    with capsys.disabled():
        print(f"\nfuzz family {family!r}: seeds {QUICK[family]}..{QUICK[family] * (LONG_FACTOR + 1) - 1}", flush=True)
        for key in sorted({k[:2] for k in tally}):
            print(f"  {key[0]:<11} {key[1]:<5} solved {tally[(*key, 'ok')]:>5}  refused "
                  f"{tally[(*key, 'refused')]:>5}  failed {tally[(*key, 'FAILED')]:>3}", flush=True)
        for f in failures[:20]:
            print("  FAILURE:", f, flush=True)
    assert not failures
