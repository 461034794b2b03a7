"""``hierdp release`` for location points (paper 002): points -> a private partition of a public grid.

Layout (chosen by ``--x/--y`` or ``--lon/--lat``)::

    hierdp release stops.csv -o leaves.csv --lon longitude --lat latitude \\
        --box -125 -66 24 50 --grid 512x1024 --epsilon 0.5 --mechanism htf --seed 0

* one row per point; ``--x COL --y COL`` (any plane), or ``--lon COL --lat COL`` (x is the
  longitude, y the latitude; the output's coordinate columns are then ``lon_min`` ... ``lat_max``).
  ``--count COL`` optionally gives each row a number of records (non-negative integers);
* ``--box X_MIN X_MAX Y_MIN Y_MAX``: the public bounding box (four numbers, negative ones as
  they are: ``--box -125 -66 24 50``; write decimals, not ``-1e3``, which reads as a flag);
  every point must lie inside it (edges included) - points outside are refused, never dropped.
  Without ``--box`` the box would be read from the private points (it moves when a point at the
  edge is added or removed): refused unless
  ``--observed-domain-public`` states that the observed box is public (the release says so);
* ``--grid ROWSxCOLS``: the public grid, cells along y (rows) and along x (cols), e.g.
  ``1024x1024`` (one number N means N x N); at most :data:`MAX_CELLS` cells, and no more than
  the mechanism's release fits in :data:`hierdp.cli.memory.MEMORY_BOUND` (checked before reading);
* ``--mechanism``: ``htf`` (default), ``identity``, ``uniform``, ``ug``, ``ag``, ``quadtree``,
  ``kdtree``, ``privelet``; ``--param NAME=VALUE`` (repeatable) sets a mechanism parameter
  (``--param stop_count=50``, ``--param height=6``, ``--param budgets=uniform``;
  docs/spatial.md lists them); ``--solver`` / ``--time-limit`` choose the consistency solver of
  ``ag``, ``quadtree`` and ``kdtree``;
* privacy: ``--epsilon`` only (pure epsilon-DP, discrete Laplace noise); the neighbour relation is
  paper 002's: one record added or removed (unbounded; ``--unbounded`` is accepted and changes
  nothing); ``--contributions m`` when a person can contribute m records. ``--rho``, ``--delta``
  and ``--distinct-pairs`` are refused.

The output has one row per released leaf (rectangles tiling the grid exactly once):
``leaf, r0, r1, c0, c1`` (cells, half-open; rows follow y from the box's lower edge), the
rectangle's coordinates, ``cells`` and ``value``. Everything that can be refused is refused before
the input is read and before any noise; the file is written atomically.
"""

from __future__ import annotations

import argparse
import inspect
import math
import re
import time
from pathlib import Path
from typing import Any

from hierdp.cli.intervals import check_intervals_before_noise, release_table, report_intervals
from hierdp.cli.common import (
    check_accounting_target,
    check_randomness_flags,
    input_text,
    randomness_text,
    save_output,
    seed_for_run,
)
from hierdp.cli.io import CliError, check_input_file, check_output_path, read_table
from hierdp.cli.layouts import Layout, check_mechanism_fits, check_solver_flags, default_mechanism
from hierdp.cli.memory import check_point_memory

__all__ = [
    "MAX_CELLS",
    "add_point_arguments",
    "domain_text",
    "parse_box",
    "parse_grid",
    "parse_params",
    "point_spec",
    "read_grid",
    "run_points",
]

#: largest grid the command line builds (64 Mi cells: 512 MiB per int64 matrix, and a release holds
#: several); larger grids through the Python API
MAX_CELLS = 2**26

#: mechanism parameters set by their own flags (refused in --param)
_RESERVED = {"epsilon": "--epsilon", "delta": "--delta", "rho": "--rho", "budget": "--epsilon",
             "unit": "--contributions", "bounded": "--unbounded", "contributions": "--contributions",
             "distinct": "--distinct-pairs", "conversion": "--conversion", "secure": "--secure",
             "solver": "--solver", "solver_options": "--time-limit", "consistency_solver": "--solver",
             "time_limit": "--time-limit"}


def add_point_arguments(p: argparse.ArgumentParser) -> None:
    """The point layout's options (``--x/--y`` or ``--lon/--lat`` selects the layout)."""
    g = p.add_argument_group("location points (paper 002): --x/--y or --lon/--lat selects this layout")
    g.add_argument("--x", help="column of x coordinates (one row per point)")
    g.add_argument("--y", help="column of y coordinates")
    g.add_argument("--lon", help="column of longitudes (x); with --lat")
    g.add_argument("--lat", help="column of latitudes (y); with --lon")
    g.add_argument("--box", nargs=4, metavar=("X_MIN", "X_MAX", "Y_MIN", "Y_MAX"),
                   help="the public bounding box (LON_MIN LON_MAX LAT_MIN LAT_MAX with --lon/--lat; negative numbers "
                        "as they are: --box -125 -66 24 50); every point must lie inside it")
    g.add_argument("--grid", metavar="ROWSxCOLS",
                   help="the public grid: cells along y (rows) and x (cols), e.g. 1024x1024 (N: N x N)")
    g.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a parameter of the point mechanism (repeatable), e.g. --param stop_count=50")


# ------------------------------------------------------------------ parsing the arguments
def parse_grid(text: str) -> tuple[int, int]:
    """``"512x1024"``, ``"512,1024"`` or ``"1024"`` -> ``(rows, cols)``; refuses anything else."""
    parts = [t.strip() for t in re.split(r"[x,X]", text.strip())]
    if len(parts) not in (1, 2) or not all(re.fullmatch(r"\+?\d+", t) for t in parts):
        raise CliError(f"--grid must be ROWSxCOLS (e.g. 1024x1024) or one number N for N x N, got {text!r}")
    dims = [int(t) for t in parts]
    if any(d < 1 for d in dims):
        raise CliError(f"--grid needs positive numbers of cells, got {text!r}")
    rows, cols = (dims[0], dims[0]) if len(dims) == 1 else (dims[0], dims[1])
    if rows * cols > MAX_CELLS:
        raise CliError(f"--grid {rows}x{cols} has {rows * cols:,} cells, more than the command line builds "
                       f"({MAX_CELLS:,}: each int64 matrix of it would take {rows * cols * 8 / 2**30:.1f} GiB); use "
                       "a coarser grid, or the Python API")
    return rows, cols


def parse_box(values: list[str], names: tuple[str, str]) -> tuple[float, float, float, float]:
    """Four finite numbers with ``min < max`` on both axes; ``names`` = ("x", "y") or ("lon", "lat")."""
    labels = [f"{names[0]}_min", f"{names[0]}_max", f"{names[1]}_min", f"{names[1]}_max"]
    if len(values) != 4:
        raise CliError(f"--box needs four numbers {' '.join(s.upper() for s in labels)}, got {len(values)}")
    out: list[float] = []
    for label, text in zip(labels, values, strict=False):
        try:
            v = float(text)
        except ValueError:
            raise CliError(f"--box: {label} {text!r} is not a number") from None
        if not math.isfinite(v):
            raise CliError(f"--box: {label} must be a finite number, got {text!r}")
        out.append(v)
    for k in (0, 2):
        if not out[k] < out[k + 1]:
            raise CliError(f"--box: {labels[k]} {values[k]} must be below {labels[k + 1]} {values[k + 1]}")
    return out[0], out[1], out[2], out[3]


def _value(text: str) -> Any:
    low = text.strip().lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def parse_params(items: list[str] | None, name: str) -> dict[str, Any]:
    """``--param NAME=VALUE`` items -> keyword parameters of mechanism ``name`` (values: integers,
    decimals, true/false, none, else text); unknown, reserved and repeated names refused."""
    from hierdp.mechanisms import registry

    allowed = [p for p in inspect.signature(registry.get(name)).parameters
               if p not in _RESERVED and p not in ("self", "args", "kwargs")]
    out: dict[str, Any] = {}
    for item in items or []:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise CliError(f"--param {item!r}: expected NAME=VALUE (e.g. --param stop_count=50)")
        if key in _RESERVED:
            raise CliError(f"--param {key}: set it with {_RESERVED[key]}, not --param")
        if key not in allowed:
            raise CliError(f"--param {key}: --mechanism {name} has no parameter {key!r}; its parameters are "
                           f"{', '.join(allowed)}")
        if key in out:
            raise CliError(f"--param {key} is given twice")
        out[key] = _value(text)
    return out


def _columns(args: argparse.Namespace) -> tuple[str, str, tuple[str, str]]:
    xy = bool(args.x or args.y)
    ll = bool(args.lon or args.lat)
    if xy and ll:
        raise CliError("give either --x/--y or --lon/--lat, not both")
    if xy and not (args.x and args.y):
        raise CliError(f"the point layout needs both --x and --y (got only {'--x' if args.x else '--y'})")
    if ll and not (args.lon and args.lat):
        raise CliError(f"the point layout needs both --lon and --lat (got only {'--lon' if args.lon else '--lat'})")
    xcol, ycol = (args.x, args.y) if xy else (args.lon, args.lat)
    names = ("x", "y") if xy else ("lon", "lat")
    cols = [xcol, ycol] + ([args.count] if args.count else [])
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise CliError(f"column {dup[0]!r} is given for two roles (--{names[0]}, --{names[1]} and --count must "
                       "differ)")
    return xcol, ycol, names


def point_spec(args: argparse.Namespace) -> dict[str, Any]:
    """Everything about the point input and budget refusable from the arguments alone; returns the
    input's description (``x``, ``y``, ``names``, ``shape``, ``box``) for :func:`read_grid`."""
    xcol, ycol, names = _columns(args)
    if args.grid is None:
        raise CliError("the point layout needs --grid ROWSxCOLS (the public grid, e.g. 1024x1024)")
    shape = parse_grid(args.grid)
    if args.box is not None and args.observed_domain_public:
        raise CliError("give either --box (a declared public box) or --observed-domain-public, not both")
    if args.box is None and not args.observed_domain_public:
        raise CliError("refusing to release: the bounding box would be read from the private points (it moves when a "
                       "point at the edge is added or removed); give the public box with --box X_MIN X_MAX Y_MIN "
                       "Y_MAX, or pass --observed-domain-public to state that the observed box is public")
    box = parse_box(args.box, names) if args.box is not None else None
    if box is not None:  # the box and grid together: a span beyond double precision, cells that collapse
        from hierdp.hierarchy.spatial import SpatialDataError, SpatialDomain

        try:
            SpatialDomain(*box, shape[0], shape[1])
        except SpatialDataError as exc:
            raise CliError(f"--box with --grid {shape[0]}x{shape[1]}: {exc}") from None
    if args.rho is not None:
        raise CliError("the point mechanisms are pure epsilon-DP (discrete Laplace noise): give --epsilon, not --rho")
    if args.epsilon is None:
        raise CliError("give --epsilon (the pure-DP budget)")
    if args.delta is not None:
        raise CliError("--delta does not apply: the point mechanisms are pure epsilon-DP (delta = 0)")
    if args.distinct_pairs:
        raise CliError("--distinct-pairs applies to O/D trees, not to location points")
    if args.conversion != "analytic":
        raise CliError("--conversion applies to (epsilon, delta) -> rho conversions; the point mechanisms are pure "
                       "epsilon-DP")
    return {"x": xcol, "y": ycol, "names": names, "shape": shape, "box": box}


def domain_text(spec: dict[str, Any]) -> str:
    """The line every point run prints about its box and grid."""
    box = spec["box"]
    if box is None:
        return ("domain: box read from the points and assumed public (--observed-domain-public); the release "
                "states this assumption")
    return f"domain: box {' '.join(f'{v:g}' for v in box)} declared by --box; grid {spec['shape'][0]} x " \
           f"{spec['shape'][1]}"


def _mechanism(args: argparse.Namespace, spec: dict[str, Any]) -> Any:
    from hierdp.mechanisms import MechanismParameterError, registry
    from hierdp.privacy.errors import PrivacyError

    name = spec["name"]
    params: dict[str, Any] = {"epsilon": args.epsilon, "bounded": False, "contributions": args.contributions,
                              "secure": bool(args.secure), **spec["params"]}
    if args.solver is not None:
        params["solver"] = args.solver
    if args.time_limit is not None:
        params["time_limit"] = args.time_limit
    try:
        return registry.create(name, **params)
    except (PrivacyError, MechanismParameterError) as exc:
        raise CliError(f"--mechanism {name}: {exc}") from None


# ------------------------------------------------------------------ the run
def _outside(x: Any, y: Any, box: tuple[float, float, float, float]) -> Any:
    return (x < box[0]) | (x > box[1]) | (y < box[2]) | (y > box[3])


def read_grid(args: argparse.Namespace, spec: dict[str, Any]) -> Any:
    """Read the points and bin them (the culprit row named on any bad cell)."""
    import numpy as np

    from hierdp.errors import HierdpError
    from hierdp.hierarchy.counts import checked_total
    from hierdp.hierarchy.spatial import SpatialGrid

    xcol, ycol, names, box = spec["x"], spec["y"], spec["names"], spec["box"]
    counts = [args.count] if args.count else []
    df = read_table(args.input, counts=counts, columns=[xcol, ycol, *counts], numbers=[xcol, ycol])
    if len(df) == 0:
        raise CliError(f"input {Path(args.input).name}: no points (the file has a header and no rows)")
    x, y = df[xcol].to_numpy(), df[ycol].to_numpy()
    if box is not None:
        out = _outside(x, y, box)
        if out.any():
            i = int(np.flatnonzero(out)[0])
            from hierdp.privacy.disclosure import quote_private

            where = quote_private(f"{names[0]} {float(x[i])!r}, {names[1]} {float(y[i])!r}", "at", verbatim=True)
            raise CliError(f"input {Path(args.input).name}: {int(out.sum())} point(s) lie outside --box "
                           f"{' '.join(f'{v:g}' for v in box)}, e.g. row {i}{where}; enlarge the box or filter the "
                           "points first (nothing is dropped silently)")
    weights = None
    if args.count:
        weights = df[args.count].to_numpy()
        if weights.dtype.kind == "f":  # Parquet floats: integral, finite, non-negative (text went through the
            bad = ~np.isfinite(weights) | (weights < 0) | (weights != np.round(weights))  # exact count parser)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise CliError(f"input {Path(args.input).name}: column {args.count!r}, row {i}: count "
                               f"{weights[i]!r} is not a non-negative integer")
        elif weights.dtype.kind in "iu" and (weights < 0).any():
            i = int(np.flatnonzero(weights < 0)[0])
            raise CliError(f"input {Path(args.input).name}: column {args.count!r}, row {i}: count {weights[i]} "
                           "is negative")
        elif weights.dtype.kind not in "iuf":
            raise CliError(f"input {Path(args.input).name}: column {args.count!r} holds {weights.dtype} values, "
                           "not counts")
        big = weights >= 2.0**63 if weights.dtype.kind == "f" else np.zeros(weights.shape, bool)
        if big.any():
            raise CliError(f"input {Path(args.input).name}: column {args.count!r}, row {int(np.flatnonzero(big)[0])}: "
                           "count beyond int64")
        try:  # the one checked sum: a total beyond int64 would wrap in every cell sum
            checked_total(weights.astype(np.int64), what=f"input {Path(args.input).name}: column {args.count!r}")
        except HierdpError as exc:
            raise CliError(str(exc)) from None
    return SpatialGrid.from_points(x, y, shape=spec["shape"], box=box, weights=weights,
                                   observed_domain_public=bool(box is None))


def run_points(args: argparse.Namespace, layout: Layout) -> int:
    """``hierdp release --x/--y ...``: checks, read, bin, release, write (exit code 0); ``layout``
    is the point layout :func:`hierdp.cli.layouts.decide_layout` found (its flags checked)."""
    from hierdp.cli.console import EXIT_INTERRUPTED, Console, finish_release, run_interruptible, show_progress
    console = Console("hierdp release")
    inp = check_input_file(args.input, "input")
    out = check_output_path(args.output, [inp], overwrite=args.overwrite)
    check_accounting_target(out, args.overwrite)
    name = args.mechanism or default_mechanism("points")
    check_mechanism_fits(name, "points")
    check_solver_flags(args, name)
    spec = point_spec(args)
    check_point_memory(name, *spec["shape"])  # public: refused before the input is read
    check_randomness_flags(args)
    spec.update(name=name, params=parse_params(args.param, name))
    mech = _mechanism(args, spec)
    check_intervals_before_noise(args, mech, "points")  # public configuration: decided before any noise
    seed, drawn = seed_for_run(args)
    console.say(randomness_text(args.secure, seed, drawn))
    console.say(domain_text(spec))
    written = False
    try:
        def work() -> tuple[Any, float, Any]:
            t0 = time.perf_counter()
            grid = read_grid(args, spec)
            t_build = time.perf_counter() - t0
            return grid, t_build, mech.release(grid, seed=seed, progress=show_progress(args))

        grid, build_s, rel = run_interruptible(work)
        problems = rel.check_consistency()
        if problems:  # a bug, not bad input: refuse to write a release that breaks its promise
            raise RuntimeError(f"the release of {spec['name']} is not a tiling of the grid: {problems[0]}")
        rel.axes = tuple(spec["names"])  # the coordinate columns are lon_min ... lat_max with --lon/--lat
        frame, interval_error = release_table(args, rel, seed=seed, progress=show_progress(args))
        t0 = time.perf_counter()
        side = save_output(rel, out, frame, overwrite=args.overwrite)
        t_write = time.perf_counter() - t0
        written = True
        console.say(input_text(args.input, grid))
        console.say(f"read and binned in {build_s:.2f} s (timings are for the operator: never publish them)")
        console.say(rel.accounting_text())
        console.say(f"released {rel.n_leaves:,} leaves tiling the {grid.shape[0]} x {grid.shape[1]} grid"
                    + (f" (consistency solver {rel.solver})" if rel.solver else "") + "; seconds per phase: "
                    + ", ".join(f"{k} {v:.3f}" for k, v in rel.timings.items()))
        console.say(f"wrote {len(frame):,} rows (one per leaf) to {out} and its accounting to {side} in "
                    f"{t_write:.2f} s")
        code = report_intervals(console, args, frame, interval_error)
        if code is not None:
            return code
    except KeyboardInterrupt:
        console.error(f"interrupted; {out} was written before the interruption" if written
                      else "interrupted; nothing was written")
        return EXIT_INTERRUPTED
    return finish_release(console, rel.params.get("randomness") == "secure", out)

