"""Every registered mechanism on one tree, through the registry, and the cost of the engine's seams.

Run: ``python -m experiments.bench.mechanisms`` (``--quick``: a 1/10 scale tree).

Prints, in one run (ratios are what count on a shared machine):

1. each tree mechanism of the registry on an Italy-like O/D tree (``italy_like_od``, 2,000
   municipalities and 50,000 pairs with ``--quick``; TDA_linf through HiGHS on a subsample):
   seconds per release, released nodes, ``check_consistency()``, the accounting calculus and its
   tightest (ε, δ) at δ = 1e-8 - the same four questions asked of every mechanism;
2. the level solve through :func:`hierdp.solvers.solve_groups` (the only way mechanisms reach a
   solver) against the fast path called directly, on the same level arrays: the seam's overhead;
3. the budget-plan and noise-model seams: InfTDA's default (uniform, discrete Gaussian) against
   geometric noise and HTF's geometric plan on the same tree.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from experiments.common import RESULTS, format_table, timed
from hierdp.hierarchy.od import ODTree
from hierdp.datasets.flows import italy_like_od
from hierdp.mechanisms import create
from hierdp.solvers import solve_groups

DELTA = 1e-8


def _tree(scale: dict, seed: int, max_pairs: int | None = None) -> ODTree:
    trips, geo = italy_like_od(**scale, seed=seed)
    if max_pairs is not None and len(trips) > max_pairs:
        trips = trips.sample(max_pairs, random_state=seed)
    return ODTree.from_trips(trips, origin="origin", destination="destination", count="count", origin_geo=geo,
                             geo_levels=["region", "province", "municipality"])


def mechanisms_table(tree: ODTree, small: ODTree, eps: float, seed: int) -> pd.DataFrame:
    cases = [("inftda", {}, tree), ("tda_l2", {}, tree), ("tda_l2_exact", {}, tree),
             ("tda_linf", {}, small), ("sh", {}, tree), ("vanilla", {"max_universe": 5e5}, small),
             ("topdown", {"noise": "geometric", "objective": "l2", "delta": None}, tree)]
    rows = []
    for name, extra, data in cases:
        params = {"epsilon": eps, "delta": DELTA, **extra}
        params = {k: v for k, v in params.items() if v is not None}
        rel, secs = timed(lambda name=name, params=params, data=data: create(name, **params).release(data, seed=seed))
        acc = rel.accounting
        best = acc.guarantee("approx")
        rows.append({"mechanism": name, "data": "full" if data is tree else "subsample", "seconds": secs,
                     "released_nodes": rel.n_nodes, "consistent": rel.check_consistency() == [],
                     "calculus": acc.calculus, "solver": rel.solver or "-",
                     "best_eps_at_delta": best.parameters["epsilon"] if best is not None else float("nan")})
    return pd.DataFrame(rows)


def seam_overhead(n_groups: int, seed: int) -> pd.DataFrame:
    """solve_groups(solver=...) vs the fast path called directly, on one level's arrays."""
    from hierdp.solvers.intopt import intopt_batch
    from hierdp.solvers.paper_round import paper_round_batch
    from hierdp.solvers.projection import integer_l2_batch, project_batch

    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 12, n_groups)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    true = rng.integers(0, 200, int(offsets[-1]))
    totals = np.add.reduceat(true, offsets[:-1])
    noisy = true + rng.integers(-20, 21, true.size)
    rows = []
    for label, direct, via in [
        ("intopt (integer L-inf)", lambda: intopt_batch(noisy, offsets, totals),
         lambda: solve_groups(noisy, offsets, totals, solver="intopt", objective="linf")),
        ("projection (exact integer L2)", lambda: integer_l2_batch(noisy.astype(float), offsets, totals),
         lambda: solve_groups(noisy, offsets, totals, solver="projection", objective="l2")),
        ("paper_round (TDA_l2 rule)",
         lambda: paper_round_batch(project_batch(noisy.astype(float), offsets, totals.astype(float)), offsets, totals),
         lambda: solve_groups(noisy, offsets, totals, solver="paper_round", objective="l2")),
    ]:
        a, t_direct = timed(direct)
        b, t_via = timed(via)
        rows.append({"solver": label, "children": int(offsets[-1]), "direct_s": t_direct, "solve_groups_s": t_via,
                     "ratio": t_via / t_direct,
                     "same_values": bool(np.array_equal(np.asarray(a), np.asarray(b.values)))})
    return pd.DataFrame(rows)


def seams_table(tree: ODTree, eps: float, seed: int) -> pd.DataFrame:
    rows = []
    for label, params in [("discrete Gaussian, uniform (InfTDA)", {"noise": "discrete_gaussian", "delta": DELTA}),
                          ("geometric, uniform", {"noise": "geometric"}),
                          ("geometric, HTF geometric plan", {"noise": "geometric", "plan": "geometric"})]:
        rel, secs = timed(lambda params=params: create("topdown", epsilon=eps, **params).release(tree, seed=seed))
        parts = [float(next(iter(s.budget.parameters.values()))) for s in rel.accounting.spends]
        rows.append({"seams": label, "seconds": secs, "released_nodes": rel.n_nodes,
                     "consistent": rel.check_consistency() == [],
                     "level parts": ", ".join(f"{p:.3g}" for p in parts)})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1/10 scale tree, 200,000-child seam level")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    scale = dict(n_regions=20, n_provinces=110, n_municipalities=8000, n_pairs=500_000, n_trips=28e6)
    n_groups = 200_000
    if args.quick:
        scale = dict(n_regions=20, n_provinces=110, n_municipalities=2000, n_pairs=50_000, n_trips=2.8e6)
        n_groups = 30_000
    tree, t_tree = timed(_tree, scale, args.seed)
    small = _tree(dict(scale, n_municipalities=300, n_pairs=3_000, n_trips=1e5), args.seed)
    print(f"tree: {tree!r} (built in {t_tree:.1f} s); subsample for TDA_linf / VanillaGauss: {small!r}\n")
    t1 = mechanisms_table(tree, small, args.epsilon, args.seed)
    print("1. every tree mechanism of the registry, same questions:")
    print(format_table(t1, "{:,.3f}"))
    t2 = seam_overhead(n_groups, args.seed)
    print("\n2. a level through solve_groups vs the fast path called directly (same arrays, same values):")
    print(format_table(t2, "{:,.3f}"))
    t3 = seams_table(tree, args.epsilon, args.seed)
    print(f"\n3. the engine's seams on the same tree (epsilon = {args.epsilon:g}):")
    print(format_table(t3, "{:,.3f}"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    t1.to_csv(RESULTS / "bench_mechanisms.csv", index=False)
    t2.to_csv(RESULTS / "bench_mechanisms_seams.csv", index=False)
    print(f"\nwrote {RESULTS / 'bench_mechanisms.csv'} and bench_mechanisms_seams.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
