"""The entries of a constraint set, as immutable data, and the checks every entry passes when stated.

A node is referred to as the tree names it:

* a name (``"IL/COOK"`` in a hierarchy built from level columns, ``"Turin"`` in one built from
  edges, ``"IT1->IT2"`` in an origin/destination tree);
* a tuple of level values from the first level below the root down (``("IL", "COOK")``), which a
  path-named tree joins with its separator (an O/D tree reads ``(origin, destination)``);
* a mapping of level columns to values (``{"state": "IL", "county": "COOK"}``), stored as
  :class:`ByLevels`.

Numbers are stored as Python ints when they are integral (so a set written to a file and read
back is equal to itself); NaN, infinities and booleans are refused when the entry is stated.
Whether the numbers fit the data (integers on integer counts) is checked when the set is resolved
against a tree (:mod:`hierdp.constraints.resolve`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from hierdp.constraints.errors import ConstraintError

__all__ = [
    "KINDS",
    "ByLevels",
    "CellRule",
    "Entry",
    "Invariant",
    "LinearRow",
    "NodeBounds",
    "NodeRef",
    "StructuralZero",
    "describe_entry",
    "entry_label",
    "node_label",
]

#: the kinds of entries, as written in files
KINDS = ("linear", "bounds", "zero", "invariant", "cell_rule")


@dataclass(frozen=True)
class ByLevels:
    """A node given by its level columns, coarse to fine: ``(("state", "IL"), ("county", "COOK"))``."""

    items: tuple[tuple[str, Hashable], ...]

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k}={v}" for k, v in self.items) + "}"


#: how an entry refers to a node: a name, a tuple of level values, or level columns
NodeRef = Hashable | ByLevels
#: how a histogram entry refers to a cell: a label, an index, or a tuple of attribute values
CellRef = Hashable


@dataclass(frozen=True)
class LinearRow:
    """``lower <= sum(coef * node) <= upper`` (one side may be None: unbounded).

    On histograms (one histogram of cells per node), ``cells`` makes every term read the sum of
    those cells of its node (without it, a term is the node's total)."""

    name: str
    terms: tuple[tuple[NodeRef, int | float], ...]
    lower: int | float | None = None
    upper: int | float | None = None
    where: str | None = None
    cells: tuple[CellRef, ...] | None = None
    kind = "linear"


@dataclass(frozen=True)
class NodeBounds:
    """``lower <= node <= upper`` (on histograms, of the sum of ``cells`` of the node, or of its total)."""

    name: str
    node: NodeRef
    lower: int | float | None = None
    upper: int | float | None = None
    where: str | None = None
    cells: tuple[CellRef, ...] | None = None
    kind = "bounds"


@dataclass(frozen=True)
class StructuralZero:
    """A node that is zero (no unit can be there), or, for histograms, given cells of a node."""

    name: str
    node: NodeRef
    cells: tuple[CellRef, ...] | None = None
    where: str | None = None
    kind = "zero"


@dataclass(frozen=True)
class Invariant:
    """A node's count (or, for histograms, the sum of given cells of it) released exactly as ``value``.

    An invariant is published as it is, outside any DP guarantee: state it only for a value that is
    public anyway (the release lists it among its public constraints).
    """

    name: str
    node: NodeRef
    value: int | float
    cells: tuple[CellRef, ...] | None = None
    where: str | None = None
    kind = "invariant"


@dataclass(frozen=True)
class CellRule:
    """A row over histogram cells, ``lower <= sum(coef * cell) <= upper``, in every geounit of the
    given levels (or of the given nodes): the Census DAS's edit constraints ("persons in group
    quarters >= group-quarters facilities"). Histogram mechanisms apply it (census_topdown, wave 2);
    a tree with one count per node refuses it."""

    name: str
    terms: tuple[tuple[CellRef, int | float], ...]
    lower: int | float | None = None
    upper: int | float | None = None
    levels: tuple[str, ...] | None = None
    nodes: tuple[NodeRef, ...] | None = None
    where: str | None = None
    kind = "cell_rule"


Entry = LinearRow | NodeBounds | StructuralZero | Invariant | CellRule


# ---------------------------------------------------------------------------------- labels
def node_label(ref: NodeRef) -> str:
    """A node reference as the user wrote it (for messages)."""
    if isinstance(ref, tuple):
        return "(" + ", ".join(map(str, ref)) + ")"
    return str(ref)


def entry_label(entry: Entry) -> str:
    """``'name' (line 3)`` / ``'name'``: how messages name an entry."""
    return f"{entry.name!r}" + (f" ({entry.where})" if entry.where else "")


# ---------------------------------------------------------------------------------- checks
def number(x: Any, what: str) -> int | float:
    """A finite real number; integral values become ``int`` (exactly, up to 2^53)."""
    if isinstance(x, bool) or not isinstance(x, (Real, Integral)):
        raise ConstraintError(f"{what} must be a number, got {x!r}")
    if isinstance(x, Integral):
        return int(x)
    v = float(x)
    if math.isnan(v):
        raise ConstraintError(f"{what} is NaN (omit a bound to leave that side open)")
    if math.isinf(v):
        raise ConstraintError(f"{what} is infinite (omit a bound to leave that side open)")
    if v.is_integer() and abs(v) < 2.0 ** 53:
        return int(v)
    return v


def optional_number(x: Any, what: str) -> int | float | None:
    """None stays None (an open side); anything else as :func:`number`."""
    return None if x is None else number(x, what)


def sides(lower: Any, upper: Any, label: str, *, need_one: bool = True) -> tuple[int | float | None,
                                                                                 int | float | None]:
    """Checked ``(lower, upper)``: numbers or None, ``lower <= upper``, at least one given."""
    lo = optional_number(lower, f"{label}: lower bound")
    hi = optional_number(upper, f"{label}: upper bound")
    if need_one and lo is None and hi is None:
        raise ConstraintError(f"{label}: give a lower or an upper bound (or both)")
    if lo is not None and hi is not None and lo > hi:
        raise ConstraintError(f"{label}: lower bound {lo} > upper bound {hi}")
    return lo, hi


def node_ref(ref: Any, label: str) -> NodeRef:
    """A node reference in canonical form: a name, a tuple path, or :class:`ByLevels`."""
    if isinstance(ref, ByLevels):
        return ref
    if isinstance(ref, Mapping):
        if not ref:
            raise ConstraintError(f"{label}: a node given by level columns needs at least one column")
        items = []
        for k, v in ref.items():
            if not isinstance(k, str):
                raise ConstraintError(f"{label}: level column names must be strings, got {k!r}")
            items.append((k, _scalar(v, label)))
        return ByLevels(tuple(items))
    if isinstance(ref, (list, tuple)):
        if not ref:
            raise ConstraintError(f"{label}: an empty tuple names no node")
        return tuple(_scalar(v, label) for v in ref)
    return _scalar(ref, label)


def _scalar(v: Any, label: str) -> Hashable:
    """A name part: str, int (numpy scalars become Python ones); no None, NaN, bool."""
    if v is None or isinstance(v, bool):
        raise ConstraintError(f"{label}: {v!r} is not a node name")
    if isinstance(v, float) and math.isnan(v):
        raise ConstraintError(f"{label}: NaN is not a node name")
    if hasattr(v, "item") and callable(v.item) and not isinstance(v, (str, bytes)):
        v = v.item()  # numpy scalar
    if isinstance(v, (list, dict, set)):
        raise ConstraintError(f"{label}: {v!r} is not a node name")
    try:
        hash(v)
    except TypeError:
        raise ConstraintError(f"{label}: {v!r} is not a node name (not hashable)") from None
    return v


def terms_of(coeffs: Any, label: str, ref: Any = node_ref) -> tuple[tuple[Any, int | float], ...]:
    """``{node: coef}`` or ``[(node, coef), ...]`` as a tuple of checked pairs (no zero coefficient,
    no node twice)."""
    if isinstance(coeffs, Mapping):
        pairs: Iterable[Any] = coeffs.items()
    elif isinstance(coeffs, (list, tuple)):
        pairs = coeffs
    else:
        raise ConstraintError(f"{label}: terms must be a mapping {{node: coefficient}} or a list of "
                              f"(node, coefficient) pairs, got {type(coeffs).__name__}")
    out: list[tuple[Any, int | float]] = []
    seen: set[Any] = set()
    for pair in pairs:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ConstraintError(f"{label}: each term is a (node, coefficient) pair, got {pair!r}")
        node, coef = ref(pair[0], label), number(pair[1], f"{label}: coefficient of {node_label(pair[0])}")
        if coef == 0:
            raise ConstraintError(f"{label}: coefficient of {node_label(node)} is 0 (drop the term)")
        if node in seen:
            raise ConstraintError(f"{label}: {node_label(node)} appears twice (give one coefficient per node)")
        seen.add(node)
        out.append((node, coef))
    if not out:
        raise ConstraintError(f"{label}: a row needs at least one term")
    return tuple(out)


def cells_of(cells: Any, label: str) -> tuple[CellRef, ...] | None:
    """A non-empty tuple of cell references, or None (every cell / the node's total)."""
    if cells is None:
        return None
    if isinstance(cells, (str, bytes)) or not isinstance(cells, Sequence):
        raise ConstraintError(f"{label}: cells must be a list of cell labels, got {cells!r}")
    out = tuple(node_ref(c, label) for c in cells)
    if not out:
        raise ConstraintError(f"{label}: an empty list of cells names no cell")
    if len(set(out)) != len(out):
        raise ConstraintError(f"{label}: a cell is listed twice")
    return out


def levels_of(levels: Any, label: str) -> tuple[str, ...] | None:
    """A non-empty tuple of level names, or None."""
    if levels is None:
        return None
    if isinstance(levels, str):
        levels = [levels]
    if not isinstance(levels, Sequence) or not levels or not all(isinstance(x, str) for x in levels):
        raise ConstraintError(f"{label}: levels must be a non-empty list of level names, got {levels!r}")
    return tuple(levels)


def describe_entry(e: Entry) -> str:
    """One line: ``'cap': IL/COOK + IN/LAKE <= 5850000``."""
    def side(lo: Any, hi: Any, expr: str) -> str:
        if lo is not None and hi is not None:
            return f"{expr} = {lo}" if lo == hi else f"{lo} <= {expr} <= {hi}"
        return f"{expr} >= {lo}" if lo is not None else f"{expr} <= {hi}"

    def expr_of(terms: Any) -> str:
        out = []
        for i, (node, coef) in enumerate(terms):
            sign = "-" if coef < 0 else "+"
            mag = abs(coef)
            term = node_label(node) if mag == 1 else f"{mag}*{node_label(node)}"
            out.append((("-" if sign == "-" else "") if i == 0 else f" {sign} ") + term)
        return "".join(out)

    def in_cells(cells: Any) -> str:
        return f" in cells {list(cells)}" if cells else ""

    if isinstance(e, LinearRow):
        body = side(e.lower, e.upper, expr_of(e.terms)) + in_cells(e.cells)
    elif isinstance(e, NodeBounds):
        body = side(e.lower, e.upper, node_label(e.node)) + in_cells(e.cells)
    elif isinstance(e, StructuralZero):
        body = f"{node_label(e.node)} = 0" + (f" in cells {list(e.cells)}" if e.cells else "")
    elif isinstance(e, Invariant):
        body = f"{node_label(e.node)} = {e.value} (invariant" + (f" of cells {list(e.cells)})" if e.cells else ")")
    else:
        where = f"levels {list(e.levels)}" if e.levels else f"{len(e.nodes or ())} nodes"
        body = side(e.lower, e.upper, expr_of(e.terms)) + f" in every geounit of {where}"
    return f"{e.name!r}: {body}"
