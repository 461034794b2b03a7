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

The families of the second differential fuzz (the defects n1-n10 of ../shared/repro/solvers/):

* ``fixed_rows`` (n2): a ``large`` instance at 1e9 ... 1e12 plus a row over fixed nodes only, held
  exactly or missed by one or two units; oracle: the row checked in Python integers, then the small
  instance's optimum;
* ``chain_big`` (n1): monotone chains of 2-4 integer nodes at 2^40 ... 2^50 with real targets (on
  and off short binary grids, unit and real weights); oracle: enumeration in exact fractions;
* ``query_free`` (n7): continuous L2 without non-negativity, query terms over nodes without a
  target; oracle: the KKT system of the equality-constrained least squares;
* ``free_sign_big`` (n4): continuous free-sign L2 trees translated by a consistent point of
  magnitude 1e9 ... 1e12; oracle: the small instance's KKT optimum;
* ``infeasible_lp`` (n5): continuous L1 / L∞ levels at 1e9 ... 1e12 whose row contradicts a
  fixed parent; oracle: infeasible by construction (a plug-in must say ``infeasible``);
* in-process time limits (n8): :func:`test_in_process_time_limits` (HiGHS with
  ``hard_time_limit=False`` and with an ``executor``: the call returns within its limit plus a
  grace, with a time-limit stop or an optimum).

For every instance and plug-in: a refused problem is refused by ``unsupported()`` with a reason,
and ``solve`` raises :class:`UnsupportedProblem`; an accepted one never returns "optimal" for a
point that is infeasible (integer problems checked exactly, in Python integers) or above the
oracle's optimum; it returns a feasible point whose objective equals the oracle's (integer: 1e-7
relative, exact fractions for ``chain_big``; continuous: 1e-6 plus float64's resolution at the
family's magnitude), or, on an infeasible problem, says ``infeasible``. The input arrays are
unchanged, and (every few instances) a second solve returns the same values.

Profiles: the quick profile runs in the default suite (about 20 s on 2 cores); the long profile
(``pytest -m fuzz tests/solvers/test_fuzz.py -s``) runs 25 times more instances per family and
prints instances and failures per solver x objective.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import SolverFailed, UnsupportedProblem, get

from exact_oracles import (
    continuous_optimum,
    enumerate_exact,
    enumerate_optimum,
    feasible,
    feasible_exact,
    kkt_l2_optimum,
    objective_at,
    objective_exact,
    tree_dp_optimum,
)

SOLVERS = ("intopt", "projection", "costtable", "twopass", "chain", "highs", "ortools", "pdlp", "auto")
QUICK = {"tiny": 24, "level": 15, "medium": 10, "large": 9, "deep": 2, "fixed_rows": 8, "chain_big": 10,
         "query_free": 8, "free_sign_big": 8, "infeasible_lp": 6}
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


def large(seed: int, scales: tuple[float, ...] = (1e6, 1e9, 2.0 ** 40)) -> tuple[Problem, dict]:
    """A small integer instance translated by a consistent integer point of large magnitude."""
    # family, objective (the makers pick it from their seed) and scale vary independently: with
    # the same index for all three, every L2 instance was lost (tiny 0 -> linf, medium 1 -> l1,
    # level 2 -> l1)
    inner = seed // 3
    small, meta = (tiny, medium, level)[seed % 3](inner)
    if not small.integer or small.n_query_terms:
        small, meta = medium(inner + 3 * (seed % 3 + 1) * 1000)  # same objective, another instance
    rng = np.random.default_rng(20_000 + seed)
    scale = scales[(seed + inner) % len(scales)]
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


def fixed_rows(seed: int) -> tuple[Problem, dict]:
    """n2's family: a ``large`` instance at 1e9 ... 1e12 plus a row over fixed nodes only."""
    for k in range(20):  # an instance with a fixed node (some tiny forests have none)
        p, meta = large(seed + 7919 * k, scales=(1e9, 4e9, 1e11, 1e12))
        fixed = np.flatnonzero(~np.isnan(p.fixed))
        if fixed.size:
            break
    rng = np.random.default_rng(50_000 + seed)
    pick = rng.choice(fixed, min(2, fixed.size), replace=False)
    act = sum(int(p.fixed[i]) for i in pick)  # exact: fixed counts are integers below 2^53
    delta = int(rng.choice([-1, 0, 1, 2]))
    if rng.random() < 0.5:
        p.add_linear({int(i): 1.0 for i in pick}, lower=float(act + delta), name="over_fixed")
    else:
        p.add_linear({int(i): -1.0 for i in pick}, upper=float(-act - delta), name="over_fixed")
    return p, {**meta, "family": "fixed_rows", "infeasible": delta > 0}


def chain_big(seed: int) -> tuple[Problem, dict]:
    """n1's family: a monotone chain of 2-4 integer nodes at 2^40 ... 2^50 with real targets."""
    rng = np.random.default_rng(60_000 + seed)
    n = int(rng.integers(2, 5))
    B = float(np.floor(2.0 ** rng.uniform(40, 49.99)))
    frac = rng.uniform(-2.5, 2.5, n)
    if seed % 3 == 0:
        frac = np.round(frac * 128) / 128  # on a short binary grid (the int64 certificate)
    t = B + frac  # float64 rounds to the grid of 2^(e - 52)
    w = np.ones(n) if seed % 2 else rng.choice([1.0, 0.5, 3.0, 0.1], n)
    p = Problem(np.full(n, -1), t, objective="l2", integer=True, weights=w)
    p.add_monotone_chains(np.arange(n)[None, :])
    return p, {"family": "chain_big", "lo": int(B) - 4, "hi": int(B) + 4}


def query_free(seed: int) -> tuple[Problem, dict]:
    """n7's family: continuous L2 without non-negativity, query terms over untargeted nodes."""
    rng = np.random.default_rng(70_000 + seed)
    n = int(rng.integers(3, 8))
    parent = _forest(rng, n)
    z = _feasible_point(rng, parent, 6) - 3.0
    target = z + rng.normal(0, 1.5, n)
    target[rng.random(n) < 0.4] = np.nan
    fixed = np.full(n, np.nan)
    if rng.random() < 0.6:
        fixed[0] = z[0]
    p = Problem(parent, target, fixed=fixed, objective="l2", integer=False, nonnegative=False,
                weights=np.where(rng.random(n) < 0.3, 2.0, 1.0))
    untargeted = np.flatnonzero(np.isnan(target))
    rows = np.zeros((int(rng.integers(1, 4)), n))
    for r in rows:
        nodes = rng.choice(n, int(rng.integers(1, min(3, n) + 1)), replace=False)
        if untargeted.size:
            nodes = np.unique(np.r_[nodes, rng.choice(untargeted)])
        r[nodes] = rng.choice([1.0, -1.0, 2.0], nodes.size)
    p.add_query_terms(rows, rows @ z + rng.normal(0, 1, rows.shape[0]), rng.choice([1.0, 0.5], rows.shape[0]))
    return p, {"family": "query_free"}


def free_sign_big(seed: int) -> tuple[Problem, dict]:
    """n4's family: a free-sign continuous L2 tree translated by a consistent point at 1e9 ... 1e12."""
    small, _ = query_free(seed)
    rng = np.random.default_rng(80_000 + seed)
    scale = [1e9, 1e10, 1e11, 1e12][seed % 4]
    parent = small.parent
    n = small.n
    has_kids = np.bincount(parent[parent >= 0], minlength=n) > 0
    big = np.zeros(n)
    big[~has_kids] = np.floor(scale * rng.uniform(0.5, 1.0, int((~has_kids).sum())))
    for i in range(n - 1, -1, -1):
        if has_kids[i]:
            big[i] = big[parent == i].sum()
    p = Problem(parent, small.target + big, fixed=small.fixed + big, objective="l2", integer=False,
                nonnegative=False, weights=small.weights)
    # the oracle's instance: the big one translated back exactly (float64 rounds the big targets)
    back = Problem(parent, p.target - big, fixed=p.fixed - big, objective="l2", integer=False, nonnegative=False,
                   weights=small.weights)
    return p, {"family": "free_sign_big", "small": back, "small_meta": {"family": "kkt"}, "shift": big,
               "scale": scale}


def infeasible_lp(seed: int) -> tuple[Problem, dict]:
    """n5's family: a continuous L1 / L∞ level at 1e9 ... 1e12 whose row contradicts a fixed parent."""
    rng = np.random.default_rng(90_000 + seed)
    scale = [1e9, 1e10, 1e11, 1e12][seed % 4]
    g = int(rng.integers(1, 4))
    sizes = rng.integers(2, 5, g)
    offsets = np.r_[0, np.cumsum(sizes)]
    totals = np.floor(scale * rng.uniform(0.5, 1.0, g))
    x = np.repeat(totals / sizes, sizes) + rng.normal(0, 3, offsets[-1])
    p = Problem.from_groups(x, offsets, totals, objective=["l1", "linf"][seed % 2], integer=False)
    short = float(rng.choice([1.0, 5.0, 1000.0]))
    kids = {int(g + k): 1.0 for k in range(int(sizes[0]))}  # group 0's children must sum to its total
    p.add_linear(kids, upper=float(totals[0]) - short, name="short")
    return p, {"family": "infeasible_lp", "infeasible": True, "scale": scale}


FAMILIES = {"tiny": tiny, "level": level, "medium": medium, "large": large, "deep": deep, "fixed_rows": fixed_rows,
            "chain_big": chain_big, "query_free": query_free, "free_sign_big": free_sign_big,
            "infeasible_lp": infeasible_lp}


# ---------------------------------------------------------------------------------- oracle
def oracle(p: Problem, meta: dict) -> Any:
    fam = meta["family"]
    if meta.get("infeasible"):
        return None  # by construction (fixed_rows: the row over fixed nodes, checked in Python integers)
    if "small" in meta:
        return oracle(meta["small"], meta["small_meta"])
    if fam == "chain_big":
        return enumerate_exact(p, meta["lo"], meta["hi"])
    if fam in ("query_free", "kkt"):
        return kkt_l2_optimum(p)
    if not p.integer:
        return continuous_optimum(p)
    if fam == "tiny":
        return enumerate_optimum(p, meta["lo"], meta["hi"])
    return tree_dp_optimum(p, meta["vmax"])


def _resolution(p: Problem, meta: dict, values: np.ndarray) -> float:
    """How far float64 at the family's magnitude moves a continuous objective (values to a few ulps)."""
    if p.integer or "scale" not in meta or meta["family"] == "infeasible_lp":
        return 0.0
    d = np.abs(np.asarray(values, dtype=float) - np.nan_to_num(p.target))
    ulp = 8 * np.spacing(meta["scale"] * 8)
    return float(np.sum(np.where(np.isnan(p.target), 0.0, p.weights * (2 * d + ulp) * ulp)))


def snapshot(p: Problem) -> tuple:
    return tuple(a.copy() for a in (p.parent, p.target, p.fixed, p.weights, p.lower, p.upper))


def check_one(name: str, p: Problem, meta: dict, best: float | None, seed: int, tally: Counter) -> None:
    key = (name, p.objective)
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
        assert exc.termination == "infeasible" and exc.refuted_by is None and best is None, \
            f"{name} failed on seed {seed}: {exc}"
        tally[(*key, "ok")] += 1
        return
    # never "optimal" for an infeasible problem, an infeasible point, or a point above the optimum
    assert best is not None, f"{name} returned optimal for a problem the oracle finds infeasible (seed {seed})"
    v = np.asarray(sol.values)
    if p.integer:
        assert feasible_exact(p, v), f"{name} returned optimal for an infeasible point (seed {seed}, exact check)"
    else:
        big = meta.get("scale", 1.0)
        assert feasible(p, v.astype(float), 1e-6 * max(1.0, big / 1e6)), \
            f"{name} returned optimal for an infeasible point (seed {seed})"
    if meta["family"] == "chain_big":  # exact fractions: equal to the optimum, not within a tolerance
        got = objective_exact(p, v)
        assert got == best, f"{name}: objective {float(got)!r} above the optimum {float(best)!r} (seed {seed})"
    else:
        got = objective_at(p, v.astype(float))
        if "shift" in meta:  # translate back: the small instance's objective at y - shift
            got = objective_at(meta["small"], v.astype(float) - meta["shift"])
        tol = (1e-7 if p.integer else 1e-6) * max(1.0, abs(best)) + _resolution(p, meta, v)
        assert got <= best + tol, f"{name}: returned optimal at {got!r}, above the optimum {best!r} (seed {seed})"
        assert got >= best - tol, f"{name}: objective {got!r} below the oracle's optimum {best!r} (seed {seed})"
    for a, b in zip(before, snapshot(p), strict=True):
        np.testing.assert_array_equal(a, b)
    if seed % 5 == 0:
        again = hierdp.solve(p, solver=name, time_limit=120)
        np.testing.assert_array_equal(np.asarray(again.values), np.asarray(sol.values))
    tally[(*key, "ok")] += 1


#: defects the fuzz may meet and count as ``open`` (printed by the long profile) instead of failing,
#: each with its reproducer; n4 and n7 are fixed (issue 19). Every other pair must pass.
OPEN: dict[tuple[str, str], str] = {
    # n5's own instances now say "infeasible"; levels of this family at 1e12 whose contradiction
    # (1 to 1,000 units) is below GLOP's 1e-7 relative tolerance still stop with "numerical" after
    # the unscaled retry (seeds 3, 19, 23, 35): an honest stop, not the right termination
    ("infeasible_lp", "ortools"): "n5 class: ortools (GLOP) says numerical, not infeasible, on some levels at 1e12",
}


def run(family: str, seeds: range, tally: Counter) -> None:
    make = FAMILIES[family]
    for seed in seeds:
        p, meta = make(seed)
        best = oracle(p, meta)
        for name in SOLVERS:
            try:
                check_one(name, p, meta, best, seed, tally)
            except AssertionError:
                if (family, name) in OPEN:
                    tally[(name, p.objective, "open")] += 1
                    continue
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
                  f"{tally[(*key, 'refused')]:>5}  failed {tally[(*key, 'FAILED')]:>3}  open defect "
                  f"{tally[(*key, 'open')]:>3}", flush=True)
        for f in failures[:20]:
            print("  FAILURE:", f, flush=True)
    assert not failures


# ---------------------------------------------------------------------------------- time limits
#: the in-process time-limit family (n8): HiGHS in this process (``hard_time_limit=False``, or an
#: ``executor``), where no worker can be killed; the child process reports how long the call took
_TIMED = """
import sys, time, json, numpy as np, hierdp
from concurrent.futures import ThreadPoolExecutor
from hierdp.models import Problem
case, limit, how = sys.argv[1], float(sys.argv[2]), sys.argv[3]
nan, inf = np.nan, np.inf
if case == "n6":  # a 4-child weighted level with one bound at 1e12 (reproducers n6, n8)
    s = np.floor(1e12 * np.array([0.2356, 0.2412, 0.3043, 0.2233]))
    p = Problem([-1, 0, 0, 0, 0], np.r_[nan, np.array([-4.0, 2.0, -6.5, 1.0]) + s], fixed=[-1 + s.sum(), nan, nan,
                nan, nan], weights=[1, 0.5, 3.0, 1.0, 2.0], upper=[inf, inf, inf, inf, s[3]], objective="linf")
else:  # one group of 10^4 children (reproducer r9)
    rng = np.random.default_rng(0)
    p = Problem.from_groups(rng.normal(20, 5, 10_000), [0, 10_000], [200_000], objective=case)
opts = {"hard_time_limit": False} if how == "in_process" else {"executor": ThreadPoolExecutor(1)}
t0 = time.perf_counter()
try:
    hierdp.solve(p, solver="highs", time_limit=limit, **opts)
    out = "optimal"
except hierdp.solvers.SolverFailed as exc:
    out = str(exc.termination)
print(json.dumps({"outcome": out, "seconds": time.perf_counter() - t0}), flush=True)
"""
#: seconds past the limit an in-process call may take (HiGHS checks its clock between phases)
_GRACE = 3.0
TIMED_QUICK = [("n6", 2.0, "in_process"), ("linf", 2.0, "executor")]
TIMED_LONG = [(case, limit, how) for case in ("n6", "linf", "l1", "l2") for limit in (1.0, 2.0, 5.0)
              for how in ("in_process", "executor")]


def _timed(case: str, limit: float, how: str) -> None:
    import json
    import subprocess
    import sys

    try:  # the parent's own guard: a call that never returns is killed, and fails the test
        run = subprocess.run([sys.executable, "-c", _TIMED, case, str(limit), how], capture_output=True, text=True,
                             timeout=limit + _GRACE + 30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"highs ({how}, time_limit={limit}) on {case}: no return after {limit + _GRACE + 30:.0f} s "
                    "(the child's start included)")
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["outcome"] in ("optimal", "time_limit"), f"{case} {how}: {got}"
    assert got["seconds"] <= limit + _GRACE, f"highs ({how}) overran time_limit={limit} on {case}: {got}"


@pytest.mark.parametrize("case, limit, how", TIMED_QUICK)
def test_in_process_time_limits(case, limit, how):
    _timed(case, limit, how)


@pytest.mark.fuzz
@pytest.mark.parametrize("case, limit, how", TIMED_LONG)
def test_in_process_time_limits_long(case, limit, how):
    _timed(case, limit, how)
