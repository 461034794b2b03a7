"""``hierdp solvers`` (the installed plug-ins) and ``hierdp demo`` (the main job on the bundled data)."""

from __future__ import annotations

import argparse
import time

from hierdp.cli.console import Console, show_progress
from hierdp.cli.common import randomness_text

__all__ = ["cmd_demo", "cmd_solvers"]


def cmd_solvers(args: argparse.Namespace) -> int:
    """List the installed solver plug-ins and what each solves exactly."""
    console = Console("hierdp solvers")
    from hierdp.solvers import available, limits_text

    if getattr(args, "limits", False):
        console.say(limits_text())
        if console.pipe_closed:
            raise BrokenPipeError("stdout was closed early")
        return 0
    rows = available()
    w = max([12, *map(len, rows)])
    console.say(f"{'solver':<{w}} {'ok':<3} {'objectives':<14} {'int':<4} {'cont':<5} {'structures':<11} "
          f"{'weights':<8} {'bounds':<7} {'linear':<7} {'hooks':<6} description")
    for name, cap in rows.items():
        if "objectives" not in cap:
            console.say(f"{name:<{w}} no  failed to load: {cap.get('error', '')}")
            continue
        yn = lambda b: "yes" if b else "-"
        console.say(f"{name:<{w}} {yn(cap['available']):<3} {','.join(cap['objectives']):<14} {yn(cap['integer']):<4} "
              f"{yn(cap['continuous']):<5} {','.join(cap['structures']):<11} {yn(cap['weights']):<8} "
              f"{yn(cap['bounds']):<7} {yn(cap['linear_constraints']):<7} {yn(cap['pyomo_hooks']):<6} "
              f"{cap['description']}")
    if console.pipe_closed:
        raise BrokenPipeError("stdout was closed early")
    return 0


def cmd_mechanisms(args: argparse.Namespace) -> int:
    """List the registered mechanisms (the names ``--mechanism`` and ``hierdp.create`` accept) with
    the input each takes and the problems it hands to a solver, from the registry's metadata."""
    console = Console("hierdp mechanisms")
    from hierdp.cli.layouts import input_label
    from hierdp.mechanisms.registry import infos

    rows = infos()
    width = max(map(len, rows), default=9) + 2
    console.say(f"{'mechanism':<{width}}{'input':<13}{'solver':<12}description")
    for name, meta in rows.items():
        solver = ",".join(meta.solver_shapes) if meta.takes_solver else "-"
        console.say(f"{name:<{width}}{input_label(name):<13}{solver:<12}{meta.description}")
    console.say("\ninput: the layout of `hierdp release` that builds it (Python API: hierdp.mechanisms.create); "
                "solver: the shapes of the problems it hands to --solver (-: it takes no solver)")
    if console.pipe_closed:
        raise BrokenPipeError("stdout was closed early")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Release the bundled world cities with InfTDA and print a summary."""
    console = Console("hierdp demo")
    import numpy as np
    import pandas as pd

    from hierdp import metrics
    from hierdp.datasets import world_cities_hierarchy
    from hierdp.mechanisms import TDA, InfTDA

    t0 = time.perf_counter()
    tree = world_cities_hierarchy()
    sizes = " -> ".join(f"{name} {size:,}" for name, size in zip(tree.level_names, np.diff(tree.level_ptr), strict=False))
    console.say(f"hierdp demo: bundled GeoNames world cities, {tree.n:,} nodes ({sizes}), "
          f"{int(tree.counts[0]):,} people; built in {time.perf_counter() - t0:.2f} s")
    console.say(f"privacy: epsilon={args.epsilon}, delta={args.delta}, bounded DP (world total public); "
                "domain declared (the public GeoNames city list)")
    how = "the demo's documented default; --seed N for another" if args.seed == 0 else "given with --seed"
    console.say(randomness_text(False, args.seed, how=how) + "\n")

    main = InfTDA(epsilon=args.epsilon, delta=args.delta, solver="intopt")
    release = main.release(tree, seed=args.seed, progress=show_progress(args))
    console.say("InfTDA (IntOpt post-processing), per level:")
    report = metrics.level_report(release, tree)
    with pd.option_context("display.float_format", "{:,.2f}".format, "display.width", 140):
        console.say(report.to_string())
    console.say()
    console.say(release.accounting_text())

    console.say("\nSame data, same budget and seed, other TopDown post-processing (leaf level = cities):")
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
        console.say(pd.DataFrame(rows).set_index("mechanism").to_string())
    console.say("\nNext: `hierdp release --help` to release your own CSV/Parquet, `hierdp compare --help` to compare "
                "mechanisms and solvers, `hierdp solvers` for the plug-ins.")
    if console.pipe_closed:
        raise BrokenPipeError("stdout was closed early")
    return 0


