"""Non-TopDown baselines of paper 000 §5: VanillaGauss and the stability histogram SH (Thm 8).

Both perturb the leaves only and aggregate upwards, so every level of their release is
consistent but the error of a node grows with the number of leaves below it (Prop. 1).

* :class:`VanillaGauss` adds discrete Gaussian noise (the whole ρ on one histogram, σ² =
  Δ₂²/(2ρ)) to *every* leaf of the universe, zero leaves included, so it needs a materializable
  tree: it refuses trees whose leaf level exceeds ``max_universe`` potential nodes.
* :class:`StabilityHistogram` (alias :data:`SH`) adds Laplace noise of scale Δ₁/ε to the
  positive leaves only and zeroes noisy counts below ``t = 1 + 2 log(2/δ)/ε`` (Thm 8: Δ₁ = 2
  for bounded neighbours and one trip per user). For m trips per user the threshold used is
  ``t = Δ∞ + b·log(2m/δ)`` with ``b = Δ₁/ε``, Δ₁ = 2m (bounded) or m (unbounded) and Δ∞ = 1
  (distinct trips) or m: it equals Thm 8's at m = 1 and bounds the probability that any of a
  user's ≤ m private pairs survives by δ (union bound on the Laplace tail). The noise is the
  discrete Laplace (geometric mechanism, integer counts) by default, or continuous Laplace
  rounded to integers (post-processing) with ``discrete=False``.
"""

from __future__ import annotations

from hierdp.errors import HierdpError

import math
import time
from typing import Any

import numpy as np

from hierdp.hierarchy.topdown_tree import TopDownTree, as_topdown_tree
from hierdp.mechanisms.topdown import PrivacySpec, guarantee_text, level_sensitivity_sq
from hierdp.privacy import samplers
from hierdp.privacy.accounting import check_delta, check_epsilon
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.rng import resolve_rng
from hierdp.release import Release, ReleaseLevel

__all__ = ["VanillaGauss", "StabilityHistogram", "SH", "UniverseTooLarge", "sh_threshold"]


class UniverseTooLarge(HierdpError, ValueError):
    """The tree's universe is too large to materialize for a universe-wide baseline."""


def _aggregate_up(tree: TopDownTree, leaf_keys: np.ndarray, leaf_values: np.ndarray) -> list[ReleaseLevel]:
    """Levels 0..T from leaf keys/values by summing into parents (``tree.parent_of``)."""
    T = tree.n_levels - 1
    levels: list[ReleaseLevel] = [None] * (T + 1)  # type: ignore[list-item]
    keys, vals = np.asarray(leaf_keys, np.int64), np.asarray(leaf_values, np.int64)
    for L in range(T, 0, -1):
        pk = tree.parent_of(L, keys)
        uk, inv = np.unique(pk, return_inverse=True)
        inv = inv.ravel()
        levels[L] = ReleaseLevel(keys, inv.astype(np.int64), vals)
        sums = np.bincount(inv, weights=vals.astype(float), minlength=uk.size)
        keys, vals = uk.astype(np.int64), np.rint(sums).astype(np.int64)
    if keys.size == 0:
        keys, vals = np.array([tree.root_key], np.int64), np.array([0], np.int64)
    levels[0] = ReleaseLevel(keys, np.full(keys.size, -1, np.int64), vals)
    return levels


class VanillaGauss:
    """Discrete Gaussian noise on every leaf of the universe, aggregated up (paper 000 §5).

    Args:
        epsilon, delta / rho / budget: the budget, as for :class:`~hierdp.mechanisms.InfTDA`
            (the whole ρ goes to the leaf histogram).
        bounded, contributions, distinct: neighbouring relation and trips per user (sensitivity
            as for one level of InfTDA).
        max_universe: refuse trees with more potential leaves than this.
        secure, conversion: as for InfTDA.

    The release keeps every node whose value is non-zero or that has a released descendant
    (so parent links stay intact); values may be negative.
    """

    name = "VanillaGauss"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, rho: float | None = None,
                 budget: Budget | None = None, bounded: bool = True, contributions: int = 1, distinct: bool = False,
                 max_universe: float = 5e7, secure: bool = False, conversion: str = "analytic") -> None:
        self.spec = PrivacySpec.resolve(epsilon, delta, rho, budget, conversion)
        self.bounded, self.contributions, self.distinct = bool(bounded), int(contributions), bool(distinct)
        self.sens_sq = level_sensitivity_sq(self.bounded, self.contributions, self.distinct)
        self.max_universe = float(max_universe)
        self.secure = bool(secure)

    def release(self, tree: Any, *, seed: int | None = None, rng: Any = None, progress: bool = False) -> Release:
        """Noise every potential leaf, aggregate up; see the class docstring."""
        tree = as_topdown_tree(tree)
        T = tree.n_levels - 1
        if T < 1:
            raise ValueError("the tree has no level below the root: nothing to release")
        universe = tree.level_size(T)
        if universe > self.max_universe:
            raise UniverseTooLarge(
                f"VanillaGauss needs noise on all {universe:,} potential leaves, more than max_universe="
                f"{self.max_universe:,.0f}; use InfTDA or SH (or raise max_universe if memory allows)")
        rng = resolve_rng(rng, seed, secure=self.secure)
        acct = Accountant(self.spec.budget)
        b = acct.spend(self.spec.budget, f"level {T} ({tree.level_names[T]}) all leaves")
        sigma2 = self.sens_sq / (2.0 * float(b.rho))
        t0 = time.perf_counter()
        # materialize the universe top down: keys and group structure of every level
        keys = [np.array([tree.root_key], np.int64)]
        groups = [np.full(1, -1, np.int64)]
        for L in range(T):
            ck, off, _ = tree.expand(L, keys[-1])
            keys.append(ck)
            groups.append(np.repeat(np.arange(keys[-2].size, dtype=np.int64), np.diff(off)))
        leaf_true = tree.counts(T, keys[T])
        vals = [None] * (T + 1)
        vals[T] = leaf_true + samplers.discrete_gaussian(sigma2, keys[T].size, rng)
        # leaves above level T (uneven plain hierarchies) are noised too
        for L in range(T - 1, -1, -1):
            s = np.bincount(groups[L + 1], weights=vals[L + 1].astype(float), minlength=keys[L].size)
            has = np.bincount(groups[L + 1], minlength=keys[L].size) > 0
            v = np.rint(s).astype(np.int64)
            if (~has).any():
                idx = np.flatnonzero(~has)
                v[idx] = tree.counts(L, keys[L][idx]) + samplers.discrete_gaussian(sigma2, idx.size, rng)
            vals[L] = v
        # keep non-zero nodes and the ancestors of kept nodes
        keep = [None] * (T + 1)
        keep[T] = vals[T] != 0
        for L in range(T - 1, -1, -1):
            kids = np.bincount(groups[L + 1][keep[L + 1]], minlength=keys[L].size) > 0
            keep[L] = (vals[L] != 0) | kids
        keep[0][:] = True
        levels = []
        newpos_prev = None
        for L in range(T + 1):
            k = keep[L]
            par = np.full(int(k.sum()), -1, np.int64) if L == 0 else newpos_prev[groups[L][k]]
            levels.append(ReleaseLevel(keys[L][k], par, vals[L][k]))
            newpos_prev = np.cumsum(k) - 1
        elapsed = time.perf_counter() - t0
        acc = {"rho": self.spec.rho, "delta": self.spec.delta, "epsilon_target": self.spec.epsilon_target,
               "epsilon": self.spec.implied_epsilon("analytic"), "epsilon_numeric": self.spec.implied_epsilon("numeric"),
               "conversion": self.spec.conversion, "bounded": self.bounded, "contributions": self.contributions,
               "l2_sensitivity": math.sqrt(self.sens_sq),
               "per_level": [{"level": T, "name": tree.level_names[T], "rho": float(b.rho), "sigma2": sigma2,
                              "spend": f"rho={float(b.rho):.6g} sigma2={sigma2:.6g} on {universe:,} leaves"}],
               "ledger": acct.summary(self.spec.delta),
               "guarantee": guarantee_text(self.spec, "bounded neighbours" if self.bounded else "unbounded neighbours",
                                           f", m={self.contributions} trips per user")}
        timings = [0.0] * T + [elapsed]
        stats = [{"nodes": int(k.size)} for k in keys]
        return Release(levels, list(tree.level_names), self.name, None, acc, timings, stats,
                       namer=getattr(tree, "namer", None),
                       params={"universe": universe, "sigma2": sigma2, "bounded": self.bounded})


def sh_threshold(epsilon: float, delta: float, *, bounded: bool = True, contributions: int = 1,
                 distinct: bool = False) -> tuple[float, float]:
    """``(scale, threshold)`` of the stability histogram (see module docstring).

    For bounded neighbours and one trip per user: scale 2/ε and threshold 1 + 2 log(2/δ)/ε
    (paper 000, Thm 8).
    """
    eps, d = check_epsilon(epsilon), check_delta(delta)
    m = int(contributions)
    if m < 1:
        raise PrivacyParameterError(f"contributions must be a positive integer, got {contributions!r}")
    l1 = 2.0 * m if bounded else float(m)
    scale = l1 / eps
    linf = 1.0 if distinct else float(m)
    return scale, linf + scale * math.log(2.0 * m / d)


class StabilityHistogram:
    """The stability-based histogram SH (paper 000, Thm 8) on the tree's leaves, aggregated up.

    Args:
        epsilon, delta: the (ε, δ)-DP guarantee (pure Laplace noise plus thresholding).
        bounded, contributions, distinct: neighbouring relation and trips per user.
        discrete: discrete Laplace (default) or continuous Laplace rounded.
        secure: OS randomness with exact samplers.
    """

    name = "SH"

    def __init__(self, epsilon: float, delta: float, *, bounded: bool = True, contributions: int = 1,
                 distinct: bool = False, discrete: bool = True, secure: bool = False) -> None:
        self.epsilon, self.delta = check_epsilon(epsilon), check_delta(delta)
        self.bounded, self.contributions, self.distinct = bool(bounded), int(contributions), bool(distinct)
        self.scale, self.threshold = sh_threshold(epsilon, delta, bounded=bounded, contributions=contributions,
                                                  distinct=distinct)
        self.discrete = bool(discrete)
        self.secure = bool(secure)

    def release(self, tree: Any, *, seed: int | None = None, rng: Any = None, progress: bool = False) -> Release:
        """Noise the positive leaves, drop those below the threshold, aggregate up."""
        tree = as_topdown_tree(tree)
        T = tree.n_levels - 1
        if T < 1:
            raise ValueError("the tree has no level below the root: nothing to release")
        rng = resolve_rng(rng, seed, secure=self.secure)
        t0 = time.perf_counter()
        acct = Accountant(Budget.approx(self.epsilon, self.delta))
        acct.spend(Budget.approx(self.epsilon, self.delta), f"level {T} ({tree.level_names[T]}) positive leaves")
        keys, counts = tree.nonzero(T)
        if int(counts.sum()) != int(tree.root_count):
            raise ValueError(f"SH noises the leaves of the last level ({tree.level_names[T]!r}), which hold "
                             f"{int(counts.sum())} of the {int(tree.root_count)} records: every record must "
                             "sit at the last level (true of O/D trees; not of this uneven hierarchy)")
        if self.discrete:
            noisy = counts + samplers.discrete_laplace(self.scale, keys.size, rng)
            keep = noisy >= self.threshold
        else:
            real = counts + samplers.laplace(self.scale, keys.size, rng)
            keep = real >= self.threshold  # threshold the real value (Thm 8), then round
            noisy = np.rint(real).astype(np.int64)
        levels = _aggregate_up(tree, keys[keep], noisy[keep])
        elapsed = time.perf_counter() - t0
        neighbours = "bounded neighbours" if self.bounded else "unbounded neighbours"
        acc = {"epsilon": self.epsilon, "delta": self.delta, "rho": None, "bounded": self.bounded,
               "contributions": self.contributions, "l1_sensitivity": self.scale * self.epsilon,
               "laplace_scale": self.scale, "threshold": self.threshold,
               "per_level": [{"level": T, "name": tree.level_names[T],
                              "spend": f"eps={self.epsilon:.6g} delta={self.delta:.3g} (Laplace scale "
                                       f"{self.scale:.6g}, threshold {self.threshold:.6g})"}],
               "ledger": acct.summary(),
               "guarantee": f"({self.epsilon:.6g}, {self.delta:.3g})-DP ({neighbours}, m={self.contributions} "
                            f"trips per user; stability histogram, Thm 8)"}
        timings = [0.0] * T + [elapsed]
        stats = [{} for _ in range(T)] + [{"positive_leaves": int(keys.size), "released_leaves": int(keep.sum())}]
        return Release(levels, list(tree.level_names), self.name, None, acc, timings, stats,
                       namer=getattr(tree, "namer", None),
                       params={"epsilon": self.epsilon, "delta": self.delta, "threshold": self.threshold})


#: Short alias used in the paper.
SH = StabilityHistogram
