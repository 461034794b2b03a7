"""The spatial baselines of paper 002 (§5), each with its own paper's parameters and accounting.

All are pure ε-DP with discrete Laplace (geometric) noise on integer counts, unbounded neighbours
(one point added or removed) by default, ``contributions=m`` scaling every sensitivity:

=============  =================================================================================
``identity``   Singular: noise on every cell, ``Lap(m/ε)``.
``uniform``    the noisy total spread uniformly over the grid.
``ug``         UG (Qardaji, Yang & Li, ICDE 2013): one ``g x g`` grid, ``g = sqrt(N ε / c)``,
               ``c = 10``, rounded to the nearest integer and clamped to the grid.
``ag``         AG (same paper): level 1 ``m1 = max(10, ceil(sqrt(N ε / c) / 4))`` with ``α ε``; each
               level-1 cell with noisy count ``N'`` gets ``m2 = ceil(sqrt(N' (1-α) ε / c2))``, ``c2 =
               c/2``, cells with ``(1-α) ε``; AG's constrained inference is the weighted least
               squares of the two-level tree (posed as a Problem, solved by ``twopass``; equal to
               Qardaji's closed formula - a test checks it). ``α = 0.5``.
``quadtree``   QuadTree (Cormode et al., ICDE 2012): full quadtree of ``height`` levels, budgets
               geometric (eq. 17) or uniform over the ``height + 1`` levels, then Hay's consistency.
``kdtree``     kd-tree (Cormode et al. 2012): private medians by the exponential mechanism with
               ``prt_share = 15 %`` of ε (the HTF paper's setting) spread over the median levels, the
               rest on the counts (geometric or uniform), then Hay's consistency. ``hybrid=True``:
               medians for the top ``switch`` levels, data-independent halving below (Cormode's
               kd-hybrid).
``privelet``   Privelet (Xiao, Wang & Gehrke, TKDE 2010): 2-D Haar transform of the (zero-padded to
               powers of two) grid; each cell moves ``(1 + log2 R)(1 + log2 C)`` unnormalised
               coefficients by ±1, so every coefficient gets ``Lap((1 + log2 R)(1 + log2 C) m / ε)``;
               the inverse transform gives the cells.
=============  =================================================================================

UG and AG size their grids with the number of points N. Under unbounded neighbours N is private:
by default they spend ``eps_n = ε/1000`` on a noisy N (the same 1e-4 at ε = 0.1 that HTF spends on
its height); ``eps_n=0`` uses the true N and the release states that it *assumes N public*. Under
bounded neighbours N is public and costs nothing.

"Hay's consistency" (the paper's "smoothing") is weighted least squares over the released tree,
posed as a hierdp :class:`~hierdp.models.Problem` (:mod:`.consistency`) and solved by any registered
solver (``consistency_solver``, default the exact ``twopass`` closed form; ``cross_check="highs"``
re-solves it as a QP). ``consistency=None`` releases the raw noisy leaves.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from hierdp.mechanisms.base import MechanismParameterError, RunContext, refuse_solver
from hierdp.mechanisms.spatial._common import (
    GEOMETRIC,
    SpatialMechanism,
    Timer,
    as_grid,
    check_fraction_param,
    check_positive_int,
    discrete_laplace_variance,
    exact_fraction,
    pure,
    solver_options_with,
)
from hierdp.mechanisms.spatial.budgets import geometric_level_budgets, uniform_level_budgets
from hierdp.mechanisms.spatial.consistency import check_consistency_solver
from hierdp.mechanisms.spatial.trees import build_tree, median_split, midpoint_split, quad_split
from hierdp.hierarchy.spatial import rect_sums
from hierdp.release.spatial import SpatialRelease, SpatialTree

__all__ = [
    "AG",
    "UG",
    "Identity",
    "KdTree",
    "Privelet",
    "QuadTree",
    "Uniform",
    "ag_level1_size",
    "ag_level2_size",
    "grid_edges",
    "haar_forward",
    "haar_inverse",
    "ug_grid_size",
]

_N_ASSUMPTION = "the number of points N is assumed public (used to size the grid; eps_n=0)"


# -- grids -----------------------------------------------------------------------------------------------
def grid_edges(length: int, parts: int) -> np.ndarray:
    """``parts + 1`` boundaries ``floor(k length / parts)`` of ``parts`` near-equal pieces of ``length`` cells."""
    return (np.arange(parts + 1, dtype=np.int64) * length) // parts


def ug_grid_size(n: float, epsilon: float, c: float = 10.0) -> int:
    """UG's ``g = sqrt(N ε / c)`` rounded to the nearest integer, at least 1 (clamped to the grid by the caller)."""
    return max(1, round(math.sqrt(max(n, 0.0) * epsilon / c)))


def ag_level1_size(n: float, epsilon: float, c: float = 10.0) -> int:
    """AG's ``m1 = max(10, ceil(sqrt(N ε / c) / 4))``."""
    return max(10, math.ceil(math.sqrt(max(n, 0.0) * epsilon / c) / 4))


def ag_level2_size(noisy: np.ndarray, epsilon2: float, c2: float = 5.0) -> np.ndarray:
    """AG's ``m2 = ceil(sqrt(N' ε2 / c2))`` per level-1 cell (``N' <= 0`` gives 1)."""
    return np.maximum(1, np.ceil(np.sqrt(np.maximum(noisy, 0) * epsilon2 / c2))).astype(np.int64)


def _grid_rects(r0: int, r1: int, c0: int, c1: int, gr: int, gc: int) -> np.ndarray:
    er = r0 + grid_edges(r1 - r0, gr)
    ec = c0 + grid_edges(c1 - c0, gc)
    rr, cc = np.meshgrid(np.arange(gr), np.arange(gc), indexing="ij")
    return np.stack([er[rr.ravel()], er[rr.ravel() + 1], ec[cc.ravel()], ec[cc.ravel() + 1]], axis=1)


def _cell_rects(rows: int, cols: int) -> np.ndarray:
    return _grid_rects(0, rows, 0, cols, rows, cols)


# -- Haar ------------------------------------------------------------------------------------------------
def haar_forward(x: np.ndarray, axis: int) -> np.ndarray:
    """Unnormalised 1-D Haar transform along ``axis`` (length a power of two): the total first, then
    the differences ``left sum - right sum`` of every dyadic block, coarse to fine. Every entry is in
    exactly ``1 + log2(length)`` coefficients, each time with coefficient ±1."""
    a = np.moveaxis(np.asarray(x), axis, 0)
    parts = []
    while a.shape[0] > 1:
        s = a[0::2] + a[1::2]
        parts.append(a[0::2] - a[1::2])
        a = s
    parts.append(a)
    return np.moveaxis(np.concatenate(parts[::-1], axis=0), 0, axis)


def haar_inverse(coef: np.ndarray, axis: int) -> np.ndarray:
    """Inverse of :func:`haar_forward` (float64)."""
    c = np.moveaxis(np.asarray(coef, dtype=np.float64), axis, 0)
    n = c.shape[0]
    a = c[:1]
    pos = 1
    while pos < n:
        d = c[pos:2 * pos]
        nxt = np.empty((2 * pos, *c.shape[1:]))
        nxt[0::2] = (a + d) / 2
        nxt[1::2] = (a - d) / 2
        a = nxt
        pos *= 2
    return np.moveaxis(a, 0, axis)


class _NEstimate(SpatialMechanism):
    """The N of UG / AG: noisy (eps_n > 0), public by assumption (eps_n = 0, unbounded), or public
    (bounded neighbours)."""

    def _init_n(self, eps_n: Any) -> None:
        if self.unit.bounded:
            if eps_n not in (None, 0):
                raise MechanismParameterError("eps_n must be 0 (or omitted) under bounded neighbours: N is public")
            self.eps_n = Fraction(0)
        elif eps_n is None:
            self.eps_n = self.eps_total / 1000
        else:
            self.eps_n = exact_fraction(eps_n, "eps_n", allow_zero=True)
        if self.eps_n >= self.eps_total:
            raise MechanismParameterError(f"eps_n {float(self.eps_n)!r} must be below epsilon "
                                          f"{float(self.eps_total)!r}: "
                                          "nothing would be left for the cells")

    def _n(self, ctx: RunContext, n_true: int) -> tuple[float, tuple[str, ...]]:
        if self.eps_n > 0:
            noisy = self.count_noise(ctx, np.array([n_true]), self.eps_n, "N estimate", what="N + Lap(m/eps_n)")
            return float(noisy[0]), ()
        return float(n_true), (() if self.unit.bounded else (_N_ASSUMPTION,))


def _common_init(self: SpatialMechanism, epsilon: Any, delta: Any, budget: Any, unit: Any, bounded: Any,
                 contributions: Any, distinct: Any, conversion: Any, secure: Any, solver: Any, solver_options: Any,
                 uses: str | None) -> None:
    if uses is None:
        refuse_solver(self.name, solver, solver_options, "its counts are released as drawn")
    self._resolve(epsilon, delta, budget, unit, bounded, contributions, secure, distinct, conversion)


class _PlainSpatial(SpatialMechanism):
    """A spatial mechanism whose only parameters are the budget and the privacy unit, and which
    draws its counts without a consistency solve (so a ``solver=`` is refused)."""

    def __init__(self, epsilon: float | None = None, *, budget: Any = None, delta: float | None = None,
                 unit: Any = None, bounded: bool = False, contributions: int = 1, distinct: bool = False,
                 conversion: str = "analytic", secure: bool = False,
                 solver: Any = None, solver_options: Any = None) -> None:
        _common_init(self, epsilon, delta, budget, unit, bounded, contributions, distinct, conversion, secure, solver,
                     solver_options, None)


class Identity(_PlainSpatial):
    """Singular / Identity: ``Lap(m/ε)`` on every cell (pure ε-DP; cells are disjoint)."""

    name = "Identity"

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Any = None, progress: bool = False) -> SpatialRelease:
        grid = as_grid(data)
        ctx = self.start(grid, seed=seed, rng=rng, secure=secure, accountant=accountant)
        timer = Timer()
        with timer("perturbation"):
            vals = self.count_noise(ctx, grid.counts.ravel(), self.eps_total, "cells")
        with timer("release"):
            rects = _cell_rects(*grid.domain.shape)
        return self.finish(ctx, grid, rects, vals, timer=timer, notes=("raw noisy cells; values can be negative",))


class Uniform(_PlainSpatial):
    """Uniform: the noisy total ``N + Lap(m/ε)`` spread evenly over the grid (pure ε-DP)."""

    name = "Uniform"

    def __init__(self, epsilon: float | None = None, *, budget: Any = None, delta: float | None = None,
                 unit: Any = None, bounded: bool = False, contributions: int = 1, distinct: bool = False,
                 conversion: str = "analytic", secure: bool = False,
                 solver: Any = None, solver_options: Any = None) -> None:
        _common_init(self, epsilon, delta, budget, unit, bounded, contributions, distinct, conversion, secure, solver,
                     solver_options, None)
        if self.unit.bounded:
            raise MechanismParameterError("Uniform releases only the total, which bounded neighbours make public: "
                                          "use unbounded neighbours (bounded=False)")

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Any = None, progress: bool = False) -> SpatialRelease:
        grid = as_grid(data)
        ctx = self.start(grid, seed=seed, rng=rng, secure=secure, accountant=accountant)
        timer = Timer()
        with timer("perturbation"):
            total = self.count_noise(ctx, np.array([grid.n_points]), self.eps_total, "total")
        rows, cols = grid.domain.shape
        return self.finish(ctx, grid, np.array([[0, rows, 0, cols]]), total, timer=timer,
                           notes=("one leaf: the noisy total; queries assume uniform density",))


class UG(_NEstimate):
    """UG (Qardaji et al. 2013): a ``g x g`` grid, ``g = round(sqrt(N ε / c))``, Lap per cell (pure ε-DP).

    Args:
        epsilon: the total budget.
        c: the constant of the grid size (default 10).
        eps_n: budget for the noisy N (default ε/1000; 0: use the true N and state the assumption).
    """

    name = "UG"

    def __init__(self, epsilon: float | None = None, *, budget: Any = None, c: float = 10.0, eps_n: float | None = None,
                 delta: float | None = None, unit: Any = None, bounded: bool = False, contributions: int = 1,
                 distinct: bool = False, conversion: str = "analytic", secure: bool = False, solver: Any = None,
                 solver_options: Any = None) -> None:
        _common_init(self, epsilon, delta, budget, unit, bounded, contributions, distinct, conversion, secure, solver,
                     solver_options, None)
        self.c = float(exact_fraction(c, "c"))
        self._init_n(eps_n)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "c": self.c, "eps_n": float(self.eps_n)}

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Any = None, progress: bool = False) -> SpatialRelease:
        grid = as_grid(data)
        ctx = self.start(grid, seed=seed, rng=rng, secure=secure, accountant=accountant)
        timer = Timer()
        rows, cols = grid.domain.shape
        with timer("perturbation"):
            n, assumptions = self._n(ctx, grid.n_points)
            g = ug_grid_size(n, float(self.eps_total), self.c)
            gr, gc = min(g, rows), min(g, cols)
            rects = _grid_rects(0, rows, 0, cols, gr, gc)
            counts = rect_sums(grid.prefix, rects[:, 0], rects[:, 1], rects[:, 2], rects[:, 3])
            vals = self.count_noise(ctx, counts, self.eps_total - self.eps_n, f"grid {gr} x {gc}")
        return self.finish(ctx, grid, rects, vals, timer=timer, assumptions=assumptions,
                           details={"grid": (gr, gc), "n_used": n},
                           notes=("raw noisy grid cells; values can be negative",))


class AG(_NEstimate):
    """AG (Qardaji et al. 2013): adaptive two-level grid with constrained inference (pure ε-DP).

    Args:
        epsilon: the total budget.
        alpha: share of the cell budget on level 1 (default 0.5).
        c: constant of the level-1 size (default 10); ``c2`` of level 2 (default c/2).
        eps_n: budget for the noisy N (default ε/1000; 0: the true N, stated as an assumption).
        consistency: ``"gls"`` (AG's inference, default) or ``None`` (raw level-2 cells).
        consistency_solver: the registered solver for the inference (default ``twopass``).
        cross_check: a second solver to re-solve the inference and compare (e.g. ``"highs"``).
        constraints: public constraints over cells and rectangles of the grid, honoured by the
            inference (:mod:`hierdp.mechanisms.spatial.constraints`, docs/constraints.md).
    """

    name = "AG"

    def __init__(self, epsilon: float | None = None, *, budget: Any = None, alpha: float = 0.5, c: float = 10.0,
                 c2: float | None = None, eps_n: float | None = None, consistency: str | None = "gls",
                 consistency_solver: str = "twopass", cross_check: str | None = None, delta: float | None = None,
                 unit: Any = None, bounded: bool = False, contributions: int = 1, distinct: bool = False,
                 conversion: str = "analytic", secure: bool = False,
                 solver: Any = None, solver_options: Any = None, time_limit: float | None = None,
                 constraints: Any = None) -> None:
        _common_init(self, epsilon, delta, budget, unit, bounded, contributions, distinct, conversion, secure, solver,
                     solver_options, "yes")
        self._set_constraints(constraints, consistency)
        if solver is not None:
            consistency_solver = solver
        self.alpha = check_fraction_param(alpha, "alpha", 0.0, 1.0)
        self.c = float(exact_fraction(c, "c"))
        self.c2 = self.c / 2 if c2 is None else float(exact_fraction(c2, "c2"))
        self._init_n(eps_n)
        if consistency not in ("gls", None):
            raise MechanismParameterError(f"consistency must be 'gls' or None, got {consistency!r}")
        self.consistency = consistency
        self.consistency_solver = consistency_solver
        self.cross_check = cross_check
        if consistency is not None:  # refused now, not after the noise is drawn
            check_consistency_solver(consistency_solver, unmeasured_root=True)
            check_consistency_solver(cross_check, "cross_check", unmeasured_root=True)
        self.solver_options = solver_options_with(solver_options, time_limit)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "alpha": self.alpha, "c": self.c, "c2": self.c2, "eps_n": float(self.eps_n),
                "consistency": self.consistency, "consistency_solver": str(self.consistency_solver)}

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Any = None, progress: bool = False) -> SpatialRelease:
        grid = as_grid(data)
        ctx = self.start(grid, seed=seed, rng=rng, secure=secure, accountant=accountant)
        bound = self.bind_constraints(grid)  # before any noise
        timer = Timer()
        rows, cols = grid.domain.shape
        eps_cells = self.eps_total - self.eps_n
        alpha = Fraction(self.alpha)
        eps1, eps2 = alpha * eps_cells, eps_cells - alpha * eps_cells
        with timer("perturbation"):
            n, assumptions = self._n(ctx, grid.n_points)
            m1 = ag_level1_size(n, float(self.eps_total), self.c)
            g1r, g1c = min(m1, rows), min(m1, cols)
            lvl1 = _grid_rects(0, rows, 0, cols, g1r, g1c)
            y1 = self.count_noise(ctx, rect_sums(grid.prefix, *lvl1.T), eps1, f"level 1 ({g1r} x {g1c})")
            m2 = ag_level2_size(y1, float(eps2), self.c2)
            kids = []
            owner = []
            for j, (r0, r1, c0, c1) in enumerate(lvl1.tolist()):
                k = _grid_rects(r0, r1, c0, c1, min(int(m2[j]), r1 - r0), min(int(m2[j]), c1 - c0))
                kids.append(k)
                owner.append(np.full(k.shape[0], j, np.int64))
            lvl2 = np.concatenate(kids)
            owner_a = np.concatenate(owner)
            y2 = self.count_noise(ctx, rect_sums(grid.prefix, *lvl2.T), eps2, "level 2 (adaptive)")
        solver_name = None
        tree = None
        vals: np.ndarray = y2
        if self.consistency == "gls":
            with timer("consistency"):
                v1 = float(discrete_laplace_variance(self.scale_for(eps1)))
                v2 = float(discrete_laplace_variance(self.scale_for(eps2)))
                parent = np.concatenate([[-1], np.zeros(lvl1.shape[0], np.int64), 1 + owner_a])
                noisy = np.concatenate([[np.nan], y1, y2]).astype(np.float64)
                var = np.concatenate([[1.0], np.full(lvl1.shape[0], v1), np.full(lvl2.shape[0], v2)])
                rects = np.concatenate([[[0, rows, 0, cols]], lvl1, lvl2])
                tc = self.constraints_on_tree(ctx, bound, parent, rects)
                values, sol = self.solve_consistency(ctx, parent, noisy, var, self.consistency_solver,
                                                     self.cross_check, self.solver_options, tc)
                solver_name = sol.solver
                level = np.concatenate([[0], np.ones(lvl1.shape[0], np.int64), np.full(lvl2.shape[0], 2)])
                tree = SpatialTree(parent, rects, values, level)
                vals = values[1 + lvl1.shape[0]:]
        details, notes = self.constraint_accounting(
            bound, {"level1": (g1r, g1c), "level2_cells": int(lvl2.shape[0]), "n_used": n},
            ("level-2 cells after AG's inference (weighted least squares over the two levels; values can be negative)"
             if tree is not None else "raw level-2 cells",))
        return self.finish(ctx, grid, lvl2, vals, timer=timer, tree=tree, solver=solver_name, assumptions=assumptions,
                           details=details, notes=notes)


class _TreeBaseline(SpatialMechanism):
    """Shared run of QuadTree and kd-tree: grow the tree, noise every node per level, Hay's consistency."""


    def _init_tree(self, height: int, budgets: str, consistency: str | None, consistency_solver: Any,
                   cross_check: str | None, solver: Any, solver_options: Any, time_limit: Any,
                   constraints: Any = None) -> None:
        self._set_constraints(constraints, consistency)
        self.height = check_positive_int(height, "height", minimum=0)
        if budgets not in ("geometric", "uniform"):
            raise MechanismParameterError(f"budgets must be 'geometric' or 'uniform', got {budgets!r}")
        self.budgets = budgets
        if consistency not in ("gls", None):
            raise MechanismParameterError(f"consistency must be 'gls' or None, got {consistency!r}")
        self.consistency = consistency
        self.consistency_solver = solver if solver is not None else consistency_solver
        self.cross_check = cross_check
        if consistency is not None:  # refused now, not after the noise is drawn
            check_consistency_solver(self.consistency_solver)
            check_consistency_solver(cross_check, "cross_check")
        self.solver_options = solver_options_with(solver_options, time_limit)

    def _grow(self, grid: Any, ctx: RunContext, eps_split: Fraction) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _count_budget(self) -> Fraction:
        return self.eps_total

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Any = None, progress: bool = False) -> SpatialRelease:
        grid = as_grid(data)
        ctx = self.start(grid, seed=seed, rng=rng, secure=secure, accountant=accountant)
        bound = self.bind_constraints(grid)  # before any noise
        timer = Timer()
        with timer("partition"):
            parent, rects, depth = self._grow(grid, ctx, self.eps_total - self._count_budget())
            # a quadtree's nodes are public: a rectangle that is not a union of them is refused before any noise
            tc = self.constraints_on_tree(ctx, bound, parent, rects)
        h = self.height
        eps_c = self._count_budget()
        levels = (geometric_level_budgets if self.budgets == "geometric" else uniform_level_budgets)(eps_c, h)
        with timer("perturbation"):
            counts = rect_sums(grid.prefix, *rects.T)
            noisy = np.empty(counts.size, np.int64)
            var = np.empty(counts.size)
            for d in range(h + 1):
                at = depth == d
                eps_d = levels[h - d]  # node height = h - depth
                label = f"counts, depth {d}"
                if not at.any():  # the tree stopped early (single cells): the level's budget is unused
                    ctx.spend(pure(eps_d), label, note="no node at this depth")
                    continue
                noisy[at] = self.count_noise(ctx, counts[at], eps_d, label)
                var[at] = float(discrete_laplace_variance(self.scale_for(eps_d)))
        solver_name = None
        values: np.ndarray = noisy
        if self.consistency == "gls":
            with timer("consistency"):
                values, sol = self.solve_consistency(ctx, parent, noisy.astype(np.float64), var,
                                                     self.consistency_solver, self.cross_check, self.solver_options,
                                                     tc)
                solver_name = sol.solver
        tree = SpatialTree(parent, rects, values, depth)
        leaves = tree.is_leaf
        note = ("leaves after Hay's consistency (weighted least squares over the tree; values can be negative)"
                if solver_name else "raw noisy leaves; internal counts released in the tree, not consistent")
        details, notes = self.constraint_accounting(
            bound, {"height": h, "nodes": int(parent.size), "leaves": int(leaves.sum())}, (note,))
        return self.finish(ctx, grid, rects[leaves], values[leaves], timer=timer,
                           tree=tree if solver_name else None, solver=solver_name, details=details, notes=notes)


class QuadTree(_TreeBaseline):
    """QuadTree (Cormode et al. 2012): full quadtree, geometric or uniform level budgets, Hay's consistency.

    Args:
        epsilon: the total budget.
        height: levels below the root (default 8; paper 002 varies it; a node one cell wide splits in
            two, a single cell not at all).
        budgets: ``"geometric"`` (eq. 17) or ``"uniform"``.
        consistency: ``"gls"`` (default) or ``None``; ``consistency_solver`` / ``cross_check`` as in AG.
        constraints: public constraints over cells and rectangles, honoured by the consistency step
            (its nodes are public: every rectangle is checked against them before any noise).
    """

    name = "QuadTree"

    def __init__(self, epsilon: float | None = None, *, budget: Any = None, height: int = 8, budgets: str = "geometric",
                 consistency: str | None = "gls", consistency_solver: str = "twopass", cross_check: str | None = None,
                 delta: float | None = None, unit: Any = None, bounded: bool = False, contributions: int = 1,
                 distinct: bool = False, conversion: str = "analytic", secure: bool = False, solver: Any = None,
                 solver_options: Any = None, time_limit: float | None = None, constraints: Any = None) -> None:
        _common_init(self, epsilon, delta, budget, unit, bounded, contributions, distinct, conversion, secure, solver,
                     solver_options, "yes")
        self._init_tree(height, budgets, consistency, consistency_solver, cross_check, solver, solver_options,
                        time_limit, constraints)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "height": self.height, "budgets": self.budgets, "consistency": self.consistency}

    def _grow(self, grid: Any, ctx: RunContext, eps_split: Fraction) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return build_tree(grid.domain.shape, self.height, quad_split)


class KdTree(_TreeBaseline):
    """kd-tree (Cormode et al. 2012) with private medians (pure ε-DP).

    Args:
        epsilon: the total budget.
        height: levels below the root (default 10).
        prt_share: share of ε for the medians (default 0.15, paper 002 §5.2), uniform over the median
            levels; the rest goes to the counts over the ``height + 1`` levels.
        budgets: count budgets ``"geometric"`` (eq. 17) or ``"uniform"``.
        hybrid: medians only for the top ``switch`` levels (default ``height // 2``), halving below.
        consistency, consistency_solver, cross_check: as in QuadTree.
        constraints: as in QuadTree; the medians are private, so rectangles are checked against the
            nodes once they are drawn (a rectangle that is not a union of them stops the release).
    """

    name = "KdTree"

    def __init__(self, epsilon: float | None = None, *, budget: Any = None, height: int = 10, prt_share: float = 0.15,
                 budgets: str = "geometric", hybrid: bool = False, switch: int | None = None,
                 consistency: str | None = "gls", consistency_solver: str = "twopass", cross_check: str | None = None,
                 delta: float | None = None, unit: Any = None, bounded: bool = False, contributions: int = 1,
                 distinct: bool = False, conversion: str = "analytic", secure: bool = False, solver: Any = None,
                 solver_options: Any = None, time_limit: float | None = None, constraints: Any = None) -> None:
        _common_init(self, epsilon, delta, budget, unit, bounded, contributions, distinct, conversion, secure, solver,
                     solver_options, "yes")
        self._init_tree(height, budgets, consistency, consistency_solver, cross_check, solver, solver_options,
                        time_limit, constraints)
        self.prt_share = Fraction(check_fraction_param(prt_share, "prt_share", 0.0, 1.0))
        if not isinstance(hybrid, bool):
            raise MechanismParameterError(f"hybrid must be True or False, got {hybrid!r}")
        self.hybrid = hybrid
        if switch is not None and not hybrid:
            raise MechanismParameterError("switch applies to hybrid=True only")
        self.switch = (self.height // 2 if switch is None else check_positive_int(switch, "switch", minimum=0)) \
            if hybrid else self.height
        if self.switch > self.height:
            raise MechanismParameterError(f"switch {self.switch} exceeds height {self.height}")
        if self.height == 0 or self.switch == 0:
            raise MechanismParameterError("a kd-tree needs at least one median level (height >= 1, switch >= 1)")

    def params(self) -> dict[str, Any]:
        return {**super().params(), "height": self.height, "budgets": self.budgets, "prt_share": float(self.prt_share),
                "hybrid": self.hybrid, "switch": self.switch, "consistency": self.consistency}

    def _count_budget(self) -> Fraction:
        return self.eps_total * (1 - self.prt_share)

    def _grow(self, grid: Any, ctx: RunContext, eps_split: Fraction) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        eps_level = eps_split / self.switch
        for d in range(self.switch):  # committed before the first median is drawn
            ctx.spend(pure(eps_level), f"median, depth {d}", mechanism="exponential",
                      sensitivity=self.count_sensitivity)
        median = median_split(grid.prefix, eps_level, self.count_sensitivity, ctx.rng)

        def split(depth: int, rects: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return median(depth, rects) if depth < self.switch else midpoint_split(depth, rects)
        return build_tree(grid.domain.shape, self.height, split)


class Privelet(_PlainSpatial):
    """Privelet (Xiao, Wang & Gehrke 2010): Laplace noise on 2-D Haar coefficients (pure ε-DP).

    The grid is zero-padded to powers of two (public); each of the ``R x C`` unnormalised
    coefficients gets ``Lap((1 + log2 R)(1 + log2 C) m / ε)``; the inverse transform gives every cell.
    """

    name = "Privelet"

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Any = None, progress: bool = False) -> SpatialRelease:
        grid = as_grid(data)
        ctx = self.start(grid, seed=seed, rng=rng, secure=secure, accountant=accountant)
        timer = Timer()
        rows, cols = grid.domain.shape
        pr, pc = 1 << max(0, (rows - 1).bit_length()), 1 << max(0, (cols - 1).bit_length())
        with timer("perturbation"):
            x = np.zeros((pr, pc), np.int64)
            x[:rows, :cols] = grid.counts
            coef = haar_forward(haar_forward(x, 0), 1)
            sens = (1 + pr.bit_length() - 1) * (1 + pc.bit_length() - 1) * self.count_sensitivity
            scale = self.scale_for(self.eps_total, sens)
            noisy = ctx.measure(coef, pure(self.eps_total), "Haar coefficients", GEOMETRIC, sensitivity=sens,
                                parameter=scale)
        with timer("reconstruction"):
            cells = haar_inverse(haar_inverse(noisy, 1), 0)[:rows, :cols]
        return self.finish(ctx, grid, _cell_rects(rows, cols), cells.ravel(), timer=timer,
                           details={"padded": (pr, pc), "coefficient_sensitivity": sens},
                           notes=("cells from the inverse Haar transform of noisy coefficients; "
                                  "values can be negative",))
