"""Query strategies of the Census-style TopDown: marginal query groups with exact budget shares.

A histogram has cells over attributes of sizes ``shape`` (e.g. 2 x 3 x 4 = 24 cells, C order). A
**query group** keeps some attributes and sums out the others: its matrix is the Kronecker product
of ``I`` (kept) and ``1ᵀ`` (summed) over the attributes (paper 003 §2.3, e.g. CENRACE x VOTINGAGE
= I₆₃ ⊗ 1₂ᵀ ⊗ I₂). Every column of a query group has exactly one 1, so under bounded neighbours a
group's answers move by at most 2 in L1 and L2² (Lemma 4): each group is one unit of sensitivity,
and its share α of a geounit's budget is exact (the shares sum to exactly 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np

from hierdp.mechanisms.base import MechanismParameterError
from hierdp.spines.core import SpineError, as_fraction

__all__ = ["QueryStrategy"]


@dataclass(frozen=True)
class QueryStrategy:
    """Marginal query groups over a histogram of ``shape`` with exact budget shares.

    Args:
        shape: attribute sizes, e.g. ``(2, 3, 4)``.
        groups: name -> tuple of kept attribute indices (``()`` = the total; all = detailed).
        shares: name -> share of the geounit's budget (> 0, summing to exactly 1); floats are
            read as their decimal text, strings such as ``"1/6"`` exactly.
        attribute_names: optional names of the attributes (for labels).
    """

    shape: tuple[int, ...]
    groups: Mapping[str, tuple[int, ...]]
    shares: Mapping[str, Any]
    attribute_names: tuple[str, ...] | None = None

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
        if set(self.shares) != set(groups):
            missing = sorted(set(groups) - set(self.shares)) or sorted(set(self.shares) - set(groups))
            raise MechanismParameterError(f"strategy: shares and groups differ (e.g. {missing[0]!r})")
        try:
            shares = {g: as_fraction(self.shares[g], f"share of {g!r}") for g in groups}
        except SpineError as exc:
            raise MechanismParameterError(f"strategy: {exc}") from None
        for g, a in shares.items():
            if a <= 0:
                raise MechanismParameterError(f"strategy: query group {g!r} has share {a} (shares must be > 0)")
        total = sum(shares.values(), Fraction(0))
        if total != 1:
            raise MechanismParameterError(f"strategy: shares must sum to exactly 1, got {total}")
        object.__setattr__(self, "shares", shares)
        W = self.matrix()
        if np.linalg.matrix_rank(W) < self.n_cells:
            raise MechanismParameterError("strategy: the query groups do not determine every cell (include the "
                                          "detailed group, or groups whose matrix has full column rank)")

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
        keep = self.groups[name]
        mat = np.ones((1, 1))
        for a, s in enumerate(self.shape):
            mat = np.kron(mat, np.eye(s) if a in keep else np.ones((1, s)))
        return mat

    def matrix(self) -> np.ndarray:
        """``W``: every group's matrix stacked (in the order of ``groups``)."""
        return np.vstack([self.group_matrix(g) for g in self.groups])

    @property
    def detailed(self) -> str | None:
        """The name of the detailed group (all attributes kept), if any."""
        full = tuple(range(len(self.shape)))
        return next((g for g, k in self.groups.items() if k == full), None)

    def cell_labels(self) -> np.ndarray:
        """One label per cell, e.g. ``"0|2|1"`` (or ``"sex=0|age=2|..."`` with attribute names)."""
        idx = np.array(list(np.ndindex(*self.shape)))
        names = self.attribute_names
        if names:
            return np.array(["|".join(f"{n}={v}" for n, v in zip(names, row)) for row in idx], dtype=object)
        return np.array(["|".join(str(v) for v in row) for row in idx], dtype=object)
