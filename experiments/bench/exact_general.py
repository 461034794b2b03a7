"""The general solvers (``highs``, ``ortools``) exact at real magnitudes: new encodings against the
old ones (or their refusal), on real instances, in one run (issue 19, part 2).

Instances:

* **Viet Nam DP hierarchy** - paper 001's dynamic-programming tree over a national household
  survey (Ecdat ``VietNamH``: 5,999 households of 1..19 members, Viet Nam -> urban/rural -> 194
  communes; 3,744 nodes), the histogram measured with the geometric noise of ``MH`` (epsilon 1
  split over the 3 region levels), integer L2, root fixed. Oracle: ``costtable`` (paper 001's DP).
* **the same with a user row** ("households of 1 or 2 members, nationally, >= true count + 40",
  binding): ``costtable`` refuses rows. Oracle: a Lagrangian check of our own on ``costtable``:
  for a multiplier ``mu >= 0`` of the row, ``min F(y) - mu (a.y - c)`` is the tree problem with
  the two rows' targets moved by ``mu / 2w`` (``costtable`` solves it exactly); its value is a
  lower bound of the optimum for every ``mu``, and a ``mu`` whose minimiser meets the row with
  equality proves that minimiser optimal. ``mu`` is found by bisection.
* **county level** (``experiments/constraints/county_caps.py``: R ggplot2 ``midwest``, 437
  counties, counts to 5.1 M, InfTDA's noise, the cross-state cap, the within-state cap and the
  lower bound) with integer L-inf, L1 and L2.
* **n3 / n6** of ``../shared/repro/solvers/``: 5-node problems with rows or a bound at ~1e12.

Old encodings: integer L2 enumerated every chord of a proven window (refused beyond 500,000 chord
rows for HiGHS, 200,000 for CP-SAT); HiGHS integer L-inf used a continuous objective variable per
group (``integer_linf_objective=False`` runs it again); CP-SAT refused rows coupling two groups.

Run: ``python -m experiments.bench.exact_general [--time-limit 60] [--seed 0]``. Prints one line
per instance and encoding: status, seconds, objective, proven bound.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import hierdp
from hierdp.models import Problem
from hierdp.solvers import SolverFailed, UnsupportedProblem

ROW_SLACK = 40


def vietnam_problem(seed: int, epsilon: float = 1.0, row: bool = False) -> tuple[Problem, dict[str, Any]]:
    """Paper 001's Model 1 on the Viet Nam survey's DP tree, measured as ``MH`` measures it."""
    from hierdp.datasets.group_sizes import vietnam_households
    from hierdp.mechanisms.pgsr.problems import histogram_problem
    from hierdp.mechanisms.pgsr.unit import HISTOGRAM_L1
    from hierdp.privacy import samplers

    data = vietnam_households()
    dp = data.dynprog_tree()
    lp = data.regions.level_ptr
    rng = np.random.default_rng(seed)
    noisy = data.by_size.astype(np.int64).copy()
    for lev in range(data.n_levels):
        a, b = int(lp[lev]), int(lp[lev + 1])
        noisy[:, a:b] += samplers.geometric(epsilon / data.n_levels, HISTOGRAM_L1, (data.K, b - a), rng)
    p = histogram_problem(dp, noisy)
    info: dict[str, Any] = {}
    if row:
        nodes = [int(v) for v in dp.node(np.array([1, 2]), np.array([0, 0]))]
        c = int(data.by_size[0, 0] + data.by_size[1, 0]) + ROW_SLACK
        p.add_linear({nodes[0]: 1, nodes[1]: 1}, lower=c, name="households of 1-2 members")
        info = {"row_nodes": nodes, "row_lower": c}
    return p, info


def lagrangian_check(p: Problem, nodes: list[int], c: float, iterations: int = 60) -> tuple[float, bool, float]:
    """``(best lower bound, certified, optimum if certified)`` for ``p`` with the one row
    ``sum y[nodes] >= c``, by ``costtable`` on the row-free problem with moved targets."""
    base = Problem(p.parent, p.target, fixed=p.fixed, objective="l2", weights=p.weights, integer=True,
                   nonnegative=p.nonnegative, lower=p.lower, upper=p.upper)
    w = p.weights[nodes]

    def at(mu: float) -> tuple[float, float, np.ndarray]:
        t = p.target.copy()
        t[nodes] = t[nodes] + mu / (2 * w)
        q = Problem(base.parent, t, fixed=base.fixed, objective="l2", weights=base.weights, integer=True,
                    nonnegative=base.nonnegative, lower=base.lower, upper=base.upper)
        y = hierdp.solve(q, solver="costtable").values.astype(float)
        act = float(y[nodes].sum())
        return p.objective_value(y) - mu * (act - c), act, y

    best, lo, hi = -np.inf, 0.0, 1.0
    q0, act, y = at(0.0)
    if act >= c:
        return q0, True, p.objective_value(y)
    best = q0
    while at(hi)[1] < c:
        lo, hi = hi, 2 * hi
    for _ in range(iterations):
        mu = (lo + hi) / 2
        q, act, y = at(mu)
        best = max(best, q)
        if act == c:
            return best, True, p.objective_value(y)
        lo, hi = (mu, hi) if act < c else (lo, mu)
    q, act, y = at(hi)
    best = max(best, q)
    return best, act == c, p.objective_value(y) if act == c else float("nan")


def old_l2_refusal(p: Problem, solver: str) -> str:
    """What the enumerated chord window needed (the refusal before the lazy cuts)."""
    from hierdp.models.arrays import anchor_values

    free = p.is_free
    term = free & ~np.isnan(p.target) & (p.weights > 0)
    lo = np.ceil(p.effective_lower - 1e-9)
    hi = np.floor(p.upper + 1e-9)
    anc = anchor_values(p)
    hi = np.where(np.isnan(anc), hi, np.minimum(hi, np.floor(np.nan_to_num(anc) + 1e-9)))
    chords = float(np.maximum(hi - lo, 1)[term].sum())
    limit = 500_000 if solver == "highs" else 200_000
    return f"refused: {chords:,.0f} chord rows (> {limit:,})" if chords > limit else f"{chords:,.0f} chord rows"


def run(p: Problem, solver: str, time_limit: float, **options: Any) -> tuple[str, float, float, float | None]:
    t0 = time.perf_counter()
    try:
        sol = hierdp.solve(p, solver=solver, time_limit=time_limit, **options)
        return "optimal", time.perf_counter() - t0, sol.objective, sol.bound
    except UnsupportedProblem as exc:
        return "refused: " + str(exc).split("exactly: ", 1)[-1][:80], time.perf_counter() - t0, np.nan, None
    except SolverFailed as exc:
        best = exc.best
        return (str(exc.termination), time.perf_counter() - t0, best.objective if best else np.nan,
                best.bound if best else None)


def line(instance: str, encoding: str, status: str, secs: float, obj: float, bound: float | None) -> None:
    b = "-" if bound is None else f"{bound:,.2f}"
    print(f"{instance:<28} {encoding:<36} {status:<46} {secs:>8.2f} {obj:>16,.2f} {b:>16}", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    tl = args.time_limit
    print(f"{'instance':<28} {'encoding':<36} {'status':<46} {'seconds':>8} {'objective':>16} {'bound':>16}")

    # paper 001's DP hierarchy, integer L2
    p, _ = vietnam_problem(args.seed)
    line("VietNamH DP (3,744 nodes)", "costtable (oracle)", *run(p, "costtable", tl))
    for solver in ("highs", "ortools"):
        line("VietNamH DP (3,744 nodes)", f"{solver}: old enumerated chords", old_l2_refusal(p, solver), 0.0,
             np.nan, None)
        line("VietNamH DP (3,744 nodes)", f"{solver}: lazy chord cuts", *run(p, solver, tl))
    p, info = vietnam_problem(args.seed, row=True)
    t0 = time.perf_counter()
    lb, certified, value = lagrangian_check(p, info["row_nodes"], info["row_lower"])
    line("VietNamH DP + a user row", "Lagrangian check on costtable", "certified" if certified else "bound only",
         time.perf_counter() - t0, value, lb)
    line("VietNamH DP + a user row", "costtable", *run(p, "costtable", tl))
    for solver in ("highs", "ortools"):
        line("VietNamH DP + a user row", f"{solver}: lazy chord cuts", *run(p, solver, tl))

    # the county level with the three rows
    from experiments.constraints.county_caps import county_constraints, county_level_problem, county_tree, midwest

    tree, caps = county_tree(midwest()), county_constraints()
    for objective in ("linf", "l1", "l2"):
        p = county_level_problem(tree, caps, objective, args.seed)
        name = f"county level, {objective}, 3 rows"
        if objective == "linf":
            line(name, "highs: continuous objective (old)", *run(p, "highs", tl, integer_linf_objective=False))
            line(name, "highs: integer objective per group", *run(p, "highs", tl))
            line(name, "ortools: scaled deviations (coupled)", *run(p, "ortools", tl))
        elif objective == "l2":
            for solver in ("highs", "ortools"):
                line(name, f"{solver}: old enumerated chords", old_l2_refusal(p, solver), 0.0, np.nan, None)
                line(name, f"{solver}: lazy chord cuts", *run(p, solver, tl))
        else:
            for solver in ("highs", "ortools"):
                line(name, solver, *run(p, solver, tl))
        line(name, "auto", *run(p, "auto", tl))

    # n3 / n6 at 1e12
    nan, inf = np.nan, np.inf
    s = np.floor(1e12 * np.array([0.2356, 0.2412, 0.3043, 0.2233]))
    n6 = Problem([-1, 0, 0, 0, 0], np.r_[nan, np.array([-4.0, 2.0, -6.5, 1.0]) + s], fixed=[-1 + s.sum(), nan, nan, nan, nan],
                 weights=[1, 0.5, 3.0, 1.0, 2.0], upper=[inf, inf, inf, inf, s[3]], objective="linf")
    for solver in ("highs", "ortools"):
        line("n6: weighted level at 1e12", solver, *run(n6, solver, min(tl, 20)))
    big = np.array([3172584957086, 1889069482399, 1283515474687, 1283515474687, 1851325367184], float)
    n3 = Problem([-1, 0, 0, 2, -1], np.array([2.15625, -0.078125, 1.40625, -1.09375, 3.109375]) + big,
                 fixed=[nan, nan, 1 + big[2], nan, nan], weights=[1, 2, 3, 1, 2], objective="l1")
    n3.add_constraints(np.array([[0, 0, 1, 0, -1], [-1, 0, 0, 0, 1]]), lower=[big[2] - big[4], big[4] - big[0]],
                       upper=[inf, inf])
    for solver in ("highs", "ortools"):
        line("n3: L1 forest + 2 rows, 1e12", solver, *run(n3, solver, min(tl, 20)))


if __name__ == "__main__":
    main()
