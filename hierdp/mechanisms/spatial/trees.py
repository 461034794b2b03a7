"""Rectangle trees for the tree baselines (QuadTree, kd-tree): level-by-level construction,
vectorized over every node of a level, and the private median of a kd-tree split.

A tree is held as flat arrays in level order (parents before children): ``parent``, ``rects``
(``[r0, r1, c0, c1]`` in cells, half-open) and ``depth``. Splits:

* :func:`quad_split` - data-independent: rows and columns halved (a node with one row or one column
  is halved along the other axis only; a single cell does not split);
* :func:`median_split` - a kd-tree split at a private median: the exponential mechanism over the
  public cell boundaries ``k = 1 .. L-1`` with utility ``U(k) = -|L_k - R_k|`` (points left minus
  points right of the boundary; one record moves it by at most 1, so ``ΔU = m`` unbounded, ``2m``
  bounded - enumerated in the tests), ``Pr(k) ∝ exp(ε U(k) / (2 ΔU))``. Seeded mode samples by
  Gumbel-max (vectorized over all candidates of a level); secure mode samples exactly, node by node,
  by rejection with exact ``Bernoulli(exp(-γ))`` draws (:meth:`hierdp.privacy.rng.SecureRandom.bernoulli_exp`);
* :func:`midpoint_split` - halve along one axis (the data-independent half of a hybrid kd-tree).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any
from collections.abc import Callable

import numpy as np

from hierdp.hierarchy.spatial import rect_sums
from hierdp.privacy.rng import SecureRandom

__all__ = ["build_tree", "exponential_median", "median_split", "midpoint_split", "quad_split"]

Split = Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray]]


def build_tree(shape: tuple[int, int], height: int, split: Split) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(parent, rects, depth)`` of a tree grown from the whole grid for ``height`` levels.

    ``split(depth, rects)`` gets the splittable nodes of a level (more than one cell) and returns
    ``(local_parent, child_rects)``: for each child, the index of its parent among ``rects``.
    """
    rows, cols = shape
    parents = [np.array([-1], np.int64)]
    rects = [np.array([[0, rows, 0, cols]], np.int64)]
    depths = [np.zeros(1, np.int64)]
    offset = 0
    level = rects[0]
    for d in range(height):
        area = (level[:, 1] - level[:, 0]) * (level[:, 3] - level[:, 2])
        can = np.flatnonzero(area > 1)
        if can.size == 0:
            break
        local, kids = split(d, level[can])
        parents.append(offset + can[local])
        rects.append(kids)
        depths.append(np.full(kids.shape[0], d + 1, np.int64))
        offset += level.shape[0]
        level = kids
    return np.concatenate(parents), np.concatenate(rects), np.concatenate(depths)


def quad_split(depth: int, rects: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Halve rows and columns (fanout 4, or 2 for a node one cell thick)."""
    r0, r1, c0, c1 = rects.T
    nr = np.where(r1 - r0 > 1, 2, 1)
    nc = np.where(c1 - c0 > 1, 2, 1)
    rm = (r0 + r1) // 2
    cm = (c0 + c1) // 2
    cnt = nr * nc
    local = np.repeat(np.arange(rects.shape[0]), cnt)
    # child slot j in 0..cnt-1: row half = j // nc, column half = j % nc
    slot = np.arange(local.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    nc_l = nc[local]
    rh = slot // nc_l
    ch = slot % nc_l
    two_r = nr[local] == 2
    two_c = nc_l == 2
    kr0 = np.where(two_r & (rh == 1), rm[local], r0[local])
    kr1 = np.where(two_r & (rh == 0), rm[local], r1[local])
    kc0 = np.where(two_c & (ch == 1), cm[local], c0[local])
    kc1 = np.where(two_c & (ch == 0), cm[local], c1[local])
    return local, np.stack([kr0, kr1, kc0, kc1], axis=1)


def _axis(depth: int, rects: np.ndarray) -> np.ndarray:
    """True where the node splits its rows: rows at even depths, columns at odd ones, the other axis
    when the preferred one is a single cell thick."""
    nrow = rects[:, 1] - rects[:, 0]
    ncol = rects[:, 3] - rects[:, 2]
    return np.where(nrow == 1, False, np.where(ncol == 1, True, depth % 2 == 0))


def _children(rects: np.ndarray, rows_axis: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r0, r1, c0, c1 = rects.T
    mid_r = np.where(rows_axis, r0 + k, r1)
    mid_c = np.where(rows_axis, c1, c0 + k)
    left = np.stack([r0, mid_r, c0, mid_c], axis=1)
    right = np.stack([np.where(rows_axis, r0 + k, r0), r1, np.where(rows_axis, c0, c0 + k), c1], axis=1)
    kids = np.stack([left, right], axis=1).reshape(-1, 4)
    return np.repeat(np.arange(rects.shape[0]), 2), kids


def midpoint_split(depth: int, rects: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Halve along the depth's axis (binary, data-independent)."""
    rows_axis = _axis(depth, rects)
    length = np.where(rows_axis, rects[:, 1] - rects[:, 0], rects[:, 3] - rects[:, 2])
    return _children(rects, rows_axis, length // 2)


def exponential_median(prefix: np.ndarray, rects: np.ndarray, rows_axis: np.ndarray, epsilon: Fraction,
                       sensitivity: int, rng: Any) -> np.ndarray:
    """A private median boundary ``k`` (1 .. L-1) per node by the exponential mechanism (see the module
    docstring). ``epsilon`` is each node's budget (nodes of a level are disjoint)."""
    r0, r1, c0, c1 = rects.T
    length = np.where(rows_axis, r1 - r0, c1 - c0)
    ncand = length - 1
    node = np.repeat(np.arange(rects.shape[0]), ncand)
    k = np.arange(node.size) - np.repeat(np.cumsum(ncand) - ncand, ncand) + 1
    ax = rows_axis[node]
    left = rect_sums(prefix, r0[node], np.where(ax, r0[node] + k, r1[node]), c0[node],
                     np.where(ax, c1[node], c0[node] + k))
    total = rect_sums(prefix, r0, r1, c0, c1)
    util = -np.abs(2 * left - total[node])  # -|L - R|, an integer
    starts = np.cumsum(ncand) - ncand
    if isinstance(rng, SecureRandom):
        return _exact_em(util, starts, ncand, Fraction(epsilon) / (2 * sensitivity), rng)
    beta = float(Fraction(epsilon) / (2 * sensitivity))
    score = beta * util + rng.gumbel(size=util.size)
    best = np.maximum.reduceat(score, starts)
    hit = score == best[node]
    # the first maximiser of each segment (ties have probability 0)
    first = np.full(rects.shape[0], -1, np.int64)
    idx = np.flatnonzero(hit)
    first[node[idx][::-1]] = idx[::-1]
    return k[first]


def _exact_em(util: np.ndarray, starts: np.ndarray, ncand: np.ndarray, beta: Fraction, rng: SecureRandom) -> np.ndarray:
    """Exact exponential mechanism per node: propose a candidate uniformly, accept it with probability
    ``exp(-beta (U_max - U_k))`` (exact Bernoulli): the accepted candidate has law ∝ exp(beta U_k)."""
    out = np.empty(starts.size, np.int64)
    for j, (s, n) in enumerate(zip(starts.tolist(), ncand.tolist(), strict=False)):
        u = util[s:s + n]
        top = int(u.max())
        while True:
            c = rng.randbelow(n)
            if rng.bernoulli_exp(beta * (top - int(u[c]))):
                out[j] = c + 1
                break
    return out


def median_split(prefix: np.ndarray, epsilon: Fraction, sensitivity: int, rng: Any) -> Split:
    """A split function for :func:`build_tree` that cuts every node at its private median."""
    def split(depth: int, rects: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows_axis = _axis(depth, rects)
        k = exponential_median(prefix, rects, rows_axis, epsilon, sensitivity, rng)
        return _children(rects, rows_axis, k)
    return split
