"""Query strategies of the Census-style TopDown: marginal query groups with exact budget shares.

A histogram has cells over attributes of sizes ``shape`` (e.g. 2 x 3 x 4 = 24 cells, C order). A
**query group** keeps some attributes, sums out the others and may *recode* some (group an
attribute's levels, e.g. HHGQ's 8 levels into household / institutional / non-institutional, the
DAS's ``hhinstlevels``): its matrix is the Kronecker product over the attributes of ``I`` (kept),
``1ᵀ`` (summed) or the recode's 0/1 matrix (paper 003 §2.3, e.g. CENRACE x VOTINGAGE =
I₆₃ ⊗ 1₂ᵀ ⊗ I₂). Every column of a query group has exactly one 1, so under bounded neighbours a
group's answers move by at most 2 in L1 and L2² (Lemma 4): each group is one unit of sensitivity,
and its share α of a geounit's budget is exact (the shares sum to exactly 1).

Shares may differ per geolevel (``level_shares``, as in the DAS's production strategies); a group
with share 0 at a geolevel is not measured there. :attr:`QueryStrategy.queries` is the strategy's
:class:`~hierdp.models.marginals.MarginalQueries`: the structure the per-parent solvers exploit.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np

from hierdp.mechanisms.base import MechanismParameterError
from hierdp.models.marginals import MarginalQueries
from hierdp.spines.core import SpineError, as_fraction

__all__ = ["QueryStrategy"]


def _exact_shares(raw: Mapping[str, Any], groups: Mapping[str, Any], where: str, zero_ok: bool) -> dict[str, Fraction]:
    if set(raw) - set(groups):
        raise MechanismParameterError(f"strategy: {where} names unknown group(s) {sorted(set(raw) - set(groups))}")
    if not zero_ok and set(raw) != set(groups):
        missing = sorted(set(groups) - set(raw))
        raise MechanismParameterError(f"strategy: shares and groups differ (e.g. {missing[0]!r})")
    try:
        shares = {g: as_fraction(raw.get(g, 0), f"share of {g!r}") for g in groups}
    except SpineError as exc:
        raise MechanismParameterError(f"strategy: {exc}") from None
    for g, a in shares.items():
        if a < 0 or (a == 0 and not zero_ok):
            raise MechanismParameterError(f"strategy: query group {g!r} has share {a} {where} (shares must be > 0)")
    total = sum(shares.values(), Fraction(0))
    if total != 1:
        raise MechanismParameterError(f"strategy: shares {where} must sum to exactly 1, got {total}")
    return shares


@dataclass(frozen=True)
class QueryStrategy:
    """Marginal query groups over a histogram of ``shape`` with exact budget shares.

    Args:
        shape: attribute sizes, e.g. ``(2, 3, 4)``.
        groups: name -> tuple of kept attribute indices (``()`` = the total; all = detailed).
        shares: name -> share of the geounit's budget (> 0, summing to exactly 1); floats are
            read as their decimal text, strings such as ``"1/6"`` exactly.
        attribute_names: optional names of the attributes (for labels).
        recodes: optional name -> {attribute index: label of each level} for groups that recode
            an attribute (neither kept nor summed), e.g. ``{"hhinstlevels": {0: (0, 1, 1, 1, 1, 2,
            2, 2)}}``; the attribute must not also be in the group's kept tuple.
        level_shares: optional geolevel name -> {group: share} (shares >= 0 summing to exactly
            1; a group missing or at 0 is not measured at that geolevel); geolevels not listed use
            ``shares``.
    """

    shape: tuple[int, ...]
    groups: Mapping[str, tuple[int, ...]]
    shares: Mapping[str, Any]
    attribute_names: tuple[str, ...] | None = None
    recodes: Mapping[str, Mapping[int, Sequence[int]]] | None = None
    level_shares: Mapping[str, Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        shape = tuple(int(s) for s in self.shape)
        if not shape or any(s < 1 for s in shape):
            raise MechanismParameterError(f"strategy: shape must be positive attribute sizes, got {self.shape!r}")
        object.__setattr__(self, "shape", shape)
        if not self.groups:
            raise MechanismParameterError("strategy: at least one query group is needed")
        groups = {}
        for name, keep in self.groups.items():
            k = tuple(sorted(int(a) for a in keep))
            if any(a < 0 or a >= len(shape) for a in k) or len(set(k)) != len(k):
                raise MechanismParameterError(f"strategy: group {name!r} keeps attributes {keep!r}, not in "
                                              f"0..{len(shape) - 1}")
            groups[str(name)] = k
        object.__setattr__(self, "groups", groups)
        recodes: dict[str, dict[int, tuple[int, ...]]] = {}
        for name, per_attr in (self.recodes or {}).items():
            if name not in groups:
                raise MechanismParameterError(f"strategy: recode of unknown group {name!r}")
            recodes[name] = {}
            for a, lab in per_attr.items():
                a = int(a)
                if not 0 <= a < len(shape) or a in groups[name]:
                    raise MechanismParameterError(f"strategy: group {name!r} recodes attribute {a}, which is out of "
                                                  "range or also kept")
                labels = tuple(int(v) for v in lab)
                if len(labels) != shape[a] or min(labels) < 0 or sorted(set(labels)) != list(range(max(labels) + 1)):
                    raise MechanismParameterError(f"strategy: group {name!r} recodes attribute {a} with labels "
                                                  f"{labels!r}: one label per level, 0..m-1, each used")
                recodes[name][a] = labels
        object.__setattr__(self, "recodes", recodes)
        object.__setattr__(self, "shares", _exact_shares(self.shares, groups, "", zero_ok=False))
        levels = {}
        for lev, raw in (self.level_shares or {}).items():
            levels[str(lev)] = _exact_shares(raw, groups, f"at geolevel {lev!r}", zero_ok=True)
        object.__setattr__(self, "level_shares", levels)
        object.__setattr__(self, "_queries", MarginalQueries(shape, [self._labels(g) for g in groups], list(groups)))
        for where, sh in [("", self.shares)] + [(f" at geolevel {lev!r}", v) for lev, v in levels.items()]:
            if not self.queries.determines_cells(np.array([float(sh[g]) for g in groups])):
                raise MechanismParameterError(f"strategy: the query groups{where} do not determine every cell (include "
                                              "the detailed group, or groups whose matrix has full column rank)")

    def _labels(self, name: str) -> list[np.ndarray]:
        keep = set(self.groups[name])
        rec = (self.recodes or {}).get(name, {})
        return [np.arange(n) if a in keep else np.asarray(rec[a]) if a in rec else np.zeros(n, np.int64)
                for a, n in enumerate(self.shape)]

    @property
    def queries(self) -> MarginalQueries:
        """Every group (in the order of ``groups``) as :class:`~hierdp.models.marginals.MarginalQueries`."""
        return object.__getattribute__(self, "_queries")

    def query_structure(self, names: Sequence[str]) -> MarginalQueries:
        """The :class:`~hierdp.models.marginals.MarginalQueries` of the named groups, in that order."""
        return MarginalQueries(self.shape, [self._labels(g) for g in names], list(names))

    def shares_at(self, level: str | None = None) -> dict[str, Fraction]:
        """The exact shares at a geolevel (its ``level_shares`` entry, else ``shares``)."""
        if level is not None and self.level_shares and str(level) in self.level_shares:
            return dict(self.level_shares[str(level)])
        return dict(self.shares)

    @classmethod
    def marginals(cls, shape: Sequence[int], groups: Mapping[str, Sequence[int]] | None = None,
                  shares: Mapping[str, Any] | None = None) -> QueryStrategy:
        """A strategy with the total, every one-way and two-way marginal and the detailed cells
        (default groups) and equal shares (default)."""
        shape = tuple(int(s) for s in shape)
        if groups is None:
            d = len(shape)
            groups = {"total": ()}
            if d > 1:  # with one attribute its marginal is the detailed query
                groups.update({f"m{a}": (a,) for a in range(d)})
            if d > 2:
                groups.update({f"m{a}{b}": (a, b) for a in range(d) for b in range(a + 1, d)})
            groups["detailed"] = tuple(range(d))
        if shares is None:
            shares = {g: Fraction(1, len(groups)) for g in groups}
        return cls(shape, {k: tuple(v) for k, v in groups.items()}, shares)

    @property
    def n_cells(self) -> int:
        """Number of histogram cells."""
        return int(np.prod(self.shape))

    def group_matrix(self, name: str) -> np.ndarray:
        """The 0/1 matrix of one query group (rows: its answers, columns: cells in C order)."""
        return self.queries.matrix(list(self.groups).index(name))

    def matrix(self) -> np.ndarray:
        """``W``: every group's matrix stacked (in the order of ``groups``)."""
        return np.vstack([self.group_matrix(g) for g in self.groups])

    @property
    def detailed(self) -> str | None:
        """The name of the detailed group (all attributes kept), if any."""
        full = tuple(range(len(self.shape)))
        return next((g for g, k in self.groups.items() if k == full), None)

    def describe(self) -> dict[str, Any]:
        """Plain-data description (for a release's parameters): groups, recodes, shares as text."""
        out: dict[str, Any] = {"shape": list(self.shape), "groups": {g: list(k) for g, k in self.groups.items()}}
        if self.recodes:
            out["recodes"] = {g: {str(a): list(v) for a, v in r.items()} for g, r in self.recodes.items()}
        out["shares"] = {g: str(v) for g, v in self.shares.items()}
        if self.level_shares:
            out["level_shares"] = {lev: {g: str(v) for g, v in sh.items() if v} for lev, sh in self.level_shares.items()}
        return out

    def cell_labels(self) -> np.ndarray:
        """One label per cell, e.g. ``"0|2|1"`` (or ``"sex=0|age=2|..."`` with attribute names)."""
        idx = np.array(list(np.ndindex(*self.shape)))
        names = self.attribute_names
        if names:
            return np.array(["|".join(f"{n}={v}" for n, v in zip(names, row, strict=False)) for row in idx], dtype=object)
        return np.array(["|".join(str(v) for v in row) for row in idx], dtype=object)
