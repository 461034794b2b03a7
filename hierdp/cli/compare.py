"""``hierdp compare``: several mechanisms and/or solvers on one input and budget, over seeds.

Runs every configuration (``--mechanisms`` × ``--solvers`` where a mechanism has a solver
step, as the mechanism registry says) once per seed on the same input and budget, and writes

* a tidy CSV (``-o``, default ``compare.csv``): one row per configuration, seed and level, with
  the metrics that fit the input, and a ``status`` (``ok``, ``time_limit``, ``unsupported``,
  ``failed``) for configurations that could not run;
* a figure (``--plot``, default the CSV's name with ``.png``): the metrics per level with bands
  over the seeds, and seconds per release.

Inputs (the layouts of ``hierdp release``, with the same flags and the same public-domain rules):

* none: the bundled GeoNames world cities (34,006 cities, a declared public domain);
* a tree (``--levels``, trips, the level layout): max / mean absolute error, false discovery and
  false negative rates per level;
* group sizes (``--unit``, paper 001): L1 error and #CV (cells that differ from the sum of their
  children) per region level;
* points (``--x/--y`` or ``--lon/--lat`` with ``--box`` and ``--grid``, paper 002): mean relative
  error on range workloads (random rectangles; squares of 2, 6 and 10 % of the grid;
  ``--queries`` each).

``--mechanisms`` defaults to the mechanisms the registry tags for the input's default comparison
(``hierdp mechanisms`` lists them all). Randomness is seeded with the ``--seeds`` (an experiment:
reproducible, not for publication; every run says so). Beside the CSV, ``OUT.accounting.json``
records each configuration's accounting (mechanism and parameters, guarantees, ledger, assumptions,
randomness, versions; docs/privacy.md).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from hierdp.cli.intervals import interval_draws, interval_level
from hierdp.cli.common import (
    add_privacy_arguments,
    check_accounting_target,
    input_text,
    positive_float,
    positive_int,
    split_columns,
    write_compare_accounting,
)
from hierdp.cli.console import EXIT_INTERRUPTED, Console, run_interruptible, show_progress
from hierdp.cli.io import (
    CliError,
    check_figure_path,
    check_input_file,
    check_output_path,
    write_figure_atomic,
    write_table_atomic,
)
from hierdp.cli.layouts import Layout, check_mechanism_fits, decide_layout

__all__ = ["add_compare_parser", "figure_digest", "run_compare"]


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
    from hierdp.cli.group_sizes import add_group_size_arguments
    from hierdp.cli.points import add_point_arguments
    from hierdp.cli.trees import add_layout_arguments

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
    p.add_argument("--mechanisms", default=None,
                   help="comma-separated registry names whose input is the layout's (default: the mechanisms the "
                        "registry tags for the input's default comparison)")
    p.add_argument("--solvers", default=None,
                   help="comma-separated solver names, each tried on every mechanism with a solver step "
                        "(default: each mechanism's own)")
    p.add_argument("--seeds", type=_seeds, default=list(range(5)), help="number of runs (default 5) or seeds 0,1,2")
    p.add_argument("--time-limit", type=positive_float, default=30.0, metavar="SECONDS",
                   help="limit of a solver per solve, for the mechanisms with a solver step; a time-out is reported "
                        "as a status (default 30)")
    p.add_argument("--queries", type=positive_int, default=1000,
                   help="point inputs: queries per range workload (default 1000)")
    add_privacy_arguments(p)
    add_layout_arguments(p)
    add_group_size_arguments(p)
    add_point_arguments(p)
    g = p.add_argument_group("error bars")
    g.add_argument("--intervals", type=interval_level, default=None, metavar="LEVEL",
                   help="score every release's per-node intervals at this level (e.g. 0.9) against the truth: "
                        "coverage and mean width per level in the CSV, error bands in the figure (trees and group "
                        "sizes)")
    g.add_argument("--interval-draws", type=interval_draws, default=None, metavar="N",
                   help="bootstrap re-releases per release with --intervals (default: at least 10 per tail)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_compare)


def _check_names(mechanisms: list[str] | None, solvers: list[str] | None, layout: str) -> None:
    from hierdp.mechanisms import registry
    from hierdp.solvers import names as solver_names

    if mechanisms is not None and not mechanisms:
        raise CliError("--mechanisms is empty")
    for m in mechanisms or []:
        if m not in registry.names():
            raise CliError(f"--mechanisms: unknown mechanism {m!r}; registered: {', '.join(registry.names())}")
        check_mechanism_fits(m, layout, flag="--mechanisms")
    for s in solvers or []:
        if s not in solver_names():
            raise CliError(f"--solvers: unknown solver {s!r}; registered: {', '.join(solver_names())}")


_NOT_HERE = (("--param", "param"), ("--region-totals-public", "region_totals_public"))


def _check_input(args: argparse.Namespace, layout: Layout | None) -> tuple[list[Path], Any]:
    """Refuse what the arguments alone get wrong; returns the files read and the input's
    description (points: the spec :func:`hierdp.cli.points.read_grid` takes)."""
    from hierdp.cli.group_sizes import check_group_size_arguments
    from hierdp.cli.points import point_spec
    from hierdp.cli.trees import check_domain_arguments, input_files

    for flag, attr in _NOT_HERE:
        if getattr(args, attr, None):
            raise CliError(f"{flag} sets an option of one mechanism: it applies to hierdp release, not to compare")
    if layout is None:
        given = [a for a in ("geo", "geo_levels", "destination_geo", "origin", "destination", "levels",
                             "origin_levels", "destination_levels", "count", "observed_domain_public", "box", "grid")
                 if getattr(args, a, None)]
        if given:
            raise CliError("layout options (--levels, --geo, ...) describe an input file; give one, or none of them "
                           "for the bundled world cities")
        return [], None
    check_input_file(args.input)
    if layout.kind == "tree":
        for f in input_files(args):
            check_input_file(f, "input" if f == Path(args.input) else "--geo")
        check_domain_arguments(args)
        return input_files(args), None
    if layout.kind == "groups":
        check_group_size_arguments(args)
        return [Path(args.input)] + ([Path(args.geo)] if args.geo else []), None
    return [Path(args.input)], point_spec(args)


def _read(args: argparse.Namespace, layout: Layout | None, spec: Any) -> Any:
    """The input the arguments describe (default: the bundled world cities)."""
    if layout is None:
        from hierdp.datasets import world_cities_hierarchy

        return world_cities_hierarchy()
    if layout.kind == "groups":
        from hierdp.cli.group_sizes import read_count_of_counts

        return read_count_of_counts(args)
    if layout.kind == "points":
        from hierdp.cli.points import read_grid

        return read_grid(args, spec)
    from hierdp.cli.trees import build_tree, read_tree_input

    return build_tree(args, read_tree_input(args, layout.shape or "levels"), layout.shape or "levels")


def _domain_line(args: argparse.Namespace, layout: Layout | None, spec: Any) -> str:
    if layout is None:
        return "data: the bundled GeoNames world cities (domain declared: the public city list)"
    if layout.kind == "groups":
        from hierdp.cli.group_sizes import domain_text

        return domain_text(args)
    if layout.kind == "points":
        from hierdp.cli.points import domain_text as point_domain

        return point_domain(spec)
    from hierdp.cli.trees import domain_text as tree_domain

    return tree_domain(args)


def run_compare(args: argparse.Namespace) -> int:
    """Run ``hierdp compare``; returns the exit code (errors are raised, printed by
    :func:`hierdp.cli.main`)."""
    from hierdp.comparison import compare, summary

    console = Console("hierdp compare")
    layout = decide_layout(args) if args.input is not None else None
    mechanisms = split_columns(args.mechanisms) if args.mechanisms is not None else None
    solvers = split_columns(args.solvers) or None
    _check_names(mechanisms, solvers, layout.kind if layout is not None else "tree")
    if (args.epsilon is None) and (args.rho is None):
        args.epsilon = 1.0
    if args.epsilon is not None and args.rho is not None:
        raise CliError("give exactly one of --epsilon or --rho")
    if args.rho is not None and "sh" in (mechanisms or ["sh"]) and (layout is None or layout.kind == "tree"):
        raise CliError("sh is (epsilon, delta)-DP: with --rho name --mechanisms without it")
    if args.interval_draws is not None and args.intervals is None:
        raise CliError("--interval-draws applies with --intervals LEVEL")
    if args.intervals is not None and layout is not None and layout.kind == "points":
        raise CliError("--intervals scores per-node intervals of trees and group sizes; point releases answer range "
                       "queries, which have none")
    inputs, spec = _check_input(args, layout)
    out = check_output_path(args.output, inputs, overwrite=args.overwrite)
    check_accounting_target(out, args.overwrite)
    fig_path = None
    if not args.no_plot:
        fig_path = check_figure_path(args.plot or out.with_name(out.name.split(".")[0] + ".png"), inputs,
                                     overwrite=args.overwrite)
        if fig_path.resolve() == out.resolve():
            raise CliError("--plot and -o name the same file")
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise CliError("the figure needs matplotlib (pip install 'hierdp[plot]'); or pass --no-plot")
    delta = args.delta if args.delta is not None else (1e-8 if args.epsilon is not None else None)
    seeds = args.seeds
    console.say(f"randomness: seeded (reproducible, not for publication), seeds {_seed_text(seeds)}")
    console.say(_domain_line(args, layout, spec))
    extra: dict[str, Any] = {}
    if layout is None or layout.kind == "tree":
        extra = {"bounded": not args.unbounded, "contributions": args.contributions,
                 **({"distinct": True} if args.distinct_pairs else {}),
                 **({"conversion": args.conversion} if args.conversion != "analytic" else {})}
    elif layout.kind == "points":
        extra = {"bounded": False, "contributions": args.contributions}
    written: list[Path] = []
    try:
        def work() -> tuple[Any, Any]:
            data = _read(args, layout, spec)
            frame = compare(data, mechanisms, solvers=solvers, epsilon=args.epsilon, delta=delta, rho=args.rho,
                            seeds=seeds, time_limit=args.time_limit, progress=show_progress(args),
                            queries=args.queries, intervals=args.intervals, interval_draws=args.interval_draws,
                            **extra)
            return data, frame

        t_start = time.perf_counter()
        data, frame = run_interruptible(work)
        write_table_atomic(frame, out)
        written.append(out)
        side = write_compare_accounting(frame, out)
        written.append(side)
        drew = False
        if fig_path is not None and (frame["status"] == "ok").any():
            from hierdp.plot import compare_figure

            label = "bundled world cities" if args.input is None else Path(args.input).name
            write_figure_atomic(compare_figure(frame, data_label=label), fig_path,
                                metadata={"hierdp-data": figure_digest(frame)})
            written.append(fig_path)
            drew = True
        secs = time.perf_counter() - t_start
    except KeyboardInterrupt:
        done = " and ".join(str(p) for p in written)
        console.error(f"interrupted after writing {done}" if written else "interrupted; nothing was written")
        return EXIT_INTERRUPTED
    console.say(input_text(args.input or "bundled world cities", data))
    table = summary(frame)
    if len(table):
        import pandas as pd

        with pd.option_context("display.float_format", "{:,.3f}".format, "display.width", 160):
            console.say(f"level {table.attrs['level']} ({table.attrs['level_name']}), mean over seeds:")
            console.say(table.to_string())
    failed = frame[frame["status"] != "ok"]
    for rec in failed.drop_duplicates(["mechanism", "solver"]).to_dict("records"):
        console.say(f"not run: {rec['mechanism']} with solver {rec['solver']}: {rec['status']} ({rec['message']})")
    if fig_path is not None and not drew:
        console.say("no figure: no configuration ran")
    console.say(f"wrote {len(frame):,} rows to {out}, the accounting of each configuration to {side}"
                + (f" and the figure to {fig_path}" if drew else "") + f" in {secs:.1f} s")
    if console.pipe_closed:
        raise BrokenPipeError(f"stdout was closed early; the results were written to {out}")
    return 0


def figure_digest(frame: Any) -> str:
    """SHA-256 of what a compare figure draws, timings aside (they change run to run): written
    into the figure, so a figure can be checked against a fresh run of the command that made it."""
    import hashlib

    fixed = frame.drop(columns=[c for c in frame.columns if "seconds" in str(c)])
    return hashlib.sha256(fixed.to_csv(index=False, float_format="%.9g").encode("utf-8")).hexdigest()


def _seed_text(seeds: list[int]) -> str:
    if seeds == list(range(len(seeds))):
        return f"0..{len(seeds) - 1}" if len(seeds) > 1 else "0"
    return ",".join(str(s) for s in seeds)
