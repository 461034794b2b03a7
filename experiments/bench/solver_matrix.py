"""The researchers' table: every solver plug-in on the matrix objective x constraint kind x
magnitude x size, in one run, each call with a time limit.

Axes:

* objective: integer and continuous L∞, L1, L2 (six);
* constraint kind, on a TopDown level (``G`` fixed parent totals, ten free children each) unless
  said: ``level`` (consistency only), ``tree`` (a whole tree: root fixed, ``G`` free groups of ten
  free children), ``bounds`` (per-child intervals near the truth on 30 % of the children),
  ``row_in`` (a cap on two children of the same group, 20 % of the groups), ``row_across`` (a cap
  on two children of consecutive groups, coupling them), ``chains`` (monotone chains of ten
  cumulative counts, the last of each fixed: paper 001's Model 3 shape, no tree), ``queries`` (a
  query term per group on the sum of its first five children);
* magnitude: the parent totals (the root total for ``tree``; the chains' last values), 10^2 ... 10^12;
* size: nodes, 10 ... 10^5.

The full grid has 630 cells; the run samples it: every objective x kind at 10^3 nodes and
magnitudes 10^2, 10^6, 10^12; magnitudes 10^4 and 10^9 for ``level`` and ``row_across``; sizes 10
and 10^5 for ``level`` and ``row_in`` at 10^6 (174 cells). ``--quick``: every objective x
``level``, ``tree``, ``row_across``, ``chains`` at 100 nodes and 10^6 (24 cells, 1 s limit).

Every exact registered plug-in and ``auto`` run on every cell (a plug-in that refuses does so in
``unsupported()`` in milliseconds). Targets are the true integer counts plus rounded Gaussian
noise (sd 3), so every instance is feasible. Per cell and plug-in the table prints what happened
and how long the ``hierdp.solve`` call took (verification included):

* ``opt 0.12``: a verified optimum in 0.12 s;
* ``tl 5.0 +3e-4``: stopped at the time limit with a feasible point whose objective is 3e-4
  (relative) above the best proven bound of the cell; ``tl 5.0`` without a point, or with one but
  no proven bound in the cell to compare it with;
* ``inf``, ``err``, ``num``: stopped with that termination (infeasible, error, numerical);
  ``bad``: an answer verification refuted;
* ``-``: refused before solving (``unsupported()``); ``late``: refused by ``solve`` although
  ``unsupported()`` had accepted (a contract breach).

After the table, the general solvers are ranked per problem class (type, objective, rows or
none) by the cells they solved and their median seconds: the order ``auto`` uses
(``hierdp.solvers.registry.GENERAL_ORDER``).

The best proven bound of a cell is the largest lower bound any plug-in proved: a stated
``Solution.bound`` or the objective of a verified optimum. Every ``opt`` entry must equal it
(relative 1e-6 plus float64's resolution at the cell's magnitude); the run says so at the end
and exits 1 otherwise.

Run: ``python -m experiments.bench.solver_matrix`` (full: under 30 minutes on 2 cores;
``--time-limit`` seconds per call, default 5) or ``--quick`` (under 2 minutes). ``--csv FILE``
writes one row per cell and plug-in.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

import hierdp
from hierdp.models import Problem
from hierdp.solvers import SolverFailed, UnsupportedProblem, get

OBJECTIVES = [("linf", True), ("l1", True), ("l2", True), ("linf", False), ("l1", False), ("l2", False)]
KINDS = ["level", "tree", "bounds", "row_in", "row_across", "chains", "queries"]
CHILDREN = 10
NOISE_SD = 3.0


@dataclass(frozen=True)
class Cell:
    """One cell of the matrix."""

    objective: str
    integer: bool
    kind: str
    magnitude: float
    nodes: int

    @property
    def label(self) -> str:
        return (f"{'int' if self.integer else 'cont':<4} {self.objective:<4} {self.kind:<10} "
                f"1e{round(np.log10(self.magnitude)):<2} {self.nodes:>6}")


def cells(quick: bool) -> list[Cell]:
    """The sampled grid (see the module docstring)."""
    out: list[Cell] = []
    if quick:
        for obj, integer in OBJECTIVES:
            for kind in ("level", "tree", "row_across", "chains"):
                out.append(Cell(obj, integer, kind, 1e6, 100))
        return out
    for obj, integer in OBJECTIVES:
        for kind in KINDS:
            for mag in (1e2, 1e6, 1e12):
                out.append(Cell(obj, integer, kind, mag, 1000))
        for kind in ("level", "row_across"):
            for mag in (1e4, 1e9):
                out.append(Cell(obj, integer, kind, mag, 1000))
        for kind in ("level", "row_in"):
            for nodes in (10, 100_000):
                out.append(Cell(obj, integer, kind, 1e6, nodes))
    return out


# ---------------------------------------------------------------------------------- instances
def _split(rng: np.random.Generator, totals: np.ndarray, k: int) -> np.ndarray:
    """Integer children summing exactly to each total (a multinomial over skewed shares)."""
    shares = rng.dirichlet(np.full(k, 0.7), totals.size)
    out = np.empty((totals.size, k), np.int64)
    for g, (t, p) in enumerate(zip(totals.astype(np.int64), shares, strict=True)):
        out[g] = rng.multinomial(int(t), p)
    return out


def instance(cell: Cell, seed: int = 0) -> Problem:
    """The cell's problem: true integer counts, targets = truth + rounded noise (always feasible)."""
    rng = np.random.default_rng(seed)
    b = CHILDREN
    if cell.kind == "chains":
        n_chains = max(1, cell.nodes // b)
        last = np.floor(cell.magnitude * rng.uniform(0.5, 1.0, n_chains))
        steps = _split(rng, last, b)  # non-negative increments of each chain
        true = np.cumsum(steps, axis=1).ravel().astype(float)
        target = true + np.rint(rng.normal(0, NOISE_SD, true.size))
        fixed = np.full(true.size, np.nan)
        fixed[b - 1::b] = true[b - 1::b]
        p = Problem(np.full(true.size, -1), target, fixed=fixed, objective=cell.objective, integer=cell.integer)
        p.add_monotone_chains(np.arange(true.size).reshape(n_chains, b), name="chain")
        return p
    if cell.kind == "tree":
        G = max(1, (cell.nodes - 1) // (b + 1))
        group_totals = _split(rng, np.array([np.floor(cell.magnitude)]), G)[0]
        kids = _split(rng, group_totals.astype(float), b)
        true = np.r_[float(group_totals.sum()), group_totals, kids.ravel()].astype(float)
        parent = np.r_[-1, np.zeros(G, np.int64), np.repeat(np.arange(1, G + 1), b)]
        target = true + np.rint(rng.normal(0, NOISE_SD, true.size))
        target[0] = np.nan
        fixed = np.full(true.size, np.nan)
        fixed[0] = true[0]
        return Problem(parent, target, fixed=fixed, objective=cell.objective, integer=cell.integer)
    G = max(1, cell.nodes // (b + 1))
    totals = np.floor(cell.magnitude * rng.uniform(0.5, 1.0, G))
    kids = _split(rng, totals, b).ravel().astype(float)
    n = G + kids.size
    parent = np.r_[np.full(G, -1), np.repeat(np.arange(G), b)]
    target = np.r_[np.full(G, np.nan), kids + np.rint(rng.normal(0, NOISE_SD, kids.size))]
    fixed = np.r_[totals, np.full(kids.size, np.nan)]
    lower = np.full(n, -np.inf)
    upper = np.full(n, np.inf)
    if cell.kind == "bounds":
        pick = G + np.flatnonzero(rng.random(kids.size) < 0.3)
        true_k = kids[pick - G]
        upper[pick] = true_k + rng.integers(0, 3, pick.size)
        lower[pick] = np.maximum(true_k - rng.integers(0, 3, pick.size), 0)
    p = Problem(parent, target, fixed=fixed, objective=cell.objective, integer=cell.integer, lower=lower,
                upper=upper)
    if cell.kind in ("row_in", "row_across"):
        groups = np.flatnonzero(rng.random(G) < 0.2)
        if cell.kind == "row_across":
            groups = groups[groups + 1 < G] if G > 1 else groups[:0]
        if groups.size == 0:
            groups = np.array([0])
        a = G + groups * b
        c = a + 1 if cell.kind == "row_in" or G == 1 else G + (groups + 1) * b
        cap = kids[a - G] + kids[c - G] + 1
        from scipy.sparse import csr_matrix

        m = groups.size
        mat = csr_matrix((np.ones(2 * m), np.stack([a, c], 1).ravel(), np.arange(0, 2 * m + 1, 2)), shape=(m, n))
        p.add_constraints(mat, upper=cap, name=cell.kind)
    if cell.kind == "queries":
        half = b // 2
        rows = np.repeat(np.arange(G), half)
        cols = G + (np.arange(G)[:, None] * b + np.arange(half)[None, :]).ravel()
        from scipy.sparse import csr_matrix

        mat = csr_matrix((np.ones(rows.size), (rows, cols)), shape=(G, n))
        true_q = mat @ np.r_[totals, kids]
        p.add_query_terms(mat, true_q + np.rint(rng.normal(0, NOISE_SD, G)), name="first half")
    return p


# ---------------------------------------------------------------------------------- running
@dataclass
class Entry:
    """One plug-in on one cell."""

    solver: str
    outcome: str  # opt, tl, inf, err, num, bad, ref, late, crash, il
    seconds: float
    objective: float = float("nan")
    bound: float = float("nan")
    chosen: str = ""
    reason: str = ""


_SHORT = {"optimal": "opt", "time_limit": "tl", "infeasible": "inf", "error": "err", "numerical": "num",
          "iteration_limit": "il", "unbounded": "unb", "infeasible_or_unbounded": "inf", "interrupted": "int"}


def run_one(problem: Problem, name: str, time_limit: float) -> Entry:
    """One ``hierdp.solve`` call, classified."""
    if name != "auto":
        why = get(name).unsupported(problem)
        if why:
            return Entry(name, "ref", 0.0, reason=why[0])
    t0 = time.perf_counter()
    try:
        sol = hierdp.solve(problem, solver=name, time_limit=time_limit)
    except UnsupportedProblem as exc:
        return Entry(name, "ref" if name == "auto" else "late", time.perf_counter() - t0, reason=str(exc)[:200])
    except SolverFailed as exc:
        sec = time.perf_counter() - t0
        best = exc.best
        outcome = "bad" if exc.refuted_by else _SHORT.get(str(exc.termination), "err")
        return Entry(name, outcome, sec, objective=best.objective if best is not None else float("nan"),
                     bound=best.bound if best is not None and best.bound is not None else float("nan"),
                     reason=exc.message[:200])
    except Exception as exc:  # a crash is a finding too
        return Entry(name, "crash", time.perf_counter() - t0, reason=f"{type(exc).__name__}: {exc}"[:200])
    sec = time.perf_counter() - t0
    chosen = sol.stats.get("auto", {}).get("chosen", sol.solver) if name == "auto" else ""
    return Entry(name, "opt", sec, objective=float(sol.objective),
                 bound=float(sol.bound) if sol.bound is not None else float("nan"), chosen=chosen)


def tolerance(problem: Problem, objective: float) -> float:
    """How far two proven optima of one cell may differ: 1e-6 relative plus what float64 resolves
    at the cell's magnitude (continuous answers hold values to a few ulps)."""
    tol = 1e-6 * max(1.0, abs(objective))
    if not problem.integer:
        ulp = 8 * np.spacing(max(problem.magnitude(), 1.0))
        term = problem.is_free & ~np.isnan(problem.target)
        tol += float(term.sum()) * ulp * (1 + (2 * np.sqrt(abs(objective)) if problem.objective == "l2" else 1))
    return tol


def best_bound(entries: list[Entry]) -> float:
    """The largest proven lower bound of the cell: stated bounds and verified optima."""
    vals = [e.bound for e in entries if np.isfinite(e.bound)] + [e.objective for e in entries if e.outcome == "opt"]
    return max(vals) if vals else float("nan")


def cell_text(e: Entry, bound: float) -> str:
    if e.outcome in ("ref",):
        return "-"
    text = f"{e.outcome} {e.seconds:.2f}" if e.seconds < 10 else f"{e.outcome} {e.seconds:.1f}"
    if e.outcome != "opt" and np.isfinite(e.objective) and np.isfinite(bound):
        text += f" +{(e.objective - bound) / max(1.0, abs(e.objective)):.0e}"
    if e.outcome == "opt" and e.chosen:
        text += f" {e.chosen[:2]}"
    return text


ROW_KINDS = ("row_in", "row_across", "chains", "queries")
GENERAL = ("highs", "ortools", "pdlp")


def measured_order(rows: list[dict[str, Any]]) -> list[str]:
    """Per problem class (objective, integrality, rows or not): the general solvers ranked by the
    share of the cells they accept that they solve to a verified optimum (a refusal costs ``auto``
    nothing: it skips the plug-in), then by their median seconds on those; the lines ``auto``'s
    ``GENERAL_ORDER`` rests on."""
    out = []
    classes = sorted({(r["objective"], r["type"], r["kind"] in ROW_KINDS) for r in rows},
                     key=lambda c: (c[1] != "integer", ["linf", "l1", "l2"].index(c[0]), c[2]))
    for obj, typ, has_rows in classes:
        stats = []
        for name in GENERAL:
            mine = [r for r in rows if r["solver"] == name and r["objective"] == obj and r["type"] == typ
                    and (r["kind"] in ROW_KINDS) == has_rows]
            accepted = [r for r in mine if r["outcome"] not in ("ref",)]
            solved = sorted(r["seconds"] for r in accepted if r["outcome"] == "opt")
            med = solved[len(solved) // 2] if solved else float("inf")
            stats.append((name, len(solved), len(accepted), len(mine), med))
        ranked = sorted(stats, key=lambda t: (-(t[1] / t[2]) if t[2] else 1.0, t[4], GENERAL.index(t[0])))
        figures = "; ".join(f"{n} {k}/{acc}" + (f" in {m:.2f} s" if k else "") for n, k, acc, _, m in ranked if acc)
        order = ", ".join(n for n, _, acc, _, _ in ranked if acc)
        kind = "int" if typ == "integer" else "cont"
        out.append(f"{kind:<4} {obj:<4} {'rows' if has_rows else 'none':<4}  {figures}  ->  {order or '-'}")
    return out


def matrix_plugins() -> list[str]:
    """The exact, available plug-ins that solve :class:`Problem` s (level or tree structures; the
    histogram plug-ins solve census level chunks, another problem kind)."""
    return [n for n in hierdp.solvers.names() if get(n).exact and get(n).available()
            and get(n).capabilities.structures & {"level", "tree"}]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="24 cells at 100 nodes, 1 s per call (under 2 minutes)")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per call (default 5; --quick: 1)")
    ap.add_argument("--csv", default=None, help="write one row per cell and plug-in here")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    limit = args.time_limit if args.time_limit is not None else (1.0 if args.quick else 5.0)
    plugins = [*matrix_plugins(), "auto"]
    grid = cells(args.quick)
    t_all = time.perf_counter()
    head = f"{'type obj  kind       magn   nodes':<38}" + "".join(f"{n:<14}" for n in plugins)
    lines = [head, "-" * len(head)]
    rows: list[dict[str, Any]] = []
    disagreements: list[str] = []
    print(f"solver matrix: {len(grid)} cells x {len(plugins)} plug-ins, time limit {limit:g} s per call",
          file=sys.stderr, flush=True)
    for k, cell in enumerate(grid):
        p = instance(cell, args.seed)
        entries = [run_one(p, name, limit) for name in plugins]
        bound = best_bound(entries)
        for e in entries:
            gap = (e.objective - bound) / max(1.0, abs(e.objective)) if np.isfinite(bound) else float("nan")
            if e.outcome == "opt" and abs(e.objective - bound) > tolerance(p, bound):
                disagreements.append(f"{cell.label}: {e.solver} optimal at {e.objective!r}, best bound {bound!r}")
            rows.append({"type": "integer" if cell.integer else "continuous", "objective": cell.objective,
                         "kind": cell.kind, "magnitude": cell.magnitude, "nodes": p.n, "solver": e.solver,
                         "outcome": e.outcome, "seconds": e.seconds, "objective_value": e.objective,
                         "bound": e.bound, "best_bound": bound, "gap": gap, "chosen": e.chosen,
                         "reason": e.reason})
        lines.append(f"{cell.label:<38}" + "".join(f"{cell_text(e, bound):<14}" for e in entries))
        print(f"[{k + 1}/{len(grid)}] {lines[-1]}", file=sys.stderr, flush=True)
    print("\n".join(lines))
    print(f"\n{len(grid)} cells, {time.perf_counter() - t_all:.0f} s in all (time limit {limit:g} s per call).")
    print("\nGeneral solvers per class (type, objective, rows/chains/query terms or none): cells solved to a "
          "verified optimum of those it accepts, median seconds of the solved, and the resulting order:")
    print("\n".join(measured_order(rows)))
    if args.csv:
        import pandas as pd

        pd.DataFrame(rows).to_csv(args.csv, index=False)
    if disagreements:
        print("DISAGREEMENT with the best proven bound:\n  " + "\n  ".join(disagreements))
        return 1
    print("Every optimal entry equals its cell's best proven bound.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
