"""The input layouts of ``hierdp release``: which one a command line describes, which flags belong
to it, and which registered mechanisms fit it.

* **tree** (trips, the level layout, ``--levels``): a hierarchy of counts; TopDown mechanisms and
  the paper-000 baselines (and mechanisms registered by third parties, which take trees);
* **group sizes** (``--unit``, paper 001): a count-of-counts hierarchy; the ``pgsr_*`` mechanisms;
* **points** (``--x/--y`` or ``--lon/--lat``, paper 002): a grid of location points; HTF and the
  spatial baselines.

A flag of one layout given with another is refused (it would be silently ignored otherwise), and so
is a mechanism that does not release what the layout builds - before any input is read.
"""

from __future__ import annotations

import argparse
from typing import Any

from hierdp.cli.io import CliError

__all__ = [
    "GROUP_SIZE_MECHANISMS",
    "LAYOUT_TEXT",
    "OTHER_INPUT_MECHANISMS",
    "POINT_MECHANISMS",
    "TREE_MECHANISMS",
    "check_layout_flags",
    "check_mechanism_fits",
    "input_layout",
    "layout_label",
    "mechanisms_for",
]

#: built-in mechanisms that release a tree of counts
TREE_MECHANISMS = ("inftda", "tda_l2", "tda_l2_exact", "tda_linf", "vanilla", "sh", "topdown")
#: built-in mechanisms that release location points (paper 002)
POINT_MECHANISMS = ("htf", "identity", "uniform", "ug", "ag", "quadtree", "kdtree", "privelet")
#: built-in mechanisms that release group sizes (paper 001)
GROUP_SIZE_MECHANISMS = ("pgsr_mdp", "pgsr_mh", "pgsr_mh_relaxed", "pgsr_mhc", "pgsr_mhc_relaxed",
                         "pgsr_cumulative_dp", "pgsr_chain_dp", "pgsr_topdown")
#: built-in mechanisms whose input no command-line layout builds (Python API only), and what they take
OTHER_INPUT_MECHANISMS = {
    "census_topdown": "a geographic spine with block histograms (Python API, docs/spines.md)",
    "safetab": "population groups (Python API)",
}

#: how messages name each layout
LAYOUT_TEXT = {
    "tree": "tree layouts (trips, --origin-levels/--destination-levels, --levels)",
    "groups": "group-size layout (--unit)",
    "points": "point layout (--x/--y or --lon/--lat)",
}
#: short names of the layouts a flag belongs to, for messages
_OWNER = {"tree": "tree layouts", "groups": "group-size layout (--unit)", "points": "point layout (--x/--y)"}
#: what each layout's mechanisms release, for messages
_RELEASES = {"tree": "a tree of counts", "groups": "group sizes", "points": "location points"}
#: how a user selects each layout
_SELECT = {"tree": "--levels, trips or the level layout", "groups": "--unit", "points": "--x/--y or --lon/--lat"}

# (flag, attribute, layouts that take it); a flag counts as given when its value is not the default
_LAYOUT_FLAGS: tuple[tuple[str, str, frozenset[str]], ...] = tuple(
    (flag, attr, frozenset(layouts)) for flag, attr, layouts in (
        ("--geo", "geo", ("tree", "groups")),
        ("--destination-geo", "destination_geo", ("tree",)),
        ("--origin", "origin", ("tree",)),
        ("--destination", "destination", ("tree",)),
        ("--levels", "levels", ("tree", "groups")),
        ("--origin-levels", "origin_levels", ("tree",)),
        ("--destination-levels", "destination_levels", ("tree",)),
        ("--count", "count", ("tree", "points")),
        ("--unit", "unit", ("groups",)),
        ("--size", "size", ("groups",)),
        ("--person", "person", ("groups",)),
        ("--max-size", "max_size", ("groups",)),
        ("--observed-max-size-public", "observed_max_size_public", ("groups",)),
        ("--top-code", "top_code", ("groups",)),
        ("--region-totals-public", "region_totals_public", ("groups",)),
        ("--x", "x", ("points",)),
        ("--y", "y", ("points",)),
        ("--lon", "lon", ("points",)),
        ("--lat", "lat", ("points",)),
        ("--box", "box", ("points",)),
        ("--grid", "grid", ("points",)),
        ("--param", "param", ("points",)),
        ("--engine", "engine", ("tree",)),
        ("--scheduler", "scheduler", ("tree",)),
        ("--workers", "workers", ("tree",)),
        ("--checkpoint", "checkpoint", ("tree",)),
        ("--resume", "resume", ("tree",)),
        ("--constraints", "constraints", ("tree",)),
        ("--constraints-failsafe", "constraints_failsafe", ("tree",)),
    ))


def _given(args: argparse.Namespace, attr: str) -> bool:
    value = getattr(args, attr, None)
    if attr == "engine":
        return value not in (None, "serial")  # --engine serial is what every layout does
    return value not in (None, False, [], "")


def input_layout(args: argparse.Namespace) -> str:
    """``"groups"`` (``--unit``), ``"points"`` (``--x/--y``, ``--lon/--lat``) or ``"tree"``;
    refuses a command line that selects two layouts."""
    points = any(_given(args, a) for a in ("x", "y", "lon", "lat"))
    if _given(args, "unit") and points:
        raise CliError("give one input layout: --unit (group sizes) or --x/--y, --lon/--lat (location points), "
                       "not both")
    return "groups" if _given(args, "unit") else ("points" if points else "tree")


def check_layout_flags(args: argparse.Namespace, layout: str) -> None:
    """Refuse the first flag of another layout (it would be silently ignored)."""
    for flag, attr, layouts in _LAYOUT_FLAGS:
        if layout not in layouts and _given(args, attr):
            owners = " or the ".join(_OWNER[x] for x in sorted(layouts))
            raise CliError(f"{flag} does not apply to the {LAYOUT_TEXT[layout]}; drop it (it belongs to the "
                           f"{owners})")


def mechanisms_for(layout: str) -> list[str]:
    """The registered mechanisms that fit ``layout`` (third-party ones count as tree mechanisms)."""
    from hierdp.mechanisms import registry

    if layout == "points":
        return list(POINT_MECHANISMS)
    if layout == "groups":
        return list(GROUP_SIZE_MECHANISMS)
    builtin = set(POINT_MECHANISMS) | set(GROUP_SIZE_MECHANISMS) | set(OTHER_INPUT_MECHANISMS)
    return [n for n in registry.names() if n not in builtin]


def _layout_of_mechanism(name: str) -> str | None:
    if name in POINT_MECHANISMS:
        return "points"
    if name in GROUP_SIZE_MECHANISMS:
        return "groups"
    if name in OTHER_INPUT_MECHANISMS:
        return None
    return "tree"


def layout_label(name: str) -> str:
    """What ``hierdp mechanisms`` shows as a mechanism's input: ``trees``, ``group sizes``,
    ``points`` or ``Python API``."""
    own = _layout_of_mechanism(name)
    return {"tree": "trees", "groups": "group sizes", "points": "points", None: "Python API"}[own]


def check_mechanism_fits(name: str, layout: str, flag: str = "--mechanism") -> None:
    """Refuse a mechanism that does not release what ``layout`` builds, naming the ones that do."""
    own = _layout_of_mechanism(name)
    if own == layout:
        return
    where: Any = (f"it releases {_RELEASES[own]} ({_SELECT[own]})" if own is not None
                  else f"it takes {OTHER_INPUT_MECHANISMS[name]}")
    raise CliError(f"{flag} {name} does not release {_RELEASES[layout]}: {where}; with the {LAYOUT_TEXT[layout]} "
                   f"use one of {', '.join(mechanisms_for(layout))}")
