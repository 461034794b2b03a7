"""What the spatial mechanisms share: input coercion, parameter checks, exact spends, noise and the
release/accounting assembly."""

from __future__ import annotations

import math
import time
from fractions import Fraction
from numbers import Integral, Real
from typing import Any

import numpy as np

from hierdp.hierarchy.spatial import SpatialDataError, SpatialGrid
from hierdp.mechanisms.base import Mechanism, MechanismParameterError, RunContext
from hierdp.privacy.budget import Budget
from hierdp.privacy.calibration import laplace_scale
from hierdp.privacy.noise import GeometricNoise
from hierdp.release.spatial import SpatialRelease, SpatialTree

__all__ = [
    "GEOMETRIC",
    "SpatialMechanism",
    "Timer",
    "as_grid",
    "check_fraction_param",
    "check_positive_int",
    "discrete_laplace_variance",
    "exact_fraction",
    "floor_log2",
    "pure",
    "solver_options_with",
]


#: the spatial mechanisms' noise: geometric (discrete Laplace), pure ε-DP
GEOMETRIC = GeometricNoise()


def as_grid(data: Any) -> Any:
    """The spatial input: a :class:`SpatialGrid` (or anything with ``counts``, ``domain`` and
    ``prefix``, e.g. a wrapper), or a 2-D integer matrix (its grid is a declared domain)."""
    if isinstance(data, SpatialGrid) or all(hasattr(data, a) for a in ("counts", "domain", "prefix")):
        return data
    if isinstance(data, np.ndarray) and data.ndim == 2:
        return SpatialGrid.from_counts(data)
    raise SpatialDataError(f"spatial mechanisms take a hierdp.hierarchy.spatial.SpatialGrid (or a 2-D count matrix), "
                           f"got {type(data).__name__}; build one with SpatialGrid.from_points(x, y, box=...)")


def pure(eps: Fraction) -> Budget:
    """An exact pure-DP budget (zero allowed, for bookkeeping)."""
    return Budget("pure", epsilon=eps)


def exact_fraction(value: Any, name: str, *, allow_zero: bool = False) -> Fraction:
    """A finite, positive (or non-negative) number as its exact Fraction; the error names ``name``."""
    if isinstance(value, bool) or not isinstance(value, (Real, Fraction, np.integer, np.floating)):
        raise MechanismParameterError(f"{name} must be a number, got {value!r}")
    f = float(value)
    if not math.isfinite(f) or f < 0 or (f == 0 and not allow_zero):
        raise MechanismParameterError(f"{name} must be finite and {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    if isinstance(value, (Fraction, Integral, np.integer)):
        return Fraction(int(value)) if isinstance(value, np.integer) else Fraction(value)
    return Fraction(f)


def check_positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """An int ``>= minimum`` (integral floats accepted), else a clear error."""
    if isinstance(value, bool) or not isinstance(value, (Integral, Real)):
        raise MechanismParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    f = float(value)
    if not (math.isfinite(f) and f.is_integer() and f >= minimum):
        raise MechanismParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(f)


def check_fraction_param(value: Any, name: str, lo: float, hi: float) -> float:
    """A float strictly inside ``(lo, hi)``."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)) \
            or not lo < float(value) < hi:
        raise MechanismParameterError(f"{name} must be a number in ({lo}, {hi}), got {value!r}")
    return float(value)


def floor_log2(x: Fraction) -> int:
    """``floor(log2(x))`` of a positive rational, exactly."""
    if x <= 0:
        raise ValueError("floor_log2 needs x > 0")
    p, q = x.numerator, x.denominator
    k = p.bit_length() - q.bit_length()
    # now 2^(k-1) < p/q < 2^(k+1): settle which side of 2^k
    if k >= 0:
        if p < q << k:
            k -= 1
    elif (p << -k) < q:
        k -= 1
    return k


def discrete_laplace_variance(scale: float | np.ndarray) -> np.ndarray:
    """Variance of the discrete Laplace law with ``P(x) ∝ exp(-|x|/scale)``: ``2q / (1 - q)^2``,
    ``q = exp(-1/scale)`` (about ``2 scale^2 - 1/6`` for large scales)."""
    s = np.asarray(scale, dtype=np.float64)
    q = np.exp(-1.0 / s)
    return 2.0 * q / (-np.expm1(-1.0 / s)) ** 2


def solver_options_with(solver_options: Any, time_limit: Any) -> dict[str, Any]:
    """The consistency solver's options with ``time_limit`` (seconds per solve) merged in."""
    options = dict(solver_options or {})
    if time_limit is not None:
        if "time_limit" in options:
            raise MechanismParameterError("give time_limit= or solver_options['time_limit'], not both")
        if isinstance(time_limit, bool) or not isinstance(time_limit, Real) or not float(time_limit) > 0:
            raise MechanismParameterError(f"time_limit must be > 0 seconds, got {time_limit!r}")
        options["time_limit"] = float(time_limit)
    return options


class Timer:
    """Seconds per phase (``with timer("phase"): ...`` adds to ``timer.seconds["phase"]``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._phase = ""
        self._t0 = 0.0

    def __call__(self, phase: str) -> Timer:
        self._phase = phase
        return self

    def __enter__(self) -> Timer:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds[self._phase] = self.seconds.get(self._phase, 0.0) + time.perf_counter() - self._t0


class SpatialMechanism(Mechanism):
    """Shared base of the spatial mechanisms: pure ε-DP with discrete Laplace (geometric) noise on
    integer counts; unbounded (add/remove) neighbours by default, as in paper 002 (Def. 1), one
    location point per record (``contributions=m`` scales every sensitivity)."""

    def params(self) -> dict[str, Any]:
        return {**super().params(), **self.constraint_params()}

    def _resolve(self, epsilon: Any, delta: Any, budget: Any, unit: Any, bounded: Any, contributions: Any,
                 secure: Any, distinct: Any = False, conversion: Any = "analytic") -> None:
        self.resolve_privacy(epsilon, delta, None, budget, unit=unit, bounded=bounded, contributions=contributions,
                             distinct=distinct, conversion=conversion, calculus="pure", secure=secure)
        if self.unit.distinct:
            raise MechanismParameterError(f"{self.name}: distinct records apply to hierarchies, not to point grids; "
                                          "use distinct=False")
        self.eps_total: Fraction = self.spec.budget.exact_parameters["epsilon"]

    @property
    def count_sensitivity(self) -> int:
        """L1 sensitivity of a vector of disjoint cell/node counts: m (unbounded) or 2m (bounded)."""
        return self.unit.l1_sensitivity()

    def count_noise(self, ctx: RunContext, counts: np.ndarray, eps: Fraction, label: str | None = None,
                    **details: Any) -> np.ndarray:
        """``counts + DLap(Δ/eps)`` with the scale rounded up (exact check); records a spend first when
        ``label`` is given."""
        scale = laplace_scale(eps, self.count_sensitivity, culprit=f"{self.name} budget part")
        if label is None:  # the spend was recorded by the caller
            return np.asarray(counts, dtype=np.int64) + GEOMETRIC.draw(scale, np.shape(counts), ctx.rng)
        return ctx.measure(counts, pure(eps), label, GEOMETRIC, sensitivity=self.count_sensitivity, parameter=scale,
                           **details)

    def solve_consistency(self, ctx: RunContext, parent: np.ndarray, noisy: np.ndarray, variances: np.ndarray,
                          solver: Any, cross_check: Any, options: dict[str, Any],
                          constraints: Any = None) -> tuple[np.ndarray, Any]:
        """Hay's consistency over a noisy tree through the solver registry
        (:func:`~hierdp.mechanisms.spatial.consistency.consistent_tree`), or, with the tree's public
        constraints (``constraints``: a :class:`~hierdp.mechanisms.spatial.constraints.TreeConstraints`),
        :func:`~hierdp.mechanisms.spatial.consistency.constrained_tree`.

        Raises:
            ReleaseAborted: the solve failed after the noise was drawn (the spends attached).
        """
        from hierdp.mechanisms.spatial.consistency import consistent_tree, constrained_tree

        try:
            if constraints is not None:
                return constrained_tree(parent, noisy, variances, constraints, solver=solver, cross_check=cross_check,
                                        **options)
            return consistent_tree(parent, noisy, variances, solver=solver, cross_check=cross_check, **options)
        except Exception as exc:
            raise ctx.aborted(exc, where="in its consistency step", level_name="consistency") from exc

    # -- public constraints (docs/constraints.md, "Spatial") ------------------------------------------
    def _set_constraints(self, constraints: Any, consistency: Any) -> None:
        """Keep the constraint set (a file is read now); it needs the consistency step."""
        from hierdp.constraints import ConstraintError, as_constraints

        try:
            self.constraints = as_constraints(constraints)
        except (TypeError, ConstraintError) as exc:
            raise MechanismParameterError(str(exc)) from None
        if self.constraints is not None and consistency is None:
            raise MechanismParameterError(f"{self.name}: constraints= are honoured by the consistency step; pass "
                                          "consistency='gls'")

    def bind_constraints(self, grid: Any) -> Any:
        """The constraint set bound to the grid and checked before any noise (None without one).

        Raises:
            ConstraintError / ConstraintsInfeasible: a reference that is not a rectangle of the grid,
                a set that cannot hold on it.
        """
        if getattr(self, "constraints", None) is None:
            return None
        from hierdp.mechanisms.spatial.constraints import SpatialConstraints

        return SpatialConstraints.bind(self.constraints, grid.domain)

    def constraints_on_tree(self, ctx: RunContext, bound: Any, parent: np.ndarray, rects: np.ndarray) -> Any:
        """``bound`` over a tree's nodes (None without constraints). A tree drawn with private splits
        is known only after some budget is spent: a failure then stops the release with the spends.

        Raises:
            ConstraintError: before any spend (a public tree). ReleaseAborted: after one.
        """
        if bound is None:
            return None
        from hierdp.constraints import ConstraintError

        try:
            return bound.on_tree(parent, rects)
        except ConstraintError as exc:
            if not ctx.spends:
                raise
            raise ctx.aborted(exc, where="binding its constraints to the partition it drew",
                              level_name="constraints") from exc

    def constraint_accounting(self, bound: Any, details: dict[str, Any] | None,
                              notes: tuple[str, ...]) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
        """``details`` and ``notes`` with the constraints stated (the TopDown family's code path)."""
        if bound is None:
            return details, notes
        from hierdp.constraints.report import accounting_parts

        stated, more = accounting_parts(bound)
        return {**(details or {}), "constraints": stated}, (*notes, *more)

    def constraint_params(self) -> dict[str, Any]:
        """The set's SHA-256 for the release's parameters."""
        c = getattr(self, "constraints", None)
        return {} if c is None else {"constraints": c.digest()}

    def scale_for(self, eps: Fraction, sensitivity: Any = None) -> float:
        """The discrete Laplace scale for ``eps`` (sensitivity: the count sensitivity by default)."""
        sens = self.count_sensitivity if sensitivity is None else sensitivity
        return laplace_scale(eps, sens, culprit=f"{self.name} budget part")

    def finish(self, ctx: RunContext, grid: Any, rects: np.ndarray, values: np.ndarray, *, timer: Timer,
               notes: tuple[str, ...] = (), details: dict[str, Any] | None = None,
               tree: SpatialTree | None = None, solver: str | None = None,
               assumptions: tuple[str, ...] = ()) -> SpatialRelease:
        """Assemble the release and its accounting (the spends must compose to the total)."""
        acc = ctx.accounting(assumptions=assumptions, notes=notes, details=details)
        if acc.spent != acc.total:  # every mechanism here spends its whole budget, exactly
            raise AssertionError(f"{self.name}: spends compose to {acc.spent}, not {acc.total}")
        return SpatialRelease(domain=grid.domain, rects=rects, values=values, accounting=acc, mechanism=self.name,
                              params=ctx.params(), timings=dict(timer.seconds), tree=tree,
                              details=dict(details or {}), solver=solver)
