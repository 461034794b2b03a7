"""The ``hierdp`` command line: ``solvers``, ``demo``, ``release``."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

from hierdp.cli_release import add_release_parser
from hierdp.solvers.base import SolverError


def _cmd_solvers(args: argparse.Namespace) -> int:
    from hierdp.solvers import available

    rows = available()
    print(f"{'solver':<12} {'ok':<3} {'objectives':<14} {'int':<4} {'cont':<5} {'structures':<11} "
          f"{'weights':<8} {'bounds':<7} {'linear':<7} {'hooks':<6} description")
    for name, cap in rows.items():
        if "objectives" not in cap:
            print(f"{name:<12} no  failed to load: {cap.get('error', '')}")
            continue
        yn = lambda b: "yes" if b else "-"  # noqa: E731
        print(f"{name:<12} {yn(cap['available']):<3} {','.join(cap['objectives']):<14} {yn(cap['integer']):<4} "
              f"{yn(cap['continuous']):<5} {','.join(cap['structures']):<11} {yn(cap['weights']):<8} "
              f"{yn(cap['bounds']):<7} {yn(cap['linear_constraints']):<7} {yn(cap['pyomo_hooks']):<6} "
              f"{cap['description']}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from hierdp import metrics
    from hierdp.datasets import world_cities_hierarchy
    from hierdp.mechanisms import TDA, InfTDA

    t0 = time.perf_counter()
    tree = world_cities_hierarchy()
    sizes = " -> ".join(f"{name} {size:,}" for name, size in zip(tree.level_names, np.diff(tree.level_ptr)))
    print(f"hierdp demo: bundled GeoNames world cities, {tree.n:,} nodes ({sizes}), "
          f"{int(tree.counts[0]):,} people; built in {time.perf_counter() - t0:.2f} s")
    print(f"privacy: epsilon={args.epsilon}, delta={args.delta}, bounded DP (world total public), seed={args.seed}\n")

    main = InfTDA(epsilon=args.epsilon, delta=args.delta, solver="intopt")
    release = main.release(tree, seed=args.seed, progress=not args.quiet)
    print("InfTDA (IntOpt post-processing), per level:")
    report = metrics.level_report(release, tree)
    with pd.option_context("display.float_format", "{:,.2f}".format, "display.width", 140):
        print(report.to_string())
    print()
    print(release.accounting_text())

    print("\nSame data, same budget and seed, other TopDown post-processing (leaf level = cities):")
    rows = []
    for label, mech in [
        ("InfTDA, intopt (integer L-inf, Alg. 4)", main),
        ("TDA_l2, projection + paper rounding", TDA("l2", epsilon=args.epsilon, delta=args.delta, rounding="paper")),
        ("TDA_l2, exact integer L2", TDA("l2", epsilon=args.epsilon, delta=args.delta, rounding="exact")),
    ]:
        t1 = time.perf_counter()
        rel = mech.release(tree, seed=args.seed)
        secs = time.perf_counter() - t1
        leaf = metrics.level_report(rel, tree).iloc[-1]
        rows.append({"mechanism": label, "seconds": secs, "max_abs_error": leaf.max_abs_error,
                     "mean_abs_error": leaf.mean_abs_error, "false_discovery_rate_pct": leaf.false_discovery_rate_pct,
                     "consistent": not rel.check_consistency()})
    with pd.option_context("display.float_format", "{:,.3f}".format, "display.width", 140):
        print(pd.DataFrame(rows).set_index("mechanism").to_string())
    print("\nNext: `hierdp release --help` to release your own CSV/Parquet, `hierdp solvers` for the plug-ins.")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``hierdp`` command."""
    parser = argparse.ArgumentParser(prog="hierdp", description="Differentially private hierarchical counts.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("solvers", help="list installed solver plug-ins and what each supports")
    p.set_defaults(func=_cmd_solvers)
    p = sub.add_parser("demo", help="release the bundled world-cities hierarchy and print a summary")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_demo)
    add_release_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hierdp`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, KeyError, FileNotFoundError, SolverError) as exc:
        print(f"hierdp: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
