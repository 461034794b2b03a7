"""``--intervals LEVEL`` of ``hierdp release``: per-node error bars written beside the values.

The intervals (:mod:`hierdp.intervals`) are computed from the release, the public noise law its
accounting records and the public structure (the tree's nodes, the mechanism's configuration):
post-processing, no budget. The table gains ``lower``, ``upper`` (and ``near_zero`` and
``interval`` where the method has them) and the accounting file states the method, whether the
interval is a proven bound, exact or an estimate, and that it cost no budget.

Whether the configured mechanism has intervals at all depends on public configuration only, so it
is decided **before any noise**: the mechanism is run once on a small synthetic input of the same
layout (public, made up here) and its intervals computed with a few draws; a mechanism without an
interval method is refused naming the reason, and nothing is spent.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from hierdp.cli.io import CliError

__all__ = ["add_interval_arguments", "check_intervals_before_noise", "interval_draws", "interval_level",
           "interval_text", "release_table", "report_intervals"]


def interval_level(text: str) -> float:
    """argparse type of ``--intervals``: a level in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a level in (0, 1), e.g. 0.9, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a level in (0, 1), e.g. 0.9, got {text!r}")
    return value


def interval_draws(text: str) -> int:
    """argparse type of ``--interval-draws``: at least 2."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of draws, got {text!r}") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected at least 2 draws, got {text!r}")
    return value


def add_interval_arguments(p: argparse.ArgumentParser) -> None:
    """``--intervals LEVEL`` and ``--interval-draws N``."""
    g = p.add_argument_group("error bars (post-processing: no privacy budget)")
    g.add_argument("--intervals", type=interval_level, default=None, metavar="LEVEL",
                   help="add per-node intervals at this nominal level (e.g. 0.9): columns lower / upper (and "
                        "near_zero, interval); the accounting file states the method (docs/intervals.md). Refused "
                        "before any noise for a mechanism without an interval method")
    g.add_argument("--interval-draws", type=interval_draws, default=None, metavar="N",
                   help="bootstrap re-releases per interval computation (default: at least 10 per tail, e.g. 200 "
                        "at 0.9)")


def _probe_data(kind: str) -> tuple[Any, dict[str, Any]]:
    """A small synthetic input of the layout (made up here: public) and what its intervals need."""
    rng = np.random.default_rng(20261128)
    if kind == "groups":
        from hierdp.datasets.group_sizes import random_count_of_counts

        return random_count_of_counts(rng, depth=2, max_fanout=3, K=4, max_groups_per_leaf=5), {}
    if kind == "points":
        from hierdp.hierarchy.spatial import SpatialGrid

        return SpatialGrid.from_counts(rng.poisson(4.0, (16, 16)).astype(np.int64)), {}
    from hierdp.hierarchy import Hierarchy

    edges = [("W", f"R{i}") for i in range(3)] + [(f"R{i}", f"R{i}-{j}") for i in range(3) for j in range(3)]
    leaves = [b for _, b in edges if "-" in b]
    tree = Hierarchy.from_edges(edges, counts={leaf: int(c) for leaf, c in zip(leaves, rng.integers(0, 60, len(leaves)),
                                                                              strict=True)})
    return tree, {"domain": tree}


def check_intervals_before_noise(args: argparse.Namespace, mech: Any, kind: str) -> None:
    """Refuse ``--intervals`` (a :class:`CliError`) when the configured mechanism has no interval
    method - decided on a synthetic probe input, before the real input is read or any noise drawn."""
    if getattr(args, "intervals", None) is None:
        if getattr(args, "interval_draws", None) is not None:
            raise CliError("--interval-draws applies with --intervals LEVEL")
        return
    if getattr(args, "constraints", None) is not None:
        raise CliError("--intervals: intervals of releases post-processed under --constraints are not supported "
                       "(the bootstrap re-runs the post-processing without the rows)")
    from hierdp.intervals import IntervalsUnsupported

    from hierdp.errors import HierdpError

    probe, public = _probe_data(kind)
    if kind == "groups":
        public = {"mechanism": mech}
    try:
        rel = mech.release(probe)  # public synthetic data: secure randomness, nothing of the input
    except HierdpError:
        return  # this configuration does not run on the probe (e.g. a K of its own): the run decides
    try:
        rel.intervals(args.intervals, draws=4, seed=0, **public)
    except IntervalsUnsupported as exc:
        raise CliError(f"--intervals: {exc}") from None


def release_table(args: argparse.Namespace, release: Any, *, seed: int | None, progress: bool,
                  **public: Any) -> tuple[Any, Exception | None]:
    """The table to write: ``release.to_frame()``, or with ``--intervals`` the release's intervals
    frame (``public``: ``domain=`` the tree, or ``mechanism=`` for group sizes). When the intervals
    fail after the release (its budget is spent), the values are still written, without intervals,
    and the error is returned for :func:`report_intervals`."""
    if getattr(args, "intervals", None) is None:
        return release.to_frame(), None
    from hierdp.intervals import IntervalsUnsupported

    try:
        return release.intervals(args.intervals, draws=args.interval_draws, seed=seed, progress=progress,
                                 **public), None
    except IntervalsUnsupported as exc:
        return release.to_frame(), exc


def report_intervals(console: Any, args: argparse.Namespace, frame: Any, error: Exception | None) -> int | None:
    """Say how the written intervals were computed; or, when they failed, that the values were
    written without them (exit code 2, returned)."""
    if getattr(args, "intervals", None) is None:
        return None
    if error is not None:
        console.error(f"--intervals: {error}; the release was written without intervals")
        return 2
    console.say(interval_text(frame))
    return None


def interval_text(frame: Any) -> str:
    """One line saying how the written intervals were computed and what they cost."""
    info = frame.attrs.get("intervals", {})
    kind = info.get("kind", "?")
    what = {"bound": "a proven bound", "exact": "exact", "estimate": "an estimate (measured coverage in "
            "docs/intervals.md, not a guarantee)"}.get(kind, kind)
    draws = f", {info['draws']} draws" if info.get("draws") else ""
    return (f"intervals: {100 * float(info.get('level', 0)):g} % {info.get('method', '?')}{draws}: {what}; "
            "post-processing of the release and its public noise law, no privacy budget spent (stated in the "
            "accounting file)")
