"""``hierdp release``: release a CSV/Parquet file with a registered mechanism.

The command line describes one input layout, and each layout has its module: trees (trips, the
level layout, ``--levels``; :mod:`hierdp.cli.trees`), group sizes (``--unit``;
:mod:`hierdp.cli.group_sizes`) and location points (``--x/--y`` or ``--lon/--lat``;
:mod:`hierdp.cli.points`). Each layout accepts only its own flags and the mechanisms that fit it
(:mod:`hierdp.cli.layouts`); everything that can be refused is refused before the input is read.
"""

from __future__ import annotations

import argparse
from typing import Any

from hierdp.cli.common import add_privacy_arguments, positive_float, seed_int
from hierdp.cli.group_sizes import add_group_size_arguments
from hierdp.cli.intervals import add_interval_arguments
from hierdp.cli.points import add_point_arguments
from hierdp.cli.scaleout import add_scale_arguments
from hierdp.cli.trees import add_layout_arguments

__all__ = ["add_release_parser", "run_release"]


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
                     help="OS randomness and exact samplers, for a release you publish: the default (the flag says "
                          "so explicitly; not with --seed)")
    rnd.add_argument("--seed", type=seed_int, default=None,
                     help="seeded randomness for a reproducible experiment (opt-in; not for publication: the seed "
                          "recovers the noise). Without --seed the release is secure")
    mech = p.add_argument_group("mechanism")
    mech.add_argument("--mechanism", choices=registry.names(), default=None,
                      help="registered mechanism that fits the layout (default inftda for trees; pgsr_mdp with "
                           "--unit; htf with --x/--y or --lon/--lat)")
    solver_mechs = [n for n, m in registry.infos().items() if m.takes_solver]
    mech.add_argument("--solver", default=None,
                      help=f"post-processing solver name, for the mechanisms with a solver step "
                           f"({', '.join(solver_mechs)}; default per mechanism; hierdp solvers lists them)")
    mech.add_argument("--time-limit", type=positive_float, default=None, metavar="SECONDS",
                      help="time limit of a general solver per solve (a TopDown level, a group-size model, a "
                           "consistency step); a time-out stops the release (exit 3)")
    mech.add_argument("--constraints", metavar="FILE", default=None,
                      help="public constraints over node names (JSON Lines, docs/constraints.md), honoured by the "
                           "post-processing (tree layouts: the TopDown mechanisms, every level; --unit: regions and "
                           "sizes, the exact group-size mechanisms); checked before any noise")
    mech.add_argument("--constraints-failsafe", action="store_true",
                      help="with --constraints: where a level's rows cannot hold after its noise, release the minimal "
                           "L1 relaxation of its rows (stated row by row in the accounting) instead of stopping")
    add_layout_arguments(p)
    add_group_size_arguments(p)  # group sizes (paper 001): --unit
    add_point_arguments(p)  # location points (paper 002): --x/--y, --lon/--lat
    add_scale_arguments(p)
    add_interval_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_release)


def run_release(args: argparse.Namespace) -> int:
    """Run ``hierdp release`` on the layout the command line describes (decided here, once);
    returns the exit code."""
    from hierdp.cli.group_sizes import run_group_sizes
    from hierdp.cli.layouts import decide_layout
    from hierdp.cli.points import run_points
    from hierdp.cli.trees import run_trees

    layout = decide_layout(args)
    run = {"groups": run_group_sizes, "points": run_points, "tree": run_trees}[layout.kind]
    return run(args, layout)
