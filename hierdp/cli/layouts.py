"""The input layouts of ``hierdp release`` and ``hierdp compare``: which one a command line
describes (decided once, by :func:`decide_layout`), which flags belong to it, and which registered
mechanisms fit it - read from the mechanism registry's metadata
(:class:`hierdp.mechanisms.registry.MechanismInfo`), never from a list of names.

* **tree** (trips, the level layout, ``--levels``): a hierarchy of counts; every mechanism whose
  input is ``"tree"``;
* **groups** (``--unit``, paper 001): a count-of-counts hierarchy; input ``"group_sizes"``;
* **points** (``--x/--y`` or ``--lon/--lat``, paper 002): a grid of location points; input
  ``"points"``.

Mechanisms whose input no layout builds (spine histograms, person-level frames) are for the Python
API. A flag of one layout given with another is refused (it would be silently ignored otherwise),
and so is a mechanism that does not release what the layout builds - before any input is read.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from hierdp.cli.common import split_columns
from hierdp.cli.io import CliError

__all__ = [
    "LAYOUT_INPUT",
    "LAYOUT_TEXT",
    "Layout",
    "check_layout_flags",
    "check_mechanism_fits",
    "check_solver_flags",
    "decide_layout",
    "default_mechanism",
    "input_label",
    "mechanisms_for",
]

#: the registry's input kind each layout builds
LAYOUT_INPUT = {"tree": "tree", "groups": "group_sizes", "points": "points"}
#: the mechanism each layout uses when none is named
_DEFAULT = {"tree": "inftda", "groups": "pgsr_mdp", "points": "htf"}

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
#: what ``hierdp mechanisms`` shows as the input of each kind
_LABEL = {"tree": "trees", "group_sizes": "group sizes", "points": "points"}

# (flag, attribute, layouts that take it); a flag counts as given when its value is not the default
_LAYOUT_FLAGS: tuple[tuple[str, str, frozenset[str]], ...] = tuple(
    (flag, attr, frozenset(layouts)) for flag, attr, layouts in (
        ("--geo", "geo", ("tree", "groups")),
        ("--geo-levels", "geo_levels", ("tree",)),
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
        ("--constraints", "constraints", ("tree", "groups")),
        ("--constraints-failsafe", "constraints_failsafe", ("tree", "groups")),
        ("--engine", "engine", ("tree",)),
        ("--scheduler", "scheduler", ("tree",)),
        ("--workers", "workers", ("tree",)),
        ("--checkpoint", "checkpoint", ("tree",)),
        ("--resume", "resume", ("tree",)),
    ))


@dataclass(frozen=True)
class Layout:
    """The input layout a command line describes.

    Attributes:
        kind: ``"tree"``, ``"groups"`` or ``"points"``.
        shape: for trees, ``"trips"``, ``"levels-od"`` (paper 000's level layout) or
            ``"levels"`` (level columns); ``None`` otherwise.
    """

    kind: str
    shape: str | None = None

    @property
    def input(self) -> str:
        """The registry's input kind the layout builds."""
        return LAYOUT_INPUT[self.kind]


def _given(args: argparse.Namespace, attr: str) -> bool:
    value = getattr(args, attr, None)
    if attr == "engine":
        return value not in (None, "serial")  # --engine serial is what every layout does
    return value not in (None, False, [], "")


def _tree_shape(args: argparse.Namespace) -> str:
    """``"trips"``, ``"levels-od"`` or ``"levels"``; refuses incomplete or mixed tree layouts."""
    trips = bool(getattr(args, "origin", None) or getattr(args, "destination", None))
    od = bool(getattr(args, "origin_levels", None) or getattr(args, "destination_levels", None))
    if trips and od:
        raise CliError("give either --origin/--destination (trips) or --origin-levels/--destination-levels "
                       "(level layout), not both")
    if (trips or od) and getattr(args, "levels", None):
        raise CliError("--levels names the input's level columns (the --levels layout); with trips or the level "
                       "layout name the columns of the --geo geography with --geo-levels")
    if trips:
        if not (args.origin and args.destination):
            raise CliError("trips need both --origin and --destination")
        if not args.geo:
            raise CliError("trips need a geography file: --geo GEO.csv (one column per level, coarse to fine)")
        shape = "trips"
    elif od:
        if not (args.origin_levels and args.destination_levels):
            raise CliError("the level layout needs both --origin-levels and --destination-levels")
        shape = "levels-od"
    elif getattr(args, "levels", None):
        if getattr(args, "geo_levels", None):
            raise CliError("--geo-levels names the columns of a trips or level-layout geography; with --levels the "
                           "--geo file has the same level columns as the input")
        if args.destination_geo:
            raise CliError("--destination-geo applies to trips and the level layout, not to --levels")
        shape = "levels"
    else:
        raise CliError("say what the input is: --origin/--destination with --geo (trips), "
                       "--origin-levels/--destination-levels (level layout), or --levels (counts)")
    if args.count:
        ids = split_columns(args.levels) + [c for c in (args.origin, args.destination) if c] \
            + split_columns(args.origin_levels) + split_columns(args.destination_levels)
        if args.count in ids:
            raise CliError(f"--count {args.count!r} is also a level column (or the origin or destination column); the "
                           "count column holds numbers, those columns identifiers")
    return shape


def decide_layout(args: argparse.Namespace) -> Layout:
    """The layout the command line describes, decided once: ``--unit`` (group sizes), ``--x/--y``
    or ``--lon/--lat`` (points), else a tree (trips, the level layout or ``--levels``). Refuses a
    command line that selects two layouts, an incomplete tree layout, and flags of another layout."""
    points = any(_given(args, a) for a in ("x", "y", "lon", "lat"))
    if _given(args, "unit") and points:
        raise CliError("give one input layout: --unit (group sizes) or --x/--y, --lon/--lat (location points), "
                       "not both")
    kind = "groups" if _given(args, "unit") else ("points" if points else "tree")
    check_layout_flags(args, kind)
    return Layout(kind, _tree_shape(args) if kind == "tree" else None)


def check_layout_flags(args: argparse.Namespace, layout: str) -> None:
    """Refuse the first flag of another layout (it would be silently ignored)."""
    for flag, attr, layouts in _LAYOUT_FLAGS:
        if layout not in layouts and _given(args, attr):
            owners = " or the ".join(_OWNER[x] for x in sorted(layouts))
            raise CliError(f"{flag} does not apply to the {LAYOUT_TEXT[layout]}; drop it (it belongs to the "
                           f"{owners})")


def mechanisms_for(layout: str) -> list[str]:
    """The registered mechanisms that fit ``layout`` (their registered input is what it builds)."""
    from hierdp.mechanisms import registry

    return registry.names(input=LAYOUT_INPUT[layout])


def default_mechanism(layout: str) -> str:
    """The mechanism a layout uses when ``--mechanism`` is not given."""
    return _DEFAULT[layout]


def _layout_of_input(kind: str) -> str | None:
    return next((lay for lay, inp in LAYOUT_INPUT.items() if inp == kind), None)


def input_label(name: str) -> str:
    """What ``hierdp mechanisms`` shows as a mechanism's input: ``trees``, ``group sizes``,
    ``points``, or ``Python API`` for inputs no layout builds."""
    from hierdp.mechanisms import registry

    return _LABEL.get(registry.info(name).input, "Python API")


def check_mechanism_fits(name: str, layout: str, flag: str = "--mechanism") -> None:
    """Refuse a mechanism that does not release what ``layout`` builds, naming the ones that do."""
    from hierdp.mechanisms import registry

    meta = registry.info(name)
    own = _layout_of_input(meta.input)
    if own == layout:
        return
    where = (f"it releases {_RELEASES[own]} ({_SELECT[own]})" if own is not None
             else f"it takes {meta.input_text} (Python API)")
    raise CliError(f"{flag} {name} does not release {_RELEASES[layout]}: {where}; with the {LAYOUT_TEXT[layout]} "
                   f"use one of {', '.join(mechanisms_for(layout))}")


def check_solver_flags(args: argparse.Namespace, name: str) -> None:
    """Refuse ``--solver`` / ``--time-limit`` for a mechanism without a solver step (they would be
    ignored), naming the mechanisms of the same input that take them."""
    from hierdp.mechanisms import registry

    meta = registry.info(name)
    if meta.takes_solver:
        return
    for flag, value in (("--solver", getattr(args, "solver", None)), ("--time-limit", getattr(args, "time_limit", None))):
        if value is not None:
            fitting = [n for n in registry.names(input=meta.input) if registry.info(n).takes_solver]
            raise CliError(f"{flag} does not apply to --mechanism {name}, which has no solver step; drop {flag} "
                           f"(mechanisms with a solver step for the same input: {', '.join(fitting) or 'none'})")
