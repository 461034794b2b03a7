"""``hierdp release``: release a CSV/Parquet file of trips or counts with a TopDown mechanism.

Three input layouts:

* trips (``--origin COL --destination COL --geo GEO.csv [--levels L1,L2,...]``): one row per trip
  (or per pair with ``--count``) between finest areas; the geography file has one column per
  level, coarse to fine, the finest being the area ids. An O/D tree (``--tree``) is built;
* the paper's level layout (``--origin-levels A0,..,Ag --destination-levels B0,..,Bg [--count]``);
* plain counts (``--levels L1,L2,... [--count COL]``): a hierarchy from level columns.

The output (CSV, or Parquet for ``.parquet``/``.pq``) has one row per released node.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["add_release_parser", "run_release", "read_table", "write_table", "build_tree", "build_mechanism"]

MECHANISMS = ("inftda", "tda_l2", "tda_l2_exact", "tda_linf", "vanilla", "sh")


def add_release_parser(subparsers: Any) -> None:
    """Add the ``release`` sub-command to an ``argparse`` sub-parser collection."""
    p = subparsers.add_parser("release", help="release a file of trips or counts with differential privacy",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="input CSV (optionally .gz) or Parquet file")
    p.add_argument("-o", "--output", required=True, help="output file: .csv, .csv.gz, .parquet or .pq")
    budget = p.add_argument_group("privacy")
    budget.add_argument("--epsilon", type=float, help="target epsilon (with --delta)")
    budget.add_argument("--delta", type=float, default=None, help="target delta (default 1e-8 with --epsilon)")
    budget.add_argument("--rho", type=float, help="total rho-zCDP instead of --epsilon")
    budget.add_argument("--unbounded", action="store_true", help="unbounded neighbours (the total is noised)")
    budget.add_argument("--contributions", type=int, default=1, help="trips (rows) per user, m (default 1)")
    budget.add_argument("--distinct-pairs", action="store_true",
                        help="a user's m trips are distinct finest O/D pairs (smaller leaf-level sensitivity)")
    budget.add_argument("--conversion", choices=("analytic", "numeric"), default="analytic",
                        help="(eps, delta) -> rho conversion (paper 000 uses analytic, Lemma 3)")
    budget.add_argument("--secure", action="store_true", help="OS randomness and exact samplers (real releases)")
    budget.add_argument("--seed", type=int, default=None, help="seed for reproducible experiments (not with --secure)")
    mech = p.add_argument_group("mechanism")
    mech.add_argument("--mechanism", choices=MECHANISMS, default="inftda")
    mech.add_argument("--solver", default=None, help="post-processing solver name (default per mechanism)")
    data = p.add_argument_group("input layout")
    data.add_argument("--tree", choices=("destination", "origin"), default="destination", help="O/D tree kind")
    data.add_argument("--origin", help="trips: column with origin area ids")
    data.add_argument("--destination", help="trips: column with destination area ids")
    data.add_argument("--geo", help="trips: geography file (one column per level, coarse to fine)")
    data.add_argument("--destination-geo", help="trips: destination geography if different from --geo")
    data.add_argument("--levels", help="comma-separated level columns (of --geo for trips, else of the input)")
    data.add_argument("--origin-levels", help="level layout: comma-separated origin level columns")
    data.add_argument("--destination-levels", help="level layout: comma-separated destination level columns")
    data.add_argument("--count", help="column of counts (default: one per row)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_release)


def read_table(path: str | Path) -> pd.DataFrame:
    """Read CSV (also compressed) or Parquet, by extension."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"input file not found: {path}")
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    return pd.read_csv(path)


def write_table(df: pd.DataFrame, path: str | Path, *, fmt_name: str | None = None) -> None:
    """Write CSV (gzip for ``.gz``) or Parquet, chosen by the extension of ``fmt_name`` (default:
    ``path``'s own name)."""
    path = Path(path)
    name = (fmt_name or path.name).lower()
    if name.endswith((".parquet", ".pq")):
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False, compression="gzip" if name.endswith(".gz") else None)


def _split(s: str | None) -> list[str] | None:
    return None if s is None else [c.strip() for c in s.split(",") if c.strip()]


def build_tree(args: argparse.Namespace, df: pd.DataFrame) -> Any:
    """The tree described by the command-line arguments (see module docstring)."""
    from hierdp.hierarchy import Hierarchy, HierarchyError
    from hierdp.hierarchy.od import ODTree

    if args.origin or args.destination:
        if not (args.origin and args.destination):
            raise HierarchyError("trips need both --origin and --destination")
        if not args.geo:
            raise HierarchyError("trips need a geography file: --geo GEO.csv")
        geo = read_table(args.geo)
        dgeo = read_table(args.destination_geo) if args.destination_geo else None
        return ODTree.from_trips(df, origin=args.origin, destination=args.destination, count=args.count,
                                 origin_geo=geo, destination_geo=dgeo, geo_levels=_split(args.levels), kind=args.tree)
    if args.origin_levels or args.destination_levels:
        if not (args.origin_levels and args.destination_levels):
            raise HierarchyError("the level layout needs both --origin-levels and --destination-levels")
        return ODTree.from_level_frame(df, origin_levels=_split(args.origin_levels),
                                       destination_levels=_split(args.destination_levels),
                                       count=args.count, kind=args.tree)
    if args.levels:
        return Hierarchy.from_frame(df, levels=_split(args.levels), count=args.count)
    raise HierarchyError("say what the input is: --origin/--destination with --geo (trips), "
                         "--origin-levels/--destination-levels (level layout), or --levels (counts)")


def build_mechanism(args: argparse.Namespace) -> Any:
    """The mechanism object described by the command-line arguments."""
    from hierdp.mechanisms.baselines import SH, VanillaGauss
    from hierdp.mechanisms.topdown import TDA, InfTDA
    from hierdp.privacy.errors import PrivacyParameterError

    if (args.epsilon is None) == (args.rho is None):
        raise PrivacyParameterError("give exactly one of --epsilon or --rho")
    delta = args.delta if args.delta is not None else (1e-8 if args.epsilon is not None else None)
    budget: dict[str, Any] = ({"epsilon": args.epsilon, "delta": delta} if args.epsilon is not None
                              else {"rho": args.rho, "delta": delta})
    common = dict(bounded=not args.unbounded, contributions=args.contributions, distinct=args.distinct_pairs,
                  secure=args.secure)
    m = args.mechanism
    if m == "inftda":
        return InfTDA(**budget, **common, solver=args.solver or "intopt", conversion=args.conversion)
    if m in ("tda_l2", "tda_l2_exact"):
        return TDA("l2", **budget, **common, rounding="paper" if m == "tda_l2" else "exact", solver=args.solver,
                   conversion=args.conversion)
    if m == "tda_linf":
        return TDA("linf", **budget, **common, solver=args.solver or "highs", conversion=args.conversion)
    if m == "vanilla":
        return VanillaGauss(**budget, **common, conversion=args.conversion)
    if args.epsilon is None:
        raise PrivacyParameterError("sh is (epsilon, delta)-DP: give --epsilon and --delta")
    return SH(args.epsilon, delta, **common)


def run_release(args: argparse.Namespace) -> int:
    """Run ``hierdp release``; prints the accounting and a per-level summary. Returns 0 on success,
    2 on bad input (the message is printed on stderr)."""
    from hierdp.hierarchy import HierarchyError
    from hierdp.privacy.errors import PrivacyError

    from hierdp.solvers.base import SolverError

    out = Path(args.output)
    if out.suffix.lower() not in (".csv", ".gz", ".parquet", ".pq"):
        print(f"hierdp release: output must end in .csv, .csv.gz, .parquet or .pq, got {out.name!r}", file=sys.stderr)
        return 2
    # check where the release goes before any budget is spent: a release that cannot be written
    # would have to be redrawn, spending the budget twice
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        print(f"hierdp release: cannot write to {folder}/ (missing or not writable)", file=sys.stderr)
        return 2
    try:
        mech = build_mechanism(args)
        t0 = time.perf_counter()
        df = read_table(args.input)
        tree = build_tree(args, df)
        t_build = time.perf_counter() - t0
        rel = mech.release(tree, seed=args.seed, progress=not args.quiet)
    except (HierarchyError, PrivacyError, FileNotFoundError, ValueError, KeyError, SolverError) as exc:
        print(f"hierdp release: {exc}", file=sys.stderr)
        return 2
    frame = rel.to_frame()
    # write next to the target, then rename: never a half-written release under the final name
    tmp = out.with_name(f".{out.name}.partial")
    write_table(frame, tmp, fmt_name=out.name)
    os.replace(tmp, out)
    print(f"input: {args.input} -> {tree!r} (built in {t_build:.2f} s)")
    print(rel.accounting_text())
    print("per level: released nodes, seconds")
    for lev, (lv, secs) in enumerate(zip(rel.levels, rel.timings)):
        print(f"  {lev:>2} {rel.level_names[lev]:<28} {len(lv):>10,} {secs:>9.3f}")
    print(f"wrote {len(frame):,} rows to {out}")
    return 0
