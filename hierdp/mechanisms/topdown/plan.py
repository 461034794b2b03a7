"""How a TopDown run's budget is divided: over levels, and optionally over the nodes of a level.

A :class:`BudgetPlan` gives each measured level its **ledger spend** (what that level adds to the
release's privacy loss; the spends compose exactly to at most the total) and each node the
**budget its noise is calibrated to**:

* :class:`UniformPlan` - equal parts (paper 000 Alg. 1 / 3);
* :class:`ProportionsPlan` - given proportions, one per measured level, coarse to fine (the Census
  DAS per-geolevel PLB proportions);
* :class:`GeometricPlan` - parts growing by a ratio towards the leaves (HTF eq. 17:
  ε_level ∝ 2^(level/3), which minimises the summed leaf-path variance of pure-DP counts);
* :class:`PerNodePlan` - a fraction γ of the total per node (spines: per-geounit budgets, γ = 0 for
  a bypassed node, which gets no measurement). Its privacy is the largest sum of γ along a
  root-to-leaf path (spines paper Thm 3): the caller declares those maxima per level from the
  public structure, the engine checks every visited path against them before drawing a level's
  noise, and the ledger records, per level, the increase of the maximum.

Budgets are split exactly (rational arithmetic), so the parts never add up to more than the total.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from fractions import Fraction
from collections.abc import Callable, Sequence

import numpy as np

from hierdp.mechanisms.base import MechanismParameterError
from hierdp.privacy.budget import Budget
import itertools

__all__ = ["CALIBRATION_MARGIN", "BudgetPlan", "GeometricPlan", "PerNodePlan", "ProportionsPlan", "UniformPlan",
           "budget_plan", "path_sums_up"]

#: A per-node plan calibrates each node's noise to its declared fraction times this margin, 1 - 2**-40
#: (the noise scale grows by ~1e-12 relative). Fractions written as decimals are binary floats a hair
#: above the decimals: 0.1 + 0.2 + 0.3 as floats is 0.6000000000000000888, above the float 0.6. With the
#: margin such a path still spends at most its declared maximum exactly, and a path truly above it
#: (0.61 against 0.6) is refused - the check compares exactly, with no tolerance above the grant.
CALIBRATION_MARGIN = Fraction(1) - Fraction(1, 2**40)


def _largest_float_at_most(x: Fraction) -> float:
    f = float(x)
    return float(np.nextafter(f, -np.inf)) if Fraction(f) > x else f


def path_sums_up(parent_sums: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """``parent_sums + fractions`` (non-negative floats) rounded *up*: each result is the smallest
    float at or above the exact sum, so a path sum never reads below the exact rational sum of the
    fractions along the path and :meth:`PerNodePlan.check_paths` can compare it with the declared
    maximum exactly (no tolerance). Vectorized: the rounding error of every addition is recovered
    exactly (Knuth's two-sum) and the sum moved one ulp up where it was rounded down."""
    a = np.asarray(parent_sums, dtype=np.float64)
    b = np.asarray(fractions, dtype=np.float64)
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)  # exact: a + b == s + err
    return np.where(err > 0, np.nextafter(s, np.inf), s)


class BudgetPlan(ABC):
    """Divides a total over the measured levels (and, optionally, their nodes)."""

    name: str = ""

    @abstractmethod
    def level_parts(self, total: Budget, levels: Sequence[int]) -> list[Budget]:
        """One ledger spend per measured level (``levels``, coarse to fine); they compose to at most
        ``total``. Raises :class:`MechanismParameterError` if the plan does not fit the tree."""

    def node_fractions(self, level: int, keys: np.ndarray) -> np.ndarray | None:
        """Per-node budget as a fraction of the *total* (``None``: every node of the level gets the
        level's part). Zero means the node is not measured."""
        return None

    def check_paths(self, level: int, path_sums: np.ndarray) -> None:  # noqa: B027 (a no-op default hook)
        """Refuse a level whose visited root-to-node budget sums exceed what the plan declared
        (only per-node plans track paths)."""

    def describe(self, k: int) -> str:
        """One phrase for the accounting, e.g. ``"uniform over 4 parts"``."""
        return f"{self.name} over {k} parts"


class UniformPlan(BudgetPlan):
    """Equal parts over the measured levels (paper 000)."""

    name = "uniform"

    def level_parts(self, total: Budget, levels: Sequence[int]) -> list[Budget]:
        return total.split_uniform(len(levels))


def _check_proportions(props: Sequence[float], what: str) -> list[float]:
    out = []
    for i, p in enumerate(props):
        if isinstance(p, bool) or not isinstance(p, (int, float, Fraction, np.integer, np.floating)) \
                or not math.isfinite(float(p)) or p <= 0:
            raise MechanismParameterError(f"{what}[{i}] must be a finite number > 0, got {p!r}")
        out.append(p)
    if not out:
        raise MechanismParameterError(f"{what} must not be empty")
    return out


class ProportionsPlan(BudgetPlan):
    """Given proportions, one per measured level, coarse to fine; they must sum to 1 (within
    1e-12) and are then normalised exactly."""

    name = "proportions"

    def __init__(self, proportions: Sequence[float]) -> None:
        self.proportions = _check_proportions(list(proportions), "proportions")
        if abs(math.fsum(float(p) for p in self.proportions) - 1.0) > 1e-12:
            raise MechanismParameterError(
                f"proportions must sum to 1, got {math.fsum(float(p) for p in self.proportions)!r}")

    def level_parts(self, total: Budget, levels: Sequence[int]) -> list[Budget]:
        if len(levels) != len(self.proportions):
            raise MechanismParameterError(
                f"proportions: {len(self.proportions)} given but the tree has {len(levels)} measured levels "
                f"({', '.join(map(str, levels))})")
        return total.split(self.proportions)

    def describe(self, k: int) -> str:
        return "proportions " + ", ".join(f"{float(p):.4g}" for p in self.proportions)


class GeometricPlan(BudgetPlan):
    """Parts proportional to ``ratio ** level`` (level 0 = root): finer levels get more.

    The default ratio 2^(1/3) is HTF's eq. 17 (paper 002) for binary splits; ``ratio=1`` is uniform.
    The irrational weights are rounded to floats and then normalised exactly, so the parts still
    compose to exactly the total.
    """

    name = "geometric"

    def __init__(self, ratio: float = 2.0 ** (1.0 / 3.0)) -> None:
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or ratio <= 0:
            raise MechanismParameterError(f"ratio must be a finite number > 0, got {ratio!r}")
        self.ratio = float(ratio)

    def level_parts(self, total: Budget, levels: Sequence[int]) -> list[Budget]:
        w = [self.ratio ** (lev - levels[0]) for lev in levels]
        s = math.fsum(w)
        return total.split([x / s for x in w])  # normalised exactly by split

    def describe(self, k: int) -> str:
        return f"geometric over {k} parts (ratio {self.ratio:.6g} per level)"


class PerNodePlan(BudgetPlan):
    """A fraction of the total per node (see the module docstring).

    Args:
        fractions: ``fractions(level, keys) -> array`` of each node's budget as a fraction of the
            total, in [0, 1]; 0 = not measured (the node's value then comes from consistency, so the
            level solver must accept nodes without a target).
        max_path_sums: per level (0 = root), the largest sum of fractions along any root-to-node
            path of the *public* structure down to that level; non-decreasing, at most 1. The
            engine refuses a level where a visited path exceeds it.
    """

    name = "per-node"

    def __init__(self, fractions: Callable[[int, np.ndarray], np.ndarray], max_path_sums: Sequence[float]) -> None:
        if not callable(fractions):
            raise MechanismParameterError("fractions must be a callable (level, keys) -> array")
        sums = [float(x) for x in max_path_sums]
        if not sums or any(not math.isfinite(x) or x < 0 for x in sums):
            raise MechanismParameterError("max_path_sums must be finite and >= 0, one per level")
        if any(b < a for a, b in itertools.pairwise(sums)):
            raise MechanismParameterError("max_path_sums must be non-decreasing (a path sum only grows)")
        if sums[-1] > 1.0:
            raise MechanismParameterError(f"max_path_sums must end at most at 1 (the whole budget), got {sums[-1]!r}")
        self.fractions = fractions
        self.max_path_sums = sums
        # the largest float path sum each level accepts: sum * CALIBRATION_MARGIN <= max exactly
        self._limits = [_largest_float_at_most(Fraction(x) / CALIBRATION_MARGIN) for x in sums]

    @staticmethod
    def calibration_fraction(fraction: float) -> Fraction:
        """The fraction of the total a node's noise is calibrated to: its declared ``fraction`` times
        :data:`CALIBRATION_MARGIN` (exact)."""
        return Fraction(fraction) * CALIBRATION_MARGIN

    def level_parts(self, total: Budget, levels: Sequence[int]) -> list[Budget]:
        if len(self.max_path_sums) <= max(levels):
            raise MechanismParameterError(f"max_path_sums has {len(self.max_path_sums)} levels; the tree needs "
                                          f"{max(levels) + 1}")
        parts, prev = [], Fraction(0)
        for lev in levels:
            cur = Fraction(self.max_path_sums[lev])
            parts.append(total._scaled(cur - prev) if cur > prev else Budget._zero(total.calculus))
            prev = cur
        return parts

    def node_fractions(self, level: int, keys: np.ndarray) -> np.ndarray:
        f = np.asarray(self.fractions(level, np.asarray(keys)), dtype=np.float64)
        if f.shape != np.shape(keys):
            raise MechanismParameterError(
                f"fractions({level}, keys) returned shape {f.shape}, expected {np.shape(keys)}")
        if f.size and (np.any(~np.isfinite(f)) or np.any(f < 0) or np.any(f > 1)):
            raise MechanismParameterError(f"fractions at level {level} must be in [0, 1]")
        return f

    def check_paths(self, level: int, path_sums: np.ndarray) -> None:
        """Refuse a visited path above the declared maximum, compared exactly: the sums are upper
        bounds of the exact ones (:func:`path_sums_up`) and every node is calibrated to its fraction
        times :data:`CALIBRATION_MARGIN`, so an accepted path spends at most its declared maximum in
        rational arithmetic (no tolerance above the grant)."""
        if path_sums.size and float(path_sums.max()) > self._limits[level]:
            raise MechanismParameterError(
                f"a root-to-node path at level {level} sums to {float(path_sums.max()):.6g} of the budget, above the "
                f"declared max_path_sums[{level}] = {self.max_path_sums[level]:.6g}")

    def describe(self, k: int) -> str:
        return f"per node (max path sum {self.max_path_sums[-1]:.6g} of the total)"


def budget_plan(plan: str | Sequence[float] | BudgetPlan) -> BudgetPlan:
    """A :class:`BudgetPlan` from ``"uniform"``, ``"geometric"``, a sequence of proportions, or an
    instance."""
    if isinstance(plan, BudgetPlan):
        return plan
    if plan == "uniform":
        return UniformPlan()
    if plan == "geometric":
        return GeometricPlan()
    if isinstance(plan, str):
        raise MechanismParameterError(f"plan must be 'uniform', 'geometric', a list of proportions or a BudgetPlan, "
                                      f"got {plan!r}")
    return ProportionsPlan(plan)
