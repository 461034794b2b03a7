"""Spatial data for paper 002 (HTF): points -> an N x M frequency matrix over a bounding box.

A :class:`SpatialDomain` is the public part of a spatial release: the bounding box
``(x_min, x_max, y_min, y_max)`` and the grid shape ``(rows, cols)``. Rows follow y (row 0 holds the
lowest y), columns follow x, so ``counts[i, j]`` is the number of points in the cell whose lower-left
corner is ``(x_min + j * dx, y_min + i * dy)``. Cells are half-open ``[x0, x1) x [y0, y1)``, except
the last row and column, which also hold the points on the box's upper edges.

A :class:`SpatialGrid` holds the int64 frequency matrix, its domain, and the 2-D prefix sums that
answer any number of cell-aligned rectangle counts at once (:meth:`SpatialGrid.rect_count`).

The domain is public input (the same rule as :mod:`hierdp.privacy.domain`): a box the caller gives
is *declared*; a box computed from the points' own extremes is *observed* - it moves when one point
at the edge is added or removed - and every mechanism refuses it unless the caller states that it
is public (``observed_domain_public=True``), which the release then says in its guarantee.

Bad input is refused before anything is built, with the culprit named: NaN or infinite
coordinates, points outside an explicit box, no points, non-positive or non-integer grid sizes,
an empty or inverted box, negative or non-integer point weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any
from collections.abc import Sequence

import numpy as np

from hierdp.hierarchy.counts import checked_total
from hierdp.hierarchy.errors import CountError, HierarchyError
from hierdp.privacy.disclosure import quote_private

__all__ = [
    "OBSERVED_BOX_ASSUMPTION",
    "SpatialDataError",
    "SpatialDomain",
    "SpatialGrid",
    "prefix_sums_2d",
    "rect_sums",
]

#: what a release says when the box was read off the data and the user declared it public
OBSERVED_BOX_ASSUMPTION = ("the bounding box {box} was derived from the points' own extremes and is assumed "
                           "public (declared by the user)")


class SpatialDataError(HierarchyError):
    """Malformed spatial input: coordinates, box, grid or weights (the message names the culprit)."""


def _check_grid_size(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (Integral, Real)):
        raise SpatialDataError(f"{name} must be a positive integer number of cells, got {value!r}")
    f = float(value)
    if not (math.isfinite(f) and f.is_integer() and f >= 1):
        raise SpatialDataError(f"{name} must be a positive integer number of cells, got {value!r}")
    return int(f)


@dataclass(frozen=True)
class SpatialDomain:
    """The public bounding box and grid of a spatial release.

    Attributes:
        x_min, x_max, y_min, y_max: the box (``x_min < x_max``, ``y_min < y_max``, finite).
        rows, cols: grid shape (cells along y and along x).
    """

    x_min: float
    x_max: float
    y_min: float
    y_max: float
    rows: int
    cols: int

    def __post_init__(self) -> None:
        for name in ("x_min", "x_max", "y_min", "y_max"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (Real, np.floating, np.integer)) or not math.isfinite(float(v)):
                raise SpatialDataError(f"box: {name} must be a finite number, got {v!r}")
            object.__setattr__(self, name, float(v))
        if not self.x_min < self.x_max:
            raise SpatialDataError(f"box: x_min {self.x_min} must be below x_max {self.x_max}")
        if not self.y_min < self.y_max:
            raise SpatialDataError(f"box: y_min {self.y_min} must be below y_max {self.y_max}")
        object.__setattr__(self, "rows", _check_grid_size(self.rows, "rows"))
        object.__setattr__(self, "cols", _check_grid_size(self.cols, "cols"))
        for axis, lo, hi, n in (("x", self.x_min, self.x_max, self.cols), ("y", self.y_min, self.y_max, self.rows)):
            span = hi - lo
            if not math.isfinite(span) or not math.isfinite(n / span):
                raise SpatialDataError(f"box: the {axis} span {axis}_max - {axis}_min is beyond double precision "
                                       f"({'too large' if not math.isfinite(span) else 'too small'}); every point "
                                       "would fall in one cell: use a smaller (or larger) box, or other units")
            edges = np.linspace(lo, hi, n + 1)
            if not np.all(np.diff(edges) > 0):
                raise SpatialDataError(f"box: the {axis} span cannot be cut into {n} distinct cells in double precision "
                                       f"(cells narrower than the spacing of floats near {axis}_min): use fewer "
                                       "cells, or shift the coordinates towards 0")

    @classmethod
    def cells(cls, rows: int, cols: int) -> SpatialDomain:
        """A grid in cell units: the box ``[0, cols] x [0, rows]`` (x = column, y = row)."""
        r, c = _check_grid_size(rows, "rows"), _check_grid_size(cols, "cols")
        return cls(0.0, float(c), 0.0, float(r), r, c)

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, cols)``."""
        return (self.rows, self.cols)

    @property
    def box(self) -> tuple[float, float, float, float]:
        """``(x_min, x_max, y_min, y_max)``."""
        return (self.x_min, self.x_max, self.y_min, self.y_max)

    @property
    def cell_width(self) -> float:
        """Width of a cell along x."""
        return (self.x_max - self.x_min) / self.cols

    @property
    def cell_height(self) -> float:
        """Height of a cell along y."""
        return (self.y_max - self.y_min) / self.rows

    def col_edges(self) -> np.ndarray:
        """The ``cols + 1`` x coordinates of the cell boundaries."""
        return np.linspace(self.x_min, self.x_max, self.cols + 1)

    def row_edges(self) -> np.ndarray:
        """The ``rows + 1`` y coordinates of the cell boundaries."""
        return np.linspace(self.y_min, self.y_max, self.rows + 1)

    def bin(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row and column index of every point (all inside the box; see :meth:`SpatialGrid.from_points`)."""
        col = np.floor((x - self.x_min) * (self.cols / (self.x_max - self.x_min))).astype(np.int64)
        row = np.floor((y - self.y_min) * (self.rows / (self.y_max - self.y_min))).astype(np.int64)
        # the upper edges belong to the last cell; float rounding can also land a point just inside
        # the upper edge on index == cols: clip (every point was checked to be inside the box)
        np.clip(col, 0, self.cols - 1, out=col)
        np.clip(row, 0, self.rows - 1, out=row)
        return row, col

    def describe(self) -> str:
        """``"[x_min, x_max] x [y_min, y_max] on a rows x cols grid"``."""
        return (f"[{self.x_min:.6g}, {self.x_max:.6g}] x [{self.y_min:.6g}, {self.y_max:.6g}] "
                f"on a {self.rows} x {self.cols} grid")


def prefix_sums_2d(counts: np.ndarray) -> np.ndarray:
    """The ``(N + 1) x (M + 1)`` table ``P[i, j] = counts[:i, :j].sum()`` (int64 for integer input)."""
    a = np.asarray(counts)
    dtype = np.int64 if np.issubdtype(a.dtype, np.integer) else np.float64
    p = np.zeros((a.shape[0] + 1, a.shape[1] + 1), dtype=dtype)
    np.cumsum(np.cumsum(a, axis=0, dtype=dtype), axis=1, dtype=dtype, out=p[1:, 1:])
    return p


def rect_sums(prefix: np.ndarray, r0: Any, r1: Any, c0: Any, c1: Any) -> np.ndarray:
    """Sums over the half-open cell rectangles ``[r0, r1) x [c0, c1)`` from a prefix table
    (vectorized: the bounds are arrays of one length, or scalars)."""
    r0, r1, c0, c1 = (np.asarray(v, dtype=np.int64) for v in (r0, r1, c0, c1))
    return prefix[r1, c1] - prefix[r0, c1] - prefix[r1, c0] + prefix[r0, c0]


@dataclass(eq=False)
class SpatialGrid:
    """A frequency matrix over a public (or declared-public) spatial domain.

    Build with :meth:`from_points` (coordinates) or :meth:`from_counts` (a matrix you already have).

    Attributes:
        counts: ``rows x cols`` int64 matrix, non-negative.
        domain: the :class:`SpatialDomain`.
        domain_source: ``"declared"`` (the box was given) or ``"observed"`` (read off the points).
        domain_assumption: the statement a release makes for an observed box declared public
            (``None`` otherwise).
    """

    counts: np.ndarray
    domain: SpatialDomain
    domain_source: str = "declared"
    domain_assumption: str | None = None
    _prefix: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        c = np.asarray(self.counts)
        if c.ndim != 2:
            raise SpatialDataError(f"counts must be a 2-D matrix, got {c.ndim} dimension(s)")
        if c.shape != self.domain.shape:
            raise SpatialDataError(f"counts has shape {c.shape} but the domain's grid is {self.domain.shape}")
        if not np.issubdtype(c.dtype, np.integer) and (
                not np.issubdtype(c.dtype, np.floating) or not np.all(np.isfinite(c)) or np.any(c != np.round(c))):
            raise SpatialDataError("counts must be finite integers")
        if c.size and c.min() < 0:
            i, j = np.unravel_index(int(np.argmin(c)), c.shape)
            raise SpatialDataError(f"counts must be non-negative; cell ({i}, {j}) holds {c[i, j]}")
        self.counts = np.ascontiguousarray(c, dtype=np.int64)
        if self.domain_source not in ("declared", "observed"):
            raise SpatialDataError(f"domain_source must be 'declared' or 'observed', got {self.domain_source!r}")

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def from_points(cls, x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *,
                    shape: tuple[int, int] | None = None,
                    box: tuple[float, float, float, float] | SpatialDomain | None = None,
                    weights: Sequence[int] | np.ndarray | None = None,
                    observed_domain_public: bool = False) -> SpatialGrid:
        """Bin points into a ``shape = (rows, cols)`` frequency matrix over ``box``.

        Args:
            x, y: coordinates (e.g. longitude and latitude), one entry per point.
            shape: grid cells along y (rows) and x (cols); default (1024, 1024), or the grid of
                ``box`` when it is a :class:`SpatialDomain`.
            box: ``(x_min, x_max, y_min, y_max)`` - public input; every point must lie inside it
                (edges included). ``None`` derives it from the points' extremes: an *observed*
                domain that mechanisms refuse unless ``observed_domain_public=True``.
            weights: optional non-negative integer multiplicity per point (e.g. population / 1000);
                a weight is that many records at the point.
            observed_domain_public: with ``box=None``, state that the data-derived box is public
                knowledge (the release will say it assumes so).

        Raises:
            SpatialDataError: empty data, mismatched lengths, NaN or infinite coordinates, points
                outside an explicit box, a degenerate box, bad weights, a non-positive grid.
        """
        if shape is None:
            shape = box.shape if isinstance(box, SpatialDomain) else (1024, 1024)
        if not isinstance(shape, (tuple, list)) or len(shape) != 2:
            raise SpatialDataError(f"shape must be (rows, cols), got {shape!r}")
        rows, cols = _check_grid_size(shape[0], "shape[0] (rows)"), _check_grid_size(shape[1], "shape[1] (cols)")
        xs = _coords(x, "x")
        ys = _coords(y, "y")
        if xs.size != ys.size:
            raise SpatialDataError(f"x has {xs.size} points but y has {ys.size}")
        if xs.size == 0:
            raise SpatialDataError("no points: a spatial release needs at least one point")
        w = None
        if weights is not None:
            w = np.asarray(weights)
            if w.ndim != 1 or w.size != xs.size:
                raise SpatialDataError(f"weights must have one entry per point ({xs.size}), got shape {w.shape}")
            if not (np.issubdtype(w.dtype, np.integer) or np.issubdtype(w.dtype, np.floating)) or w.dtype == bool:
                raise SpatialDataError(f"weights must be non-negative integers, got dtype {w.dtype}")
            bad = ~np.isfinite(w) | (w < 0) | (w != np.round(w)) if np.issubdtype(w.dtype, np.floating) else (w < 0)
            if np.any(bad):
                k = int(np.flatnonzero(bad)[0])
                raise SpatialDataError(f"weights must be non-negative integers; point {k} has weight {w[k]!r}")
            if np.issubdtype(w.dtype, np.floating) and np.any(w >= 2.0**63):
                k = int(np.flatnonzero(w >= 2.0**63)[0])
                raise SpatialDataError(f"weights must be non-negative integers within int64; point {k}'s weight is "
                                       "beyond int64")
            w = w.astype(np.int64)
            try:
                total = checked_total(w, what="weights")
            except CountError as exc:
                raise SpatialDataError(str(exc)) from None
            if total == 0:
                raise SpatialDataError("every weight is 0: a spatial release needs at least one point")
        if box is None:
            if not isinstance(observed_domain_public, bool):
                raise SpatialDataError(f"observed_domain_public must be True or False, got {observed_domain_public!r}")
            lo_x, hi_x, lo_y, hi_y = float(xs.min()), float(xs.max()), float(ys.min()), float(ys.max())
            if lo_x == hi_x or lo_y == hi_y:
                raise SpatialDataError("the points' extremes span no area along "
                                       f"{'x' if lo_x == hi_x else 'y'}; give an explicit box")
            domain = SpatialDomain(lo_x, hi_x, lo_y, hi_y, rows, cols)
            source = "observed"
            assumption = OBSERVED_BOX_ASSUMPTION.format(box=domain.describe()) if observed_domain_public else None
        else:
            if observed_domain_public:
                raise SpatialDataError("observed_domain_public applies only when the box is derived from the data "
                                       "(box=None); an explicit box is already declared")
            if isinstance(box, SpatialDomain):
                if box.shape != (rows, cols):
                    raise SpatialDataError(f"box is a domain with grid {box.shape} but shape={tuple(shape)}")
                domain = box
            else:
                if not isinstance(box, (tuple, list)) or len(box) != 4:
                    raise SpatialDataError(f"box must be (x_min, x_max, y_min, y_max), got {box!r}")
                domain = SpatialDomain(*box, rows, cols)
            outside = (xs < domain.x_min) | (xs > domain.x_max) | (ys < domain.y_min) | (ys > domain.y_max)
            if outside.any():
                k = int(np.flatnonzero(outside)[0])
                # name the point, not where it is (its coordinates are private; HIERDP_SHOW_DATA=1 quotes them)
                raise SpatialDataError(
                    f"{int(outside.sum())} point(s) lie outside the box {domain.describe()}, e.g. point {k}"
                    f"{quote_private((float(xs[k]), float(ys[k])), 'at')}; enlarge the box or filter the points first "
                    "(dropping them silently would change the data without saying so)")
            source, assumption = "declared", None
        row, col = domain.bin(xs, ys)
        flat = row * domain.cols + col
        if w is None:
            counts = np.bincount(flat, minlength=domain.rows * domain.cols).astype(np.int64)
        elif total < 2**53:  # float64 bincount is exact below 2**53 (every partial sum is below the total)
            counts = np.rint(np.bincount(flat, weights=w, minlength=domain.rows * domain.cols)).astype(np.int64)
        else:  # exact int64 sums: the checked total fits, so no cell's sum can wrap
            counts = np.zeros(domain.rows * domain.cols, np.int64)
            np.add.at(counts, flat, w)
        return cls(counts.reshape(domain.shape), domain, source, assumption)

    @classmethod
    def from_counts(cls, counts: np.ndarray, *, box: tuple[float, float, float, float] | None = None) -> SpatialGrid:
        """A grid from a frequency matrix you already hold (its grid is the public domain; ``box``
        gives it coordinates, default cell units ``[0, cols] x [0, rows]``)."""
        c = np.asarray(counts)
        if c.ndim != 2 or c.shape[0] < 1 or c.shape[1] < 1:
            raise SpatialDataError(f"counts must be a non-empty 2-D matrix, got shape {c.shape}")
        domain = SpatialDomain.cells(*c.shape) if box is None else SpatialDomain(*box, c.shape[0], c.shape[1])
        return cls(c, domain)

    # -- queries ---------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, cols)``."""
        return self.domain.shape

    @property
    def n_points(self) -> int:
        """The number of records (the sum of the matrix)."""
        return int(self.prefix[-1, -1])

    @property
    def prefix(self) -> np.ndarray:
        """The 2-D prefix sums (computed once)."""
        if self._prefix is None:
            self._prefix = prefix_sums_2d(self.counts)
        return self._prefix

    def rect_count(self, r0: Any, r1: Any, c0: Any, c1: Any) -> np.ndarray:
        """Exact point counts of the cell rectangles ``[r0, r1) x [c0, c1)`` (vectorized, int64)."""
        return rect_sums(self.prefix, r0, r1, c0, c1)

    def query_counts(self, queries: np.ndarray) -> np.ndarray:
        """Exact counts of a workload: ``queries`` is ``(Q, 4)`` int ``[r0, r1, c0, c1]``."""
        q = np.asarray(queries, dtype=np.int64)
        return self.rect_count(q[:, 0], q[:, 1], q[:, 2], q[:, 3])

    def __repr__(self) -> str:
        return (f"SpatialGrid({self.domain.describe()}, {self.n_points:,} points, domain {self.domain_source}"
                + (", declared public" if self.domain_assumption else "") + ")")


def _coords(v: Any, name: str) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SpatialDataError(f"{name} must be numeric coordinates: {exc}") from None
    if a.ndim != 1:
        a = a.ravel() if a.ndim == 0 else a
        if a.ndim != 1:
            raise SpatialDataError(f"{name} must be a 1-D sequence of coordinates, got shape {a.shape}")
    bad = ~np.isfinite(a)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise SpatialDataError(f"{name}: {int(bad.sum())} coordinate(s) are NaN or infinite, e.g. point {k} ({a[k]!r})")
    return a
