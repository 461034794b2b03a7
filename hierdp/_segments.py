"""Group / segment and forest kernels shared by the fast paths and the model layer (numpy only).

A *batch of groups* is the shape of every TopDown level: group ``g`` owns the contiguous entries
``values[offsets[g]:offsets[g+1]]`` and must sum to ``totals[g]``. The helpers here validate such
batches (:func:`check_groups`), guard results (:func:`check_sums`) and give the vectorized
per-segment operations the fast paths are built from (:func:`segment_sort`,
:func:`segment_cumsum`, :func:`ulp_tolerance`).

Forest kernels work on a parent array (``-1`` for roots): :func:`children_csr` (the children of
every node as one CSR), :func:`gather_ranges` (the concatenated index ranges of a set of nodes'
children, or of any runs), and, with pointer doubling so that their cost is ``O(n log depth)``
whatever the depth, :func:`follow_to_terminal` and :func:`depth_by_doubling`.

This is the one home of these kernels: hierarchies, O/D trees, spines and the TopDown trees use
them (the solvers' cost-table segments keep their own copies until their owners move them here).
This module imports nothing from :mod:`hierdp` beyond the error root, so every layer may use it.
"""

from __future__ import annotations

import numpy as np

from hierdp.errors import HierdpError, exact_number

#: "is this float an integer" decisions on real-valued groups allow this many ulps of the group's
#: magnitude (a fixed *relative* tolerance would reach whole units at counts of 10^12)
ULPS = 8
#: largest magnitude of values and totals: beyond 2^52 float64 no longer resolves integers
MAX_MAGNITUDE = 2.0 ** 52
#: largest magnitude when real-valued arithmetic (fractional noise, projections) is involved:
#: sums of a group's values must still resolve units with room for rounding
MAX_REAL_MAGNITUDE = 2.0 ** 44


class GroupError(HierdpError, ValueError):
    """A batch of groups is malformed (shapes, offsets, totals, non-finite or too large values)."""


def ulp_tolerance(scale: np.ndarray | float) -> np.ndarray:
    """Absolute tolerance per group: :data:`ULPS` ulps of the group's magnitude (at least of 1)."""
    return ULPS * np.spacing(np.maximum(1.0, np.asarray(scale, dtype=float)))


def magnitude_limit(real_arithmetic: bool) -> tuple[float, str]:
    """``(limit, text)``: the largest magnitude a fast path resolves to single units."""
    return (MAX_REAL_MAGNITUDE, "2^44") if real_arithmetic else (MAX_MAGNITUDE, "2^52")


def group_magnitude_problem(values: np.ndarray, totals: np.ndarray, *, real_arithmetic: bool | None = None
                            ) -> str | None:
    """The reason a batch is beyond float64's unit resolution, or None (used by ``unsupported()``)."""
    vals = np.asarray(values, dtype=float)
    tot = np.asarray(totals, dtype=float)
    fin = vals[np.isfinite(vals)]
    if real_arithmetic is None:
        real_arithmetic = bool(np.any(fin != np.rint(fin)))
    limit, text = magnitude_limit(real_arithmetic)
    big = max(float(np.abs(fin).max()) if fin.size else 0.0,
              float(np.abs(tot[np.isfinite(tot)]).max()) if tot.size else 0.0)
    if big >= limit:
        kind = "real-valued targets" if real_arithmetic else "integer values"
        return (f"magnitude {exact_number(big)} is beyond {text}, the largest at which float64 resolves single units "
                f"for {kind}")
    return None


# ---------------------------------------------------------------------------------- validation
def check_groups(
    values: np.ndarray | list[float],
    offsets: np.ndarray | list[int],
    totals: np.ndarray | list[float],
    *,
    integer_totals: bool = True,
    real_arithmetic: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a batch of groups; returns ``(values float64, offsets int64, totals)``.

    ``totals`` is int64 when ``integer_totals`` (the totals must be non-negative integers), else
    float64 (non-negative, finite). Empty groups must have total 0. Magnitudes must be below
    :data:`MAX_MAGNITUDE`, or :data:`MAX_REAL_MAGNITUDE` when ``real_arithmetic`` (default: when
    some value is not an integer).

    Raises:
        GroupError: naming the offending argument, group or entry.
    """
    vals = np.asarray(values, dtype=np.float64)
    if vals.ndim != 1:
        raise GroupError(f"values must be one-dimensional, got shape {vals.shape}")
    if not np.all(np.isfinite(vals)):
        raise GroupError(f"values must be finite; entry {int(np.flatnonzero(~np.isfinite(vals))[0])} is not")
    if real_arithmetic is None:
        real_arithmetic = bool(np.any(vals != np.rint(vals)))
    limit, limit_text = magnitude_limit(real_arithmetic)
    if vals.size and np.abs(vals).max() >= limit:
        raise GroupError(f"values must be below {limit_text} in magnitude (beyond it float64 cannot resolve "
                         f"single units here); entry {int(np.argmax(np.abs(vals)))} is "
                         f"{exact_number(vals[np.argmax(np.abs(vals))])}")
    offs = np.asarray(offsets)
    if offs.ndim != 1 or offs.size < 1:
        raise GroupError("offsets must be a one-dimensional array with len(totals)+1 entries")
    if not np.issubdtype(offs.dtype, np.integer) and (not np.all(np.isfinite(offs))
                                                      or np.any(offs != np.round(offs))):
        raise GroupError("offsets must be integers")
    offs = offs.astype(np.int64)
    tot = np.asarray(totals, dtype=np.float64)
    if tot.ndim != 1 or offs.size != tot.size + 1:
        raise GroupError(f"offsets has {offs.size} entries; expected len(totals)+1 = {tot.size + 1}")
    if offs[0] != 0 or offs[-1] != vals.size:
        raise GroupError(f"offsets must start at 0 and end at len(values) = {vals.size}")
    sizes = np.diff(offs)
    if np.any(sizes < 0):
        raise GroupError(f"offsets must be non-decreasing (group {int(np.flatnonzero(sizes < 0)[0])})")
    if not np.all(np.isfinite(tot)):
        raise GroupError(f"totals must be finite; group {int(np.flatnonzero(~np.isfinite(tot))[0])} is not")
    if np.any(tot < 0):
        g = int(np.flatnonzero(tot < 0)[0])
        raise GroupError(f"totals must be non-negative; group {g} has total {tot[g]}")
    if tot.size and tot.max() >= limit:
        g = int(np.argmax(tot))
        raise GroupError(f"totals must be below {limit_text}; group {g} has total {exact_number(tot[g])}")
    if integer_totals:
        if np.any(tot != np.round(tot)):
            g = int(np.flatnonzero(tot != np.round(tot))[0])
            raise GroupError(f"totals must be integers; group {g} has total {tot[g]}")
        tot = tot.astype(np.int64)
    bad = (sizes == 0) & (tot != 0)
    if bad.any():
        g = int(np.flatnonzero(bad)[0])
        raise GroupError(f"group {g} has no entries but total {tot[g]} (an empty group must have total 0)")
    return vals, offs, tot


def check_sums(out: np.ndarray, offsets: np.ndarray, totals: np.ndarray) -> None:
    """Refuse to return groups that do not sum to their totals or have negative entries.

    A cheap guard (one ``reduceat``) so that no inconsistent level is ever labelled optimal. With
    int64 ``out`` and ``totals`` the comparison is exact.
    """
    sizes = np.diff(offsets)
    ne = sizes > 0
    if not ne.any():
        return
    sums = np.add.reduceat(out, offsets[:-1][ne])
    bad = (sums != totals[ne]) | (np.minimum.reduceat(out, offsets[:-1][ne]) < 0)
    if bad.any():
        g = int(np.flatnonzero(ne)[np.flatnonzero(bad)[0]])
        raise RuntimeError(f"internal error: group {g} does not sum to its total {totals[g]} "
                           f"(got {sums[np.flatnonzero(bad)[0]]}) or has a negative entry; please report this input")


# ---------------------------------------------------------------------------------- segments
def segment_cumsum(arr: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sum restarted at every segment (segments contiguous, non-empty).

    Integers: one global cumulative sum minus each segment's prefix (exact). Floats: a grouped
    cumulative sum (pandas), since subtracting a global prefix would cost the precision of the
    whole level's running total (measured: 3e-12 on a group summing to 27 in a level of 3,000
    entries; worse at large counts).
    """
    if np.issubdtype(np.asarray(arr).dtype, np.floating):
        import pandas as pd

        gid = np.repeat(np.arange(starts.size, dtype=np.int64), sizes)
        return pd.Series(arr).groupby(gid, sort=False).cumsum().to_numpy()
    cs = np.cumsum(arr)
    before = np.concatenate([np.zeros(1, dtype=cs.dtype), cs])[starts]  # sum of earlier segments
    return cs - np.repeat(before, sizes)


def segment_sort(keys: np.ndarray, gid: np.ndarray) -> np.ndarray:
    """Permutation sorting each contiguous segment by ``keys`` (stable: ties by position).

    Same result as ``np.lexsort((keys, gid))``, about twice as fast: a stable global sort gives
    every entry its rank, and ``gid * n + rank`` is a unique integer key.
    """
    n = keys.size
    by_key = np.argsort(keys, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[by_key] = np.arange(n, dtype=np.int64)
    return np.argsort(gid.astype(np.int64) * n + rank)


# ---------------------------------------------------------------------------------- forests
def gather_ranges(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, offsets)``: the concatenation of ``arange(starts[g], starts[g] + lengths[g])``
    over g, without a loop; run g occupies ``indices[offsets[g]:offsets[g + 1]]``.

    ``lengths`` must be non-negative (a run of length 0 contributes nothing).
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return np.zeros(0, np.int64), offsets
    # position within its run = global position - the run's first position
    within = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    return np.repeat(starts, lengths) + within, offsets


def children_csr(parent: np.ndarray, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr, child)``: the children of node ``u`` are ``child[ptr[u]:ptr[u + 1]]``, in index
    order (a stable counting sort by parent); ``parent[i] < 0`` marks a root. ``n`` is the number
    of possible parents (default: ``len(parent)``; more when the parents are another array's, as
    between two levels)."""
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.size if n is None else int(n)
    has = parent >= 0
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(parent[has], minlength=n), out=ptr[1:])
    kids = np.flatnonzero(has)
    return ptr, kids[np.argsort(parent[kids], kind="stable")]


def follow_to_terminal(step: np.ndarray) -> np.ndarray:
    """Where following ``step`` from every node ends: ``step[i] == i`` marks a terminal.

    Pointer doubling: after k rounds ``jump[i]`` is the node reached after 2^k steps (terminals are
    fixed points), so ``ceil(log2(longest path)) + 1`` rounds settle every node; the loop stops when
    nothing changes, with no cap. ``step`` must not have cycles other than terminals (checked by
    the caller, e.g. :class:`hierdp.models.Problem` refuses cyclic parent arrays).
    """
    jump = np.asarray(step, dtype=np.int64).copy()
    while True:
        nxt = jump[jump]
        if np.array_equal(nxt, jump):
            return jump
        jump = nxt


def depth_by_doubling(parent: np.ndarray) -> np.ndarray:
    """Number of proper ancestors of every node of an acyclic parent array (roots: 0).

    Wyllie's list ranking: ``dist[i]`` counts the edges from ``i`` to ``jump[i]``; each round adds
    the distance of the node jumped to and doubles the jump, so the cost is ``O(n log depth)``.
    """
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.size
    idx = np.arange(n, dtype=np.int64)
    jump = np.where(parent >= 0, parent, idx)
    dist = (parent >= 0).astype(np.int64)
    while True:
        moving = jump != jump[jump]
        if not moving.any():
            return dist
        dist = dist + np.where(moving, dist[jump], 0)
        jump = jump[jump]
