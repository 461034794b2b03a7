"""HTF - Homogeneous Tree Framework (Shaham et al., SIGSPATIAL 2021; paper 002).

A private binary partition tree over the grid whose splits make each part's density homogeneous:

1. **Height** (eq. 9-10): ``|D̄| = |D| + Lap(m/ε_height)``, ``h = floor(log2(|D̄| ε_tot / c0))``,
   ``c0 = 10``; floor reproduces the paper's heights 15/16/17 for 3.5 M points at ε_tot = 0.1/0.3/0.5.
   Clamped (post-processing of a private value) to ``1 <= h <= min(ceil(log2 N) + ceil(log2 M), h_budget)``,
   ``h_budget`` the largest h with ``ε_height + h ε'_prt < ε_tot``.
2. **Private partitioning** (Alg. 2): a node at height ``i > 0`` splits its rows (y) when ``i`` is
   even, its columns (x) otherwise (the paper's prose; Alg. 1's comment says the opposite - privacy is
   the same), or the other axis when it has a single row/column. The split point comes from
   **Alg. 1**, the near-optimal search over the homogeneity objective (eq. 5, sensitivity 2): ``2T+1``
   noisy evaluations at ``ε'' = ε'_prt / (2T+1)`` each, candidates at interval *midpoints*
   (the printed index arithmetic uses half-lengths; the prose - "divided into four equal
   sub-intervals, three inner points" - fixes the intent; see :func:`alg1_search` for the rounding),
   ``k`` in ``[1, L-1]`` so both children are non-empty. ``split="baseline"`` is eq. (8) instead:
   every candidate noised at ``ε'_prt/(L-1)``.
3. **Perturbation with stop conditions** (Alg. 3): level budgets of eq. (17) over the ``h + 1``
   node heights, made exact (:mod:`.budgets`); a node draws ``count + Lap(m/ε_i)``; when the noisy
   count is ``<= stop_count`` or the node has ``<= stop_cells`` cells (or one cell), it becomes a
   leaf and *replaces* its count by a fresh draw with everything its path has left,
   ``ε_remain = Σ_{j<i} ε_j`` (exact, never floating-point dust; at height 0 nothing is left and the
   first draw stands). ``combine_pruned=True`` averages the two draws by inverse variance instead
   (post-processing: free, and never worse).
4. Only the leaves are released (a partition of the grid); range queries use the uniformity
   assumption (:class:`~hierdp.release.spatial.SpatialRelease`).

Privacy: pure ε_tot-DP. Along any root-to-leaf path the data draws compose to ``ε_data`` and the
splits to at most ``h ε'_prt``; nodes of a level are disjoint (parallel composition), so
``ε_height + h ε'_prt + ε_data = ε_tot``, an identity of exact Fractions. Unbounded neighbours (one
point added or removed; ``contributions=m`` points per person scales every sensitivity by m) as in
the paper; bounded neighbours double every sensitivity and make ``|D|`` public (the height then
costs nothing). Counts get discrete Laplace noise (integers, exact in secure mode); the split
objective is evaluated exactly as a rational and noised on a ``2^-objective_bits`` grid with
discrete Laplace of sensitivity ``2^bits · 2m + 1`` (see :mod:`.objective`), so comparisons are exact
integers in both modes.

One generator threads through the run, level by level: every node's noise is a fresh draw (the
public DPHIS_2D code re-seeded its generator at every node, so the noise of 1,919 nodes took 39
distinct values). The tree is built lazily, level by level, vectorized over all nodes of a level:
nodes pruned by Alg. 3 are never split (their discarded subtree would not change the output's law).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from hierdp.hierarchy.spatial import rect_sums
from hierdp.mechanisms.base import MechanismParameterError, refuse_solver
from hierdp.mechanisms.spatial._common import (
    GEOMETRIC,
    SpatialMechanism,
    Timer,
    as_grid,
    check_positive_int,
    discrete_laplace_variance,
    exact_fraction,
    floor_log2,
    pure,
    solver_options_with,
)
from hierdp.mechanisms.spatial.consistency import check_consistency_solver
from hierdp.mechanisms.spatial.budgets import geometric_level_budgets, path_remainders, uniform_level_budgets
from hierdp.mechanisms.spatial.objective import (
    INT64_SAFE,
    gridded_objective,
    probe_cost_terms,
    split_cost_terms_all,
)
from hierdp.release.spatial import SpatialRelease, SpatialTree

__all__ = ["HTF", "LevelProbe", "alg1_search", "cell_offsets", "estimate_height"]

#: per-level partition budget of the paper's experiments (Fig. 3 uses 5e-4 and 1e-3)
DEFAULT_EPS_PRT_PER_LEVEL = 5e-4
#: ε_height of the paper's experiments
DEFAULT_EPS_HEIGHT = 1e-4


def alg1_search(probe: Any, length: np.ndarray, T: int, noise: Any) -> np.ndarray:
    """Alg. 1 for a batch of nodes at once, with midpoints.

    The centre is ``floor((l + r) / 2)``; the two outer probes split ``[l, k]`` and ``[k, r]`` in
    half rounding *away* from the centre (``floor((l + k)/2)``, ``ceil((k + r)/2)``) - the three
    inner points of four (nearly) equal sub-intervals, as the prose says, and the only rounding that
    can still reach both neighbours of ``k`` when the interval has shrunk to ``[k - 1, k + 1]``.

    Args:
        probe: ``probe(k)`` -> the (gridded) objective of candidate ``k`` of every node (int64).
        length: ``L`` per node (>= 2); candidates are ``1 .. L-1``.
        T: rounds (``2T + 1`` probes per node).
        noise: ``noise(n)`` -> ``n`` fresh noise values (one per node) for one probe.

    Returns:
        the chosen ``k`` per node. Ties prefer the centre, then the left probe (the paper's order).
    """
    lo = np.ones_like(length)
    hi = length - 1
    k = (lo + hi) // 2
    ok = probe(k) + noise(k.size)
    for _ in range(T):
        k1 = (lo + k) // 2
        k2 = (k + hi + 1) // 2  # rounded up: the outer probes round away from the centre
        o1 = probe(k1) + noise(k.size)
        o2 = probe(k2) + noise(k.size)
        centre = (ok <= o1) & (ok <= o2)
        left = ~centre & (o1 <= o2)
        right = ~centre & ~left
        lo, hi = np.where(centre, k1, np.where(left, lo, k)), np.where(centre, k2, np.where(left, k, hi))
        k = np.where(left, k1, np.where(right, k2, k))
        ok = np.where(left, o1, np.where(right, o2, ok))
    return k


def cell_offsets(cells: np.ndarray, cols: int, split_rows: np.ndarray, origin: np.ndarray,
                 node_of_cell: np.ndarray) -> np.ndarray:
    """Each cell's offset along its node's split axis (flat cell indices on a grid of ``cols`` columns)."""
    cell_r = cells // cols
    cell_c = cells - cell_r * cols
    return np.where(split_rows[node_of_cell], cell_r, cell_c) - origin[node_of_cell]


class LevelProbe:
    """The gridded split objective (:func:`~.objective.gridded_objective`) of one candidate per node,
    for every node of a level at once: ``probe(k)`` -> int64 per node.

    Args:
        values: counts of the level's cells, node after node.
        pos, node_of_cell, starts: each cell's offset along its node's axis, its node, each node's
            first cell.
        prefix: the grid's 2-D prefix sums.
        rects: ``(K, 4)`` node rectangles ``[r0, r1, c0, c1]``.
        split_rows: True where a node splits its rows.
        counts: each node's point count.
        bits: the objective grid ``2^-bits``.
    """

    def __init__(self, values: np.ndarray, pos: np.ndarray, node_of_cell: np.ndarray, starts: np.ndarray,
                 prefix: np.ndarray, rects: np.ndarray, split_rows: np.ndarray, counts: np.ndarray, bits: int) -> None:
        self.values, self.pos, self.node_of_cell, self.starts = values, pos, node_of_cell, starts
        self.prefix, self.split_rows, self.counts, self.bits = prefix, split_rows, counts, bits
        self.r0, self.r1, self.c0, self.c1 = (np.asarray(rects)[:, j] for j in range(4))
        self.length = np.where(split_rows, self.r1 - self.r0, self.c1 - self.c0)
        self.width = (self.r1 - self.r0) * (self.c1 - self.c0) // self.length

    def terms(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(A, B, n1, n2)`` of candidate ``k`` per node (``o_k = A/n1 + B/n2`` exactly)."""
        n1 = k * self.width
        n2 = (self.length - k) * self.width
        s1 = rect_sums(self.prefix, self.r0, np.where(self.split_rows, self.r0 + k, self.r1), self.c0,
                       np.where(self.split_rows, self.c1, self.c0 + k))
        s2 = self.counts - s1
        a, b = probe_cost_terms(self.values, self.pos, self.node_of_cell, self.starts, k, n1, n2, s1, s2)
        return a, b, n1, n2

    def __call__(self, k: np.ndarray) -> np.ndarray:
        a, b, n1, n2 = self.terms(k)
        return gridded_objective(a, b, n1, n2, self.bits)


def estimate_height(noisy_n: int | Fraction, eps_total: Fraction, c0: Fraction,
                    max_height: int) -> tuple[int, int | None]:
    """``(h, raw)``: eq. (10) ``floor(log2(|D̄| ε_tot / c0))`` exactly (``raw``; ``None`` when
    ``|D̄| <= 0``), clamped to ``[1, max_height]``."""
    x = Fraction(noisy_n) * eps_total / c0
    raw = floor_log2(x) if x > 0 else None
    h = 1 if raw is None else min(max(raw, 1), max_height)
    return h, raw


class HTF(SpatialMechanism):
    """HTF (paper 002): a private homogeneity-driven partition tree; pure ε-DP (see the module docstring).

    Args:
        epsilon: ε_tot (or ``budget=`` a pure :class:`~hierdp.privacy.budget.Budget`).
        eps_prt_per_level: ε'_prt, the partition budget per level (the paper's knob; default 5e-4
            when neither this nor ``eps_prt`` is given).
        eps_prt: the total partition budget ε_prt instead (then ε'_prt = ε_prt / h).
        eps_height: ε_height for the height estimate (default 1e-4; 0 with ``height=`` or bounded
            neighbours, where it is not needed).
        height: a fixed (public) height instead of estimating it (no ε_height spent).
        T: rounds of Alg. 1 (``2T + 1`` noisy evaluations per split; default 3).
        stop_count: prune a node whose noisy count is ``<= stop_count`` (default 100; ``None``: never
            by count).
        stop_cells: prune a node with ``<= stop_cells`` cells (default 5; 0: only single cells).
        split: ``"alg1"`` (default, the near-optimal search) or ``"baseline"`` (eq. 8; a Python loop
            per node: for small grids).
        data_budgets: ``"geometric"`` (eq. 17, default) or ``"uniform"``.
        combine_pruned: release the inverse-variance average of a pruned node's two draws instead of
            the second alone.
        height_constant: c0 of eq. (10) (default 10).
        objective_bits: s, the objective's grid ``2^-s`` (default 20).
        delta: only sets the δ of reported (ε, δ) figures.
        unit, bounded, contributions: the privacy unit (default unbounded, one point per person).
        secure: OS randomness and exact samplers.
        consistency: ``None`` (default: the paper's release, the leaves as drawn) or ``"gls"``: Hay's
            consistency over HTF's own tree (every node's draw, a pruned leaf's release draw, weights
            1/variance; post-processing), the leaves released from the consistent tree.
        consistency_solver, cross_check, solver_options, time_limit: its solver, as in QuadTree.
        constraints: public constraints over cells and rectangles, honoured by the consistency step
            (``consistency="gls"``); HTF's splits are private, so rectangles are checked against its
            nodes once they are drawn (:mod:`hierdp.mechanisms.spatial.constraints`).
    """

    name = "HTF"

    def __init__(self, epsilon: float | None = None, *, budget: Any = None, eps_prt_per_level: float | None = None,
                 eps_prt: float | None = None, eps_height: float | None = None, height: int | None = None,
                 T: int = 3, stop_count: float | None = 100, stop_cells: int = 5, split: str = "alg1",
                 data_budgets: str = "geometric", combine_pruned: bool = False, height_constant: float = 10,
                 objective_bits: int = 20, delta: float | None = None, unit: Any = None, bounded: bool = False,
                 contributions: int = 1, distinct: bool = False, conversion: str = "analytic",
                 secure: bool = False, solver: Any = None, solver_options: Any = None,
                 consistency: str | None = None, consistency_solver: str = "twopass", cross_check: str | None = None,
                 time_limit: float | None = None, constraints: Any = None) -> None:
        if consistency not in (None, "gls"):
            raise MechanismParameterError(f"consistency must be None or 'gls', got {consistency!r}")
        self.consistency = consistency
        if consistency is None:
            refuse_solver(self.name, solver, solver_options, "it releases the leaves of its partition as drawn; "
                          "consistency='gls' adds a consistency step")
        else:
            self.consistency_solver = solver if solver is not None else consistency_solver
            self.cross_check = cross_check
            check_consistency_solver(self.consistency_solver)
            check_consistency_solver(cross_check, "cross_check")
            self.solver_options = solver_options_with(solver_options, time_limit)
        self._set_constraints(constraints, consistency)
        self._resolve(epsilon, delta, budget, unit, bounded, contributions, secure, distinct, conversion)
        eps = self.eps_total
        if eps_prt is not None and eps_prt_per_level is not None:
            raise MechanismParameterError("give eps_prt (total) or eps_prt_per_level, not both")
        self.eps_prt_total: Fraction | None = None if eps_prt is None else exact_fraction(eps_prt, "eps_prt")
        self.eps_prt_level: Fraction | None = None if self.eps_prt_total is not None else \
            exact_fraction(DEFAULT_EPS_PRT_PER_LEVEL if eps_prt_per_level is None else eps_prt_per_level,
                           "eps_prt_per_level")
        self.height = None if height is None else check_positive_int(height, "height")
        self.T = check_positive_int(T, "T", minimum=0)
        if stop_count is None:
            self.stop_count = None
        else:
            if isinstance(stop_count, bool) or not isinstance(stop_count, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(float(stop_count)) or float(stop_count) < 0:
                raise MechanismParameterError(f"stop_count must be a finite number >= 0 (or None: never prune by "
                                              f"count), got {stop_count!r}")
            self.stop_count = float(stop_count)
        self.stop_cells = check_positive_int(stop_cells, "stop_cells", minimum=0)
        if split not in ("alg1", "baseline"):
            raise MechanismParameterError(f"split must be 'alg1' or 'baseline', got {split!r}")
        self.split = split
        if data_budgets not in ("geometric", "uniform"):
            raise MechanismParameterError(f"data_budgets must be 'geometric' or 'uniform', got {data_budgets!r}")
        self.data_budgets = data_budgets
        if not isinstance(combine_pruned, bool):
            raise MechanismParameterError(f"combine_pruned must be True or False, got {combine_pruned!r}")
        self.combine_pruned = combine_pruned
        self.c0 = exact_fraction(height_constant, "height_constant")
        self.objective_bits = check_positive_int(objective_bits, "objective_bits", minimum=0)
        if self.objective_bits > 30:
            raise MechanismParameterError(f"objective_bits must be <= 30 (int64 headroom), got {objective_bits!r}")
        needs_height_budget = self.height is None and not self.unit.bounded
        if eps_height is None:
            self.eps_height = Fraction(DEFAULT_EPS_HEIGHT) if needs_height_budget else Fraction(0)
        else:
            self.eps_height = exact_fraction(eps_height, "eps_height", allow_zero=True)
            if needs_height_budget and self.eps_height == 0:
                raise MechanismParameterError("eps_height must be > 0 to estimate the height (or pass height=)")
            if not needs_height_budget and self.eps_height != 0:
                why = "height= is fixed" if self.height is not None else "|D| is public under bounded neighbours"
                raise MechanismParameterError(f"eps_height must be 0 (or omitted): {why}, so the height costs nothing")
        # budgets that cannot cover the partitioning are refused here, before any data or noise
        if self.eps_prt_total is not None:
            rest = eps - self.eps_height - self.eps_prt_total
            if rest <= 0:
                raise MechanismParameterError(
                    f"budgets do not cover the partitioning: eps_height + eps_prt = "
                    f"{float(self.eps_height + self.eps_prt_total):.6g} >= epsilon {float(eps):.6g}; nothing would "
                    "be left for the counts")
        else:
            h_min = self.height if self.height is not None else 1
            used = self.eps_height + h_min * self._prt_per_level(h_min)
            if used >= eps:
                raise MechanismParameterError(
                    f"budgets do not cover the partitioning: eps_height + eps_prt_per_level * h = "
                    f"{float(used):.6g} >= epsilon {float(eps):.6g} for h = {h_min}; nothing would be left for the "
                    "counts (lower eps_prt_per_level or eps_height)")

    def params(self) -> dict[str, Any]:
        p = super().params()
        p.update({"eps_prt_per_level": None if self.eps_prt_level is None else float(self.eps_prt_level),
                  "eps_prt": None if self.eps_prt_total is None else float(self.eps_prt_total),
                  "eps_height": float(self.eps_height), "height": self.height, "T": self.T,
                  "stop_count": self.stop_count, "stop_cells": self.stop_cells, "split": self.split,
                  "data_budgets": self.data_budgets, "combine_pruned": self.combine_pruned,
                  "height_constant": float(self.c0), "objective_bits": self.objective_bits,
                  "consistency": self.consistency})
        if self.consistency is not None:
            p["consistency_solver"] = str(self.consistency_solver)
        return p

    # -- the run ------------------------------------------------------------------------------------
    def _max_height(self, shape: tuple[int, int]) -> int:
        n, m = shape
        return max(1, math.ceil(math.log2(n)) + math.ceil(math.log2(m)))

    def _budget_height_cap(self) -> int | None:
        """Largest h with eps_height + h eps'_prt < eps_tot (per-level mode), else None."""
        if self.eps_prt_level is None:
            return None
        room = self.eps_total - self.eps_height
        q = room / self.eps_prt_level
        cap = math.floor(q)
        return cap - 1 if Fraction(cap) == q else cap

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Any = None, progress: bool = False) -> SpatialRelease:
        """Run HTF on a :class:`~hierdp.hierarchy.spatial.SpatialGrid` (or a 2-D count matrix)."""
        grid = as_grid(data)
        timer = Timer()
        shape = grid.domain.shape
        n_cells = shape[0] * shape[1]
        n_true = int(grid.prefix[-1, -1])
        if self.split == "alg1" and (2 * n_cells * max(n_true, 1) >= INT64_SAFE
                                     or 2 * max(n_true, 1) << self.objective_bits >= INT64_SAFE):
            raise MechanismParameterError("too many points for exact int64 split costs on this grid "
                                          "(2 x cells x points must stay below 2^62)")
        geom_cap = self._max_height(shape)
        if self.height is not None and self.height > geom_cap:
            raise MechanismParameterError(f"height {self.height} exceeds ceil(log2 rows) + ceil(log2 cols) = "
                                          f"{geom_cap} "
                                          f"for the {shape[0]} x {shape[1]} grid")
        ctx = self.start(grid, seed=seed, rng=rng, secure=secure, accountant=accountant)
        bound = self.bind_constraints(grid)  # before any noise
        eps = self.eps_total
        # 1. height
        with timer("height"):
            raw = None
            noisy_n: int | None = None
            if self.height is not None:
                h = self.height
            else:
                cap = self._budget_height_cap()
                max_h = geom_cap if cap is None else min(geom_cap, cap)
                if self.unit.bounded:
                    noisy_n = n_true  # public under bounded neighbours
                else:
                    noisy_n = int(self.count_noise(ctx, np.array([n_true]), self.eps_height, "height estimate",
                                                   what="|D| + Lap(m/eps_height), eq. (9)")[0])
                h, raw = estimate_height(noisy_n, eps, self.c0, max_h)
        eps_prt_level = self._prt_per_level(h)
        eps_data = eps - self.eps_height - h * eps_prt_level
        if eps_data <= 0:  # cannot happen after the checks and clamps above
            raise AssertionError("no data budget left")
        levels = (geometric_level_budgets if self.data_budgets == "geometric" else uniform_level_budgets)(eps_data, h)
        remain = path_remainders(levels)
        assert self.eps_height + h * eps_prt_level + sum(levels, Fraction(0)) == eps
        # the whole tree's budget is committed before its first draw: per level of splits, per data level
        sens_obj = 2 * self.count_sensitivity  # Theorem 1 (x m records; x2 for bounded)
        grid_sens = (sens_obj << self.objective_bits) + 1
        for d in range(h):
            ctx.spend(pure(eps_prt_level), f"partition, depth {d} (height {h - d})", noise="discrete_laplace",
                      sensitivity=sens_obj, evaluations=2 * self.T + 1 if self.split == "alg1" else "L-1")
        for i in range(h, -1, -1):
            ctx.spend_noise(pure(levels[i]), f"data, height {i}", GEOMETRIC, self.scale_for(levels[i]),
                            self.count_sensitivity)
        # 2-3. partition and perturb, level by level
        counts_flat = grid.counts.ravel()
        prefix = grid.prefix
        rows, cols = shape
        r0 = np.array([0], np.int64)
        r1 = np.array([rows], np.int64)
        c0 = np.array([0], np.int64)
        c1 = np.array([cols], np.int64)
        cells = np.arange(n_cells, dtype=np.int64)
        leaf_rects: list[np.ndarray] = []
        leaf_vals: list[np.ndarray] = []
        leaf_heights: list[np.ndarray] = []
        nodes_per_height: dict[int, int] = {}
        # with consistency="gls": every node (parents first), its measurement, variance and height
        tree_nodes: list[tuple[np.ndarray, ...]] = []
        level_parent = np.array([-1], np.int64)
        offset = 0
        scale_prt = 0.0  # set below for Alg. 1's noisy probes (the baseline splits draw their own)
        if self.split == "alg1":
            eps_probe = eps_prt_level / (2 * self.T + 1)
            scale_prt = self.scale_for(eps_probe, grid_sens)
        rng_ = ctx.rng
        iterator = range(h + 1)
        if progress:
            from tqdm.auto import tqdm

            iterator = tqdm(iterator, desc="HTF levels", leave=False)
        for depth in iterator:
            i = h - depth
            k_nodes = r0.size
            nodes_per_height[i] = int(k_nodes)
            with timer("perturbation"):
                area = (r1 - r0) * (c1 - c0)
                cnt = rect_sums(prefix, r0, r1, c0, c1)
                y1 = cnt + GEOMETRIC.draw(self.scale_for(levels[i]), k_nodes, rng_)
                if i == 0:
                    stop = np.ones(k_nodes, bool)
                else:
                    stop = (area <= max(self.stop_cells, 1))
                    if self.stop_count is not None:
                        stop |= y1 <= self.stop_count
                value: np.ndarray = y1
                pruned = np.flatnonzero(stop) if i > 0 else np.zeros(0, np.int64)
                if pruned.size:
                    scale2 = self.scale_for(remain[i])
                    y2 = cnt[pruned] + GEOMETRIC.draw(scale2, pruned.size, rng_)
                    if self.combine_pruned:
                        v1 = float(discrete_laplace_variance(self.scale_for(levels[i])))
                        v2 = float(discrete_laplace_variance(scale2))
                        value = y1.astype(np.float64)
                        value[pruned] = (y1[pruned] / v1 + y2 / v2) / (1 / v1 + 1 / v2)
                    else:
                        value = y1.copy()
                        value[pruned] = y2
                if stop.any():
                    leaf_rects.append(np.stack([r0[stop], r1[stop], c0[stop], c1[stop]], axis=1))
                    leaf_vals.append(value[stop])
                    leaf_heights.append(np.full(int(stop.sum()), i, np.int64))
                if self.consistency is not None:
                    tree_nodes.append(self._measurements(r0, r1, c0, c1, level_parent, y1, value, pruned, levels,
                                                         remain, i))
            go = ~stop
            level_parent = offset + np.repeat(np.flatnonzero(go), 2)
            offset += k_nodes
            if not go.any():
                break
            with timer("bookkeeping"):
                sizes = area
                node_of_cell = np.repeat(np.arange(k_nodes), sizes)
                keep_cells = go[node_of_cell]
                cells = cells[keep_cells]
                r0, r1, c0, c1, cnt, area = r0[go], r1[go], c0[go], c1[go], cnt[go], area[go]
                k_nodes = r0.size
                starts = np.zeros(k_nodes, np.int64)
                np.cumsum(area[:-1], out=starts[1:])
                node_of_cell = np.repeat(np.arange(k_nodes), area)
                n_rows, n_cols = r1 - r0, c1 - c0
                prefer_rows = (i % 2 == 0)
                split_rows = np.where(n_rows == 1, False, np.where(n_cols == 1, True, prefer_rows))
                origin = np.where(split_rows, r0, c0)
                length = np.where(split_rows, n_rows, n_cols)
                pos = cell_offsets(cells, cols, split_rows, origin, node_of_cell)
            with timer("partition"):
                if self.split == "alg1":
                    probe = LevelProbe(counts_flat[cells], pos, node_of_cell, starts, prefix,
                                       np.stack([r0, r1, c0, c1], axis=1), split_rows, cnt, self.objective_bits)

                    def noise(n: int) -> np.ndarray:
                        return GEOMETRIC.draw(scale_prt, n, rng_)

                    ks = alg1_search(probe, length, self.T, noise)
                else:
                    ks = self._baseline_splits(grid.counts, r0, r1, c0, c1, split_rows, length, eps_prt_level,
                                               grid_sens, rng_)
            with timer("bookkeeping"):
                left = pos < ks[node_of_cell]
                excl: np.ndarray = np.cumsum(left) - left
                left_rank: np.ndarray = excl - excl[starts][node_of_cell]
                n_left = np.add.reduceat(left.astype(np.int64), starts)
                right_rank = (np.arange(cells.size) - starts[node_of_cell]) - left_rank
                new_pos = starts[node_of_cell] + np.where(left, left_rank, n_left[node_of_cell] + right_rank)
                new_cells = np.empty_like(cells)
                new_cells[new_pos] = cells
                cells = new_cells
                mid_r = np.where(split_rows, r0 + ks, r1)
                mid_c = np.where(split_rows, c1, c0 + ks)
                r0 = np.stack([r0, np.where(split_rows, r0 + ks, r0)], axis=1).ravel()
                r1 = np.stack([mid_r, r1], axis=1).ravel()
                c0n = np.stack([c0, np.where(split_rows, c0, c0 + ks)], axis=1).ravel()
                c1 = np.stack([mid_c, c1], axis=1).ravel()
                c0 = c0n
        with timer("release"):
            rects = np.concatenate(leaf_rects) if leaf_rects else np.zeros((0, 4), np.int64)
            vals = np.concatenate(leaf_vals) if leaf_vals else np.zeros(0, np.int64)
            heights = np.concatenate(leaf_heights) if leaf_heights else np.zeros(0, np.int64)
            uniq, per = np.unique(heights, return_counts=True)
            details = {
                "height": h, "height_formula": raw, "noisy_n": noisy_n,
                "epsilon_total": float(eps), "epsilon_height": float(self.eps_height),
                "epsilon_prt_per_level": float(eps_prt_level), "epsilon_prt": float(h * eps_prt_level),
                "epsilon_data": float(eps_data),
                "epsilon_data_levels": {i: float(levels[i]) for i in range(h, -1, -1)},
                "exact": {"epsilon_total": eps, "epsilon_height": self.eps_height,
                          "epsilon_prt_per_level": eps_prt_level,
                          "epsilon_data": eps_data, "epsilon_data_levels": list(levels), "remainders": list(remain)},
                "budget_identity": (f"eps_height + eps_prt_per_level * h + eps_data = {float(self.eps_height):.6g} + "
                                    f"{float(eps_prt_level):.6g} * {h} + {float(eps_data):.6g} = {float(eps):.6g} "
                                    "(exact Fractions)"),
                "nodes_per_height": nodes_per_height,
                "leaves_per_height": {int(a): int(b) for a, b in zip(uniq, per, strict=False)},
            }
        notes: tuple[str, ...] = ("leaf counts only (paper 002 releases the leaves); raw noisy counts can be negative",
                                  "partition spends are per level of the tree: a level where no node split spends less")
        tree = None
        solver_name = None
        if self.consistency is not None:
            with timer("consistency"):
                parent, node_rects, y, var, node_heights = (np.concatenate(a) for a in zip(*tree_nodes, strict=True))
                tc = self.constraints_on_tree(ctx, bound, parent, node_rects)
                values, sol = self.solve_consistency(ctx, parent, y, var, self.consistency_solver, self.cross_check,
                                                     self.solver_options, tc)
                solver_name = sol.solver
                tree = SpatialTree(parent, node_rects, values, h - node_heights)
                leaves = tree.is_leaf
                rects, vals, heights = node_rects[leaves], values[leaves], node_heights[leaves]
            notes = ("leaves after Hay's consistency over HTF's own tree (weighted least squares of every node's "
                     "draw; values can be negative)", notes[1])
        stated, notes = self.constraint_accounting(bound, details, notes)
        rel = self.finish(ctx, grid, rects, vals, timer=timer, notes=notes, details=stated, tree=tree,
                          solver=solver_name)
        rel.details["leaf_heights"] = heights
        return rel

    def _measurements(self, r0: np.ndarray, r1: np.ndarray, c0: np.ndarray, c1: np.ndarray, parent: np.ndarray,
                      y1: np.ndarray, value: np.ndarray, pruned: np.ndarray, levels: list[Fraction],
                      remain: list[Fraction], i: int) -> tuple[np.ndarray, ...]:
        """One level's nodes for the consistency step: ``(parent, rects, measurement, variance,
        height)``; a pruned leaf is measured by the value it releases (its second draw, or the
        average of both with ``combine_pruned``), every other node by its draw."""
        v1 = float(discrete_laplace_variance(self.scale_for(levels[i])))
        y = y1.astype(np.float64)
        var = np.full(y.size, v1)
        if pruned.size:
            v2 = float(discrete_laplace_variance(self.scale_for(remain[i])))
            y[pruned] = np.asarray(value, dtype=np.float64)[pruned]
            var[pruned] = 1.0 / (1.0 / v1 + 1.0 / v2) if self.combine_pruned else v2
        return (parent, np.stack([r0, r1, c0, c1], axis=1), y, var, np.full(y.size, i, np.int64))

    def _prt_per_level(self, h: int) -> Fraction:
        """The partition budget of one level of a tree of height ``h`` (given per level, or the total
        split evenly over the levels)."""
        if self.eps_prt_level is not None:
            return self.eps_prt_level
        if self.eps_prt_total is None:  # the constructor sets exactly one of the two
            raise MechanismParameterError("internal error: neither eps_prt nor eps_prt_per_level is set")
        return self.eps_prt_total / h

    def _baseline_splits(self, counts: np.ndarray, r0: np.ndarray, r1: np.ndarray, c0: np.ndarray, c1: np.ndarray,
                         split_rows: np.ndarray, length: np.ndarray, eps_prt_level: Fraction, grid_sens: int,
                         rng: Any) -> np.ndarray:
        """Eq. (8): every candidate of a node noised at eps'_prt / (L - 1); the argmin (one node at a time)."""
        out = np.empty(r0.size, np.int64)
        for j in range(r0.size):
            block = counts[r0[j]:r1[j], c0[j]:c1[j]]
            a, b, n1, n2 = split_cost_terms_all(block, 0 if split_rows[j] else 1)
            o = gridded_objective(a, b, n1, n2, self.objective_bits)
            scale = self.scale_for(eps_prt_level / int(length[j] - 1), grid_sens)
            noisy = o + GEOMETRIC.draw(scale, o.size, rng)
            out[j] = int(np.argmin(noisy)) + 1
        return out
