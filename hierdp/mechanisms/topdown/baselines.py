"""Non-TopDown baselines of paper 000 §5: VanillaGauss and the stability histogram SH (Thm 8).

Both perturb the leaves only and aggregate upwards, so every level of their release is
consistent but the error of a node grows with the number of leaves below it (Prop. 1). Neither
post-processes with a solver (``solver=`` is refused).

* :class:`VanillaGauss` adds discrete Gaussian noise (the whole ρ on one histogram, σ² =
  Δ₂²/(2ρ) rounded up) to *every* leaf of the universe, zero leaves included, so it needs a
  materializable tree: it refuses trees whose leaf level exceeds ``max_universe`` potential nodes.
  Its values are raw noisy sums: they can be negative, and its total is noisy even under bounded
  neighbours (where n is public and unused) - the release says so. ``clamp=True`` instead sets
  negative leaves to 0 and re-sums the parents (post-processing: same guarantee, non-negative).
* :class:`StabilityHistogram` (alias :data:`SH`) adds Laplace noise of scale Δ₁/ε to the
  positive leaves only and zeroes noisy counts below ``t = 1 + 2 log(2/δ)/ε`` (Thm 8: Δ₁ = 2
  for bounded neighbours and one record per person). For m records per person the threshold used
  is ``t = Δ∞ + b·log(2m/δ)`` with ``b = Δ₁/ε``, Δ₁ = 2m (bounded) or m (unbounded) and Δ∞ = 1
  (distinct records) or m: it equals Thm 8's at m = 1 and bounds the probability that any of a
  person's ≤ m private cells survives by δ (union bound on the Laplace tail). The noise is the
  discrete Laplace (geometric mechanism, integer counts) by default, or continuous Laplace
  rounded to integers (post-processing) with ``discrete=False``. Both b and t are rounded up.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from hierdp.errors import HierdpError
from hierdp.hierarchy.topdown_tree import TopDownTree, as_topdown_tree
from hierdp.mechanisms.base import Mechanism, MechanismParameterError, refuse_solver
from hierdp.privacy import samplers
from hierdp.privacy.conversions import check_delta, check_epsilon
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.calibration import exact, gaussian_sigma2, laplace_scale
from hierdp.privacy.noise import DiscreteGaussianNoise, GeometricNoise
from hierdp.privacy.unit import PrivacyUnit, check_contributions
from hierdp.release import ReleaseLevel, TreeRelease

__all__ = ["SH", "StabilityHistogram", "UniverseTooLarge", "VanillaGauss", "sh_threshold"]


class UniverseTooLarge(HierdpError, ValueError):
    """The tree's universe is too large to materialize for a universe-wide baseline."""


def _aggregate_up(tree: TopDownTree, leaf_keys: np.ndarray, leaf_values: np.ndarray) -> list[ReleaseLevel]:
    """Levels 0..T from leaf keys/values by summing into parents (``tree.parent_of``), exactly."""
    T = tree.n_levels - 1
    levels: list[ReleaseLevel] = [None] * (T + 1)  # type: ignore[list-item]
    keys, vals = np.asarray(leaf_keys, np.int64), np.asarray(leaf_values, np.int64)
    for L in range(T, 0, -1):
        pk = tree.parent_of(L, keys)
        uk, inv = np.unique(pk, return_inverse=True)
        inv = inv.ravel()
        levels[L] = ReleaseLevel(keys, inv.astype(np.int64), vals)
        sums = np.zeros(uk.size, np.int64)
        np.add.at(sums, inv, vals)
        keys, vals = uk.astype(np.int64), sums
    if keys.size == 0:
        keys, vals = np.array([tree.root_key], np.int64), np.array([0], np.int64)
    levels[0] = ReleaseLevel(keys, np.full(keys.size, -1, np.int64), vals)
    return levels


def _segment_sum(groups: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, np.int64)
    np.add.at(out, groups, values.astype(np.int64))
    return out


class VanillaGauss(Mechanism):
    """Discrete Gaussian noise on every leaf of the universe, aggregated up (paper 000 §5).

    Args:
        epsilon, delta / rho / budget: the budget, as for :class:`~hierdp.mechanisms.InfTDA`
            (the whole ρ goes to the leaf histogram).
        bounded, contributions, distinct / unit: the privacy unit (sensitivity as for the finest
            level of InfTDA).
        max_universe: refuse trees with more potential leaves than this.
        clamp: set negative leaves to 0 and re-sum the parents (post-processing; default False:
            the paper's baseline, raw noisy sums that may be negative).
        secure, conversion: as for InfTDA.

    The release keeps every node whose value is non-zero or that has a released descendant
    (so parent links stay intact).
    """

    name = "VanillaGauss"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, rho: float | None = None,
                 budget: Budget | None = None, bounded: bool = True, contributions: int = 1, distinct: bool = False,
                 max_universe: float = 5e7, secure: bool = False, conversion: str = "analytic", clamp: bool = False,
                 unit: PrivacyUnit | None = None, solver: Any = None, solver_options: Any = None) -> None:
        refuse_solver(self.name, solver, solver_options, "it adds noise to the leaves and sums them up")
        self.resolve_privacy(epsilon, delta, rho, budget, unit=unit, bounded=bounded, contributions=contributions,
                             distinct=distinct, conversion=conversion, calculus="zcdp", secure=secure)
        self.sens_sq = self.unit.l2_sensitivity_sq(finest=True)
        if isinstance(max_universe, bool) or not isinstance(max_universe, (int, float)) or not max_universe > 0:
            raise MechanismParameterError(f"max_universe must be a positive number, got {max_universe!r}")
        self.max_universe = float(max_universe)
        if type(clamp).__name__ not in ("bool", "bool_"):
            raise MechanismParameterError(f"clamp must be True or False, got {clamp!r}")
        self.clamp = bool(clamp)
        self.sigma2 = gaussian_sigma2(exact(self.spec.budget), self.sens_sq,
                                      culprit=f"epsilon={self.spec.epsilon_target!r}" if self.spec.epsilon_target
                                      else f"rho={self.spec.rho!r}")

    def params(self) -> dict[str, Any]:
        return {**super().params(), "sigma2": self.sigma2, "clamp": self.clamp, "max_universe": self.max_universe}

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False) -> TreeRelease:
        """Noise every potential leaf, aggregate up; see the class docstring."""
        tree = as_topdown_tree(data)
        T = tree.n_levels - 1
        if T < 1:
            raise MechanismParameterError("the tree has no level below the root: nothing to release")
        universe = tree.level_size(T)
        if universe > self.max_universe:
            raise UniverseTooLarge(
                f"VanillaGauss needs noise on all {universe:,} potential leaves, more than max_universe="
                f"{self.max_universe:,.0f}; use InfTDA or SH (or raise max_universe if memory allows)")
        ctx = self.start(data, seed=seed, rng=rng, secure=secure, accountant=accountant)
        sigma2 = self.sigma2
        label = f"level {T} ({tree.level_names[T]}) all leaves"
        noise = DiscreteGaussianNoise()
        ctx.spend_noise(self.spec.budget, label, noise, sigma2, self.sens_sq, leaves=int(universe))
        t0 = time.perf_counter()
        # materialize the universe top down: keys and group structure of every level
        keys = [np.array([tree.root_key], np.int64)]
        groups = [np.full(1, -1, np.int64)]
        for L in range(T):
            ck, off, _ = tree.expand(L, keys[-1])
            keys.append(ck)
            groups.append(np.repeat(np.arange(keys[-2].size, dtype=np.int64), np.diff(off)))
        rng_ = ctx.rng
        vals: list[Any] = [None] * (T + 1)
        leaf = tree.counts(T, keys[T]) + noise.draw(sigma2, keys[T].size, rng_)
        vals[T] = np.maximum(leaf, 0) if self.clamp else leaf
        # leaves above level T (uneven plain hierarchies) are noised too (the same histogram of leaves)
        for L in range(T - 1, -1, -1):
            v = _segment_sum(groups[L + 1], vals[L + 1], keys[L].size)
            has = np.bincount(groups[L + 1], minlength=keys[L].size) > 0
            if (~has).any():
                idx = np.flatnonzero(~has)
                own = tree.counts(L, keys[L][idx]) + noise.draw(sigma2, idx.size, rng_)
                v[idx] = np.maximum(own, 0) if self.clamp else own
            vals[L] = v
        # keep non-zero nodes and the ancestors of kept nodes
        keep: list[Any] = [None] * (T + 1)
        keep[T] = vals[T] != 0
        for L in range(T - 1, -1, -1):
            kids = np.bincount(groups[L + 1][keep[L + 1]], minlength=keys[L].size) > 0
            keep[L] = (vals[L] != 0) | kids
        keep[0][:] = True
        levels = []
        newpos_prev = np.zeros(0, np.int64)
        for L in range(T + 1):
            k = keep[L]
            par = np.full(int(k.sum()), -1, np.int64) if L == 0 else newpos_prev[groups[L][k]]
            levels.append(ReleaseLevel(keys[L][k], par, vals[L][k]))
            newpos_prev = np.cumsum(k) - 1
        elapsed = time.perf_counter() - t0
        notes = (("negative leaves set to 0 and parents re-summed (post-processing)",) if self.clamp else
                 ("values are raw noisy sums of the leaves: they can be negative, and the released total is noisy "
                  "(n is not used)",))
        acc = ctx.accounting(notes=notes, details={"l2_sensitivity": math.sqrt(self.sens_sq)})
        timings = [0.0] * T + [elapsed]
        stats = [{"nodes": int(k.size)} for k in keys]
        return TreeRelease(levels, list(tree.level_names), self.name, None, acc, timings, stats,
                           namer=getattr(tree, "namer", None),
                           params=ctx.params(universe=universe),
                           nonnegative=self.clamp)


def sh_threshold(epsilon: float, delta: float, *, bounded: bool = True, contributions: int = 1,
                 distinct: bool = False) -> tuple[float, float]:
    """``(scale, threshold)`` of the stability histogram (see module docstring), both rounded up.

    For bounded neighbours and one record per person: scale 2/ε and threshold 1 + 2 log(2/δ)/ε
    (paper 000, Thm 8).
    """
    eps, d = check_epsilon(epsilon), check_delta(delta)
    unit = PrivacyUnit(bounded, check_contributions(contributions), distinct)
    scale = laplace_scale(exact(eps), unit.l1_sensitivity(), culprit=f"epsilon={epsilon!r}")
    m = unit.contributions
    threshold = unit.linf_sensitivity(finest=True) + scale * math.log(2.0 * m / d)
    return scale, math.nextafter(threshold, math.inf)  # a larger threshold is the safe direction


class StabilityHistogram(Mechanism):
    """The stability-based histogram SH (paper 000, Thm 8) on the tree's leaves, aggregated up.

    Args:
        epsilon, delta: the (ε, δ)-DP guarantee (pure Laplace noise plus thresholding); or
            ``budget=`` an (ε, δ) :class:`~hierdp.privacy.budget.Budget`. SH has no zCDP form:
            ``rho=`` is refused.
        bounded, contributions, distinct / unit: the privacy unit.
        discrete: discrete Laplace (default) or continuous Laplace rounded.
        secure: OS randomness with exact samplers.
    """

    name = "SH"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, rho: float | None = None,
                 budget: Budget | None = None, bounded: bool = True, contributions: int = 1,
                 distinct: bool = False, discrete: bool = True, secure: bool = False,
                 unit: PrivacyUnit | None = None, solver: Any = None, solver_options: Any = None,
                 conversion: str = "analytic") -> None:
        refuse_solver(self.name, solver, solver_options, "it thresholds noisy leaves and sums them up")
        self.resolve_privacy(epsilon, delta, rho, budget, unit=unit, bounded=bounded, contributions=contributions,
                             distinct=distinct, conversion=conversion, calculus="approx", secure=secure)
        self.epsilon, self.delta = float(self.spec.budget.epsilon), float(self.spec.budget.delta)
        self.scale, self.threshold = sh_threshold(self.epsilon, self.delta, bounded=self.unit.bounded,
                                                  contributions=self.unit.contributions, distinct=self.unit.distinct)
        if type(discrete).__name__ not in ("bool", "bool_"):
            raise MechanismParameterError(f"discrete must be True or False, got {discrete!r}")
        self.discrete = bool(discrete)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "threshold": self.threshold, "scale": self.scale, "discrete": self.discrete}

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False) -> TreeRelease:
        """Noise the positive leaves, drop those below the threshold, aggregate up."""
        tree = as_topdown_tree(data)
        T = tree.n_levels - 1
        if T < 1:
            raise MechanismParameterError("the tree has no level below the root: nothing to release")
        keys, counts = tree.nonzero(T)
        if int(counts.sum()) != int(tree.root_count):
            raise MechanismParameterError(
                f"SH noises the leaves of the last level ({tree.level_names[T]!r}), which hold "
                f"{int(counts.sum())} of the {int(tree.root_count)} records: every record must "
                "sit at the last level (true of O/D trees; not of this uneven hierarchy)")
        ctx = self.start(data, seed=seed, rng=rng, secure=secure, accountant=accountant)
        t0 = time.perf_counter()
        ctx.spend(self.spec.budget, f"level {T} ({tree.level_names[T]}) positive leaves",
                  noise="discrete_laplace" if self.discrete else "laplace", scale=self.scale,
                  l1_sensitivity=self.unit.l1_sensitivity(), threshold=self.threshold)
        if self.discrete:
            noisy = counts + GeometricNoise().draw(self.scale, keys.size, ctx.rng)
            keep = noisy >= self.threshold
        else:
            real = counts + samplers.laplace(self.scale, keys.size, ctx.rng)
            keep = real >= self.threshold  # threshold the real value (Thm 8), then round
            noisy = np.rint(real).astype(np.int64)
        levels = _aggregate_up(tree, keys[keep], noisy[keep])
        elapsed = time.perf_counter() - t0
        acc = ctx.accounting(notes=("stability histogram, Thm 8: only true non-zero leaves can be released",),
                             details={"l1_sensitivity": self.unit.l1_sensitivity(), "laplace_scale": self.scale,
                                      "threshold": self.threshold}, epsilon_target=self.epsilon)
        timings = [0.0] * T + [elapsed]
        # the number of true non-zero leaves is private (one person changes it): only the released
        # count is attached. The leaf level's time grows with that number (its noise is drawn for
        # every positive leaf): timings are run diagnostics, never part of the saved release
        stats: list[dict[str, Any]] = [{} for _ in range(T)] + [{"released_leaves": int(keep.sum())}]
        return TreeRelease(levels, list(tree.level_names), self.name, None, acc, timings, stats,
                           namer=getattr(tree, "namer", None), params=ctx.params())


#: Short alias used in the paper.
SH = StabilityHistogram
