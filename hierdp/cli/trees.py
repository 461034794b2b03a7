"""``hierdp release`` with a tree layout: a CSV/Parquet file of trips or counts released by a tree
mechanism.

Tree layouts (two more layouts have their own modules: group sizes with ``--unit``,
:mod:`hierdp.cli.group_sizes`; location points with ``--x/--y`` or ``--lon/--lat``,
:mod:`hierdp.cli.points`; each layout accepts only the mechanisms that fit it,
:mod:`hierdp.cli.layouts`):

* trips (``--origin COL --destination COL --geo GEO.csv [--geo-levels L1,L2,...]``): one row per trip
  (or per pair with ``--count``) between finest areas; the geography file has one column per
  level, coarse to fine, the finest being the area ids. An O/D tree (``--tree``) is built;
* the paper's level layout (``--origin-levels A0,..,Ag --destination-levels B0,..,Bg [--count]``),
  with ``--geo`` the geography (one column per level, coarse to fine; ``--geo-levels`` names them);
* plain counts (``--levels L1,L2,... [--count COL]``): a hierarchy from level columns, with
  ``--geo`` a file of the same level columns listing every possible node.

The domain (the set of nodes) must be public. ``--geo`` declares it: every node of the file is
in the tree and measured, with or without rows. Without ``--geo`` the nodes are read from the
rows, which reveals a node whose only record is one person; that is refused unless
``--observed-domain-public`` states that the observed set of nodes is public knowledge.

Identifiers are read verbatim as text (``01001`` and ``NA`` stay themselves); only the count
column is numeric (exact integers). Rows are numbered from 0, the header not counted.

The output (CSV, ``.csv.gz``, or Parquet for ``.parquet``/``.pq``) has, for ``--levels``, one row
per node of the domain, zeros included: ``level, level_name``, one column per level (the node's value
at each level, empty below its own), ``node`` (its name), ``parent`` (the parent's name), ``key``,
``value``; for O/D trees (trips, the level layout) one row per released pair, with ``origin_level,
origin, destination_level, destination`` (a pair not listed is 0). Beside it, ``OUT.accounting.json``
holds the release's accounting (docs/privacy.md; also inside a Parquet file); ``hierdp.load_release
(OUT)`` reads both back. Both are written atomically, never over an input, and over existing files
only with ``--overwrite``.

Scale-out (TopDown mechanisms, docs/scale.md): ``--engine processes|dask`` runs each level's
partitions on a process pool or a Dask cluster (``--scheduler ADDRESS``, else a local cluster of
``--workers`` processes); a seeded release is the same on every engine. The input may then be a
directory holding a Parquet dataset larger than memory (``--levels`` layout), read and aggregated
with Dask. ``--checkpoint DIR`` writes every finished level; ``--resume DIR`` continues an
interrupted run from its last finished level (same input and parameters, else refused).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from hierdp.cli.intervals import check_intervals_before_noise, release_table, report_intervals
from hierdp.cli.common import (
    check_accounting_target,
    check_randomness_flags,
    input_text,
    privacy_context,
    release_randomness,
    save_output,
    seed_for_run,
    split_columns,
)
from hierdp.cli.console import (
    EXIT_INTERRUPTED,
    Console,
    end_worker_pools,
    finish_release,
    run_interruptible,
    show_progress,
)
from hierdp.cli.io import CliError, check_input_file, check_output_path, read_table, read_table_header
from hierdp.cli.layouts import Layout, check_mechanism_fits, check_solver_flags, default_mechanism
from hierdp.cli.scaleout import check_scale_arguments, close_dask_client, is_dataset, open_dask_client

__all__ = [
    "add_layout_arguments",
    "build_mechanism",
    "build_tree",
    "check_domain_arguments",
    "constraint_params",
    "domain_text",
    "geo_columns",
    "input_columns",
    "input_files",
    "read_tree_input",
    "run_trees",
]

def add_layout_arguments(p: argparse.ArgumentParser) -> None:
    """The input-layout options shared by ``release`` and ``compare``."""
    data = p.add_argument_group("input layout and public domain")
    data.add_argument("--geo", help="the public domain: geography file (trips, level layout: one column per level, "
                                    "coarse to fine) or file of the --levels columns listing every node")
    data.add_argument("--destination-geo", help="trips / level layout: destination geography if different from --geo")
    data.add_argument("--observed-domain-public", action="store_true",
                      help="no --geo: state that the set of nodes observed in the input is public (the release "
                           "says it assumes so); without --geo or this flag the release is refused")
    data.add_argument("--tree", choices=("destination", "origin"), default="destination", help="O/D tree kind")
    data.add_argument("--origin", help="trips: column with origin area ids")
    data.add_argument("--destination", help="trips: column with destination area ids")
    data.add_argument("--levels", help="comma-separated level columns of the input, coarse to fine (the --levels "
                                       "layout; with --unit, the region columns)")
    data.add_argument("--geo-levels", help="trips / level layout: comma-separated level columns of the --geo "
                                           "geography, coarse to fine (default: all its columns)")
    data.add_argument("--origin-levels", help="level layout: comma-separated origin level columns")
    data.add_argument("--destination-levels", help="level layout: comma-separated destination level columns")
    data.add_argument("--count", help="column of counts (default: one per row)")


def check_domain_arguments(args: argparse.Namespace) -> None:
    """The release's domain must be declared (``--geo``) or explicitly assumed public."""
    if args.geo and args.observed_domain_public:
        raise CliError("give either --geo (a declared public domain) or --observed-domain-public, not both")
    if args.destination_geo and not args.geo:
        raise CliError("--destination-geo needs --geo (the origin geography)")
    if not args.geo and not args.observed_domain_public:
        raise CliError("refusing to release: the set of nodes would be read from the private rows (a node whose "
                       "only record is one person would reveal that person); give the public domain with --geo "
                       "FILE, or pass --observed-domain-public to state that the observed nodes are public")


def input_files(args: argparse.Namespace) -> list[Path]:
    """Every file the command reads (a Parquet dataset directory is checked by its reader)."""
    files = [Path(args.input)] if getattr(args, "input", None) and not Path(args.input).is_dir() else []
    files += [Path(f) for f in (args.geo, args.destination_geo) if f]
    return files


def input_columns(args: argparse.Namespace, shape: str) -> list[str]:
    """The columns of the input a tree release reads (only these are read: a column it does not
    use, e.g. a note blank in most rows, neither refuses the input nor costs memory)."""
    if shape == "trips":
        cols = [args.origin, args.destination]
    elif shape == "levels-od":
        cols = split_columns(args.origin_levels) + split_columns(args.destination_levels)
    else:
        cols = split_columns(args.levels)
    return cols + ([args.count] if args.count else [])


def geo_columns(args: argparse.Namespace, shape: str) -> list[str] | None:
    """The columns of the --geo files a tree release reads: the --levels columns, or the
    --geo-levels of trips and the level layout (``None``: every column, as documented)."""
    if shape == "levels":
        return split_columns(args.levels)
    return split_columns(args.geo_levels) or None


def read_tree_input(args: argparse.Namespace, shape: str) -> Any:
    """The input frame of a tree release: its used columns only, counts exact."""
    return read_table(args.input, counts=[args.count] if args.count else [], columns=input_columns(args, shape))


def _read_geo(path: str, what: str, columns: list[str] | None, levels: bool = True) -> Any:
    """A geography file's used columns; ``levels``: they are the --levels columns (named so)."""
    if columns is None or not levels:
        return read_table(path, what=what, columns=columns)
    try:
        return read_table(path, what=what, columns=columns)
    except CliError as exc:
        if "unknown column" not in str(exc):
            raise
        name = Path(path).name
        have = read_table_header(path)
        missing = next(c for c in columns if c not in have)
        raise CliError(f"{what} {name}: no level column {missing!r}; it needs the --levels columns {columns} (it has "
                       f"{have})") from None


def build_dataset_tree(args: argparse.Namespace, client: Any = None) -> Any:
    """The tree of a Parquet dataset directory (``--levels`` layout), aggregated with Dask."""
    from hierdp.scale.tree import LevelTree

    levels = split_columns(args.levels)
    geo = _read_geo(args.geo, "--geo", levels) if args.geo else None
    domain = geo[levels] if geo is not None else None
    tree = LevelTree.from_parquet(args.input, levels, args.count, domain=domain,
                                  observed_domain_public=geo is None, client=client)
    return tree


def build_tree(args: argparse.Namespace, df: Any, shape: str) -> Any:
    """The tree described by the command-line arguments (see the module docstring); ``shape`` is the
    tree layout :func:`hierdp.cli.layouts.decide_layout` found."""
    from hierdp.hierarchy import Hierarchy
    from hierdp.hierarchy.geography import Geography
    from hierdp.hierarchy.od import ODTree

    levels = split_columns(args.levels)
    geo_levels = split_columns(args.geo_levels) or None
    used = geo_columns(args, shape)
    geo = _read_geo(args.geo, "--geo", used, shape == "levels") if args.geo else None
    dgeo = _read_geo(args.destination_geo, "--destination-geo", used, False) if args.destination_geo else None
    if shape == "trips":
        return ODTree.from_trips(df, origin=args.origin, destination=args.destination, count=args.count,
                                 origin_geo=geo, destination_geo=dgeo, geo_levels=geo_levels, kind=args.tree)
    if shape == "levels-od":
        og = Geography.from_frame(geo, geo_levels) if geo is not None else None
        dg = Geography.from_frame(dgeo, geo_levels) if dgeo is not None else None
        return ODTree.from_level_frame(df, origin_levels=split_columns(args.origin_levels),
                                       destination_levels=split_columns(args.destination_levels), count=args.count,
                                       kind=args.tree, origin_geo=og, destination_geo=dg,
                                       observed_domain_public=bool(args.observed_domain_public and geo is None))
    unknown = [c for c in levels if c not in df.columns]
    if unknown:
        raise CliError(f"input {Path(args.input).name}: unknown column {unknown[0]!r}; columns are {list(df.columns)}")
    if geo is not None:
        missing = [c for c in levels if c not in geo.columns]
        if missing:
            raise CliError(f"--geo {Path(args.geo).name}: no level column {missing[0]!r}; it needs the --levels "
                           f"columns {levels} (it has {list(geo.columns)})")
        return Hierarchy.from_frame(df, levels=levels, count=args.count, domain=geo[levels])
    return Hierarchy.from_frame(df, levels=levels, count=args.count, observed_domain_public=True)


def mechanism_params(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """Keyword parameters for ``registry.create(name, ...)`` from the privacy arguments
    (without solver and time limit)."""
    if (args.epsilon is None) == (args.rho is None):
        raise CliError("give exactly one of --epsilon or --rho")
    delta = args.delta if args.delta is not None else (1e-8 if args.epsilon is not None else None)
    params: dict[str, Any] = {"bounded": not args.unbounded, "contributions": args.contributions,
                              "distinct": args.distinct_pairs, "secure": bool(getattr(args, "secure", False))}
    if name == "sh":
        if args.epsilon is None:
            raise CliError("sh is (epsilon, delta)-DP: give --epsilon (and --delta), not --rho")
        params.update(epsilon=args.epsilon, delta=delta)
        return params
    params.update({"epsilon": args.epsilon, "delta": delta} if args.epsilon is not None
                  else {"rho": args.rho, "delta": delta})
    params["conversion"] = args.conversion
    return params


def build_mechanism(args: argparse.Namespace, name: str) -> Any:
    """The mechanism ``name`` with the command line's privacy, solver and time-limit arguments, from
    the mechanism registry (``--solver`` / ``--time-limit`` were checked against its metadata)."""
    from hierdp.mechanisms import registry
    from hierdp.privacy.errors import PrivacyError

    params = mechanism_params(args, name)
    if getattr(args, "constraints", None) is not None:
        params.update(constraint_params(args, name))
    if args.solver is not None:
        params["solver"] = args.solver
    if args.time_limit is not None:
        params["time_limit"] = args.time_limit
    try:
        return registry.create(name, **params)
    except PrivacyError as exc:
        raise privacy_context(args, exc) from None


def constraint_params(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """``constraints=`` (and the failsafe) from ``--constraints FILE``, read and checked now: a bad
    file is refused, naming its line, before any input is read."""
    from hierdp.constraints import ConstraintError, Constraints
    from hierdp.mechanisms import registry

    if "level" not in registry.info(name).solver_shapes:
        levelwise = [n for n in registry.names(input="tree") if "level" in registry.info(n).solver_shapes]
        raise CliError(f"--constraints applies to mechanisms with a post-processing solve of every level "
                       f"({', '.join(levelwise)}), not to --mechanism {name}")
    try:
        constraints = Constraints.read(args.constraints)
    except ConstraintError as exc:
        raise CliError(f"--constraints {args.constraints}: {exc}") from None
    return {"constraints": constraints, "on_infeasible": "relax" if args.constraints_failsafe else "abort"}


def domain_text(args: argparse.Namespace) -> str:
    """The line every run prints about the tree's domain."""
    if args.geo:
        geo = f"--geo {args.geo}" + (f" and --destination-geo {args.destination_geo}" if args.destination_geo else "")
        return f"domain: declared by {geo} (every node of it is measured, with or without rows)"
    return ("domain: read from the input rows and assumed public (--observed-domain-public); "
            "the release states this assumption")


def run_trees(args: argparse.Namespace, layout: Layout) -> int:
    """``hierdp release`` with a tree layout: checks, then read, build, release, write. Returns the
    exit code; errors are raised (:func:`hierdp.cli.main` prints them as one line)."""
    from hierdp.privacy.domain import ObservedDomainError, check_public_domain
    from hierdp.privacy.errors import PrivacyError

    console = Console("hierdp release")
    # everything that can be refused is refused before any input is read or noise drawn
    for f in input_files(args):
        check_input_file(f, "input" if f == Path(args.input) else "--geo")
    if not Path(args.input).exists():
        raise CliError(f"input file not found: {args.input}")
    out = check_output_path(args.output, input_files(args), overwrite=args.overwrite)
    check_accounting_target(out, args.overwrite)
    name = args.mechanism or default_mechanism("tree")
    check_mechanism_fits(name, "tree")
    check_solver_flags(args, name)
    check_domain_arguments(args)
    check_scale_arguments(args)
    if args.constraints_failsafe and args.constraints is None:
        raise CliError("--constraints-failsafe needs --constraints FILE")
    check_randomness_flags(args)
    mech = build_mechanism(args, name)
    check_intervals_before_noise(args, mech, "tree")  # public configuration: decided before any noise
    scaled = args.engine not in (None, "serial") or args.checkpoint is not None or args.resume is not None
    if scaled and not hasattr(mech, "set_engine"):
        flags = [f for f, v in (("--engine", args.engine not in (None, "serial")), ("--checkpoint", args.checkpoint),
                                ("--resume", args.resume)) if v]
        from hierdp.mechanisms import registry

        levelwise = [n for n in registry.names(input="tree") if "level" in registry.info(n).solver_shapes]
        raise CliError(f"{flags[0]} applies to the TopDown mechanisms ({', '.join(levelwise)}), not to --mechanism "
                       f"{args.mechanism}")
    seed, _ = seed_for_run(args)  # secure by default: a seed only with --seed
    console.say(release_randomness(args))
    console.say(domain_text(args))
    client = open_dask_client(args) if args.engine == "dask" else None  # unreachable: refused before reading
    if client is not None:
        mech.set_engine("dask", client)
    elif args.engine == "processes":
        mech.set_engine("processes", args.workers or 2)
    extra: dict[str, Any] = {}
    if args.checkpoint is not None:
        extra["checkpoint"] = args.checkpoint
    if args.resume is not None:
        extra["resume"] = args.resume
    if scaled:
        console.say(f"engine: {mech.engine.describe()}" + (f"; checkpoint {args.checkpoint or args.resume}"
                                                             if extra else ""))
    written = False
    try:
        def work() -> tuple[Any, float, Any]:
            t0 = time.perf_counter()
            if is_dataset(args):
                tree = build_dataset_tree(args, client)
            else:
                df = read_tree_input(args, layout.shape or "levels")
                tree = build_tree(args, df, layout.shape or "levels")
            check_public_domain(tree)
            t_build = time.perf_counter() - t0
            return tree, t_build, mech.release(tree, seed=seed, progress=show_progress(args), **extra)

        try:
            tree, _build_s, rel = run_interruptible(work)
        except PrivacyError as exc:
            if isinstance(exc, ObservedDomainError):
                raise
            raise privacy_context(args, exc) from None
        finally:
            close_dask_client(client)
        nonzero = [int(np.count_nonzero(lv.values)) for lv in rel.levels]
        if layout.shape in (None, "levels"):
            rel = rel.with_domain(tree)  # one row per node of the domain, zeros included
        frame, interval_error = release_table(args, rel, seed=seed, progress=show_progress(args), domain=tree)
        side = save_output(rel, out, frame, overwrite=args.overwrite)
        written = True
        console.say(input_text(args.input, tree))
        console.say(rel.accounting_text())
        console.say("per level: non-zero released nodes, seconds (timings are for the operator: never publish them)")
        for lev, (count, secs) in enumerate(zip(nonzero, rel.timings, strict=False)):
            console.say(f"  {lev:>2} {rel.level_names[lev]:<28} {count:>10,} {secs:>9.3f}")
        console.say(f"wrote {len(frame):,} rows to {out} and its accounting to {side}")
        code = report_intervals(console, args, frame, interval_error)
        if code is not None:
            return code
    except KeyboardInterrupt:
        end_worker_pools()
        console.error(f"interrupted; {out} was written before the interruption" if written
                      else "interrupted; nothing was written")
        return EXIT_INTERRUPTED
    return finish_release(console, rel.params.get("randomness") == "secure", out)
