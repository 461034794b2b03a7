"""Time per bootstrap draw of the intervals of the bundled cities release (InfTDA, 37,054 nodes).

Run: ``python -m experiments.bench.intervals`` (``--draws``, default 200).

Prints, in one run against one release (ratios are what count on a shared machine):

1. the vectorized TopDown bootstrap (:func:`hierdp.intervals.topdown.simulate`: every level of a
   batch of draws expanded, noised and solved by IntOpt in one call) - seconds per draw, for
   batches of 1 draw (a per-draw loop over the same code) and the default batch;
2. the naive alternative: re-running the mechanism (``InfTDA.release``) on the pseudo-truth once
   per draw - seconds per draw;
3. the same three on a small tree (a 1 -> 10 -> 100 geography, 111 nodes), where per-call
   overhead dominates and batching draws pays;
4. the whole ``release.intervals(0.9)`` call (bootstrap + interval construction) and paper 000's
   L∞ bound (no simulation) - seconds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hierdp.datasets.bundled import world_cities_hierarchy
from hierdp.hierarchy import Hierarchy
from hierdp.intervals.topdown import simulate
from hierdp.mechanisms import create


def _pseudo_tree(release, tree: Hierarchy) -> Hierarchy:
    """The release's values on the tree's structure (0 where not released)."""
    counts = np.zeros(tree.n, np.int64)
    for lv in release.levels:
        counts[lv.keys] = lv.values
    return Hierarchy.from_arrays(np.asarray(tree.names), np.asarray(tree.parent), counts,
                                 level_names=list(tree.level_names))


def _small_tree() -> Hierarchy:
    rng = np.random.default_rng(0)
    edges = [("R", f"A{i}") for i in range(10)] + [(f"A{i}", f"A{i}-{j}") for i in range(10) for j in range(10)]
    leaves = [b for _, b in edges if "-" in b]
    return Hierarchy.from_edges(edges, counts={leaf: int(c) for leaf, c in
                                               zip(leaves, rng.integers(0, 500, len(leaves)), strict=True)})


def compare(label: str, tree: Hierarchy, draws: int) -> None:
    """Seconds per draw of the three ways to simulate re-releases of one InfTDA release."""
    mech = create("inftda", epsilon=1.0, delta=1e-8)
    rel, t_rel = _timed(lambda: mech.release(tree, seed=0))
    print(f"\n{label}: {tree.n:,} nodes; one InfTDA release {t_rel:.3f} s; {draws} draws per approach")
    rows = []
    _, t = _timed(lambda: simulate(rel, tree, draws, np.random.default_rng(1)))
    rows.append(("vectorized bootstrap, default batches", t))
    few = max(20, draws // 10)
    _, t = _timed(lambda: simulate(rel, tree, few, np.random.default_rng(1), children_per_batch=1))
    rows.append(("same code, one draw per batch", t / few * draws))
    pseudo = _pseudo_tree(rel, tree)
    _, t = _timed(lambda: [mech.release(pseudo, seed=s) for s in range(few)])
    rows.append(("re-run InfTDA.release per draw", t / few * draws))
    print(f"{'approach':<42} {'s / draw':>9} {'s for ' + str(draws):>10}")
    for name, total in rows:
        print(f"{name:<42} {total / draws:>9.4f} {total:>10.1f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    args = ap.parse_args(argv)
    tree = world_cities_hierarchy()
    compare("cities", tree, args.draws)
    compare("small tree", _small_tree(), args.draws)
    mech = create("inftda", epsilon=1.0, delta=1e-8)
    rel = mech.release(tree, seed=0)
    print()
    f, t = _timed(lambda: rel.intervals(0.9, domain=tree, draws=args.draws, seed=0))
    print(f"\nrelease.intervals(0.9, draws={args.draws}): {t:.1f} s for {len(f):,} nodes "
          f"(mean width {float((f.upper - f.lower).mean()):.1f})")
    f, t = _timed(lambda: rel.intervals(0.9, domain=tree, method="linf_bound"))
    print(f"release.intervals(0.9, method='linf_bound'): {t:.2f} s (mean width {float((f.upper - f.lower).mean()):.1f})")


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


if __name__ == "__main__":
    main()
