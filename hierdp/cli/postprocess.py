"""``hierdp postprocess``: post-process a file of noisy measurements made elsewhere over its spine.

The measurements file is the long Parquet layout of :mod:`hierdp.mechanisms.census.measurements`
(``geolevel, geocode, query_name, query_index, noisy_measurement, variance``: one row per noisy
answer), written by hierdp (``CensusTopDown(...).measure(data).write_parquet(path)``) or by hand
from published noisy measurements. The spine is the public geography: ``--geo`` lists every block
with its level columns (``--levels``, coarse to fine; ``--root`` names the nation). The query
strategy comes from the file (hierdp writes it into the Parquet metadata) or from ``--strategy``, a
JSON file ``{"shape": [2, 3], "groups": {"total": [], "detailed": [0, 1]}}``. ``--total`` is the
public total (the root's). The output has one row per (geounit, cell), like ``hierdp release``'s
histogram layouts.

Nothing is drawn and no budget is spent: the release states it post-processed measurements made
elsewhere (``--measurement-rho`` / ``--measurement-epsilon`` state the guarantee they were published
with, carried into the release as stated). ``--objective l2`` (default: the DAS's weighted least
squares and integer rounding), ``l1`` or ``linf``; ``--engine``, ``--workers``, ``--scheduler``,
``--checkpoint`` and ``--resume`` as for ``hierdp release`` (docs/scale.md).
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

from hierdp.cli.common import positive_float
from hierdp.cli.io import CliError, check_input_file, check_output_path, read_table, write_table_atomic

__all__ = ["add_postprocess_parser", "run_postprocess"]


def add_postprocess_parser(subparsers: Any) -> None:
    """Add the ``postprocess`` sub-command to an ``argparse`` sub-parser collection."""
    p = subparsers.add_parser("postprocess", help="post-process a file of noisy measurements made elsewhere over "
                              "its spine (no noise drawn, no budget spent)", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("measurements", help="the measurements file (Parquet, the layout above)")
    p.add_argument("-o", "--output", required=True, help="output file: .csv, .csv.gz, .parquet or .pq")
    p.add_argument("--overwrite", action="store_true", help="replace the output file if it exists")
    g = p.add_argument_group("the spine (public geography)")
    g.add_argument("--geo", required=True, help="every block with its level columns (CSV or Parquet)")
    g.add_argument("--levels", required=True, help="the level columns, coarse to fine, e.g. state,county,block")
    g.add_argument("--root", default="US", help="the name of the root geounit and geolevel (default US)")
    g.add_argument("--total", required=True, type=int, help="the public total (the root's count)")
    g.add_argument("--strategy", default=None, metavar="JSON",
                   help="the query strategy (shape, groups), when the measurements file does not record it")
    m = p.add_argument_group("post-processing")
    m.add_argument("--objective", choices=("l2", "l1", "linf"), default="l2",
                   help="l2: the DAS's weighted least squares and rounder (default); l1 / linf: integer programs")
    m.add_argument("--solver", default="highs", help="the solver of the continuous stage (l2) or of l1 / linf")
    m.add_argument("--time-limit", type=positive_float, default=None, metavar="SECONDS",
                   help="time limit per solver call")
    budget = m.add_mutually_exclusive_group()
    budget.add_argument("--measurement-rho", type=positive_float, default=None,
                        help="the zCDP guarantee the measurements were published with (stated, not checked)")
    budget.add_argument("--measurement-epsilon", type=positive_float, default=None,
                        help="the pure-DP guarantee the measurements were published with (stated, not checked)")
    from hierdp.cli.scaleout import add_scale_arguments

    add_scale_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_postprocess)


def _strategy(path: str) -> Any:
    from hierdp.mechanisms.census import QueryStrategy

    try:
        rec = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CliError(f"--strategy {path}: {exc}") from None
    if not isinstance(rec, dict) or "shape" not in rec or "groups" not in rec:
        raise CliError(f"--strategy {path}: a JSON object with 'shape' and 'groups' (and optionally 'shares', "
                       "'attribute_names')")
    groups = {str(k): tuple(v) for k, v in rec["groups"].items()}
    shares = {g: Fraction(str(v)) for g, v in (rec.get("shares") or {g: f"1/{len(groups)}" for g in groups}).items()}
    names = rec.get("attribute_names")
    return QueryStrategy(tuple(rec["shape"]), groups, shares, None if names is None else tuple(names))


def run_postprocess(args: argparse.Namespace) -> int:
    """Run ``hierdp postprocess``; returns the exit code (errors raised, printed by the CLI)."""
    import time

    from hierdp.cli.console import Console, run_interruptible, show_progress
    from hierdp.cli.scaleout import check_scale_arguments, close_dask_client, open_dask_client
    from hierdp.mechanisms.census import CensusPostProcess, NoisyMeasurements
    from hierdp.privacy import Budget
    from hierdp.spines import Spine

    console = Console("hierdp postprocess")
    meas_path = check_input_file(args.measurements, "measurements")
    geo_path = check_input_file(args.geo, "--geo")
    out = check_output_path(args.output, [meas_path, geo_path], overwrite=args.overwrite)
    args.input, args.seed, args.secure, args.origin, args.origin_levels = str(meas_path), None, False, None, None
    check_scale_arguments(args)
    levels = [c.strip() for c in args.levels.split(",") if c.strip()]
    if not levels:
        raise CliError("--levels names the spine's level columns, coarse to fine")
    if args.total < 0:
        raise CliError(f"--total must be a non-negative integer, got {args.total}")
    strategy = _strategy(args.strategy) if args.strategy is not None else None
    declared = (Budget.zcdp(args.measurement_rho) if args.measurement_rho is not None
                else Budget.pure(args.measurement_epsilon) if args.measurement_epsilon is not None else None)
    mech = CensusPostProcess(objective=args.objective, solver=args.solver, time_limit=args.time_limit,
                             measurement_budget=declared)
    client = open_dask_client(args) if args.engine == "dask" else None
    if client is not None:
        mech.set_engine("dask", client)
    elif args.engine == "processes":
        mech.set_engine("processes", args.workers or 2)
    extra = {k: v for k, v in (("checkpoint", args.checkpoint), ("resume", args.resume)) if v is not None}
    console.say("randomness: none (post-processing: no noise is drawn)")

    def work() -> tuple[Any, Any, float]:
        t0 = time.perf_counter()
        geo = read_table(geo_path, what="--geo", columns=levels)
        spine = Spine.from_frame(geo[levels].drop_duplicates(), levels, [Fraction(1, len(levels) + 1)] *
                                 (len(levels) + 1), root=args.root)
        meas = NoisyMeasurements.read_parquet(meas_path, spine, strategy)
        rel = mech.release(meas, total=args.total, progress=show_progress(args), **extra)
        return spine, rel, time.perf_counter() - t0

    try:
        spine, rel, seconds = run_interruptible(work)
    finally:
        close_dask_client(client)
    frame = rel.to_frame()
    write_table_atomic(frame, out)
    console.say(f"spine: {spine.n:,} geounits over {len(spine.level_names)} geolevels; engine: "
                f"{mech.engine.describe()}; {seconds:.2f} s")
    console.say(rel.accounting_text())
    console.say(f"wrote {len(frame):,} rows to {out}")
    return 0
