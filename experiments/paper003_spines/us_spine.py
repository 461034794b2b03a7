"""Paper 003 on a US-like spine: real ZIP geography (``zipcodes``), synthetic blocks and counts.

Run: ``python -m experiments.paper003_spines.us_spine [--states RI DE] [--runs 3] [--rho 1] [--shape 2 3 4]``
(writes results/paper003_us_spine_*.csv).

Prints, before and after spine optimization (optimized block groups, Algorithm 2's tract groups,
Algorithm 3's bypass; production settings: fanout cutoff 12, entity threshold 9, bypass cutoff 150):

1. the OSED distribution of the real off-spine entities (postal places and area codes, unions of
   ZIP areas that cross county lines) and the number of geounits and measured geounits per geolevel;
2. a table in the spirit of §6's production settings;
3. the Census-style TopDown at equal total rho on both spines, with a histogram of ``--shape``
   cells per geounit (default 2 x 3 x 4 = 24 cells; strategy: total, one- and two-way marginals,
   detailed, equal shares): RMSE of the entity totals (sum of the released block histograms over
   the entity's blocks) and of the entity's cells, over repeated runs, by entity size.

The paper has no result table to compare with; what must hold is that optimization does not worsen
the OSEDs (lexicographically), keeps every path sum at 1, and lowers the off-spine error.
"""

from __future__ import annotations

import argparse
from fractions import Fraction

import numpy as np
import pandas as pd

from experiments.common import RESULTS, format_table, timed
from hierdp.datasets.us_geography import US_LEVELS, load_zip_table, us_like_blocks, us_like_counts, us_like_entities
from hierdp.mechanisms import create
from hierdp.mechanisms.census import QueryStrategy, SpineHistograms
from hierdp.spines import Spine, bypass, geounit_query_variances, optimize_block_groups, optimize_tract_groups, osed

PROPORTIONS = {"US": Fraction(1, 7), "state": Fraction(1, 7), "county": Fraction(1, 7), "tract_group": Fraction(1, 7),
               "tract": Fraction(1, 7), "block_group": Fraction(1, 7), "block": Fraction(1, 7)}


def build(states: list[str], seed: int, blocks_per_zip: tuple[int, int]) -> tuple:
    zips = load_zip_table(states)
    blocks = us_like_blocks(zips, blocks_per_zip=blocks_per_zip, seed=seed)
    conventional = Spine.from_frame(blocks, US_LEVELS, PROPORTIONS, root="US")
    ents = us_like_entities(blocks, conventional)
    return blocks, conventional, ents


def optimize(spine: Spine, ents, privacy: str) -> tuple[Spine, object]:
    s1 = optimize_block_groups(spine, ents, fanout_cutoff=12)
    e1 = ents.remap(spine, s1)
    s2 = optimize_tract_groups(s1, e1, county_level="county", fanout_cutoff=12, entity_threshold=9)
    s3 = bypass(s2, privacy=privacy, scope="per_county", bypass_cutoff=150)
    return s3, e1.remap(s1, s3)


def entity_error(spine: Spine, ents, counts: np.ndarray, rho: float, runs: int, strategy: QueryStrategy) -> tuple:
    """Errors of the entity totals ``(runs, entities)`` and of their cells ``(runs, entities, K)``."""
    data = SpineHistograms(spine, counts)
    ind = ents.indicator()
    truth_cells = ind @ counts
    errs, cell_errs, secs = [], [], []
    for r in range(runs):
        rel, t = timed(create("census_topdown", rho=rho, strategy=strategy).release, data, seed=100 + r)
        est_cells = ind @ rel.values[spine.blocks]
        errs.append(est_cells.sum(1) - truth_cells.sum(1))
        cell_errs.append(est_cells - truth_cells)
        secs.append(t)
    return np.array(errs), np.array(cell_errs), float(np.mean(secs))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", nargs="+", default=["RI", "DE"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rho", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--blocks-per-zip", type=int, nargs=2, default=(2, 12))
    ap.add_argument("--shape", type=int, nargs="+", default=(2, 3, 4),
                    help="attribute sizes of the histogram (default 2 3 4 = 24 cells)")
    args = ap.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    _, conv, ents = build(args.states, args.seed, tuple(args.blocks_per_zip))
    opt, ents_opt = optimize(conv, ents, "zcdp")
    print(f"US-like spine from real ZIP geography of {', '.join(args.states)}: {conv.n_blocks:,} synthetic blocks, "
          f"{ents.n} off-spine entities (postal places, area codes)")
    o_conv, o_opt = osed(conv, ents), osed(opt, ents_opt)
    q = [0.5, 0.9, 0.99, 1.0]
    table = pd.DataFrame({"spine": ["conventional", "optimized"],
                          **{f"osed_q{int(x * 100)}": [o_conv.quantile(x), o_opt.quantile(x)] for x in q},
                          "osed_mean": [o_conv.mean(), o_opt.mean()],
                          "geounits": [conv.n, opt.n], "measured": [int(conv.measured.sum()), int(opt.measured.sum())]})
    print("\nOSED distribution and measured geounits\n" + format_table(table))
    print("\nPer geolevel (optimized, zCDP bypass)\n" + format_table(opt.summary()))
    pure, _ = optimize(conv, ents, "pure")
    print(f"\npure-DP bypass rule: {int(pure.measured.sum()):,} measured geounits of {pure.n:,} "
          f"(zCDP rule: {int(opt.measured.sum()):,} of {opt.n:,})")
    settings = pd.DataFrame([
        {"setting": "geolevels", "value": " -> ".join(conv.level_names)},
        {"setting": "OSE categories", "value": "postal place (state, city); first area code"},
        {"setting": "optimized block groups", "value": "within each ZIP (tract), same OSEs, <= floor(sqrt(n)+12)+1 blocks"},
        {"setting": "tract groups", "value": "Alg. 2 per county, cutoff floor(sqrt(#tracts)+12), threshold 9"},
        {"setting": "bypass", "value": "Alg. 3 per county (zCDP: single-child rule), cutoff 150"},
        {"setting": "PLB per geolevel", "value": ", ".join(f"{k} {v}" for k, v in PROPORTIONS.items())},
    ])
    print("\nSettings (in the spirit of §6)\n" + format_table(settings))
    strategy = QueryStrategy.marginals(tuple(args.shape))
    mats = [strategy.group_matrix(g) for g in strategy.groups]
    shares = [strategy.shares[g] for g in strategy.groups]
    vrows = []
    for name, sp in (("conventional", conv), ("optimized", opt)):
        var = geounit_query_variances(sp, mats, shares, np.ones((1, strategy.n_cells)), calculus="zcdp",
                                      budget=Fraction(str(args.rho)))[:, 0]
        vrows.append({"spine": name, **{lv: float(var[sp.level == i].mean()) for i, lv in enumerate(sp.level_names)}})
    print("\nWLS variance of geounit totals (two-pass, zCDP, mean per geolevel; no rounding, no non-negativity)\n"
          + format_table(pd.DataFrame(vrows), "{:,.3f}"))
    counts = us_like_counts(conv.n_blocks, strategy.n_cells, mean=30, seed=args.seed)
    pos = opt.block_positions(conv.block_names)
    counts_opt = np.empty_like(counts)
    counts_opt[pos] = counts
    e_conv, c_conv, t_conv = entity_error(conv, ents, counts, args.rho, args.runs, strategy)
    e_opt, c_opt, t_opt = entity_error(opt, ents_opt, counts_opt, args.rho, args.runs, strategy)
    size = ents.sizes
    bucket = pd.cut(size, [0, 5, 20, 100, np.inf], labels=["1-5", "6-20", "21-100", ">100"])
    rows = []
    for name, e, c in (("conventional", e_conv, c_conv), ("optimized", e_opt, c_opt)):
        for b in bucket.categories:
            m = np.asarray(bucket == b)
            if m.any():
                rows.append({"spine": name, "entity_blocks": b, "entities": int(m.sum()),
                             "rmse_total": float(np.sqrt(np.mean(e[:, m] ** 2))),
                             "rmse_cell": float(np.sqrt(np.mean(c[:, m] ** 2)))})
        rows.append({"spine": name, "entity_blocks": "all", "entities": ents.n,
                     "rmse_total": float(np.sqrt(np.mean(e ** 2))), "rmse_cell": float(np.sqrt(np.mean(c ** 2)))})
    err = pd.DataFrame(rows)
    print(f"\nCensus-style TopDown, rho={args.rho}, {args.runs} runs, {strategy.n_cells} cells "
          f"({' x '.join(map(str, strategy.shape))}; {len(strategy.groups)} query groups, equal shares); "
          f"seconds per run: conventional {t_conv:.1f}, optimized {t_opt:.1f}")
    print("RMSE of off-spine entity totals and of their cells\n" + format_table(err))
    table.to_csv(RESULTS / "paper003_us_spine_osed.csv", index=False)
    err.to_csv(RESULTS / "paper003_us_spine_error.csv", index=False)


if __name__ == "__main__":
    main()
