"""``hierdp release``: release a CSV/Parquet file of trips or counts with a registered mechanism.

Tree layouts (two more layouts have their own modules: group sizes with ``--unit``,
:mod:`hierdp.cli.group_sizes`; location points with ``--x/--y`` or ``--lon/--lat``,
:mod:`hierdp.cli.points`; each layout accepts only the mechanisms that fit it,
:mod:`hierdp.cli.layouts`):

* trips (``--origin COL --destination COL --geo GEO.csv [--levels L1,L2,...]``): one row per trip
  (or per pair with ``--count``) between finest areas; the geography file has one column per
  level, coarse to fine, the finest being the area ids. An O/D tree (``--tree``) is built;
* the paper's level layout (``--origin-levels A0,..,Ag --destination-levels B0,..,Bg [--count]``),
  with ``--geo`` the geography (one column per level, coarse to fine);
* plain counts (``--levels L1,L2,... [--count COL]``): a hierarchy from level columns, with
  ``--geo`` a file of the same level columns listing every possible node.

The domain (the set of nodes) must be public. ``--geo`` declares it: every node of the file is
in the tree and measured, with or without rows. Without ``--geo`` the nodes are read from the
rows, which reveals a node whose only record is one person; that is refused unless
``--observed-domain-public`` states that the observed set of nodes is public knowledge.

Identifiers are read verbatim as text (``01001`` and ``NA`` stay themselves); only the count
column is numeric (exact integers). Rows are numbered from 0, the header not counted.

The output (CSV, ``.csv.gz``, or Parquet for ``.parquet``/``.pq``) has one row per released node.
It is written atomically, never over an input, and over an existing file only with
``--overwrite``.

Scale-out (TopDown mechanisms, docs/scale.md): ``--engine processes|dask`` runs each level's
partitions on a process pool or a Dask cluster (``--scheduler ADDRESS``, else a local cluster of
``--workers`` processes); a seeded release is the same on every engine. The input may then be a
directory holding a Parquet dataset larger than memory (``--levels`` layout), read and aggregated
with Dask. ``--checkpoint DIR`` writes every finished level; ``--resume DIR`` continues an
interrupted run from its last finished level (same input and parameters, else refused).
"""

from __future__ import annotations

import argparse
import secrets
import time
from pathlib import Path
from typing import Any

from hierdp.cli.console import (
    EXIT_INTERRUPTED,
    Console,
    finish_release,
    int_at_least,
    run_interruptible,
    show_progress,
)
from hierdp.cli.io import CliError, check_input_file, check_output_path, read_table, write_table_atomic
from hierdp.errors import HierdpError

__all__ = [
    "MECHANISMS_WITH_SOLVER",
    "add_release_parser",
    "build_mechanism",
    "build_tree",
    "randomness_text",
    "read_table",
    "run_release",
]

#: seconds to reach a --scheduler before giving up
CONNECT_TIMEOUT = 10.0

#: built-in mechanisms whose post-processing is a solver (the others take no --solver/--time-limit)
MECHANISMS_WITH_SOLVER = frozenset({"inftda", "tda_l2", "tda_l2_exact", "tda_linf"})


def _positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (x > 0 and x < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
    return x


_positive_int = int_at_least(1, "positive")


_seed = int_at_least(0, "non-negative")


def add_privacy_arguments(p: argparse.ArgumentParser) -> None:
    """The budget and neighbouring-relation options shared by ``release`` and ``compare``."""
    budget = p.add_argument_group("privacy")
    budget.add_argument("--epsilon", type=_positive_float, help="target epsilon (with --delta)")
    budget.add_argument("--delta", type=_positive_float, default=None,
                        help="target delta (default 1e-8 with --epsilon)")
    budget.add_argument("--rho", type=_positive_float, help="total rho-zCDP instead of --epsilon")
    budget.add_argument("--unbounded", action="store_true", help="unbounded neighbours (the total is noised)")
    budget.add_argument("--contributions", type=_positive_int, default=1, help="trips (rows) per user, m (default 1)")
    budget.add_argument("--distinct-pairs", action="store_true",
                        help="a user's m trips are distinct finest O/D pairs (smaller leaf-level sensitivity)")
    budget.add_argument("--conversion", choices=("analytic", "numeric"), default="analytic",
                        help="(eps, delta) -> rho conversion (paper 000 uses analytic, Lemma 3)")


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
    data.add_argument("--levels", help="comma-separated level columns (of --geo for trips, else of the input)")
    data.add_argument("--origin-levels", help="level layout: comma-separated origin level columns")
    data.add_argument("--destination-levels", help="level layout: comma-separated destination level columns")
    data.add_argument("--count", help="column of counts (default: one per row)")


def add_release_parser(subparsers: Any) -> None:
    """Add the ``release`` sub-command to an ``argparse`` sub-parser collection."""
    from hierdp.mechanisms import registry

    p = subparsers.add_parser("release", help="release a file of trips or counts with differential privacy",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="input CSV (optionally .gz) or Parquet file")
    p.add_argument("-o", "--output", required=True, help="output file: .csv, .csv.gz, .parquet or .pq")
    p.add_argument("--overwrite", action="store_true", help="replace the output file if it exists")
    add_privacy_arguments(p)
    rnd = p.add_argument_group("randomness")
    rnd.add_argument("--secure", action="store_true",
                     help="OS randomness and exact samplers: use this for a release you publish")
    rnd.add_argument("--seed", type=_seed, default=None,
                     help="seed for a reproducible experiment (not for publication; not with --secure). "
                          "Without --seed and --secure a seed is drawn and printed")
    mech = p.add_argument_group("mechanism")
    mech.add_argument("--mechanism", choices=registry.names(), default=None,
                      help="registered mechanism that fits the layout (default inftda for trees; pgsr_mdp with "
                           "--unit; htf with --x/--y or --lon/--lat)")
    mech.add_argument("--solver", default=None,
                      help=f"post-processing solver name (mechanisms {', '.join(sorted(MECHANISMS_WITH_SOLVER))}; "
                           "default per mechanism)")
    mech.add_argument("--time-limit", type=_positive_float, default=None, metavar="SECONDS",
                      help="time limit of a general solver per level; a time-out stops the release (exit 3)")
    mech.add_argument("--constraints", metavar="FILE", default=None,
                      help="public constraints over node names (JSON Lines, docs/constraints.md), honoured by the "
                           f"post-processing of every level (tree layouts; {', '.join(sorted(MECHANISMS_WITH_SOLVER))}"
                           ", topdown); checked before any noise")
    mech.add_argument("--constraints-failsafe", action="store_true",
                      help="with --constraints: where a level's rows cannot hold after its noise, release the minimal "
                           "L1 relaxation of its rows (stated row by row in the accounting) instead of stopping")
    add_layout_arguments(p)
    from hierdp.cli.group_sizes import add_group_size_arguments  # group sizes (paper 001): --unit
    add_group_size_arguments(p)
    from hierdp.cli.points import add_point_arguments  # location points (paper 002): --x/--y, --lon/--lat
    add_point_arguments(p)
    add_scale_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_release)


def add_scale_arguments(p: argparse.ArgumentParser) -> None:
    """Engines and checkpoints (TopDown mechanisms; see docs/scale.md)."""
    scale = p.add_argument_group("scale-out and checkpoints (TopDown mechanisms)")
    scale.add_argument("--engine", choices=("serial", "processes", "dask"), default=None,
                       help="where levels run: this process (default), a process pool, or a Dask cluster; seeded "
                            "releases are identical on every engine")
    scale.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="Dask scheduler address (tcp://host:8786) for --engine dask (default: a local cluster)")
    scale.add_argument("--workers", type=_positive_int, default=None,
                       help="processes of the pool or of the local Dask cluster (default 2)")
    scale.add_argument("--checkpoint", metavar="DIR", default=None,
                       help="write every finished level (values, accounting so far, parameters, input fingerprint) "
                            "to DIR, a new or empty directory")
    scale.add_argument("--resume", metavar="DIR", default=None,
                       help="continue the interrupted run checkpointed in DIR from its last finished level (same "
                            "input and parameters; its seed unless --seed is given)")


def check_scale_arguments(args: argparse.Namespace) -> None:
    """Refuse inconsistent engine / checkpoint flags before any input is read."""
    engine = getattr(args, "engine", None)
    if getattr(args, "scheduler", None) is not None:
        if engine not in (None, "dask"):
            raise CliError(f"--scheduler is the address of a Dask scheduler; it needs --engine dask, not --engine "
                           f"{engine}")
        args.engine = engine = "dask"
    if getattr(args, "workers", None) is not None and engine not in ("processes", "dask"):
        raise CliError("--workers needs --engine processes or --engine dask")
    if getattr(args, "workers", None) is not None and args.scheduler is not None:
        raise CliError("--workers sizes a local Dask cluster; a --scheduler's cluster has its own workers")
    if args.checkpoint is not None and args.resume is not None:
        raise CliError("give --checkpoint DIR for a new run or --resume DIR to continue one, not both (a resumed "
                       "run keeps writing to its own checkpoint)")
    if args.resume is not None and args.seed is not None and args.secure:
        raise CliError("--seed and --secure exclude each other")
    if Path(args.input).is_dir():
        from hierdp.scale.dataset import parquet_files

        try:
            parquet_files(args.input)
        except HierdpError:
            raise CliError(f"input {args.input} is a directory with no .parquet files (a directory input is read as "
                           "a Parquet dataset)") from None
        if not args.levels or args.origin or args.origin_levels:
            raise CliError(f"input {args.input} is a directory: a Parquet dataset is read with the --levels layout "
                           "only")


def is_dataset(args: argparse.Namespace) -> bool:
    """True when the input is a directory (a Parquet dataset)."""
    return Path(args.input).is_dir()


def open_dask_client(args: argparse.Namespace) -> Any:
    """A ``distributed.Client`` for --engine dask: the --scheduler's, or a local cluster's."""
    import logging

    from hierdp.scale.errors import SchedulerUnreachable

    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise CliError("--engine dask needs dask.distributed: pip install 'hierdp[dask]'") from None
    if args.scheduler is not None:
        try:
            return Client(args.scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {args.scheduler!r} within "
                                       f"{CONNECT_TIMEOUT:g} s ({type(exc).__name__}: {exc}); nothing was read or "
                                       "written") from None
    cluster = LocalCluster(n_workers=args.workers or 2, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR)
    client = Client(cluster)
    client._hierdp_cluster = cluster  # closed with the client
    return client


def close_dask_client(client: Any) -> None:
    if client is None:
        return
    cluster = getattr(client, "_hierdp_cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def _split(s: str | None) -> list[str] | None:
    return None if s is None else [c.strip() for c in s.split(",") if c.strip()]


def layout_of(args: argparse.Namespace) -> str:
    """``"trips"``, ``"levels-od"`` or ``"levels"``; refuses incomplete or mixed layouts."""
    trips = bool(args.origin or args.destination)
    od = bool(args.origin_levels or args.destination_levels)
    if trips and od:
        raise CliError("give either --origin/--destination (trips) or --origin-levels/--destination-levels "
                       "(level layout), not both")
    if trips:
        if not (args.origin and args.destination):
            raise CliError("trips need both --origin and --destination")
        if not args.geo:
            raise CliError("trips need a geography file: --geo GEO.csv (one column per level, coarse to fine)")
        return "trips"
    if od:
        if not (args.origin_levels and args.destination_levels):
            raise CliError("the level layout needs both --origin-levels and --destination-levels")
        return "levels-od"
    if args.count:
        ids = (_split(args.levels) or []) + [c for c in (args.origin, args.destination) if c] \
            + (_split(args.origin_levels) or []) + (_split(args.destination_levels) or [])
        if args.count in ids and not trips:
            raise CliError(f"--count {args.count!r} is also a level column; the count column holds numbers, "
                           "the level columns identifiers")
        if args.count in (args.origin, args.destination):
            raise CliError(f"--count {args.count!r} is also the --origin or --destination column")
    if args.levels:
        if args.destination_geo:
            raise CliError("--destination-geo applies to trips and the level layout, not to --levels")
        return "levels"
    raise CliError("say what the input is: --origin/--destination with --geo (trips), "
                   "--origin-levels/--destination-levels (level layout), or --levels (counts)")


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


def build_dataset_tree(args: argparse.Namespace, client: Any = None) -> Any:
    """The tree of a Parquet dataset directory (``--levels`` layout), aggregated with Dask."""
    from hierdp.scale.tree import LevelTree

    levels = _split(args.levels)
    geo = read_table(args.geo, what="--geo") if args.geo else None
    if geo is not None:
        missing = [c for c in levels if c not in geo.columns]
        if missing:
            raise CliError(f"--geo {Path(args.geo).name}: no level column {missing[0]!r}; it needs the --levels "
                           f"columns {levels} (it has {list(geo.columns)})")
        domain = geo[levels]
    else:
        domain = None
    tree = LevelTree.from_parquet(args.input, levels, args.count, domain=domain,
                                  observed_domain_public=geo is None, client=client)
    return tree


def build_tree(args: argparse.Namespace, df: Any) -> Any:
    """The tree described by the command-line arguments (see the module docstring)."""
    from hierdp.hierarchy import Hierarchy
    from hierdp.hierarchy.geography import Geography
    from hierdp.hierarchy.od import ODTree

    layout = layout_of(args)
    levels = _split(args.levels)
    geo = read_table(args.geo, what="--geo") if args.geo else None
    dgeo = read_table(args.destination_geo, what="--destination-geo") if args.destination_geo else None
    if layout == "trips":
        return ODTree.from_trips(df, origin=args.origin, destination=args.destination, count=args.count,
                                 origin_geo=geo, destination_geo=dgeo, geo_levels=levels, kind=args.tree)
    if layout == "levels-od":
        og = Geography.from_frame(geo, levels) if geo is not None else None
        dg = Geography.from_frame(dgeo, levels) if dgeo is not None else None
        return ODTree.from_level_frame(df, origin_levels=_split(args.origin_levels),
                                       destination_levels=_split(args.destination_levels), count=args.count,
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


def build_mechanism(args: argparse.Namespace) -> Any:
    """The mechanism described by the command-line arguments, from the mechanism registry.

    ``--solver`` and ``--time-limit`` are refused for a mechanism without a solver step
    (``vanilla``, ``sh``) rather than silently ignored.
    """
    from hierdp.mechanisms import registry
    from hierdp.privacy.errors import PrivacyError

    name = args.mechanism or "inftda"
    if name not in MECHANISMS_WITH_SOLVER and name in ("vanilla", "sh"):
        for flag, value in (("--solver", args.solver), ("--time-limit", args.time_limit)):
            if value is not None:
                raise CliError(f"{flag} does not apply to --mechanism {name}, which has no solver step; "
                               f"drop {flag} (solver mechanisms: {', '.join(sorted(MECHANISMS_WITH_SOLVER))})")
    params = mechanism_params(args, name)
    if getattr(args, "constraints", None) is not None:
        params.update(constraint_params(args, name))
    if args.solver is not None:
        params["solver"] = args.solver
    if args.time_limit is not None:
        params["time_limit"] = args.time_limit
    try:
        return registry.create(name, **params)
    except TypeError as exc:  # a third-party mechanism without a solver/time_limit parameter
        bad = next((k for k in ("solver", "time_limit") if k in str(exc)), None)
        if bad:
            raise CliError(f"--{bad.replace('_', '-')} does not apply to --mechanism {name}") from None
        raise
    except PrivacyError as exc:
        raise privacy_context(args, exc) from None


def constraint_params(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """``constraints=`` (and the failsafe) from ``--constraints FILE``, read and checked now: a bad
    file is refused, naming its line, before any input is read."""
    from hierdp.constraints import ConstraintError, Constraints

    if name in ("vanilla", "sh"):
        raise CliError(f"--constraints applies to mechanisms with a post-processing solve "
                       f"({', '.join(sorted(MECHANISMS_WITH_SOLVER))}, topdown), not to --mechanism {name}")
    try:
        constraints = Constraints.read(args.constraints)
    except ConstraintError as exc:
        raise CliError(f"--constraints {args.constraints}: {exc}") from None
    return {"constraints": constraints, "on_infeasible": "relax" if args.constraints_failsafe else "abort"}


def privacy_context(args: argparse.Namespace, exc: Exception) -> CliError:
    """A library privacy error with the flags it is about (``privacy parameters --epsilon 1e-300
    --delta 1e-08: ...``)."""
    delta = args.delta if args.delta is not None else (1e-8 if args.epsilon is not None else None)
    given = " ".join(f"--{k} {v:g}" for k, v in (("epsilon", args.epsilon), ("delta", delta), ("rho", args.rho))
                     if v is not None)
    return CliError(f"privacy parameters {given}: {exc}")


def randomness_text(secure: bool, seed: int | None, drawn: bool) -> str:
    """The line every run prints about its randomness."""
    if secure:
        return "randomness: secure (OS entropy, exact samplers): suitable for publication"
    how = "drawn from OS entropy, printed so the run can be repeated" if drawn else "given with --seed"
    return f"randomness: seeded (reproducible, not for publication), seed {seed} ({how})"


def domain_text(args: argparse.Namespace) -> str:
    """The line every run prints about the tree's domain."""
    if args.geo:
        geo = f"--geo {args.geo}" + (f" and --destination-geo {args.destination_geo}" if args.destination_geo else "")
        return f"domain: declared by {geo} (every node of it is measured, with or without rows)"
    return ("domain: read from the input rows and assumed public (--observed-domain-public); "
            "the release states this assumption")


def run_release(args: argparse.Namespace) -> int:
    """Run ``hierdp release``: checks, then read, build, release, write. Returns the exit code;
    errors are raised (:func:`hierdp.cli.main` prints them as one line)."""
    from hierdp.privacy.domain import ObservedDomainError, check_public_domain
    from hierdp.privacy.errors import PrivacyError

    from hierdp.cli.layouts import check_layout_flags, check_mechanism_fits, input_layout

    layout = input_layout(args)
    if layout == "groups":  # the group-size layout (paper 001)
        from hierdp.cli.group_sizes import run_group_sizes
        return run_group_sizes(args)
    if layout == "points":  # location points (paper 002)
        from hierdp.cli.points import run_points
        return run_points(args)
    console = Console("hierdp release")
    # everything that can be refused is refused before any input is read or noise drawn
    for f in input_files(args):
        check_input_file(f, "input" if f == Path(args.input) else "--geo")
    if not Path(args.input).exists():
        raise CliError(f"input file not found: {args.input}")
    out = check_output_path(args.output, input_files(args), overwrite=args.overwrite)
    check_layout_flags(args, "tree")
    check_mechanism_fits(args.mechanism or "inftda", "tree")
    layout_of(args)
    check_domain_arguments(args)
    check_scale_arguments(args)
    if args.constraints_failsafe and args.constraints is None:
        raise CliError("--constraints-failsafe needs --constraints FILE")
    if args.constraints is not None and args.engine not in (None, "serial"):
        raise CliError(f"--constraints runs on the serial engine in this version, not with --engine {args.engine}")
    if args.secure and args.seed is not None:
        raise CliError("--seed and --secure exclude each other: a seeded release is reproducible, hence not "
                       "for publication; drop --seed for a real release")
    mech = build_mechanism(args)
    scaled = args.engine not in (None, "serial") or args.checkpoint is not None or args.resume is not None
    if scaled and not hasattr(mech, "set_engine"):
        flags = [f for f, v in (("--engine", args.engine not in (None, "serial")), ("--checkpoint", args.checkpoint),
                                ("--resume", args.resume)) if v]
        raise CliError(f"{flags[0]} applies to the TopDown mechanisms (inftda, tda_l2, tda_l2_exact, tda_linf, "
                       f"topdown), not to --mechanism {args.mechanism}")
    drawn = not args.secure and args.seed is None and args.resume is None
    seed = None if args.secure else (secrets.randbelow(2**32) if drawn else args.seed)
    if args.resume is not None and not args.secure and seed is None:
        console.say("randomness: seeded (reproducible, not for publication), the checkpoint's seed")
    else:
        console.say(randomness_text(args.secure, seed, drawn))
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
        def work() -> tuple[Any, Any, float, Any]:
            t0 = time.perf_counter()
            if is_dataset(args):
                tree = build_dataset_tree(args, client)
            else:
                df = read_table(args.input, counts=[args.count] if args.count else [])
                tree = build_tree(args, df)
            check_public_domain(tree)
            t_build = time.perf_counter() - t0
            return tree, t_build, mech.release(tree, seed=seed, progress=show_progress(args), **extra)

        try:
            tree, t_build, rel = run_interruptible(work)
        except PrivacyError as exc:
            if isinstance(exc, ObservedDomainError):
                raise
            raise privacy_context(args, exc) from None
        finally:
            close_dask_client(client)
        frame = rel.to_frame()
        write_table_atomic(frame, out)
        written = True
        console.say(f"input: {args.input} -> {tree!r} (built in {t_build:.2f} s)")
        console.say(rel.accounting_text())
        console.say("per level: released nodes, seconds")
        for lev, (lv, secs) in enumerate(zip(rel.levels, rel.timings)):
            console.say(f"  {lev:>2} {rel.level_names[lev]:<28} {len(lv):>10,} {secs:>9.3f}")
        console.say(f"wrote {len(frame):,} rows to {out}")
    except KeyboardInterrupt:
        console.error(f"interrupted; {out} was written before the interruption" if written
                      else "interrupted; nothing was written")
        return EXIT_INTERRUPTED
    return finish_release(console, args.secure, out)
