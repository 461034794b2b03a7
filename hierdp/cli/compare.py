"""``hierdp compare``: several mechanisms and/or solvers on one input and budget, over seeds.

Runs every configuration (``--mechanisms`` × ``--solvers`` where a mechanism has a solver
step) once per seed on the same tree and budget, and writes

* a tidy CSV (``-o``, default ``compare.csv``): one row per configuration, seed and level, with
  the released and true non-zero nodes, max / mean absolute error, false discovery and false
  negative rates, seconds, and a ``status`` (``ok``, ``time limit``, ``unsupported``,
  ``failed``) for configurations that could not run;
* a figure (``--plot``, default the CSV's name with ``.png``): error per level with bands over
  the seeds, rates per level, and seconds per release.

Without an input it compares on the bundled GeoNames world cities (34,006 cities, a declared
public domain). An input file takes the layout options of ``hierdp release`` (and, likewise,
``--geo`` or ``--observed-domain-public``). Randomness is seeded (an experiment: reproducible,
not for publication).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from hierdp.cli.console import EXIT_INTERRUPTED, Console, run_interruptible, show_progress
from hierdp.cli.io import (
    CliError,
    check_figure_path,
    check_input_file,
    check_output_path,
    read_table,
    write_figure_atomic,
    write_table_atomic,
)
from hierdp.cli.common import add_privacy_arguments, positive_float, split_columns
from hierdp.cli.trees import (
    add_layout_arguments,
    build_tree,
    check_domain_arguments,
    domain_text,
    input_files,
    layout_of,
)

__all__ = ["add_compare_parser", "run_compare"]


def _seeds(text: str) -> list[int]:
    """``5`` = seeds 0..4; ``3,7,11`` = those seeds."""
    try:
        if "," in text:
            out = [int(s) for s in text.split(",") if s.strip()]
        else:
            n = int(text)
            if n < 1:
                raise ValueError
            out = list(range(n))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of runs (e.g. 5) or a list of seeds (e.g. 0,1,2), "
                                         f"got {text!r}") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"seeds must be non-negative integers, got {text!r}")
    return out


def add_compare_parser(subparsers: Any) -> None:
    """Add the ``compare`` sub-command to an ``argparse`` sub-parser collection."""
    from hierdp.comparison import DEFAULT_MECHANISMS

    p = subparsers.add_parser("compare", help="compare mechanisms and solvers on one input over several seeds "
                                              "(CSV + figure)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", nargs="?", default=None,
                   help="input CSV or Parquet file (default: the bundled world cities)")
    p.add_argument("-o", "--output", default="compare.csv", help="tidy results: .csv, .csv.gz or .parquet "
                                                                  "(default compare.csv)")
    p.add_argument("--plot", default=None, help="figure: .png, .svg or .pdf (default: the output's name with .png)")
    p.add_argument("--no-plot", action="store_true", help="write the CSV only")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    p.add_argument("--mechanisms", default=",".join(DEFAULT_MECHANISMS),
                   help=f"comma-separated registry names (default {','.join(DEFAULT_MECHANISMS)})")
    p.add_argument("--solvers", default=None,
                   help="comma-separated solver names, each tried on every mechanism with a solver step "
                        "(default: each mechanism's own)")
    p.add_argument("--seeds", type=_seeds, default=list(range(5)), help="number of runs (default 5) or seeds 0,1,2")
    p.add_argument("--time-limit", type=positive_float, default=30.0, metavar="SECONDS",
                   help="per-level limit of general solvers; a time-out is reported as a status (default 30)")
    add_privacy_arguments(p)
    add_layout_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_compare)


def _check_names(mechanisms: list[str], solvers: list[str] | None) -> None:
    from hierdp.cli.layouts import check_mechanism_fits
    from hierdp.mechanisms import registry
    from hierdp.solvers import names as solver_names

    if not mechanisms:
        raise CliError("--mechanisms is empty")
    for m in mechanisms:
        if m not in registry.names():
            raise CliError(f"--mechanisms: unknown mechanism {m!r}; registered: {', '.join(registry.names())}")
        check_mechanism_fits(m, "tree", flag="--mechanisms")  # compare runs trees only
    for s in solvers or []:
        if s not in solver_names():
            raise CliError(f"--solvers: unknown solver {s!r}; registered: {', '.join(solver_names())}")


def run_compare(args: argparse.Namespace) -> int:
    """Run ``hierdp compare``; returns the exit code (errors are raised, printed by
    :func:`hierdp.cli.main`)."""
    from hierdp.comparison import compare, summary

    console = Console("hierdp compare")
    mechanisms = split_columns(args.mechanisms) or []
    solvers = split_columns(args.solvers)
    _check_names(mechanisms, solvers)
    if (args.epsilon is None) and (args.rho is None):
        args.epsilon = 1.0
    if args.epsilon is not None and args.rho is not None:
        raise CliError("give exactly one of --epsilon or --rho")
    if args.rho is not None and "sh" in mechanisms:
        raise CliError("sh is (epsilon, delta)-DP: with --rho leave it out of --mechanisms")
    inputs: list[Path] = []
    if args.input is not None:
        check_input_file(args.input)
        for f in input_files(args):
            check_input_file(f, "input" if f == Path(args.input) else "--geo")
        inputs = input_files(args)
        layout_of(args)
        check_domain_arguments(args)
    elif any(getattr(args, a) for a in ("geo", "destination_geo", "origin", "destination", "levels", "origin_levels",
                                        "destination_levels", "count", "observed_domain_public")):
        raise CliError("layout options (--levels, --geo, ...) describe an input file; give one, or none of them "
                       "for the bundled world cities")
    out = check_output_path(args.output, inputs, overwrite=args.overwrite)
    fig_path = None
    if not args.no_plot:
        fig_path = check_figure_path(args.plot or out.with_name(out.name.split(".")[0] + ".png"), inputs,
                                     overwrite=args.overwrite)
        if fig_path.resolve() == out.resolve():
            raise CliError("--plot and -o name the same file")
    if fig_path is not None:
        try:
            import matplotlib
        except ImportError:
            raise CliError("the figure needs matplotlib (pip install 'hierdp[plot]'); or pass --no-plot") from None
    delta = args.delta if args.delta is not None else (1e-8 if args.epsilon is not None else None)
    seeds = args.seeds
    console.say(f"randomness: seeded (reproducible, not for publication), seeds {_seed_text(seeds)}")
    if args.input is None:
        console.say("data: the bundled GeoNames world cities (domain declared: the public city list)")
    else:
        console.say(domain_text(args))
    written: list[Path] = []
    try:
        def work() -> tuple[Any, Any, float]:
            t0 = time.perf_counter()
            if args.input is None:
                from hierdp.datasets import world_cities_hierarchy

                tree = world_cities_hierarchy()
            else:
                tree = build_tree(args, read_table(args.input, counts=[args.count] if args.count else []))
            frame = compare(tree, mechanisms, solvers=solvers, epsilon=args.epsilon, delta=delta, rho=args.rho,
                            seeds=seeds, time_limit=args.time_limit, progress=show_progress(args),
                            bounded=not args.unbounded, contributions=args.contributions,
                            **({"distinct": True} if args.distinct_pairs else {}),
                            **({"conversion": args.conversion} if args.conversion != "analytic" else {}))
            return tree, frame, time.perf_counter() - t0

        t_start = time.perf_counter()
        tree, frame, _ = run_interruptible(work)
        write_table_atomic(frame, out)
        written.append(out)
        if fig_path is not None:
            from hierdp.plot import compare_figure

            label = "bundled world cities" if args.input is None else Path(args.input).name
            write_figure_atomic(compare_figure(frame, data_label=label), fig_path)
            written.append(fig_path)
        secs = time.perf_counter() - t_start
    except KeyboardInterrupt:
        done = " and ".join(str(p) for p in written)
        console.error(f"interrupted after writing {done}" if written else "interrupted; nothing was written")
        return EXIT_INTERRUPTED
    console.say(f"input: {args.input or 'bundled world cities'} -> {tree!r}")
    table = summary(frame)
    if len(table):
        import pandas as pd

        with pd.option_context("display.float_format", "{:,.3f}".format, "display.width", 160):
            console.say(f"level {table.attrs['level']} ({table.attrs['level_name']}), mean over seeds:")
            console.say(table.to_string())
    failed = frame[frame["status"] != "ok"]
    for rec in failed.drop_duplicates(["mechanism", "solver"]).to_dict("records"):
        console.say(f"not run: {rec['mechanism']} with solver {rec['solver']}: {rec['status']} ({rec['message']})")
    console.say(f"wrote {len(frame):,} rows to {out}" + (f" and the figure to {fig_path}" if fig_path else "")
                + f" in {secs:.1f} s")
    if console.pipe_closed:
        raise BrokenPipeError(f"stdout was closed early; the results were written to {out}")
    return 0


def _seed_text(seeds: list[int]) -> str:
    if seeds == list(range(len(seeds))):
        return f"0..{len(seeds) - 1}" if len(seeds) > 1 else "0"
    return ",".join(str(s) for s in seeds)
