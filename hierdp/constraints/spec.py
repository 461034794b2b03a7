"""``hierdp.Constraints``: a declarative constraint set over node names (and histogram cells).

A set is data: it names nodes as the tree names them and says nothing about how a mechanism
honours it. :meth:`Constraints.resolve` binds it to a tree (on public structure only) for the
TopDown family; histogram mechanisms read the cell entries (:attr:`Constraints.cell_rules`, ...).

>>> c = Constraints()
>>> c.add_linear({"IL/COOK": 1, "IN/LAKE": 1}, upper=5_850_000, name="cook+lake")   # doctest: +ELLIPSIS
Constraints(1 entry: 1 linear)
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hierdp.constraints.entries import (
    CellRule,
    Entry,
    Invariant,
    LinearRow,
    NodeBounds,
    StructuralZero,
    cells_of,
    levels_of,
    node_ref,
    number,
    sides,
    terms_of,
)
from hierdp.constraints.errors import ConstraintError
from hierdp.constraints.fileio import read_entries, write_entries
from hierdp.constraints.records import digest

if TYPE_CHECKING:
    from hierdp.constraints.resolve import ResolvedConstraints

__all__ = ["Constraints", "as_constraints", "read_constraints", "write_constraints"]


class Constraints:
    """A constraint set: linear rows, node bounds, structural zeros, invariants, and rows over
    histogram cells, each entry named (names are unique; a default name is given when omitted).

    Build it in Python (every ``add_*`` returns the set, so calls chain) or read it from a file
    (:meth:`read`; JSON Lines, see docs/constraints.md), write it back with :meth:`write`.
    Entries are checked when they are stated (NaN, infinite or boolean numbers, ``lower > upper``,
    a row without a finite side, a zero coefficient, a node twice in one row, a duplicate name);
    nodes and levels are checked against a tree by :meth:`resolve`.

    Args:
        entries: entries to start from (e.g. another set's).
    """

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._entries: list[Entry] = []
        self._where: dict[str, str | None] = {}
        for e in entries:
            self.add(e)

    # ------------------------------------------------------------------ building
    def add(self, entry: Entry) -> Constraints:
        """Append one entry (refused if its name is taken)."""
        if not isinstance(entry, (LinearRow, NodeBounds, StructuralZero, Invariant, CellRule)):
            raise TypeError(f"not a constraint entry: {entry!r}")
        if entry.name in self._where:
            first = self._where[entry.name]
            raise ConstraintError(f"duplicate name {entry.name!r}" + (f" ({entry.where})" if entry.where else "")
                                  + (f": first used at {first}" if first else ": names must be unique"))
        self._where[entry.name] = entry.where
        self._entries.append(entry)
        return self

    def _name(self, name: str | None, kind: str) -> str:
        if name is None:
            i = len(self._entries) + 1
            while f"{kind} {i}" in self._where:  # a default name never collides with a given one
                i += 1
            return f"{kind} {i}"
        if not isinstance(name, str) or not name:
            raise ConstraintError(f"name must be a non-empty string, got {name!r}")
        return name

    def add_linear(self, coeffs: Mapping[Any, Any] | Sequence[tuple[Any, Any]], *, lower: float | None = None,
                   upper: float | None = None, cells: Sequence[Any] | None = None,
                   name: str | None = None) -> Constraints:
        """``lower <= sum(coef * node) <= upper`` over named nodes of any levels.

        ``coeffs`` is ``{node: coefficient}`` or a list of ``(node, coefficient)`` pairs (use the
        list when a node is given by level columns, a mapping). TopDown applies the row when the
        deepest level among its nodes is solved; nodes of coarser levels are then constants. On
        histograms, ``cells`` makes every term the sum of those cells of its node ("size-1
        households in A and B at most N": ``add_linear({"A": 1, "B": 1}, cells=[1], upper=N)``).
        """
        name = self._name(name, "linear")
        label = f"linear {name!r}"
        lo, hi = sides(lower, upper, label)
        return self.add(LinearRow(name, terms_of(coeffs, label), lo, hi, cells=cells_of(cells, label)))

    def add_bounds(self, node: Any, *, lower: float | None = None, upper: float | None = None,
                   cells: Sequence[Any] | None = None, name: str | None = None) -> Constraints:
        """``lower <= node <= upper`` (bounds of one node; several bounds of a node intersect). On
        histograms, of the sum of the node's ``cells`` (without ``cells``: of its total)."""
        name = self._name(name, "bounds")
        label = f"bounds {name!r}"
        lo, hi = sides(lower, upper, label)
        return self.add(NodeBounds(name, node_ref(node, label), lo, hi, cells=cells_of(cells, label)))

    def add_zero(self, node: Any, *, cells: Sequence[Any] | None = None, name: str | None = None) -> Constraints:
        """A structural zero: the node is 0 (its whole subtree too), or, for histograms, the given
        ``cells`` of the node are 0."""
        name = self._name(name, "zero")
        label = f"zero {name!r}"
        return self.add(StructuralZero(name, node_ref(node, label), cells_of(cells, label)))

    def add_invariant(self, node: Any, value: float, *, cells: Sequence[Any] | None = None,
                      name: str | None = None) -> Constraints:
        """The node's count (or, for histograms, the sum of ``cells`` of it) is exactly ``value``.

        An invariant is released exactly, outside any DP guarantee: state only values that are
        public anyway (as the Census Bureau's state totals are).
        """
        name = self._name(name, "invariant")
        label = f"invariant {name!r}"
        return self.add(Invariant(name, node_ref(node, label), number(value, f"{label}: value"),
                                  cells_of(cells, label)))

    def add_cell_rule(self, coeffs: Mapping[Any, Any] | Sequence[tuple[Any, Any]], *, lower: float | None = None,
                      upper: float | None = None, levels: str | Sequence[str] | None = None,
                      nodes: Sequence[Any] | None = None, name: str | None = None) -> Constraints:
        """A row over histogram cells in every geounit of ``levels`` (or of the listed ``nodes``):
        ``lower <= sum(coef * cell) <= upper`` (the DAS edit constraints, e.g.
        ``{"gq_persons": 1, "gq_facilities": -1}, lower=0``). For histogram mechanisms."""
        name = self._name(name, "cell_rule")
        label = f"cell_rule {name!r}"
        lo, hi = sides(lower, upper, label)
        lv = levels_of(levels, label)
        nd = None if nodes is None else tuple(node_ref(n, label) for n in nodes)
        if (lv is None) == (nd is None):
            raise ConstraintError(f"{label}: give the geounits it holds in, either levels= or nodes= (one of them)")
        if nd is not None and not nd:
            raise ConstraintError(f"{label}: nodes= is empty")
        return self.add(CellRule(name, terms_of(coeffs, label), lo, hi, lv, nd))

    # ------------------------------------------------------------------ reading
    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Constraints):
            return NotImplemented
        return [_key(e) for e in self] == [_key(e) for e in other]

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __getitem__(self, name: str) -> Entry:
        for e in self._entries:
            if e.name == name:
                return e
        raise KeyError(f"no entry named {name!r}")

    @property
    def entries(self) -> tuple[Entry, ...]:
        """Every entry, in the order stated."""
        return tuple(self._entries)

    def of_kind(self, kind: str) -> tuple[Entry, ...]:
        """The entries of one kind (``"linear"``, ``"bounds"``, ``"zero"``, ``"invariant"``, ``"cell_rule"``)."""
        return tuple(e for e in self._entries if e.kind == kind)

    @property
    def cell_rules(self) -> tuple[CellRule, ...]:
        """The rows over histogram cells (for histogram mechanisms)."""
        return tuple(e for e in self._entries if isinstance(e, CellRule))

    @property
    def has_cells(self) -> bool:
        """True when some entry is about histogram cells (a cell rule, or cells= on a zero / invariant)."""
        return any(isinstance(e, CellRule) or getattr(e, "cells", None) is not None for e in self._entries)

    def digest(self) -> str:
        """SHA-256 of the canonical records (stable across runs, files and Python versions)."""
        return digest(self._entries)

    def summary(self) -> str:
        """``4 entries: 2 linear, 1 bounds, 1 zero; sha256 0123abcd...``."""
        counts = Counter(e.kind for e in self._entries)
        parts = ", ".join(f"{v} {k}" for k, v in counts.items())
        return f"{_entries(len(self))}" + (f": {parts}" if parts else "") + f"; sha256 {self.digest()[:16]}"

    def __repr__(self) -> str:
        counts = Counter(e.kind for e in self._entries)
        return f"Constraints({_entries(len(self))}" + (": " + ", ".join(f"{v} {k}" for k, v in counts.items())
                                                     if counts else "") + ")"

    # ------------------------------------------------------------------ files
    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Constraints:
        """Read a constraint file (JSON Lines; errors name the line)."""
        return read_constraints(path)

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write this set as JSON Lines (reading it back gives an equal set)."""
        return write_constraints(self, path)

    # ------------------------------------------------------------------ binding
    def resolve(self, tree: Any, *, root_public: bool = True, check: bool = True,
                time_limit: float | None = 60.0, solver: str = "auto") -> ResolvedConstraints:
        """Bind the set to ``tree`` (a :class:`~hierdp.hierarchy.Hierarchy` or any TopDown tree) on
        its public structure only, carry implied constraints up to coarser levels, and (``check``)
        verify that the whole set can hold before any noise is drawn.

        Args:
            tree: the tree whose nodes the entries name.
            root_public: the root count is public (bounded DP): the feasibility check fixes it.
            check: run the feasibility check (a MIP through the solver layer).
            time_limit: seconds for the feasibility check.
            solver: solver plug-in of the feasibility check (``"auto"``: an exact general solver).

        Raises:
            ConstraintError: an unknown node or level, a non-integer number on integer counts, ...
            ConstraintsInfeasible: the set cannot hold on this tree (names an irreducible subset).
        """
        from hierdp.constraints.resolve import resolve

        return resolve(self, tree, root_public=root_public, check=check, time_limit=time_limit, solver=solver)


def _entries(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def _key(e: Entry) -> tuple[Any, ...]:
    """An entry without its ``where`` (two sets are equal when their entries are, wherever read from)."""
    from hierdp.constraints.records import record_of

    rec = record_of(e)
    return tuple(sorted((k, repr(v)) for k, v in rec.items()))


def read_constraints(path: str | os.PathLike[str]) -> Constraints:
    """Read a constraint file (JSON Lines; see docs/constraints.md).

    Raises:
        ConstraintError: the file is missing or unreadable, or a line is bad (named: ``line 3: ...``),
            a name is used twice (``duplicate name 'x' (line 3): first used at line 1``).
    """
    return Constraints(read_entries(path))


def write_constraints(constraints: Constraints, path: str | os.PathLike[str]) -> Path:
    """Write ``constraints`` as JSON Lines (a header line, then one entry per line); returns the path.
    Reading the file back gives an equal set (:func:`read_constraints`)."""
    return write_entries(constraints, path)


def as_constraints(value: Any) -> Constraints | None:
    """A mechanism's ``constraints=`` argument as a set: a :class:`Constraints`, the path of a
    constraint file (read now: a bad file is refused before any data is read), or None; an empty
    set is None (nothing to honour).

    Raises:
        TypeError: anything else. ConstraintError: a bad file (naming its line).
    """
    if value is None:
        return None
    if not isinstance(value, Constraints):
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"constraints must be a hierdp.Constraints or the path of a constraint file, got "
                            f"{type(value).__name__}")
        value = Constraints.read(value)
    return value if len(value) else None
